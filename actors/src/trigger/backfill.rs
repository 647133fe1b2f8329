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

// Backfills are what the trigger's calls answer with: they live in `msg`,
// and their old paths stay here.
pub use crate::msg::trigger::{Backfill, BackfillOrder};

/// The key of a graph's backfill record.
pub fn backfill_key(graph: &str) -> String {
    format!("backfill/{graph}")
}

/// A graph's backfills in progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackfillRecord {
    /// The id of the next backfill.
    pub next_id: u64,
    /// Backfills in progress, in the order they were asked for.
    pub backfills: Vec<Backfill>,
}
