//! A scheduler's state: its active runs in memory (each a weir-core
//! `RunTracker` over its node records, with the mapped nodes whose members
//! run), the definitions they use, and the helpers every concern shares to
//! load a run and build a node's ticket.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ractor::{ActorProcessingErr, ActorRef};
use serde_json::Value;
use weir_core::graph::{Graph, GraphDef};
use weir_core::mapped::{Ledger, Members};
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::queue::Job;
use weir_core::readiness::{current_records, RunTracker};

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::events::EngineEvent;
use crate::msg::scheduler::SchedulerMsg;
use crate::names::Names;
use crate::records::graph::{GraphRunRecord, RunState, TaskInput};
use crate::records::keys::{def_key, run_key};
use crate::store::{Expiring, Store};

use super::settings::SchedulerSettings;

/// A mapped node whose members run.
pub(super) struct MapRun {
    /// The generation.
    pub rerun: u32,
    /// Its ledger, durable.
    pub ledger: Ledger,
    /// Where each member is.
    pub members: Members,
    /// The items, for the members' payloads.
    pub items: Arc<Vec<Value>>,
    /// A top-up is asked for and not yet handled.
    pub topup_pending: bool,
}

pub(super) struct ActiveRun {
    pub(super) partition: Partition,
    pub(super) graph: Arc<Graph>,
    pub(super) record: GraphRunRecord,
    pub(super) bytes: Vec<u8>,
    pub(super) tracker: RunTracker,
    /// The rerun count of each node's current record, if it has one.
    pub(super) recorded: Vec<Option<u32>>,
    /// Nodes submitted at their expected count since loaded.
    pub(super) submitted: HashSet<usize>,
    /// Mapped nodes whose members run, by node index.
    pub(super) maps: HashMap<usize, MapRun>,
}

impl ActiveRun {
    pub(super) fn expected(&self, idx: usize) -> u32 {
        let name = &self.graph.node_at(idx).name;
        self.record.expected_reruns.get(name).copied().unwrap_or(0)
    }
}

/// The scheduler's state.
pub struct SchedulerState {
    pub(super) graph: Name,
    pub(super) names: Names,
    pub(super) store: Store,
    pub(super) clock: Clock,
    pub(super) events: EventSender,
    pub(super) settings: SchedulerSettings,
    pub(super) adopted: Option<String>,
    pub(super) defs: HashMap<String, Arc<Graph>>,
    pub(super) runs: BTreeMap<String, ActiveRun>,
    /// Completion notices still to drop ([`SchedulerMsg::DropNotices`]).
    pub(super) drop_notices: u32,
    /// Downstreams submitted ahead of an upstream's record, by the
    /// upstream's key, until their answers come: (run, ids).
    pub(super) presubmits: HashMap<Arc<str>, (String, NodeIds)>,
    /// Runs settled but not yet synced: their events wait for the sync.
    pub(super) unsynced_settles: Vec<EngineEvent>,
    /// Itself, to schedule [`SchedulerMsg::SyncSettled`].
    pub(super) myself: Option<ActorRef<SchedulerMsg>>,
    /// The instant of the earliest [`SchedulerMsg::RunTimeouts`] timer
    /// armed and not yet fired: one timer at a time covers every run.
    pub(super) timeout_armed: Option<u64>,
    /// Nodes held by `depends_on_past`, by the partition they wait for:
    /// (run, node index).
    pub(super) past_waits: BTreeMap<String, std::collections::BTreeSet<(String, usize)>>,
    /// SLA miss keys known to be recorded (or recorded by this scheduler).
    pub(super) sla_seen: HashSet<String>,
    /// The instant of the [`SchedulerMsg::SlaCheck`] timer armed, if any.
    pub(super) sla_armed: Option<u64>,
}

pub(super) type Res<T> = Result<T, ActorProcessingErr>;

/// Jobs of one run's nodes, with (node index, run id) for each, in order.
pub(super) type JobsOf = (Vec<Job>, NodeIds);

/// Nodes of a run with the run ids of their task instances.
pub(super) type NodeIds = Vec<(usize, String)>;

/// The run's params, over the definition's defaults: a record that lacks
/// some (written by an older weir) still renders every declared one.
pub(super) fn run_params(run: &ActiveRun) -> BTreeMap<String, String> {
    if run.record.params.len() == run.graph.def().params.len() {
        run.record.params.clone()
    } else {
        let mut p = run.graph.def().params.clone();
        p.extend(run.record.params.clone());
        p
    }
}

/// The ticket of node `node` (or of one of its members) under `key`: its
/// task, pool, target, retry policy, timeout, priority and sensor, and
/// (for the node itself, not a member) the assets its success
/// materializes.
pub(super) fn node_job(
    node: &weir_core::graph::NodeDef,
    key: &str,
    input: &TaskInput,
    due_ms: u64,
    notify: &Arc<str>,
) -> Res<Job> {
    let payload =
        weir_core::codec::encode(input).map_err(|e| format!("task input of {key}: {e}"))?;
    Ok(Job {
        key: Arc::from(key),
        task: Arc::from(node.task.task.as_str()),
        pool: Arc::from(node.pool.as_str()),
        target: node.target.as_ref().map(|t| Arc::from(t.as_str())),
        due_ms,
        payload,
        policy: node.retry.clone(),
        timeout_ms: node.timeout_ms,
        notify: Some(notify.clone()),
        // Node records live as long as their run: the run's expiry
        // deletes them.
        retention_ms: Some(0),
        priority: node.priority,
        sensor: node.sensor.map(Box::new),
        produces: if input.member.is_some() {
            Vec::new()
        } else {
            node.produces
                .iter()
                .map(|a| Arc::from(a.as_str()))
                .collect()
        },
    })
}

/// When a ticket of `run` submitted at `now` may first be handed out: at
/// once, or at the instant a prepared run waits for.
pub(super) fn run_due_ms(run: &ActiveRun, now: u64) -> u64 {
    run.record.not_before_ms.map_or(now, |at| at.max(now))
}

/// The record a start of a withdrawn run writes over it: active again,
/// as `fresh` asks (its instant, params, definition), every node one rerun
/// on, so its tickets are new instances and the withdrawn (cancelled) ones
/// stay superseded. `None` when the stored run is not withdrawn (it exists,
/// and a start does nothing).
pub(super) fn revive(
    store: &Store,
    key: &str,
    mut fresh: GraphRunRecord,
    nodes: &[Name],
) -> Result<Option<(GraphRunRecord, Vec<u8>)>, crate::store::StoreError> {
    let Some((stored, current)) = store.get_with_raw::<GraphRunRecord>(key)? else {
        return Ok(None);
    };
    if stored.state != RunState::Withdrawn {
        return Ok(None);
    }
    for name in nodes {
        let rerun = stored.expected_reruns.get(name).copied().unwrap_or(0);
        fresh
            .expected_reruns
            .insert(name.clone(), rerun.saturating_add(1));
    }
    let unexpire: Vec<Expiring> = stored.expiry(key).into_iter().collect();
    let bytes = store.encode("run record", &fresh)?;
    if !store.compare_and_put_unsynced(key, Some(&current), Some(&bytes), &[], &unexpire)? {
        return Ok(None);
    }
    tracing::info!(run = key, "withdrawn graph run revived");
    Ok(Some((fresh, bytes)))
}

impl SchedulerState {
    /// Sends `msg` to itself at `at_ms` unless the timer of its kind,
    /// armed for `armed`, fires as early: one timer at a time covers every
    /// deadline of a kind. Returns the instant now armed.
    pub(super) fn arm_at(
        &self,
        armed: Option<u64>,
        at_ms: u64,
        msg: fn() -> crate::msg::scheduler::SchedulerMsg,
    ) -> Option<u64> {
        if armed.is_some_and(|at| at <= at_ms) {
            return armed;
        }
        let Some(me) = &self.myself else {
            return armed;
        };
        let wait = at_ms.saturating_sub(self.clock.now_ms());
        me.send_after(std::time::Duration::from_millis(wait), msg);
        Some(at_ms)
    }

    pub(super) fn graph_def(&mut self, hash: &str) -> Res<Arc<Graph>> {
        if let Some(g) = self.defs.get(hash) {
            return Ok(g.clone());
        }
        let def: GraphDef = self.store.get(&def_key(hash))?.ok_or_else(|| {
            format!(
                "graph {}: definition {hash} is not in the store",
                self.graph
            )
        })?;
        let graph = Arc::new(
            def.validate()
                .map_err(|e| format!("stored definition {hash}: {e}"))?,
        );
        self.defs.insert(hash.to_string(), graph.clone());
        Ok(graph)
    }

    /// Reads a run and its node records from the store.
    pub(super) fn load_run(&mut self, partition: &Partition) -> Res<Option<ActiveRun>> {
        let key = run_key(self.graph.as_str(), partition);
        let Some(bytes) = self.store.get_raw(&key)? else {
            return Ok(None);
        };
        let record: GraphRunRecord =
            weir_core::codec::decode(&bytes).map_err(|e| format!("run record {key}: {e}"))?;
        let graph = self.graph_def(&record.definition)?;
        let latest = crate::views::run::latest_node_records(&self.store, &graph, partition)?;
        let current = current_records(&record.expected_reruns, &latest);
        let tracker = RunTracker::new(&graph, &current);
        let mut recorded = vec![None; graph.len()];
        for (name, r) in &current {
            if let Some(i) = graph.index_of(name.as_str()) {
                recorded[i] = Some(r.rerun);
            }
        }
        Ok(Some(ActiveRun {
            partition: partition.clone(),
            graph,
            record,
            bytes,
            tracker,
            recorded,
            submitted: HashSet::new(),
            maps: HashMap::new(),
        }))
    }

    /// Loads run `partition` for an operator's change, active or settled;
    /// a cancelled run is refused. Returns its key.
    pub(super) fn load_for_change(&mut self, partition: &Partition) -> Res<String> {
        let p = partition.to_string();
        if !self.runs.contains_key(&p) {
            let run = self
                .load_run(partition)?
                .ok_or_else(|| format!("graph {} has no run for partition {p}", self.graph))?;
            if run.record.state == RunState::Cancelled {
                return Err(format!(
                    "the run of graph {} for partition {p} is cancelled",
                    self.graph
                )
                .into());
            }
            self.runs.insert(p.clone(), run);
        }
        Ok(p)
    }

    /// A run loaded only for a change and left settled goes back out.
    pub(super) fn unload_if_settled(&mut self, p: &str) {
        if let Some(run) = self.runs.get(p) {
            if run.record.state != RunState::Active {
                self.runs.remove(p);
            }
        }
    }
}
