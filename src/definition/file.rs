//! The TOML shape of a definition file, and its conversion into weir-core's
//! model. Durations are strings (`30s`, `5m`, `1h`, `7d`); unknown fields
//! are errors.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use weir_core::breaker::BreakerSettings;
use weir_core::graph::{GraphDef, NodeDef, TaskSpec, POOL_DEFAULT};
use weir_core::keyed::{InventorySource, KeyedSpec};
use weir_core::mapped::{MapSource, MapSpec};
use weir_core::names::Name;
use weir_core::partition::Partitioning;
use weir_core::retry::RetryPolicy;
use weir_core::schedule::{Debounce, ScheduleSettings};
use weir_core::sensor::{OnTimeout, SensorPolicy};
use weir_core::trigger::TriggerRule;

use super::{parse_duration_ms, Lines};
use crate::task::command::{CommandConfig, COMMAND_TASK};
use crate::task::notify::{NotifyConfig, NOTIFY_TASK};
use weir_core::template::{Context, Place, Template};

/// A definition file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    /// The graph's name.
    pub name: Spanned<String>,
    /// none, hourly, daily, weekly, monthly or keyed.
    #[serde(default)]
    pub partitioning: Option<Spanned<String>>,
    /// A cron expression.
    #[serde(default)]
    pub cron: Option<Spanned<String>>,
    /// Start every missed window after downtime.
    #[serde(default)]
    pub catchup: bool,
    /// The first window the cron starts (a date or an RFC 3339 instant).
    #[serde(default)]
    pub start: Option<Spanned<String>>,
    /// How long settled runs are kept.
    #[serde(default)]
    pub retention: Option<Spanned<String>>,
    /// The most active runs.
    #[serde(default)]
    pub max_active_runs: Option<Spanned<u32>>,
    /// A command run when a run settles failed, the summary on its stdin.
    #[serde(default)]
    pub on_failure: Option<Spanned<Vec<String>>>,
    /// A command run when a run settles complete.
    #[serde(default)]
    pub on_success: Option<Spanned<Vec<String>>>,
    /// The params a run takes, with their defaults.
    #[serde(default)]
    pub params: Option<Spanned<BTreeMap<String, toml::Value>>>,
    /// Pools and capacities.
    #[serde(default)]
    pub pools: Option<Spanned<BTreeMap<String, u32>>>,
    /// Targets and their breakers.
    #[serde(default)]
    pub targets: BTreeMap<String, Spanned<TargetFile>>,
    /// A keyed graph's inventory and schedule.
    #[serde(default)]
    pub keyed: Option<Spanned<KeyedFile>>,
    /// What else starts runs: materializations of assets.
    #[serde(default)]
    pub trigger: Option<Spanned<TriggerFile>>,
    /// The nodes.
    #[serde(default)]
    pub nodes: Vec<Spanned<NodeFile>>,
}

/// What else starts runs of a graph.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TriggerFile {
    /// Assets whose materializations start the run of the partition they
    /// fall in.
    #[serde(default)]
    pub assets: Vec<String>,
}

/// A target's breaker.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct TargetFile {
    /// Consecutive failures that open it.
    pub failures: Option<u32>,
    /// Failure fraction over the window that opens it.
    pub failure_rate: Option<f64>,
    /// Outcomes in the window.
    pub window: Option<u32>,
    /// Outcomes before the rate counts.
    pub min_calls: Option<u32>,
    /// How long it stays open.
    pub cooldown: Option<String>,
    /// Calls admitted half-open.
    pub probes: Option<u32>,
    /// Failed probes that reopen it (default 1).
    pub probe_failures: Option<u32>,
}

/// A keyed graph's settings.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyedFile {
    /// `{ file = "hosts.txt" }` or `{ command = ["python3", "list.py"] }`.
    pub inventory: InventoryFile,
    /// Reload period.
    pub refresh: Option<String>,
    /// Time between runs of a key.
    pub interval: Option<String>,
    /// Time before retrying a key whose run failed.
    pub retry_interval: Option<String>,
    /// Random spread of due instants.
    pub jitter: Option<String>,
    /// Due keys claimed at once.
    pub batch_size: Option<u32>,
    /// Claim lease.
    pub lease: Option<String>,
    /// Signal debounce.
    pub debounce: Option<DebounceFile>,
}

/// Where keys come from.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InventoryFile {
    /// A file, one key a line (relative to the definition's folder).
    pub file: Option<String>,
    /// A command whose stdout lists keys.
    pub command: Option<Vec<String>>,
}

/// A signal debounce.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebounceFile {
    /// Wait after the latest signal.
    pub delay: Option<String>,
    /// Longest wait after the first signal of a window.
    pub max_wait: Option<String>,
}

/// A node.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFile {
    /// Its name.
    pub name: String,
    /// Its upstreams.
    #[serde(default)]
    pub upstreams: Vec<String>,
    /// Its trigger rule (Airflow's names).
    pub trigger_rule: Option<String>,
    /// Its pool.
    pub pool: Option<String>,
    /// Its target.
    pub target: Option<String>,
    /// Each attempt's timeout.
    pub timeout: Option<String>,
    /// Its retry policy.
    pub retry: Option<RetryFile>,
    /// A command (argv, never a shell string).
    pub command: Option<Vec<String>>,
    /// Exit codes that fail without retry.
    #[serde(default)]
    pub permanent_exit_codes: Vec<i32>,
    /// Extra environment of the command.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The command's working directory (relative to the file's folder).
    pub cwd: Option<String>,
    /// A registered task instead of a command.
    pub task: Option<String>,
    /// The registered task's config.
    pub config: Option<toml::Value>,
    /// An HTTP call instead of a command.
    pub http: Option<HttpFile>,
    /// Its place in its pool's queue (higher first; default 0).
    pub priority: Option<i64>,
    /// A mapped node: one member per item of this upstream's output (a
    /// JSON array).
    pub map_over: Option<String>,
    /// A mapped node: one member per item of this list.
    pub items: Option<Vec<toml::Value>>,
    /// A mapped node's members live at once at most.
    pub max_active_members: Option<u32>,
    /// A sensor instead of a command: waits for a file, a command's exit 0
    /// or an HTTP status without holding a slot between checks.
    pub sensor: Option<SensorFile>,
    /// Assets a success of the node materializes.
    #[serde(default)]
    pub produces: Vec<String>,
}

/// A sensor's check and waiting.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SensorFile {
    /// Met when this file exists (relative to the definition's folder).
    pub file: Option<String>,
    /// Met when this command exits 0.
    pub command: Option<Vec<String>>,
    /// Met when a GET of this URL answers `status`.
    pub http: Option<String>,
    /// The status an `http` check waits for (default 200).
    pub status: Option<u16>,
    /// The wait between checks (default 30s).
    pub every: Option<String>,
    /// How long it waits in all (default 6h).
    pub timeout: Option<String>,
    /// `fail` (default) or `skip`, when still not met at the timeout.
    pub on_timeout: Option<String>,
}

/// An HTTP node's call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpFile {
    /// GET (default), POST, PUT, PATCH, DELETE, HEAD…
    pub method: Option<String>,
    /// The URL; `{partition}` and the like are percent-encoded into it,
    /// `${env:NAME}` read from the engine's environment at each attempt.
    pub url: String,
    /// Headers (values may hold `${env:NAME}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body.
    pub body: Option<String>,
    /// The statuses that succeed, `[low, high]` (default `[200, 299]`).
    pub expect: Option<[u16; 2]>,
}

/// A retry policy.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryFile {
    /// Attempts in all (0 = unlimited).
    pub attempts: Option<u32>,
    /// First wait.
    pub initial: Option<String>,
    /// Factor between waits.
    pub multiplier: Option<f64>,
    /// Longest wait.
    pub max: Option<String>,
    /// Fraction of a wait jitter may take off.
    pub jitter: Option<f64>,
    /// Overall deadline from the first due instant.
    pub deadline: Option<String>,
}

/// Upstreams of one node checked for repeats by a scan of those before
/// them; a longer list is checked through a set.
const UPSTREAMS_SCAN_MAX: usize = 16;

/// A fault of a file: the line it is on, when known, and what is wrong.
pub(crate) type Fault = (Option<usize>, String);

/// What the engine that will run a file provides: the pools it has and the
/// tasks registered with it; `None` accepts any.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Known<'a> {
    /// Every pool the engine will have.
    pub pools: Option<&'a BTreeSet<String>>,
    /// Every task registered with it.
    pub tasks: Option<&'a BTreeSet<String>>,
}

fn dur(field: &str, v: &Option<String>) -> Result<Option<u64>, String> {
    match v {
        None => Ok(None),
        Some(s) => parse_duration_ms(s)
            .map(Some)
            .map_err(|e| format!("field {field}: {e}")),
    }
}

fn field_msg(node: &str, field: &str, what: impl std::fmt::Display) -> String {
    format!("node {node:?}: field {field}: {what}")
}

type Parts = (
    GraphDef,
    BTreeMap<String, u32>,
    BTreeMap<String, BreakerSettings>,
);

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
        if let Some(c) = &self.cron {
            if let Err(e) = weir_core::cron::Schedule::parse(c.get_ref()) {
                faults.push(g(line(c.span()), format!("cron: {e}")));
            }
            def.cron = Some(c.get_ref().clone());
        }
        def.catchup = self.catchup;
        if let Some(st) = &self.start {
            match start_ms(st.get_ref()) {
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
        for (field, argv) in [
            ("on_failure", &self.on_failure),
            ("on_success", &self.on_success),
        ] {
            let Some(argv) = argv else { continue };
            let at = line(argv.span());
            match notify_spec(field, argv.get_ref(), dir, &def) {
                Ok(spec) if field == "on_failure" => def.on_failure = Some(spec),
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
        for spanned in self.nodes {
            let at = line(spanned.span());
            match spanned.into_inner().into_node(dir) {
                Ok(n) => def.nodes.push(n),
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

/// The faults of one template: its syntax, then every reference the
/// graph around it cannot give.
fn check_template(text: &str, place: Place, ctx: &Context<'_>) -> Vec<String> {
    match Template::parse(text, place) {
        Err(e) => vec![e.to_string()],
        Ok(t) => t
            .check(ctx)
            .into_iter()
            .map(|f| format!("template {text:?}: {f}"))
            .collect(),
    }
}

/// A graph's notification (`on_failure`, `on_success`): a command, run in
/// the definition's folder, whose templates may name the run only.
fn notify_spec(
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

/// A `start` as ms since the epoch: a date (`2026-11-01`, midnight UTC) or
/// an RFC 3339 instant.
fn start_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let ms = if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        d.and_hms_opt(0, 0, 0)
            .map(|dt| dt.and_utc().timestamp_millis())
            .ok_or_else(|| format!("field start: {t:?} is not a date"))?
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
fn target_settings(t: &str, tf: &TargetFile) -> Result<(Name, BreakerSettings), String> {
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
fn keyed_spec(k: &KeyedFile, dir: &Path) -> Result<KeyedSpec, Vec<String>> {
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

impl NodeFile {
    /// Every template of the node: its field (`command[2]`, `env.KEY`,
    /// `http.url`, …), its text and where it is rendered.
    fn templates(&self) -> Vec<(String, String, Place)> {
        let mut out = Vec::new();
        for (i, a) in self.command.iter().flatten().enumerate() {
            out.push((format!("command[{i}]"), a.clone(), Place::Command));
        }
        for (k, v) in &self.env {
            out.push((format!("env.{k}"), v.clone(), Place::Command));
        }
        if let Some(h) = &self.http {
            out.push(("http.url".into(), h.url.clone(), Place::Http));
            for (k, v) in &h.headers {
                out.push((format!("http.headers.{k}"), v.clone(), Place::Http));
            }
            if let Some(b) = &h.body {
                out.push(("http.body".into(), b.clone(), Place::Http));
            }
        }
        if let Some(sn) = &self.sensor {
            if let Some(f) = &sn.file {
                out.push(("sensor.file".into(), f.clone(), Place::Command));
            }
            for (i, a) in sn.command.iter().flatten().enumerate() {
                out.push((format!("sensor.command[{i}]"), a.clone(), Place::Command));
            }
            if let Some(u) = &sn.http {
                out.push(("sensor.http".into(), u.clone(), Place::Http));
            }
        }
        out
    }

    /// The node's definition, or every fault of its fields.
    fn into_node(self, dir: &Path) -> Result<NodeDef, Vec<String>> {
        let node = self.name.as_str();
        let mut faults: Vec<String> = Vec::new();
        let f = |field: &str, what: String| field_msg(node, field, what);
        let nname = Name::new(node).map_err(|e| faults.push(f("name", e.to_string())));
        let mut upstreams = Vec::new();
        for u in &self.upstreams {
            match Name::new(u.as_str()) {
                Ok(n) => upstreams.push(n),
                Err(e) => faults.push(f("upstreams", e.to_string())),
            }
        }
        let task = match (&self.command, &self.task, &self.http, &self.sensor) {
            (None, None, None, Some(sn)) => self.sensor_task(sn, dir, &mut faults),
            (_, _, _, Some(_)) => {
                faults.push(f(
                    "sensor",
                    "a sensor node checks its condition itself: give sensor without command, task or http".into(),
                ));
                None
            }
            (None, None, Some(h), None) => self.http_task(h, &mut faults),
            (_, _, Some(_), None) => {
                faults.push(f("http", "give one of command, task or http".into()));
                None
            }
            (Some(argv), None, None, None) => self.command_task(argv, dir, &mut faults),
            (None, Some(t), None, None) => {
                if !self.permanent_exit_codes.is_empty()
                    || !self.env.is_empty()
                    || self.cwd.is_some()
                {
                    faults.push(f(
                        "task",
                        "permanent_exit_codes, env and cwd belong to command nodes".into(),
                    ));
                }
                let config = match &self.config {
                    None => Some(serde_json::Value::Null),
                    Some(v) => serde_json::to_value(v)
                        .map_err(|e| faults.push(f("config", e.to_string())))
                        .ok(),
                };
                let task = Name::new(t.as_str())
                    .map_err(|e| faults.push(f("task", e.to_string())))
                    .ok();
                task.zip(config)
                    .map(|(task, config)| TaskSpec { task, config })
            }
            (Some(_), Some(_), None, None) => {
                faults.push(f("task", "give command or task, not both".into()));
                None
            }
            (None, None, None, None) => {
                faults.push(f(
                    "command",
                    "a node needs a command (argv), an http call, a sensor or a task".into(),
                ));
                None
            }
        };
        let trigger_rule = match &self.trigger_rule {
            None => TriggerRule::default(),
            Some(r) => r.parse::<TriggerRule>().unwrap_or_else(|e| {
                faults.push(f("trigger_rule", e.to_string()));
                TriggerRule::default()
            }),
        };
        let pool = self.pool.as_ref().and_then(|p| {
            Name::new(p.as_str())
                .map_err(|e| faults.push(f("pool", e.to_string())))
                .ok()
        });
        let target = self.target.as_ref().and_then(|t| {
            Name::new(t.as_str())
                .map_err(|e| faults.push(f("target", e.to_string())))
                .ok()
        });
        let timeout_ms = dur("timeout", &self.timeout).unwrap_or_else(|e| {
            faults.push(format!("node {node:?}: {e}"));
            None
        });
        let priority = match self.priority {
            None => 0,
            Some(p) => i32::try_from(p).unwrap_or_else(|_| {
                faults.push(f(
                    "priority",
                    format!("{p} is outside {}..={}", i32::MIN, i32::MAX),
                ));
                0
            }),
        };
        let map = match (&self.map_over, &self.items) {
            (Some(_), Some(_)) => {
                faults.push(f("items", "give map_over or items, not both".into()));
                None
            }
            (Some(u), None) => Name::new(u.as_str())
                .map_err(|e| faults.push(f("map_over", e.to_string())))
                .ok()
                .map(|n| MapSpec::new(MapSource::Upstream(n))),
            (None, Some(items)) => {
                let values: Result<Vec<serde_json::Value>, _> =
                    items.iter().map(serde_json::to_value).collect();
                match values {
                    Ok(v) => match weir_core::mapped::check_items(&v) {
                        Ok(()) => Some(MapSpec::new(MapSource::Items(v))),
                        Err(e) => {
                            faults.push(f("items", e.to_string()));
                            None
                        }
                    },
                    Err(e) => {
                        faults.push(f("items", e.to_string()));
                        None
                    }
                }
            }
            (None, None) => None,
        };
        let map = match (map, self.max_active_members) {
            (Some(mut m), Some(n)) => {
                if n == 0 {
                    faults.push(f("max_active_members", "must be at least 1".into()));
                }
                m.max_active_members = n;
                Some(m)
            }
            (None, Some(_)) => {
                faults.push(f(
                    "max_active_members",
                    "belongs to a mapped node (one with map_over or items)".into(),
                ));
                None
            }
            (m, None) => m,
        };
        let mut produces = Vec::new();
        for a in &self.produces {
            match Name::new(a.as_str()) {
                Ok(n) if produces.contains(&n) => faults.push(f(
                    "produces",
                    format!("asset {a:?} is listed more than once"),
                )),
                Ok(n) => produces.push(n),
                Err(e) => faults.push(f("produces", e.to_string())),
            }
        }
        let sensor = self.sensor.as_ref().and_then(|sn| {
            sensor_policy(sn)
                .map_err(|e| faults.extend(e.into_iter().map(|e| f("sensor", e))))
                .ok()
        });
        let retry = self.retry.as_ref().map(|r| {
            retry_policy(r).unwrap_or_else(|e| {
                faults.extend(e.into_iter().map(|e| format!("node {node:?}: {e}")));
                RetryPolicy::default()
            })
        });
        match (nname, task) {
            (Ok(nname), Some(task)) if faults.is_empty() => {
                let mut def = NodeDef::new(nname, upstreams, task);
                def.trigger_rule = trigger_rule;
                if let Some(p) = pool {
                    def.pool = p;
                }
                def.target = target;
                def.timeout_ms = timeout_ms;
                if sensor.is_some() && timeout_ms.is_none() {
                    // A check that hangs must not wait out the sensor.
                    def.timeout_ms = Some(crate::task::sensor::CHECK_TIMEOUT_MS_DEFAULT);
                }
                def.priority = priority;
                def.map = map;
                def.sensor = sensor;
                def.produces = produces;
                if let Some(r) = retry {
                    def.retry = r;
                }
                Ok(def)
            }
            _ => Err(faults),
        }
    }

    /// An HTTP node's task: its call, checked.
    fn http_task(&self, h: &HttpFile, faults: &mut Vec<String>) -> Option<TaskSpec> {
        let node = self.name.as_str();
        let before = faults.len();
        if !self.permanent_exit_codes.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
            faults.push(field_msg(
                node,
                "http",
                "permanent_exit_codes, env and cwd belong to command nodes",
            ));
        }
        if self.config.is_some() {
            faults.push(field_msg(node, "config", "an http node takes no config"));
        }
        let config = crate::task::http::HttpConfig {
            method: h
                .method
                .clone()
                .unwrap_or_else(|| "GET".into())
                .to_uppercase(),
            url: h.url.clone(),
            headers: h.headers.clone(),
            body: h.body.clone(),
            expect: h
                .expect
                .map_or(weir_core::http::EXPECT_DEFAULT, |[lo, hi]| (lo, hi)),
        };
        for fault in crate::task::http::check(&config) {
            faults.push(field_msg(node, "http", fault));
        }
        if faults.len() > before {
            return None;
        }
        let value = serde_json::to_value(&config)
            .map_err(|e| faults.push(field_msg(node, "http", e.to_string())))
            .ok()?;
        Some(TaskSpec {
            task: Name::new(crate::task::http::HTTP_TASK).ok()?,
            config: value,
        })
    }

    /// A command node's task: its argv, env and working directory, checked.
    fn command_task(
        &self,
        argv: &[String],
        dir: &Path,
        faults: &mut Vec<String>,
    ) -> Option<TaskSpec> {
        let node = self.name.as_str();
        let before = faults.len();
        if argv.is_empty() {
            faults.push(field_msg(
                node,
                "command",
                "the argv is empty: give at least the program",
            ));
        }
        if argv.iter().any(|a| a.contains('\0')) {
            faults.push(field_msg(node, "command", "an argument holds a NUL byte"));
        }
        if self.config.is_some() {
            faults.push(field_msg(
                node,
                "config",
                "a command node takes no config (use env)",
            ));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                faults.push(field_msg(
                    node,
                    "env",
                    format!("key {k:?}: a variable name is not empty and holds no '=' or NUL"),
                ));
            }
            if v.contains('\0') {
                faults.push(field_msg(
                    node,
                    "env",
                    format!("the value of {k:?} holds a NUL byte"),
                ));
            }
        }
        let cwd = match &self.cwd {
            Some(c) => {
                let p = dir.join(c);
                if !p.is_dir() {
                    faults.push(field_msg(
                        node,
                        "cwd",
                        format!(
                            "{} is not a directory (a relative cwd is relative to the definition's folder)",
                            p.display()
                        ),
                    ));
                }
                p
            }
            None => dir.to_path_buf(),
        };
        if faults.len() > before {
            return None;
        }
        let config = CommandConfig {
            argv: argv.to_vec(),
            permanent_exit_codes: self.permanent_exit_codes.clone(),
            env: self.env.clone(),
            cwd: cwd.to_string_lossy().into_owned(),
        };
        match serde_json::to_value(&config) {
            Ok(config) => Some(TaskSpec {
                task: Name::new(COMMAND_TASK).expect("valid"),
                config,
            }),
            Err(e) => {
                faults.push(field_msg(node, "command", e));
                None
            }
        }
    }
}

/// A sensor's waiting from its fields, over the defaults.
fn sensor_policy(sn: &SensorFile) -> Result<SensorPolicy, Vec<String>> {
    let mut faults = Vec::new();
    let mut p = SensorPolicy::default();
    match dur("every", &sn.every) {
        Ok(Some(v)) => p.every_ms = v,
        Ok(None) => {}
        Err(e) => faults.push(e),
    }
    match dur("timeout", &sn.timeout) {
        Ok(Some(v)) => p.timeout_ms = v,
        Ok(None) => {}
        Err(e) => faults.push(e),
    }
    match sn.on_timeout.as_deref() {
        None | Some("fail") => {}
        Some("skip") => p.on_timeout = OnTimeout::Skip,
        Some(other) => faults.push(format!(
            "field on_timeout: {other:?} is not one of fail, skip"
        )),
    }
    if faults.is_empty() {
        if let Err(e) = p.validate() {
            faults.push(e);
        }
    }
    if faults.is_empty() {
        Ok(p)
    } else {
        Err(faults)
    }
}

impl NodeFile {
    /// A sensor node's task: its check, checked.
    fn sensor_task(
        &self,
        sn: &SensorFile,
        dir: &Path,
        faults: &mut Vec<String>,
    ) -> Option<TaskSpec> {
        use crate::task::sensor::{SensorCheck, SensorConfig, SENSOR_TASK};
        let node = self.name.as_str();
        let before = faults.len();
        if !self.permanent_exit_codes.is_empty() || !self.env.is_empty() || self.config.is_some() {
            faults.push(field_msg(
                node,
                "sensor",
                "permanent_exit_codes, env and config belong to command and task nodes",
            ));
        }
        let check = match (&sn.file, &sn.command, &sn.http) {
            (Some(f), None, None) => {
                if sn.status.is_some() {
                    faults.push(field_msg(node, "sensor.status", "belongs to an http check"));
                }
                if f.is_empty() {
                    faults.push(field_msg(node, "sensor.file", "the path is empty"));
                }
                Some(SensorCheck::File { path: f.clone() })
            }
            (None, Some(argv), None) => {
                if sn.status.is_some() {
                    faults.push(field_msg(node, "sensor.status", "belongs to an http check"));
                }
                if argv.is_empty() {
                    faults.push(field_msg(
                        node,
                        "sensor.command",
                        "the argv is empty: give at least the program",
                    ));
                }
                if argv.iter().any(|a| a.contains('\0')) {
                    faults.push(field_msg(
                        node,
                        "sensor.command",
                        "an argument holds a NUL byte",
                    ));
                }
                Some(SensorCheck::Command { argv: argv.clone() })
            }
            (None, None, Some(url)) => {
                let status = sn.status.unwrap_or(200);
                if !(100..=599).contains(&status) {
                    faults.push(field_msg(
                        node,
                        "sensor.status",
                        format!("{status} is not an HTTP status (100..=599)"),
                    ));
                }
                for fault in crate::task::sensor::check_url(url) {
                    faults.push(field_msg(node, "sensor.http", fault));
                }
                Some(SensorCheck::Http {
                    url: url.clone(),
                    status,
                })
            }
            _ => {
                faults.push(field_msg(
                    node,
                    "sensor",
                    "give exactly one check: file = \"path\", command = [\"program\", …] or http = \"url\"",
                ));
                None
            }
        };
        let cwd = match &self.cwd {
            Some(c) => {
                let p = dir.join(c);
                if !p.is_dir() {
                    faults.push(field_msg(
                        node,
                        "cwd",
                        format!(
                            "{} is not a directory (a relative cwd is relative to the definition's folder)",
                            p.display()
                        ),
                    ));
                }
                p
            }
            None => dir.to_path_buf(),
        };
        if faults.len() > before {
            return None;
        }
        let config = SensorConfig {
            check: check?,
            cwd: cwd.to_string_lossy().into_owned(),
        };
        match serde_json::to_value(&config) {
            Ok(config) => Some(TaskSpec {
                task: Name::new(SENSOR_TASK).expect("valid"),
                config,
            }),
            Err(e) => {
                faults.push(field_msg(node, "sensor", e));
                None
            }
        }
    }
}

/// A retry policy from its fields, over the defaults; every bad field is a
/// fault.
fn retry_policy(r: &RetryFile) -> Result<RetryPolicy, Vec<String>> {
    let mut faults = Vec::new();
    let mut p = RetryPolicy::default();
    if let Some(v) = r.attempts {
        p.attempts_max = v;
    }
    let mut d = |field: &str, v: &Option<String>| {
        dur(field, v).unwrap_or_else(|e| {
            faults.push(e);
            None
        })
    };
    let initial = d("retry.initial", &r.initial);
    let max = d("retry.max", &r.max);
    let deadline = d("retry.deadline", &r.deadline);
    if let Some(v) = initial {
        p.initial_ms = v;
    }
    if let Some(v) = r.multiplier {
        p.multiplier = v;
    }
    if let Some(v) = max {
        p.max_ms = v;
    } else if p.max_ms < p.initial_ms {
        p.max_ms = p.initial_ms;
    }
    if let Some(v) = r.jitter {
        p.jitter = v;
    }
    p.deadline_ms = deadline;
    if faults.is_empty() {
        if let Err(e) = p.validate() {
            faults.push(format!("field retry: {e}"));
        }
    }
    if faults.is_empty() {
        Ok(p)
    } else {
        Err(faults)
    }
}
