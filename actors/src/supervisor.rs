//! The supervisor: spawns and links the engine's actors, and respawns a
//! failed one with exponential backoff.
//!
//! ractor restarts nothing and, by default, stops a supervisor when a child
//! fails; this one maps the failed child's id to its role and respawns it.
//! OTP's intensity rule bounds that: more than `restarts_max` restarts of one
//! role within `restart_window_ms` stop the engine with an error naming the
//! role and its last failure. A child whose `pre_start` fails sends no
//! supervision event, so a failed respawn is counted at the spawn call the
//! same way. A failed store write (fail-stop) stops the engine at once:
//! respawning cannot help.
//!
//! What a respawn does per role: the queue replays the store (running
//! tickets stay running) and every pool is told to re-grant credit and
//! resend unacknowledged reports; a pool's running tickets are requeued as
//! failed attempts (`WorkerGone`) and a new incarnation takes its place; a
//! breaker reloads its persisted state.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::NodeServerMessage;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use weir_core::breaker::BreakerSettings;
use weir_core::names::Name;

use crate::assets::{AssetsActor, AssetsArgs, AssetsSettings};
use crate::breaker::{BreakerActor, BreakerArgs};
use crate::clock::Clock;
use crate::cluster::gateway::{GatewayActor, GatewayArgs, GatewayShared, LogIntake};
use crate::cluster::ClusterSettings;
use crate::event_channel::EventSender;
use crate::events::EngineEvent;
use crate::msg::breaker::BreakerMsg;
use crate::msg::cluster::GatewayMsg;
use crate::msg::pool::PoolMsg;
use crate::msg::queue::{QueueCounts, QueueMsg};
use crate::msg::scheduler::SchedulerMsg;
use crate::names::Names;
// The supervisor's interface lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::supervisor::{Role, SupervisorMsg};
use crate::msg::trigger::TriggerMsg;
use crate::pool::{PoolActor, PoolArgs, Uplink};
use crate::queue::{QueueActor, QueueArgs, QueueSettings, QueueShared};
use crate::records::keys::{DEAD_PREFIX, DONE_PREFIX, GRAPH_PREFIX, LEDGER_PREFIX};
use crate::scheduler::{SchedulerActor, SchedulerArgs, SchedulerSettings};
use crate::store::{Recovered, Store};
use crate::task::TaskRegistry;
use crate::trigger::settled::SettledHub;
use crate::trigger::{TriggerActor, TriggerArgs, TriggerSettings};

/// Restart limits (OTP's intensity and period) and backoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SupervisorSettings {
    /// Restarts of one role allowed within the window.
    pub restarts_max: u32,
    /// The window, in ms.
    pub restart_window_ms: u64,
    /// The first restart's backoff, in ms.
    pub backoff_initial_ms: u64,
    /// The longest backoff, in ms.
    pub backoff_max_ms: u64,
}

impl Default for SupervisorSettings {
    fn default() -> Self {
        SupervisorSettings {
            restarts_max: 10,
            restart_window_ms: 10_000,
            backoff_initial_ms: 10,
            backoff_max_ms: 2_000,
        }
    }
}

/// A pool and its workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolSpec {
    /// Slots per worker.
    pub capacity: u32,
    /// Workers (pool actors) in this process.
    pub workers: u32,
}

/// The supervisor actor.
pub struct SupervisorActor;

/// What the engine's actors need, kept for respawns.
pub struct SupervisorArgs {
    /// Names.
    pub names: Names,
    /// The store.
    pub store: Store,
    /// The state recovered at open (taken by the first queue).
    pub recovered: Recovered,
    /// The clock.
    pub clock: Clock,
    /// Queue settings.
    pub queue: QueueSettings,
    /// Pools by name.
    pub pools: BTreeMap<Arc<str>, PoolSpec>,
    /// Breaker settings by target; others get `breaker_default`.
    pub breakers: HashMap<Arc<str>, BreakerSettings>,
    /// Settings of breakers of unlisted targets.
    pub breaker_default: BreakerSettings,
    /// The tasks.
    pub tasks: TaskRegistry,
    /// Restart limits.
    pub settings: SupervisorSettings,
    /// Engine events.
    pub events: EventSender,
    /// Queue counts.
    pub counts: watch::Sender<QueueCounts>,
    /// Where the error that stopped the engine is left.
    pub stopped: Arc<Mutex<Option<String>>>,
    /// Scheduler settings.
    pub scheduler: SchedulerSettings,
    /// Time between expiry passes.
    pub expiry_interval_ms: u64,
    /// Trigger settings.
    pub trigger: TriggerSettings,
    /// Settings of the assets actor.
    pub assets: AssetsSettings,
    /// Where command tasks keep attempt logs (`DATA/logs`): the expiry pass
    /// removes a run's `<graph>/<partition>/` and a job's attempt files.
    pub logs_dir: Option<PathBuf>,
    /// The cluster, when workers in other processes may join.
    pub cluster: Option<ClusterArgs>,
    /// Start no trigger at open: the host adopts its definition files
    /// first, then sends [`SupervisorMsg::StartTriggers`], so no trigger
    /// fires under a definition that a file has replaced while the engine
    /// was stopped. Triggers that adopts start meanwhile run as always.
    pub triggers_held: bool,
}

/// What the cluster gateway needs, kept for its respawns.
#[derive(Clone)]
pub struct ClusterArgs {
    /// Leases and heartbeats.
    pub settings: ClusterSettings,
    /// The folder of the definitions (workers' command working directories
    /// are relative to it).
    pub root: Option<String>,
    /// The engine's WEIR_DATA folder.
    pub work: Option<String>,
    /// The engine's artifact folder, when its artifacts are in one.
    pub artifacts: Option<String>,
    /// Where remote attempts' logs go.
    pub logs: Option<Arc<dyn LogIntake>>,
    /// The node server.
    pub server: Option<ActorRef<NodeServerMessage>>,
}

/// The supervisor's state.
pub struct SupervisorState {
    args: SupervisorArgs,
    recovered: Option<Recovered>,
    children: HashMap<ActorId, Role>,
    refs: BTreeMap<Role, ActorCell>,
    pool_workers: BTreeMap<(Arc<str>, u32), Arc<str>>,
    pool_capacity: BTreeMap<Arc<str>, u32>,
    restarts: HashMap<Role, VecDeque<u64>>,
    incarnation: u64,
    /// Shared by every incarnation of the queue.
    queue_shared: Arc<QueueShared>,
    /// Shared by every incarnation of the gateway.
    gateway_shared: Arc<GatewayShared>,
    /// Routes each settle to its graph's trigger.
    settled: Arc<SettledHub>,
}

impl Actor for SupervisorActor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<SupervisorMsg>,
        mut args: SupervisorArgs,
    ) -> Result<SupervisorState, ActorProcessingErr> {
        let recovered = std::mem::replace(&mut args.recovered, empty_recovered());
        let pool_capacity = args
            .pools
            .iter()
            .map(|(k, v)| (k.clone(), v.capacity))
            .collect();
        let settled = Arc::new(SettledHub::new(&args.events));
        let mut state = SupervisorState {
            args,
            recovered: Some(recovered),
            children: HashMap::new(),
            refs: BTreeMap::new(),
            pool_workers: BTreeMap::new(),
            pool_capacity,
            restarts: HashMap::new(),
            incarnation: 0,
            queue_shared: Arc::default(),
            gateway_shared: Arc::default(),
            settled,
        };
        // A failed store stops the engine at once, whichever actor's write
        // failed and whether or not that actor fails over it.
        let me = myself.clone();
        state.args.store.on_failure(move |cause| {
            let _ = me.cast(SupervisorMsg::StoreFailed(cause.to_string()));
        });
        // The queue first: pools grant it credit as they start. A failure
        // here fails the engine's open, with its cause.
        state.spawn(&myself, Role::Queue).await?;
        let pools: Vec<(Arc<str>, PoolSpec)> = state
            .args
            .pools
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (name, spec) in pools {
            for i in 0..spec.workers {
                state.spawn(&myself, Role::Pool(name.clone(), i)).await?;
            }
        }
        if state.args.cluster.is_some() {
            state.spawn(&myself, Role::Gateway).await?;
        }
        // A scheduler for every adopted graph, so active runs resume.
        for key in state.args.store.scan_keys(GRAPH_PREFIX)? {
            let graph = Name::new(&key[GRAPH_PREFIX.len()..])
                .map_err(|e| format!("graph record {key}: {e}"))?;
            state.spawn(&myself, Role::Scheduler(graph)).await?;
        }
        // A trigger for every graph with cron, keys or a backfill, after the
        // schedulers it starts runs on (unless held for the host's adopts).
        if !state.args.triggers_held {
            state.start_triggers(&myself).await?;
        } else {
            tracing::info!("triggers held until the definitions are adopted");
        }
        // After the schedulers it starts runs on.
        state.spawn(&myself, Role::Assets).await?;
        let every = Duration::from_millis(state.args.expiry_interval_ms.max(1));
        myself.send_interval(every, || SupervisorMsg::Expire);
        Ok(state)
    }

    async fn post_stop(
        &self,
        myself: ActorRef<SupervisorMsg>,
        _state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        myself
            .stop_children_and_wait(
                Some("engine stopping".into()),
                Some(Duration::from_secs(10)),
            )
            .await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<SupervisorMsg>,
        msg: SupervisorMsg,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::EnsureBreaker(target, reply) => {
                let role = Role::Breaker(target.clone());
                let existing = state.refs.get(&role).cloned();
                let cell = match existing {
                    Some(c) => Some(c),
                    None => match state.spawn(&myself, role.clone()).await {
                        Ok(()) => state.refs.get(&role).cloned(),
                        Err(e) => {
                            tracing::error!(target = %target, error = %e, "breaker failed to start");
                            state.failed(&myself, role, e.to_string());
                            None
                        }
                    },
                };
                let _ = reply.send(cell.map(ActorRef::<BreakerMsg>::from));
            }
            SupervisorMsg::EnsureScheduler(graph, reply) => {
                let role = Role::Scheduler(graph.clone());
                if !state.refs.contains_key(&role) {
                    if let Err(e) = state.spawn(&myself, role.clone()).await {
                        let _ = reply.send(Err(format!(
                            "scheduler of graph {graph} failed to start: {e}"
                        )));
                        return Ok(());
                    }
                }
                let cell = state.refs.get(&role).cloned().expect("spawned");
                let _ = reply.send(Ok(ActorRef::<SchedulerMsg>::from(cell)));
            }
            SupervisorMsg::EnsureTrigger(graph, reply) => {
                let role = Role::Trigger(graph.clone());
                if let Some(cell) = state.refs.get(&role) {
                    let trigger = ActorRef::<TriggerMsg>::from(cell.clone());
                    let _ = trigger.cast(TriggerMsg::Adopted);
                    let _ = reply.send(Ok(trigger));
                    return Ok(());
                }
                if let Err(e) = state.spawn(&myself, role.clone()).await {
                    let _ = reply.send(Err(format!(
                        "trigger of graph {graph} failed to start: {e}"
                    )));
                    return Ok(());
                }
                let cell = state.refs.get(&role).cloned().expect("spawned");
                let _ = reply.send(Ok(ActorRef::<TriggerMsg>::from(cell)));
            }
            SupervisorMsg::StartTriggers(reply) => {
                let r = state
                    .start_triggers(&myself)
                    .await
                    .map_err(|e| format!("triggers failed to start: {e}"));
                let _ = reply.send(r);
            }
            SupervisorMsg::StoreFailed(cause) => {
                state.stop_engine(&myself, format!("the store failed: {cause}"));
            }
            SupervisorMsg::Expire => {
                let store = state.args.store.clone();
                let now = state.args.clock.now_ms();
                let logs = state.args.logs_dir.clone();
                let expired =
                    crate::blocking::run(move || expire(&store, now, logs.as_deref())).await?;
                let deleted = match expired {
                    Ok(deleted) => deleted,
                    // A failed write has stopped the store, and its hook
                    // stops the engine with the cause; the supervisor
                    // itself must not fail over it (that would stop the
                    // engine with no error kept).
                    Err(e) if state.args.store.is_failed() => {
                        tracing::error!(error = %e, "expiry pass failed");
                        0
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "expiry pass failed; the next one retries");
                        0
                    }
                };
                if deleted > 0 {
                    tracing::info!(records = deleted, "records expired");
                    let _ = state
                        .args
                        .events
                        .send(EngineEvent::Expired { records: deleted });
                }
            }
            SupervisorMsg::Respawn(role) => {
                // A breaker may have been spawned on demand (EnsureBreaker)
                // during the backoff: spawning it again would fail on its
                // name and count as another failure, over and over.
                if state.refs.contains_key(&role) {
                    tracing::debug!(role = %role, "already running; respawn skipped");
                } else if let Err(e) = state.spawn(&myself, role.clone()).await {
                    state.failed(&myself, role, format!("restart failed: {e}"));
                }
            }
            SupervisorMsg::ResizePool(pool, capacity) => {
                state.pool_capacity.insert(pool.clone(), capacity);
                for (role, cell) in &state.refs {
                    if matches!(role, Role::Pool(p, _) if *p == pool) {
                        let _ =
                            ActorRef::<PoolMsg>::from(cell.clone()).cast(PoolMsg::Resize(capacity));
                    }
                }
            }
            SupervisorMsg::Children(reply) => {
                let _ = reply.send(
                    state
                        .refs
                        .iter()
                        .map(|(r, c)| (r.clone(), c.clone()))
                        .collect(),
                );
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<SupervisorMsg>,
        event: SupervisionEvent,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => (
                cell,
                format!("stopped: {}", reason.unwrap_or_else(|| "no reason".into())),
            ),
            _ => return Ok(()),
        };
        let Some(role) = state.children.remove(&cell.get_id()) else {
            return Ok(());
        };
        if state
            .refs
            .get(&role)
            .is_some_and(|c| c.get_id() == cell.get_id())
        {
            state.refs.remove(&role);
        }
        tracing::warn!(role = %role, error = %why, "supervised actor failed");
        if let Role::Pool(pool, index) = &role {
            if let Some(worker_id) = state.pool_workers.remove(&(pool.clone(), *index)) {
                if let Some(q) = ActorRef::<QueueMsg>::where_is(state.args.names.queue()) {
                    let _ = q.cast(QueueMsg::WorkerGone { worker_id });
                }
            }
        }
        state.failed(&myself, role, why);
        Ok(())
    }
}

impl SupervisorState {
    /// Counts a failure of `role`; stops the engine past the intensity
    /// limit, else schedules a respawn after the backoff.
    fn failed(&mut self, myself: &ActorRef<SupervisorMsg>, role: Role, why: String) {
        if let Some(cause) = self.args.store.failure() {
            let error = format!("the store failed: {cause}; {role} stopped: {why}");
            self.stop_engine(myself, error);
            return;
        }
        let now = self.args.clock.now_ms();
        let s = &self.args.settings;
        let window = self.restarts.entry(role.clone()).or_default();
        while window
            .front()
            .is_some_and(|&t| now.saturating_sub(t) > s.restart_window_ms)
        {
            window.pop_front();
        }
        window.push_back(now);
        let n = window.len() as u32;
        if n > s.restarts_max {
            let error = format!(
                "{role} failed {n} times within {} ms (limit {}); last failure: {why}",
                s.restart_window_ms, s.restarts_max
            );
            self.stop_engine(myself, error);
            return;
        }
        let backoff = s
            .backoff_initial_ms
            .saturating_mul(1u64 << (n - 1).min(20))
            .min(s.backoff_max_ms);
        let _ = self.args.events.send(EngineEvent::Restarted {
            role: role.to_string(),
            error: why.clone(),
        });
        tracing::info!(role = %role, restart = n, backoff_ms = backoff, "restarting");
        myself.send_after(Duration::from_millis(backoff), move || {
            SupervisorMsg::Respawn(role)
        });
    }

    fn stop_engine(&mut self, myself: &ActorRef<SupervisorMsg>, error: String) {
        {
            let mut stopped = self.args.stopped.lock().unwrap_or_else(|p| p.into_inner());
            if stopped.is_some() {
                // Stopping already, for the first reason: keep it.
                return;
            }
            *stopped = Some(error.clone());
        }
        tracing::error!(error = %error, "engine stopping");
        let _ = self.args.events.send(EngineEvent::Stopped {
            error: error.clone(),
        });
        myself.stop(Some(error));
    }

    /// Starts the trigger of every stored graph with cron, keys or a
    /// backfill that has none running; returns how many it started.
    async fn start_triggers(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
    ) -> Result<usize, ActorProcessingErr> {
        let mut started = 0;
        for key in self.args.store.scan_keys(GRAPH_PREFIX)? {
            let graph = Name::new(&key[GRAPH_PREFIX.len()..])
                .map_err(|e| format!("graph record {key}: {e}"))?;
            let role = Role::Trigger(graph.clone());
            if self.refs.contains_key(&role) {
                continue;
            }
            if crate::trigger::needed(&self.args.store, graph.as_str())? {
                self.spawn(myself, role).await?;
                started += 1;
            }
        }
        Ok(started)
    }

    async fn spawn(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        role: Role,
    ) -> Result<(), ActorProcessingErr> {
        let names = self.args.names.clone();
        let sup = myself.get_cell();
        let cell: ActorCell = match &role {
            Role::Queue => {
                let args = QueueArgs {
                    names: names.clone(),
                    store: self.args.store.clone(),
                    recovered: self.recovered.take(),
                    clock: self.args.clock.clone(),
                    settings: self.args.queue.clone(),
                    events: self.args.events.clone(),
                    counts: self.args.counts.clone(),
                    shared: self.queue_shared.clone(),
                    workers: self.pool_workers.values().cloned().collect(),
                };
                let restart = args.recovered.is_none();
                let (actor, _) =
                    Actor::spawn_linked(Some(names.queue()), QueueActor, args, sup).await?;
                if restart {
                    for (r, c) in &self.refs {
                        match r {
                            Role::Pool(..) => {
                                let _ = ActorRef::<PoolMsg>::from(c.clone())
                                    .cast(PoolMsg::QueueRestarted);
                            }
                            Role::Gateway => {
                                let _ = ActorRef::<GatewayMsg>::from(c.clone())
                                    .cast(GatewayMsg::QueueRestarted);
                            }
                            _ => {}
                        }
                    }
                }
                actor.get_cell()
            }
            Role::Pool(pool, index) => {
                self.incarnation += 1;
                let worker_id: Arc<str> = Arc::from(format!(
                    "{pool}.{index}.{}.{}",
                    names.prefix(),
                    self.incarnation
                ));
                let args = PoolArgs {
                    pool: pool.clone(),
                    worker_id: worker_id.clone(),
                    capacity: self.pool_capacity.get(pool).copied().unwrap_or(1),
                    tasks: self.args.tasks.clone(),
                    uplink: Uplink::Local {
                        names: names.clone(),
                        supervisor: Some(myself.clone()),
                        store: self.args.store.clone(),
                    },
                    clock: self.args.clock.clone(),
                    output_bytes_max: self.args.queue.output_bytes_max,
                };
                let (actor, _) = Actor::spawn_linked(
                    Some(names.pool(pool, *index, self.incarnation)),
                    PoolActor,
                    args,
                    sup,
                )
                .await?;
                self.pool_workers.insert((pool.clone(), *index), worker_id);
                actor.get_cell()
            }
            Role::Scheduler(graph) => {
                let args = SchedulerArgs {
                    graph: graph.clone(),
                    names: names.clone(),
                    store: self.args.store.clone(),
                    clock: self.args.clock.clone(),
                    events: self.args.events.clone(),
                    settings: self.args.scheduler.clone(),
                };
                let (actor, _) = Actor::spawn_linked(
                    Some(names.scheduler(graph.as_str())),
                    SchedulerActor,
                    args,
                    sup,
                )
                .await?;
                actor.get_cell()
            }
            Role::Trigger(graph) => {
                let args = TriggerArgs {
                    graph: graph.clone(),
                    names: names.clone(),
                    store: self.args.store.clone(),
                    clock: self.args.clock.clone(),
                    events: self.args.events.clone(),
                    settled: self.settled.clone(),
                    settings: self.args.trigger.clone(),
                };
                let (actor, _) = Actor::spawn_linked(
                    Some(names.trigger(graph.as_str())),
                    TriggerActor,
                    args,
                    sup,
                )
                .await?;
                actor.get_cell()
            }
            Role::Assets => {
                let args = AssetsArgs {
                    names: names.clone(),
                    store: self.args.store.clone(),
                    events: self.args.events.clone(),
                    settings: self.args.assets.clone(),
                };
                let (actor, _) =
                    Actor::spawn_linked(Some(names.assets()), AssetsActor, args, sup).await?;
                actor.get_cell()
            }
            Role::Gateway => {
                let cluster = self
                    .args
                    .cluster
                    .clone()
                    .ok_or("a gateway without a cluster")?;
                let args = GatewayArgs {
                    names: names.clone(),
                    store: self.args.store.clone(),
                    clock: self.args.clock.clone(),
                    events: self.args.events.clone(),
                    settings: cluster.settings,
                    supervisor: myself.clone(),
                    output_bytes_max: self.args.queue.output_bytes_max,
                    pools: self.args.pools.keys().map(|p| p.to_string()).collect(),
                    root: cluster.root,
                    work: cluster.work,
                    artifacts: cluster.artifacts,
                    logs: cluster.logs,
                    server: cluster.server,
                    shared: self.gateway_shared.clone(),
                };
                let (actor, _) =
                    Actor::spawn_linked(Some(names.gateway()), GatewayActor, args, sup).await?;
                actor.get_cell()
            }
            Role::Breaker(target) => {
                let settings = self
                    .args
                    .breakers
                    .get(target)
                    .cloned()
                    .unwrap_or_else(|| self.args.breaker_default.clone());
                let args = BreakerArgs {
                    target: target.clone(),
                    settings,
                    store: self.args.store.clone(),
                    clock: self.args.clock.clone(),
                    events: self.args.events.clone(),
                };
                let (actor, _) =
                    Actor::spawn_linked(Some(names.breaker(target)), BreakerActor, args, sup)
                        .await?;
                actor.get_cell()
            }
        };
        self.children.insert(cell.get_id(), role.clone());
        self.refs.insert(role, cell);
        Ok(())
    }
}

/// One expiry pass: deletes due records; a deleted run takes its node
/// records and its logs (under `logs_dir`) with it, a plain job's done
/// record its attempt logs. Returns the records deleted.
pub fn expire(
    store: &Store,
    now_ms: u64,
    logs_dir: Option<&Path>,
) -> Result<usize, crate::store::StoreError> {
    let mut deleted = 0;
    loop {
        // A run's node records go before the run record and its index
        // entry: a crash in between leaves the entry, and the next pass
        // deletes the rest (deleting a prefix again is harmless).
        let keys = store.expire_due_with(now_ms, |key| {
            if let Some(rest) = key.strip_prefix("run/") {
                deleted += store.delete_prefix(&format!("{}{rest}/", DONE_PREFIX))?;
                deleted += store.delete_prefix(&format!("{}{rest}/", DEAD_PREFIX))?;
                deleted += store.delete_prefix(&format!("{}{rest}/", LEDGER_PREFIX))?;
            }
            if let Some(dir) = logs_dir {
                remove_logs(dir, key);
            }
            Ok(())
        })?;
        if keys.is_empty() {
            return Ok(deleted);
        }
        deleted += keys.len();
    }
}

/// Removes the logs of an expiring record: `logs/<graph>/<partition>/` of
/// `run/<graph>/<partition>`, the attempt files `logs/<key>/<n>.log|json`
/// and the records file of a plain job's `done/<key>` (not the folder's subfolders: a graph may
/// share the key's name). The layout is weir's `logs` module's; failures
/// are traced, never fatal: logs are not records.
fn remove_logs(logs_dir: &Path, key: &str) {
    let (rel, whole) = if let Some(run) = key.strip_prefix("run/") {
        (run, true)
    } else if let Some(job) = key.strip_prefix(DONE_PREFIX) {
        if job.contains('/') {
            // A node record: its run's folder goes with the run.
            return;
        }
        (job, false)
    } else {
        return;
    };
    if rel
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        tracing::warn!(
            key,
            "logs of an expired record not removed: the key is no path"
        );
        return;
    }
    // Named as the log writer names them (long or odd components hashed).
    let dir = rel.split('/').fold(logs_dir.to_path_buf(), |d, c| {
        d.join(weir_core::names::path_component(c).as_ref())
    });
    let result = if whole {
        std::fs::remove_dir_all(&dir)
    } else {
        std::fs::read_dir(&dir).and_then(|entries| {
            for entry in entries {
                let path = entry?.path();
                let name = path.file_name().and_then(|n| n.to_str());
                let is_attempt = name == Some(weir_core::names::ATTEMPT_RECORDS_FILE)
                    || name
                        .and_then(|n| n.split('.').next())
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
                if is_attempt && path.is_file() {
                    std::fs::remove_file(&path)?;
                }
            }
            // Left when a graph's folders are in it.
            let _ = std::fs::remove_dir(&dir);
            Ok(())
        })
    };
    match result {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            tracing::warn!(key, dir = %dir.display(), error = %e, "logs of an expired record not removed");
        }
        _ => tracing::debug!(key, dir = %dir.display(), "logs of an expired record removed"),
    }
}

fn empty_recovered() -> Recovered {
    Recovered {
        state: weir_core::queue::QueueState::new(),
        snapshot: Default::default(),
        snapshot_tickets: 0,
        entries_replayed: 0,
        ops_replayed: 0,
        elapsed: Duration::ZERO,
    }
}
