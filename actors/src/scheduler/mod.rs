//! The scheduler actor of one graph: starts runs, submits a node when its
//! trigger rule is met, records nodes that can no longer run, settles runs,
//! reruns and cancels (swale's scheduler, as an actor).
//!
//! It keeps every active run of its graph in memory as a
//! [`RunTracker`] (weir-core), so one node's terminal record costs time in
//! proportion to the node's degree. Everything it knows is in the store:
//! run records (`run/…`), node records (`done/…`, written by the queue
//! with each Complete, or by the scheduler for decided nodes) and
//! definitions, so a restarted scheduler rebuilds its runs and reconciles
//! them at once.
//!
//! Order of effects: a decided node's record is durable before any node it
//! makes ready is submitted; a submit (an Enqueue, idempotent by run id) is
//! durable before the scheduler moves on; a run is settled by a
//! compare-and-put of its record. A lost completion notice is repaired by
//! the reconciler, which submits every ready node of every active run
//! (the queue ignores a run id that is live or done) — so no node runs twice
//! and no run wedges.

mod mapped;
mod mark;
pub mod notice;
pub use crate::records::graph as records;
pub use crate::views::run as view;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use weir_core::graph::{Graph, GraphDef};
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::queue::Job;
use weir_core::readiness::{
    current_records, rerun_scope, rerun_scope_alone, Change, NodeState, NodeStatus, RunOutcome,
    RunTracker,
};

use crate::clock::Clock;
use crate::events::EngineEvent;
use crate::names::Names;
use crate::records::done::{DoneRecord, DoneStatus};
use crate::records::keys::{dead_key, done_key};
// The scheduler's interface lives in `msg`; re-exported here for the crate's users.
use crate::msg::queue::{Cancelled, Completion, EarlyCompletion, Enqueued, QueueMsg};
pub use crate::msg::scheduler::{
    MarkResult, ReconcileReport, RerunOutcome, SchedulerMsg, StartOutcome,
};
use crate::records::graph::{
    done_status, GraphRecord, GraphRunRecord, NodeRecord, RunState, TaskInput, UpstreamRecord,
};
use crate::records::keys::{def_key, graph_key, run_id, run_key, runs_prefix};
use crate::store::{Expiring, Store};
use crate::views::run::state_name;

/// How long the scheduler waits for the queue.
pub const QUEUE_CALL_MS: u64 = 60_000;

/// Settings of a scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerSettings {
    /// Time between reconciler passes.
    pub reconcile_interval_ms: u64,
    /// Jobs in one submit to the queue at most.
    pub submit_batch_max: usize,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            reconcile_interval_ms: 60_000,
            // Smaller batches let the queue hand out the first of a wide
            // fan-out while the rest are still being made durable (one
            // 10,000-job batch held every worker idle for its whole commit);
            // much smaller ones cost a durable round trip each.
            submit_batch_max: 1_000,
        }
    }
}

/// The scheduler actor.
pub struct SchedulerActor;

/// What it needs to start.
pub struct SchedulerArgs {
    /// Its graph.
    pub graph: Name,
    /// Engine names.
    pub names: Names,
    /// The store.
    pub store: Store,
    /// The clock.
    pub clock: Clock,
    /// Engine events.
    pub events: broadcast::Sender<EngineEvent>,
    /// Settings.
    pub settings: SchedulerSettings,
}

struct ActiveRun {
    partition: Partition,
    graph: Arc<Graph>,
    record: GraphRunRecord,
    bytes: Vec<u8>,
    tracker: RunTracker,
    /// The rerun count of each node's current record, if it has one.
    recorded: Vec<Option<u32>>,
    /// Nodes submitted at their expected count since loaded.
    submitted: HashSet<usize>,
    /// Mapped nodes whose members run, by node index.
    maps: HashMap<usize, mapped::MapRun>,
}

impl ActiveRun {
    fn expected(&self, idx: usize) -> u32 {
        let name = &self.graph.node_at(idx).name;
        self.record.expected_reruns.get(name).copied().unwrap_or(0)
    }
}

/// The scheduler's state.
pub struct SchedulerState {
    graph: Name,
    names: Names,
    store: Store,
    clock: Clock,
    events: broadcast::Sender<EngineEvent>,
    settings: SchedulerSettings,
    adopted: Option<String>,
    defs: HashMap<String, Arc<Graph>>,
    runs: BTreeMap<String, ActiveRun>,
    /// Completion notices still to drop ([`SchedulerMsg::DropNotices`]).
    drop_notices: u32,
    /// Downstreams submitted ahead of an upstream's record, by the
    /// upstream's key, until their answers come: (run, ids).
    presubmits: HashMap<Arc<str>, (String, NodeIds)>,
    /// Runs settled but not yet synced: their events wait for the sync.
    unsynced_settles: Vec<EngineEvent>,
    /// Itself, to schedule [`SchedulerMsg::SyncSettled`].
    myself: Option<ActorRef<SchedulerMsg>>,
}

impl Actor for SchedulerActor {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = SchedulerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SchedulerMsg>,
        args: SchedulerArgs,
    ) -> Result<SchedulerState, ActorProcessingErr> {
        let mut state = SchedulerState {
            graph: args.graph,
            names: args.names,
            store: args.store,
            clock: args.clock,
            events: args.events,
            settings: args.settings,
            adopted: None,
            defs: HashMap::new(),
            runs: BTreeMap::new(),
            drop_notices: 0,
            presubmits: HashMap::new(),
            unsynced_settles: Vec::new(),
            myself: None,
        };
        state.adopted = state
            .store
            .get::<GraphRecord>(&graph_key(state.graph.as_str()))?
            .map(|g| g.definition);
        let runs: Vec<(String, GraphRunRecord)> =
            state.store.scan(&runs_prefix(state.graph.as_str()))?;
        let prefix_len = runs_prefix(state.graph.as_str()).len();
        let mut cancelled = Vec::new();
        let mut withdrawn = Vec::new();
        for (key, record) in runs {
            let partition: Partition = key[prefix_len..]
                .parse()
                .map_err(|e| format!("run record {key}: partition does not parse: {e}"))?;
            match record.state {
                RunState::Active => {
                    let run = state.load_run(&partition)?;
                    if let Some(run) = run {
                        state.runs.insert(partition.to_string(), run);
                    }
                }
                RunState::Cancelled => cancelled.push(partition),
                RunState::Withdrawn => withdrawn.push(partition),
                RunState::Complete | RunState::Failed => {}
            }
        }
        tracing::info!(graph = %state.graph, active_runs = state.runs.len(), "scheduler started");
        // Cancelled runs whose cancels a crash may have cut short.
        let mut n = 0;
        for p in cancelled {
            n += state.cancel_unrecorded(&p).await?;
        }
        if n > 0 {
            tracing::info!(graph = %state.graph, cancelled = n, "cancelled leftover task instances of cancelled runs");
        }
        // Withdrawn runs whose tickets a crash may have left waiting.
        for p in withdrawn {
            state.finish_withdraw(&p).await?;
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<SchedulerMsg>,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        state.myself = Some(myself.clone());
        // Reconcile at once: a crash may have cut an advance short.
        let report = state.reconcile().await?;
        state.emit_report(report);
        let interval = Duration::from_millis(state.settings.reconcile_interval_ms.max(1));
        myself.send_interval(interval, || SchedulerMsg::Reconcile(None));
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<SchedulerMsg>,
        msg: SchedulerMsg,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SchedulerMsg::Completed(c) if state.drop_notices > 0 => {
                state.drop_notices -= 1;
                tracing::warn!(key = %c.key, "completion notice dropped (fault injection)");
            }
            SchedulerMsg::Completed(c) => {
                // Its answers came before it, or never will.
                state.presubmits.remove(&c.key);
                state.completed(c).await?
            }
            SchedulerMsg::Completing(e) if state.drop_notices > 0 => {
                // A lost notice is lost early too (fault injection): the
                // queue is told not to wait, and nothing is submitted.
                state.no_successors(e.key);
            }
            SchedulerMsg::Completing(e) => state.presubmit(e),
            SchedulerMsg::Presubmitted(key, answers) => state.presubmitted(&key, answers),
            SchedulerMsg::Adopted(hash) => {
                tracing::info!(graph = %state.graph, definition = %hash, "definition adopted");
                // Load and index the definition now, not in the first start
                // request: for a large graph that is the longest step of a
                // start (weir-core's validate hashes the whole definition).
                if let Err(e) = state.graph_def(&hash) {
                    tracing::warn!(graph = %state.graph, definition = %hash, error = %e, "adopted definition does not load");
                }
                state.adopted = Some(hash);
            }
            SchedulerMsg::StartRuns(partitions, params, reply) => {
                let partitions = partitions.into_iter().map(|p| (p, None)).collect();
                let r = state.start_runs(partitions, &params).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::PrepareRuns(prepared, reply) => {
                let partitions = prepared.into_iter().map(|(p, at)| (p, Some(at))).collect();
                let r = state.start_runs(partitions, &BTreeMap::new()).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Withdraw(partitions, reply) => {
                let r = state.withdraw(&partitions).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Rerun(partition, node, reply) => {
                let r = state.rerun(&partition, &node, true).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::RerunNode(partition, node, downstream, reply) => {
                let r = state.rerun(&partition, &node, downstream).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::ClearFailed(partition, reply) => {
                let r = state.clear_failed(&partition).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Mark(partition, node, status, reply) => {
                let r = state.mark(&partition, &node, status).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::CancelRun(partition, reply) => {
                let r = state.cancel_run(&partition).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Reconcile(reply) => {
                let report = state.reconcile().await?;
                state.emit_report(report);
                if let Some(reply) = reply {
                    let _ = reply.send(report);
                }
            }
            SchedulerMsg::ActiveRuns(reply) => {
                let _ = reply.send(state.runs.keys().cloned().collect());
            }
            SchedulerMsg::DropNotices(n) => state.drop_notices = n,
            SchedulerMsg::SyncSettled => state.sync_settled().await?,
            SchedulerMsg::MapTopUp(p, idx) => state.map_top_up(&p, idx).await?,
        }
        Ok(())
    }
}

type Res<T> = Result<T, ActorProcessingErr>;

/// Jobs of one run's nodes, with (node index, run id) for each, in order.
type JobsOf = (Vec<Job>, NodeIds);
/// Nodes of a run with the run ids of their task instances.
type NodeIds = Vec<(usize, String)>;

/// The run's params, over the definition's defaults: a record that lacks
/// some (written by an older weir) still renders every declared one.
fn run_params(run: &ActiveRun) -> BTreeMap<String, String> {
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
fn node_job(
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
fn run_due_ms(run: &ActiveRun, now: u64) -> u64 {
    run.record.not_before_ms.map_or(now, |at| at.max(now))
}

/// The record a start of a withdrawn run writes over it: active again,
/// as `fresh` asks (its instant, params, definition), every node one rerun
/// on, so its tickets are new instances and the withdrawn (cancelled) ones
/// stay superseded. `None` when the stored run is not withdrawn (it exists,
/// and a start does nothing).
fn revive(
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
    fn graph_def(&mut self, hash: &str) -> Res<Arc<Graph>> {
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
    fn load_run(&mut self, partition: &Partition) -> Res<Option<ActiveRun>> {
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

    async fn start_runs(
        &mut self,
        asked: Vec<(Partition, Option<u64>)>,
        given: &BTreeMap<String, String>,
    ) -> Res<Vec<StartOutcome>> {
        let hash = self
            .adopted
            .clone()
            .ok_or_else(|| format!("graph {} has no adopted definition", self.graph))?;
        let graph = self.graph_def(&hash)?;
        // Refused before anything is written: a start with a param the
        // definition does not declare starts nothing.
        let params = weir_core::params::resolve(self.graph.as_str(), &graph.def().params, given)
            .map_err(|e| e.to_string())?;
        // Every run record is created (at most once per partition) in one
        // blocking pass and made durable by one sync, then the ready nodes
        // of every new run go to the queue together: a burst of starts (a
        // backfill, 10,000 keys due at once) costs a few flushes, not two
        // per run.
        let now = self.clock.now_ms();
        let mut writes = Vec::with_capacity(asked.len());
        for (partition, not_before_ms) in &asked {
            let record = GraphRunRecord {
                definition: hash.clone(),
                state: RunState::Active,
                requested_at_ms: now,
                settled_at_ms: None,
                expected_reruns: BTreeMap::new(),
                retention_ms: graph.def().retention_ms,
                params: params.clone(),
                not_before_ms: not_before_ms.filter(|at| *at > now),
            };
            writes.push((run_key(self.graph.as_str(), partition), record));
        }
        let store = self.store.clone();
        let names: Vec<Name> = (0..graph.len())
            .map(|i| graph.node_at(i).name.clone())
            .collect();
        // Per partition: the record this call wrote (new, or a withdrawn
        // run revived), or `None` when a run exists.
        let created: Vec<Option<(GraphRunRecord, Vec<u8>)>> =
            tokio::task::spawn_blocking(move || {
                let mut created = Vec::with_capacity(writes.len());
                for (k, record) in writes {
                    let bytes = store.encode("run record", &record)?;
                    if store.compare_and_put_unsynced(&k, None, Some(&bytes), &[], &[])? {
                        created.push(Some((record, bytes)));
                        continue;
                    }
                    created.push(revive(&store, &k, record, &names)?);
                }
                if created.iter().any(|c| c.is_some()) {
                    store.sync()?;
                }
                Ok::<_, crate::store::StoreError>(created)
            })
            .await??;
        let partitions: Vec<Partition> = asked.into_iter().map(|(p, _)| p).collect();
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (partition, created) in partitions.iter().zip(&created) {
            let Some((record, bytes)) = created.clone() else {
                continue;
            };
            tracing::info!(graph = %self.graph, partition = %partition, definition = %hash, params = ?record.params, "graph run started");
            let _ = self.events.send(EngineEvent::RunStarted {
                graph: self.graph.to_string(),
                partition: partition.to_string(),
            });
            let tracker = RunTracker::new(&graph, &BTreeMap::<Name, NodeRecord>::new());
            // Every node ready at once: the roots, and any node whose rule
            // needs nothing of its upstreams (`always`), which no upstream's
            // record would make ready later.
            let ready: Vec<usize> = tracker.ready().collect();
            let p = partition.to_string();
            self.runs.insert(
                p.clone(),
                ActiveRun {
                    partition: partition.clone(),
                    graph: graph.clone(),
                    record,
                    bytes,
                    tracker,
                    recorded: vec![None; graph.len()],
                    submitted: HashSet::new(),
                    maps: HashMap::new(),
                },
            );
            groups.push((p, ready));
        }
        let mut submitted = self.submit_many(groups).await?.into_iter();
        let mut out = Vec::with_capacity(partitions.len());
        for (partition, created) in partitions.iter().zip(created) {
            let p = partition.to_string();
            if created.is_none() {
                out.push(StartOutcome {
                    partition: p,
                    started: false,
                    submitted: Vec::new(),
                });
                continue;
            }
            let ids = submitted.next().ok_or("one submit answer per new run")?;
            out.push(StartOutcome {
                partition: p.clone(),
                started: true,
                submitted: ids.into_iter().map(|(id, _)| id).collect(),
            });
            // A run with nothing ready is settled already (not possible
            // today: roots are always ready), through the normal path.
            self.settle_if_done(&p).await?;
        }
        Ok(out)
    }

    /// [`Self::submit`] for several runs in one go: one enqueue (per
    /// `submit_batch_max` jobs) for all. Answers per run, in order.
    async fn submit_many(
        &mut self,
        groups: Vec<(String, Vec<usize>)>,
    ) -> Res<Vec<Vec<(String, bool)>>> {
        let mut jobs = Vec::new();
        let mut spans = Vec::with_capacity(groups.len());
        for (p, nodes) in &groups {
            let (j, ids) = self.build_jobs(p, nodes, None)?;
            jobs.extend(j);
            spans.push(ids);
        }
        let mut answers = self.enqueue(jobs).await?.into_iter();
        let mut out = Vec::with_capacity(groups.len());
        for ((p, _), ids) in groups.iter().zip(spans) {
            out.push(self.absorb_answers(p, ids, &mut answers)?);
        }
        // Mapped nodes: their members go to the queue from a top-up.
        for ((p, nodes), got) in groups.iter().zip(out.iter_mut()) {
            for &idx in nodes {
                let mapped = self
                    .runs
                    .get(p)
                    .is_some_and(|r| r.graph.node_at(idx).map.is_some());
                if mapped {
                    got.push(self.kick_mapped(p, idx)?);
                }
            }
        }
        Ok(out)
    }

    /// Takes the enqueue answers of the jobs `ids` of run `p` (one each,
    /// in order): each node is submitted. Returns (run id, newly
    /// submitted).
    fn absorb_answers(
        &mut self,
        p: &str,
        ids: Vec<(usize, String)>,
        answers: &mut impl Iterator<Item = Result<Enqueued, String>>,
    ) -> Res<Vec<(String, bool)>> {
        let run = self
            .runs
            .get_mut(p)
            .ok_or("submit to a run that is not active")?;
        let mut got = Vec::with_capacity(ids.len());
        for (idx, id) in ids {
            let answer = answers.next().ok_or("one enqueue answer per job")?;
            let new = match answer {
                Ok(Enqueued::New(_)) => true,
                Ok(Enqueued::Live(_)) | Ok(Enqueued::Done) => false,
                Err(e) => return Err(format!("submit of {id}: {e}").into()),
            };
            run.submitted.insert(idx);
            if new {
                tracing::debug!(run_id = %id, "task instance submitted");
            }
            got.push((id, new));
        }
        Ok(got)
    }

    /// Answers the queue's early notice of a success: the downstreams it
    /// makes ready ([`RunTracker::ready_after`]; not mapped ones, whose
    /// members go through a top-up) are enqueued into the batch that holds
    /// the success, with its output as their input. Nothing is recorded,
    /// decided or settled here: that follows the durable notice, which
    /// finds these submitted. A failure here only costs the saving: the
    /// durable notice submits what this did not.
    fn presubmit(&mut self, e: EarlyCompletion) {
        let ahead = match self.successors_of(&e) {
            Ok(ahead) => ahead,
            Err(err) => {
                tracing::warn!(key = %e.key, error = %err, "downstreams not submitted ahead of their upstream's record");
                None
            }
        };
        let Some((p, jobs, ids)) = ahead else {
            self.no_successors(e.key);
            return;
        };
        let Some(queue) = ActorRef::<QueueMsg>::where_is(self.names.queue()) else {
            return;
        };
        let notify: Arc<str> = Arc::from(self.names.scheduler(self.graph.as_str()));
        tracing::debug!(key = %e.key, jobs = jobs.len(), "downstreams submitted ahead of their upstream's record");
        if queue
            .cast(QueueMsg::Successors(e.key.clone(), jobs, notify))
            .is_ok()
        {
            self.presubmits.insert(e.key, (p, ids));
        }
    }

    /// Answers an early notice of `key` with nothing to submit, so the
    /// queue's batch need not wait for it.
    fn no_successors(&self, key: Arc<str>) {
        if let Some(queue) = ActorRef::<QueueMsg>::where_is(self.names.queue()) {
            let _ = queue.cast(QueueMsg::NoSuccessors(key));
        }
    }

    /// Takes the durable answers of a submit ahead: its nodes are
    /// submitted. One that failed is submitted again, and its error
    /// reported, by the success's notice (which comes after).
    fn presubmitted(&mut self, key: &str, answers: Vec<Result<Enqueued, String>>) {
        let Some((p, ids)) = self.presubmits.remove(key) else {
            return;
        };
        if answers.len() != ids.len() || answers.iter().any(|a| a.is_err()) {
            return;
        }
        if let Err(err) = self.absorb_answers(&p, ids, &mut answers.into_iter()) {
            tracing::debug!(key, error = %err, "answers of downstreams submitted ahead not taken");
        }
    }

    /// The jobs of the downstreams a success makes ready, if any: (run,
    /// jobs, ids).
    fn successors_of(&self, e: &EarlyCompletion) -> Res<Option<(String, Vec<Job>, NodeIds)>> {
        let Some((id, None)) = crate::records::keys::parse_node_key(&e.key) else {
            return Ok(None);
        };
        let Some(run) = self.runs.get(&id.partition) else {
            return Ok(None);
        };
        let Some(idx) = run.graph.index_of(&id.node) else {
            return Ok(None);
        };
        if id.rerun != run.expected(idx) || run.tracker.state(idx).is_terminal() {
            return Ok(None);
        }
        let ready: Vec<usize> = run
            .tracker
            .ready_after(&run.graph, idx, NodeStatus::Succeeded)
            .into_iter()
            .filter(|d| !run.submitted.contains(d) && run.graph.node_at(*d).map.is_none())
            .collect();
        if ready.is_empty() {
            return Ok(None);
        }
        // The rest of a large fan-out is submitted by the durable notice.
        let mut ready = ready;
        ready.truncate(self.settings.submit_batch_max);
        let record = UpstreamRecord {
            status: DoneStatus::Succeeded,
            output: e.output.clone(),
            output_blob: e.output_blob.clone(),
            rerun: id.rerun,
        };
        let p = id.partition.to_string();
        let (jobs, ids) = self.build_jobs(&p, &ready, Some((idx, record)))?;
        Ok(Some((p, jobs, ids)))
    }

    /// Enqueues jobs in batches of at most `submit_batch_max`; one answer
    /// per job, in order.
    async fn enqueue(&self, jobs: Vec<Job>) -> Res<Vec<Result<Enqueued, String>>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let mut answers = Vec::with_capacity(jobs.len());
        let mut rest = jobs;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(self.settings.submit_batch_max));
            let batch = std::mem::replace(&mut rest, tail);
            let a = ractor::call_t!(queue, QueueMsg::Enqueue, QUEUE_CALL_MS, batch)
                .map_err(|e| format!("submit to the queue: {e}"))?;
            answers.extend(a);
        }
        Ok(answers)
    }

    /// Submits `nodes` of run `p` at their expected rerun counts, with the
    /// records of their upstreams. Returns (run id, newly submitted).
    async fn submit(&mut self, p: &str, nodes: &[usize]) -> Res<Vec<(String, bool)>> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = self
            .submit_many(vec![(p.to_string(), nodes.to_vec())])
            .await?;
        Ok(out.pop().unwrap_or_default())
    }

    /// The jobs of `nodes` of run `p`, with the ids they answer for. A
    /// mapped node has no job of its own (its members are submitted by
    /// [`SchedulerMsg::MapTopUp`]), so it is left out here.
    fn build_jobs(
        &self,
        p: &str,
        nodes: &[usize],
        ahead: Option<(usize, UpstreamRecord)>,
    ) -> Res<JobsOf> {
        let notify: Arc<str> = Arc::from(self.names.scheduler(self.graph.as_str()));
        let now = self.clock.now_ms();
        let run = self
            .runs
            .get(p)
            .ok_or("submit to a run that is not active")?;
        let mut jobs = Vec::with_capacity(nodes.len());
        let mut ids = Vec::with_capacity(nodes.len());
        // Each upstream record is read once per submit: the downstreams of
        // one node, submitted together, share it (a fan-out of 10,000 reads
        // its root once, not 10,000 times).
        let mut read: HashMap<usize, Option<UpstreamRecord>> = HashMap::new();
        // An upstream whose record is not durable yet (a submit ahead of
        // it) has it given here.
        if let Some((u, record)) = ahead {
            read.insert(u, Some(record));
        }
        let params = run_params(run);
        for &idx in nodes {
            if run.graph.node_at(idx).map.is_some() {
                continue;
            }
            let node = run.graph.node_at(idx);
            let rerun = run.expected(idx);
            let id = run_id(
                self.graph.as_str(),
                &run.partition,
                node.name.as_str(),
                rerun,
            );
            let input = self.input_of(run, idx, &mut read, &params, None)?;
            jobs.push(node_job(node, &id, &input, run_due_ms(run, now), &notify)?);
            ids.push((idx, id));
        }
        Ok((jobs, ids))
    }

    /// The task input of node `idx` of `run` (of one of its members, with
    /// `member`), with the records of its upstreams (each read once per
    /// `read`).
    fn input_of(
        &self,
        run: &ActiveRun,
        idx: usize,
        read: &mut HashMap<usize, Option<UpstreamRecord>>,
        params: &BTreeMap<String, String>,
        member: Option<crate::records::graph::MemberInput>,
    ) -> Res<TaskInput> {
        let node = run.graph.node_at(idx);
        let mut upstreams = BTreeMap::new();
        for &u in run.graph.upstreams(idx) {
            let un = run.graph.node_at(u).name.as_str();
            let record = match read.get(&u) {
                Some(r) => r.clone(),
                None => {
                    let Some(ur) = run.recorded[u] else { continue };
                    let key = done_key(&run_id(self.graph.as_str(), &run.partition, un, ur));
                    let r = self.store.get::<DoneRecord>(&key)?.map(|d| UpstreamRecord {
                        status: d.status,
                        output: d.output,
                        output_blob: d.output_blob,
                        rerun: ur,
                    });
                    read.insert(u, r.clone());
                    r
                }
            };
            if let Some(r) = record {
                upstreams.insert(un.to_string(), r);
            }
        }
        Ok(TaskInput {
            graph: self.graph.to_string(),
            partition: run.partition.to_string(),
            node: node.name.to_string(),
            rerun: run.expected(idx),
            definition: run.record.definition.clone(),
            config: node.task.config.clone(),
            upstreams,
            params: params.clone(),
            member,
        })
    }

    async fn completed(&mut self, c: Completion) -> Res<()> {
        let Some((id, member)) = crate::records::keys::parse_node_key(&c.key) else {
            return Ok(());
        };
        if let Some(m) = member {
            return self.member_ended(id, m, c.status).await;
        }
        let Some(run) = self.runs.get_mut(&id.partition) else {
            return Ok(());
        };
        let Some(idx) = run.graph.index_of(&id.node) else {
            return Ok(());
        };
        if id.rerun != run.expected(idx) || run.tracker.state(idx).is_terminal() {
            // A superseded instance, or a repeat: nothing changes.
            return Ok(());
        }
        let status = crate::records::graph::node_status(c.status);
        self.record_node(&id.partition, idx, id.rerun, status).await
    }

    /// Node `idx` of run `p` has a durable record at `rerun`: its
    /// downstreams are decided or submitted, the run settles when done, and
    /// a success that materializes assets has them delivered.
    async fn record_node(
        &mut self,
        p: &str,
        idx: usize,
        rerun: u32,
        status: NodeStatus,
    ) -> Res<()> {
        let Some(run) = self.runs.get_mut(p) else {
            return Ok(());
        };
        run.recorded[idx] = Some(rerun);
        run.maps.remove(&idx);
        let graph = run.graph.clone();
        let changes = run.tracker.record(&graph, idx, status);
        let node = graph.node_at(idx);
        let _ = self.events.send(EngineEvent::NodeChanged {
            graph: self.graph.to_string(),
            partition: p.to_string(),
            node: node.name.to_string(),
            rerun,
            state: done_status(status).to_string(),
        });
        if status == NodeStatus::Succeeded && !node.produces.is_empty() {
            // The materializations are durable with the record; the assets
            // actor delivers them (and finds them at its next pass if this
            // cast is lost).
            if let Some(assets) =
                ActorRef::<crate::msg::assets::AssetsMsg>::where_is(self.names.assets())
            {
                let _ = assets.cast(crate::msg::assets::AssetsMsg::Deliver);
            }
        }
        self.apply_changes(p, changes).await?;
        self.settle_if_done(p).await?;
        Ok(())
    }

    /// Records decided nodes (durably), then submits the ready ones.
    /// Returns how many submits were new to the queue.
    async fn apply_changes(&mut self, p: &str, changes: Vec<Change>) -> Res<usize> {
        if changes.is_empty() {
            return Ok(0);
        }
        let now = self.clock.now_ms();
        let run = self
            .runs
            .get_mut(p)
            .ok_or("changes to a run that is not active")?;
        let mut puts = Vec::new();
        let mut ready = Vec::new();
        for ch in &changes {
            let name = run.graph.node_at(ch.node).name.clone();
            let rerun = run.expected(ch.node);
            let status = match ch.state {
                NodeState::Ready => {
                    ready.push(ch.node);
                    None
                }
                NodeState::Skipped => Some(DoneStatus::Skipped),
                NodeState::UpstreamFailed => Some(DoneStatus::UpstreamFailed),
                _ => None,
            };
            let _ = self.events.send(EngineEvent::NodeChanged {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                node: name.to_string(),
                rerun,
                state: state_name(ch.state).to_string(),
            });
            if let Some(status) = status {
                let id = run_id(self.graph.as_str(), &run.partition, name.as_str(), rerun);
                let node = run.graph.node_at(ch.node);
                let record = DoneRecord {
                    id: 0,
                    key: id.clone(),
                    task: node.task.task.to_string(),
                    pool: node.pool.to_string(),
                    status,
                    attempts: 0,
                    deferrals: 0,
                    failures: 0,
                    error: None,
                    output: Vec::new(),
                    output_blob: None,
                    first_due_ms: now,
                    started_ms: None,
                    finished_ms: now,
                    pokes: 0,
                    members: None,
                };
                puts.push((done_key(&id), self.store.encode("node record", &record)?));
                run.recorded[ch.node] = Some(rerun);
                tracing::info!(run_id = %id, status = %status, "node decided without running");
            }
        }
        if !puts.is_empty() {
            let store = self.store.clone();
            tokio::task::spawn_blocking(move || store.put_batch(&puts, &[])).await??;
        }
        let ready: Vec<usize> = ready
            .into_iter()
            .filter(|i| !run.submitted.contains(i))
            .collect();
        let submitted = self.submit(p, &ready).await?;
        Ok(submitted.iter().filter(|(_, new)| *new).count())
    }

    /// Settles run `p` when every node is terminal: a compare-and-put of its
    /// record, with its expiry.
    async fn settle_if_done(&mut self, p: &str) -> Res<bool> {
        let Some(run) = self.runs.get(p) else {
            return Ok(false);
        };
        let Some(outcome) = run.tracker.outcome() else {
            return Ok(false);
        };
        let state = match outcome {
            RunOutcome::Complete => RunState::Complete,
            RunOutcome::Failed => RunState::Failed,
        };
        let written = self.write_settled(p, state, false).await?;
        if written {
            self.runs.remove(p);
        }
        Ok(written)
    }

    /// Writes the final state of run `p` against its stored bytes.
    /// With `durable_now` false the write is synced by the next
    /// [`SchedulerMsg::SyncSettled`] (queued behind the messages already in
    /// the mailbox), and its event goes out after that sync.
    async fn write_settled(&mut self, p: &str, state: RunState, durable_now: bool) -> Res<bool> {
        let run = self
            .runs
            .get(p)
            .ok_or("settle of a run that is not active")?;
        let now = self.clock.now_ms();
        let mut settled = run.record.clone();
        settled.state = state;
        settled.settled_at_ms = Some(now);
        let key = run_key(self.graph.as_str(), &run.partition);
        let bytes = self.store.encode("run record", &settled)?;
        let expiring = Expiring {
            at_ms: now.saturating_add(settled.retention_ms),
            key: key.clone(),
        };
        // The notification is journaled before the settle is written: a
        // crash between the two settles the run again at the next start,
        // and the notification's key (one per settle) makes that a no-op.
        let notifies = match state {
            RunState::Failed => run.graph.def().on_failure.is_some(),
            RunState::Complete => run.graph.def().on_success.is_some(),
            RunState::Active | RunState::Cancelled | RunState::Withdrawn => false,
        };
        if notifies {
            let states: Vec<NodeState> =
                (0..run.graph.len()).map(|i| run.tracker.state(i)).collect();
            self.notify_settled(p, &settled, &states).await;
        }
        let run = self
            .runs
            .get(p)
            .ok_or("settle of a run that is not active")?;
        let store = self.store.clone();
        let expected = run.bytes.clone();
        let b = bytes.clone();
        let written = tokio::task::spawn_blocking(move || {
            if durable_now {
                store.compare_and_put(&key, Some(&expected), Some(&b), &[expiring], &[])
            } else {
                store.compare_and_put_unsynced(&key, Some(&expected), Some(&b), &[expiring], &[])
            }
        })
        .await??;
        if written && state == RunState::Withdrawn {
            // Not a settle: no task of it ran, and nothing waits for it.
            tracing::info!(graph = %self.graph, partition = p, "prepared graph run withdrawn");
        } else if written {
            tracing::info!(graph = %self.graph, partition = p, state = %state, "graph run settled");
            let event = EngineEvent::RunSettled {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                state: state.to_string(),
            };
            if durable_now {
                let _ = self.events.send(event);
            } else {
                if self.unsynced_settles.is_empty() {
                    if let Some(me) = &self.myself {
                        let _ = me.cast(SchedulerMsg::SyncSettled);
                    }
                }
                self.unsynced_settles.push(event);
            }
        } else {
            // Someone else wrote the record: reload it and try again on the
            // next event or reconcile.
            tracing::warn!(graph = %self.graph, partition = p, "run record changed under the scheduler; reloading");
            let partition = run.partition.clone();
            match self.load_run(&partition)? {
                Some(r) if r.record.state == RunState::Active => {
                    self.runs.insert(p.to_string(), r);
                }
                _ => {
                    self.runs.remove(p);
                }
            }
        }
        Ok(written)
    }

    /// Syncs the settles written since the last sync, then sends their
    /// events.
    async fn sync_settled(&mut self) -> Res<()> {
        if self.unsynced_settles.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.sync()).await??;
        for e in std::mem::take(&mut self.unsynced_settles) {
            let _ = self.events.send(e);
        }
        Ok(())
    }

    /// Loads run `partition` for an operator's change, active or settled;
    /// a cancelled run is refused. Returns its key.
    fn load_for_change(&mut self, partition: &Partition) -> Res<String> {
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
    fn unload_if_settled(&mut self, p: &str) {
        if let Some(run) = self.runs.get(p) {
            if run.record.state != RunState::Active {
                self.runs.remove(p);
            }
        }
    }

    async fn rerun(
        &mut self,
        partition: &Partition,
        node: &str,
        downstream: bool,
    ) -> Res<RerunOutcome> {
        let p = self.load_for_change(partition)?;
        let result = self.rerun_loaded(&p, node, downstream).await;
        self.unload_if_settled(&p);
        result
    }

    /// Reruns every node of the run whose current record failed, each with
    /// its downstreams, in topological order. A failed node already reset
    /// by the scope of one before it answers as that rerun left it.
    async fn clear_failed(&mut self, partition: &Partition) -> Res<Vec<(String, RerunOutcome)>> {
        let p = self.load_for_change(partition)?;
        let run = self.runs.get(&p).expect("loaded");
        let failed: Vec<String> = run
            .graph
            .topological_order()
            .iter()
            .filter(|&&i| run.tracker.state(i) == NodeState::Failed)
            .map(|&i| run.graph.node_at(i).name.to_string())
            .collect();
        let mut out = Vec::with_capacity(failed.len());
        let mut result = Ok(());
        for node in failed {
            match self.rerun_loaded(&p, &node, true).await {
                Ok(o) => out.push((node, o)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        tracing::info!(graph = %self.graph, partition = %p, failed = out.len(), "failed nodes cleared");
        self.unload_if_settled(&p);
        result.map(|()| out)
    }

    /// Deletes the dead letters of task instances a rerun or a mark
    /// superseded (best effort: a crash before it leaves letters that a
    /// requeue answers as the node's current state).
    async fn drop_dead_letters(&self, ids: Vec<String>) -> Res<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || {
            let mut dead = Vec::new();
            for id in ids {
                let k = dead_key(&id);
                if store.contains(&k)? {
                    dead.push(k);
                }
            }
            if !dead.is_empty() {
                store.put_batch(&[], &dead)?;
            }
            Ok::<_, crate::store::StoreError>(())
        })
        .await??;
        Ok(())
    }

    async fn rerun_loaded(&mut self, p: &str, node: &str, downstream: bool) -> Res<RerunOutcome> {
        let run = self.runs.get(p).expect("loaded");
        let idx = run
            .graph
            .index_of(node)
            .ok_or_else(|| format!("graph {} has no node {node:?}", self.graph))?;
        let Some(rec_rerun) = run.recorded[idx] else {
            // Not recorded yet: active at its expected count, or never run.
            let id = run_id(self.graph.as_str(), &run.partition, node, run.expected(idx));
            return Ok(
                if run.submitted.contains(&idx) || run.tracker.state(idx) == NodeState::Ready {
                    RerunOutcome::Active(id)
                } else {
                    RerunOutcome::NoRecord
                },
            );
        };
        let graph = run.graph.clone();
        let scope = if downstream {
            rerun_scope(&graph, idx)
        } else {
            rerun_scope_alone(&graph, idx, run.tracker.states())
        };
        let superseded: Vec<String> = scope
            .iter()
            .filter_map(|&s| {
                run.recorded[s].map(|r| {
                    run_id(
                        self.graph.as_str(),
                        &run.partition,
                        graph.node_at(s).name.as_str(),
                        r,
                    )
                })
            })
            .collect();
        let mut record = run.record.clone();
        let next = rec_rerun + 1;
        for &s in &scope {
            let name = graph.node_at(s).name.clone();
            if s == idx {
                record.expected_reruns.insert(name, next);
            } else if let Some(r) = run.recorded[s] {
                record.expected_reruns.insert(name, r + 1);
            }
        }
        // Check readiness on a copy first: a refused rerun changes nothing.
        let mut tracker = run.tracker.clone();
        let changes = tracker.rerun(&graph, idx, &scope);
        if tracker.state(idx) != NodeState::Ready {
            return Ok(RerunOutcome::NotReady);
        }
        let was_settled = record.settled_at_ms;
        record.state = RunState::Active;
        record.settled_at_ms = None;
        let key = run_key(self.graph.as_str(), &run.partition);
        let bytes = self.store.encode("run record", &record)?;
        let unexpire: Vec<Expiring> = was_settled
            .map(|at| Expiring {
                at_ms: at.saturating_add(record.retention_ms),
                key: key.clone(),
            })
            .into_iter()
            .collect();
        let store = self.store.clone();
        let expected = run.bytes.clone();
        let b = bytes.clone();
        let written = tokio::task::spawn_blocking(move || {
            store.compare_and_put(&key, Some(&expected), Some(&b), &[], &unexpire)
        })
        .await??;
        if !written {
            return Err(format!(
                "the run of graph {} for partition {p} changed during the rerun; try again",
                self.graph
            )
            .into());
        }
        if was_settled.is_some() {
            let _ = self.events.send(EngineEvent::RunStarted {
                graph: self.graph.to_string(),
                partition: p.to_string(),
            });
        }
        let run = self.runs.get_mut(p).expect("loaded");
        run.record = record;
        run.bytes = bytes;
        run.tracker = tracker;
        let mut superseded_members = Vec::new();
        for &s in &scope {
            if s == idx || run.recorded[s].is_some() {
                if let (Some(r), true) = (run.recorded[s], graph.node_at(s).map.is_some()) {
                    superseded_members.push((graph.node_at(s).name.to_string(), r));
                }
                run.recorded[s] = None;
                run.submitted.remove(&s);
                run.maps.remove(&s);
            }
        }
        tracing::info!(graph = %self.graph, partition = p, node, rerun = next, scope = scope.len(), downstream, "node rerun");
        self.drop_dead_letters(superseded).await?;
        if let Some(run) = self.runs.get(p) {
            for (name, r) in &superseded_members {
                self.drop_member_letters(run, name, *r).await?;
            }
        }
        // Decided nodes in the scope are recorded again at their new
        // counts; the node itself is submitted on its own, for its answer.
        let others: Vec<Change> = changes.into_iter().filter(|c| c.node != idx).collect();
        self.apply_changes(p, others).await?;
        let submitted = self.submit(p, &[idx]).await?;
        let (id, new) = submitted
            .into_iter()
            .next()
            .ok_or("a submit of one node answers once")?;
        Ok(if new {
            RerunOutcome::Submitted(id)
        } else {
            RerunOutcome::Active(id)
        })
    }

    async fn cancel_run(&mut self, partition: &Partition) -> Res<bool> {
        let p = partition.to_string();
        if !self.runs.contains_key(&p) {
            return Ok(false);
        }
        let written = self.write_settled(&p, RunState::Cancelled, true).await?;
        if !written {
            return Ok(false);
        }
        let run = self.runs.remove(&p).expect("active");
        let n = self.cancel_instances(&run).await?;
        tracing::info!(graph = %self.graph, partition = %p, cancelled = n, "graph run cancelled");
        Ok(true)
    }

    /// Cancels the live task instance of every node of `run` without a
    /// current record.
    async fn cancel_instances(&mut self, run: &ActiveRun) -> Res<usize> {
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let mut n = 0;
        for idx in 0..run.graph.len() {
            if run.recorded[idx].is_some() {
                continue;
            }
            if run.graph.node_at(idx).map.is_some() {
                n += self.cancel_members(run, idx).await?;
                continue;
            }
            let id = run_id(
                self.graph.as_str(),
                &run.partition,
                run.graph.node_at(idx).name.as_str(),
                run.expected(idx),
            );
            let r = ractor::call_t!(queue, QueueMsg::Cancel, QUEUE_CALL_MS, id)
                .map_err(|e| format!("cancel: {e}"))?;
            if matches!(r, Cancelled::Cancelled(_)) {
                n += 1;
            }
        }
        Ok(n)
    }

    /// See [`SchedulerMsg::Withdraw`].
    async fn withdraw(&mut self, partitions: &[Partition]) -> Res<Vec<bool>> {
        let mut out = Vec::with_capacity(partitions.len());
        for partition in partitions {
            out.push(self.withdraw_one(partition).await?);
        }
        Ok(out)
    }

    /// Withdraws one prepared run: its record first (as a cancel writes
    /// its record first: a crash after it finishes the withdrawal at the
    /// next start), then its tickets, all or none; when one was handed out
    /// meanwhile, the record goes back to active and the run goes on.
    async fn withdraw_one(&mut self, partition: &Partition) -> Res<bool> {
        let p = partition.to_string();
        let now = self.clock.now_ms();
        let Some(run) = self.runs.get(&p) else {
            return Ok(false);
        };
        // Only a run nothing of which has happened: no record, no mapped
        // node's members (those are not withdrawn: the run goes on).
        let waiting = run.record.not_before_ms.is_some_and(|at| at > now)
            && run.recorded.iter().all(Option::is_none)
            && run.maps.is_empty();
        if !waiting {
            return Ok(false);
        }
        if !self.write_settled(&p, RunState::Withdrawn, true).await? {
            return Ok(false);
        }
        let run = self.runs.remove(&p).expect("written above, so active");
        if self.withdraw_tickets(&run).await? {
            return Ok(true);
        }
        self.restore_withdrawn(&run).await?;
        Ok(false)
    }

    /// Withdraws the tickets of every node of `run` without a record at the
    /// queue, all or none; `false` when one was handed out.
    async fn withdraw_tickets(&self, run: &ActiveRun) -> Res<bool> {
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let ids: Vec<String> = (0..run.graph.len())
            .filter(|&i| run.recorded[i].is_none() && run.graph.node_at(i).map.is_none())
            .map(|i| {
                run_id(
                    self.graph.as_str(),
                    &run.partition,
                    run.graph.node_at(i).name.as_str(),
                    run.expected(i),
                )
            })
            .collect();
        match ractor::call_t!(queue, QueueMsg::Withdraw, QUEUE_CALL_MS, ids)
            .map_err(|e| format!("withdraw: {e}"))?
        {
            Ok(_) => Ok(true),
            Err(key) => {
                tracing::info!(graph = %self.graph, partition = %run.partition, key, "prepared run not withdrawn: its ticket was handed out");
                Ok(false)
            }
        }
    }

    /// Puts a withdrawn run's record back to active (a ticket of it was
    /// handed out before the withdrawal reached the queue) and tracks it.
    async fn restore_withdrawn(&mut self, run: &ActiveRun) -> Res<()> {
        let key = run_key(self.graph.as_str(), &run.partition);
        let store = self.store.clone();
        let mut active = run.record.clone();
        active.state = RunState::Active;
        active.settled_at_ms = None;
        let bytes = self.store.encode("run record", &active)?;
        tokio::task::spawn_blocking(move || {
            let Some((stored, current)) = store.get_with_raw::<GraphRunRecord>(&key)? else {
                return Ok(());
            };
            let unexpire: Vec<Expiring> = stored.expiry(&key).into_iter().collect();
            store.compare_and_put(&key, Some(&current), Some(&bytes), &[], &unexpire)?;
            Ok::<_, crate::store::StoreError>(())
        })
        .await??;
        if let Some(r) = self.load_run(&run.partition)? {
            if r.record.state == RunState::Active {
                self.runs.insert(run.partition.to_string(), r);
            }
        }
        Ok(())
    }

    /// At start: the tickets of a withdrawn run are withdrawn (again; a
    /// crash may have come between its record and its tickets), and a run
    /// one of whose tickets was handed out meanwhile is active again.
    async fn finish_withdraw(&mut self, partition: &Partition) -> Res<()> {
        let Some(run) = self.load_run(partition)? else {
            return Ok(());
        };
        if !self.withdraw_tickets(&run).await? {
            tracing::warn!(graph = %self.graph, partition = %partition, "a withdrawn run's ticket was handed out before the withdrawal landed; the run goes on");
            self.restore_withdrawn(&run).await?;
        }
        Ok(())
    }

    async fn cancel_unrecorded(&mut self, partition: &Partition) -> Res<usize> {
        let Some(run) = self.load_run(partition)? else {
            return Ok(0);
        };
        self.cancel_instances(&run).await
    }

    /// Advances every active run: submits ready nodes, records decisions a
    /// crash left unwritten, settles what is done.
    async fn reconcile(&mut self) -> Res<ReconcileReport> {
        let mut report = ReconcileReport {
            active_runs: self.runs.len(),
            ..ReconcileReport::default()
        };
        let keys: Vec<String> = self.runs.keys().cloned().collect();
        for p in keys {
            // Rebuild the run from the store first. A record whose notice
            // was lost (the queue stopped between making it durable and
            // telling this scheduler) is in the store but not in the
            // tracker, which still holds the node ready: resubmitting it
            // would only answer Done, and its downstreams would never be
            // submitted. The pass costs a scan of the run's records, once
            // per reconcile interval, never per event.
            let Some(partition) = self.runs.get(&p).map(|r| r.partition.clone()) else {
                continue;
            };
            match self.load_run(&partition)? {
                Some(fresh) if fresh.record.state == RunState::Active => {
                    self.runs.insert(p.clone(), fresh);
                }
                _ => {
                    // Only this actor settles its runs, so a run that is
                    // gone or settled in the store is not active.
                    self.runs.remove(&p);
                    continue;
                }
            }
            let Some(run) = self.runs.get_mut(&p) else {
                continue;
            };
            // Decided nodes without a current record.
            let graph = run.graph.clone();
            let undecided: Vec<Change> = (0..graph.len())
                .filter(|&i| run.recorded[i].is_none())
                .filter(|&i| {
                    matches!(
                        run.tracker.state(i),
                        NodeState::Skipped | NodeState::UpstreamFailed
                    )
                })
                .map(|i| Change {
                    node: i,
                    state: run.tracker.state(i),
                })
                .collect();
            let ready: Vec<usize> = run.tracker.ready().collect();
            // Resubmit every ready node: the queue ignores live and done
            // run ids, so only a lost submit is new.
            for &i in &ready {
                run.submitted.remove(&i);
            }
            let mut changes = undecided;
            changes.extend(ready.iter().map(|&i| Change {
                node: i,
                state: NodeState::Ready,
            }));
            // Count only the submits that were new to the queue.
            report.submitted += self.apply_changes(&p, changes).await?;
            if self.settle_if_done(&p).await? {
                report.settled += 1;
            }
        }
        Ok(report)
    }

    fn emit_report(&self, report: ReconcileReport) {
        tracing::info!(graph = %self.graph, active_runs = report.active_runs, submitted = report.submitted, settled = report.settled, cancelled = report.cancelled, "reconciled");
        let _ = self.events.send(EngineEvent::Reconciled {
            graph: self.graph.to_string(),
            active_runs: report.active_runs,
            submitted: report.submitted,
            settled: report.settled,
            cancelled: report.cancelled,
        });
    }
}
