//! The graph-level checks of a definition file: its name, partitioning,
//! cron and start, retention, params, pools, targets (breaker settings),
//! keyed settings and notifications, each fault with its line; and the
//! conversion of the whole file into a `GraphDef`.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::Path;

use weir_core::breaker::BreakerSettings;
use weir_core::graph::{GraphDef, TaskSpec, POOL_DEFAULT};
use weir_core::keyed::{InventorySource, KeyedSpec};
use weir_core::names::Name;
use weir_core::partition::Partitioning;
use weir_core::schedule::{Debounce, ScheduleSettings};
use weir_core::template::{Context, Place};

use crate::task::notify::{NotifyConfig, NOTIFY_TASK};

use super::checks::{check_template, dur, Fault, Known, UPSTREAMS_SCAN_MAX};
use super::shapes::{GraphFile, KeyedFile, TargetFile};
use super::spans::Lines;

pub(super) type Parts = (
    GraphDef,
    BTreeMap<String, u32>,
    BTreeMap<String, BreakerSettings>,
);

/// A graph's notification (`on_failure`, `on_success`): a command, run in
/// the definition's folder, whose templates may name the run only.
pub(super) fn notify_spec(
    field: &str,
    argv: &[String],
    dir: &Path,
    def: &GraphDef,
) -> Result<TaskSpec, Vec<String>> {
    let mut faults = Vec::new();
    if argv.is_empty() {
        faults.push(format!(
            "field {field}: the argv is empty: give at least the program"
        ));
    }
    if argv.iter().any(|a| a.contains('\0')) {
        faults.push(format!("field {field}: an argument holds a NUL byte"));
    }
    let nodes = |_: &str| false;
    let ctx = Context {
        node: None,
        upstreams: &[],
        nodes: &nodes,
        params: &def.params,
        partitioning: def.partitioning,
        mapped: false,
    };
    for (i, a) in argv.iter().enumerate() {
        for what in check_template(a, Place::Command, &ctx) {
            faults.push(format!("field {field}[{i}]: {what}"));
        }
    }
    if !faults.is_empty() {
        return Err(faults);
    }
    let config = NotifyConfig {
        argv: argv.to_vec(),
        cwd: dir.to_string_lossy().into_owned(),
    };
    let config = serde_json::to_value(&config).map_err(|e| vec![format!("field {field}: {e}")])?;
    Ok(TaskSpec {
        task: Name::new(NOTIFY_TASK).expect("a valid name"),
        config,
    })
}

/// A `start` as ms since the epoch: a date (`2026-11-01`, the first instant
/// of that day in the graph's zone) or an RFC 3339 instant.
pub(super) fn start_ms(text: &str, zone: weir_core::zone::Zone) -> Result<u64, String> {
    let t = text.trim();
    let ms = if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        let midnight = d
            .and_hms_opt(0, 0, 0)
            .ok_or_else(|| format!("field start: {t:?} is not a date"))?;
        let at = zone
            .at_wall(midnight)
            .ok_or_else(|| format!("field start: {t:?} is before 1970 in {zone}"))?;
        i64::try_from(at).map_err(|_| format!("field start: {t:?} is out of range"))?
    } else {
        chrono::DateTime::parse_from_rfc3339(t)
            .map_err(|_| {
                format!(
                    "field start: {t:?} is neither a date (2026-11-01) nor an RFC 3339 instant (2026-11-01T06:00:00Z)"
                )
            })?
            .timestamp_millis()
    };
    u64::try_from(ms).map_err(|_| format!("field start: {t:?} is before 1970"))
}

/// A target's breaker settings, checked.
pub(super) fn target_settings(t: &str, tf: &TargetFile) -> Result<(Name, BreakerSettings), String> {
    let n = Name::new(t).map_err(|e| format!("field targets: {e}"))?;
    let mut s = BreakerSettings::default();
    if let Some(v) = tf.failures {
        s.failures_max = v;
    }
    if let Some(v) = tf.failure_rate {
        s.failure_rate = v;
    }
    if let Some(v) = tf.window {
        s.window_calls = v;
    }
    if let Some(v) = tf.min_calls {
        s.min_calls = v;
    }
    if let Some(v) = dur(&format!("targets.{t}.cooldown"), &tf.cooldown)? {
        s.cooldown_ms = v;
    }
    if let Some(v) = tf.probes {
        s.probes = v;
    }
    if let Some(v) = tf.probe_failures {
        s.probe_failures_max = v;
    }
    s.validate()
        .map_err(|e| format!("field targets.{t}: {e}"))?;
    Ok((n, s))
}

/// A keyed graph's spec; every bad field is a fault.
pub(super) fn keyed_spec(k: &KeyedFile, dir: &Path) -> Result<KeyedSpec, Vec<String>> {
    let mut faults = Vec::new();
    let inventory = match (&k.inventory.file, &k.inventory.command) {
        (Some(f), None) => InventorySource::File(dir.join(f).to_string_lossy().into_owned()),
        (None, Some(argv)) => InventorySource::Command(argv.clone()),
        _ => {
            faults.push("field keyed.inventory: give exactly one of file or command".into());
            InventorySource::Command(Vec::new())
        }
    };
    let mut spec = KeyedSpec::new(inventory);
    let mut kd = |f: &str, v: &Option<String>, set: &mut dyn FnMut(u64)| match dur(f, v) {
        Ok(Some(v)) => set(v),
        Ok(None) => {}
        Err(e) => faults.push(e),
    };
    kd("keyed.refresh", &k.refresh, &mut |v| spec.refresh_ms = v);
    let mut sched = ScheduleSettings::default();
    kd("keyed.interval", &k.interval, &mut |v| {
        sched.interval_ms = v
    });
    kd("keyed.retry_interval", &k.retry_interval, &mut |v| {
        sched.retry_interval_ms = v
    });
    kd("keyed.jitter", &k.jitter, &mut |v| sched.jitter_ms = v);
    kd("keyed.lease", &k.lease, &mut |v| spec.lease_ms = v);
    if let Some(d) = &k.debounce {
        let mut db = Debounce::default();
        kd("keyed.debounce.delay", &d.delay, &mut |v| db.delay_ms = v);
        kd("keyed.debounce.max_wait", &d.max_wait, &mut |v| {
            db.max_wait_ms = v
        });
        spec.debounce = db;
    }
    spec.schedule = sched;
    if let Some(v) = k.batch_size {
        spec.batch_size = v;
    }
    if faults.is_empty() {
        Ok(spec)
    } else {
        Err(faults)
    }
}

impl GraphFile {
    /// The line of each top-level field the file gives, by the name the
    /// graph's validation uses for it.
    pub(crate) fn field_lines(&self, lines: &Lines) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        let mut put = |field: &'static str, span: Range<usize>| {
            out.insert(field, lines.line_of(span.start));
        };
        put("name", self.name.span());
        if let Some(v) = &self.partitioning {
            put("partitioning", v.span());
        }
        if let Some(v) = &self.cron {
            put("cron", v.span());
        }
        if let Some(v) = &self.retention {
            put("retention", v.span());
        }
        if let Some(v) = &self.timezone {
            put("timezone", v.span());
        }
        if let Some(v) = &self.sla {
            put("sla", v.span());
        }
        if let Some(v) = &self.run_timeout {
            put("run_timeout", v.span());
        }
        if let Some(v) = &self.max_active_runs {
            put("max_active_runs", v.span());
        }
        if let Some(v) = &self.pools {
            put("pools", v.span());
        }
        if let Some(v) = &self.keyed {
            put("keyed", v.span());
        }
        if let Some(v) = &self.params {
            put("params", v.span());
        }
        if let Some(v) = &self.trigger {
            put("trigger", v.span());
        }
        out
    }

    /// The pools the file declares.
    pub(crate) fn declared_pools(&self) -> impl Iterator<Item = &String> {
        self.pools.iter().flat_map(|p| p.get_ref().keys())
    }

    /// Converts into the model, checking every field and every node and
    /// collecting every fault (a bad node does not hide the next one). The
    /// checks that need the whole graph (names declared twice, upstreams,
    /// pools, targets, tasks) are made here too, with the node's line; the
    /// graph's own validation then finds what is left (cycles, limits).
    pub(crate) fn into_def(
        self,
        dir: &Path,
        lines: &Lines,
        known: Known<'_>,
    ) -> Result<Parts, Vec<Fault>> {
        let mut faults: Vec<Fault> = Vec::new();
        let line = |span: Range<usize>| Some(lines.line_of(span.start));
        let gname = self.name.get_ref().clone();
        let g = |at: Option<usize>, what: String| (at, format!("graph {gname:?}: {what}"));
        let graph_name = Name::new(gname.clone()).unwrap_or_else(|e| {
            faults.push((line(self.name.span()), format!("field name: {e}")));
            Name::new("unnamed").expect("a valid name")
        });
        let mut def = GraphDef::new(graph_name, Vec::new());
        if let Some(p) = &self.partitioning {
            def.partitioning = match p.get_ref().as_str() {
                "none" => Partitioning::None,
                "hourly" => Partitioning::Hourly,
                "daily" => Partitioning::Daily,
                "weekly" => Partitioning::Weekly,
                "monthly" => Partitioning::Monthly,
                "keyed" => Partitioning::Keyed,
                other => {
                    faults.push(g(
                        line(p.span()),
                        format!("field partitioning: {other:?} is not one of none, hourly, daily, weekly, monthly, keyed"),
                    ));
                    Partitioning::None
                }
            };
        }
        if let Some(tz) = &self.timezone {
            match weir_core::zone::Zone::parse(tz.get_ref()) {
                // UTC spelled out is the default: the same definition hash
                // as no timezone at all.
                Ok(z) if z == weir_core::zone::Zone::UTC => def.timezone = None,
                Ok(z) => def.timezone = Some(z),
                Err(e) => faults.push(g(line(tz.span()), format!("field {e}"))),
            }
        }
        if let Some(c) = &self.cron {
            if let Err(e) = weir_core::cron::Schedule::parse(c.get_ref()) {
                faults.push(g(line(c.span()), format!("cron: {e}")));
            }
            def.cron = Some(c.get_ref().clone());
        }
        def.catchup = self.catchup;
        if let Some(st) = &self.start {
            match start_ms(st.get_ref(), def.zone()) {
                Ok(ms) => def.start_ms = Some(ms),
                Err(e) => faults.push(g(line(st.span()), e)),
            }
            if self.cron.is_none() {
                faults.push(g(
                    line(st.span()),
                    "field start: a start date needs a cron (it says which windows the cron starts)".into(),
                ));
            }
        }
        if let Some(r) = &self.retention {
            match dur("retention", &Some(r.get_ref().clone())) {
                Ok(Some(v)) => def.retention_ms = v,
                Ok(None) => {}
                Err(e) => faults.push(g(line(r.span()), e)),
            }
        }
        if let Some(r) = &self.run_timeout {
            match dur("run_timeout", &Some(r.get_ref().clone())) {
                Ok(Some(0)) => {
                    faults.push(g(line(r.span()), "run_timeout: must be above 0".into()))
                }
                Ok(v) => def.run_timeout_ms = v,
                Err(e) => faults.push(g(line(r.span()), e)),
            }
        }
        if let Some(m) = &self.max_active_runs {
            if *m.get_ref() == 0 {
                faults.push(g(line(m.span()), "max_active_runs: must be above 0".into()));
            } else {
                def.max_active_runs = *m.get_ref();
            }
        }
        let pools: BTreeMap<String, u32> = self
            .pools
            .as_ref()
            .map(|p| p.get_ref().clone())
            .unwrap_or_default();
        let pools_line = self.pools.as_ref().and_then(|p| line(p.span()));
        for (p, c) in &pools {
            match Name::new(p.clone()) {
                Err(e) => faults.push(g(pools_line, format!("field pools: {e}"))),
                Ok(_) if *c == 0 => faults.push(g(
                    pools_line,
                    format!("field pools.{p}: capacity must be at least 1"),
                )),
                Ok(n) => {
                    def.pools.insert(n, *c);
                }
            }
        }
        let params_line = self.params.as_ref().and_then(|p| line(p.span()));
        for (k, v) in self.params.iter().flat_map(|p| p.get_ref()) {
            let value = match v {
                toml::Value::String(s) => s.clone(),
                other => {
                    faults.push(g(
                        params_line,
                        format!(
                            "field params.{k}: a param's default is a string (write {k} = \"{}\")",
                            other
                        ),
                    ));
                    continue;
                }
            };
            match weir_core::params::check_name(k)
                .and_then(|()| weir_core::params::check_value(k, &value))
            {
                Ok(()) => {
                    def.params.insert(k.clone(), value);
                }
                Err(e) => faults.push(g(params_line, format!("field params: {e}"))),
            }
        }
        if def.params.len() > weir_core::params::PARAMS_MAX {
            faults.push(g(
                params_line,
                format!(
                    "field params: {} params, over the limit of {}",
                    def.params.len(),
                    weir_core::params::PARAMS_MAX
                ),
            ));
        }
        if let Some(r) = &self.sla {
            match dur("sla", &Some(r.get_ref().clone())) {
                Ok(Some(0)) => faults.push(g(line(r.span()), "sla: must be above 0".into())),
                Ok(v) => def.sla_ms = v,
                Err(e) => faults.push(g(line(r.span()), e)),
            }
        }
        for (field, argv) in [
            ("on_failure", &self.on_failure),
            ("on_success", &self.on_success),
            ("on_sla_miss", &self.on_sla_miss),
        ] {
            let Some(argv) = argv else { continue };
            let at = line(argv.span());
            match notify_spec(field, argv.get_ref(), dir, &def) {
                Ok(spec) if field == "on_failure" => def.on_failure = Some(spec),
                Ok(spec) if field == "on_sla_miss" => def.on_sla_miss = Some(spec),
                Ok(spec) => def.on_success = Some(spec),
                Err(e) => faults.extend(e.into_iter().map(|e| g(at, e))),
            }
        }
        let mut targets = BTreeMap::new();
        for (t, tf) in &self.targets {
            let at = line(tf.span());
            match target_settings(t, tf.get_ref()) {
                Ok((n, s)) => {
                    def.targets.insert(n, s.clone());
                    targets.insert(t.clone(), s);
                }
                Err(e) => faults.push(g(at, e)),
            }
        }
        if let Some(t) = &self.trigger {
            let at = line(t.span());
            for a in &t.get_ref().assets {
                match Name::new(a.as_str()) {
                    Ok(n) if def.trigger_assets.contains(&n) => faults.push(g(
                        at,
                        format!("field trigger.assets: asset {a:?} is listed more than once"),
                    )),
                    Ok(n) => def.trigger_assets.push(n),
                    Err(e) => faults.push(g(at, format!("field trigger.assets: {e}"))),
                }
            }
        }
        if let Some(k) = &self.keyed {
            match keyed_spec(k.get_ref(), dir) {
                Ok(spec) => def.keyed = Some(spec),
                Err(e) => faults.extend(e.into_iter().map(|e| g(line(k.span()), e))),
            }
        }
        // Whole-graph checks of each node, worded as the graph's own
        // validation words them.
        // Hash sets: a 100,000-node file looks every name up a few times.
        let declared: HashSet<&str> = self
            .nodes
            .iter()
            .map(|n| n.get_ref().name.as_str())
            .collect();
        let mut seen: HashSet<&str> = HashSet::with_capacity(self.nodes.len());
        let mut producers: BTreeMap<&str, &str> = BTreeMap::new();
        for spanned in &self.nodes {
            let n = spanned.get_ref();
            let at = line(spanned.span());
            // The message is made only for a fault: most nodes have none.
            let mut fault = |what: String| {
                faults.push((at, format!("graph {gname:?}: node {:?}: {what}", n.name)))
            };
            if !seen.insert(n.name.as_str()) {
                fault("name is declared more than once".into());
            }
            for a in &n.produces {
                if let Some(other) = producers.insert(a.as_str(), n.name.as_str()) {
                    if other != n.name {
                        fault(format!(
                            "field produces: asset {a:?} is produced by node {other:?} too: an asset has one producer"
                        ));
                    }
                }
                if self
                    .trigger
                    .as_ref()
                    .is_some_and(|t| t.get_ref().assets.contains(a))
                {
                    fault(format!(
                        "field produces: asset {a:?} is in this graph's [trigger] assets: a graph does not start on its own assets"
                    ));
                }
            }
            if let Some(m) = &n.map_over {
                if !n.upstreams.contains(m) {
                    fault(format!(
                        "field map_over: {m:?} is not an upstream of the node: add it to upstreams (a node maps over an upstream's output)"
                    ));
                }
            }
            // A few upstreams are compared with those before them; a long
            // list (a fan-in) goes through a set.
            let mut ups: HashSet<&str> = HashSet::new();
            let many = n.upstreams.len() > UPSTREAMS_SCAN_MAX;
            for (k, u) in n.upstreams.iter().enumerate() {
                let repeated = if many {
                    !ups.insert(u.as_str())
                } else {
                    n.upstreams[..k].contains(u)
                };
                if u == &n.name {
                    fault("upstreams: the node lists itself".into());
                } else if !declared.contains(u.as_str()) {
                    fault(format!("upstream {u:?} is not a node of the graph"));
                } else if repeated {
                    fault(format!("upstream {u:?} is listed more than once"));
                }
            }
            if let Some(p) = n.pool.as_deref().filter(|p| *p != POOL_DEFAULT) {
                if !pools.is_empty() && !pools.contains_key(p) {
                    fault(format!("pool {p:?} is not one of the graph's pools"));
                } else if known.pools.is_some_and(|k| !k.contains(p)) {
                    fault(format!(
                        "pool {p:?} is not declared: declare it under [pools] (weir has \"default\" and the pools its definition files declare)"
                    ));
                }
            }
            if let Some(t) = &n.target {
                if !self.targets.is_empty() && !self.targets.contains_key(t) {
                    fault(format!("target {t:?} is not one of the graph's targets"));
                }
            }
            if let Some(t) = &n.task {
                if known.tasks.is_some_and(|k| !k.contains(t)) {
                    fault(format!(
                        "task {t:?} is not registered: weir runs command nodes (command = [\"program\", \"arg\"]); other tasks need a program that embeds weir and registers them"
                    ));
                }
            }
            let upstreams: Vec<&str> = n.upstreams.iter().map(String::as_str).collect();
            let is_node = |name: &str| declared.contains(name);
            let ctx = Context {
                node: Some(n.name.as_str()),
                upstreams: &upstreams,
                nodes: &is_node,
                params: &def.params,
                partitioning: def.partitioning,
                mapped: n.map_over.is_some() || n.items.is_some(),
            };
            for (field, text, place) in n.templates() {
                for what in check_template(&text, place, &ctx) {
                    fault(format!("field {field}: {what}"));
                }
            }
        }
        def.nodes.reserve_exact(self.nodes.len());
        let (past, downstream) = (self.depends_on_past, self.wait_for_downstream);
        for spanned in self.nodes {
            let at = line(spanned.span());
            let (node_past, node_downstream) = (
                spanned.get_ref().depends_on_past,
                spanned.get_ref().wait_for_downstream,
            );
            match spanned.into_inner().into_node(dir) {
                Ok(mut n) => {
                    // A node's own setting over the graph's; waiting for
                    // the downstreams implies waiting for the node (as in
                    // Airflow).
                    n.wait_for_downstream = node_downstream.unwrap_or(downstream);
                    n.depends_on_past = node_past.unwrap_or(past) || n.wait_for_downstream;
                    def.nodes.push(n)
                }
                Err(e) => faults.extend(e.into_iter().map(|what| (at, what))),
            }
        }
        if faults.is_empty() {
            Ok((def, pools, targets))
        } else {
            Err(faults)
        }
    }
}
