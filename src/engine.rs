//! The engine: what an application embeds.
//!
//! [`EngineBuilder`] takes the data directory, the durability mode, pools
//! and their capacities, targets and their breaker settings, tasks and the
//! supervisor's limits; [`EngineBuilder::open`] opens the store (replaying
//! it), then spawns the supervisor, which spawns the queue and the pools.
//! Everything the engine acknowledges is durable: `enqueue` returns only
//! after the ticket's journal entry is flushed as the durability mode says.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef};
use tokio::sync::watch;
use weir_core::breaker::{Breaker, BreakerSettings};
use weir_core::names::{Key, Name};
use weir_core::queue::Job;

use ractor_cluster::NodeServerMessage;
use weir_actors::breaker::BreakerMsg;
use weir_actors::clock::Clock;
use weir_actors::cluster::gateway::{GatewayMsg, LogIntake};
use weir_actors::cluster::{ClusterSettings, WorkerView};
use weir_actors::event_channel::{EventReceiver, EventSender};
use weir_actors::names::Names;
use weir_actors::queue::{
    Cancelled, Enqueued, LiveTicket, QueueCounts, QueueMsg, QueueSettings, QueueStatus,
    TicketFilter, TicketView,
};
use weir_actors::scheduler::SchedulerSettings;
use weir_actors::store::{Durability, Store, StoreError, StoreSettings};
use weir_actors::supervisor::{
    ClusterArgs, PoolSpec, Role, SupervisorActor, SupervisorArgs, SupervisorMsg, SupervisorSettings,
};
use weir_actors::task::{Resolver, Task, TaskContext, TaskRegistry, TaskResult};
use weir_actors::trigger::TriggerSettings;

/// How long a call to an engine actor may take before it is an error.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// Events buffered per subscriber before the slowest misses some.
pub const EVENTS_BUFFER: usize = 65_536;

/// A failure of the engine's API.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A job is not valid.
    #[error("job {key:?}: {what}")]
    BadJob {
        /// Its key.
        key: String,
        /// What is wrong.
        what: String,
    },
    /// The engine stopped (an actor failed too often, or it was shut down).
    #[error("engine stopped: {0}")]
    Stopped(String),
    /// An actor did not answer.
    #[error("engine actor {actor} did not answer: {why}")]
    Call {
        /// Which.
        actor: &'static str,
        /// Why.
        why: String,
    },
    /// A wait ran out.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, &'static str),
    /// Settings are not valid.
    #[error("settings: {0}")]
    Settings(String),
    /// A graph definition is not valid for this engine.
    #[error("{0}")]
    BadGraph(String),
    /// A graph operation failed (a contended record, a refused change).
    #[error("{0}")]
    Graph(String),
    /// What the call names does not exist: a graph, a run, a dead letter,
    /// a breaker.
    #[error("{0}")]
    NotFound(String),
    /// A start's params are refused: a name the definition does not
    /// declare, or a value that is too long or holds a NUL.
    #[error("{0}")]
    BadParam(String),
}

/// Builds an engine.
pub struct EngineBuilder {
    dir: PathBuf,
    store: StoreSettings,
    queue: QueueSettings,
    pools: BTreeMap<Arc<str>, PoolSpec>,
    breakers: HashMap<Arc<str>, BreakerSettings>,
    breaker_default: BreakerSettings,
    tasks: TaskRegistry,
    supervisor: SupervisorSettings,
    clock: Option<Clock>,
    parent: Option<ActorCell>,
    scheduler: SchedulerSettings,
    expiry_interval_ms: u64,
    triggers_held: bool,
    trigger: TriggerSettings,
    assets: weir_actors::assets::AssetsSettings,
    logs_dir: Option<PathBuf>,
    cluster: Option<ClusterConfig>,
    /// A store opened already (a replicated engine's member, whose state
    /// machine keeps it open): the engine recovers from it instead of
    /// opening `dir`.
    opened: Option<Store>,
}

/// Worker processes may join the engine (ractor_cluster): where its node
/// listens, the cookie every node must share, TLS, and the workers' leases.
#[derive(Clone)]
pub struct ClusterConfig {
    /// Where the cluster node listens (an explicit port: workers are told
    /// it). Loopback unless the operator says otherwise.
    pub listen: SocketAddr,
    /// The shared secret of the cluster (never sent: a challenge proves it).
    pub cookie: String,
    /// TLS for every session, when set.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Leases and heartbeats.
    pub settings: ClusterSettings,
    /// The folder of the definitions: workers' command working directories
    /// are taken relative to it (and to their own `--root`).
    pub root: Option<String>,
    /// The engine's WEIR_DATA folder, which commands of workers on the
    /// engine's machine (without a root of their own) share.
    pub work_dir: Option<String>,
    /// The engine's artifact folder, when its artifacts are kept in one:
    /// workers on its machine without an `--artifacts` URL share it.
    pub artifacts_dir: Option<String>,
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("listen", &self.listen)
            .field("tls", &self.tls.is_some())
            .field("settings", &self.settings)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl ClusterConfig {
    /// A cluster node on `listen` with `cookie`, no TLS, default leases.
    pub fn new(listen: SocketAddr, cookie: impl Into<String>) -> Self {
        ClusterConfig {
            listen,
            cookie: cookie.into(),
            tls: None,
            settings: ClusterSettings::default(),
            root: None,
            work_dir: None,
            artifacts_dir: None,
        }
    }
}

impl EngineBuilder {
    /// An engine whose data lives in `dir`.
    pub fn new(dir: impl AsRef<Path>) -> Self {
        EngineBuilder {
            dir: dir.as_ref().to_path_buf(),
            store: StoreSettings::default(),
            queue: QueueSettings::default(),
            pools: BTreeMap::new(),
            breakers: HashMap::new(),
            breaker_default: BreakerSettings::default(),
            tasks: TaskRegistry::new(),
            supervisor: SupervisorSettings::default(),
            clock: None,
            parent: None,
            scheduler: SchedulerSettings::default(),
            expiry_interval_ms: 60_000,
            triggers_held: false,
            trigger: TriggerSettings::default(),
            assets: Default::default(),
            logs_dir: Some(dir.as_ref().join(crate::logs::LOGS_DIR)),
            cluster: None,
            opened: None,
        }
    }

    /// Runs on `store`, opened already (a replicated engine's leader): the
    /// open recovers the queue from it as a restart does.
    pub fn opened_store(mut self, store: Store) -> Self {
        self.opened = Some(store);
        self
    }

    /// Lets worker processes join (see [`ClusterConfig`]); a pool may then
    /// have no local workers (`pool_workers(name, slots, 0)`): remote
    /// workers serve it.
    pub fn cluster(mut self, config: ClusterConfig) -> Self {
        self.cluster = Some(config);
        self
    }

    /// Where command tasks keep attempt logs, removed with the records they
    /// belong to when those expire (default: `logs` in the data directory).
    pub fn logs_dir(mut self, path: impl AsRef<Path>) -> Self {
        self.logs_dir = Some(path.as_ref().to_path_buf());
        self
    }

    /// Scheduler settings (reconcile interval, submit batch).
    pub fn scheduler_settings(mut self, settings: SchedulerSettings) -> Self {
        self.scheduler = settings;
        self
    }

    /// Trigger settings (cron catch-up bound, backfill and inventory
    /// limits).
    pub fn trigger_settings(mut self, settings: TriggerSettings) -> Self {
        self.trigger = settings;
        self
    }

    /// Settings of the assets actor (how often it delivers what a lost
    /// message left waiting).
    pub fn assets_settings(mut self, settings: weir_actors::assets::AssetsSettings) -> Self {
        self.assets = settings;
        self
    }

    /// Starts no trigger at open: none fires (cron, keys, backfills) until
    /// [`Engine::start_triggers`]. A host that adopts definition files at
    /// start holds them, so that a file changed while the engine was
    /// stopped is adopted before anything fires under the old definition.
    /// A graph's adopt starts its trigger meanwhile, on the new definition.
    pub fn hold_triggers(mut self) -> Self {
        self.triggers_held = true;
        self
    }

    /// Time between passes that delete expired records, in ms.
    pub fn expiry_interval_ms(mut self, ms: u64) -> Self {
        self.expiry_interval_ms = ms;
        self
    }

    /// The durability mode (default fsync).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.store.durability = durability;
        self
    }

    /// All store settings.
    pub fn store_settings(mut self, settings: StoreSettings) -> Self {
        self.store = settings;
        self
    }

    /// Queue settings.
    pub fn queue_settings(mut self, settings: QueueSettings) -> Self {
        self.queue = settings;
        self
    }

    /// A pool of `capacity` slots served by one worker.
    pub fn pool(self, name: &str, capacity: u32) -> Self {
        self.pool_workers(name, capacity, 1)
    }

    /// A pool served by `workers` workers of `capacity` slots each.
    pub fn pool_workers(mut self, name: &str, capacity: u32, workers: u32) -> Self {
        self.pools
            .insert(Arc::from(name), PoolSpec { capacity, workers });
        self
    }

    /// Breaker settings of a target.
    pub fn target(mut self, name: &str, settings: BreakerSettings) -> Self {
        self.breakers.insert(Arc::from(name), settings);
        self
    }

    /// Breaker settings of targets not listed.
    pub fn breaker_default(mut self, settings: BreakerSettings) -> Self {
        self.breaker_default = settings;
        self
    }

    /// Registers a task.
    pub fn task(mut self, name: &str, task: Arc<dyn Task>) -> Self {
        self.tasks.register(name, task);
        self
    }

    /// Registers an async closure as a task.
    pub fn task_fn<F, Fut>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(TaskContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = TaskResult> + Send + 'static,
    {
        self.tasks.register_fn(name, f);
        self
    }

    /// Adds a resolver for task names no registered task answers.
    pub fn resolver(mut self, resolver: Resolver) -> Self {
        self.tasks.add_resolver(resolver);
        self
    }

    /// The supervisor's restart limits.
    pub fn supervisor_settings(mut self, settings: SupervisorSettings) -> Self {
        self.supervisor = settings;
        self
    }

    /// The clock (tests anchor it).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Links the engine's supervisor under an application's actor.
    pub fn supervised_by(mut self, parent: ActorCell) -> Self {
        self.parent = Some(parent);
        self
    }

    /// Opens the store, replays it, and starts the actors.
    pub async fn open(self) -> Result<Engine, EngineError> {
        if self.pools.is_empty() {
            return Err(EngineError::Settings(
                "no pool: add at least one with .pool(name, capacity)".into(),
            ));
        }
        for (name, spec) in &self.pools {
            Name::new(name.to_string())
                .map_err(|e| EngineError::Settings(format!("pool {name:?}: {e}")))?;
            if spec.capacity == 0 || (spec.workers == 0 && self.cluster.is_none()) {
                return Err(EngineError::Settings(format!(
                    "pool {name:?}: capacity and workers must be at least 1 (no local workers only with a cluster, whose workers serve the pool)"
                )));
            }
        }
        if let Some(c) = &self.cluster {
            c.settings.validate().map_err(EngineError::Settings)?;
            if c.listen.port() == 0 {
                return Err(EngineError::Settings(format!(
                    "cluster address {}: give a port; workers are told it (--join)",
                    c.listen
                )));
            }
            if c.cookie.trim().is_empty() {
                return Err(EngineError::Settings(
                    "cluster: no cookie; every node of the cluster must share one".into(),
                ));
            }
        }
        for (name, s) in &self.breakers {
            s.validate()
                .map_err(|e| EngineError::Settings(format!("target {name:?}: {e}")))?;
        }
        let dir = self.dir.clone();
        let store_settings = self.store.clone();
        let opened = self.opened.clone();
        let (store, recovered) = tokio::task::spawn_blocking(move || {
            let (store, recovered) = match opened {
                None => Store::open(dir, store_settings)?,
                Some(store) => {
                    let recovered = store.recover()?;
                    (store, recovered)
                }
            };
            // Blobs no record names (a crash between a blob's write and
            // its record, or between a record's expiry and its blob's
            // removal): nothing runs yet, so none is on its way to a record.
            let (kept, removed) = store.sweep_blobs()?;
            tracing::debug!(kept, removed, "blobs swept at open");
            Ok::<_, weir_actors::store::StoreError>((store, recovered))
        })
        .await
        .map_err(|e| EngineError::Settings(format!("store open panicked: {e}")))??;
        let names = Names::unique();
        let clock = self.clock.unwrap_or_else(Clock::system);
        let (cluster, node_server) = match &self.cluster {
            None => (None, None),
            Some(c) => {
                let name = format!(
                    "weir-engine-{}-{}@{}",
                    weir_actors::cluster::link::hostname(),
                    std::process::id(),
                    c.listen
                );
                let server = weir_actors::cluster::node::start_server(
                    c.listen,
                    c.cookie.clone(),
                    name,
                    c.tls.clone(),
                )
                .await
                .map_err(|e| EngineError::Settings(e.to_string()))?;
                tracing::info!(listen = %c.listen, tls = c.tls.is_some(), "cluster node listening");
                let logs: Option<Arc<dyn LogIntake>> = self.logs_dir.as_ref().map(|d| {
                    Arc::new(crate::logs::intake::RemoteLogs::new(d)) as Arc<dyn LogIntake>
                });
                (
                    Some(ClusterArgs {
                        settings: c.settings.clone(),
                        root: c.root.clone(),
                        work: c.work_dir.clone(),
                        artifacts: c.artifacts_dir.clone(),
                        logs,
                        server: Some(server.clone()),
                    }),
                    Some(server),
                )
            }
        };
        let events = EventSender::new(EVENTS_BUFFER);
        let (counts_tx, counts) = watch::channel(QueueCounts::default());
        let stopped = Arc::new(Mutex::new(None));
        let pools: BTreeMap<Arc<str>, PoolSpec> = self.pools.clone();
        let args = SupervisorArgs {
            names: names.clone(),
            store: store.clone(),
            recovered,
            clock: clock.clone(),
            queue: self.queue,
            pools: self.pools,
            breakers: self.breakers,
            breaker_default: self.breaker_default,
            tasks: self.tasks.clone(),
            settings: self.supervisor,
            events: events.clone(),
            counts: counts_tx,
            stopped: stopped.clone(),
            scheduler: self.scheduler,
            expiry_interval_ms: self.expiry_interval_ms,
            triggers_held: self.triggers_held,
            trigger: self.trigger.clone(),
            assets: self.assets.clone(),
            logs_dir: self.logs_dir,
            cluster,
        };
        let spawned = match self.parent {
            Some(parent) => {
                Actor::spawn_linked(Some(names.supervisor()), SupervisorActor, args, parent).await
            }
            None => Actor::spawn(Some(names.supervisor()), SupervisorActor, args).await,
        };
        let (supervisor, join) = match spawned {
            Ok(s) => s,
            Err(e) => {
                if let Some(server) = &node_server {
                    server.stop(None);
                }
                return Err(EngineError::Stopped(format!("engine failed to start: {e}")));
            }
        };
        Ok(Engine {
            names,
            store,
            supervisor,
            join: Mutex::new(Some(join)),
            events,
            counts,
            stopped,
            clock,
            pools,
            tasks: self.tasks,
            trigger_settings: self.trigger,
            node_server,
            cluster_listen: self.cluster.as_ref().map(|c| c.listen),
        })
    }
}

/// A running engine.
pub struct Engine {
    pub(crate) names: Names,
    pub(crate) store: Store,
    pub(crate) supervisor: ActorRef<SupervisorMsg>,
    pub(crate) join: Mutex<Option<tokio::task::JoinHandle<()>>>,
    pub(crate) events: EventSender,
    pub(crate) counts: watch::Receiver<QueueCounts>,
    pub(crate) stopped: Arc<Mutex<Option<String>>>,
    pub(crate) clock: Clock,
    pub(crate) pools: BTreeMap<Arc<str>, PoolSpec>,
    pub(crate) tasks: TaskRegistry,
    pub(crate) trigger_settings: TriggerSettings,
    pub(crate) node_server: Option<ActorRef<NodeServerMessage>>,
    pub(crate) cluster_listen: Option<SocketAddr>,
}

impl Engine {
    /// A builder.
    pub fn builder(dir: impl AsRef<Path>) -> EngineBuilder {
        EngineBuilder::new(dir)
    }

    fn queue(&self) -> Result<ActorRef<QueueMsg>, EngineError> {
        if let Some(e) = self.error() {
            return Err(EngineError::Stopped(e));
        }
        ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or_else(|| EngineError::Call {
            actor: "queue",
            why: "not running (restarting?)".into(),
        })
    }

    /// Checks a job before it is enqueued.
    pub fn validate_job(&self, job: &Job) -> Result<(), EngineError> {
        let bad = |what: String| EngineError::BadJob {
            key: job.key.to_string(),
            what,
        };
        Key::new(job.key.to_string()).map_err(|e| bad(e.to_string()))?;
        if !self.pools.contains_key(&job.pool) {
            return Err(bad(format!(
                "pool {:?} is not a pool of this engine (pools: {})",
                job.pool,
                self.pools
                    .keys()
                    .map(|k| k.as_ref())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if let Some(t) = &job.target {
            Name::new(t.to_string()).map_err(|e| bad(format!("target: {e}")))?;
        }
        // With a cluster, workers may serve tasks this process has not
        // registered; a name no worker knows fails its attempt there.
        if self.tasks.find(&job.task).is_none() && self.node_server.is_none() {
            return Err(bad(format!(
                "no task is registered under the name {:?}",
                job.task
            )));
        }
        job.policy
            .validate()
            .map_err(|e| bad(format!("retry policy: {e}")))?;
        Ok(())
    }

    /// Enqueues a job; returns once it is durable. A key that is live or
    /// already ended enqueues nothing and says so.
    pub async fn enqueue(&self, job: Job) -> Result<Enqueued, EngineError> {
        let key = job.key.to_string();
        let mut answers = self.enqueue_many(vec![job]).await?;
        answers
            .pop()
            .expect("one answer per job")
            .map_err(|what| EngineError::BadJob { key, what })
    }

    /// Enqueues jobs in one durable batch; one answer per job, in order.
    pub async fn enqueue_many(
        &self,
        jobs: Vec<Job>,
    ) -> Result<Vec<Result<Enqueued, String>>, EngineError> {
        for job in &jobs {
            self.validate_job(job)?;
        }
        let queue = self.queue()?;
        ractor::call_t!(
            queue,
            QueueMsg::Enqueue,
            CALL_TIMEOUT.as_millis() as u64,
            jobs
        )
        .map_err(|e| self.call_err("queue", e))
    }

    /// Cancels the live ticket of `key`; returns once durable.
    pub async fn cancel(&self, key: &str) -> Result<Cancelled, EngineError> {
        let queue = self.queue()?;
        ractor::call_t!(
            queue,
            QueueMsg::Cancel,
            CALL_TIMEOUT.as_millis() as u64,
            key.to_string()
        )
        .map_err(|e| self.call_err("queue", e))
    }

    /// Counts per pool.
    pub async fn status(&self) -> Result<QueueStatus, EngineError> {
        let queue = self.queue()?;
        ractor::call_t!(queue, QueueMsg::Status, CALL_TIMEOUT.as_millis() as u64)
            .map_err(|e| self.call_err("queue", e))
    }

    /// A ticket's state: live with its tries, or its done record with its
    /// whole output (read from its blob and checked; a missing or damaged
    /// blob is an error naming its file).
    pub async fn ticket(&self, key: &str) -> Result<Option<TicketView>, EngineError> {
        let queue = self.queue()?;
        let view = ractor::call_t!(
            queue,
            QueueMsg::Ticket,
            CALL_TIMEOUT.as_millis() as u64,
            key.to_string()
        )
        .map_err(|e| self.call_err("queue", e))?;
        match view {
            Some(TicketView::Done(mut d)) if d.output_blob.is_some() => {
                let store = self.store.clone();
                let d = tokio::task::spawn_blocking(move || d.resolve_output(&store).map(|()| d))
                    .await
                    .map_err(|e| EngineError::Settings(format!("output read panicked: {e}")))??;
                Ok(Some(TicketView::Done(d)))
            }
            other => Ok(other),
        }
    }

    /// Live tickets by state and pool, oldest first.
    pub async fn tickets(&self, filter: TicketFilter) -> Result<Vec<LiveTicket>, EngineError> {
        let queue = self.queue()?;
        ractor::call_t!(
            queue,
            QueueMsg::List,
            CALL_TIMEOUT.as_millis() as u64,
            filter
        )
        .map_err(|e| self.call_err("queue", e))
    }

    /// A target's breaker, if it has been used.
    pub async fn breaker(&self, target: &str) -> Result<Option<Breaker>, EngineError> {
        let Some(b) = ActorRef::<BreakerMsg>::where_is(self.names.breaker(target)) else {
            return Ok(None);
        };
        ractor::call_t!(b, BreakerMsg::Get, CALL_TIMEOUT.as_millis() as u64)
            .map(Some)
            .map_err(|e| self.call_err("breaker", e))
    }

    /// Resizes every worker of a pool.
    pub fn resize_pool(&self, pool: &str, capacity: u32) -> Result<(), EngineError> {
        self.supervisor
            .cast(SupervisorMsg::ResizePool(Arc::from(pool), capacity))
            .map_err(|e| EngineError::Call {
                actor: "supervisor",
                why: e.to_string(),
            })
    }

    /// The engine's events from now on (`recv` as on a tokio broadcast
    /// receiver: `Lagged(n)` when this subscriber fell `EVENTS_BUFFER`
    /// behind and missed `n`).
    pub fn subscribe(&self) -> EventReceiver {
        self.events.subscribe()
    }

    /// Queue counts, updated after every durable batch.
    pub fn counts(&self) -> watch::Receiver<QueueCounts> {
        self.counts.clone()
    }

    /// Waits until no ticket is live (every enqueued job ended).
    pub async fn drain_until_idle(&self, timeout: Duration) -> Result<(), EngineError> {
        let mut counts = self.counts.clone();
        let wait = async {
            loop {
                if let Some(e) = self.error() {
                    return Err(EngineError::Stopped(e));
                }
                if counts.borrow_and_update().live == 0 {
                    return Ok(());
                }
                // Wake on a change, or every 100 ms to notice a stop.
                let _ = tokio::time::timeout(Duration::from_millis(100), counts.changed()).await;
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| EngineError::Timeout(timeout, "the queue to drain"))?
    }

    /// The error that stopped the engine, if one did.
    pub fn error(&self) -> Option<String> {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until the engine stops by itself (an actor failed too often);
    /// returns its error.
    pub async fn stopped(&self) -> Option<String> {
        let join = self.join.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(join) = join {
            let _ = join.await;
        }
        self.error()
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The actor names of this engine.
    pub fn names(&self) -> &Names {
        &self.names
    }

    /// The supervisor.
    pub fn supervisor(&self) -> &ActorRef<SupervisorMsg> {
        &self.supervisor
    }

    /// The running children by role (for tests and tools).
    pub async fn children(&self) -> Result<Vec<(Role, ActorCell)>, EngineError> {
        ractor::call_t!(
            self.supervisor,
            SupervisorMsg::Children,
            CALL_TIMEOUT.as_millis() as u64
        )
        .map_err(|e| self.call_err("supervisor", e))
    }

    /// Each pool's slots (capacity times workers).
    pub fn pool_capacities(&self) -> BTreeMap<String, u32> {
        self.pools
            .iter()
            .map(|(k, v)| (k.to_string(), v.capacity.saturating_mul(v.workers)))
            .collect()
    }

    /// Now, by the engine's clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Stops gracefully: hands out no more tickets, waits up to `timeout`
    /// for running attempts to end and their outcomes to be durable, stops
    /// the actors and flushes the store.
    pub async fn shutdown(self, timeout: Duration) -> Result<(), EngineError> {
        if let Ok(queue) = self.queue() {
            let _ = queue.cast(QueueMsg::Pause(true));
            let mut counts = self.counts.clone();
            let _ = tokio::time::timeout(timeout, async {
                loop {
                    if counts.borrow_and_update().running == 0 {
                        break;
                    }
                    if counts.changed().await.is_err() {
                        break;
                    }
                }
            })
            .await;
        }
        if let Err(e) = self
            .supervisor
            .stop_and_wait(Some("shutdown".into()), Some(timeout))
            .await
        {
            // An actor still busy past the grace period (a handler waiting on
            // another actor): everything acknowledged is durable already, so
            // stop it hard rather than hang the caller.
            tracing::warn!(error = %e, "graceful stop timed out; killing the engine's actors");
            for cell in self.supervisor.get_cell().get_children() {
                cell.kill();
            }
            self.supervisor.kill();
        }
        let join = self.join.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(join) = join {
            let _ = tokio::time::timeout(timeout, join).await;
        }
        if let Some(server) = &self.node_server {
            let _ = server
                .stop_and_wait(Some("engine stopping".into()), Some(timeout))
                .await;
        }
        let store = self.store.clone();
        if !store.is_failed() {
            tokio::task::spawn_blocking(move || store.sync())
                .await
                .map_err(|e| EngineError::Settings(format!("flush panicked: {e}")))??;
        }
        tracing::info!("engine shut down");
        Ok(())
    }

    /// Where the cluster node listens, when workers may join.
    pub fn cluster_address(&self) -> Option<SocketAddr> {
        self.cluster_listen
    }

    /// The worker processes that joined: joined ones first, then lost and
    /// departed ones, newest first. Empty without a cluster.
    pub async fn workers(&self) -> Result<Vec<WorkerView>, EngineError> {
        if self.node_server.is_none() {
            return Ok(Vec::new());
        }
        let gateway = ActorRef::<GatewayMsg>::where_is(self.names.gateway())
            .ok_or_else(|| self.call_err("gateway", "not running"))?;
        ractor::call_t!(
            gateway,
            GatewayMsg::Workers,
            CALL_TIMEOUT.as_millis() as u64
        )
        .map_err(|e| self.call_err("gateway", e))
    }

    /// Stops (true) or resumes (false) handing out tickets.
    pub fn pause(&self, paused: bool) -> Result<(), EngineError> {
        self.queue()?
            .cast(QueueMsg::Pause(paused))
            .map_err(|e| EngineError::Call {
                actor: "queue",
                why: e.to_string(),
            })
    }

    pub(crate) fn call_err<E: std::fmt::Display>(&self, actor: &'static str, e: E) -> EngineError {
        if let Some(stopped) = self.error() {
            return EngineError::Stopped(stopped);
        }
        EngineError::Call {
            actor,
            why: e.to_string(),
        }
    }
}
