//! A worker process's link to the engine: connects, joins, heartbeats,
//! reconnects, and hosts the worker's pool actors.
//!
//! States: `Down` (no session: connect, with backoff), `Up` (a session:
//! find the engine's gateway, send `Join` until it answers), `Joined`
//! (heartbeats every `heartbeat_ms`; what the pools say goes to the
//! engine). ractor_cluster never reconnects by itself: a session that drops
//! is seen through the node server's events and the link goes back to
//! `Down`.
//!
//! What the pools say while the link is not joined is dropped, except log
//! output, kept up to [`LOG_BACKLOG_BYTES_MAX`]: on a welcome every pool
//! registers again (Holding, Credit, then every unacknowledged report and
//! defer), so nothing the engine needs is lost with a dropped connection.
//! A welcome that does not resume (the engine restarted, or had declared
//! this worker lost) resets the pools first: their running attempts were
//! requeued by the engine and are cancelled here.
//!
//! A refused join (another protocol version, a pool the engine lacks) and
//! a session that fails to authenticate [`AUTH_FAILURES_MAX`] times in a row
//! (a wrong cookie) end the worker with the reason.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::watch;
use weir_core::grant::{grant_fate, GrantFate};
use weir_core::queue::TicketId;

use crate::clock::Clock;
// The link's interface lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::cluster::{DrainReport, LinkEnd, LinkMsg, LinkView};
use crate::msg::cluster::{GatewayMsg, SessionEvent};
use crate::msg::pool::PoolMsg;
use crate::msg::work::{Grant, PoolUp};
// The link is a worker process's supervisor of its pools: it spawns them.
use crate::pool::{PoolActor, PoolArgs, Uplink};
use crate::protocol::{
    Hello, LogFrame, PoolOffer, ToEngine, ToWorker, Welcome, ENGINE_GROUP, PROTOCOL_VERSION,
    WORKERS_GROUP,
};
use crate::task::TaskRegistry;

use super::node::{ConnectError, Connector};

/// How often the link looks at its state (reconnects, joins, heartbeats).
pub const TICK_MS: u64 = 100;
/// A connection attempt (TCP and TLS) that takes longer than this has
/// failed. Short, so that after a silent network heals the next attempt's
/// SYN goes out within it, not after the kernel's SYN backoff.
pub const CONNECT_TIMEOUT_MS: u64 = super::node::ADDRESS_CONNECT_TIMEOUT_MS;
/// A join unanswered this long is sent again.
pub const JOIN_RETRY_MS: u64 = 1_000;
/// The first reconnect waits this long; each next one twice as long.
pub const RECONNECT_INITIAL_MS: u64 = 100;
/// The longest wait between reconnects: with [`CONNECT_TIMEOUT_MS`], a
/// healed network sees the worker back within about 2.5 s.
pub const RECONNECT_MAX_MS: u64 = 1_000;
/// How long after losing its session a worker of a replicated engine
/// keeps trying the members every [`RECONNECT_INITIAL_MS`] (a failover),
/// before its backoff grows.
pub const FAILOVER_POLL_MS: u64 = 10_000;
/// For this long after losing its session, a worker of a replicated
/// engine tries the members every [`FAILOVER_FAST_POLL_MS`], and joins as
/// soon as its session is ready: a new leader's engine listens about half
/// a second after the old one died (its election timeout), and each
/// interval of the poll is time before the first command runs.
pub const FAILOVER_FAST_MS: u64 = 2_000;
/// See [`FAILOVER_FAST_MS`]. Each try costs a connection refused by each
/// member that does not lead: with three members, about 120 a second
/// from each worker, for two seconds.
pub const FAILOVER_FAST_POLL_MS: u64 = 25;
/// Sessions that close before they authenticate, in a row, that end the
/// worker (a wrong cookie).
pub const AUTH_FAILURES_MAX: u32 = 3;
/// Log output kept while the link is down, at most; older output goes.
pub const LOG_BACKLOG_BYTES_MAX: usize = 16 << 20;
/// How long a leaving worker waits for the engine to confirm its leave
/// before it exits anyway (and the engine, missing the leave, has it lost).
pub const FAREWELL_WAIT_MS: u64 = 3_000;
/// The lease assumed before the engine's welcome says its own.
pub const LEASE_MS_UNKNOWN: u64 = 5_000;

/// What the link needs.
pub struct LinkArgs {
    /// Its worker id (name and a token of this process's start).
    pub worker_id: String,
    /// Its name.
    pub name: String,
    /// Its pools and their slots.
    pub pools: Vec<PoolOffer>,
    /// The tasks the pools run.
    pub tasks: TaskRegistry,
    /// How it connects.
    pub connector: Connector,
    /// The clock.
    pub clock: Clock,
    /// The largest output reported (longer outputs are cut).
    pub output_bytes_max: usize,
    /// Where the engine's welcome is published (the command task reads the
    /// engine's root from it).
    pub welcome: watch::Sender<Option<Welcome>>,
    /// Where the link says it ended on its own.
    pub end: watch::Sender<LinkEnd>,
    /// The protocol version it claims (tests claim others).
    pub version: u32,
}

enum Conn {
    /// No session since `since_ms`; the next connect at `next_ms`.
    Down {
        next_ms: u64,
        backoff_ms: u64,
        since_ms: u64,
    },
    /// Connecting or connected; `ready` once the session exchanged state.
    Up {
        ready: bool,
        authenticated: bool,
        since_ms: u64,
    },
    /// Joined through this gateway.
    Joined {
        gateway: ActorRef<GatewayMsg>,
        last_heartbeat_ms: u64,
    },
}

/// The link actor.
pub struct LinkActor;

/// Its state.
pub struct LinkState {
    me: ActorRef<LinkMsg>,
    /// Messages for the engine not sent yet (see [`LinkMsg::Flush`]).
    outbox: Vec<ToEngine>,
    args_worker_id: String,
    name: String,
    offers: Vec<PoolOffer>,
    connector: Connector,
    clock: Clock,
    welcome_tx: watch::Sender<Option<Welcome>>,
    end: watch::Sender<LinkEnd>,
    version: u32,
    pools: BTreeMap<Arc<str>, ActorRef<PoolMsg>>,
    conn: Conn,
    /// The gateway a join went to, and when.
    joining: Option<(ActorRef<GatewayMsg>, u64)>,
    welcome: Option<Welcome>,
    /// The newest replicated-engine term this worker joined (0: none).
    term_joined: u64,
    /// Attempts handed to the pools, not reported: by pool.
    running: BTreeMap<Arc<str>, BTreeMap<TicketId, u32>>,
    log_backlog: VecDeque<LogFrame>,
    log_backlog_bytes: usize,
    auth_failures: u32,
    draining: Option<(u64, RpcReplyPort<DrainReport>)>,
    /// Sent its leave: waits for the engine's farewell until the instant,
    /// then answers the drain with the report and ends.
    leaving: Option<(u64, RpcReplyPort<DrainReport>, DrainReport)>,
    joins: u32,
    resumes: u32,
    lost: u32,
    /// Grants refused as stale since start.
    stale_grants: u32,
    /// When the engine was last heard from (any message: it answers every
    /// heartbeat). Silent past the lease, the session is dropped.
    last_heard_ms: u64,
    /// The node id of the current session, once it opened.
    session_id: Option<u64>,
    /// When the tick [`LinkState::tick_soon`] asked for is due (ms).
    tick_due_ms: u64,
}

impl Actor for LinkActor {
    type Msg = LinkMsg;
    type State = LinkState;
    type Arguments = LinkArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<LinkMsg>,
        args: LinkArgs,
    ) -> Result<LinkState, ActorProcessingErr> {
        let mut pools = BTreeMap::new();
        for (i, offer) in args.pools.iter().enumerate() {
            let pool: Arc<str> = Arc::from(offer.pool.as_str());
            let (actor, _) = Actor::spawn_linked(
                None,
                PoolActor,
                PoolArgs {
                    pool: pool.clone(),
                    worker_id: Arc::from(format!("{}.{}.{i}", args.worker_id, offer.pool)),
                    capacity: offer.slots,
                    tasks: args.tasks.clone(),
                    uplink: Uplink::Remote {
                        link: myself.clone(),
                    },
                    clock: args.clock.clone(),
                    output_bytes_max: args.output_bytes_max,
                },
                myself.get_cell(),
            )
            .await?;
            pools.insert(pool, actor);
        }
        ractor::pg::join(WORKERS_GROUP.to_string(), vec![myself.get_cell()]);
        let now = args.clock.now_ms();
        tracing::info!(worker = %args.worker_id, pools = args.pools.len(), "worker started");
        Ok(LinkState {
            me: myself.clone(),
            outbox: Vec::new(),
            args_worker_id: args.worker_id,
            name: args.name,
            offers: args.pools,
            connector: args.connector,
            clock: args.clock,
            welcome_tx: args.welcome,
            end: args.end,
            version: args.version,
            pools,
            conn: Conn::Down {
                next_ms: now,
                backoff_ms: RECONNECT_INITIAL_MS,
                since_ms: now,
            },
            joining: None,
            welcome: None,
            term_joined: 0,
            running: BTreeMap::new(),
            log_backlog: VecDeque::new(),
            log_backlog_bytes: 0,
            auth_failures: 0,
            draining: None,
            leaving: None,
            joins: 0,
            resumes: 0,
            lost: 0,
            stale_grants: 0,
            last_heard_ms: now,
            session_id: None,
            tick_due_ms: 0,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<LinkMsg>,
        state: &mut LinkState,
    ) -> Result<(), ActorProcessingErr> {
        state.connector.subscribe(myself.clone());
        myself.send_interval(Duration::from_millis(TICK_MS), || LinkMsg::Tick);
        state.tick().await;
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<LinkMsg>,
        msg: LinkMsg,
        state: &mut LinkState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            LinkMsg::Wire(m) => {
                // The silence before this message judges the grants in it
                // (a grant held by the network past the lease is stale).
                let now = state.clock.now_ms();
                let silent_ms = now.saturating_sub(state.last_heard_ms);
                state.last_heard_ms = now;
                state.on_engine(m, silent_ms)
            }
            LinkMsg::FromPool { pool, up } => state.on_pool(pool, up),
            LinkMsg::Log(frames) => state.log(frames),
            LinkMsg::Session(id, e) => state.session(id, e),
            LinkMsg::Tick => state.tick().await,
            LinkMsg::Flush => state.flush(),
            LinkMsg::Drain(timeout, reply) => {
                tracing::info!(worker = %state.args_worker_id, timeout_ms = timeout.as_millis() as u64, "worker draining: no new tickets");
                for p in state.pools.values() {
                    let _ = p.cast(PoolMsg::Resize(0));
                }
                let until = state.clock.now_ms() + timeout.as_millis() as u64;
                state.draining = Some((until, reply));
            }
            LinkMsg::Status(reply) => {
                let mut pools = Vec::new();
                for p in state.pools.values() {
                    if let Ok(v) = ractor::call_t!(p, PoolMsg::Status, 1_000) {
                        pools.push(v);
                    }
                }
                let _ = reply.send(LinkView {
                    worker_id: state.args_worker_id.clone(),
                    joined: matches!(state.conn, Conn::Joined { .. }),
                    joins: state.joins,
                    resumes: state.resumes,
                    lost: state.lost,
                    stale_grants: state.stale_grants,
                    pools,
                });
            }
        }
        Ok(())
    }
}

impl LinkState {
    fn gateway(&self) -> Option<&ActorRef<GatewayMsg>> {
        match &self.conn {
            Conn::Joined { gateway, .. } => Some(gateway),
            _ => None,
        }
    }

    /// Queues `msg` for the engine; false when the link is not joined
    /// (dropped: the pools register again on the next welcome).
    fn send(&mut self, msg: ToEngine) -> bool {
        if self.gateway().is_none() {
            return false;
        }
        self.outbox.push(msg);
        if self.outbox.len() == 1 {
            let _ = self.me.cast(LinkMsg::Flush);
        }
        true
    }

    /// Sends the outbox: one message, or one batch of them.
    fn flush(&mut self) {
        let mut messages = std::mem::take(&mut self.outbox);
        let Some(g) = self.gateway() else {
            return;
        };
        let msg = if messages.len() == 1 {
            messages.pop().expect("one")
        } else if messages.is_empty() {
            return;
        } else {
            ToEngine::Batch {
                worker_id: self.args_worker_id.clone(),
                messages,
            }
        };
        if g.cast(GatewayMsg::Wire(msg)).is_err() {
            self.down("the engine's gateway is gone");
        }
    }

    fn down(&mut self, why: &str) {
        if self.leaving.is_some() {
            // Nothing left to send: the engine has this worker lost.
            self.leave_now(why);
            return;
        }
        if !matches!(self.conn, Conn::Down { .. }) {
            tracing::warn!(worker = %self.args_worker_id, why, "worker cut off from the engine; reconnecting");
        }
        self.joining = None;
        self.session_id = None;
        self.outbox.clear();
        let now = self.clock.now_ms();
        let since_ms = match self.conn {
            Conn::Down { since_ms, .. } => since_ms,
            _ => now,
        };
        let wait = if self.failing_over(since_ms, now) {
            FAILOVER_FAST_POLL_MS
        } else {
            RECONNECT_INITIAL_MS
        };
        self.conn = Conn::Down {
            next_ms: now + wait,
            backoff_ms: RECONNECT_INITIAL_MS,
            since_ms,
        };
        if wait < TICK_MS {
            self.tick_soon(wait);
        }
    }

    /// Whether a session of a replicated engine was lost within
    /// [`FAILOVER_FAST_MS`] of `now` (lost at `since_ms`): the link then
    /// polls and joins without waiting for its [`TICK_MS`] timer.
    fn failing_over(&self, since_ms: u64, now: u64) -> bool {
        self.connector.members() > 1 && now.saturating_sub(since_ms) < FAILOVER_FAST_MS
    }

    /// A tick `ms` from now, besides the timer's (a failover's fast
    /// poll), unless one is on its way already: one chain of them at most.
    fn tick_soon(&mut self, ms: u64) {
        let now = self.clock.now_ms();
        if self.tick_due_ms > now {
            return;
        }
        self.tick_due_ms = now + ms;
        self.me
            .send_after(Duration::from_millis(ms), || LinkMsg::Tick);
    }

    fn session(&mut self, id: u64, e: SessionEvent) {
        // The news of the current session only: a session closed earlier
        // (dropped as silent, or left over from a network that healed)
        // may still report, and is not this one.
        match (&e, self.session_id) {
            (SessionEvent::Opened, None) if matches!(self.conn, Conn::Up { .. }) => {
                self.session_id = Some(id);
            }
            (_, Some(current)) if current == id => {}
            _ => {
                tracing::debug!(worker = %self.args_worker_id, session = id, event = ?e, "news of another session; ignored");
                return;
            }
        }
        match e {
            SessionEvent::Authenticated => {
                self.auth_failures = 0;
                if let Conn::Up { authenticated, .. } = &mut self.conn {
                    *authenticated = true;
                }
            }
            SessionEvent::Ready => {
                if let Conn::Up { ready, .. } = &mut self.conn {
                    *ready = true;
                    // At once rather than at the next tick: up to
                    // [`TICK_MS`] sooner to the first command.
                    self.join(self.clock.now_ms());
                }
            }
            // A new session's silence starts now: the old one's does not
            // judge the grants that come on it.
            SessionEvent::Opened => self.last_heard_ms = self.clock.now_ms(),
            SessionEvent::Closed => {
                if matches!(
                    self.conn,
                    Conn::Up {
                        authenticated: false,
                        ..
                    }
                ) {
                    self.auth_failures += 1;
                    tracing::warn!(worker = %self.args_worker_id, engine = %self.connector.address(), failures = self.auth_failures, "the engine closed the session before it authenticated: is the cookie the engine's?");
                    if self.auth_failures >= AUTH_FAILURES_MAX {
                        self.fail(format!(
                            "the engine at {} refused this worker's authentication {} times: \
                             the cookie (--cookie-file) must be the engine's, the address its --cluster address, \
                             and --tls-ca given when the engine has --tls-cert",
                            self.connector.address(),
                            self.auth_failures
                        ));
                    }
                }
                self.skip_unready_member();
                self.down("the session closed");
            }
        }
    }

    /// A session that ended before it was ready (closed, or never ready
    /// in time) makes the next connect start with the next member: a
    /// member that takes the connection and then closes it or says
    /// nothing (a proxy in front of a stopped engine, a port another
    /// program holds) would otherwise be tried first for ever, as the
    /// connect to it succeeds. One member: nothing to skip to.
    fn skip_unready_member(&mut self) {
        if self.connector.members() > 1 && matches!(self.conn, Conn::Up { ready: false, .. }) {
            tracing::info!(worker = %self.args_worker_id, engine = %self.connector.address(), "the session ended before it was ready; the next connect starts with the next member");
            self.connector.next_address();
        }
    }

    fn fail(&mut self, reason: String) {
        tracing::error!(worker = %self.args_worker_id, reason = %reason, "worker stopping");
        let _ = self.end.send(LinkEnd::Refused(reason));
    }

    async fn tick(&mut self) {
        let now = self.clock.now_ms();
        if !matches!(*self.end.borrow(), LinkEnd::Running) {
            return;
        }
        let lease = self.lease_ms();
        match &mut self.conn {
            Conn::Down {
                next_ms,
                backoff_ms,
                since_ms,
            } => {
                if now < *next_ms {
                    return;
                }
                // A replicated engine's members refuse at once until the
                // new leader's engine listens (about a second after the
                // old one died): poll them at the first interval for a
                // while, so the worker joins as soon as it does, instead
                // of after a backoff grown meanwhile.
                let lost_ms = now.saturating_sub(*since_ms);
                let failing_over = self.connector.members() > 1 && lost_ms < FAILOVER_POLL_MS;
                let wait = if failing_over && lost_ms < FAILOVER_FAST_MS {
                    FAILOVER_FAST_POLL_MS
                } else if failing_over {
                    RECONNECT_INITIAL_MS
                } else {
                    *backoff_ms
                };
                *next_ms = now + wait;
                *backoff_ms = (wait * 2).min(RECONNECT_MAX_MS);
                if wait < TICK_MS {
                    // Faster than the timer: the next try has its own tick.
                    self.tick_soon(wait);
                }
                // One session at a time: any left (an attempt the network
                // held, a session dropped as silent) is closed first, so
                // they cannot all complete at once when the network heals.
                self.connector.close_sessions_now().await;
                // Each address has its own deadline inside; the round is
                // bounded by all of them.
                // A second past them: each address's own deadline fires
                // first, so the error names every address with its cause.
                let round_ms = CONNECT_TIMEOUT_MS * self.connector.members() as u64 + 1_000;
                let connect =
                    tokio::time::timeout(Duration::from_millis(round_ms), self.connector.connect())
                        .await
                        .unwrap_or_else(|_| {
                            Err(ConnectError::Unreachable(format!(
                                "no answer within {round_ms} ms"
                            )))
                        });
                match connect {
                    Ok(()) => {
                        self.conn = Conn::Up {
                            ready: false,
                            authenticated: false,
                            since_ms: now,
                        }
                    }
                    Err(ConnectError::Tls(e)) => {
                        self.auth_failures += 1;
                        tracing::warn!(worker = %self.args_worker_id, engine = %self.connector.address(), error = %e, failures = self.auth_failures, "the TLS handshake with the engine failed");
                        if self.auth_failures >= AUTH_FAILURES_MAX {
                            self.fail(format!(
                                "the TLS handshake with the engine at {} failed {} times ({e}): \
                                 --tls-ca must hold the CA that signed the engine's --tls-cert",
                                self.connector.address(),
                                self.auth_failures
                            ));
                        }
                    }
                    Err(ConnectError::Unreachable(e)) => {
                        // `e` names every address tried, each with its cause.
                        tracing::warn!(worker = %self.args_worker_id, error = %e, retry_ms = wait, "cannot reach the engine");
                    }
                }
            }
            Conn::Up {
                ready, since_ms, ..
            } => {
                if !*ready {
                    // A session that never gets ready (a peer that is no
                    // engine, a stalled handshake) is dropped and retried.
                    if now.saturating_sub(*since_ms) > lease.max(2 * JOIN_RETRY_MS) {
                        self.connector.close_sessions();
                        self.skip_unready_member();
                        self.down("the session did not get ready");
                    }
                    return;
                }
                let up_ms = now.saturating_sub(*since_ms);
                self.join(now);
                // The engine's gateway not known yet (its group news comes
                // after the session's): asked again soon in a failover.
                if self.joining.is_none()
                    && self.connector.members() > 1
                    && up_ms < FAILOVER_FAST_MS
                {
                    self.tick_soon(FAILOVER_FAST_POLL_MS);
                }
            }
            Conn::Joined {
                gateway,
                last_heartbeat_ms,
            } => {
                // An engine silent past the lease is cut off (a network that
                // drops packets without a reset keeps the connection open
                // for minutes): drop the session and reconnect with backoff.
                // The engine has declared this worker lost by now and closed
                // its side; the new session rejoins.
                let silent = now.saturating_sub(self.last_heard_ms);
                if silent > lease {
                    tracing::warn!(worker = %self.args_worker_id, silent_ms = silent, lease_ms = lease, "the engine has been silent past the lease; dropping the session");
                    self.connector.close_sessions();
                    self.down("the engine was silent past the lease");
                    return;
                }
                let every = self.welcome.as_ref().map_or(1_000, |w| w.heartbeat_ms);
                if now.saturating_sub(*last_heartbeat_ms) >= every {
                    *last_heartbeat_ms = now;
                    let running = self
                        .running
                        .iter()
                        .map(|(p, m)| (p.to_string(), m.iter().map(|(id, a)| (*id, *a)).collect()))
                        .collect();
                    let alive = gateway
                        .cast(GatewayMsg::Wire(ToEngine::Heartbeat {
                            worker_id: self.args_worker_id.clone(),
                            running,
                        }))
                        .is_ok();
                    if !alive {
                        self.down("the engine's gateway is gone");
                    }
                }
            }
        }
        self.check_drain().await;
        self.check_leaving();
    }

    /// Sends a join to the engine's gateway (again, when unanswered).
    fn join(&mut self, now: u64) {
        if let Some((_, at)) = &self.joining {
            if now.saturating_sub(*at) < JOIN_RETRY_MS {
                return;
            }
        }
        let gateway = ractor::pg::get_members(&ENGINE_GROUP.to_string())
            .into_iter()
            .find(|c| !c.get_id().is_local());
        let Some(gateway) = gateway.map(ActorRef::<GatewayMsg>::from) else {
            tracing::debug!(worker = %self.args_worker_id, "the engine's gateway is not known yet");
            return;
        };
        let held = self
            .running
            .iter()
            .map(|(p, m)| (p.to_string(), m.keys().copied().collect()))
            .collect();
        let hello = Hello {
            version: self.version,
            worker_id: self.args_worker_id.clone(),
            name: self.name.clone(),
            host: hostname(),
            pid: std::process::id(),
            weir_version: env!("CARGO_PKG_VERSION").to_string(),
            pools: self.offers.clone(),
            held,
        };
        if gateway
            .cast(GatewayMsg::Wire(ToEngine::Join(hello)))
            .is_ok()
        {
            tracing::debug!(worker = %self.args_worker_id, "join sent");
            self.joining = Some((gateway, now));
        }
    }

    /// A message from the engine, which came after `silent_ms` with
    /// nothing from it.
    fn on_engine(&mut self, m: ToWorker, silent_ms: u64) {
        match m {
            ToWorker::Batch(messages) => {
                let mut silent_ms = silent_ms;
                for m in messages {
                    // What follows a welcome comes on the session it opened.
                    let welcome = matches!(m, ToWorker::Welcome(_));
                    self.on_engine(m, silent_ms);
                    if welcome {
                        silent_ms = 0;
                        // A refused welcome (an older term): nothing after
                        // it in the batch is taken.
                        if matches!(self.conn, Conn::Down { .. }) {
                            break;
                        }
                    }
                }
            }
            ToWorker::Welcome(w) => {
                let Some((gateway, _)) = self.joining.take() else {
                    tracing::debug!(worker = %self.args_worker_id, "a welcome not asked for; dropped");
                    return;
                };
                if w.term < self.term_joined {
                    // A deposed leader still running its engine: nothing
                    // it grants may run. The session goes; the next
                    // connect tries the next member.
                    tracing::warn!(worker = %self.args_worker_id, term = w.term, joined_term = self.term_joined, "an engine of an older term refused");
                    self.connector.next_address();
                    self.connector.close_sessions();
                    self.down("the engine's term is older than one joined");
                    return;
                }
                self.term_joined = self.term_joined.max(w.term);
                self.joins += 1;
                if w.resumed {
                    self.resumes += 1;
                } else {
                    // The engine requeued what these pools held.
                    for p in self.pools.values() {
                        let _ = p.cast(PoolMsg::Reset);
                    }
                    self.running.clear();
                }
                tracing::info!(worker = %self.args_worker_id, resumed = w.resumed, lease_ms = w.lease_ms, "joined the engine");
                let _ = self.welcome_tx.send(Some(w.clone()));
                let w_lease_ms = w.lease_ms;
                self.welcome = Some(w);
                self.conn = Conn::Joined {
                    gateway,
                    last_heartbeat_ms: self.clock.now_ms(),
                };
                self.connector.set_silence_ms(w_lease_ms);
                for p in self.pools.values() {
                    let _ = p.cast(PoolMsg::QueueRestarted);
                }
                let backlog: Vec<LogFrame> = self.log_backlog.drain(..).collect();
                self.log_backlog_bytes = 0;
                if !backlog.is_empty() {
                    self.log(backlog);
                }
            }
            ToWorker::Farewell => self.leave_now("the engine confirmed the leave"),
            ToWorker::Refused { reason } => {
                self.fail(format!("the engine refused this worker: {reason}"));
            }
            ToWorker::Lost { reason } => {
                if !matches!(self.conn, Conn::Joined { .. }) && self.joining.is_some() {
                    // An answer to a message sent before the join: the join
                    // itself is on its way.
                    return;
                }
                self.lost += 1;
                tracing::warn!(worker = %self.args_worker_id, reason = %reason, "the engine declared this worker lost; its attempts were requeued; joining again");
                for p in self.pools.values() {
                    let _ = p.cast(PoolMsg::Reset);
                }
                self.running.clear();
                self.conn = Conn::Up {
                    ready: true,
                    authenticated: true,
                    since_ms: self.clock.now_ms(),
                };
                self.joining = None;
                self.join(self.clock.now_ms());
            }
            ToWorker::Run { pool, grant } if self.refuses(&pool, &grant, silent_ms) => {}
            ToWorker::Run { pool, grant } => match self.pools.get(pool.as_str()) {
                Some(p) => {
                    self.running
                        .entry(Arc::from(pool.as_str()))
                        .or_default()
                        .insert(grant.id, grant.attempt);
                    let _ = p.cast(PoolMsg::Run(grant));
                }
                None => {
                    tracing::warn!(worker = %self.args_worker_id, pool = %pool, "a ticket for a pool this worker does not serve; dropped")
                }
            },
            ToWorker::Cancel { pool, id } => {
                if let Some(p) = self.pools.get(pool.as_str()) {
                    let _ = p.cast(PoolMsg::Cancel(id));
                }
            }
            ToWorker::Acked { pool, ids } => {
                if let Some(p) = self.pools.get(pool.as_str()) {
                    let _ = p.cast(PoolMsg::Acked(ids));
                }
            }
        }
    }

    /// The engine's lease, from its welcome ([`LEASE_MS_UNKNOWN`] before
    /// the first).
    fn lease_ms(&self) -> u64 {
        self.welcome
            .as_ref()
            .map_or(LEASE_MS_UNKNOWN, |w| w.lease_ms)
    }

    /// Whether a grant is refused as stale (see [`grant_fate`]): its
    /// ticket is, or soon will be, another worker's, so running it would
    /// run the attempt twice. The engine requeued it when it declared this
    /// worker lost; a grant refused while the engine still counts the
    /// session is requeued when its lease ends.
    fn refuses(&mut self, pool: &str, grant: &Grant, silent_ms: u64) -> bool {
        let joined = matches!(self.conn, Conn::Joined { .. });
        let lease_ms = self.lease_ms();
        match grant_fate(joined, silent_ms, lease_ms) {
            GrantFate::Run => false,
            GrantFate::Refuse(why) => {
                self.stale_grants += 1;
                tracing::warn!(worker = %self.args_worker_id, pool, ticket = grant.id, attempt = grant.attempt, why = %why, "a stale grant refused: not run");
                true
            }
        }
    }

    fn on_pool(&mut self, pool: Arc<str>, up: PoolUp) {
        if let PoolUp::Report(r) = &up {
            if let Some(m) = self.running.get_mut(&pool) {
                m.remove(&r.id);
            }
        }
        if let PoolUp::Defer { id, .. } = &up {
            if let Some(m) = self.running.get_mut(&pool) {
                m.remove(id);
            }
        }
        let worker_id = self.args_worker_id.clone();
        let pool = pool.to_string();
        let msg = match up {
            PoolUp::Credit { slots } => ToEngine::Credit {
                worker_id,
                pool,
                slots,
            },
            PoolUp::Revoke { slots } => ToEngine::Revoke {
                worker_id,
                pool,
                slots,
            },
            PoolUp::Report(report) => ToEngine::Report {
                worker_id,
                pool,
                report,
            },
            PoolUp::Defer {
                id,
                attempt,
                until_ms,
                cause,
            } => ToEngine::Defer {
                worker_id,
                pool,
                id,
                attempt,
                until_ms,
                cause,
            },
            PoolUp::Holding { held } => ToEngine::Holding {
                worker_id,
                pool,
                held,
            },
            PoolUp::Started { id, attempt } => ToEngine::Started {
                worker_id,
                pool,
                id,
                attempt,
            },
        };
        // Not joined: dropped; the pools register again on the welcome.
        let _ = self.send(msg);
    }

    fn log(&mut self, frames: Vec<LogFrame>) {
        if self.gateway().is_some() {
            let sent = self.send(ToEngine::Log {
                worker_id: self.args_worker_id.clone(),
                frames: frames.clone(),
            });
            if sent {
                return;
            }
        }
        for f in frames {
            self.log_backlog_bytes += frame_bytes(&f);
            self.log_backlog.push_back(f);
        }
        while self.log_backlog_bytes > LOG_BACKLOG_BYTES_MAX {
            match self.log_backlog.pop_front() {
                Some(f) => self.log_backlog_bytes -= frame_bytes(&f),
                None => break,
            }
        }
    }

    async fn check_drain(&mut self) {
        let Some((until_ms, _)) = &self.draining else {
            return;
        };
        let until_ms = *until_ms;
        let mut in_use = 0;
        let mut unacked = 0;
        for p in self.pools.values() {
            if let Ok(v) = ractor::call_t!(p, PoolMsg::Status, 1_000) {
                in_use += v.in_use;
                unacked += v.unacked;
            }
        }
        let now = self.clock.now_ms();
        let idle = in_use == 0 && unacked == 0;
        if !idle && now < until_ms {
            return;
        }
        let mut cancelled = 0;
        if !idle {
            // Out of time: what still runs is cancelled; the engine
            // requeues it when this worker leaves.
            for (pool, m) in &self.running {
                for id in m.keys() {
                    if let Some(p) = self.pools.get(pool) {
                        let _ = p.cast(PoolMsg::Cancel(*id));
                        cancelled += 1;
                    }
                }
            }
        }
        let sent = self.send(ToEngine::Leave {
            worker_id: self.args_worker_id.clone(),
        });
        self.flush();
        tracing::info!(worker = %self.args_worker_id, cancelled, unacked, "worker drained; leaving");
        if let Some((_, reply)) = self.draining.take() {
            self.leaving = Some((
                now + FAREWELL_WAIT_MS,
                reply,
                DrainReport { cancelled, unacked },
            ));
        }
        if !sent {
            self.leave_now("no engine to confirm the leave");
        }
    }

    /// Ends a leave the engine confirmed, or gave up waiting for.
    fn leave_now(&mut self, why: &str) {
        let Some((_, reply, report)) = self.leaving.take() else {
            return;
        };
        tracing::info!(worker = %self.args_worker_id, why, "worker left");
        let _ = reply.send(report);
        let _ = self.end.send(LinkEnd::Left);
    }

    /// Gives up on a farewell that did not come in time.
    fn check_leaving(&mut self) {
        let late = self
            .leaving
            .as_ref()
            .is_some_and(|(until_ms, _, _)| self.clock.now_ms() >= *until_ms);
        if late {
            tracing::warn!(worker = %self.args_worker_id, wait_ms = FAREWELL_WAIT_MS, "the engine did not confirm the leave; leaving anyway");
            self.leave_now("farewell not received");
        }
    }
}

fn frame_bytes(f: &LogFrame) -> usize {
    let body = match &f.event {
        crate::protocol::LogEvent::Chunk { bytes, .. } => bytes.len(),
        _ => 0,
    };
    f.key.len() + body + 32
}

/// This host's name, for the engine's list of workers.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// The process-start token of a worker id: random enough that a restarted
/// worker is a new one (its attempts were requeued by the engine).
pub fn start_token(now_ms: u64) -> String {
    let r: u32 = rand::random();
    format!("{:x}{r:08x}", now_ms % 0x1_0000_0000)
}

/// The protocol version this build speaks.
pub const fn version() -> u32 {
    PROTOCOL_VERSION
}
