//! The engine's gateway: admits worker processes, spawns a proxy per pool
//! of each, routes what workers send to the proxies, and watches leases.
//!
//! A join is checked before anything runs: the protocol version (another
//! one is refused, naming both), the pools (each must be one of the
//! engine's, with at least one slot). A worker the gateway knows as joined
//! resumes: its proxies keep their attempts and are pointed at its new link.
//! Any other join — a new worker, a lost one back, a restarted gateway's
//! stranger — gets fresh proxies, each with a new worker id in the queue.
//!
//! A worker silent for `lease_ms` is lost: its proxies stop, the queue is
//! told each proxy's worker id is gone (their running attempts are
//! requeued, each counted as an attempt), and the worker is told so
//! whenever it is heard from again. Messages from a worker that is not
//! joined are refused (a report among them is counted and logged) and
//! answered with `Lost`, so it rejoins.
//!
//! The proxies of every incarnation are in [`GatewayShared`], which the
//! supervisor keeps: a respawned gateway stops the proxies of the one that
//! died and has their attempts requeued before it admits anyone.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::NodeServerMessage;
use tokio::sync::broadcast;

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::events::EngineEvent;
use crate::names::Names;
// The gateway's interface lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::cluster::GatewayMsg;
use crate::msg::cluster::{
    FromWorker, LinkMsg, SessionEvent, WorkerPoolView, WorkerState, WorkerView,
};
use crate::msg::pool::PoolMsg;
use crate::msg::queue::QueueMsg;
use crate::msg::supervisor::SupervisorMsg;
use crate::msg::work::PoolUp;
use crate::protocol::{
    link_name, Hello, LogFrame, ToEngine, ToWorker, Welcome, ENGINE_GROUP, PROTOCOL_VERSION,
    WORKERS_GROUP,
};
use crate::store::Store;

use super::proxy::{ProxyActor, ProxyArgs};
use super::ClusterSettings;

/// How long after a lost notice its worker's session is closed.
pub const LOST_CLOSE_DELAY_MS: u64 = 200;

/// How often a worker that is not joined is told so, at most.
pub const LOST_NOTICE_EVERY_MS: u64 = 1_000;

/// Where the engine keeps remote attempts' logs.
pub trait LogIntake: Send + Sync + 'static {
    /// Log events of attempts that ran on `worker_id`, in order.
    fn frames(&self, worker_id: &str, frames: Vec<LogFrame>);

    /// `worker_id` is lost or left: logs of its attempts that never ended
    /// are ended now (their attempts were requeued).
    fn worker_gone(&self, worker_id: &str) {
        let _ = worker_id;
    }
}

/// What every incarnation of the gateway shares (the supervisor keeps it):
/// the proxies alive, with their worker ids in the queue.
#[derive(Default)]
pub struct GatewayShared {
    proxies: Mutex<BTreeMap<Arc<str>, ActorCell>>,
}

impl GatewayShared {
    fn add(&self, queue_worker_id: Arc<str>, cell: ActorCell) {
        self.proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(queue_worker_id, cell);
    }

    fn remove(&self, queue_worker_id: &str) {
        self.proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(queue_worker_id);
    }

    fn take(&self) -> BTreeMap<Arc<str>, ActorCell> {
        std::mem::take(&mut *self.proxies.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The gateway actor.
pub struct GatewayActor;

/// What the gateway needs.
pub struct GatewayArgs {
    /// Engine names.
    pub names: Names,
    /// The store (the proxies' blobs).
    pub store: Store,
    /// The clock.
    pub clock: Clock,
    /// Engine events.
    pub events: EventSender,
    /// Leases.
    pub settings: ClusterSettings,
    /// The supervisor (the proxies' breakers).
    pub supervisor: ActorRef<SupervisorMsg>,
    /// The largest output kept.
    pub output_bytes_max: usize,
    /// The engine's pools: a worker may serve these only.
    pub pools: BTreeSet<String>,
    /// The folder of the definitions (command working directories are
    /// relative to it on workers).
    pub root: Option<String>,
    /// The engine's WEIR_DATA folder.
    pub work: Option<String>,
    /// The engine's artifact folder, when its artifacts are in one.
    pub artifacts: Option<String>,
    /// Where remote attempts' logs go.
    pub logs: Option<Arc<dyn LogIntake>>,
    /// The node server (its session events come here).
    pub server: Option<ActorRef<NodeServerMessage>>,
    /// Shared by every incarnation.
    pub shared: Arc<GatewayShared>,
}

struct Proxy {
    actor: ActorRef<PoolMsg>,
    queue_worker_id: Arc<str>,
    slots: u32,
}

struct Entry {
    hello: Hello,
    address: String,
    state: WorkerState,
    since_ms: u64,
    joined_ms: u64,
    last_seen_ms: u64,
    link: Option<ActorRef<LinkMsg>>,
    proxies: BTreeMap<String, Proxy>,
    /// Running attempts by pool, from the last heartbeat.
    running: BTreeMap<String, usize>,
    reports_refused: u64,
    /// Times it was declared lost.
    times_lost: u32,
    lost_reason: Option<String>,
}

/// The gateway's state.
pub struct GatewayState {
    args: GatewayArgs,
    workers: BTreeMap<String, Entry>,
    /// Proxy worker ids in the queue → their worker.
    by_queue_id: HashMap<Arc<str>, String>,
    /// Sessions by peer address: authenticated or not.
    sessions: HashMap<String, bool>,
    /// When a worker that is not joined was last told so.
    lost_notices: HashMap<String, u64>,
    incarnation: u64,
}

impl Actor for GatewayActor {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = GatewayArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<GatewayMsg>,
        args: GatewayArgs,
    ) -> Result<GatewayState, ActorProcessingErr> {
        args.settings.validate()?;
        // The proxies of an incarnation that died: their attempts go back
        // to the queue before anyone is admitted again.
        let stale = args.shared.take();
        if !stale.is_empty() {
            tracing::warn!(
                proxies = stale.len(),
                "gateway restarted: requeueing the attempts of its workers' proxies"
            );
        }
        for (queue_worker_id, cell) in stale {
            cell.kill();
            tell_queue(
                &args.names,
                QueueMsg::WorkerGone {
                    worker_id: queue_worker_id,
                },
            );
        }
        if let Some(server) = &args.server {
            super::node::subscribe_gateway(server, myself.clone());
        }
        // Refused reports counted per worker.
        let mut rx = args.events.subscribe();
        let me = myself.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(EngineEvent::ReportRefused { worker, .. }) => {
                        if me.cast(GatewayMsg::Refused(worker)).is_err() {
                            return;
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        ractor::pg::join(ENGINE_GROUP.to_string(), vec![myself.get_cell()]);
        myself.send_interval(
            Duration::from_millis(args.settings.heartbeat_ms.max(1)),
            || GatewayMsg::CheckLeases,
        );
        tracing::info!(
            lease_ms = args.settings.lease_ms,
            heartbeat_ms = args.settings.heartbeat_ms,
            "cluster gateway started"
        );
        Ok(GatewayState {
            args,
            workers: BTreeMap::new(),
            by_queue_id: HashMap::new(),
            sessions: HashMap::new(),
            lost_notices: HashMap::new(),
            incarnation: 0,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<GatewayMsg>,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        for (_, cell) in state.args.shared.take() {
            cell.stop(Some("engine stopping".into()));
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<GatewayMsg>,
        msg: GatewayMsg,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Wire(ToEngine::Join(hello)) => state.join(&myself, hello).await,
            GatewayMsg::Wire(m) => state.on_worker(m),
            GatewayMsg::Session { peer, event } => state.session(peer, event),
            GatewayMsg::CheckLeases => state.check_leases(),
            GatewayMsg::QueueRestarted => {
                for w in state.workers.values() {
                    for p in w.proxies.values() {
                        let _ = p.actor.cast(PoolMsg::QueueRestarted);
                    }
                }
            }
            GatewayMsg::Refused(queue_worker_id) => {
                if let Some(w) = state
                    .by_queue_id
                    .get(queue_worker_id.as_str())
                    .and_then(|id| state.workers.get_mut(id))
                {
                    w.reports_refused += 1;
                }
            }
            GatewayMsg::Workers(reply) => {
                let _ = reply.send(state.views());
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<GatewayMsg>,
        event: SupervisionEvent,
        state: &mut GatewayState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, why) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, err.to_string()),
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                (cell, reason.unwrap_or_else(|| "stopped".into()))
            }
            _ => return Ok(()),
        };
        // A proxy of a joined worker ended on its own: the worker is lost
        // (it rejoins, with fresh proxies). Proxies the gateway stopped
        // itself are no longer in a joined worker's list.
        let found = state.workers.iter().find_map(|(id, w)| {
            (w.state == WorkerState::Joined
                && w.proxies
                    .values()
                    .any(|p| p.actor.get_id() == cell.get_id()))
            .then(|| id.clone())
        });
        if let Some(worker_id) = found {
            state.lose(&worker_id, format!("its proxy failed: {why}"));
        }
        Ok(())
    }
}

fn tell_queue(names: &Names, msg: QueueMsg) {
    if let Some(q) = ActorRef::<QueueMsg>::where_is(names.queue()) {
        let _ = q.cast(msg);
    }
}

/// The link of `worker_id`, as this node knows it (a remote actor in the
/// workers' group).
fn find_link(worker_id: &str) -> Option<ActorRef<LinkMsg>> {
    let name = link_name(worker_id);
    ractor::pg::get_members(&WORKERS_GROUP.to_string())
        .into_iter()
        .find(|c| c.get_name().as_deref() == Some(name.as_str()))
        .map(ActorRef::<LinkMsg>::from)
}

impl GatewayState {
    fn refuse(&self, link: &ActorRef<LinkMsg>, hello: &Hello, reason: String) {
        tracing::warn!(worker = %hello.worker_id, name = %hello.name, reason = %reason, "worker refused");
        let _ = link.cast(LinkMsg::Wire(ToWorker::Refused { reason }));
    }

    async fn address_of(&self, link: &ActorRef<LinkMsg>) -> String {
        let ractor::ActorId::Remote { node_id, .. } = link.get_id() else {
            return "this process".into();
        };
        let Some(server) = &self.args.server else {
            return String::new();
        };
        match ractor::call_t!(server, NodeServerMessage::GetSessions, 1_000) {
            Ok(sessions) => sessions
                .get(&node_id)
                .map(|s| s.peer_addr.clone())
                .unwrap_or_default(),
            Err(_) => String::new(),
        }
    }

    async fn join(&mut self, myself: &ActorRef<GatewayMsg>, hello: Hello) {
        let Some(link) = find_link(&hello.worker_id) else {
            // Its process group news has not arrived yet; it asks again.
            tracing::debug!(worker = %hello.worker_id, "join from a worker whose link is not known yet");
            return;
        };
        if hello.version != PROTOCOL_VERSION {
            let reason = format!(
                "worker {} speaks weir cluster protocol version {}; this engine speaks version {PROTOCOL_VERSION}",
                hello.name, hello.version
            );
            self.refuse(&link, &hello, reason);
            return;
        }
        if hello.pools.is_empty() {
            self.refuse(&link, &hello, "the worker serves no pool".into());
            return;
        }
        for offer in &hello.pools {
            if !self.args.pools.contains(&offer.pool) {
                let known: Vec<&str> = self.args.pools.iter().map(String::as_str).collect();
                let reason = format!(
                    "pool {:?} is not a pool of this engine (its pools: {})",
                    offer.pool,
                    known.join(", ")
                );
                self.refuse(&link, &hello, reason);
                return;
            }
            if offer.slots == 0 {
                let reason = format!(
                    "pool {:?}: a worker serves it with 1 slot at least",
                    offer.pool
                );
                self.refuse(&link, &hello, reason);
                return;
            }
        }
        let now = self.args.clock.now_ms();
        let address = self.address_of(&link).await;
        let welcome = |resumed| Welcome {
            worker_id: hello.worker_id.clone(),
            resumed,
            lease_ms: self.args.settings.lease_ms,
            heartbeat_ms: self.args.settings.heartbeat_ms,
            root: self.args.root.clone(),
            work: self.args.work.clone(),
            artifacts: self.args.artifacts.clone(),
            term: self.args.settings.term,
        };
        if let Some(w) = self
            .workers
            .get_mut(&hello.worker_id)
            .filter(|w| w.state == WorkerState::Joined)
        {
            // Back within its lease: its attempts go on.
            w.link = Some(link.clone());
            w.last_seen_ms = now;
            w.address = address;
            for p in w.proxies.values() {
                let _ = p
                    .actor
                    .cast(PoolMsg::Remote(FromWorker::Relink(link.clone())));
            }
            tracing::info!(worker = %hello.worker_id, "worker reconnected within its lease; resuming");
            let _ = link.cast(LinkMsg::Wire(ToWorker::Welcome(welcome(true))));
            return;
        }
        let mut proxies = BTreeMap::new();
        for offer in &hello.pools {
            self.incarnation += 1;
            let queue_worker_id: Arc<str> = Arc::from(format!(
                "remote.{}.{}.{}",
                hello.worker_id, offer.pool, self.incarnation
            ));
            let args = ProxyArgs {
                worker_id: hello.worker_id.clone(),
                pool: Arc::from(offer.pool.as_str()),
                queue_worker_id: queue_worker_id.clone(),
                link: link.clone(),
                names: self.args.names.clone(),
                supervisor: Some(self.args.supervisor.clone()),
                store: self.args.store.clone(),
                clock: self.args.clock.clone(),
                output_bytes_max: self.args.output_bytes_max,
                slots: offer.slots,
            };
            match Actor::spawn_linked(None, ProxyActor, args, myself.get_cell()).await {
                Ok((actor, _)) => {
                    self.args
                        .shared
                        .add(queue_worker_id.clone(), actor.get_cell());
                    self.by_queue_id
                        .insert(queue_worker_id.clone(), hello.worker_id.clone());
                    proxies.insert(
                        offer.pool.clone(),
                        Proxy {
                            actor,
                            queue_worker_id,
                            slots: offer.slots,
                        },
                    );
                }
                Err(e) => {
                    tracing::error!(worker = %hello.worker_id, pool = %offer.pool, error = %e, "proxy failed to start");
                    for p in proxies.values() {
                        self.stop_proxy(p);
                    }
                    return;
                }
            }
        }
        tracing::info!(worker = %hello.worker_id, name = %hello.name, address = %address, pools = hello.pools.len(), "worker joined");
        let _ = self.args.events.send(EngineEvent::WorkerJoined {
            worker: hello.worker_id.clone(),
            pools: hello
                .pools
                .iter()
                .map(|o| (o.pool.clone(), o.slots))
                .collect(),
        });
        let _ = link.cast(LinkMsg::Wire(ToWorker::Welcome(welcome(false))));
        self.lost_notices.remove(&hello.worker_id);
        // A worker back after it was lost keeps its history.
        let (reports_refused, times_lost) = self
            .workers
            .get(&hello.worker_id)
            .map_or((0, 0), |w| (w.reports_refused, w.times_lost));
        self.workers.insert(
            hello.worker_id.clone(),
            Entry {
                hello,
                address,
                state: WorkerState::Joined,
                since_ms: now,
                joined_ms: now,
                last_seen_ms: now,
                link: Some(link),
                proxies,
                running: BTreeMap::new(),
                reports_refused,
                times_lost,
                lost_reason: None,
            },
        );
        self.trim_gone();
    }

    fn stop_proxy(&self, p: &Proxy) {
        self.args.shared.remove(&p.queue_worker_id);
        p.actor.stop(Some("worker gone".into()));
        tell_queue(
            &self.args.names,
            QueueMsg::WorkerGone {
                worker_id: p.queue_worker_id.clone(),
            },
        );
    }

    /// Stops a worker's proxies (its attempts are requeued) and marks it.
    fn end(&mut self, worker_id: &str, state: WorkerState, reason: Option<String>) {
        let now = self.args.clock.now_ms();
        let Some(w) = self.workers.get_mut(worker_id) else {
            return;
        };
        if w.state != WorkerState::Joined {
            return;
        }
        let proxies = std::mem::take(&mut w.proxies);
        w.state = state;
        w.since_ms = now;
        w.lost_reason = reason;
        w.running.clear();
        // Keep the pools' slots for the view.
        for (pool, p) in &proxies {
            w.proxies.insert(
                pool.clone(),
                Proxy {
                    actor: p.actor.clone(),
                    queue_worker_id: p.queue_worker_id.clone(),
                    slots: p.slots,
                },
            );
        }
        for p in proxies.values() {
            self.stop_proxy(p);
        }
        if let Some(logs) = &self.args.logs {
            logs.worker_gone(worker_id);
        }
    }

    /// Declares a worker lost: its attempts are requeued.
    fn lose(&mut self, worker_id: &str, reason: String) {
        tracing::warn!(worker = %worker_id, reason = %reason, "worker lost; its attempts are requeued");
        self.end(worker_id, WorkerState::Lost, Some(reason.clone()));
        if let Some(w) = self.workers.get_mut(worker_id) {
            w.times_lost += 1;
        }
        let _ = self.args.events.send(EngineEvent::WorkerLost {
            worker: worker_id.to_string(),
            reason: reason.clone(),
        });
        if let Some(link) = self.workers.get(worker_id).and_then(|w| w.link.clone()) {
            let _ = link.cast(LinkMsg::Wire(ToWorker::Lost { reason }));
            self.close_session(&link);
        }
        self.lost_notices
            .insert(worker_id.to_string(), self.args.clock.now_ms());
    }

    /// Closes the session of a lost worker's link. A silent network keeps
    /// a dead connection open for as long as the kernel's retransmissions
    /// last (minutes); closed, the worker's reconnect after the network
    /// heals starts a fresh session at once instead of waiting on the old
    /// one. The "lost" notice is cast first: on a session that still works
    /// it goes out before the close.
    fn close_session(&self, link: &ActorRef<LinkMsg>) {
        let ractor::ActorId::Remote { node_id, .. } = link.get_id() else {
            return;
        };
        let Some(server) = self.args.server.clone() else {
            return;
        };
        tokio::spawn(async move {
            // Let the lost notice leave first.
            tokio::time::sleep(std::time::Duration::from_millis(LOST_CLOSE_DELAY_MS)).await;
            if let Ok(sessions) = ractor::call_t!(server, NodeServerMessage::GetSessions, 1_000) {
                if let Some(s) = sessions.get(&node_id) {
                    tracing::info!(node_id, peer = %s.peer_addr, "closing the session of a lost worker");
                    s.actor.stop(Some("the worker is lost".into()));
                }
            }
        });
    }

    fn check_leases(&mut self) {
        let now = self.args.clock.now_ms();
        let lease = self.args.settings.lease_ms;
        let silent: Vec<(String, u64)> = self
            .workers
            .iter()
            .filter(|(_, w)| w.state == WorkerState::Joined)
            .filter_map(|(id, w)| {
                let quiet = now.saturating_sub(w.last_seen_ms);
                (quiet > lease).then(|| (id.clone(), quiet))
            })
            .collect();
        for (id, quiet) in silent {
            self.lose(
                &id,
                format!("silent for {quiet} ms, past its lease of {lease} ms"),
            );
        }
    }

    /// A worker that is not joined is told so (at most once a second).
    fn tell_lost(&mut self, worker_id: &str) {
        let now = self.args.clock.now_ms();
        let last = self.lost_notices.get(worker_id).copied().unwrap_or(0);
        if now.saturating_sub(last) < LOST_NOTICE_EVERY_MS {
            return;
        }
        self.lost_notices.insert(worker_id.to_string(), now);
        if let Some(link) = find_link(worker_id) {
            let reason = match self.workers.get(worker_id) {
                Some(w) => w
                    .lost_reason
                    .clone()
                    .unwrap_or_else(|| format!("the engine has it as {}", w.state)),
                None => "the engine does not know this worker (it restarted?)".into(),
            };
            let _ = link.cast(LinkMsg::Wire(ToWorker::Lost { reason }));
        }
    }

    fn on_worker(&mut self, m: ToEngine) {
        if let ToEngine::Batch { messages, .. } = m {
            for m in messages {
                if !matches!(m, ToEngine::Join(_) | ToEngine::Batch { .. }) {
                    self.on_worker(m);
                }
            }
            return;
        }
        let worker_id = m.worker_id().to_string();
        if let ToEngine::Log { frames, .. } = m {
            // An attempt's log is what happened, superseded or not.
            if let Some(logs) = &self.args.logs {
                logs.frames(&worker_id, frames);
            }
            if let Some(w) = self.workers.get_mut(&worker_id) {
                if w.state == WorkerState::Joined {
                    w.last_seen_ms = self.args.clock.now_ms();
                }
            }
            return;
        }
        let joined = self
            .workers
            .get(&worker_id)
            .is_some_and(|w| w.state == WorkerState::Joined);
        if !joined {
            if let ToEngine::Report { report, .. } = &m {
                tracing::warn!(worker = %worker_id, id = report.id, attempt = report.attempt, "report of a worker that is not joined refused: its attempt was superseded");
                if let Some(w) = self.workers.get_mut(&worker_id) {
                    w.reports_refused += 1;
                }
            }
            if !matches!(m, ToEngine::Leave { .. }) {
                self.tell_lost(&worker_id);
            }
            return;
        }
        let now = self.args.clock.now_ms();
        let w = self.workers.get_mut(&worker_id).expect("joined");
        w.last_seen_ms = now;
        let (pool, up) = match m {
            ToEngine::Heartbeat { running, .. } => {
                w.running = running.into_iter().map(|(p, r)| (p, r.len())).collect();
                // Answered (an empty batch, which every worker version
                // takes), so a worker hears the engine at least every
                // heartbeat and can tell a silent engine from a quiet one.
                if let Some(link) = &w.link {
                    let _ = link.cast(LinkMsg::Wire(ToWorker::Batch(Vec::new())));
                }
                return;
            }
            ToEngine::Leave { .. } => {
                tracing::info!(worker = %worker_id, "worker left");
                if let Some(link) = w.link.clone() {
                    let _ = link.cast(LinkMsg::Wire(ToWorker::Farewell));
                }
                self.end(&worker_id, WorkerState::Left, None);
                let _ = self
                    .args
                    .events
                    .send(EngineEvent::WorkerLeft { worker: worker_id });
                self.trim_gone();
                return;
            }
            ToEngine::Credit { pool, slots, .. } => (pool, PoolUp::Credit { slots }),
            ToEngine::Revoke { pool, slots, .. } => (pool, PoolUp::Revoke { slots }),
            ToEngine::Report { pool, report, .. } => (pool, PoolUp::Report(report)),
            ToEngine::Defer {
                pool,
                id,
                attempt,
                until_ms,
                cause,
                ..
            } => (
                pool,
                PoolUp::Defer {
                    id,
                    attempt,
                    until_ms,
                    cause,
                },
            ),
            ToEngine::Holding { pool, held, .. } => (pool, PoolUp::Holding { held }),
            ToEngine::Started {
                pool, id, attempt, ..
            } => (pool, PoolUp::Started { id, attempt }),
            ToEngine::Join(_) | ToEngine::Log { .. } | ToEngine::Batch { .. } => return,
        };
        match w.proxies.get(&pool) {
            Some(p) => {
                let _ = p.actor.cast(PoolMsg::Remote(FromWorker::Up(up)));
            }
            None => {
                tracing::warn!(worker = %worker_id, pool = %pool, "a message for a pool the worker did not join with; dropped")
            }
        }
    }

    fn session(&mut self, peer: String, event: SessionEvent) {
        match event {
            SessionEvent::Opened => {
                self.sessions.insert(peer, false);
            }
            SessionEvent::Authenticated => {
                self.sessions.insert(peer, true);
            }
            SessionEvent::Ready => {}
            SessionEvent::Closed => {
                if self.sessions.remove(&peer) == Some(false) {
                    tracing::warn!(peer = %peer, "a node's session closed before it authenticated: a worker with another cookie (--cookie-file)?");
                } else {
                    tracing::info!(peer = %peer, "a cluster session closed");
                }
            }
        }
    }

    /// Lost and departed workers beyond the limit go, oldest first.
    fn trim_gone(&mut self) {
        let mut gone: Vec<(u64, String)> = self
            .workers
            .iter()
            .filter(|(_, w)| w.state != WorkerState::Joined)
            .map(|(id, w)| (w.since_ms, id.clone()))
            .collect();
        if gone.len() <= self.args.settings.gone_workers_max {
            return;
        }
        gone.sort();
        let excess = gone.len() - self.args.settings.gone_workers_max;
        for (_, id) in gone.into_iter().take(excess) {
            if let Some(w) = self.workers.remove(&id) {
                for p in w.proxies.values() {
                    self.by_queue_id.remove(&p.queue_worker_id);
                }
            }
        }
    }

    fn views(&self) -> Vec<WorkerView> {
        let mut out: Vec<WorkerView> = self
            .workers
            .values()
            .map(|w| {
                let pools = w
                    .proxies
                    .iter()
                    .map(|(pool, p)| WorkerPoolView {
                        pool: pool.clone(),
                        slots: p.slots,
                        running: w.running.get(pool).copied().unwrap_or(0),
                    })
                    .collect();
                WorkerView {
                    worker_id: w.hello.worker_id.clone(),
                    name: w.hello.name.clone(),
                    address: w.address.clone(),
                    host: w.hello.host.clone(),
                    pid: w.hello.pid,
                    version: w.hello.weir_version.clone(),
                    state: w.state,
                    since_ms: w.since_ms,
                    joined_ms: w.joined_ms,
                    last_heartbeat_ms: w.last_seen_ms,
                    pools,
                    running: w.running.values().sum(),
                    reports_refused: w.reports_refused,
                    times_lost: w.times_lost,
                    lost_reason: w.lost_reason.clone(),
                }
            })
            .collect();
        out.sort_by(|a, b| {
            (
                a.state != WorkerState::Joined,
                std::cmp::Reverse(a.since_ms),
            )
                .cmp(&(
                    b.state != WorkerState::Joined,
                    std::cmp::Reverse(b.since_ms),
                ))
        });
        out
    }
}
