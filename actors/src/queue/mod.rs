//! The queue actor: owns the journal and the queue state; hands tickets to
//! pools as they fall due.
//!
//! Group commit, pipelined: a handler applies each op to the in-memory
//! state at once (so later ops in the same batch see it) and adds it to the
//! open batch together with the effects it implies (an answer to a caller,
//! a ticket for a worker, an ack, an event). At most one batch is being
//! made durable at a time, on a blocking thread; while it is, messages keep
//! arriving and fill the next batch, so batches grow with the load. When a
//! batch is durable its effects run, in order. Nothing leaves the actor
//! before the op behind it is durable.
//!
//! Credit, not polling: each pool actor grants credit (its free slots); the
//! queue selects due tickets for workers that have credit, lowest
//! `(due_ms, id)` first, and arms one timer for the earliest instant at
//! which anything falls due or a lease runs out.
//!
//! A crash of this actor loses only the open batch, whose callers were not
//! answered. Its restart replays the store; running tickets stay running
//! (their pools are alive and will report), and pools re-grant credit and
//! resend the reports the queue had not acknowledged. At engine open, in
//! contrast, every running ticket is an orphan and is requeued as a failed
//! attempt.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, watch};
use weir_core::queue::{Applied, Job, Op, Orphan, Place, QueueState, Terminal, TicketId};
use weir_core::retry::{AttemptOutcome, Plan, Stop};

use crate::clock::Clock;
use crate::msg::pool::PoolMsg;
use crate::notify;
// The queue's interface lives in `msg`; re-exported here for the crate's
// users (`weir_actors::queue::QueueMsg`, …).
use crate::events::EngineEvent;
pub use crate::msg::queue::{
    Cancelled, Completion, EarlyCompletion, Enqueued, LiveTicket, PoolStatus, QueueCounts,
    QueueMsg, QueueStatus, TicketFilter, TicketView,
};
pub use crate::msg::work::{Grant, Report};
use crate::records::asset::{asset_event_key, AssetEvent};
use crate::records::done::{DeadRecord, DoneRecord, DoneStatus};
use crate::records::keys::{dead_key, done_key};
use crate::store::{BlobRef, Commit, Expiring, Recovered, Store, StoreCold, StoreError};

/// The registered name of the queue actor.
pub const QUEUE_NAME: &str = "weir.queue";

/// Settings of the queue. Every limit explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueSettings {
    /// Lease of an attempt without a timeout.
    pub lease_ms: u64,
    /// Added to an attempt's timeout to make its lease.
    pub lease_grace_ms: u64,
    /// The largest output kept in a done record; longer outputs are cut.
    pub output_bytes_max: usize,
    /// How long done records are kept by default.
    pub retention_ms: u64,
    /// Jobs in one enqueue call at most.
    pub enqueue_batch_max: usize,
    /// After a batch is durable and its tickets are handed out, the next
    /// commit waits up to this long (µs) for their reports, so that a
    /// completion and the next selection on its slot share one flush rather
    /// than taking one each. 0 = commit at once.
    pub commit_linger_us: u64,
    /// Ops in the open batch past which it is committed without lingering.
    pub batch_ops_linger_max: usize,
    /// Pending tickets that only the store holds and that fall due within
    /// this long (ms) are read into memory ahead of their instant, so a
    /// burst due at one instant (prepared runs) is handed out from memory
    /// rather than read window by window as it goes. 0 = only as needed.
    pub warm_ahead_ms: u64,
    /// Tickets read ahead at most, over what the window holds.
    pub warm_tickets_max: usize,
    /// When a graph node's success enters the open batch, its scheduler is
    /// told at once ([`SchedulerMsg::Completing`]) and the commit waits up
    /// to this long (µs) for the downstreams it makes ready, so that the
    /// completion, its record and their enqueue (and selection) share one
    /// durable flush: one commit per edge instead of two. 0 = the
    /// scheduler hears of a completion only once it is durable.
    pub successors_wait_us: u64,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            lease_ms: 3_600_000,
            lease_grace_ms: 30_000,
            output_bytes_max: 1 << 20,
            retention_ms: 7 * 24 * 3_600_000,
            enqueue_batch_max: 100_000,
            commit_linger_us: 1_000,
            batch_ops_linger_max: 4_096,
            warm_ahead_ms: 1_000,
            warm_tickets_max: 16_384,
            successors_wait_us: 1_000,
        }
    }
}

/// A succeeded attempt's output as its report carries it.
enum Output {
    /// Small enough to stay in the record.
    Inline(Vec<u8>),
    /// In a blob the worker wrote.
    Blob(BlobRef),
}

/// What a batch does once durable.
enum Effect {
    Enqueued(
        RpcReplyPort<Vec<Result<Enqueued, String>>>,
        Vec<Result<Enqueued, String>>,
    ),
    Cancelled(RpcReplyPort<Cancelled>, Cancelled),
    CancelledMany(RpcReplyPort<Vec<Cancelled>>, Vec<Cancelled>),
    Withdrawn(RpcReplyPort<Result<Vec<Cancelled>, String>>, Vec<Cancelled>),
    RequeuedDead(
        RpcReplyPort<Result<Enqueued, String>>,
        Result<Enqueued, String>,
    ),
    /// Expiry index entries of records the batch deleted.
    Unexpire(Vec<Expiring>),
    Dispatch(ActorRef<PoolMsg>, Grant),
    Ack(Arc<str>, Vec<(TicketId, u32)>),
    CancelRunning(Arc<str>, TicketId),
    Notify(Arc<str>, Completion),
    /// The answers of a `Successors` enqueue, to its scheduler.
    Presubmitted(Arc<str>, Arc<str>, Vec<Result<Enqueued, String>>),
    Event(EngineEvent),
    /// A ticket query about a key whose completion is not durable yet,
    /// answered once it is (the ticket is gone from memory and its done
    /// record not yet in the store: answered now, the key would look
    /// unknown).
    TicketView(String, RpcReplyPort<Option<TicketView>>),
}

#[derive(Default)]
struct Batch {
    commit: Commit,
    effects: Vec<Effect>,
}

impl Batch {
    fn is_empty(&self) -> bool {
        self.commit.is_empty() && self.effects.is_empty()
    }
}

struct Worker {
    actor: ActorRef<PoolMsg>,
    pool: Arc<str>,
    credit: u64,
}

/// What the incarnations of the queue share: the supervisor keeps it and
/// hands it to each.
#[derive(Default)]
pub struct QueueShared {
    /// Held while a journal write runs: a killed queue's write goes on on
    /// its blocking thread, and the next incarnation must not replay the
    /// store before that write has landed (it would miss ops, then journal
    /// over them).
    gate: Arc<tokio::sync::Mutex<()>>,
    /// The events and notices of the batch being made durable, until they
    /// have gone out. A queue that dies in between loses its effects; the
    /// next incarnation sends these if the batch landed, so that each
    /// Completed event and notice goes out once.
    unfinished: std::sync::Mutex<Option<Unfinished>>,
}

struct Unfinished {
    events: Vec<EngineEvent>,
    notices: Vec<(Arc<str>, Completion)>,
    landed: bool,
}

impl QueueShared {
    fn unfinished(&self) -> std::sync::MutexGuard<'_, Option<Unfinished>> {
        self.unfinished.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the events and notices of a batch about to be written.
    fn begin(&self, effects: &[Effect]) {
        let mut events = Vec::new();
        let mut notices = Vec::new();
        for e in effects {
            match e {
                Effect::Event(e) => events.push(e.clone()),
                Effect::Notify(name, c) => notices.push((name.clone(), c.clone())),
                _ => {}
            }
        }
        *self.unfinished() = Some(Unfinished {
            events,
            notices,
            landed: false,
        });
    }

    fn landed(&self) {
        if let Some(u) = self.unfinished().as_mut() {
            u.landed = true;
        }
    }

    /// The batch's effects ran.
    fn finish(&self) {
        *self.unfinished() = None;
    }
}

/// The queue actor.
pub struct QueueActor;

/// What the queue needs to start.
pub struct QueueArgs {
    /// The engine's names: a ticket's `notify` is resolved among them.
    pub names: crate::names::Names,
    /// The store.
    pub store: Store,
    /// The recovered state at engine open; `None` on a restart (it replays
    /// the store itself).
    pub recovered: Option<Recovered>,
    /// The clock.
    pub clock: Clock,
    /// Settings.
    pub settings: QueueSettings,
    /// Engine events.
    pub events: broadcast::Sender<EngineEvent>,
    /// Published counts.
    pub counts: watch::Sender<QueueCounts>,
    /// What every incarnation shares (the supervisor keeps it).
    pub shared: Arc<QueueShared>,
    /// On a restart, the pool workers alive now: a running ticket of any
    /// other worker is requeued, since that worker's `WorkerGone` may have
    /// gone to the dead queue.
    pub workers: Vec<Arc<str>>,
}

type TimerHandle = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<QueueMsg>>>;

/// The queue actor's state.
pub struct QueueState_ {
    names: crate::names::Names,
    store: Store,
    clock: Clock,
    settings: QueueSettings,
    events: broadcast::Sender<EngineEvent>,
    counts: watch::Sender<QueueCounts>,
    shared: Arc<QueueShared>,
    q: QueueState,
    /// Ticket ids changed since the last snapshot.
    dirty: HashSet<TicketId>,
    /// Keys whose Complete or Cancel is not yet durable (their done record
    /// is not readable yet): an enqueue of one is a duplicate.
    completing: HashMap<Arc<str>, u32>,
    workers: HashMap<Arc<str>, Worker>,
    /// Workers with credit, by pool, in round-robin order.
    by_pool: BTreeMap<Arc<str>, Vec<Arc<str>>>,
    /// When the running attempt started, by ticket.
    started: HashMap<TicketId, u64>,
    open: Batch,
    in_flight: Option<Vec<Effect>>,
    /// Keys of the batch in flight to clear from `completing` once durable.
    in_flight_completing: Vec<Arc<str>>,
    open_completing: Vec<Arc<str>>,
    /// The armed timer: when it fires, and its task.
    timer: Option<(u64, TimerHandle)>,
    paused: bool,
    /// Grants handed out whose report (or defer) has not come back.
    awaiting_reports: usize,
    /// Until when the next commit waits for those reports.
    linger_until: Option<tokio::time::Instant>,
    /// Keys of successes in the open batch whose schedulers have not
    /// answered their early notice yet.
    awaiting_successors: HashSet<Arc<str>>,
    /// Until when the open batch waits for them, and whether a timer to
    /// end the wait is armed.
    successors_until: Option<tokio::time::Instant>,
    successors_timer: bool,
    batches: u64,
    rng: rand::rngs::SmallRng,
}

impl Actor for QueueActor {
    type Msg = QueueMsg;
    type State = QueueState_;
    type Arguments = QueueArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<QueueMsg>,
        args: QueueArgs,
    ) -> Result<QueueState_, ActorProcessingErr> {
        use rand::SeedableRng;
        let first_open = args.recovered.is_some();
        let recovered = match args.recovered {
            Some(r) => r,
            None => {
                // Wait for the writes of the incarnation before this one,
                // then send what it made durable and did not get to send.
                let gate = args.shared.gate.clone().lock_owned().await;
                if let Some(u) = args.shared.unfinished().take() {
                    if u.landed {
                        tracing::info!(
                            events = u.events.len(),
                            "sending the effects of a batch the last queue made durable"
                        );
                        for e in u.events {
                            let _ = args.events.send(e);
                        }
                        for (name, c) in u.notices {
                            notify::completion(&args.names, &name, c);
                        }
                    }
                }
                let store = args.store.clone();
                tokio::task::spawn_blocking(move || {
                    let recovered = store.recover();
                    drop(gate);
                    recovered
                })
                .await??
            }
        };
        let args_store_changed: HashSet<TicketId> =
            args.store.changed_since_snapshot().into_iter().collect();
        let mut state = QueueState_ {
            names: args.names,
            store: args.store,
            clock: args.clock,
            settings: args.settings,
            events: args.events,
            counts: args.counts,
            shared: args.shared,
            q: recovered.state,
            // Tickets the replayed journal tail changed: the next snapshot
            // must write them, or removing the tail would lose them.
            dirty: args_store_changed,
            completing: HashMap::new(),
            workers: HashMap::new(),
            by_pool: BTreeMap::new(),
            started: HashMap::new(),
            open: Batch::default(),
            in_flight: None,
            in_flight_completing: Vec::new(),
            open_completing: Vec::new(),
            timer: None,
            paused: false,
            awaiting_reports: 0,
            linger_until: None,
            awaiting_successors: HashSet::new(),
            successors_until: None,
            successors_timer: false,
            batches: 0,
            rng: rand::rngs::SmallRng::from_entropy(),
        };
        tracing::info!(
            live = state.q.len(),
            running = state.q.running_len(),
            first_open,
            "queue started"
        );
        if first_open {
            // Every running ticket ran an attempt in a process that died:
            // requeue it as a failed attempt (or fail it when spent).
            let now = state.clock.now_ms();
            let orphans = {
                let rng = &mut state.rng;
                state.q.orphans(now, || rand::Rng::gen(rng))
            };
            for orphan in orphans {
                match orphan {
                    Orphan::Ran(op, plan) => state.apply_attempt_end(
                        op,
                        plan,
                        None,
                        "the process running the attempt died".into(),
                        now,
                        None,
                    ),
                    Orphan::Unstarted(op) => {
                        let id = op.ticket_id();
                        let key = id
                            .and_then(|id| state.q.ticket(id))
                            .map(|t| t.job.key.clone());
                        let _ = state.step(op);
                        tracing::info!(key = ?key, id = ?id, "a hand-out whose task had not started when the process died is given back; no attempt spent");
                    }
                }
            }
            state.flush_inline().await?;
        } else {
            // Attempts of workers that died while no queue was running.
            let alive: HashSet<&Arc<str>> = args.workers.iter().collect();
            let mut gone: Vec<Arc<str>> = state
                .q
                .tickets()
                .filter_map(|t| match &t.place {
                    Place::Running { worker, .. } if !alive.contains(worker) => {
                        Some(worker.clone())
                    }
                    _ => None,
                })
                .collect();
            gone.sort();
            gone.dedup();
            for worker in &gone {
                state.worker_gone(worker);
            }
            if !gone.is_empty() {
                state.flush_inline().await?;
            }
        }
        state.publish_counts();
        let _ = myself;
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<QueueMsg>,
        state: &mut QueueState_,
    ) -> Result<(), ActorProcessingErr> {
        state.rearm(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<QueueMsg>,
        state: &mut QueueState_,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, t)) = state.timer.take() {
            t.abort();
        }
        // A graceful stop with everything durable leaves a snapshot, so the
        // next open replays no journal tail (up to `snapshot_ops` ops, each
        // an enqueue read into memory) before its first hand-out. Not after
        // a kill or a panic (ractor calls no `post_stop` then): the tail
        // is what recovery is for.
        if state.in_flight.is_none()
            && state.open.is_empty()
            && !state.dirty.is_empty()
            && !state.store.is_failed()
        {
            if let Err(e) = state.snapshot().await {
                tracing::warn!(error = %e, "no snapshot at stop; the next open replays the journal tail");
            }
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<QueueMsg>,
        msg: QueueMsg,
        state: &mut QueueState_,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            QueueMsg::Enqueue(jobs, reply) => state.enqueue(jobs, reply),
            QueueMsg::Successors(key, jobs, notify) => {
                state.awaiting_successors.remove(&key);
                let answers = state.enqueue_answers(jobs);
                // First among the batch's effects: before its notices.
                state
                    .open
                    .effects
                    .insert(0, Effect::Presubmitted(notify, key, answers));
            }
            QueueMsg::NoSuccessors(key) => {
                state.awaiting_successors.remove(&key);
            }
            QueueMsg::Cancel(key, reply) => state.cancel(&key, reply),
            QueueMsg::CancelMany(keys, reply) => state.cancel_many(keys, reply),
            QueueMsg::Withdraw(keys, reply) => state.withdraw(keys, reply),
            QueueMsg::RequeueDead(key, reply) => state.requeue_dead(&key, reply),
            QueueMsg::Credit {
                worker,
                worker_id,
                pool,
                slots,
            } => state.credit(worker, worker_id, pool, slots),
            QueueMsg::Revoke { worker_id, slots } => {
                if let Some(w) = state.workers.get_mut(&worker_id) {
                    w.credit = w.credit.saturating_sub(u64::from(slots));
                }
            }
            QueueMsg::Report(report) => state.report(report),
            QueueMsg::Defer {
                worker_id,
                id,
                attempt,
                until_ms,
            } => state.defer(worker_id, id, attempt, until_ms),
            QueueMsg::WorkerGone { worker_id } => state.worker_gone(&worker_id),
            QueueMsg::Holding { worker_id, held } => state.holding(&worker_id, held),
            QueueMsg::Started { id, attempt } => {
                // Journaled with the next batch; nothing waits for it.
                let _ = state.step(Op::Start { id, attempt });
            }
            QueueMsg::Pause(paused) => {
                state.paused = paused;
                tracing::info!(paused, "queue dispatch paused");
            }
            QueueMsg::Tick => {
                state.timer = None;
                state.expire_leases();
            }
            QueueMsg::FlushNow => {
                state.linger_until = None;
                state.successors_timer = false;
            }
            QueueMsg::Flushed(result) => {
                let effects = state.in_flight.take().unwrap_or_default();
                if let Err(e) = result {
                    return Err(format!("journal commit failed: {e}").into());
                }
                state.batches += 1;
                // Counts before and after the effects: a caller answered by
                // them must not then read counts older than its answer, and
                // a key leaves the live count only once its Completed event
                // went out.
                state.publish_counts();
                state.run_effects(effects);
                state.shared.finish();
                if state.settings.commit_linger_us > 0 && state.awaiting_reports > 0 {
                    let linger = Duration::from_micros(state.settings.commit_linger_us);
                    state.linger_until = Some(tokio::time::Instant::now() + linger);
                    myself.send_after(linger, || QueueMsg::FlushNow);
                }
                for key in std::mem::take(&mut state.in_flight_completing) {
                    state.done_completing(&key);
                }
                if state.store.snapshot_due() {
                    state.flush_inline().await?;
                    state.snapshot().await?;
                }
                state.publish_counts();
            }
            QueueMsg::Status(reply) => {
                let _ = reply.send(state.status());
            }
            QueueMsg::Ticket(key, reply) => {
                if state.completing.contains_key(key.as_str()) {
                    state.open.effects.push(Effect::TicketView(key, reply));
                } else {
                    let view = state.ticket_view(&key)?;
                    let _ = reply.send(view);
                }
            }
            QueueMsg::List(filter, reply) => {
                let _ = reply.send(state.list(&filter));
            }
            QueueMsg::Panic => panic!("queue: fault injected by a test"),
        }
        state.dispatch();
        state.start_flush(&myself);
        state.rearm(&myself);
        Ok(())
    }
}

impl QueueState_ {
    fn step(&mut self, op: Op) -> Applied {
        // Reads the store only while levels are cold.
        if let Err(e) = self.q.prepare(&op, &StoreCold::new(&self.store)) {
            cold_failed(&e);
        }
        self.step_prepared(op)
    }

    /// [`QueueState_::step`] for an op whose ticket the caller has just
    /// read in (an enqueue looks its key up first: a second look would be
    /// a second store read of a key that is not there).
    fn step_prepared(&mut self, op: Op) -> Applied {
        let cold = StoreCold::new(&self.store);
        let applied = self.q.step(&op);
        if let Err(e) = self.q.refill(&cold, self.store.settings().window_tickets) {
            cold_failed(&e);
        }
        if let Some(id) = applied.changed() {
            self.dirty.insert(id);
            self.open.commit.ops.push(op);
        }
        applied
    }

    fn enqueue(&mut self, jobs: Vec<Job>, reply: RpcReplyPort<Vec<Result<Enqueued, String>>>) {
        let answers = self.enqueue_answers(jobs);
        self.open.effects.push(Effect::Enqueued(reply, answers));
    }

    /// Enqueues `jobs` into the open batch (none past the per-call limit);
    /// one answer each, in order.
    fn enqueue_answers(&mut self, jobs: Vec<Job>) -> Vec<Result<Enqueued, String>> {
        if jobs.len() > self.settings.enqueue_batch_max {
            let err = format!(
                "enqueue of {} jobs is over the limit of {} per call",
                jobs.len(),
                self.settings.enqueue_batch_max
            );
            return jobs.iter().map(|_| Err(err.clone())).collect();
        }
        jobs.into_iter().map(|job| self.enqueue_one(job)).collect()
    }

    /// Reads the ticket of `key` in from the store when only the store
    /// holds it, so `by_key` finds it.
    fn fault_in_key(&mut self, key: &str) {
        if let Err(e) = self.q.fault_in_key(key, &StoreCold::new(&self.store)) {
            cold_failed(&e);
        }
    }

    fn enqueue_one(&mut self, job: Job) -> Result<Enqueued, String> {
        self.fault_in_key(&job.key);
        if let Some(t) = self.q.by_key(&job.key) {
            return Ok(Enqueued::Live(t.id));
        }
        if self.completing.contains_key(&job.key) {
            return Ok(Enqueued::Done);
        }
        if self
            .store
            .contains(&done_key(&job.key))
            .map_err(|e| e.to_string())?
        {
            return Ok(Enqueued::Done);
        }
        let op = Op::Enqueue(job);
        self.store.check_op(&op).map_err(|e| e.to_string())?;
        let Op::Enqueue(job) = &op else {
            unreachable!()
        };
        let (key, pool) = (job.key.clone(), job.pool.clone());
        match self.step_prepared(op) {
            Applied::Enqueued(id) => {
                tracing::debug!(key = %key, id, pool = %pool, "ticket enqueued");
                self.open
                    .effects
                    .push(Effect::Event(EngineEvent::Enqueued { key, id, pool }));
                Ok(Enqueued::New(id))
            }
            other => Err(format!("enqueue of key {key:?} applied as {other:?}")),
        }
    }

    fn cancel(&mut self, key: &str, reply: RpcReplyPort<Cancelled>) {
        let answer = self.cancel_one(key);
        self.open.effects.push(Effect::Cancelled(reply, answer));
    }

    fn cancel_many(&mut self, keys: Vec<String>, reply: RpcReplyPort<Vec<Cancelled>>) {
        let answers = keys.iter().map(|k| self.cancel_one(k)).collect();
        self.open
            .effects
            .push(Effect::CancelledMany(reply, answers));
    }

    /// See [`QueueMsg::Withdraw`]: the check and the cancels are one
    /// handler, so no hand-out falls between them.
    fn withdraw(&mut self, keys: Vec<String>, reply: RpcReplyPort<Result<Vec<Cancelled>, String>>) {
        for key in &keys {
            self.fault_in_key(key);
            let started = self
                .q
                .by_key(key)
                .is_some_and(|t| !matches!(t.place, Place::Pending { .. }));
            if started || self.completing.contains_key(key.as_str()) {
                tracing::debug!(key = %key, "withdraw refused: the ticket was handed out");
                let _ = reply.send(Err(key.clone()));
                return;
            }
        }
        let answers = keys.iter().map(|k| self.cancel_one(k)).collect();
        self.open.effects.push(Effect::Withdrawn(reply, answers));
    }

    fn cancel_one(&mut self, key: &str) -> Cancelled {
        self.fault_in_key(key);
        match self
            .q
            .by_key(key)
            .map(|t| (t.id, t.place.clone(), t.attempts(), t.tries, t.job.clone()))
        {
            Some((id, place, attempts, tries, job)) => {
                let now = self.clock.now_ms();
                let _ = self.step(Op::Cancel { id });
                if let Place::Running { worker, .. } = &place {
                    self.open
                        .effects
                        .push(Effect::CancelRunning(worker.clone(), id));
                }
                let record = DoneRecord {
                    id,
                    key: job.key.to_string(),
                    task: job.task.to_string(),
                    pool: job.pool.to_string(),
                    status: DoneStatus::Cancelled,
                    attempts,
                    deferrals: tries.deferrals,
                    failures: tries.failures,
                    error: None,
                    output: Vec::new(),
                    output_blob: None,
                    first_due_ms: tries.first_due_ms,
                    started_ms: self.started.remove(&id),
                    finished_ms: now,
                    pokes: tries.pokes,
                    members: None,
                };
                self.record_done(&job, record);
                tracing::info!(key, id, "ticket cancelled");
                Cancelled::Cancelled(id)
            }
            None => {
                if self.completing.contains_key(key)
                    || self.store.contains(&done_key(key)).unwrap_or(false)
                {
                    Cancelled::AlreadyDone
                } else {
                    Cancelled::Unknown
                }
            }
        }
    }

    /// Adds the done record of `job` to the open batch, with its expiry
    /// entry, the event and the notification.
    fn record_done(&mut self, job: &Job, mut record: DoneRecord) {
        let key = done_key(&job.key);
        match self.store.encode("done record", &record) {
            Ok(bytes) => self.open.commit.puts.push((key.clone(), bytes)),
            Err(e) => {
                // A record of plain strings and numbers always encodes.
                panic!("done record of {:?} does not encode: {e}", job.key);
            }
        }
        let retention = job.retention_ms.unwrap_or(self.settings.retention_ms);
        if retention > 0 {
            self.open.commit.expiring.push(Expiring {
                at_ms: record.finished_ms.saturating_add(retention),
                key,
            });
        }
        *self.completing.entry(job.key.clone()).or_insert(0) += 1;
        self.open_completing.push(job.key.clone());
        let completion = Completion {
            key: job.key.clone(),
            id: record.id,
            status: record.status,
        };
        self.open
            .effects
            .push(Effect::Event(EngineEvent::Completed {
                key: job.key.clone(),
                id: record.id,
                status: record.status,
                attempts: record.attempts,
            }));
        if let Some(notify) = &job.notify {
            if record.status == DoneStatus::Succeeded && self.settings.successors_wait_us > 0 {
                // The record is encoded above: its output moves on.
                let early = EarlyCompletion {
                    key: job.key.clone(),
                    output: std::mem::take(&mut record.output),
                    output_blob: record.output_blob.take(),
                };
                if notify::completing(&self.names, notify, early) {
                    self.awaiting_successors.insert(job.key.clone());
                    self.successors_until.get_or_insert_with(|| {
                        tokio::time::Instant::now()
                            + Duration::from_micros(self.settings.successors_wait_us)
                    });
                }
            }
            self.open
                .effects
                .push(Effect::Notify(notify.clone(), completion));
        }
    }

    /// Adds the dead letter of `job`, which ended Failed, to the open
    /// batch: the same atomic batch as its Complete and done record, with
    /// the done record's expiry instant.
    fn record_dead(&mut self, job: &Job, done: &DoneRecord) {
        let retention = job.retention_ms.unwrap_or(self.settings.retention_ms);
        let expires_at_ms = (retention > 0).then(|| done.finished_ms.saturating_add(retention));
        let mut kept = job.clone();
        if kept.notify.is_some() {
            // A graph node is requeued as a rerun, which builds its input.
            kept.payload = Vec::new();
        }
        let record = DeadRecord {
            job: kept,
            id: done.id,
            attempts: done.attempts,
            failures: done.failures,
            error: done.error.clone(),
            first_due_ms: done.first_due_ms,
            finished_ms: done.finished_ms,
            expires_at_ms,
        };
        let key = dead_key(&job.key);
        match self.store.encode("dead letter", &record) {
            Ok(bytes) => self.open.commit.puts.push((key.clone(), bytes)),
            Err(e) => panic!("dead letter of {:?} does not encode: {e}", job.key),
        }
        if let Some(at_ms) = expires_at_ms {
            self.open.commit.expiring.push(Expiring { at_ms, key });
        }
        tracing::warn!(key = %job.key, id = done.id, attempts = done.attempts, error = ?done.error, "ticket dead-lettered: its tries are spent");
    }

    /// Requeues the dead letter of `key`, a plain job: in one durable batch
    /// its done record and letter are deleted and its job is enqueued again
    /// as a fresh ticket (due now; its tries start over). Replay sees an
    /// ordinary Enqueue. Graph nodes are rerun by their scheduler instead.
    fn requeue_dead(&mut self, key: &str, reply: RpcReplyPort<Result<Enqueued, String>>) {
        let answer = self.requeue_dead_one(key);
        self.open.effects.push(Effect::RequeuedDead(reply, answer));
    }

    fn requeue_dead_one(&mut self, key: &str) -> Result<Enqueued, String> {
        self.fault_in_key(key);
        if let Some(t) = self.q.by_key(key) {
            return Ok(Enqueued::Live(t.id));
        }
        let record: DeadRecord = match self.store.get(&dead_key(key)) {
            Ok(Some(r)) => r,
            Ok(None) => return Err(format!("no dead letter has the key {key:?}")),
            Err(e) => return Err(e.to_string()),
        };
        if record.is_graph_node() {
            return Err(format!(
                "dead letter {key:?} is a graph node: it is requeued by a rerun of the node"
            ));
        }
        let mut job = record.job.clone();
        job.due_ms = self.clock.now_ms();
        let op = Op::Enqueue(job);
        self.store.check_op(&op).map_err(|e| e.to_string())?;
        let pool = match &op {
            Op::Enqueue(j) => j.pool.clone(),
            _ => unreachable!(),
        };
        match self.step(op) {
            Applied::Enqueued(id) => {
                // A dead letter's done record is a failure's: it names no
                // blob, so no blob index goes with it.
                self.open.commit.deletes.push(done_key(key));
                self.open.commit.deletes.push(dead_key(key));
                // The expiry entries of the deleted records would delete
                // the next ones of this key early: remove them once the
                // deletes are durable.
                if let Some(at_ms) = record.expires_at_ms {
                    self.open.effects.push(Effect::Unexpire(vec![
                        Expiring {
                            at_ms,
                            key: done_key(key),
                        },
                        Expiring {
                            at_ms,
                            key: dead_key(key),
                        },
                    ]));
                }
                let key: Arc<str> = Arc::from(key);
                tracing::info!(key = %key, id, pool = %pool, "dead letter requeued as a fresh ticket");
                self.open.effects.push(Effect::Event(EngineEvent::Enqueued {
                    key: key.clone(),
                    id,
                    pool,
                }));
                self.open
                    .effects
                    .push(Effect::Event(EngineEvent::DeadRequeued {
                        key: key.to_string(),
                    }));
                Ok(Enqueued::New(id))
            }
            other => Err(format!(
                "requeue of dead letter {key:?} applied as {other:?}"
            )),
        }
    }

    fn done_completing(&mut self, key: &Arc<str>) {
        if let Some(n) = self.completing.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.completing.remove(key);
            }
        }
    }

    fn credit(
        &mut self,
        worker: ActorRef<PoolMsg>,
        worker_id: Arc<str>,
        pool: Arc<str>,
        slots: u32,
    ) {
        let entry = self
            .workers
            .entry(worker_id.clone())
            .or_insert_with(|| Worker {
                actor: worker,
                pool: pool.clone(),
                credit: 0,
            });
        entry.credit += u64::from(slots);
        let list = self.by_pool.entry(pool).or_default();
        if !list.contains(&worker_id) {
            list.push(worker_id);
        }
    }

    /// Hands due tickets to workers with credit.
    fn dispatch(&mut self) {
        if self.paused {
            return;
        }
        let now = self.clock.now_ms();
        let pools: Vec<Arc<str>> = self.by_pool.keys().cloned().collect();
        for pool in pools {
            loop {
                if self.q.next_due_ms(&pool).is_none_or(|due| due > now) {
                    break;
                }
                let Some(worker_id) = self.next_worker(&pool) else {
                    break;
                };
                let actor = self.workers[&worker_id].actor.clone();
                // The lease depends on the ticket's timeout: peek at the
                // ticket select will take.
                let lease_until_ms = now.saturating_add(self.lease_for_next(&pool, now));
                let applied = self.step(Op::Select {
                    pool: pool.clone(),
                    now_ms: now,
                    worker: worker_id.clone(),
                    lease_until_ms,
                });
                let Applied::Selected(id) = applied else {
                    break;
                };
                let w = self
                    .workers
                    .get_mut(&worker_id)
                    .expect("worker with credit exists");
                w.credit -= 1;
                let t = self.q.ticket(id).expect("selected ticket is live");
                let grant = Grant {
                    id,
                    attempt: t.attempt,
                    job: t.job.clone(),
                    lease_until_ms,
                };
                self.started.insert(id, now);
                tracing::debug!(key = %t.job.key, id, attempt = t.attempt, worker = %worker_id, "ticket selected");
                self.open.effects.push(Effect::Event(EngineEvent::Started {
                    key: t.job.key.clone(),
                    id,
                    attempt: t.attempt,
                    worker: worker_id.clone(),
                }));
                self.open.effects.push(Effect::Dispatch(actor, grant));
            }
        }
    }

    /// The lease of the ticket `pool` would select at `now`.
    fn lease_for_next(&self, pool: &str, now: u64) -> u64 {
        // The ticket select takes: the highest due priority, then FIFO.
        let timeout = self
            .q
            .peek_pending(pool, now)
            .and_then(|t| t.job.timeout_ms);
        match timeout {
            Some(ms) => ms.saturating_add(self.settings.lease_grace_ms),
            None => self.settings.lease_ms,
        }
    }

    /// The next worker of `pool` with credit, round robin.
    fn next_worker(&mut self, pool: &Arc<str>) -> Option<Arc<str>> {
        let list = self.by_pool.get_mut(pool)?;
        for i in 0..list.len() {
            let id = &list[i];
            if self.workers.get(id).is_some_and(|w| w.credit > 0) {
                let id = id.clone();
                list.rotate_left(i + 1);
                return Some(id);
            }
        }
        None
    }

    fn report(&mut self, r: Report) {
        self.awaiting_reports = self.awaiting_reports.saturating_sub(1);
        if r.regrant > 0 {
            if let Some(w) = self.workers.get_mut(&r.worker_id) {
                w.credit += u64::from(r.regrant);
                let list = self.by_pool.entry(w.pool.clone()).or_default();
                if !list.contains(&r.worker_id) {
                    list.push(r.worker_id.clone());
                }
            } else {
                // Its next registration gives the queue its free slots
                // again; until then they are missing.
                tracing::warn!(worker = %r.worker_id, slots = r.regrant, id = r.id, "slots granted back by a worker the queue does not know are dropped");
            }
        }
        let now = self.clock.now_ms();
        self.open
            .effects
            .push(Effect::Ack(r.worker_id.clone(), vec![(r.id, r.attempt)]));
        let draw = rand::Rng::gen(&mut self.rng);
        let Some((op, plan)) = self.q.after_attempt_waiting(
            r.id,
            r.attempt,
            r.outcome,
            now,
            draw,
            r.retry_after_ms.unwrap_or(0),
        ) else {
            // Idempotent by (ticket, attempt): a resent report of an attempt
            // already applied, or one of an attempt superseded since (its
            // worker was lost, the ticket requeued, cancelled or ended),
            // changes nothing. It is acknowledged so its worker forgets it.
            tracing::warn!(id = r.id, attempt = r.attempt, worker = %r.worker_id, "report refused: its attempt is not the ticket's running one (superseded, or applied already)");
            let _ = self.events.send(EngineEvent::ReportRefused {
                worker: r.worker_id.to_string(),
                id: r.id,
                attempt: r.attempt,
            });
            return;
        };
        let error = r.error.clone().unwrap_or_default();
        let output = if r.output.len() > self.settings.output_bytes_max {
            r.output[..self.settings.output_bytes_max].to_vec()
        } else {
            r.output
        };
        let output = match r.output_blob {
            Some(blob) => Output::Blob(blob),
            None => Output::Inline(output),
        };
        self.apply_attempt_end(op, plan, Some(output), error, now, Some(r.started_ms));
    }

    /// Applies the Complete or Requeue that ends an attempt.
    fn apply_attempt_end(
        &mut self,
        op: Op,
        plan: Plan,
        output: Option<Output>,
        error: String,
        now: u64,
        started_ms: Option<u64>,
    ) {
        let Some(t) = op.ticket_id().and_then(|id| self.q.ticket(id)) else {
            return;
        };
        let (id, attempts, tries, job) = (t.id, t.attempts(), t.tries, t.job.clone());
        match op {
            Op::Complete { terminal, .. } => {
                let _ = self.step(op);
                let status = match terminal {
                    Terminal::Succeeded => DoneStatus::Succeeded,
                    Terminal::Failed => DoneStatus::Failed,
                    Terminal::Skipped => DoneStatus::Skipped,
                };
                let failures = tries.failures + u32::from(status == DoneStatus::Failed);
                let (output, output_blob) = match output {
                    Some(Output::Inline(bytes)) if status == DoneStatus::Succeeded => (bytes, None),
                    Some(Output::Blob(blob)) if status == DoneStatus::Succeeded => {
                        (Vec::new(), Some(blob))
                    }
                    _ => (Vec::new(), None),
                };
                tracing::debug!(key = %job.key, id, attempts, deferrals = tries.deferrals, status = %status, plan = ?plan, "ticket completed");
                let record = DoneRecord {
                    id,
                    key: job.key.to_string(),
                    task: job.task.to_string(),
                    pool: job.pool.to_string(),
                    status,
                    attempts,
                    deferrals: tries.deferrals,
                    failures,
                    error: match (status, plan) {
                        (DoneStatus::Failed, Plan::Stop(Stop::SensorTimedOut)) => Some(format!(
                            "sensor not met within {}: {error}",
                            human_ms(job.sensor.as_ref().map_or(0, |s| s.timeout_ms))
                        )),
                        (DoneStatus::Failed, _) => Some(error),
                        (DoneStatus::Skipped, _) => Some(format!(
                            "sensor not met within {}, skipped: {error}",
                            human_ms(job.sensor.as_ref().map_or(0, |s| s.timeout_ms))
                        )),
                        _ => None,
                    },
                    output,
                    output_blob,
                    first_due_ms: tries.first_due_ms,
                    started_ms: started_ms.or_else(|| self.started.get(&id).copied()),
                    finished_ms: now,
                    pokes: tries.pokes,
                    members: None,
                };
                self.started.remove(&id);
                if status == DoneStatus::Failed {
                    self.record_dead(&job, &record);
                }
                if status == DoneStatus::Succeeded && !job.produces.is_empty() {
                    // The materializations go in the same atomic batch as
                    // the record: a success is never without its events.
                    for asset in &job.produces {
                        let event = AssetEvent {
                            asset: asset.to_string(),
                            key: job.key.to_string(),
                            at_ms: now,
                        };
                        match self.store.encode("asset event", &event) {
                            Ok(bytes) => self
                                .open
                                .commit
                                .puts
                                .push((asset_event_key(asset, &job.key), bytes)),
                            Err(e) => panic!("asset event of {:?} does not encode: {e}", job.key),
                        }
                    }
                    tracing::info!(key = %job.key, assets = ?job.produces, "assets materialized");
                }
                if let Some(blob) = &record.output_blob {
                    // The blob is durable already (the worker wrote it
                    // before it reported); its references go in the same
                    // atomic batch as the record.
                    match self.store.blob_index_puts(&done_key(&job.key), blob) {
                        Ok(puts) => self.open.commit.puts.extend(puts),
                        Err(e) => panic!("blob reference of {:?} does not encode: {e}", job.key),
                    }
                }
                self.record_done(&job, record);
            }
            Op::Requeue { due_ms, .. } => {
                let _ = self.step(op);
                self.started.remove(&id);
                // The event numbers attempts that ran, not hand-outs.
                tracing::info!(key = %job.key, id, attempt = attempts, due_ms, error = %error, "attempt failed; ticket requeued");
                self.open.effects.push(Effect::Event(EngineEvent::Retrying {
                    key: job.key.clone(),
                    id,
                    attempt: attempts,
                    due_ms,
                    error,
                }));
            }
            Op::Poke { due_ms, .. } => {
                let _ = self.step(op);
                self.started.remove(&id);
                tracing::info!(key = %job.key, id, due_ms, seen = %error, "sensor not met; checks again without a slot");
                self.open.effects.push(Effect::Event(EngineEvent::Poked {
                    key: job.key.clone(),
                    id,
                    due_ms,
                    seen: error,
                }));
            }
            other => unreachable!("an attempt ends in Complete, Requeue or Poke, not {other:?}"),
        }
    }

    fn defer(&mut self, worker_id: Arc<str>, id: TicketId, attempt: u32, until_ms: u64) {
        self.awaiting_reports = self.awaiting_reports.saturating_sub(1);
        self.open
            .effects
            .push(Effect::Ack(worker_id, vec![(id, attempt)]));
        let Some(t) = self.q.ticket(id) else { return };
        if t.attempt != attempt || !matches!(t.place, Place::Running { .. }) {
            return;
        }
        let key = t.job.key.clone();
        // The attempt never ran: no failure is counted, so the retry policy
        // spends nothing. The attempt number stays (the next grant gets a
        // new one), so a late report of this grant is told from it.
        let _ = self.step(Op::Defer {
            id,
            due_ms: until_ms,
        });
        self.started.remove(&id);
        tracing::info!(key = %key, id, until_ms, "ticket deferred by its breaker");
        self.open
            .effects
            .push(Effect::Event(EngineEvent::Deferred { key, id, until_ms }));
    }

    fn holding(&mut self, worker_id: &Arc<str>, held: Vec<TicketId>) {
        let held: HashSet<TicketId> = held.into_iter().collect();
        let lost: Vec<TicketId> = self
            .q
            .tickets()
            .filter(|t| {
                matches!(&t.place, Place::Running { worker, .. } if worker == worker_id)
                    && !held.contains(&t.id)
                    // Granted by this incarnation: the worker may not have
                    // had it yet when it listed what it holds.
                    && !self.started.contains_key(&t.id)
            })
            .map(|t| t.id)
            .collect();
        if lost.is_empty() {
            return;
        }
        tracing::warn!(worker = %worker_id, lost = lost.len(), "grants lost with a queue incarnation; tickets pending again");
        let now = self.clock.now_ms();
        for id in lost {
            let _ = self.step(Op::Defer { id, due_ms: now });
            self.started.remove(&id);
        }
    }

    fn worker_gone(&mut self, worker_id: &Arc<str>) {
        if let Some(w) = self.workers.remove(worker_id) {
            if let Some(list) = self.by_pool.get_mut(&w.pool) {
                list.retain(|x| x != worker_id);
            }
        }
        let now = self.clock.now_ms();
        let theirs: Vec<(TicketId, u32)> = self
            .q
            .tickets()
            .filter(|t| matches!(&t.place, Place::Running { worker, .. } if worker == worker_id))
            .map(|t| (t.id, t.attempt))
            .collect();
        tracing::warn!(worker = %worker_id, running = theirs.len(), "worker gone; requeueing its attempts");
        // Their reports will never come: stop waiting for them.
        self.awaiting_reports = self.awaiting_reports.saturating_sub(theirs.len());
        for (id, attempt) in theirs {
            let draw = rand::Rng::gen(&mut self.rng);
            if let Some((op, plan)) =
                self.q
                    .after_attempt(id, attempt, AttemptOutcome::Retryable, now, draw)
            {
                self.apply_attempt_end(
                    op,
                    plan,
                    None,
                    format!("worker {worker_id} died during the attempt"),
                    now,
                    None,
                );
            }
        }
    }

    fn expire_leases(&mut self) {
        let now = self.clock.now_ms();
        for id in self.q.expired_leases(now) {
            let Some(t) = self.q.ticket(id) else { continue };
            let (attempt, worker) = match &t.place {
                Place::Running { worker, .. } => (t.attempt, worker.clone()),
                Place::Pending { .. } => continue,
            };
            let draw = rand::Rng::gen(&mut self.rng);
            if let Some((op, plan)) =
                self.q
                    .after_attempt(id, attempt, AttemptOutcome::Timeout, now, draw)
            {
                tracing::warn!(id, attempt, worker = %worker, "lease expired");
                self.open.effects.push(Effect::CancelRunning(worker, id));
                self.apply_attempt_end(
                    op,
                    plan,
                    None,
                    "the attempt's lease expired".into(),
                    now,
                    None,
                );
            }
        }
    }

    /// Starts making the open batch durable, unless a batch is in flight.
    fn start_flush(&mut self, myself: &ActorRef<QueueMsg>) {
        if self.in_flight.is_some() || self.open.is_empty() {
            return;
        }
        // Linger: hold the open batch while reports of the tickets just
        // handed out are still due, up to the linger's end or the batch cap.
        if let Some(until) = self.linger_until {
            let waiting = self.awaiting_reports > 0
                && self.open.commit.ops.len() < self.settings.batch_ops_linger_max
                && tokio::time::Instant::now() < until;
            if waiting {
                return;
            }
            self.linger_until = None;
        }
        // Hold it while schedulers told early of successes in it have not
        // answered, up to the wait's end or the batch cap: their answers
        // enqueue the downstreams into it.
        if !self.awaiting_successors.is_empty() {
            if let Some(until) = self.successors_until {
                let now = tokio::time::Instant::now();
                if now < until && self.open.commit.ops.len() < self.settings.batch_ops_linger_max {
                    if !self.successors_timer {
                        self.successors_timer = true;
                        myself.send_after(until - now, || QueueMsg::FlushNow);
                    }
                    return;
                }
            }
        }
        // Answers that come after this point enqueue into the next batch.
        self.awaiting_successors.clear();
        self.successors_until = None;
        let batch = std::mem::take(&mut self.open);
        self.shared.begin(&batch.effects);
        self.in_flight = Some(batch.effects);
        self.in_flight_completing = std::mem::take(&mut self.open_completing);
        let store = self.store.clone();
        let me = myself.clone();
        let commit = batch.commit;
        // Taken here, not in the task, so that a kill after this handler
        // cannot let the next incarnation replay before this write lands.
        // Nothing else of this incarnation writes while a batch is in
        // flight, and pre_start waited for the earlier ones.
        let gate = self
            .shared
            .gate
            .clone()
            .try_lock_owned()
            .expect("no other journal write runs while a batch is in flight");
        let shared = self.shared.clone();
        tokio::spawn(async move {
            let result = tokio::task::spawn_blocking(move || {
                let t0 = std::time::Instant::now();
                let written = store.commit(&commit).map(|_| ());
                crate::measure::commit(commit.ops.len(), t0.elapsed());
                if written.is_ok() {
                    shared.landed();
                }
                drop(gate);
                written
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
            let _ = me.cast(QueueMsg::Flushed(result));
        });
    }

    /// Makes the open batch durable now, waiting for it (and for any batch
    /// in flight first, so order holds).
    async fn flush_inline(&mut self) -> Result<(), ActorProcessingErr> {
        // Called only with no batch in flight, so effects run in batch order.
        debug_assert!(
            self.in_flight.is_none(),
            "inline flush with a batch in flight"
        );
        let batch = std::mem::take(&mut self.open);
        let completing = std::mem::take(&mut self.open_completing);
        let store = self.store.clone();
        let commit = batch.commit;
        let gate = self.shared.gate.clone().lock_owned().await;
        self.shared.begin(&batch.effects);
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || {
            let t0 = std::time::Instant::now();
            let written = store.commit(&commit);
            crate::measure::commit(commit.ops.len(), t0.elapsed());
            if written.is_ok() {
                shared.landed();
            }
            drop(gate);
            written
        })
        .await??;
        self.batches += 1;
        self.publish_counts();
        self.run_effects(batch.effects);
        self.shared.finish();
        for key in completing {
            self.done_completing(&key);
        }
        self.publish_counts();
        Ok(())
    }

    async fn snapshot(&mut self) -> Result<(), ActorProcessingErr> {
        let seq = self.store.last_seq();
        let changed: Vec<(TicketId, Option<weir_core::queue::Ticket>)> = self
            .dirty
            .drain()
            .map(|id| (id, self.q.ticket(id).cloned()))
            .collect();
        let next_id = self.q.next_id();
        let tickets = self.q.len() as u64;
        let store = self.store.clone();
        let n = changed.len();
        let gate = self.shared.gate.clone().lock_owned().await;
        tokio::task::spawn_blocking(move || {
            let written = store.write_snapshot(
                seq,
                next_id,
                tickets,
                changed.iter().map(|(id, t)| (*id, t.as_ref())),
            );
            drop(gate);
            written
        })
        .await??;
        self.q.snapshot_taken();
        // The store holds every ticket as it is now: the pending ones past
        // each level's window may live there only.
        let window = self.store.settings().window_tickets;
        let evicted = self.q.evict(window);
        if evicted > 0 {
            let cold = StoreCold::new(&self.store);
            if let Err(e) = self.q.refill(&cold, window) {
                cold_failed(&e);
            }
        }
        tracing::info!(seq, changed = n, tickets, evicted, "queue snapshot written");
        Ok(())
    }

    fn run_effects(&mut self, effects: Vec<Effect>) {
        let mut acks: HashMap<Arc<str>, Vec<(TicketId, u32)>> = HashMap::new();
        for effect in effects {
            match effect {
                Effect::Enqueued(reply, answers) => {
                    let _ = reply.send(answers);
                }
                Effect::Cancelled(reply, answer) => {
                    let _ = reply.send(answer);
                }
                Effect::TicketView(key, reply) => match self.ticket_view(&key) {
                    Ok(view) => {
                        let _ = reply.send(view);
                    }
                    // The caller's call fails: no answer is better than a
                    // wrong "unknown".
                    Err(e) => tracing::error!(key = %key, error = %e, "ticket view failed"),
                },
                Effect::CancelledMany(reply, answers) => {
                    let _ = reply.send(answers);
                }
                Effect::Withdrawn(reply, answers) => {
                    let _ = reply.send(Ok(answers));
                }
                Effect::RequeuedDead(reply, answer) => {
                    let _ = reply.send(answer);
                }
                Effect::Unexpire(entries) => {
                    // The records are gone (deleted by the batch that just
                    // landed) and no later batch can have written them yet,
                    // so this removes only the stale entries. Not synced: a
                    // crash keeps them, and they delete the next records of
                    // the key early, which loses nothing live.
                    let key = &entries[0].key;
                    if let Err(e) =
                        self.store
                            .compare_and_put_unsynced(key, None, None, &[], &entries)
                    {
                        tracing::warn!(key = %key, error = %e, "stale expiry entries not removed");
                    }
                }
                Effect::Dispatch(worker, grant) => {
                    if worker.cast(PoolMsg::Run(grant)).is_ok() {
                        self.awaiting_reports += 1;
                    }
                }
                Effect::Ack(worker, ids) => acks.entry(worker).or_default().extend(ids),
                Effect::CancelRunning(worker, id) => {
                    if let Some(w) = self.workers.get(&worker) {
                        let _ = w.actor.cast(PoolMsg::Cancel(id));
                    }
                }
                Effect::Notify(name, completion) => {
                    notify::completion(&self.names, &name, completion)
                }
                Effect::Presubmitted(name, key, answers) => {
                    notify::presubmitted(&self.names, &name, key, answers)
                }
                Effect::Event(e) => {
                    let _ = self.events.send(e);
                }
            }
        }
        for (worker, ids) in acks {
            if let Some(w) = self.workers.get(&worker) {
                let _ = w.actor.cast(PoolMsg::Acked(ids));
            }
        }
    }

    /// Arms the timer for the earliest due instant of a pool with credit or
    /// the earliest lease end.
    fn rearm(&mut self, myself: &ActorRef<QueueMsg>) {
        if self.settings.warm_ahead_ms > 0 {
            let now = self.clock.now_ms();
            let until = now.saturating_add(self.settings.warm_ahead_ms);
            match self.q.warm(
                &StoreCold::new(&self.store),
                now,
                until,
                self.store.settings().window_tickets,
                self.settings.warm_tickets_max,
            ) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::debug!(tickets = n, until_ms = until, "tickets due soon read ahead")
                }
                Err(e) => cold_failed(&e),
            }
        }
        let mut wake: Option<u64> = self.q.next_lease_end_ms();
        if !self.paused {
            for (pool, list) in &self.by_pool {
                if !list
                    .iter()
                    .any(|w| self.workers.get(w).is_some_and(|w| w.credit > 0))
                {
                    continue;
                }
                if let Some(due) = self.q.next_due_ms(pool) {
                    wake = Some(wake.map_or(due, |w| w.min(due)));
                }
            }
        }
        match wake {
            None => {
                if let Some((_, t)) = self.timer.take() {
                    t.abort();
                }
            }
            Some(at) => {
                if self.timer.as_ref().is_some_and(|(t, _)| *t == at) {
                    return;
                }
                if let Some((_, t)) = self.timer.take() {
                    t.abort();
                }
                let now = self.clock.now_ms();
                let delay = Duration::from_millis(at.saturating_sub(now).max(1));
                let handle = myself.send_after(delay, || QueueMsg::Tick);
                self.timer = Some((at, handle));
            }
        }
    }

    fn publish_counts(&self) {
        // A ticket whose Complete or Cancel is applied in memory but not yet
        // durable still counts as live: a waiter that sees `live == 0` must
        // find every done record readable.
        let completing: usize = self.completing.values().map(|&n| n as usize).sum();
        self.counts.send_replace(QueueCounts {
            live: self.q.len() + completing,
            running: self.q.running_len(),
            batches: self.batches,
        });
    }

    fn status(&self) -> QueueStatus {
        let now = self.clock.now_ms();
        let mut pools: BTreeMap<String, PoolStatus> = BTreeMap::new();
        for t in self.q.tickets() {
            let p = pools.entry(t.job.pool.to_string()).or_default();
            match t.place {
                Place::Pending { due_ms } => {
                    p.pending += 1;
                    if due_ms <= now {
                        p.due += 1;
                    }
                }
                Place::Running { .. } => p.running += 1,
            }
        }
        // Tickets kept in the store: counted by level; the due ones among
        // them by a walk of the index from each level's window on (keys
        // only), which stops at the first not due.
        if self.q.cold_len() > 0 {
            let cold = StoreCold::new(&self.store);
            for (pool, priority, level) in self.q.cold_levels() {
                let p = pools.entry(pool.to_string()).or_default();
                p.pending += level.remaining as usize;
                let mut after = level.bound;
                'walk: loop {
                    let Ok(entries) =
                        weir_core::cold::ColdTickets::scan(&cold, pool, priority, after, 4_096)
                    else {
                        break;
                    };
                    let Some(&last) = entries.last() else { break };
                    for (due_ms, id) in entries {
                        if due_ms > now {
                            break 'walk;
                        }
                        if self.q.ticket(id).is_none() && !self.q.is_gone(id) {
                            p.due += 1;
                        }
                    }
                    after = Some(last);
                }
            }
        }
        for w in self.workers.values() {
            let p = pools.entry(w.pool.to_string()).or_default();
            p.workers += 1;
            p.credit += w.credit;
        }
        QueueStatus {
            pools,
            live: self.q.len(),
            running: self.q.running_len(),
            in_memory: self.q.hot_len(),
            last_seq: self.store.last_seq(),
        }
    }

    fn ticket_view(&mut self, key: &str) -> Result<Option<TicketView>, ActorProcessingErr> {
        self.fault_in_key(key);
        if let Some(t) = self.q.by_key(key) {
            let (running, at_ms) = match t.place {
                Place::Pending { due_ms } => (false, due_ms),
                Place::Running { lease_until_ms, .. } => (true, lease_until_ms),
            };
            return Ok(Some(TicketView::Live {
                id: t.id,
                running,
                attempts: t.attempts(),
                deferrals: t.deferrals(),
                failures: t.tries.failures,
                at_ms,
            }));
        }
        Ok(self
            .store
            .get::<DoneRecord>(&done_key(key))?
            .map(TicketView::Done))
    }
}

impl QueueState_ {
    /// Live tickets matching `f`, by id (enqueue order), at most
    /// `f.limit`. It walks every live ticket: an operator's view, not a
    /// hot path.
    fn list(&self, f: &TicketFilter) -> Vec<LiveTicket> {
        let mut out: Vec<LiveTicket> = self
            .q
            .tickets()
            .filter(|t| f.pool.as_deref().is_none_or(|p| *t.job.pool == *p))
            .filter_map(|t| {
                let (running, at_ms) = match t.place {
                    Place::Pending { due_ms } => (false, due_ms),
                    Place::Running { lease_until_ms, .. } => (true, lease_until_ms),
                };
                f.running.is_none_or(|r| r == running).then(|| LiveTicket {
                    key: t.job.key.to_string(),
                    id: t.id,
                    pool: t.job.pool.to_string(),
                    task: t.job.task.to_string(),
                    target: t.job.target.as_deref().map(str::to_string),
                    running,
                    attempts: t.attempt,
                    failures: t.tries.failures,
                    at_ms,
                })
            })
            .collect();
        if self.q.cold_len() > 0 {
            // Pending tickets kept in the store, in id order, skipping
            // those in memory (their stored copy is stale) and those gone.
            let mut cold: Vec<LiveTicket> = Vec::new();
            let pending_wanted = f.running != Some(true);
            if pending_wanted {
                let result = self.store.for_each_stored_ticket(|t| {
                    if self.q.ticket(t.id).is_some() || self.q.is_gone(t.id) {
                        return Ok(true);
                    }
                    if f.pool.as_deref().is_none_or(|p| *t.job.pool == *p) {
                        let at_ms = match t.place {
                            Place::Pending { due_ms } => due_ms,
                            Place::Running { lease_until_ms, .. } => lease_until_ms,
                        };
                        cold.push(LiveTicket {
                            key: t.job.key.to_string(),
                            id: t.id,
                            pool: t.job.pool.to_string(),
                            task: t.job.task.to_string(),
                            target: t.job.target.as_deref().map(str::to_string),
                            running: false,
                            attempts: t.attempt,
                            failures: t.tries.failures,
                            at_ms,
                        });
                    }
                    Ok(cold.len() < f.limit)
                });
                if let Err(e) = result {
                    tracing::warn!(error = %e, "listing the tickets kept in the store failed");
                }
            }
            out.extend(cold);
        }
        out.sort_by_key(|t| t.id);
        out.truncate(f.limit);
        out
    }
}

/// A wait in words: `6h`, `90s`, `250ms`.
fn human_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    for (unit, name) in UNITS {
        if ms >= unit && ms.is_multiple_of(unit) {
            return format!("{}{name}", ms / unit);
        }
    }
    format!("{ms}ms")
}

/// A read of the tickets kept in the store failed: the queue cannot know
/// what it holds, so it stops; its restart reads the store again (and an
/// open that fails the same way refuses the store, naming what).
fn cold_failed(e: &weir_core::cold::ColdError<StoreError>) -> ! {
    tracing::error!(error = %e, "reading the tickets kept in the store failed");
    panic!("queue: {e}")
}
