//! The queue's settings: every limit explicit, with its default.

use serde::{Deserialize, Serialize};

/// Settings of the queue. Every limit explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct QueueSettings {
    /// Lease of an attempt without a timeout.
    pub lease_ms: u64,
    /// Added to an attempt's timeout to make its lease.
    pub lease_grace_ms: u64,
    /// The largest output kept in a done record; longer outputs are cut.
    pub output_bytes_max: usize,
    /// How long done records are kept by default.
    pub retention_ms: u64,
    /// Jobs in one enqueue call at most.
    pub enqueue_batch_max: usize,
    /// After a batch is durable and its tickets are handed out, the next
    /// commit waits up to this long (µs) for their reports, so that a
    /// completion and the next selection on its slot share one flush rather
    /// than taking one each. 0 = commit at once.
    pub commit_linger_us: u64,
    /// Ops in the open batch past which it is committed without lingering.
    pub batch_ops_linger_max: usize,
    /// Pending tickets that only the store holds and that fall due within
    /// this long (ms) are read into memory ahead of their instant, so a
    /// burst due at one instant (prepared runs) is handed out from memory
    /// rather than read window by window as it goes. 0 = only as needed.
    pub warm_ahead_ms: u64,
    /// Tickets read ahead at most, over what the window holds.
    pub warm_tickets_max: usize,
    /// When a graph node's success enters the open batch, its scheduler is
    /// told at once ([`SchedulerMsg::Completing`]) and the commit waits up
    /// to this long (µs) for the downstreams it makes ready, so that the
    /// completion, its record and their enqueue (and selection) share one
    /// durable flush: one commit per edge instead of two. 0 = the
    /// scheduler hears of a completion only once it is durable.
    pub successors_wait_us: u64,
    /// A ticket due within this long (ms) is handed out ahead of its
    /// instant to a pool of the engine's process that has a slot free
    /// with nothing due now: its hand-out is durable and its grant at the
    /// pool before the instant, so at the instant only the task's start
    /// remains (a burst due at one instant starts within ms, not after
    /// its hand-outs' commit). Only a ticket's first hand-out without a
    /// target goes ahead. The slot is held from the hand-out; a cancel in
    /// between stops the waiting grant; one that ends before its instant
    /// never ran (pending again, no attempt spent), while one lost with
    /// its process and found after its instant counts as an attempt, as
    /// any hand-out does. 0 = at the instant.
    pub hand_out_ahead_ms: u64,
}

impl Default for QueueSettings {
    fn default() -> Self {
        QueueSettings {
            lease_ms: 3_600_000,
            lease_grace_ms: 30_000,
            output_bytes_max: 1 << 20,
            retention_ms: 7 * 24 * 3_600_000,
            enqueue_batch_max: 100_000,
            commit_linger_us: 1_000,
            batch_ops_linger_max: 4_096,
            warm_ahead_ms: 1_000,
            warm_tickets_max: 16_384,
            successors_wait_us: 1_000,
            hand_out_ahead_ms: 250,
        }
    }
}
