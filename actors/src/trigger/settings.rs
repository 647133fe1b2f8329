//! The trigger actors' settings: every bound, with its default.

use serde::{Deserialize, Serialize};

use super::inventory::InventoryLimits;

/// How long the trigger waits for its scheduler.
pub const SCHEDULER_CALL_MS: u64 = 60_000;

/// Settings of the trigger actors. Every bound is here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TriggerSettings {
    /// Windows a cron graph with `catchup = true` starts after downtime at
    /// most (the newest); older missed windows are dropped, and said so.
    pub cron_catchup_max: usize,
    /// Windows one backfill may span at most.
    pub backfill_windows_max: usize,
    /// Backfills of one graph in progress at most.
    pub backfills_max: usize,
    /// Partitions in one start request to the scheduler at most.
    pub start_batch_max: usize,
    /// How long an inventory command may run, in ms.
    pub inventory_timeout_ms: u64,
    /// The most bytes an inventory file or command output may hold.
    pub inventory_bytes_max: usize,
    /// The most keys an inventory may list.
    pub inventory_keys_max: usize,
    /// After a failed first inventory load (no keys yet), the next try,
    /// in ms (at most the graph's refresh).
    pub inventory_retry_ms: u64,
    /// The longest sleep while keys are leased or starts wait for room:
    /// each wake checks leased keys' runs, repairing lost events.
    pub repair_interval_ms: u64,
    /// After the scheduler could not be reached, the next try, in ms.
    pub retry_ms: u64,
    /// Key schedules written in one store batch at most. sled holds a
    /// batch's pages in memory: 1,000 a batch keeps loading 100,000 keys
    /// near 100 MiB of RSS growth, where 10,000 a batch took 370 MiB, at
    /// the same speed.
    pub write_batch_max: usize,
    /// How far ahead of their instants due keys and cron windows are
    /// prepared, in ms: their runs are created and their first tickets
    /// enqueued durably, to be handed out at the instant, so a burst due
    /// at one instant waits for no commit then. 0 prepares nothing (every
    /// start happens at its instant).
    pub prepare_ahead_ms: u64,
}

impl Default for TriggerSettings {
    fn default() -> Self {
        TriggerSettings {
            cron_catchup_max: 1_000,
            backfill_windows_max: 100_000,
            backfills_max: 100,
            start_batch_max: 1_000,
            inventory_timeout_ms: 30_000,
            inventory_bytes_max: 64 << 20,
            inventory_keys_max: 1_000_000,
            inventory_retry_ms: 10_000,
            repair_interval_ms: 60_000,
            retry_ms: 1_000,
            write_batch_max: 1_000,
            // Preparing 10,000 runs takes about 3 s on 2 cores with fsync.
            prepare_ahead_ms: 5_000,
        }
    }
}

impl TriggerSettings {
    /// The bounds of an inventory load.
    pub fn inventory_limits(&self) -> InventoryLimits {
        InventoryLimits {
            timeout_ms: self.inventory_timeout_ms,
            bytes_max: self.inventory_bytes_max,
            keys_max: self.inventory_keys_max,
        }
    }
}
