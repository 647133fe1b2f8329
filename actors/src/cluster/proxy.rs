//! The proxy of a remote pool: in the engine, one per pool of a joined
//! worker, standing in for the worker's pool actor. The queue sees a pool
//! actor like any other (credit, grants, reports, acks); the proxy does the
//! engine-side half of an attempt and forwards the rest over the cluster.
//!
//! A grant: the target's breaker is asked first (denied: the ticket is
//! deferred, no attempt spent, and its credit granted again, since the
//! worker's slot was never used); the upstreams' outputs are read from the
//! engine's blobs into the grant; then it goes to the worker. A report: a
//! success whose output is over the inline threshold is written to a blob
//! (durable, pinned until the queue acknowledges the report) before the
//! report reaches the queue; the breaker is told the outcome. Reports and
//! defers stay in `unacked` until the queue acknowledges them, are resent
//! when the queue restarts, and each acknowledgement is passed on to the
//! worker so it can forget its copy.
//!
//! Credit: `granted` is what the worker granted and the queue has not used.
//! A `Holding` from the worker means it registers afresh (it reconnected or
//! rejoined): the credit the queue still holds for it is revoked first, and
//! the worker's own `Credit` follows.
//!
//! A proxy holds nothing durable: when it stops (its worker is lost or left,
//! or the proxy failed), the gateway tells the queue the proxy's worker id
//! is gone, and its running attempts are requeued.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use weir_core::queue::TicketId;
use weir_core::retry::AttemptOutcome;

use crate::attempt::breakers::Breakers;
use crate::attempt::outputs::{keep_output, resolve_upstreams};
use crate::clock::Clock;
use crate::msg::cluster::{FromWorker, LinkMsg};
use crate::msg::pool::PoolMsg;
use crate::msg::queue::QueueMsg;
use crate::msg::supervisor::SupervisorMsg;
use crate::msg::work::{DeferCause, Grant, PoolUp, PoolView, Report};
use crate::names::Names;
use crate::protocol::ToWorker;
use crate::store::{BlobRef, Store, BLOB_INLINE_BYTES_MAX};

/// The proxy actor.
pub struct ProxyActor;

/// What a proxy needs to start.
pub struct ProxyArgs {
    /// The worker's id.
    pub worker_id: String,
    /// The pool.
    pub pool: Arc<str>,
    /// Its worker id in the queue (one per proxy incarnation).
    pub queue_worker_id: Arc<str>,
    /// The worker's link.
    pub link: ActorRef<LinkMsg>,
    /// Engine names.
    pub names: Names,
    /// The supervisor (spawns breakers).
    pub supervisor: Option<ActorRef<SupervisorMsg>>,
    /// The store (blobs).
    pub store: Store,
    /// The clock.
    pub clock: Clock,
    /// The largest output kept.
    pub output_bytes_max: usize,
    /// The worker's slots in this pool.
    pub slots: u32,
}

#[derive(Clone)]
enum Unacked {
    Report(Report),
    Defer { until_ms: u64, cause: DeferCause },
}

/// A proxy's state.
pub struct ProxyState {
    me: ActorRef<PoolMsg>,
    worker_id: String,
    pool: Arc<str>,
    queue_worker_id: Arc<str>,
    link: ActorRef<LinkMsg>,
    names: Names,
    store: Store,
    clock: Clock,
    output_bytes_max: usize,
    slots: u32,
    breakers: Breakers,
    /// Credit the worker granted that the queue has not used.
    granted: u32,
    /// Grants passed to the worker, not reported yet: (attempt, target).
    running: HashMap<TicketId, (u32, Option<Arc<str>>)>,
    unacked: BTreeMap<(TicketId, u32), Unacked>,
    pinned: HashMap<(TicketId, u32), BlobRef>,
    /// Messages for the worker not sent yet.
    outbox: Vec<ToWorker>,
}

impl Actor for ProxyActor {
    type Msg = PoolMsg;
    type State = ProxyState;
    type Arguments = ProxyArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<PoolMsg>,
        args: ProxyArgs,
    ) -> Result<ProxyState, ActorProcessingErr> {
        tracing::info!(worker = %args.worker_id, pool = %args.pool, queue_worker = %args.queue_worker_id, slots = args.slots, "remote pool joined");
        Ok(ProxyState {
            me: myself,
            breakers: Breakers::new(args.names.clone(), args.supervisor),
            worker_id: args.worker_id,
            pool: args.pool,
            queue_worker_id: args.queue_worker_id,
            link: args.link,
            names: args.names,
            store: args.store,
            clock: args.clock,
            output_bytes_max: args.output_bytes_max,
            slots: args.slots,
            granted: 0,
            running: HashMap::new(),
            unacked: BTreeMap::new(),
            pinned: HashMap::new(),
            outbox: Vec::new(),
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<PoolMsg>,
        state: &mut ProxyState,
    ) -> Result<(), ActorProcessingErr> {
        // Pins of reports the queue never acknowledged: the next open's
        // sweep removes blobs no record names.
        for blob in state.pinned.values() {
            state.store.unpin_blob(blob);
        }
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<PoolMsg>,
        msg: PoolMsg,
        state: &mut ProxyState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PoolMsg::Run(grant) => state.run(grant).await,
            PoolMsg::RunMany(grants) => {
                for grant in grants {
                    state.run(grant).await;
                }
            }
            PoolMsg::Cancel(id) => state.send_worker(ToWorker::Cancel {
                pool: state.pool.to_string(),
                id,
            }),
            PoolMsg::Acked(ids) => {
                for k in &ids {
                    state.unacked.remove(k);
                    if let Some(blob) = state.pinned.remove(k) {
                        state.store.unpin_blob(&blob);
                    }
                }
                state.send_worker(ToWorker::Acked {
                    pool: state.pool.to_string(),
                    ids,
                });
            }
            PoolMsg::QueueRestarted => state.queue_restarted(),
            PoolMsg::Remote(from) => state.on_worker(from),
            PoolMsg::Status(reply) => {
                let _ = reply.send(PoolView {
                    pool: state.pool.to_string(),
                    worker_id: state.queue_worker_id.to_string(),
                    capacity: state.slots,
                    in_use: state.running.len() as u32,
                    peak_in_use: 0,
                    unacked: state.unacked.len(),
                });
            }
            // A remote pool's capacity is its worker's (`--pool NAME=SLOTS`).
            PoolMsg::Resize(_) | PoolMsg::Reset | PoolMsg::MarkStarted => {}
            PoolMsg::Ended => {
                tracing::warn!(worker = %state.worker_id, "an attempt's end reached a proxy; dropped");
            }
            PoolMsg::Panic => panic!("proxy of {}: fault injected by a test", state.worker_id),
        }
        Ok(())
    }
}

impl ProxyState {
    fn to_queue(&self, msg: QueueMsg) {
        match ActorRef::<QueueMsg>::where_is(self.names.queue()) {
            Some(q) => {
                let _ = q.cast(msg);
            }
            None => {
                tracing::debug!(worker = %self.worker_id, "queue not running; kept for its restart")
            }
        }
    }

    fn send_worker(&mut self, msg: ToWorker) {
        self.outbox.push(msg);
        if self.outbox.len() == 1 {
            let _ = self.me.cast(PoolMsg::Remote(FromWorker::Flush));
        }
    }

    fn flush(&mut self) {
        let mut messages = std::mem::take(&mut self.outbox);
        let msg = match messages.len() {
            0 => return,
            1 => messages.pop().expect("one"),
            _ => ToWorker::Batch(messages),
        };
        if self.link.cast(LinkMsg::Wire(msg)).is_err() {
            // The connection is down; the worker resends what matters when
            // it is back, and its lease covers the rest.
            tracing::debug!(worker = %self.worker_id, "worker unreachable; messages dropped");
        }
    }

    fn credit(&mut self, slots: u32) {
        // Sent even with no slot: it registers this pool with the queue, so
        // that slots its reports grant back later (Report.regrant) count.
        // A worker that re-registers while its superseded attempts are
        // still being cancelled has no free slot yet; were the Credit
        // dropped, the queue would not know it and drop those slots, and
        // the pool would wait for tickets that never come.
        self.granted = self.granted.saturating_add(slots);
        self.to_queue(QueueMsg::Credit {
            worker: self.me.clone(),
            worker_id: self.queue_worker_id.clone(),
            pool: self.pool.clone(),
            slots,
            // The worker process runs a grant as it comes.
            ahead: false,
        });
    }

    fn defer(&mut self, id: TicketId, attempt: u32, until_ms: u64, cause: DeferCause) {
        self.unacked
            .insert((id, attempt), Unacked::Defer { until_ms, cause });
        self.to_queue(QueueMsg::Defer {
            worker_id: self.queue_worker_id.clone(),
            id,
            attempt,
            until_ms,
            cause,
        });
    }

    fn report(&mut self, mut report: Report) {
        report.worker_id = self.queue_worker_id.clone();
        if let Some(blob) = &report.output_blob {
            self.pinned
                .insert((report.id, report.attempt), blob.clone());
        }
        // Kept without the regrant: a resend follows a fresh registration.
        let mut kept = report.clone();
        kept.regrant = 0;
        self.unacked
            .insert((report.id, report.attempt), Unacked::Report(kept));
        self.to_queue(QueueMsg::Report(report));
    }

    async fn run(&mut self, mut grant: Grant) {
        self.granted = self.granted.saturating_sub(1);
        let (id, attempt) = (grant.id, grant.attempt);
        if let Some(target) = grant.job.target.clone() {
            let now = self.clock.now_ms();
            if let Some(until_ms) = self.breakers.admit(&target, id, now).await {
                // The worker's slot was never used: its credit stands.
                self.defer(id, attempt, until_ms, DeferCause::Breaker);
                self.credit(1);
                return;
            }
        }
        self.running.insert(id, (attempt, grant.job.target.clone()));
        let link = self.link.clone();
        let pool = self.pool.to_string();
        let has_blobs = grant.job.notify.is_some()
            && weir_core::codec::decode::<crate::records::graph::TaskInput>(&grant.job.payload)
                .is_ok_and(|i| i.upstreams.values().any(|u| u.output_blob.is_some()));
        if !has_blobs {
            self.send_worker(ToWorker::Run { pool, grant });
            return;
        }
        // A graph node: its upstreams' outputs travel in the grant, read
        // from the blobs here, off the actor (reads may be slow).
        let store = self.store.clone();
        let me = self.me.clone();
        tokio::spawn(async move {
            let payload: Arc<[u8]> = Arc::from(std::mem::take(&mut grant.job.payload));
            match resolve_upstreams(&store, payload.clone()).await {
                Ok(resolved) => {
                    grant.job.payload = resolved.unwrap_or_else(|| payload.to_vec());
                    let _ = link.cast(LinkMsg::Wire(ToWorker::Run { pool, grant }));
                }
                Err(error) => {
                    let _ = me.cast(PoolMsg::Remote(FromWorker::Unresolved {
                        id,
                        attempt,
                        error,
                    }));
                }
            }
        });
    }

    fn on_worker(&mut self, from: FromWorker) {
        match from {
            FromWorker::Up(PoolUp::Credit { slots }) => self.credit(slots),
            FromWorker::Up(PoolUp::Revoke { slots }) => {
                let slots = slots.min(self.granted);
                self.granted -= slots;
                self.to_queue(QueueMsg::Revoke {
                    worker_id: self.queue_worker_id.clone(),
                    slots,
                });
            }
            FromWorker::Up(PoolUp::Holding { held }) => {
                // The worker registers afresh: what the queue holds of its
                // old credit goes, its new Credit follows.
                if self.granted > 0 {
                    self.to_queue(QueueMsg::Revoke {
                        worker_id: self.queue_worker_id.clone(),
                        slots: self.granted,
                    });
                    self.granted = 0;
                }
                self.running.retain(|id, _| held.contains(id));
                self.to_queue(QueueMsg::Holding {
                    worker_id: self.queue_worker_id.clone(),
                    held,
                });
            }
            FromWorker::Up(PoolUp::Defer {
                id,
                attempt,
                until_ms,
                cause,
            }) => {
                self.running.remove(&id);
                self.defer(id, attempt, until_ms, cause);
            }
            FromWorker::Up(PoolUp::Report(report)) => {
                // The slot the worker grants back with it is credit the
                // queue will hold.
                self.granted = self.granted.saturating_add(report.regrant);
                if let Some((_, Some(target))) = self.running.remove(&report.id) {
                    self.breakers.record(&target, report.outcome);
                }
                if report.outcome == AttemptOutcome::Success
                    && report.output.len() > BLOB_INLINE_BYTES_MAX
                {
                    let store = self.store.clone();
                    let me = self.me.clone();
                    let max = self.output_bytes_max;
                    tokio::spawn(async move {
                        let mut report = report;
                        let output = std::mem::take(&mut report.output);
                        let (outcome, output, blob, error) =
                            keep_output(Some(&store), output, max).await;
                        report.outcome = outcome;
                        report.output = output;
                        report.output_blob = blob;
                        if error.is_some() {
                            report.error = error;
                        }
                        let _ = me.cast(PoolMsg::Remote(FromWorker::Kept(report)));
                    });
                } else {
                    self.report(report);
                }
            }
            FromWorker::Up(PoolUp::Started { id, attempt }) => {
                self.to_queue(QueueMsg::Started { id, attempt });
            }
            FromWorker::Kept(report) => self.report(report),
            FromWorker::Unresolved { id, attempt, error } => {
                self.running.remove(&id);
                let now = self.clock.now_ms();
                self.report(Report {
                    worker_id: self.queue_worker_id.clone(),
                    id,
                    attempt,
                    outcome: AttemptOutcome::Permanent,
                    output: Vec::new(),
                    output_blob: None,
                    error: Some(error),
                    retry_after_ms: None,
                    regrant: 0,
                    started_ms: now,
                    finished_ms: now,
                    artifacts: Vec::new(),
                });
                // The worker never got the grant: its slot is free.
                self.credit(1);
            }
            FromWorker::Relink(link) => self.link = link,
            FromWorker::Flush => self.flush(),
        }
    }

    /// The queue restarted: register again, as a local pool does.
    fn queue_restarted(&mut self) {
        let mut held: Vec<TicketId> = self.running.keys().copied().collect();
        held.extend(self.unacked.keys().map(|(id, _)| *id));
        self.to_queue(QueueMsg::Holding {
            worker_id: self.queue_worker_id.clone(),
            held,
        });
        let granted = std::mem::take(&mut self.granted);
        self.credit(granted);
        let resend: Vec<((TicketId, u32), Unacked)> =
            self.unacked.iter().map(|(k, u)| (*k, u.clone())).collect();
        tracing::info!(worker = %self.worker_id, pool = %self.pool, resent = resend.len(), "queue restarted; proxy re-registering");
        for ((id, attempt), u) in resend {
            match u {
                Unacked::Report(r) => self.to_queue(QueueMsg::Report(r)),
                Unacked::Defer { until_ms, cause } => self.to_queue(QueueMsg::Defer {
                    worker_id: self.queue_worker_id.clone(),
                    id,
                    attempt,
                    until_ms,
                    cause,
                }),
            }
        }
    }
}
