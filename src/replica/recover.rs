//! `weir members force-new-group`: a surviving member of a group that lost
//! its majority for good becomes the first member of a new group, as
//! etcd's `--force-new-cluster` does. Offline, on a stopped member's data
//! directory: its store (every write it applied) is kept; its Raft log,
//! vote and membership are dropped, so that, started with `--raft-peers`
//! naming itself alone, it makes a group of one and leads; the others are
//! then added with `weir members add` and catch up from its snapshot.
//!
//! The risk, said before it is taken: entries this member had logged but
//! not applied are dropped, and so is every write the lost majority had
//! committed that this member had not received. Prefer the member with
//! the highest applied index (`weir members --json` while it ran, or the
//! report printed here).

use openraft::LogId;
use weir_actors::store::Store;

use super::log_store::{read_meta, APPLIED};

/// What forgetting the group dropped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Forgotten {
    /// The last log index applied to the store (kept).
    pub applied_index: Option<u64>,
    /// The last index of the dropped log.
    pub last_log_index: Option<u64>,
    /// Log entries past the applied index, dropped with the log.
    pub unapplied_entries: u64,
}

/// Drops the Raft log, vote and membership of a stopped member's store,
/// keeping what it applied. Flushed (and synced) before it returns.
pub fn force_new_group(store: &Store) -> Result<Forgotten, String> {
    let applied = read_meta::<LogId<u64>>(store, APPLIED)?.map(|l| l.index);
    let logs = super::log_store::LogStore::open(store)?;
    let last = logs.last_index();
    let unapplied = match (last, applied) {
        (Some(l), Some(a)) => l.saturating_sub(a),
        (Some(l), None) => l + 1,
        _ => 0,
    };
    logs.clear()?;
    store.replica_tree().clear().map_err(|e| e.to_string())?;
    store.sync_replica().map_err(|e| e.to_string())?;
    tracing::warn!(applied = ?applied, last_log = ?last, unapplied, "replica: the group is forgotten; this member starts a new one");
    Ok(Forgotten {
        applied_index: applied,
        last_log_index: last,
        unapplied_entries: unapplied,
    })
}
