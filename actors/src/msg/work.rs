//! The values that travel between the queue and the pools that run its
//! work, in this process or another: a [`Grant`] of a ticket, a pool's
//! [`Report`] of an attempt, all a pool says to the queue ([`PoolUp`]) and
//! a pool's status ([`PoolView`]). They sit below the actors' message
//! enums, which carry them, and the wire types, which carry them across
//! processes.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_core::queue::{Job, TicketId};
use weir_core::retry::AttemptOutcome;

use crate::store::BlobRef;

/// A ticket handed to a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The ticket.
    pub id: TicketId,
    /// The hand-out number: every hand-out counts, deferred ones too, so a
    /// report of an earlier hand-out is told from the current one (reports
    /// and acks are keyed by it).
    pub attempt: u32,
    /// What to run.
    pub job: Job,
    /// The end of the lease.
    pub lease_until_ms: u64,
    /// The attempt as the task and its users count it, 1 for the first:
    /// the hand-outs less those a breaker deferred and a sensor's checks
    /// that were not met (`WEIR_ATTEMPT`, `{attempt}`, the attempt's log).
    /// 0 from an engine that does not send it: `attempt` stands in.
    #[serde(default)]
    pub task_attempt: u32,
    /// Handed out ahead of its instant: the task starts no earlier (by the
    /// engine's clock). Only a pool in the engine's process is handed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_ms: Option<u64>,
}

/// Why a pool gave a ticket back without running it. Neither spends an
/// attempt; they are logged and counted apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferCause {
    /// The target's breaker held it back (open, or its half-open probes
    /// taken).
    #[default]
    Breaker,
    /// The pool had no free slot for it: the grant outran the pool's
    /// credit (a shrink since the credit was granted).
    NoSlot,
}

/// A worker's report of an attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The worker.
    pub worker_id: Arc<str>,
    /// The ticket.
    pub id: TicketId,
    /// The attempt.
    pub attempt: u32,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// Its output (success) or nothing, when it is small enough to be
    /// inline; else empty and `output_blob` names it.
    #[serde(with = "serde_bytes")]
    pub output: Vec<u8>,
    /// Its output as a blob the worker wrote (durably, and pinned until
    /// this report is acknowledged) before it reported.
    #[serde(default)]
    pub output_blob: Option<BlobRef>,
    /// Its error, if it failed.
    pub error: Option<String>,
    /// The least wait before a retry (a server's `Retry-After`), if any.
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    /// Slots the worker grants back with this report (the one the attempt
    /// held, when it takes another ticket): the queue can then complete this
    /// ticket and hand the slot its next one in the same durable commit,
    /// where a separate Credit would cost a commit of its own. 0 in a resent
    /// report (the worker registered its credit afresh).
    #[serde(default)]
    pub regrant: u32,
    /// When it started.
    pub started_ms: u64,
    /// When it ended.
    pub finished_ms: u64,
    /// The artifacts a success stored in the artifact store (durably,
    /// before it reported): they go into the done record. Left out when
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<weir_core::artifact::ArtifactRef>,
}

/// A worker's status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolView {
    /// Its pool.
    pub pool: String,
    /// Its id.
    pub worker_id: String,
    /// Capacity.
    pub capacity: u32,
    /// Slots in use.
    pub in_use: u32,
    /// The most slots ever in use at once.
    pub peak_in_use: u32,
    /// Reports not yet acknowledged.
    pub unacked: usize,
}

/// What a pool actor tells the queue, through its [`Uplink`](crate::pool::Uplink): a local pool's
/// become [`QueueMsg`](crate::msg::queue::QueueMsg)s, a remote pool's cross to the engine, whose proxy of
/// the pool hands them to the queue.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum PoolUp {
    /// Free slots granted.
    Credit {
        /// Slots.
        slots: u32,
    },
    /// Credit taken back.
    Revoke {
        /// Slots.
        slots: u32,
    },
    /// An attempt ended.
    Report(Report),
    /// A ticket given back without running.
    Defer {
        /// The ticket.
        id: TicketId,
        /// The attempt it was granted as.
        attempt: u32,
        /// When it may run.
        until_ms: u64,
        /// Why it was given back.
        #[serde(default)]
        cause: DeferCause,
    },
    /// An attempt's task has been running a while.
    Started {
        /// The ticket.
        id: TicketId,
        /// The attempt.
        attempt: u32,
    },
    /// The tickets it runs or has unacknowledged reports for.
    Holding {
        /// Their ids.
        held: Vec<TicketId>,
    },
}
