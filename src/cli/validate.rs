//! `weir validate PATH`: checks definitions and prints each graph, nodes in
//! topological order with their rules, pools and targets.
//!
//! A bad file is reported whole: every fault on its own line of stderr
//! (`weir: definition FILE:LINE: what`), so that one pass fixes them all,
//! and the exit code is 2. The checks are those of `weir run`, including
//! the pools and tasks its engine has, so what validates also adopts.

use std::path::Path;

use super::failure::Failure;
use super::output::out;
use crate::definition;
use crate::exit::EXIT_BAD_INPUT;

/// How a time-partitioned graph names its windows, in its zone: the
/// newest closed window with its instants, and the next cron firing with
/// the window it starts. What users type back (`weir status`, backfills).
fn window_lines(d: &weir_core::graph::GraphDef, now_ms: u64) -> Vec<String> {
    use weir_core::partition::{Partition, Partitioning};
    if matches!(d.partitioning, Partitioning::None | Partitioning::Keyed) {
        return Vec::new();
    }
    let z = d.zone();
    let mut out = vec![format!(
        "  timezone {} (tz database {})",
        z.name(),
        weir_core::zone::TZDB_VERSION
    )];
    let newest = Partition::of_time(d.partitioning, now_ms, z).and_then(|w| w.prev(z));
    if let Some(w) = newest {
        if let (Some(s), Some(e)) = (w.start_ms(z), w.end_ms(z)) {
            out.push(format!(
                "  windows are named like {w}: {} .. {}",
                z.rfc3339(s),
                z.rfc3339(e)
            ));
        }
    }
    if let Some(s) = d.schedule() {
        if let Some(at) = s.next_after(now_ms) {
            let starts: Vec<String> = s
                .windows_closed_by(d.partitioning, at)
                .iter()
                .map(ToString::to_string)
                .collect();
            out.push(format!(
                "  cron fires next at {}, starting {}",
                z.rfc3339(at),
                if starts.is_empty() {
                    "no window".to_string()
                } else {
                    starts.join(", ")
                }
            ));
        }
    }
    out
}

/// Runs the command.
pub fn run(path: &Path) -> Result<u8, Failure> {
    let defs = match definition::load(path) {
        Ok(defs) => defs,
        Err(errors) => {
            for e in &errors.0 {
                eprintln!("weir: {e}");
            }
            return Ok(EXIT_BAD_INPUT);
        }
    };
    for loaded in &defs.graphs {
        let g = &loaded.graph;
        let d = g.def();
        out(&format!("graph {} ({})", g.name(), loaded.file.display()));
        out(&format!("  definition {}", g.hash()));
        let mut line = format!("  partitioning {:?}", d.partitioning).to_lowercase();
        if let Some(c) = &d.cron {
            line.push_str(&format!(", cron \"{c}\", catchup {}", d.catchup));
        }
        if d.keyed.is_some() {
            line.push_str(", keyed");
        }
        // The settings that change when a run may start, end or be late,
        // where they are set: what the file says, read back.
        let mut timeout = d
            .run_timeout_ms
            .map(|ms| format!(", run_timeout {}", weir_core::duration::human_ms(ms)))
            .unwrap_or_default();
        if let Some(ms) = d.sla_ms {
            timeout.push_str(&format!(", sla {}", weir_core::duration::human_ms(ms)));
        }
        out(&format!(
            "{line}, max_active_runs {}, retention {}{timeout}",
            d.max_active_runs,
            weir_core::duration::human_ms(d.retention_ms)
        ));
        for l in window_lines(d, super::show::now_ms()) {
            out(&l);
        }
        if !d.trigger_assets.is_empty() {
            let assets: Vec<&str> = d.trigger_assets.iter().map(|a| a.as_str()).collect();
            out(&format!("  starts on assets {}", assets.join(", ")));
        }
        if !d.params.is_empty() {
            let params: Vec<String> = d.params.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
            out(&format!("  params {}", params.join(", ")));
        }
        for (field, spec) in [
            ("on_failure", &d.on_failure),
            ("on_success", &d.on_success),
            ("on_sla_miss", &d.on_sla_miss),
        ] {
            if let Some(argv) = spec.as_ref().and_then(|s| s.config.get("argv")) {
                out(&format!("  {field} {argv}"));
            }
        }
        for &i in g.topological_order() {
            let n = g.node_at(i);
            let ups: Vec<&str> = n.upstreams.iter().map(|u| u.as_str()).collect();
            let mut priority = if n.priority == 0 {
                String::new()
            } else {
                format!(" priority {}", n.priority)
            };
            match n.map.as_ref().map(|m| (&m.over, m.max_active_members)) {
                Some((weir_core::mapped::MapSource::Upstream(u), k)) => {
                    priority.push_str(&format!(" mapped over {u} ({k} at once)"))
                }
                Some((weir_core::mapped::MapSource::Items(items), k)) => {
                    priority.push_str(&format!(" mapped over {} items ({k} at once)", items.len()))
                }
                None => {}
            }
            if let Some(s) = &n.sensor {
                priority.push_str(&format!(
                    " sensor every {} ms for {} ms, then {}",
                    s.every_ms,
                    s.timeout_ms,
                    format!("{:?}", s.on_timeout).to_lowercase()
                ));
            }
            if n.depends_on_past {
                priority.push_str(" depends_on_past");
            }
            if n.wait_for_downstream {
                priority.push_str(" wait_for_downstream");
            }
            if let Some(ms) = n.sla_ms {
                priority.push_str(&format!(" sla {}", weir_core::duration::human_ms(ms)));
            }
            if !n.produces.is_empty() {
                let assets: Vec<&str> = n.produces.iter().map(|a| a.as_str()).collect();
                priority.push_str(&format!(" produces {}", assets.join(", ")));
            }
            out(&format!(
                "  {:<24} rule {:<28} pool {:<10} target {:<12} task {:<10} upstreams [{}]{priority}",
                n.name.as_str(),
                n.trigger_rule.to_string(),
                n.pool.as_str(),
                n.target.as_ref().map_or("-", |t| t.as_str()),
                n.task.task.as_str(),
                ups.join(", ")
            ));
        }
    }
    out(&format!("{} graph(s) valid", defs.graphs.len()));
    Ok(0)
}
