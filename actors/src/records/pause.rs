//! Pausing a graph's triggers (Airflow's paused DAG).
//!
//! The record `pause/<graph>` says whether the graph is paused. While it
//! is, the trigger handles no cron firing (the last firing handled stays
//! where it was), paces no backfill and claims no key; signals and
//! backfill requests are still recorded, and inventories still reload. On
//! unpause the firings missed meanwhile follow the graph's catch-up rule
//! (the newest only, or every one up to the bound), backfills go on from
//! their cursors and due keys start. Explicit starts and reruns do not go
//! through the trigger, so they work on a paused graph. The record is
//! written before the change is answered, and a restarted trigger reads
//! it, so a pause survives restarts.

use serde::{Deserialize, Serialize};

use crate::store::{Store, StoreError};

/// The key of a graph's pause record.
pub fn pause_key(graph: &str) -> String {
    format!("pause/{graph}")
}

/// Whether a graph is paused, and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseRecord {
    /// Paused.
    pub paused: bool,
    /// When it was last paused or unpaused.
    pub changed_at_ms: u64,
}

/// Whether `graph` is paused, from the store: readable with no engine
/// running. A graph never paused is not.
pub fn paused(store: &Store, graph: &str) -> Result<bool, StoreError> {
    Ok(store
        .get::<PauseRecord>(&pause_key(graph))?
        .is_some_and(|r| r.paused))
}
