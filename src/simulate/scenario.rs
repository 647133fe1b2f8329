//! The scenario file of `weir simulate`: the span, duration models,
//! failures and inputs (TOML). Read into [`ScenarioFile`] (unknown fields
//! are errors), then resolved against the definitions into a [`Scenario`]:
//! instants to ms, durations to models, and every graph, node, pool and
//! target name checked. Every error names the file, the line and the field.
//!
//! ```toml
//! from = "2026-11-02T00:00:00Z"   # the span: from, and until or days
//! days = 7
//!
//! [[durations]]                    # most specific wins: graph+node, graph, pool, all
//! lognormal = { p50 = "2m", p99 = "10m" }
//!
//! [[durations]]
//! graph = "etl"
//! node = "load"
//! uniform = ["5m", "15m"]
//!
//! [[durations]]                    # what it took when it last ran (the data
//! graph = "etl"                    # directory's records: --data, else the
//! node = "extract"                 # definitions' own)
//! from_history = true
//!
//! [[failures]]                     # the warehouse is down Tuesday 09:00-11:00
//! kind = "target_down"
//! target = "warehouse"
//! at = "2026-11-03T09:00:00Z"      # or "+1d9h": after the span's start
//! for = "2h"
//!
//! [[failures]]                     # the leader of a replicated engine lost:
//! kind = "leader_lost"             # a new one takes over after an election
//! at = "+2d14h"                    # timeout drawn from this range
//! election_timeout = ["400ms", "600ms"]
//!
//! [[failures]]                     # extract fails 5% of its attempts
//! kind = "node"
//! graph = "etl"
//! node = "extract"
//! probability = 0.05
//!
//! [[inputs]]
//! kind = "backfill"
//! at = "+1h"
//! graph = "etl"
//! from = "2026-10-26"
//! to = "2026-11-01"
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;
use weir_core::simulate::model::{DurationModel, Empirical};

/// The most virtual days a scenario may span.
pub const SPAN_DAYS_MAX: u64 = 366;
/// The largest scenario file read, in bytes.
pub const FILE_BYTES_MAX: u64 = 1 << 20;
/// How long an attempt takes by default (no duration model matches it).
pub const DURATION_DEFAULT_MS: u64 = 1_000;
/// How long a call to a down target takes to fail by default.
pub const DOWN_FAILS_AFTER_MS: u64 = 5_000;
/// The most keys a generated inventory may list.
pub const KEYS_MAX: usize = 1_000_000;

/// A scenario error: what, and where.
#[derive(Debug, thiserror::Error)]
#[error("scenario {}{}: {what}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct ScenarioError {
    /// The file.
    pub file: PathBuf,
    /// The line, when known.
    pub line: Option<usize>,
    /// What is wrong, naming the field.
    pub what: String,
}

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// The default seed (`--seed` overrides).
    #[serde(default)]
    pub seed: Option<u64>,
    /// The span's start.
    pub from: Spanned<String>,
    /// The span's end.
    #[serde(default)]
    pub until: Option<Spanned<String>>,
    /// The span's length in days, when `until` is not given.
    #[serde(default)]
    pub days: Option<Spanned<u64>>,
    /// Duration models.
    #[serde(default)]
    pub durations: Vec<Spanned<DurationFile>>,
    /// Failures.
    #[serde(default)]
    pub failures: Vec<Spanned<FailureFile>>,
    /// Inputs at instants.
    #[serde(default)]
    pub inputs: Vec<Spanned<InputFile>>,
    /// A keyed graph's keys: a list, or a count (`key-00001`…).
    #[serde(default)]
    pub keys: BTreeMap<String, Spanned<KeysFile>>,
    /// Outputs of nodes (JSON text), for templates and mapped nodes.
    #[serde(default)]
    pub outputs: Vec<Spanned<OutputFile>>,
}

/// A duration model as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DurationFile {
    /// The graph it applies to.
    #[serde(default)]
    pub graph: Option<String>,
    /// The node (of `graph`).
    #[serde(default)]
    pub node: Option<String>,
    /// The pool it applies to.
    #[serde(default)]
    pub pool: Option<String>,
    /// A fixed duration.
    #[serde(default)]
    pub fixed: Option<String>,
    /// A uniform range `[min, max]`.
    #[serde(default)]
    pub uniform: Option<[String; 2]>,
    /// A log-normal by its median and 99th percentile.
    #[serde(default)]
    pub lognormal: Option<LognormalFile>,
    /// The recorded durations of the data directory (`--data`, else the
    /// definitions' own): each node draws from its own.
    #[serde(default)]
    pub from_history: Option<bool>,
}

/// A log-normal model as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LognormalFile {
    /// The median.
    pub p50: String,
    /// The 99th percentile.
    pub p99: String,
}

/// A failure as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureFile {
    /// `node` or `target_down`.
    pub kind: String,
    /// The node's graph.
    #[serde(default)]
    pub graph: Option<String>,
    /// The node.
    #[serde(default)]
    pub node: Option<String>,
    /// The chance an attempt fails (node).
    #[serde(default)]
    pub probability: Option<f64>,
    /// The exit code a failing attempt has (node): a code the node lists
    /// in `permanent_exit_codes` fails without retry.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The target (target_down).
    #[serde(default)]
    pub target: Option<String>,
    /// When it starts (an instant, or `+DURATION` after the span's start).
    #[serde(default)]
    pub at: Option<String>,
    /// How long it lasts.
    #[serde(default, rename = "for")]
    pub lasts: Option<String>,
    /// How long a call to the down target takes to fail.
    #[serde(default)]
    pub fails_after: Option<String>,
    /// The pool whose worker is lost (worker_lost).
    #[serde(default)]
    pub pool: Option<String>,
    /// The actor that crashes (actor_crash): queue, pool, breaker,
    /// scheduler, trigger.
    #[serde(default)]
    pub actor: Option<String>,
    /// How long the engine stays down (engine_restart; default 1s).
    #[serde(default)]
    pub down: Option<String>,
    /// The replicated engine's election timeout range `[min, max]`
    /// (leader_lost; default the range `weir serve` members use).
    #[serde(default)]
    pub election_timeout: Option<[String; 2]>,
}

/// An input as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    /// `backfill`, `signal`, `start` or `inventory`.
    pub kind: String,
    /// When.
    pub at: String,
    /// The graph.
    pub graph: String,
    /// backfill: the first partition.
    #[serde(default)]
    pub from: Option<String>,
    /// backfill: the last partition.
    #[serde(default)]
    pub to: Option<String>,
    /// start: the partition.
    #[serde(default)]
    pub partition: Option<String>,
    /// signal: the key.
    #[serde(default)]
    pub key: Option<String>,
    /// signal: run now, not after the debounce.
    #[serde(default)]
    pub immediate: Option<bool>,
    /// inventory: the keys from then on.
    #[serde(default)]
    pub keys: Option<KeysFile>,
}

/// Keys as written: a list, or a count.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum KeysFile {
    /// These keys.
    List(Vec<String>),
    /// `key-00001` to `key-N`.
    Count(usize),
}

/// A node's output as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputFile {
    /// The graph.
    pub graph: String,
    /// The node.
    pub node: String,
    /// The output, JSON text.
    pub json: String,
}

/// Which attempts a duration model applies to.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Every attempt.
    All,
    /// The attempts of a pool's nodes.
    Pool(String),
    /// A graph's.
    Graph(String),
    /// One node's.
    Node(String, String),
}

/// The duration model of a scope, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Durations {
    /// A model given in the file.
    Model(DurationModel),
    /// `from_history`: each node's recorded durations, by (graph, node),
    /// read from the data directory after the file is resolved
    /// (`history::fill`). A node of the scope with none falls to the next
    /// scope's model.
    History(BTreeMap<(String, String), Empirical>),
}

/// A failure, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Attempts of a node fail with `probability`, over `[from_ms, until_ms)`.
    Node {
        /// The graph.
        graph: String,
        /// The node.
        node: String,
        /// The chance.
        probability: f64,
        /// The exit code, when given.
        exit_code: Option<i32>,
        /// Permanent: the code is one of the node's permanent codes.
        permanent: bool,
        /// From.
        from_ms: u64,
        /// Until.
        until_ms: u64,
    },
    /// Every attempt at a node with `target` started in `[from_ms, until_ms)`
    /// fails after `fails_after_ms`.
    TargetDown {
        /// The target.
        target: String,
        /// From.
        from_ms: u64,
        /// Until.
        until_ms: u64,
        /// How long a call takes to fail.
        fails_after_ms: u64,
    },
}

/// A fault at an instant, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The engine is killed (every actor at once, nothing graceful) and
    /// reopened on its store `down_ms` later, recovering as after a crash.
    EngineRestart {
        /// How long it is down.
        down_ms: u64,
    },
    /// The first worker of a pool is lost (killed): its attempts are
    /// requeued and the supervisor starts a new one.
    WorkerLost {
        /// The pool.
        pool: String,
    },
    /// A replicated engine's leader is lost: its engine is killed as in
    /// `EngineRestart`, and a new leader opens an engine on the same store
    /// (what the group committed) after a failover drawn from the election
    /// timeout range `[election_min_ms, election_max_ms)` (the time its
    /// followers wait before one stands), its pools' workers re-joining.
    LeaderLost {
        /// The election timeout's least.
        election_min_ms: u64,
        /// Its most (exclusive; equal to the least: always that).
        election_max_ms: u64,
    },
    /// An actor crashes (killed): the supervisor restarts it, and it
    /// rebuilds its state from the store.
    ActorCrash {
        /// Which: queue, pool, breaker, scheduler or trigger (the first
        /// of its kind).
        actor: String,
    },
}

/// The actors an `actor_crash` may name.
pub const CRASHABLE: [&str; 5] = ["queue", "pool", "breaker", "scheduler", "trigger"];

/// An input, resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A backfill of `[from, to]`.
    Backfill {
        /// First partition.
        from: String,
        /// Last partition.
        to: String,
    },
    /// A start of one partition.
    Start {
        /// The partition.
        partition: String,
    },
    /// A signal for a key.
    Signal {
        /// The key.
        key: String,
        /// Run now.
        immediate: bool,
    },
    /// The inventory lists these keys from now on.
    Inventory {
        /// The keys.
        keys: Vec<String>,
    },
}

/// A scenario, resolved against the definitions.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it was read from.
    pub file: PathBuf,
    /// Its seed, when it sets one.
    pub seed: Option<u64>,
    /// The span's start, ms since the epoch.
    pub from_ms: u64,
    /// The span's end.
    pub until_ms: u64,
    /// Duration models by scope.
    pub durations: BTreeMap<Scope, Durations>,
    /// The scopes whose model is `from_history`, with the line that asks
    /// for it (for errors).
    pub history_lines: BTreeMap<Scope, Option<usize>>,
    /// Failures.
    pub failures: Vec<Failure>,
    /// Inputs by instant (in file order at one instant), with their graph.
    pub inputs: Vec<(u64, String, Input)>,
    /// Faults by instant (in file order at one instant).
    pub faults: Vec<(u64, Fault)>,
    /// Keys of keyed graphs, replacing their inventories.
    pub keys: BTreeMap<String, Vec<String>>,
    /// Outputs of nodes, by (graph, node).
    pub outputs: BTreeMap<(String, String), Vec<u8>>,
}
