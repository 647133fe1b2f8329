//! The pool actor's interface: [`PoolMsg`], its status view, and
//! [`PoolUp`], what a pool tells the queue (directly, or through a worker
//! process's link and the engine's proxy of the pool).

use ractor::RpcReplyPort;
use weir_core::queue::TicketId;

use crate::msg::cluster::FromWorker;
use crate::msg::work::{Grant, PoolView};

/// Messages of the pool actor.
pub enum PoolMsg {
    /// Run this ticket.
    Run(Grant),
    /// Run these tickets, in order: the grants of one durable batch for
    /// this pool, in one message (a burst's thousands of hand-outs reach
    /// the pool as one, ahead of the reports of those already running).
    RunMany(Vec<Grant>),
    /// Attempts ended: their outcomes wait in the pool's inbox
    /// ([`crate::attempt::ended::EndedInbox`]), sent by the first task
    /// that found it empty.
    Ended,
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
