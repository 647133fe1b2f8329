//! Read-only views of graph runs, from the store alone: what `weir status`
//! shows and `Engine::graph_run` returns. They work with or without a
//! running engine (the CLI opens the store read-only when none runs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_core::graph::{Graph, GraphDef};
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::readiness::{current_records, node_states, NodeState};

use crate::records::done::{DoneRecord, DoneStatus};
use crate::records::graph::{GraphRunRecord, NodeRecord, RunState};
use crate::records::keys::{
    def_key, done_key, ledger_key, member_id, node_records_prefix, parse_run_id, run_key,
    runs_prefix, DONE_PREFIX,
};
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
    /// A sensor's checks that found its condition not met.
    #[serde(default)]
    pub pokes: u32,
    /// A mapped node's members (of its current generation), once it has a
    /// ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<MembersView>,
    /// While a rerun of the node has no record yet, the record it reruns
    /// (its state, error and attempts stay visible until the rerun ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousRecord>,
    /// The artifacts of its current record (name, size, content hash).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<weir_core::artifact::ArtifactRef>,
}

/// The record a rerun supersedes, shown beside the rerun until it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PreviousRecord {
    /// Its rerun count.
    pub rerun: u32,
    /// succeeded, failed, skipped, upstream_failed, cancelled.
    pub state: String,
    /// Attempts it made.
    pub attempts: u32,
    /// Its error.
    pub error: Option<String>,
    /// When it ended.
    pub finished_ms: u64,
}

/// The most members a view lists one by one (the counts cover all).
pub const MEMBER_VIEWS_MAX: usize = 1_000;
/// The longest item a member's view shows (its head).
pub const MEMBER_ITEM_BYTES_SHOWN: usize = 200;

/// A mapped node's members, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MembersView {
    /// The generation shown (the node's rerun count).
    pub rerun: u32,
    /// Members in all.
    pub total: usize,
    /// Succeeded (kept ones included).
    pub succeeded: usize,
    /// Failed.
    pub failed: usize,
    /// Cancelled: their ticket was, or their run was before they ended.
    #[serde(default)]
    pub cancelled: usize,
    /// Skipped.
    pub skipped: usize,
    /// Not ended yet (waiting or running).
    pub pending: usize,
    /// Kept from an earlier generation (not run again).
    pub kept: usize,
    /// The first [`MEMBER_VIEWS_MAX`] members, in item order.
    pub list: Vec<MemberView>,
}

/// One member, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemberView {
    /// Its index.
    pub index: usize,
    /// pending (not ended), succeeded, failed, cancelled, skipped.
    pub state: String,
    /// The generation whose record it is (its run id's rerun part).
    pub rerun: u32,
    /// Attempts of its record.
    pub attempts: u32,
    /// Its error.
    pub error: Option<String>,
    /// Its item, as compact JSON (its head).
    pub item: Option<String>,
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
    /// A run prepared ahead: the instant it starts at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_ms: Option<u64>,
    /// When it settled.
    pub settled_at_ms: Option<u64>,
    /// Its params, as it started with them.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Why it failed, when no node's failure says it (its run_timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
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

/// The members of generation `rerun` of mapped node `idx`, from its
/// ledger and its members' records; `None` before it has a ledger.
fn members_view(
    store: &Store,
    g: &Graph,
    partition: &Partition,
    idx: usize,
    rerun: u32,
    current: &BTreeMap<Name, NodeRecord>,
    run_cancelled: bool,
) -> Result<Option<MembersView>, StoreError> {
    let graph = g.name().as_str();
    let node = g.node_at(idx);
    let name = node.name.as_str();
    let Some(ledger) =
        store.get::<weir_core::mapped::Ledger>(&ledger_key(graph, partition, name, rerun))?
    else {
        return Ok(None);
    };
    let items: Vec<serde_json::Value> = match node.map.as_ref().map(|m| &m.over) {
        Some(weir_core::mapped::MapSource::Items(items)) => items.clone(),
        Some(weir_core::mapped::MapSource::Upstream(u)) => current
            .get(u)
            .and_then(|r| r.done.load_output(store).ok())
            .and_then(|o| serde_json::from_slice::<Vec<serde_json::Value>>(&o).ok())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut v = MembersView {
        rerun,
        total: ledger.len(),
        succeeded: 0,
        failed: 0,
        cancelled: 0,
        skipped: 0,
        pending: 0,
        kept: ledger.kept(),
        list: Vec::new(),
    };
    for (i, &src) in ledger.sources.iter().enumerate() {
        let key = member_id(graph, partition, name, src, i as u32);
        let done = store.get::<DoneRecord>(&done_key(&key))?;
        let state = match &done {
            // A cancelled run ends its members that had not ended: they
            // will never run.
            None if run_cancelled => {
                v.cancelled += 1;
                DoneStatus::Cancelled.to_string()
            }
            None => {
                v.pending += 1;
                "pending".to_string()
            }
            Some(d) => {
                match d.status {
                    DoneStatus::Succeeded => v.succeeded += 1,
                    DoneStatus::Skipped => v.skipped += 1,
                    DoneStatus::Cancelled => v.cancelled += 1,
                    DoneStatus::Failed | DoneStatus::UpstreamFailed => v.failed += 1,
                }
                d.status.to_string()
            }
        };
        if v.list.len() < MEMBER_VIEWS_MAX {
            v.list.push(MemberView {
                index: i,
                state,
                rerun: src,
                attempts: done.as_ref().map_or(0, |d| d.attempts),
                error: done.and_then(|d| d.error),
                item: items.get(i).map(|it| {
                    let mut t = it.to_string();
                    if t.len() > MEMBER_ITEM_BYTES_SHOWN {
                        let mut cut = MEMBER_ITEM_BYTES_SHOWN;
                        while !t.is_char_boundary(cut) {
                            cut -= 1;
                        }
                        t.truncate(cut);
                        t.push('…');
                    }
                    t
                }),
            });
        }
    }
    Ok(Some(v))
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
    let cancelled = record.state == RunState::Cancelled;
    let withdrawn = record.state == RunState::Withdrawn;
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
                    pokes: r.done.pokes,
                    members: None,
                    previous: None,
                    artifacts: r.done.artifacts.clone(),
                },
                None => NodeView {
                    node: name.to_string(),
                    // A node of a cancelled run without a record never ran
                    // and never will: it is cancelled (mapped nodes and
                    // downstreams included), not pending, running, or
                    // upstream-failed by the node the cancel stopped. A
                    // withdrawn run (prepared, taken back) ran nothing.
                    state: if withdrawn {
                        "withdrawn"
                    } else if cancelled {
                        state_name(NodeState::Cancelled)
                    } else {
                        state_name(states[i])
                    }
                    .to_string(),
                    rerun: expected,
                    attempts: 0,
                    error: None,
                    started_ms: None,
                    finished_ms: None,
                    output_bytes: 0,
                    pokes: 0,
                    members: None,
                    previous: latest.get(name).filter(|r| r.rerun < expected).map(|r| {
                        PreviousRecord {
                            rerun: r.rerun,
                            state: r.done.status.to_string(),
                            attempts: r.done.attempts,
                            error: r.done.error.clone(),
                            finished_ms: r.done.finished_ms,
                        }
                    }),
                    artifacts: Vec::new(),
                },
            }
        })
        .collect::<Vec<NodeView>>();
    let mut nodes = nodes;
    for view in &mut nodes {
        let Some(i) = g.index_of(&view.node) else {
            continue;
        };
        if g.node_at(i).map.is_some() {
            view.members = members_view(store, &g, partition, i, view.rerun, &current, cancelled)?;
        }
    }
    Ok(Some(GraphRunView {
        graph: graph.to_string(),
        partition: partition.to_string(),
        state: record.state,
        definition: record.definition,
        requested_at_ms: record.requested_at_ms,
        not_before_ms: record.not_before_ms,
        settled_at_ms: record.settled_at_ms,
        params: record.params,
        failure: record.failure,
        nodes,
    }))
}
