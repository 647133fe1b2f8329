//! The ops that change the queue ([`Op`], journaled before they take
//! effect and replayed through the same `step`), what a step did
//! ([`Applied`]) and why an op did not apply ([`Ignored`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::ticket::{Job, Terminal, TicketId};

#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A new pending ticket; a live key is a no-op.
    Enqueue(Job),
    /// The due ticket of `pool` with the highest priority, then the lowest
    /// `(due_ms, id)`, at `now_ms` becomes running, leased to `worker` until `lease_until_ms`.
    Select {
        /// The pool.
        pool: Arc<str>,
        /// The instant of the selection.
        now_ms: u64,
        /// The worker (pool actor) that takes it.
        worker: Arc<str>,
        /// The end of the lease.
        lease_until_ms: u64,
    },
    /// A running ticket ends. Its record is written in the same batch.
    Complete {
        /// The ticket.
        id: TicketId,
        /// How it ended.
        terminal: Terminal,
    },
    /// Never selected again; a running attempt's outcome is dropped.
    Cancel {
        /// The ticket.
        id: TicketId,
    },
    /// The running attempt failed: one failure counted, pending again.
    Requeue {
        /// The ticket.
        id: TicketId,
        /// When it may run again.
        due_ms: u64,
    },
    /// The breaker held the running ticket back before it ran: no failure
    /// counted, pending again.
    Defer {
        /// The ticket.
        id: TicketId,
        /// When the breaker may admit it.
        due_ms: u64,
    },
    /// A sensor's check found its condition not met: no failure counted,
    /// pending again until `due_ms`.
    Poke {
        /// The ticket.
        id: TicketId,
        /// When it checks again.
        due_ms: u64,
    },
    /// A running ticket's lease is extended (a long attempt is alive).
    Extend {
        /// The ticket.
        id: TicketId,
        /// The new end of the lease.
        lease_until_ms: u64,
    },
    /// The running attempt's task has started: from now on a crash costs
    /// the attempt.
    Start {
        /// The ticket.
        id: TicketId,
        /// The attempt (hand-out) that started; another one is ignored.
        attempt: u32,
    },
    /// A running ticket whose process died before its attempt said it
    /// started: pending again, no failure counted (a hand-out, as a
    /// deferral is), one more unstarted orphan counted. No longer written
    /// (an orphan's attempt counts: see `QueueState::orphans`); journals
    /// written before replay it as they did.
    Orphaned {
        /// The ticket.
        id: TicketId,
        /// When it may run again.
        due_ms: u64,
    },
}

impl Op {
    /// The ticket the op names; `None` for an enqueue (its ticket has no
    /// id yet) and a select (it names a pool).
    pub fn ticket_id(&self) -> Option<TicketId> {
        match self {
            Op::Complete { id, .. }
            | Op::Cancel { id }
            | Op::Requeue { id, .. }
            | Op::Defer { id, .. }
            | Op::Poke { id, .. }
            | Op::Extend { id, .. }
            | Op::Start { id, .. }
            | Op::Orphaned { id, .. } => Some(*id),
            Op::Enqueue(_) | Op::Select { .. } => None,
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Applied {
    /// A new ticket.
    Enqueued(TicketId),
    /// The key was live: the ticket it names is unchanged.
    Duplicate(TicketId),
    /// This ticket became running.
    Selected(TicketId),
    /// No ticket of the pool was due.
    NoneDue,
    /// The ticket ended and left the queue.
    Completed(TicketId, Terminal),
    /// The ticket was cancelled and left the queue.
    Cancelled(TicketId),
    /// The ticket is pending again.
    Requeued(TicketId),
    /// The lease was extended.
    Extended(TicketId),
    /// The running attempt is marked started.
    Started(TicketId),
    /// The op named a ticket that is not live or not in the state it needs.
    Ignored(Ignored),
}

impl Applied {
    /// The ticket the step changed, if it changed one: the op is then
    /// journaled, and the ticket goes into the next snapshot.
    pub fn changed(&self) -> Option<TicketId> {
        match *self {
            Applied::Enqueued(id)
            | Applied::Selected(id)
            | Applied::Completed(id, _)
            | Applied::Cancelled(id)
            | Applied::Requeued(id)
            | Applied::Extended(id)
            | Applied::Started(id) => Some(id),
            Applied::Duplicate(_) | Applied::NoneDue | Applied::Ignored(_) => None,
        }
    }
}

/// Why an op changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// No live ticket has the id.
    Unknown(TicketId),
    /// The ticket is pending, and the op needs it running.
    NotRunning(TicketId),
    /// The op names an attempt that is not the ticket's running one.
    Superseded(TicketId),
}
