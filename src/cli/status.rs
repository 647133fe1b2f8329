//! `weir status [--data DIR] [GRAPH [PARTITION]]`: runs and their nodes,
//! read from the store while no engine has it open.

use std::path::Path;

use weir_actors::scheduler::records::GRAPH_PREFIX;
use weir_actors::scheduler::view;
use weir_core::partition::Partition;

use super::Failure;

fn ms(t: Option<u64>) -> String {
    t.map_or("-".into(), fmt_time)
}

/// An instant as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn fmt_time(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Runs the command.
pub fn run(data: &Path, graph: Option<&str>, partition: Option<&str>) -> Result<u8, Failure> {
    let (store, _) = super::inspect::open(data)?;
    let graphs: Vec<String> = match graph {
        Some(g) => vec![g.to_string()],
        None => store
            .scan_keys(GRAPH_PREFIX)
            .map_err(|e| Failure::store(e.to_string()))?
            .into_iter()
            .map(|k| k[GRAPH_PREFIX.len()..].to_string())
            .collect(),
    };
    if graphs.is_empty() {
        println!("no graph adopted in {}", data.display());
        return Ok(0);
    }
    if let (Some(g), Some(p)) = (graph, partition) {
        let p: Partition = p
            .parse()
            .map_err(|e| Failure::input(format!("partition {p:?}: {e}")))?;
        let Some(v) = view::graph_run(&store, g, &p).map_err(|e| Failure::store(e.to_string()))?
        else {
            return Err(Failure::input(format!(
                "graph {g:?} has no run for partition {p}"
            )));
        };
        println!(
            "graph {} partition {}: {} (definition {})",
            v.graph,
            v.partition,
            v.state,
            &v.definition[..12.min(v.definition.len())]
        );
        println!(
            "  requested {}  settled {}",
            fmt_time(v.requested_at_ms),
            ms(v.settled_at_ms)
        );
        println!(
            "  {:<24} {:<16} {:>5} {:>8} {:<19} {:<19} error",
            "node", "state", "rerun", "attempts", "started", "finished"
        );
        for n in &v.nodes {
            let err = n
                .error
                .as_deref()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("");
            println!(
                "  {:<24} {:<16} {:>5} {:>8} {:<19} {:<19} {}",
                n.node,
                n.state,
                n.rerun,
                n.attempts,
                ms(n.started_ms),
                ms(n.finished_ms),
                err
            );
        }
        return Ok(0);
    }
    for g in graphs {
        let runs = view::list_runs(&store, &g, None).map_err(|e| Failure::store(e.to_string()))?;
        println!("graph {g}: {} run(s)", runs.len());
        println!(
            "  {:<40} {:<10} {:<19} {:<19}",
            "partition", "state", "requested", "settled"
        );
        for r in runs {
            println!(
                "  {:<40} {:<10} {:<19} {:<19}",
                r.partition,
                r.record.state.to_string(),
                fmt_time(r.record.requested_at_ms),
                ms(r.record.settled_at_ms)
            );
        }
    }
    Ok(0)
}
