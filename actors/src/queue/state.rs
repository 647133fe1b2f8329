//! The queue actor's state and the shapes it works with: the open batch
//! (its commit and the effects that run once it is durable), the workers
//! and their credit, what every incarnation shares, and the one place an
//! op is applied to weir-core's queue state (reading the store first while
//! a level's tickets are only there).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ractor::{ActorRef, RpcReplyPort};
use tokio::sync::watch;
use weir_core::queue::{Applied, Op, QueueState, TicketId};

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::events::EngineEvent;
use crate::msg::pool::PoolMsg;
use crate::msg::queue::{Cancelled, Completion, Enqueued, QueueCounts, QueueMsg, TicketView};
use crate::msg::work::Grant;
use crate::store::{BlobRef, Commit, Expiring, Store, StoreCold, StoreError};

use super::settings::QueueSettings;

/// A succeeded attempt's output as its report carries it.
pub(super) enum Output {
    /// Small enough to stay in the record (with the attempt's artifacts).
    Inline(Vec<u8>, Vec<weir_core::artifact::ArtifactRef>),
    /// In a blob the worker wrote (with the attempt's artifacts).
    Blob(BlobRef, Vec<weir_core::artifact::ArtifactRef>),
}

/// What a batch does once durable.
pub(super) enum Effect {
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
    /// The Started event of a grant handed out ahead of its instant
    /// (ticket, hand-out, instant): sent at the instant, if the grant is
    /// still the ticket's running one.
    StartedAt(TicketId, u32, u64, EngineEvent),
    /// A ticket query about a key whose completion is not durable yet,
    /// answered once it is (the ticket is gone from memory and its done
    /// record not yet in the store: answered now, the key would look
    /// unknown).
    TicketView(String, RpcReplyPort<Option<TicketView>>),
}

#[derive(Default)]
pub(super) struct Batch {
    pub(super) commit: Commit,
    pub(super) effects: Vec<Effect>,
}

impl Batch {
    pub(super) fn is_empty(&self) -> bool {
        self.commit.is_empty() && self.effects.is_empty()
    }
}

pub(super) struct Worker {
    pub(super) actor: ActorRef<PoolMsg>,
    pub(super) pool: Arc<str>,
    pub(super) credit: u64,
    /// Whether it waits for a grant's `not_before_ms` (a pool in the
    /// engine's process): only such a worker is handed tickets ahead.
    pub(super) ahead: bool,
}

impl Worker {
    /// Whether it can take a grant now: it has credit, and a grant handed
    /// out `ahead` of its instant only if it waits for it.
    pub(super) fn takes(&self, ahead: bool) -> bool {
        self.credit > 0 && (self.ahead || !ahead)
    }
}

/// What the incarnations of the queue share: the supervisor keeps it and
/// hands it to each.
#[derive(Default)]
pub struct QueueShared {
    /// Held while a journal write runs: a killed queue's write goes on on
    /// its blocking thread, and the next incarnation must not replay the
    /// store before that write has landed (it would miss ops, then journal
    /// over them).
    pub(super) gate: Arc<tokio::sync::Mutex<()>>,
    /// Held while a snapshot is written beside the commits: the next
    /// incarnation recovers only once it has landed (or failed).
    pub(super) snapshot_gate: Arc<tokio::sync::Mutex<()>>,
    /// The events and notices of the batch being made durable, until they
    /// have gone out. A queue that dies in between loses its effects; the
    /// next incarnation sends these if the batch landed, so that each
    /// Completed event and notice goes out once.
    pub(super) unfinished: std::sync::Mutex<Option<Unfinished>>,
}

pub(super) struct Unfinished {
    pub(super) events: Vec<EngineEvent>,
    pub(super) notices: Vec<(Arc<str>, Completion)>,
    pub(super) landed: bool,
}

impl QueueShared {
    pub(super) fn unfinished(&self) -> std::sync::MutexGuard<'_, Option<Unfinished>> {
        self.unfinished.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the events and notices of a batch about to be written.
    pub(super) fn begin(&self, effects: &[Effect]) {
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

    pub(super) fn landed(&self) {
        if let Some(u) = self.unfinished().as_mut() {
            u.landed = true;
        }
    }

    /// The batch's effects ran.
    pub(super) fn finish(&self) {
        *self.unfinished() = None;
    }
}

pub(super) type TimerHandle = tokio::task::JoinHandle<Result<(), ractor::MessagingErr<QueueMsg>>>;

/// The queue actor's state: weir-core's [`QueueState`] (the tickets) and what the
/// actor keeps around it: the open batch and the one in flight, the
/// workers and their credit, the timer, the early notices awaited.
pub struct QueueActorState {
    pub(super) names: crate::names::Names,
    pub(super) store: Store,
    pub(super) clock: Clock,
    pub(super) settings: QueueSettings,
    pub(super) events: EventSender,
    pub(super) counts: watch::Sender<QueueCounts>,
    pub(super) shared: Arc<QueueShared>,
    pub(super) q: QueueState,
    /// Ticket ids changed since the last snapshot (since the one being
    /// written, while one is).
    pub(super) dirty: HashSet<TicketId>,
    /// The snapshot being written while the queue goes on, if one is.
    pub(super) snapshot_writing: Option<SnapshotWriting>,
    /// Keys whose Complete or Cancel is not yet durable (their done record
    /// is not readable yet): an enqueue of one is a duplicate.
    pub(super) completing: HashMap<Arc<str>, u32>,
    pub(super) workers: HashMap<Arc<str>, Worker>,
    /// Workers with credit, by pool, in round-robin order.
    pub(super) by_pool: BTreeMap<Arc<str>, Vec<Arc<str>>>,
    /// When the running attempt started, by ticket (a grant handed out
    /// ahead: its instant).
    pub(super) started: HashMap<TicketId, u64>,
    /// Started events of grants handed out ahead, by (instant, ticket),
    /// with the hand-out they name: sent at the instant.
    pub(super) starts_ahead: BTreeMap<(u64, TicketId), (u32, EngineEvent)>,
    pub(super) open: Batch,
    pub(super) in_flight: Option<Vec<Effect>>,
    /// Keys of the batch in flight to clear from `completing` once durable.
    pub(super) in_flight_completing: Vec<Arc<str>>,
    pub(super) open_completing: Vec<Arc<str>>,
    /// The armed timer: when it fires, and its task.
    pub(super) timer: Option<(u64, TimerHandle)>,
    pub(super) paused: bool,
    /// Grants handed out whose report (or defer) has not come back.
    pub(super) awaiting_reports: usize,
    /// Until when the next commit waits for those reports.
    pub(super) linger_until: Option<tokio::time::Instant>,
    /// Keys of successes in the open batch whose schedulers have not
    /// answered their early notice yet.
    pub(super) awaiting_successors: HashSet<Arc<str>>,
    /// Until when the open batch waits for them, and whether a timer to
    /// end the wait is armed.
    pub(super) successors_until: Option<tokio::time::Instant>,
    pub(super) successors_timer: bool,
    pub(super) batches: u64,
    pub(super) rng: rand::rngs::SmallRng,
    /// Each waiting sensor's last check, for its live view. At most one
    /// per live ticket, each at most `LAST_CHECK_SEEN_BYTES_MAX` bytes;
    /// removed when its ticket ends. Not journaled: after a restart a
    /// sensor shows its count of checks, and its last one from the next.
    pub(super) last_checks: HashMap<TicketId, crate::msg::queue::LastCheck>,
}

/// A snapshot being written on a blocking thread while the queue goes on.
pub(super) struct SnapshotWriting {
    /// The queue's `gone` when it was taken (see
    /// `QueueState::snapshot_landed`).
    pub(super) gone: std::collections::BTreeSet<TicketId>,
    /// Tickets it holds (changed since the one before).
    pub(super) changed: usize,
    /// The write and its outcome, awaited by a stop.
    pub(super) handle: tokio::task::JoinHandle<Result<(), String>>,
}

impl QueueActorState {
    pub(super) fn step(&mut self, op: Op) -> Applied {
        // Reads the store only while levels are cold.
        if let Err(e) = self.q.prepare(&op, &StoreCold::new(&self.store)) {
            cold_failed(&e);
        }
        self.step_prepared(op)
    }

    /// [`QueueActorState::step`] for an op whose ticket the caller has just
    /// read in (an enqueue looks its key up first: a second look would be
    /// a second store read of a key that is not there).
    pub(super) fn step_prepared(&mut self, op: Op) -> Applied {
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
}

/// A wait in words: `6h`, `90s`, `250ms`.
pub(super) use weir_core::duration::human_ms;

/// A read of the tickets kept in the store failed: the queue cannot know
/// what it holds, so it stops; its restart reads the store again (and an
/// open that fails the same way refuses the store, naming what).
pub(super) fn cold_failed(e: &weir_core::cold::ColdError<StoreError>) -> ! {
    tracing::error!(error = %e, "reading the tickets kept in the store failed");
    panic!("queue: {e}")
}
