//! SLA misses: one record per run and node that missed its SLA.
//!
//! The record `sla/<graph>/<partition>/<node>` (`<node>` is `@run` for the
//! graph's own SLA, a name no node can have) is created once, by a
//! compare-and-put that only writes where nothing is: the scheduler that
//! finds a miss again after a restart finds the record and does nothing.
//! It expires with the run's retention.

use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

/// What stands for the run itself in a miss key.
pub const RUN_SLA: &str = "@run";

/// The prefix of every miss record.
pub const SLA_PREFIX: &str = "sla/";

/// The key of the miss of `node` (None: the run) of a run.
pub fn sla_key(graph: &str, partition: &str, node: Option<&str>) -> String {
    format!(
        "{SLA_PREFIX}{graph}/{partition}/{}",
        node.unwrap_or(RUN_SLA)
    )
}

/// The prefix of the misses of a run.
pub fn sla_run_prefix(graph: &str, partition: &str) -> String {
    format!("{SLA_PREFIX}{graph}/{partition}/")
}

/// The prefix of a graph's misses.
pub fn sla_graph_prefix(graph: &str) -> String {
    format!("{SLA_PREFIX}{graph}/")
}

/// A missed SLA: what on_sla_miss reads on its stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SlaMiss {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// The node whose SLA it is; none for the graph's own (the run's).
    pub node: Option<String>,
    /// The SLA, as written (`1h`).
    pub sla: String,
    /// The SLA in ms.
    pub sla_ms: u64,
    /// What it counts from: `window_end`, `due` or `start`.
    pub anchor: String,
    /// That instant, in ms since the epoch.
    pub anchor_ms: u64,
    /// The deadline missed, in ms since the epoch.
    pub deadline_ms: u64,
    /// The deadline, RFC 3339 in the graph's zone.
    pub deadline: String,
    /// When the miss was found, in ms since the epoch.
    pub detected_at_ms: u64,
    /// The node's state then (the run's, for the graph's own SLA).
    pub state: String,
}

/// The misses of a run, oldest key first.
pub fn run_misses(store: &Store, graph: &str, partition: &str) -> Result<Vec<SlaMiss>, StoreError> {
    Ok(store
        .scan::<SlaMiss>(&sla_run_prefix(graph, partition))?
        .into_iter()
        .map(|(_, m)| m)
        .collect())
}

/// How many misses of `graph` are recorded (within the runs' retention).
pub fn graph_miss_count(store: &Store, graph: &str) -> Result<usize, StoreError> {
    Ok(store.scan_keys(&sla_graph_prefix(graph))?.len())
}
