//! The pool actor: N slots that bound how many attempts of a pool run at
//! once in this worker.
//!
//! It grants its free slots to the queue as credit and runs each ticket it
//! is handed on its own tokio task, with the node's timeout and a
//! cancellation token. A ticket with a target asks the target's breaker
//! first: a denied ticket goes back to the queue as a Defer (no attempt
//! spent, no slot held). Outcomes go to the breaker and to the queue; a
//! report stays in `unacked` until the queue acknowledges it, and is sent
//! again when the queue restarts, so a queue crash loses no outcome. A
//! Defer is kept the same way: a lost one would leave its ticket running,
//! on a live worker, until its lease ran out.
//! An output over the store's inline threshold is written to a blob
//! (durable, pinned until the report is acknowledged) before it is
//! reported, and a graph node's upstream outputs are read back from their
//! blobs before its attempt starts.
//! Several pool actors may serve one pool name; each adds its slots.
//! Invariants: slots in use never exceed capacity (except after a shrink,
//! until enough attempts end), outstanding credit never exceeds free slots.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio_util::sync::CancellationToken;
use weir_core::pool::PoolUnits;
use weir_core::queue::TicketId;
use weir_core::retry::AttemptOutcome;

use crate::attempt::breakers::Breakers;
use crate::attempt::ended::{Ended, EndedInbox};
use crate::attempt::outputs::{keep_output, resolve_upstreams};
use crate::clock::Clock;
use crate::due_starts::DueStarts;
use crate::msg::cluster::LinkMsg;
use crate::names::Names;
// The pool's interface lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::pool::PoolMsg;
use crate::msg::queue::QueueMsg;
use crate::msg::supervisor::SupervisorMsg;
use crate::msg::work::{DeferCause, Grant, Report};
pub use crate::msg::work::{PoolUp, PoolView};
use crate::store::{BlobRef, Store};
use crate::task::{ArtifactSlot, TaskContext, TaskError, TaskRegistry};

/// An attempt running this long is marked started in the queue's journal
/// (the ticket's `started`). A crash costs the attempt whether or not it
/// was marked (the hand-out was durable; see weir-core's `orphans`): the
/// mark only records that the task ran. Attempts that end sooner are
/// never marked, so fast tasks journal nothing more.
pub const START_MARK_AFTER_MS: u64 = 50;
/// The pool actor.
pub struct PoolActor;

/// What it needs to start.
pub struct PoolArgs {
    /// The pool it serves.
    pub pool: Arc<str>,
    /// Its id, unique per incarnation.
    pub worker_id: Arc<str>,
    /// Slots.
    pub capacity: u32,
    /// The tasks it can run.
    pub tasks: TaskRegistry,
    /// Where it reports, and what it asks before an attempt.
    pub uplink: Uplink,
    /// The clock.
    pub clock: Clock,
    /// The largest output kept; longer outputs are cut (the queue's
    /// `output_bytes_max`).
    pub output_bytes_max: usize,
}

/// Where a pool actor reports, and what it may use of the engine.
#[derive(Clone)]
pub enum Uplink {
    /// In the engine's process: the queue found by name, breakers asked
    /// before each attempt, outputs over [`BLOB_INLINE_BYTES_MAX`] written
    /// to the store's blobs before they are reported, and upstream outputs
    /// read back from them before an attempt starts.
    Local {
        /// Engine names (to find the queue and breakers).
        names: Names,
        /// The supervisor, which spawns breakers on demand.
        supervisor: Option<ActorRef<SupervisorMsg>>,
        /// The store.
        store: Store,
    },
    /// In a worker process: everything goes to the engine through the
    /// worker's link. The engine's proxy of this pool asked the breaker
    /// before it handed the ticket over, resolved the upstream outputs into
    /// it, and keeps the output; this actor only runs attempts.
    Remote {
        /// The worker's link.
        link: ActorRef<LinkMsg>,
    },
}

/// A message to the queue kept until the queue acknowledges it.
#[derive(Clone)]
enum Unacked {
    /// An attempt's outcome.
    Report(Report),
    /// A ticket given back without running.
    Defer {
        /// When it may run.
        until_ms: u64,
        /// Why.
        cause: DeferCause,
    },
}

struct Running {
    attempt: u32,
    cancel: CancellationToken,
    target: Option<Arc<str>>,
    started_ms: u64,
    /// Whether the queue was told the attempt started.
    marked: bool,
}

/// Its state.
pub struct PoolState {
    me: ActorRef<PoolMsg>,
    /// Whether a [`PoolMsg::MarkStarted`] timer is armed.
    mark_armed: bool,
    pool: Arc<str>,
    worker_id: Arc<str>,
    units: PoolUnits,
    peak_in_use: u32,
    /// Credit granted to the queue and not yet used by a grant.
    outstanding: u32,
    running: HashMap<TicketId, Running>,
    unacked: BTreeMap<(TicketId, u32), Unacked>,
    tasks: TaskRegistry,
    uplink: Uplink,
    clock: Clock,
    /// The breakers asked before attempts (a local pool's only).
    breakers: Option<Breakers>,
    output_bytes_max: usize,
    /// Blobs of reports not yet acknowledged: pinned until the queue says
    /// the record naming them is durable (or that it dropped the report).
    pinned: HashMap<(TicketId, u32), BlobRef>,
    /// Grants handed out ahead, waiting for their instants: an ended
    /// attempt is handled after the ones that are due have started.
    due: DueStarts,
    /// Where its attempts' tasks leave their outcomes.
    inbox: EndedInbox,
}

/// A pool actor that panics skips `post_stop`: its state is dropped all
/// the same, and its attempts stop with it (the queue requeues them), above
/// all a grant still waiting for its instant, which the queue gives back
/// as never started.
impl Drop for PoolState {
    fn drop(&mut self) {
        for r in self.running.values() {
            r.cancel.cancel();
        }
    }
}

impl Actor for PoolActor {
    type Msg = PoolMsg;
    type State = PoolState;
    type Arguments = PoolArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<PoolMsg>,
        args: PoolArgs,
    ) -> Result<PoolState, ActorProcessingErr> {
        tracing::info!(pool = %args.pool, worker = %args.worker_id, capacity = args.capacity, "pool worker started");
        Ok(PoolState {
            me: myself,
            mark_armed: false,
            pool: args.pool,
            worker_id: args.worker_id,
            units: PoolUnits::new(args.capacity),
            peak_in_use: 0,
            outstanding: 0,
            running: HashMap::new(),
            unacked: BTreeMap::new(),
            tasks: args.tasks,
            breakers: match &args.uplink {
                Uplink::Local {
                    names, supervisor, ..
                } => Some(Breakers::new(names.clone(), supervisor.clone())),
                Uplink::Remote { .. } => None,
            },
            uplink: args.uplink,
            clock: args.clock,
            output_bytes_max: args.output_bytes_max,
            pinned: HashMap::new(),
            due: DueStarts::default(),
            inbox: EndedInbox::default(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<PoolMsg>,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        state.grant_credit(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<PoolMsg>,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        // Attempts of a stopped worker are requeued by the queue; stop them
        // so they do not run on unobserved.
        for r in state.running.values() {
            r.cancel.cancel();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<PoolMsg>,
        msg: PoolMsg,
        state: &mut PoolState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PoolMsg::Run(grant) => state.run(&myself, grant).await,
            PoolMsg::RunMany(grants) => {
                for grant in grants {
                    state.run(&myself, grant).await;
                }
            }
            PoolMsg::Ended => {
                state.due.yield_to_overdue(&state.clock).await;
                for e in state.inbox.take() {
                    state.ended(e);
                }
            }
            PoolMsg::Cancel(id) => {
                if let Some(r) = state.running.get(&id) {
                    tracing::info!(id, attempt = r.attempt, "cancelling running attempt");
                    r.cancel.cancel();
                }
            }
            PoolMsg::Acked(ids) => {
                for k in ids {
                    state.unacked.remove(&k);
                    if let Some(blob) = state.pinned.remove(&k) {
                        state.unpin(&blob);
                    }
                }
            }
            PoolMsg::QueueRestarted => state.reregister(),
            PoolMsg::MarkStarted => state.mark_started(),
            PoolMsg::Reset => state.reset(),
            PoolMsg::Resize(capacity) => {
                let before = state.units.capacity();
                state.units.resize(capacity);
                if capacity < before {
                    let free = state.units.free();
                    if state.outstanding > free {
                        let revoke = state.outstanding - free;
                        state.outstanding = free;
                        state.send_up(PoolUp::Revoke { slots: revoke });
                    }
                }
                tracing::info!(pool = %state.pool, worker = %state.worker_id, capacity, "pool resized");
            }
            PoolMsg::Panic => panic!("pool {}: fault injected by a test", state.pool),
            PoolMsg::Remote(_) => {
                tracing::warn!(pool = %state.pool, "a remote pool's message reached a pool actor; dropped");
            }
            PoolMsg::Status(reply) => {
                let _ = reply.send(PoolView {
                    pool: state.pool.to_string(),
                    worker_id: state.worker_id.to_string(),
                    capacity: state.units.capacity(),
                    in_use: state.units.in_use(),
                    peak_in_use: state.peak_in_use,
                    unacked: state.unacked.len(),
                });
            }
        }
        state.grant_credit(&myself);
        Ok(())
    }
}

impl PoolState {
    /// Tells the queue (a local pool) or the engine (a remote one).
    fn send_up(&self, up: PoolUp) {
        match &self.uplink {
            Uplink::Local { names, .. } => {
                let worker_id = self.worker_id.clone();
                let msg = match up {
                    PoolUp::Credit { slots } => QueueMsg::Credit {
                        worker: self.me.clone(),
                        worker_id,
                        pool: self.pool.clone(),
                        slots,
                        ahead: true,
                    },
                    PoolUp::Revoke { slots } => QueueMsg::Revoke { worker_id, slots },
                    PoolUp::Report(r) => QueueMsg::Report(r),
                    PoolUp::Defer {
                        id,
                        attempt,
                        until_ms,
                        cause,
                    } => QueueMsg::Defer {
                        worker_id,
                        id,
                        attempt,
                        until_ms,
                        cause,
                    },
                    PoolUp::Holding { held } => QueueMsg::Holding { worker_id, held },
                    PoolUp::Started { id, attempt } => QueueMsg::Started { id, attempt },
                };
                match ActorRef::<QueueMsg>::where_is(names.queue()) {
                    Some(q) => {
                        let _ = q.cast(msg);
                    }
                    None => {
                        tracing::debug!(worker = %self.worker_id, "queue not running; message kept for its restart")
                    }
                }
            }
            Uplink::Remote { link } => {
                let _ = link.cast(LinkMsg::FromPool {
                    pool: self.pool.clone(),
                    up,
                });
            }
        }
    }

    fn unpin(&self, blob: &BlobRef) {
        if let Uplink::Local { store, .. } = &self.uplink {
            store.unpin_blob(blob);
        }
    }

    /// The queue (or, for a remote pool, the engine) restarted: register
    /// again before resending, even with no free slot: the queue
    /// acknowledges only workers it knows, so reports sent before a Credit
    /// would stay unacked. What this worker holds goes first: a running
    /// ticket the queue thinks is here but is not was granted by a batch
    /// whose effects died with the old queue.
    fn reregister(&mut self) {
        let mut held: Vec<TicketId> = self.running.keys().copied().collect();
        held.extend(self.unacked.keys().map(|(id, _)| *id));
        self.send_up(PoolUp::Holding { held });
        self.outstanding = self.units.free();
        self.send_up(PoolUp::Credit {
            slots: self.outstanding,
        });
        let resend: Vec<((TicketId, u32), Unacked)> =
            self.unacked.iter().map(|(k, u)| (*k, u.clone())).collect();
        // Every join (a worker's first too) and every queue restart lands
        // here: the message says what happens, not why.
        tracing::info!(worker = %self.worker_id, resent = resend.len(), "registering with the queue: what this pool holds, its free slots, unacknowledged reports");
        for ((id, attempt), u) in resend {
            match u {
                Unacked::Report(r) => self.send_up(PoolUp::Report(r)),
                Unacked::Defer { until_ms, cause } => self.send_up(PoolUp::Defer {
                    id,
                    attempt,
                    until_ms,
                    cause,
                }),
            }
        }
    }

    /// The engine requeued everything this (remote) pool held: its running
    /// attempts are superseded and are cancelled; its unacknowledged
    /// reports are still resent once it registers again, and the engine
    /// refuses them as superseded. Credit starts over.
    fn reset(&mut self) {
        for (id, r) in &self.running {
            tracing::info!(id, attempt = r.attempt, worker = %self.worker_id, "cancelling a superseded attempt");
            r.cancel.cancel();
        }
        self.outstanding = 0;
    }

    /// Arms the timer of [`PoolMsg::MarkStarted`] for the attempt that
    /// reaches [`START_MARK_AFTER_MS`] first, unless one is armed. A timer
    /// only while attempts run: an idle pool arms none (paused-time tests
    /// jump straight to their next instant).
    fn arm_mark(&mut self) {
        if self.mark_armed {
            return;
        }
        let now = self.clock.now_ms();
        let Some(first) = self
            .running
            .values()
            .filter(|r| !r.marked)
            .map(|r| r.started_ms + START_MARK_AFTER_MS)
            .min()
        else {
            return;
        };
        self.mark_armed = true;
        self.me.send_after(
            Duration::from_millis(first.saturating_sub(now).max(1)),
            || PoolMsg::MarkStarted,
        );
    }

    /// Tells the queue which attempts have run for [`START_MARK_AFTER_MS`].
    fn mark_started(&mut self) {
        self.mark_armed = false;
        let now = self.clock.now_ms();
        let due: Vec<(TicketId, u32)> = self
            .running
            .iter_mut()
            .filter(|(_, r)| !r.marked && now.saturating_sub(r.started_ms) >= START_MARK_AFTER_MS)
            .map(|(id, r)| {
                r.marked = true;
                (*id, r.attempt)
            })
            .collect();
        for (id, attempt) in due {
            self.send_up(PoolUp::Started { id, attempt });
        }
        self.arm_mark();
    }

    /// Grants the queue the free slots not yet granted.
    fn grant_credit(&mut self, _myself: &ActorRef<PoolMsg>) {
        let free = self.units.free();
        if free > self.outstanding {
            let slots = free - self.outstanding;
            self.outstanding += slots;
            self.send_up(PoolUp::Credit { slots });
        }
    }

    fn defer(&mut self, id: TicketId, attempt: u32, until_ms: u64, cause: DeferCause) {
        self.unacked
            .insert((id, attempt), Unacked::Defer { until_ms, cause });
        self.send_up(PoolUp::Defer {
            id,
            attempt,
            until_ms,
            cause,
        });
    }

    async fn run(&mut self, myself: &ActorRef<PoolMsg>, grant: Grant) {
        self.outstanding = self.outstanding.saturating_sub(1);
        let Grant {
            id,
            attempt,
            job,
            task_attempt,
            not_before_ms,
            ..
        } = grant;
        if self.units.reserve(1) == 0 {
            // Shrunk since the credit was granted: give the ticket back
            // without spending an attempt.
            let now = self.clock.now_ms();
            tracing::info!(id, attempt, worker = %self.worker_id, "a grant with no free slot given back");
            self.defer(id, attempt, now, DeferCause::NoSlot);
            return;
        }
        self.peak_in_use = self.peak_in_use.max(self.units.in_use());
        if let (Some(target), Some(breakers)) = (&job.target, self.breakers.as_mut()) {
            let now = self.clock.now_ms();
            if let Some(until_ms) = breakers.admit(target, id, now).await {
                let _ = self.units.release(1);
                self.defer(id, attempt, until_ms, DeferCause::Breaker);
                return;
            }
        }
        let cancel = CancellationToken::new();
        // A grant handed out ahead starts at its instant.
        let now_ms = self.clock.now_ms();
        let started_ms = now_ms.max(not_before_ms.unwrap_or(0));
        self.running.insert(
            id,
            Running {
                attempt,
                cancel: cancel.clone(),
                target: job.target.clone(),
                started_ms,
                marked: false,
            },
        );
        self.arm_mark();
        let task = self.tasks.find(&job.task);
        let ctx = TaskContext {
            key: job.key.clone(),
            ticket: id,
            // The attempt as users count it; the hand-out number keys the
            // report.
            attempt: if task_attempt > 0 {
                task_attempt
            } else {
                attempt
            },
            task: job.task.clone(),
            payload: Arc::from(job.payload),
            cancel: cancel.clone(),
            artifacts: ArtifactSlot::default(),
        };
        let artifacts = ctx.artifacts.clone();
        let timeout_ms = job.timeout_ms;
        let me = myself.clone();
        let store = match &self.uplink {
            Uplink::Local { store, .. } => Some(store.clone()),
            Uplink::Remote { .. } => None,
        };
        let output_bytes_max = self.output_bytes_max;
        let graph_node = job.notify.is_some();
        let clock = self.clock.clone();
        let inbox = self.inbox.clone();
        // Counted from the hand-out, so that a start whose upstream outputs
        // are still being read is waited for too.
        let waiting = (started_ms > now_ms).then(|| self.due.wait_for(started_ms));
        tokio::spawn(async move {
            let mut ctx = ctx;
            let resolved = match &store {
                Some(store) if graph_node => resolve_upstreams(store, ctx.payload.clone()).await,
                _ => Ok(None),
            };
            let task = match resolved {
                Ok(Some(payload)) => {
                    ctx.payload = Arc::from(payload);
                    task
                }
                Ok(None) => task,
                Err(e) => {
                    inbox.push(
                        Ended::unrun(id, attempt, AttemptOutcome::Permanent, e, started_ms),
                        &me,
                    );
                    return;
                }
            };
            // Handed out ahead: the slot is held and the upstream outputs
            // read; the task waits for its instant (a cancel in between
            // ends the grant unstarted).
            let wait_ms = started_ms.saturating_sub(clock.now_ms());
            if wait_ms > 0 {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(wait_ms)) => {}
                    () = cancel.cancelled() => {
                        inbox.push(
                            Ended::unrun(
                                id,
                                attempt,
                                AttemptOutcome::Retryable,
                                "cancelled before its instant".to_string(),
                                started_ms,
                            ),
                            &me,
                        );
                        return;
                    }
                }
            }
            drop(waiting);
            let mut retry_after_ms = None;
            let (outcome, output, error) = match task {
                None => (
                    AttemptOutcome::Permanent,
                    Vec::new(),
                    Some(format!(
                        "no task is registered under the name {:?}",
                        ctx.task
                    )),
                ),
                Some(task) => {
                    let run = std::panic::AssertUnwindSafe(task.run(ctx)).catch_unwind();
                    let timed = async {
                        match timeout_ms {
                            Some(ms) => tokio::time::timeout(Duration::from_millis(ms), run)
                                .await
                                .ok(),
                            None => Some(run.await),
                        }
                    };
                    tokio::select! {
                        r = timed => match r {
                            None => {
                                cancel.cancel();
                                (AttemptOutcome::Timeout, Vec::new(), Some(format!("timed out after {} ms", timeout_ms.unwrap_or(0))))
                            }
                            Some(Err(_panic)) => (AttemptOutcome::Retryable, Vec::new(), Some("the task panicked".to_string())),
                            Some(Ok(Ok(out))) => (AttemptOutcome::Success, out, None),
                            Some(Ok(Err(TaskError::Retryable(e)))) => (AttemptOutcome::Retryable, Vec::new(), Some(e)),
                            Some(Ok(Err(TaskError::Permanent(e)))) => (AttemptOutcome::Permanent, Vec::new(), Some(e)),
                            Some(Ok(Err(TaskError::NotMet(e)))) => (AttemptOutcome::NotMet, Vec::new(), Some(e)),
                            Some(Ok(Err(TaskError::RetryAfter { message, after_ms }))) => {
                                retry_after_ms = Some(after_ms);
                                (AttemptOutcome::Retryable, Vec::new(), Some(message))
                            }
                        },
                        () = cancel.cancelled() => (AttemptOutcome::Retryable, Vec::new(), Some("cancelled".to_string())),
                    }
                }
            };
            let (outcome, output, output_blob, error) = match outcome {
                AttemptOutcome::Success => {
                    keep_output(store.as_ref(), output, output_bytes_max).await
                }
                _ => (outcome, output, None, error),
            };
            // Only a success's artifacts are recorded.
            let artifacts = match outcome {
                AttemptOutcome::Success => artifacts.take(),
                _ => Vec::new(),
            };
            inbox.push(
                Ended {
                    id,
                    attempt,
                    outcome,
                    output,
                    output_blob,
                    artifacts,
                    error,
                    retry_after_ms,
                    started_ms,
                },
                &me,
            );
        });
    }

    fn ended(&mut self, e: Ended) {
        let Ended {
            id,
            attempt,
            outcome,
            output,
            output_blob,
            artifacts,
            error,
            retry_after_ms,
            started_ms,
        } = e;
        let Some(running) = self.running.remove(&id) else {
            if let Some(blob) = &output_blob {
                self.unpin(blob);
            }
            return;
        };
        debug_assert_eq!(
            running.attempt, attempt,
            "one attempt of a ticket runs at a time here"
        );
        if let Err(e) = self.units.release(1) {
            // A bug: more attempts ended than started.
            panic!("pool {}: {e}", self.pool);
        }
        if let (Some(target), Some(breakers)) = (&running.target, &self.breakers) {
            breakers.record(target, outcome);
        }
        let mut report = Report {
            worker_id: self.worker_id.clone(),
            id,
            attempt,
            outcome,
            output,
            output_blob: output_blob.clone(),
            error,
            retry_after_ms,
            regrant: 0,
            started_ms,
            finished_ms: self.clock.now_ms(),
            artifacts,
        };
        if let Some(blob) = output_blob {
            self.pinned.insert((id, attempt), blob);
        }
        tracing::debug!(id, attempt, ?outcome, worker = %self.worker_id, "attempt ended");
        // Kept without the regrant: a resend follows a fresh registration.
        self.unacked
            .insert((id, attempt), Unacked::Report(report.clone()));
        // The freed slot goes back with the report, not in a Credit of its
        // own: one commit completes this ticket and selects the next.
        if self.units.free() > self.outstanding {
            self.outstanding += 1;
            report.regrant = 1;
        }
        self.send_up(PoolUp::Report(report));
    }
}
