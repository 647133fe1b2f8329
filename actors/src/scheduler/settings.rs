//! A scheduler's settings and limits.

use serde::{Deserialize, Serialize};

/// How long the scheduler waits for the queue.
pub const QUEUE_CALL_MS: u64 = 60_000;

/// Settings of a scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SchedulerSettings {
    /// Time between reconciler passes.
    pub reconcile_interval_ms: u64,
    /// Jobs in one submit to the queue at most.
    pub submit_batch_max: usize,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        SchedulerSettings {
            reconcile_interval_ms: 60_000,
            // Smaller batches let the queue hand out the first of a wide
            // fan-out while the rest are still being made durable (one
            // 10,000-job batch held every worker idle for its whole commit);
            // much smaller ones cost a durable round trip each.
            submit_batch_max: 1_000,
        }
    }
}
