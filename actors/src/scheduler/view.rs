//! Read-only views of graph runs, from the store alone: what `weir status`
//! shows and `Engine::graph_run` returns. They work with or without a
//! running engine (the CLI opens the store read-only when none runs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_core::graph::{Graph, GraphDef};
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::readiness::{current_records, node_states, NodeState};

use super::records::{
    def_key, node_records_prefix, parse_run_id, run_key, runs_prefix, GraphRunRecord, NodeRecord,
    RunState,
};
use crate::done::{DoneRecord, DONE_PREFIX};
use crate::store::{Store, StoreError};

/// A node of a run, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeView {
    /// The node.
    pub node: String,
    /// pending, ready (submitted, not ended), succeeded, failed, skipped,
    /// upstream_failed, cancelled.
    pub state: String,
    /// The rerun count of its current instance.
    pub rerun: u32,
    /// Attempts of its current record.
    pub attempts: u32,
    /// Its last error.
    pub error: Option<String>,
    /// When its last attempt started.
    pub started_ms: Option<u64>,
    /// When it ended.
    pub finished_ms: Option<u64>,
    /// Its output (of a succeeded record).
    pub output_bytes: usize,
}

/// A graph run, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphRunView {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// Its state.
    pub state: RunState,
    /// Its definition.
    pub definition: String,
    /// When it started.
    pub requested_at_ms: u64,
    /// When it settled.
    pub settled_at_ms: Option<u64>,
    /// Its params, as it started with them.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Nodes in topological order.
    pub nodes: Vec<NodeView>,
}

/// A run in a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The partition.
    pub partition: String,
    /// The record.
    pub record: GraphRunRecord,
}

/// A node state's name, as events and views show it.
pub fn state_name(s: NodeState) -> &'static str {
    match s {
        NodeState::Pending => "pending",
        NodeState::Ready => "ready",
        NodeState::Succeeded => "succeeded",
        NodeState::Failed => "failed",
        NodeState::Skipped => "skipped",
        NodeState::UpstreamFailed => "upstream_failed",
        NodeState::Cancelled => "cancelled",
    }
}

/// The runs of `graph`, optionally only those in `state`, by partition.
pub fn list_runs(
    store: &Store,
    graph: &str,
    state: Option<RunState>,
) -> Result<Vec<RunSummary>, StoreError> {
    let prefix = runs_prefix(graph);
    Ok(store
        .scan::<GraphRunRecord>(&prefix)?
        .into_iter()
        .filter(|(_, r)| state.is_none_or(|s| r.state == s))
        .map(|(k, record)| RunSummary {
            partition: k[prefix.len()..].to_string(),
            record,
        })
        .collect())
}

/// The newest node record of each node of `graph` in the run of
/// `partition` (whatever its rerun count; `current_records` decides which
/// are current). Records of names the definition does not hold are left out.
pub fn latest_node_records(
    store: &Store,
    graph: &Graph,
    partition: &Partition,
) -> Result<BTreeMap<Name, NodeRecord>, StoreError> {
    let mut latest: BTreeMap<Name, NodeRecord> = BTreeMap::new();
    for (k, done) in
        store.scan::<DoneRecord>(&node_records_prefix(graph.name().as_str(), partition))?
    {
        let Some(id) = parse_run_id(&k[DONE_PREFIX.len()..]) else {
            continue;
        };
        let Ok(name) = Name::new(id.node) else {
            continue;
        };
        if graph.index_of(name.as_str()).is_none() {
            continue;
        }
        if latest.get(&name).is_none_or(|r| r.rerun < id.rerun) {
            latest.insert(
                name,
                NodeRecord {
                    rerun: id.rerun,
                    done,
                },
            );
        }
    }
    Ok(latest)
}

/// The run of `graph` for `partition` with its nodes' states.
pub fn graph_run(
    store: &Store,
    graph: &str,
    partition: &Partition,
) -> Result<Option<GraphRunView>, StoreError> {
    let Some(record) = store.get::<GraphRunRecord>(&run_key(graph, partition))? else {
        return Ok(None);
    };
    let Some(def) = store.get::<GraphDef>(&def_key(&record.definition))? else {
        return Err(StoreError::Inconsistent {
            dir: store.dir().to_path_buf(),
            tree: "records",
            what: format!(
                "run {graph}/{partition} names definition {} which is not stored",
                record.definition
            ),
        });
    };
    let g: Graph = def.validate().map_err(|e| StoreError::Inconsistent {
        dir: store.dir().to_path_buf(),
        tree: "records",
        what: format!("definition {}: {e}", record.definition),
    })?;
    let latest = latest_node_records(store, &g, partition)?;
    let current = current_records(&record.expected_reruns, &latest);
    let states = node_states(&g, &current);
    let nodes = g
        .topological_order()
        .iter()
        .map(|&i| {
            let node = g.node_at(i);
            let name = node.name.as_str();
            let expected = record.expected_reruns.get(name).copied().unwrap_or(0);
            match current.get(name) {
                Some(r) => NodeView {
                    node: name.to_string(),
                    state: state_name(states[i]).to_string(),
                    rerun: r.rerun,
                    attempts: r.done.attempts,
                    error: r.done.error.clone(),
                    started_ms: r.done.started_ms,
                    finished_ms: Some(r.done.finished_ms),
                    output_bytes: r.done.output_len() as usize,
                },
                None => NodeView {
                    node: name.to_string(),
                    state: state_name(states[i]).to_string(),
                    rerun: expected,
                    attempts: 0,
                    error: None,
                    started_ms: None,
                    finished_ms: None,
                    output_bytes: 0,
                },
            }
        })
        .collect();
    Ok(Some(GraphRunView {
        graph: graph.to_string(),
        partition: partition.to_string(),
        state: record.state,
        definition: record.definition,
        requested_at_ms: record.requested_at_ms,
        settled_at_ms: record.settled_at_ms,
        params: record.params,
        nodes,
    }))
}
