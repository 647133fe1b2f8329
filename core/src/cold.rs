//! Pending tickets kept in the store instead of in memory ("cold").
//!
//! A queue opened over a large backlog does not read it: it reads the
//! running tickets and, for each priority level of each pool, a bounded
//! *window* of the first pending tickets from the store's pending index
//! (ordered by `(due_ms, id)` within a level). The rest stay in the store
//! and are counted. [`crate::queue::QueueState`] keeps, per level with cold
//! tickets, the *bound*: the last index entry it has read. Every cold
//! ticket lies past its level's bound, so while the level's tickets in
//! memory include one at or before the bound, the first of them is the
//! level's first ticket overall, and a select taken from memory is the
//! select the whole queue would make. When a level's tickets in memory run
//! out below the bound, the next window is read ([`QueueState::refill`]).
//! An op naming a cold ticket (a cancel, an enqueue of its key) reads it in
//! first ([`QueueState::prepare`]).
//!
//! The store's index is the state of its last snapshot; tickets changed
//! since are in memory, and those that left since are remembered
//! (`gone`) until the next snapshot, so that neither is read in again.
//! Reading a ticket in changes where it is kept, never what the queue
//! holds: live state and replayed state hold the same tickets in the same
//! order whatever their windows, and `step` reads nothing but memory.
//!
//! The reads are behind [`ColdTickets`], so this crate stays free of the
//! store; the actors' store implements it over sled.
//!
//! [`QueueState::refill`]: crate::queue::QueueState::refill
//! [`QueueState::prepare`]: crate::queue::QueueState::prepare

use std::fmt;

use crate::queue::ticket::{Ticket, TicketId};

/// Read access to the tickets a store holds as of its last snapshot.
pub trait ColdTickets {
    /// A failed read.
    type Error: fmt::Display;

    /// Up to `n` entries `(due_ms, id)` of the pending index of `pool` at
    /// `priority`, after `after` (exclusive; from the start when `None`),
    /// in `(due_ms, id)` order.
    fn scan(
        &self,
        pool: &str,
        priority: i32,
        after: Option<(u64, TicketId)>,
        n: usize,
    ) -> Result<Vec<(u64, TicketId)>, Self::Error>;

    /// The stored ticket `id`.
    fn ticket(&self, id: TicketId) -> Result<Option<Ticket>, Self::Error>;

    /// The id the stored key index names for `key`.
    fn key_id(&self, key: &str) -> Result<Option<TicketId>, Self::Error>;
}

/// A store that holds nothing cold: every ticket is in memory.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCold;

impl ColdTickets for NoCold {
    type Error = std::convert::Infallible;

    fn scan(
        &self,
        _pool: &str,
        _priority: i32,
        _after: Option<(u64, TicketId)>,
        _n: usize,
    ) -> Result<Vec<(u64, TicketId)>, Self::Error> {
        Ok(Vec::new())
    }

    fn ticket(&self, _id: TicketId) -> Result<Option<Ticket>, Self::Error> {
        Ok(None)
    }

    fn key_id(&self, _key: &str) -> Result<Option<TicketId>, Self::Error> {
        Ok(None)
    }
}

/// Why tickets could not be read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ColdError<E> {
    /// The store's read failed.
    Store(E),
    /// The store's index and counts disagree with each other or with the
    /// queue: the store is damaged.
    Inconsistent(String),
}

impl<E: fmt::Display> fmt::Display for ColdError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColdError::Store(e) => write!(f, "reading stored tickets: {e}"),
            ColdError::Inconsistent(what) => write!(f, "stored tickets are inconsistent: {what}"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for ColdError<E> {}

/// One priority level of a pool that has tickets in the store only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColdLevel {
    /// Its pending tickets in the store and not in memory.
    pub remaining: u64,
    /// The last index entry `(due_ms, id)` read; every ticket still cold
    /// lies after it. `None` before the first read.
    pub bound: Option<(u64, TicketId)>,
}
