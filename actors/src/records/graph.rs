//! The records of graphs: definitions by content hash, the adopted
//! definition of each graph, graph runs, and the keys of node records.
//!
//! Keys:
//! - `def/<hash>`: a [`GraphDef`] (adopted once, kept while runs use it);
//! - `graph/<graph>`: [`GraphRecord`], the adopted hash;
//! - `run/<graph>/<partition>`: [`GraphRunRecord`];
//! - `done/<graph>/<partition>/<node>/<rerun>`: the node record, a
//!   [`DoneRecord`] written by the queue with the task instance's Complete,
//!   or by the scheduler for a node decided skipped or upstream-failed. The
//!   same string (without `done/`) is the task instance's run id and its
//!   queue key, so a repeated submit is a no-op. User job keys cannot hold
//!   `/`, so they never collide with run ids.
//! - `done/<graph>/<partition>/<node>/<rerun>/<member>`: the record of one
//!   member of a mapped node, of the generation `<rerun>`, written by the
//!   queue; the same string is the member's run id. A run id of four parts
//!   is a task instance's, of five a member's ([`parse_run_id`] reads only
//!   the first, [`parse_node_key`] both), so the scans of a run's node
//!   records pass over members, and a run's expiry (which deletes
//!   `done/<graph>/<partition>/`) takes them with it.
//! - `map/<graph>/<partition>/<node>/<rerun>`: the [`weir_core::mapped::Ledger`]
//!   of a mapped node's generation, written before its first member is
//!   submitted; deleted with its run.
//! - `asset/<asset>`: an asset's last materialization
//!   ([`super::asset::AssetRecord`]); `assetev/<asset>/<graph>/<partition>/<node>/<rerun>`:
//!   a materialization not yet delivered to the graphs that start on it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_core::names::Name;
use weir_core::readiness::{NodeStatus, Recorded};

use super::done::{DoneRecord, DoneStatus};
// The keys moved to their own file; their paths here stay for the crate's
// users (`weir_actors::scheduler::records::run_id`, …).
pub use super::keys::{
    def_key, graph_key, ledger_key, member_id, node_records_prefix, parse_node_key, parse_run_id,
    run_id, run_key, runs_prefix, RunId, GRAPH_PREFIX, LEDGER_PREFIX,
};

/// A graph's adopted definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphRecord {
    /// The content hash of the adopted definition.
    pub definition: String,
    /// When it was adopted.
    pub adopted_at_ms: u64,
}

/// A graph run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Nodes may still run.
    Active,
    /// Every node succeeded or was skipped.
    Complete,
    /// Some node failed, was upstream-failed or cancelled.
    Failed,
    /// A user cancelled it.
    Cancelled,
    /// It was prepared ahead of its instant (its first tickets waiting in
    /// the queue for it) and taken back before any of them was handed out,
    /// because what made it due changed: no task of it ran. Starting the
    /// partition again revives it with fresh task instances.
    Withdrawn,
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunState::Active => "active",
            RunState::Complete => "complete",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
            RunState::Withdrawn => "withdrawn",
        })
    }
}

impl std::str::FromStr for RunState {
    type Err = String;

    /// The names [`RunState`]'s `Display` writes.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "active" => RunState::Active,
            "complete" => RunState::Complete,
            "failed" => RunState::Failed,
            "cancelled" => RunState::Cancelled,
            "withdrawn" => RunState::Withdrawn,
            other => {
                return Err(format!(
                    "{other:?} is not one of active, complete, failed, cancelled, withdrawn"
                ))
            }
        })
    }
}

/// A graph run (swale's GraphRunRecord).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphRunRecord {
    /// The definition it runs (kept even when another is adopted).
    pub definition: String,
    /// Its state.
    pub state: RunState,
    /// When it was started.
    pub requested_at_ms: u64,
    /// When it settled, if it has.
    #[serde(default)]
    pub settled_at_ms: Option<u64>,
    /// Expected rerun counts after reruns: a record of a node below its
    /// expected count is superseded.
    #[serde(default)]
    pub expected_reruns: BTreeMap<Name, u32>,
    /// How long after settling its records are kept.
    #[serde(default)]
    pub retention_ms: u64,
    /// Its params, resolved when it started (the definition's defaults with
    /// the start's values over them): every attempt of the run, reruns
    /// included, renders `{params.NAME}` from them. Empty for a run of a
    /// definition without params (and for runs written before params
    /// existed); absent from the encoding when empty.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// For a run prepared ahead of its instant: no task of it is handed out
    /// before this instant (ms since the epoch). Absent for a run started
    /// to run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_ms: Option<u64>,
    /// Why the run failed, when no node's failure says it: its
    /// `run_timeout` passed. Absent from the encoding when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// When a run requested at `requested_at_ms` started: at its instant
/// `not_before_ms` when it was prepared ahead (never before its request).
pub fn started_ms(requested_at_ms: u64, not_before_ms: Option<u64>) -> u64 {
    not_before_ms
        .unwrap_or(requested_at_ms)
        .max(requested_at_ms)
}

impl GraphRunRecord {
    /// When the run started: its instant for a run prepared ahead (its
    /// record was written earlier, at `requested_at_ms`), else when it was
    /// requested.
    pub fn started_ms(&self) -> u64 {
        started_ms(self.requested_at_ms, self.not_before_ms)
    }

    /// When a run prepared ahead was prepared; `None` for any other run.
    pub fn prepared_ms(&self) -> Option<u64> {
        (self.started_ms() > self.requested_at_ms).then_some(self.requested_at_ms)
    }

    /// The expiry entry a settled run's record `key` has (settled, plus
    /// its retention); `None` while it is active.
    pub fn expiry(&self, key: &str) -> Option<crate::store::Expiring> {
        self.settled_at_ms.map(|at| crate::store::Expiring {
            at_ms: at.saturating_add(self.retention_ms),
            key: key.to_string(),
        })
    }
}

/// A node record: the done record of a task instance, and its rerun count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRecord {
    /// The rerun count it is of.
    pub rerun: u32,
    /// The record.
    pub done: DoneRecord,
}

/// The readiness status of a done status.
pub fn node_status(status: DoneStatus) -> NodeStatus {
    match status {
        DoneStatus::Succeeded => NodeStatus::Succeeded,
        DoneStatus::Failed => NodeStatus::Failed,
        DoneStatus::Cancelled => NodeStatus::Cancelled,
        DoneStatus::Skipped => NodeStatus::Skipped,
        DoneStatus::UpstreamFailed => NodeStatus::UpstreamFailed,
    }
}

/// The done status of a readiness status.
pub fn done_status(status: NodeStatus) -> DoneStatus {
    match status {
        NodeStatus::Succeeded => DoneStatus::Succeeded,
        NodeStatus::Failed => DoneStatus::Failed,
        NodeStatus::Cancelled => DoneStatus::Cancelled,
        NodeStatus::Skipped => DoneStatus::Skipped,
        NodeStatus::UpstreamFailed => DoneStatus::UpstreamFailed,
    }
}

impl Recorded for NodeRecord {
    fn status(&self) -> NodeStatus {
        node_status(self.done.status)
    }
    fn rerun(&self) -> u32 {
        self.rerun
    }
}

/// What a graph task receives as its payload (weir-core's envelope).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskInput {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// The node.
    pub node: String,
    /// The rerun count.
    pub rerun: u32,
    /// The definition's hash.
    pub definition: String,
    /// The node's task config.
    pub config: serde_json::Value,
    /// The records of its upstreams, by node name.
    pub upstreams: BTreeMap<String, UpstreamRecord>,
    /// The run's params (`{params.NAME}` in templates). Absent from the
    /// encoding when empty; a payload written before params existed reads
    /// as none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// A mapped node's member: its index and its item (`{item}` in
    /// templates). Absent from the encoding for any other attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<MemberInput>,
    /// The graph's zone, which `{partition.start}` is shown in; absent for
    /// UTC (and from payloads written before zones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<weir_core::zone::Zone>,
}

/// What a member of a mapped node carries in its payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemberInput {
    /// Its index: its item's place in the node's items.
    pub index: u32,
    /// The item.
    pub item: serde_json::Value,
}

impl TaskInput {
    /// What a template of this input may read at attempt `attempt` of the
    /// ticket `run_id`: the graph, partition, node, the recorded upstreams
    /// with their outputs (read back from blobs before the attempt), and
    /// the run's params. Everything comes from the payload, so a worker
    /// without definition files renders the same text.
    pub fn scope<'a>(&'a self, attempt: u32, run_id: &'a str) -> weir_core::template::Scope<'a> {
        let mut scope = weir_core::template::Scope::new(
            &self.graph,
            &self.partition,
            &self.node,
            attempt,
            run_id,
            &self.params,
        );
        scope.item = self.member.as_ref().map(|m| &m.item);
        scope.zone = self.zone.unwrap_or_default();
        for (name, up) in &self.upstreams {
            scope.upstreams.insert(
                name.as_str(),
                weir_core::template::Upstream {
                    status: up.status.as_str(),
                    succeeded: up.status == DoneStatus::Succeeded,
                    // A blob the worker has not read back is no output.
                    output: up.output_blob.is_none().then_some(up.output.as_slice()),
                    artifacts: &up.artifacts,
                },
            );
        }
        scope
    }
}

/// An upstream's record as a task sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamRecord {
    /// How it ended.
    pub status: DoneStatus,
    /// Its output. A task is handed it whole; in the ticket, an output
    /// larger than [`crate::store::BLOB_INLINE_BYTES_MAX`] is left empty
    /// here and named by `output_blob`, and the worker reads it back
    /// before the attempt starts.
    #[serde(with = "serde_bytes")]
    pub output: Vec<u8>,
    /// The blob holding the output, in a ticket's payload; `None` in what
    /// a task receives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_blob: Option<crate::store::BlobRef>,
    /// Its rerun count.
    pub rerun: u32,
    /// The artifacts of its succeeding attempt (for a mapped node, every
    /// member's, each name under the member's index: `3/raw.csv`). Left
    /// out of the encoding when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<weir_core::artifact::ArtifactRef>,
}
