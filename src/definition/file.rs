//! The TOML shape of a definition file, and its conversion into weir-core's
//! model. Durations are strings (`30s`, `5m`, `1h`, `7d`); unknown fields
//! are errors.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use weir_core::breaker::BreakerSettings;
use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::keyed::{InventorySource, KeyedSpec};
use weir_core::names::Name;
use weir_core::partition::Partitioning;
use weir_core::retry::RetryPolicy;
use weir_core::schedule::{Debounce, ScheduleSettings};
use weir_core::trigger::TriggerRule;

use super::parse_duration_ms;
use crate::task::command::{CommandConfig, COMMAND_TASK};

/// A definition file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphFile {
    /// The graph's name.
    pub name: String,
    /// none, hourly, daily, weekly, monthly or keyed.
    #[serde(default)]
    pub partitioning: Option<String>,
    /// A cron expression.
    #[serde(default)]
    pub cron: Option<String>,
    /// Start every missed window after downtime.
    #[serde(default)]
    pub catchup: bool,
    /// How long settled runs are kept.
    #[serde(default)]
    pub retention: Option<String>,
    /// The most active runs.
    #[serde(default)]
    pub max_active_runs: Option<u32>,
    /// Pools and capacities.
    #[serde(default)]
    pub pools: BTreeMap<String, u32>,
    /// Targets and their breakers.
    #[serde(default)]
    pub targets: BTreeMap<String, TargetFile>,
    /// A keyed graph's inventory and schedule.
    #[serde(default)]
    pub keyed: Option<KeyedFile>,
    /// The nodes.
    #[serde(default)]
    pub nodes: Vec<Spanned<NodeFile>>,
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

type Err = (Option<String>, String);

fn dur(field: &str, v: &Option<String>, node: Option<&str>) -> Result<Option<u64>, Err> {
    match v {
        None => Ok(None),
        Some(s) => parse_duration_ms(s)
            .map(Some)
            .map_err(|e| (node.map(str::to_string), field_msg(node, field, e))),
    }
}

fn field_msg(node: Option<&str>, field: &str, what: String) -> String {
    match node {
        Some(n) => format!("node {n:?}: field {field}: {what}"),
        None => format!("field {field}: {what}"),
    }
}

fn name(field: &str, v: &str, node: Option<&str>) -> Result<Name, Err> {
    Name::new(v).map_err(|e| {
        (
            node.map(str::to_string),
            field_msg(node, field, e.to_string()),
        )
    })
}

type Parts = (
    GraphDef,
    BTreeMap<String, u32>,
    BTreeMap<String, BreakerSettings>,
);

impl GraphFile {
    /// Converts into the model. Errors carry the node they are about.
    pub fn into_def(self, dir: &Path) -> Result<Parts, Err> {
        let gname = name("name", &self.name, None)?;
        let g = |what: String| (None, format!("graph {:?}: {what}", self.name));
        let partitioning = match self.partitioning.as_deref() {
            None | Some("none") => Partitioning::None,
            Some("hourly") => Partitioning::Hourly,
            Some("daily") => Partitioning::Daily,
            Some("weekly") => Partitioning::Weekly,
            Some("monthly") => Partitioning::Monthly,
            Some("keyed") => Partitioning::Keyed,
            Some(other) => {
                return Err(g(format!(
                    "field partitioning: {other:?} is not one of none, hourly, daily, weekly, monthly, keyed"
                )))
            }
        };
        let mut def = GraphDef::new(gname, Vec::new());
        def.partitioning = partitioning;
        def.cron = self.cron.clone();
        def.catchup = self.catchup;
        if let Some(r) = dur("retention", &self.retention, None).map_err(|(_, e)| g(e))? {
            def.retention_ms = r;
        }
        if let Some(m) = self.max_active_runs {
            def.max_active_runs = m;
        }
        for (p, c) in &self.pools {
            let n = name("pools", p, None).map_err(|(_, e)| g(e))?;
            if *c == 0 {
                return Err(g(format!("field pools.{p}: capacity must be at least 1")));
            }
            def.pools.insert(n, *c);
        }
        let mut targets = BTreeMap::new();
        for (t, tf) in &self.targets {
            let n = name("targets", t, None).map_err(|(_, e)| g(e))?;
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
            if let Some(v) =
                dur(&format!("targets.{t}.cooldown"), &tf.cooldown, None).map_err(|(_, e)| g(e))?
            {
                s.cooldown_ms = v;
            }
            if let Some(v) = tf.probes {
                s.probes = v;
            }
            s.validate()
                .map_err(|e| g(format!("field targets.{t}: {e}")))?;
            def.targets.insert(n, s.clone());
            targets.insert(t.clone(), s);
        }
        if let Some(k) = &self.keyed {
            let inventory = match (&k.inventory.file, &k.inventory.command) {
                (Some(f), None) => {
                    let p = dir.join(f);
                    InventorySource::File(p.to_string_lossy().into_owned())
                }
                (None, Some(argv)) => InventorySource::Command(argv.clone()),
                _ => {
                    return Err(g(
                        "field keyed.inventory: give exactly one of file or command".into(),
                    ))
                }
            };
            let mut spec = KeyedSpec::new(inventory);
            let kd = |f: &str, v: &Option<String>| dur(f, v, None).map_err(|(_, e)| g(e));
            if let Some(v) = kd("keyed.refresh", &k.refresh)? {
                spec.refresh_ms = v;
            }
            let mut sched = ScheduleSettings::default();
            if let Some(v) = kd("keyed.interval", &k.interval)? {
                sched.interval_ms = v;
            }
            if let Some(v) = kd("keyed.retry_interval", &k.retry_interval)? {
                sched.retry_interval_ms = v;
            }
            if let Some(v) = kd("keyed.jitter", &k.jitter)? {
                sched.jitter_ms = v;
            }
            spec.schedule = sched;
            if let Some(d) = &k.debounce {
                let mut db = Debounce::default();
                if let Some(v) = kd("keyed.debounce.delay", &d.delay)? {
                    db.delay_ms = v;
                }
                if let Some(v) = kd("keyed.debounce.max_wait", &d.max_wait)? {
                    db.max_wait_ms = v;
                }
                spec.debounce = db;
            }
            if let Some(v) = k.batch_size {
                spec.batch_size = v;
            }
            if let Some(v) = kd("keyed.lease", &k.lease)? {
                spec.lease_ms = v;
            }
            def.keyed = Some(spec);
        }
        for n in self.nodes {
            let n = n.into_inner();
            def.nodes.push(n.into_node(dir)?);
        }
        Ok((def, self.pools, targets))
    }
}

impl NodeFile {
    fn into_node(self, dir: &Path) -> Result<NodeDef, Err> {
        let node = Some(self.name.as_str());
        let nname = name("name", &self.name, node)?;
        let err =
            |field: &str, what: String| (Some(self.name.clone()), field_msg(node, field, what));
        let upstreams = self
            .upstreams
            .iter()
            .map(|u| name("upstreams", u, node))
            .collect::<Result<Vec<_>, _>>()?;
        let task = match (&self.command, &self.task) {
            (Some(argv), None) => {
                if argv.is_empty() {
                    return Err(err(
                        "command",
                        "the argv is empty: give at least the program".into(),
                    ));
                }
                if self.config.is_some() {
                    return Err(err(
                        "config",
                        "a command node takes no config (use env)".into(),
                    ));
                }
                let cwd = match &self.cwd {
                    Some(c) => dir.join(c),
                    None => dir.to_path_buf(),
                };
                let config = CommandConfig {
                    argv: argv.clone(),
                    permanent_exit_codes: self.permanent_exit_codes.clone(),
                    env: self.env.clone(),
                    cwd: cwd.to_string_lossy().into_owned(),
                };
                TaskSpec {
                    task: Name::new(COMMAND_TASK).expect("valid"),
                    config: serde_json::to_value(&config)
                        .map_err(|e| err("command", e.to_string()))?,
                }
            }
            (None, Some(t)) => {
                if !self.permanent_exit_codes.is_empty()
                    || !self.env.is_empty()
                    || self.cwd.is_some()
                {
                    return Err(err(
                        "task",
                        "permanent_exit_codes, env and cwd belong to command nodes".into(),
                    ));
                }
                let config = match &self.config {
                    None => serde_json::Value::Null,
                    Some(v) => serde_json::to_value(v).map_err(|e| err("config", e.to_string()))?,
                };
                TaskSpec {
                    task: name("task", t, node)?,
                    config,
                }
            }
            (Some(_), Some(_)) => return Err(err("task", "give command or task, not both".into())),
            (None, None) => {
                return Err(err(
                    "command",
                    "a node needs a command (argv) or a task".into(),
                ))
            }
        };
        let mut def = NodeDef::new(nname, upstreams, task);
        if let Some(r) = &self.trigger_rule {
            def.trigger_rule = r
                .parse::<TriggerRule>()
                .map_err(|e| err("trigger_rule", e.to_string()))?;
        }
        if let Some(p) = &self.pool {
            def.pool = name("pool", p, node)?;
        }
        if let Some(t) = &self.target {
            def.target = Some(name("target", t, node)?);
        }
        def.timeout_ms = dur("timeout", &self.timeout, node)?;
        if let Some(r) = &self.retry {
            let mut p = RetryPolicy::default();
            if let Some(v) = r.attempts {
                p.attempts_max = v;
            }
            if let Some(v) = dur("retry.initial", &r.initial, node)? {
                p.initial_ms = v;
            }
            if let Some(v) = r.multiplier {
                p.multiplier = v;
            }
            if let Some(v) = dur("retry.max", &r.max, node)? {
                p.max_ms = v;
            } else if p.max_ms < p.initial_ms {
                p.max_ms = p.initial_ms;
            }
            if let Some(v) = r.jitter {
                p.jitter = v;
            }
            p.deadline_ms = dur("retry.deadline", &r.deadline, node)?;
            p.validate().map_err(|e| err("retry", e.to_string()))?;
            def.retry = p;
        }
        Ok(def)
    }
}
