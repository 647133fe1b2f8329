//! The pool actor's interface: [`PoolMsg`], its status view, and
//! [`PoolUp`], what a pool tells the queue (directly, or through a worker
//! process's link and the engine's proxy of the pool).

use ractor::RpcReplyPort;
use weir_core::queue::TicketId;
use weir_core::retry::AttemptOutcome;

use crate::msg::cluster::FromWorker;
use crate::msg::work::{Grant, PoolView};
use crate::store::BlobRef;

/// Messages of the pool actor.
pub enum PoolMsg {
    /// Run this ticket.
    Run(Grant),
    /// Run these tickets, in order: the grants of one durable batch for
    /// this pool, in one message (a burst's thousands of hand-outs reach
    /// the pool as one, ahead of the reports of those already running).
    RunMany(Vec<Grant>),
    /// An attempt ended (from the attempt's task).
    Ended {
        /// The ticket.
        id: TicketId,
        /// The attempt.
        attempt: u32,
        /// How it ended.
        outcome: AttemptOutcome,
        /// Output on success (inline).
        output: Vec<u8>,
        /// Output on success, written to a blob (pinned).
        output_blob: Option<BlobRef>,
        /// The artifacts a success stored.
        artifacts: Vec<weir_core::artifact::ArtifactRef>,
        /// Error on failure.
        error: Option<String>,
        /// The least wait before a retry (a server's `Retry-After`).
        retry_after_ms: Option<u64>,
        /// When it started.
        started_ms: u64,
    },
    /// Cancel the running attempt of a ticket.
    Cancel(TicketId),
    /// Timer: tell the queue of attempts running for
    /// [`crate::pool::START_MARK_AFTER_MS`] that they started.
    MarkStarted,
    /// The queue made these reports durable.
    Acked(Vec<(TicketId, u32)>),
    /// The queue restarted: grant credit again and resend reports.
    QueueRestarted,
    /// The engine requeued what this (remote) pool held: cancel running
    /// attempts, start credit over (see `PoolState::reset` in [`crate::pool`]).
    Reset,
    /// For the engine's proxy of a remote pool: what the remote pool said.
    Remote(FromWorker),
    /// Change the capacity.
    Resize(u32),
    /// Status of this worker.
    Status(RpcReplyPort<PoolView>),
    /// Fault injection, for tests only: the handler panics, so the
    /// supervisor sees the actor fail exactly as it would on a bug.
    Panic,
}

impl ractor::Message for PoolMsg {}
