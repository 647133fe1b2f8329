//! The shapes of a definition file as TOML gives them (with spans, so a
//! fault names its line): the graph and its sections, nodes, sensors, HTTP
//! calls and retries. Checked and turned into weir-core's definitions by
//! `graph_checks` and `node_checks`.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

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
    /// The IANA zone of its windows and cron expression (UTC by default).
    #[serde(default)]
    pub timezone: Option<Spanned<String>>,
    /// Every node's `depends_on_past` (a node may say otherwise).
    #[serde(default)]
    pub depends_on_past: bool,
    /// Every node's `wait_for_downstream` (a node may say otherwise).
    #[serde(default)]
    pub wait_for_downstream: bool,
    /// How long settled runs are kept.
    #[serde(default)]
    pub retention: Option<Spanned<String>>,
    /// How long a run may stay active before it fails.
    #[serde(default)]
    pub run_timeout: Option<Spanned<String>>,
    /// The most active runs.
    #[serde(default)]
    pub max_active_runs: Option<Spanned<u32>>,
    /// A command run when a run settles failed, the summary on its stdin.
    #[serde(default)]
    pub on_failure: Option<Spanned<Vec<String>>>,
    /// A command run when a run settles complete.
    #[serde(default)]
    pub on_success: Option<Spanned<Vec<String>>>,
    /// A command run once per SLA miss, the miss on its stdin.
    #[serde(default)]
    pub on_sla_miss: Option<Spanned<Vec<String>>>,
    /// A run not complete this long after its window ends has missed.
    #[serde(default)]
    pub sla: Option<Spanned<String>>,
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
    /// The files the command leaves under `$WEIR_ARTIFACTS_OUT` that its
    /// downstreams receive: names or globs (`raw.csv`, `reports/*.html`).
    #[serde(default)]
    pub artifacts: Vec<String>,
    /// The largest artifact (`5GiB` by default).
    pub artifact_bytes_max: Option<String>,
    /// The most bytes of one attempt's artifacts (`20GiB` by default).
    pub artifacts_bytes_max: Option<String>,
    /// A registered task instead of a command.
    pub task: Option<String>,
    /// The registered task's config.
    pub config: Option<toml::Value>,
    /// An HTTP call instead of a command.
    pub http: Option<HttpFile>,
    /// Its place in its pool's queue (higher first; default 0).
    pub priority: Option<i64>,
    /// Wait for the same node of the previous partition (default: the
    /// graph's `depends_on_past`).
    pub depends_on_past: Option<bool>,
    /// With `depends_on_past`, also wait for that node's direct downstreams
    /// (default: the graph's `wait_for_downstream`).
    pub wait_for_downstream: Option<bool>,
    /// The node not succeeded or skipped this long after its run's window
    /// ends has missed its SLA.
    pub sla: Option<String>,
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
