//! Backfills: start the runs of every window of a range, oldest or newest
//! first, never more than the graph's `max_active_runs` active at once.
//!
//! The record `backfill/<graph>` lists the graph's backfills in the order
//! they were asked for; each keeps its range, its order and a cursor: the
//! windows before the cursor (in the backfill's order) have been started,
//! or had a run already. The windows themselves are not stored: they are a
//! function of the range, so a backfill of 100,000 windows is a record of a
//! few dozen bytes. The cursor moves only after a start returned, so a
//! crash restarts at most the windows of one start call, and those starts
//! are no-ops (a run exists at most once per partition). A backfill whose
//! cursor reaches its end leaves the record.

use serde::{Deserialize, Serialize};
use weir_core::partition::{Partition, PartitionError, PartitionRange, Partitioning};

/// The key of a graph's backfill record.
pub fn backfill_key(graph: &str) -> String {
    format!("backfill/{graph}")
}

/// Which end of the range starts first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    ) -> Result<Vec<Partition>, PartitionError> {
        let mut w = self.range().windows(partitioning, windows_max)?;
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

/// A graph's backfills in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackfillRecord {
    /// The id of the next backfill.
    pub next_id: u64,
    /// Backfills in progress, in the order they were asked for.
    pub backfills: Vec<Backfill>,
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
            .ordered_windows(Partitioning::Daily, 10)
            .unwrap()
            .iter()
            .map(|p| p.to_string())
            .collect();
        assert_eq!(w, ["2026-11-03", "2026-11-02", "2026-11-01"]);
    }
}
