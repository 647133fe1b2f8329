//! The queue actor's interface: [`QueueMsg`], the answers of its calls, and
//! the values that travel through it: a [`Grant`] to a pool, a pool's
//! [`Report`], a [`Completion`] (and its early form) to a scheduler.

use std::collections::BTreeMap;
use std::sync::Arc;

use ractor::{ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use weir_core::queue::{Job, TicketId};

use crate::msg::pool::PoolMsg;
use crate::msg::work::Report;
use crate::records::done::{DoneRecord, DoneStatus};

/// How an enqueue ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Enqueued {
    /// A new ticket, durable.
    New(TicketId),
    /// The key is live: this ticket holds it.
    Live(TicketId),
    /// The key already ended; its done record holds the outcome.
    Done,
}

impl Enqueued {
    /// The ticket, when the key is live or new.
    pub fn id(&self) -> Option<TicketId> {
        match self {
            Enqueued::New(id) | Enqueued::Live(id) => Some(*id),
            Enqueued::Done => None,
        }
    }
}

/// How a cancel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Cancelled {
    /// The ticket was live and is now cancelled (durably).
    Cancelled(TicketId),
    /// The key already ended.
    AlreadyDone,
    /// No ticket has the key.
    Unknown,
}

/// A ticket ended: what the queue tells the job's `notify` actor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The ticket's key.
    pub key: Arc<str>,
    /// The ticket.
    pub id: TicketId,
    /// How it ended.
    pub status: DoneStatus,
}

/// A graph node's success that has entered the open batch and is not
/// durable yet: what its scheduler needs to enqueue the downstreams it
/// makes ready into the same batch (the output they take as input).
#[derive(Debug, Clone)]
pub struct EarlyCompletion {
    /// The ticket's key.
    pub key: Arc<str>,
    /// Its output, as its done record will hold it.
    pub output: Vec<u8>,
    /// The blob holding a large output.
    pub output_blob: Option<crate::store::BlobRef>,
    /// Its artifacts.
    pub artifacts: Vec<weir_core::artifact::ArtifactRef>,
}

/// Counts of the queue, published after every batch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Live tickets, counting those that ended but whose done record is
    /// not durable yet.
    pub live: usize,
    /// Running tickets.
    pub running: usize,
    /// Batches made durable since start.
    pub batches: u64,
}

/// Status of one pool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PoolStatus {
    /// Pending tickets.
    pub pending: usize,
    /// Pending tickets due now.
    pub due: usize,
    /// Running tickets.
    pub running: usize,
    /// Workers serving it.
    pub workers: usize,
    /// Credit the workers have granted and not used.
    pub credit: u64,
}

/// Status of the queue.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueStatus {
    /// By pool.
    pub pools: BTreeMap<String, PoolStatus>,
    /// Live tickets.
    pub live: usize,
    /// Running tickets.
    pub running: usize,
    /// Live tickets held in memory: the running ones and a window of the
    /// pending ones per pool and priority; the rest are in the store only.
    #[serde(default)]
    pub in_memory: usize,
    /// The last journal sequence.
    pub last_seq: u64,
}

/// Which live tickets to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TicketFilter {
    /// Only running (`true`) or only pending (`false`) tickets.
    pub running: Option<bool>,
    /// Only this pool's.
    pub pool: Option<String>,
    /// At most this many.
    pub limit: usize,
}

/// A live ticket in a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LiveTicket {
    /// Its key (a run id for graph nodes).
    pub key: String,
    /// Its id.
    pub id: TicketId,
    /// Its pool.
    pub pool: String,
    /// Its task.
    pub task: String,
    /// Its target.
    pub target: Option<String>,
    /// Running now (else pending).
    pub running: bool,
    /// Attempts started.
    pub attempts: u32,
    /// Attempts failed.
    pub failures: u32,
    /// When it is due (pending) or its lease ends (running).
    pub at_ms: u64,
}

/// A ticket as seen from outside.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum TicketView {
    /// Live: pending or running.
    Live {
        /// Its id.
        id: TicketId,
        /// Running now.
        running: bool,
        /// Attempts that started their task.
        attempts: u32,
        /// Hand-outs deferred before their task started (breakers).
        deferrals: u32,
        /// Attempts failed.
        failures: u32,
        /// When it is due (pending) or its lease ends (running).
        at_ms: u64,
        /// A sensor's checks that found its condition not met so far (no
        /// attempts), while it waits.
        #[serde(default)]
        pokes: u32,
        /// A waiting sensor's last check: when, and what it saw.
        #[serde(default)]
        last_check: Option<LastCheck>,
        /// Running: where (`local` or a worker's name).
        #[serde(default)]
        worker: Option<String>,
        /// Running: when its attempt started.
        #[serde(default)]
        started_ms: Option<u64>,
    },
    /// Ended.
    Done(DoneRecord),
}

/// The longest account of what a sensor's check saw that the queue keeps
/// for its live view (its head; the log has all of it).
pub const LAST_CHECK_SEEN_BYTES_MAX: usize = 512;

/// A sensor's last check that found its condition not met.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LastCheck {
    /// When it ended.
    pub at_ms: u64,
    /// What it saw (at most [`LAST_CHECK_SEEN_BYTES_MAX`] bytes).
    pub seen: String,
}

impl LastCheck {
    /// The check at `at_ms` that saw `seen`, cut to its head.
    pub fn new(at_ms: u64, seen: &str) -> LastCheck {
        let mut cut = seen.len().min(LAST_CHECK_SEEN_BYTES_MAX);
        while !seen.is_char_boundary(cut) {
            cut -= 1;
        }
        LastCheck {
            at_ms,
            seen: seen[..cut].to_string(),
        }
    }
}

/// Messages of the queue actor.
pub enum QueueMsg {
    /// Enqueues jobs; answers when they are durable.
    Enqueue(Vec<Job>, RpcReplyPort<Vec<Result<Enqueued, String>>>),
    /// The answer to an [`EarlyCompletion`] of the key: the downstreams it
    /// makes ready, enqueued into the batch the commit held for them. The
    /// answers go, once durable, to the scheduler named (the third field)
    /// as [`SchedulerMsg::Presubmitted`], ahead of the batch's completion
    /// notices, so it knows them submitted before it hears of the success.
    Successors(Arc<str>, Vec<Job>, Arc<str>),
    /// The answer to an [`EarlyCompletion`] of the key that makes nothing
    /// ready: the commit need not wait for it.
    NoSuccessors(Arc<str>),
    /// Cancels the live ticket of a key; answers when durable.
    Cancel(String, RpcReplyPort<Cancelled>),
    /// Cancels the live tickets of keys (a mapped node's members); one
    /// answer per key, in order, when durable.
    CancelMany(Vec<String>, RpcReplyPort<Vec<Cancelled>>),
    /// Withdraws the tickets of keys that have not been handed out (a
    /// prepared run whose schedule moved before its instant): all or
    /// nothing. When every live ticket of the keys is pending, each is
    /// cancelled and the answers (one per key, in order) come once durable;
    /// when any has been handed out or is ending, nothing changes and the
    /// answer is that key, at once.
    Withdraw(Vec<String>, RpcReplyPort<Result<Vec<Cancelled>, String>>),
    /// Requeues the dead letter of a plain job (a fresh ticket, tries
    /// starting over); answers when durable. `Live` when the key is live
    /// again already; an error names a key without a letter.
    RequeueDead(String, RpcReplyPort<Result<Enqueued, String>>),
    /// A worker grants `slots` more credit.
    Credit {
        /// The worker actor.
        worker: ActorRef<PoolMsg>,
        /// Its id (unique per incarnation).
        worker_id: Arc<str>,
        /// Its pool.
        pool: Arc<str>,
        /// Credit granted.
        slots: u32,
        /// Whether it waits for a grant's `not_before_ms` before it starts
        /// the task (a pool in the engine's process; a worker process's
        /// proxy does not), so that tickets may be handed to it ahead of
        /// their instant.
        ahead: bool,
    },
    /// A worker takes back credit (it shrank).
    Revoke {
        /// The worker.
        worker_id: Arc<str>,
        /// Credit taken back, at most what it has.
        slots: u32,
    },
    /// A worker reports an attempt.
    Report(Report),
    /// A worker's breaker held a ticket back.
    Defer {
        /// The worker.
        worker_id: Arc<str>,
        /// The ticket.
        id: TicketId,
        /// The attempt it was granted as.
        attempt: u32,
        /// When it may run (the breaker admits it; now for a bounce).
        until_ms: u64,
        /// Why it came back.
        cause: crate::msg::work::DeferCause,
    },
    /// After a queue restart, the tickets a live worker runs or has
    /// unacknowledged reports for: a ticket the queue has running there
    /// and not in the list was never handed over (its grant died with the
    /// old queue) and is pending again, no attempt spent.
    Holding {
        /// The worker.
        worker_id: Arc<str>,
        /// Its tickets.
        held: Vec<TicketId>,
    },
    /// A worker says an attempt's task has been running a while: from now
    /// on a crash costs the attempt (see weir-core's `orphans`).
    Started {
        /// The ticket.
        id: TicketId,
        /// The attempt.
        attempt: u32,
    },
    /// A worker died: its running tickets are requeued as failed attempts.
    WorkerGone {
        /// The worker.
        worker_id: Arc<str>,
    },
    /// Stop (true) or resume (false) handing out tickets.
    Pause(bool),
    /// Timer: something falls due or a lease runs out.
    Tick,
    /// Timer: the linger after a batch is over; commit what is open.
    FlushNow,
    /// The batch in flight is durable (or failed).
    Flushed(Result<(), String>),
    /// The snapshot being written has landed (or failed).
    SnapshotWritten(Result<(), String>),
    /// Status of the queue.
    Status(RpcReplyPort<QueueStatus>),
    /// A ticket by key.
    Ticket(String, RpcReplyPort<Option<TicketView>>),
    /// Live tickets by state and pool, oldest first, at most a limit.
    List(TicketFilter, RpcReplyPort<Vec<LiveTicket>>),
    /// Fault injection, for tests only: the handler panics, so the
    /// supervisor sees the actor fail exactly as it would on a bug.
    Panic,
}

impl ractor::Message for QueueMsg {}
