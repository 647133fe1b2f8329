//! A ticket and what it carries: the [`Job`] a caller enqueues, where the
//! ticket is ([`Place`]: pending or running under a lease), and how it
//! ended ([`Terminal`]). The shapes the queue, its window over the store
//! (`crate::cold`) and its pending order (`crate::pending`) share.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::retry::{RetryPolicy, Tries};

/// A ticket's id: assigned by the queue in enqueue order, never reused.
pub type TicketId = u64;

/// What a caller enqueues: everything needed to run it, so a worker in
/// another process needs no definition files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Job {
    /// Idempotency key: a second enqueue of a live key is a no-op.
    pub key: Arc<str>,
    /// The registered task that runs it.
    pub task: Arc<str>,
    /// The pool whose slots bound its attempts.
    pub pool: Arc<str>,
    /// The target whose breaker guards it, if any.
    #[serde(default)]
    pub target: Option<Arc<str>>,
    /// Not run before this instant (ms since the epoch).
    pub due_ms: u64,
    /// The task's input.
    #[serde(with = "serde_bytes", default)]
    pub payload: Vec<u8>,
    /// Retry policy of its attempts.
    #[serde(default)]
    pub policy: RetryPolicy,
    /// Each attempt is stopped after this long, if set.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Among the due tickets of its pool, a higher priority is handed out
    /// first; equal ones by due instant, then id. Default 0, which is what
    /// tickets journaled before priorities read as; left out of the
    /// encoding at 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// The actor told when the ticket ends (a graph's scheduler), if any.
    #[serde(default)]
    pub notify: Option<Arc<str>>,
    /// How long the ticket's done record is kept after it ends: `None` =
    /// the engine's default, `Some(0)` = until its owner deletes it.
    #[serde(default)]
    pub retention_ms: Option<u64>,
    /// A sensor's waiting: a check that reports its condition not met
    /// puts the ticket back, due later, with no attempt spent, until the
    /// sensor's timeout (see `sensor`). Left out of the encoding when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensor: Option<Box<crate::sensor::SensorPolicy>>,
    /// Assets its success materializes: the queue writes one
    /// materialization record per asset in the same atomic batch as the
    /// ticket's done record (see `asset`). Left out of the encoding when
    /// empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produces: Vec<Arc<str>>,
}

impl Job {
    /// A job due at once, without target, payload or timeout, with the
    /// default retry policy.
    pub fn new(
        key: impl Into<Arc<str>>,
        task: impl Into<Arc<str>>,
        pool: impl Into<Arc<str>>,
    ) -> Job {
        Job {
            key: key.into(),
            task: task.into(),
            pool: pool.into(),
            target: None,
            due_ms: 0,
            payload: Vec::new(),
            policy: RetryPolicy::default(),
            timeout_ms: None,
            notify: None,
            retention_ms: None,
            priority: 0,
            sensor: None,
            produces: Vec::new(),
        }
    }

    /// The job at `priority` (higher is handed out first within its pool).
    pub fn with_priority(mut self, priority: i32) -> Job {
        self.priority = priority;
        self
    }
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// Where a live ticket is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Place {
    /// Waiting in its pool's order until `due_ms`.
    Pending {
        /// Not selected before this instant.
        due_ms: u64,
    },
    /// Leased to `worker` until `lease_until_ms`.
    Running {
        /// The worker that holds the attempt.
        worker: Arc<str>,
        /// When the lease runs out and the attempt counts as failed.
        lease_until_ms: u64,
        /// Whether the worker said the attempt's task has started (an
        /// [`Op::Start`], journaled with a later batch once the task ran
        /// for a while). A crash costs the attempt either way (see
        /// [`QueueState::orphans`]): the hand-out was durable first.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        started: bool,
        /// The instant the ticket was due when it was selected. A grant
        /// handed out ahead of it (a pool in the engine's process, with a
        /// slot free, within the queue's `hand_out_ahead_ms`) starts its
        /// task no earlier, so an attempt that ends before this instant
        /// never ran: it goes back to pending at the instant, no attempt
        /// spent. 0 in tickets selected before weir recorded it.
        #[serde(default, skip_serializing_if = "is_zero_u64")]
        due_ms: u64,
    },
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// A live ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ticket {
    /// Its id.
    pub id: TicketId,
    /// What to run.
    pub job: Job,
    /// Failures and deferrals so far, and the first due instant.
    pub tries: Tries,
    /// Hand-outs (selections), so a stale report of an earlier one can be
    /// told from the current one. Deferred hand-outs count here too; the
    /// attempts that started their task are [`Ticket::attempts`].
    pub attempt: u32,
    /// Pending or running.
    pub place: Place,
}

impl Ticket {
    /// Attempts that started their task: hand-outs less deferrals and
    /// less a sensor's checks that were not met.
    pub fn attempts(&self) -> u32 {
        self.attempt
            .saturating_sub(self.tries.deferrals)
            .saturating_sub(self.tries.pokes)
    }

    /// Hand-outs deferred before their task started.
    pub fn deferrals(&self) -> u32 {
        self.tries.deferrals
    }
}

/// How a ticket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Terminal {
    /// An attempt succeeded.
    Succeeded,
    /// Retrying is over: a permanent failure, no attempt left, or past the
    /// deadline.
    Failed,
    /// A sensor's condition was still not met at its timeout, and it
    /// skips rather than fails (`on_timeout = "skip"`).
    Skipped,
}
