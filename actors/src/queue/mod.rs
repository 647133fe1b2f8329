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

mod ahead;
mod commit;
mod dispatch;
mod done;
mod leases;
mod ops;
mod reports;
mod settings;
mod state;
mod views;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::watch;
use weir_core::queue::{Op, Place, TicketId};

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::notify;
use crate::store::{Recovered, Store};

// The queue's interface lives in `msg`; re-exported here for the crate's
// users (`weir_actors::queue::QueueMsg`, …).
pub use crate::msg::queue::{
    Cancelled, Completion, EarlyCompletion, Enqueued, LastCheck, LiveTicket, PoolStatus,
    QueueCounts, QueueMsg, QueueStatus, TicketFilter, TicketView,
};
pub use crate::msg::work::{Grant, Report};
pub use settings::QueueSettings;
use state::{Batch, Effect};
pub use state::{QueueActorState, QueueShared};

/// The registered name of the queue actor.
pub const QUEUE_NAME: &str = "weir.queue";

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
    pub events: EventSender,
    /// Published counts.
    pub counts: watch::Sender<QueueCounts>,
    /// What every incarnation shares (the supervisor keeps it).
    pub shared: Arc<QueueShared>,
    /// On a restart, the pool workers alive now: a running ticket of any
    /// other worker is requeued, since that worker's `WorkerGone` may have
    /// gone to the dead queue.
    pub workers: Vec<Arc<str>>,
}

impl Actor for QueueActor {
    type Msg = QueueMsg;
    type State = QueueActorState;
    type Arguments = QueueArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<QueueMsg>,
        args: QueueArgs,
    ) -> Result<QueueActorState, ActorProcessingErr> {
        let first_open = args.recovered.is_some();
        let recovered = match args.recovered {
            Some(r) => r,
            None => {
                // Wait for the writes of the incarnation before this one,
                // then send what it made durable and did not get to send.
                // A snapshot it was writing lands (or fails) first.
                drop(args.shared.snapshot_gate.clone().lock_owned().await);
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
                crate::blocking::run(move || {
                    let recovered = store.recover();
                    drop(gate);
                    recovered
                })
                .await??
            }
        };
        let args_store_changed: HashSet<TicketId> =
            args.store.changed_since_snapshot().into_iter().collect();
        let mut state = QueueActorState {
            names: args.names,
            store: args.store,
            clock: args.clock.clone(),
            settings: args.settings,
            events: args.events,
            counts: args.counts,
            shared: args.shared,
            q: recovered.state,
            // Tickets the replayed journal tail changed: the next snapshot
            // must write them, or removing the tail would lose them.
            dirty: args_store_changed,
            snapshot_writing: None,
            completing: HashMap::new(),
            workers: HashMap::new(),
            by_pool: BTreeMap::new(),
            started: HashMap::new(),
            starts_ahead: BTreeMap::new(),
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
            rng: args.clock.rng("queue"),
            last_checks: HashMap::new(),
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
            for (op, plan) in orphans {
                state.apply_attempt_end(
                    op,
                    plan,
                    None,
                    "the process running the attempt died".into(),
                    now,
                    None,
                );
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
        state: &mut QueueActorState,
    ) -> Result<(), ActorProcessingErr> {
        state.rearm(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<QueueMsg>,
        state: &mut QueueActorState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, t)) = state.timer.take() {
            t.abort();
        }
        // A graceful stop with everything durable leaves a snapshot, so the
        // next open replays no journal tail (up to `snapshot_ops` ops, each
        // an enqueue read into memory) before its first hand-out. Not after
        // a kill or a panic (ractor calls no `post_stop` then): the tail
        // is what recovery is for.
        let mut snapshot_safe = true;
        if let Some(writing) = state.snapshot_writing.take() {
            // Its answer will not be handled: wait for the write itself. If
            // it failed, the tickets it held are in no snapshot and in
            // `dirty` no more: a snapshot now would leave them out and drop
            // the journal ops that have them. The next open replays them.
            if !matches!(writing.handle.await, Ok(Ok(()))) {
                tracing::warn!("the snapshot being written failed: no snapshot at stop; the next open replays the journal tail");
                snapshot_safe = false;
            }
        }
        if snapshot_safe
            && state.in_flight.is_none()
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
        state: &mut QueueActorState,
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
                ahead,
            } => state.credit(worker, worker_id, pool, slots, ahead),
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
                cause,
            } => state.defer(worker_id, id, attempt, until_ms, cause),
            QueueMsg::WorkerGone { worker_id } => state.worker_gone(&worker_id),
            QueueMsg::Holding { worker_id, held } => state.holding(&worker_id, held),
            QueueMsg::Started { id, attempt } => {
                // Journaled with the next batch; nothing waits for it.
                let _ = state.step(Op::Start { id, attempt });
            }
            QueueMsg::Pause(paused) => {
                state.paused = paused;
                if paused {
                    state.call_back_ahead();
                }
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
                state.snapshot_if_due(&myself).await?;
                state.publish_counts();
            }
            QueueMsg::SnapshotWritten(result) => {
                state.snapshot_written(result)?;
                // What came while it was written may be due already: the
                // next one starts now, not at the next batch's end (there
                // may be none for a while, and until a snapshot covers
                // them the tickets changed meanwhile stay in memory).
                state.snapshot_if_due(&myself).await?;
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
