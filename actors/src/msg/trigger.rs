//! A graph's trigger's interface: [`TriggerMsg`] and what its calls answer
//! with (a key's schedule, an inventory change, a backfill, the trigger's
//! status).

use ractor::RpcReplyPort;
use serde::{Deserialize, Serialize};
use weir_core::names::Key;
use weir_core::partition::{Partition, PartitionError, PartitionRange, Partitioning};
use weir_core::schedule::Signal;
use weir_core::zone::Zone;

/// What a trigger shows of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TriggerStatus {
    /// The graph.
    pub graph: String,
    /// The last cron firing handled.
    pub cron_last_firing_ms: Option<u64>,
    /// Cron windows waiting for room.
    pub cron_pending: Vec<String>,
    /// Backfills in progress.
    pub backfills: Vec<Backfill>,
    /// Keys with a schedule.
    pub keys: usize,
    /// When the inventory last loaded.
    pub inventory_loaded_at_ms: Option<u64>,
}

/// Messages of a graph's trigger.
pub enum TriggerMsg {
    /// Something may be due (the timer, or the actor itself).
    Wake,
    /// A new definition was adopted: reread it.
    Adopted,
    /// A run of the graph settled (forwarded engine event).
    Settled {
        /// The partition.
        partition: String,
        /// complete, failed or cancelled.
        state: String,
    },
    /// The event subscription lagged: some settles may be lost.
    EventsLagged,
    /// A signal for a key.
    Signal(Key, Signal, RpcReplyPort<Result<KeyScheduleView, String>>),
    /// Start a backfill.
    Backfill(
        PartitionRange,
        BackfillOrder,
        RpcReplyPort<Result<Backfill, String>>,
    ),
    /// Reload the inventory now; answered when the load ends.
    ReloadInventory(RpcReplyPort<Result<InventoryChange, String>>),
    /// A load ended (from the loader task).
    InventoryLoaded(Result<Vec<Key>, String>),
    /// Apply keys loaded elsewhere (the adopt's first load), as a load
    /// would; answered once the schedules are durable.
    ApplyInventory(Vec<Key>, RpcReplyPort<Result<InventoryChange, String>>),
    /// Every key's schedule, by key.
    Schedules(RpcReplyPort<Vec<KeyScheduleView>>),
    /// The trigger's state.
    Status(RpcReplyPort<TriggerStatus>),
    /// A signal for a key, refused when the key has no schedule (the
    /// inventory does not list it) unless `add`.
    SignalKey {
        /// The key.
        key: Key,
        /// The signal.
        signal: Signal,
        /// Signal a key the inventory does not list (it gets a schedule).
        add: bool,
        /// Its schedule once durable, or why refused.
        reply: RpcReplyPort<Result<KeyScheduleView, String>>,
    },
    /// The same signal for every key with a schedule, in one durable
    /// write; answers the keys signalled.
    SignalAll(Signal, RpcReplyPort<Result<Vec<String>, String>>),
    /// Pause (true) or unpause; answers whether it changed, once durable.
    SetPaused(bool, RpcReplyPort<Result<bool, String>>),
}

impl ractor::Message for TriggerMsg {}

/// A key's schedule, as the engine shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KeyScheduleView {
    /// The key.
    pub key: String,
    /// When its next run is due (ms since the epoch).
    pub due_at_ms: u64,
    /// Why: inventory, schedule, retry, or `signal:<source>`.
    pub due_reason: String,
    /// Who holds the lease, if anyone.
    pub lease_owner: Option<String>,
    /// When the lease ends.
    pub lease_until_ms: Option<u64>,
    /// The partition of the run the lease is for.
    pub running: Option<String>,
    /// When the last run was claimed.
    pub last_started_at_ms: Option<u64>,
    /// When the last run finished.
    pub last_finished_at_ms: Option<u64>,
    /// Why the last run failed.
    pub last_error: Option<String>,
    /// Failed runs since the last success.
    pub consecutive_failures: u32,
    /// When the current signal window opened.
    pub signal_window_started_at_ms: Option<u64>,
}

/// What an inventory load changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryChange {
    /// Keys listed.
    pub keys: usize,
    /// Keys new to the inventory.
    pub added: usize,
    /// Keys no longer listed.
    pub removed: usize,
}

/// Which end of the range starts first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum BackfillOrder {
    /// The oldest window first (Airflow's default).
    #[default]
    Oldest,
    /// The newest window first.
    Newest,
}

impl std::str::FromStr for BackfillOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "oldest" => Ok(BackfillOrder::Oldest),
            "newest" => Ok(BackfillOrder::Newest),
            other => Err(format!(
                "backfill order {other:?} is not one of oldest, newest"
            )),
        }
    }
}

/// One backfill in progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Backfill {
    /// Its number within the graph, from 1.
    pub id: u64,
    /// The first window of the range.
    pub from: Partition,
    /// The last window of the range, included.
    pub to: Partition,
    /// Which end starts first.
    pub order: BackfillOrder,
    /// Windows in the range.
    pub windows: u64,
    /// Windows handled so far (started, or skipped because a run existed).
    pub cursor: u64,
    /// Runs this backfill started.
    pub started: u64,
    /// Windows skipped because their run existed.
    pub skipped: u64,
    /// When it was asked for.
    pub requested_at_ms: u64,
}

impl Backfill {
    /// The range.
    pub fn range(&self) -> PartitionRange {
        PartitionRange {
            from: self.from.clone(),
            to: self.to.clone(),
        }
    }

    /// Every window, in the order they start.
    pub fn ordered_windows(
        &self,
        partitioning: Partitioning,
        windows_max: usize,
        zone: Zone,
    ) -> Result<Vec<Partition>, PartitionError> {
        let mut w = self.range().windows(partitioning, windows_max, zone)?;
        if self.order == BackfillOrder::Newest {
            w.reverse();
        }
        Ok(w)
    }

    /// Whether every window has been handled.
    pub fn is_done(&self) -> bool {
        self.cursor >= self.windows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_reverses_the_range() {
        let b = Backfill {
            id: 1,
            from: "2026-11-01".parse().unwrap(),
            to: "2026-11-03".parse().unwrap(),
            order: BackfillOrder::Newest,
            windows: 3,
            cursor: 0,
            started: 0,
            skipped: 0,
            requested_at_ms: 0,
        };
        let w: Vec<String> = b
            .ordered_windows(Partitioning::Daily, 10, Zone::UTC)
            .unwrap()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(w, ["2026-11-03", "2026-11-02", "2026-11-01"]);
    }
}
