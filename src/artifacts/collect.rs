//! The collector: deletes the artifact objects that no node record
//! references any more (their runs expired, or an upload's record never
//! came), once they are older than the grace.
//!
//! Mark and sweep, with no state of its own: a pass lists the stored
//! objects first, then reads every node record's artifacts, then deletes
//! what [`weir_core::artifact::collect`] decides. A crash mid-pass leaves
//! some of the deletions undone, which the next pass does; it never
//! deletes an object a live record names (two runs sharing content keep
//! it while either lives). Listing before reading the records, and the
//! grace, cover an upload whose record is being journaled during the pass.
//!
//! It runs beside an engine (on a replicated engine's leader only, as the
//! engine does), holding only a weak reference to it: when the engine
//! stops, the next pass does not start.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use weir_actors::records::done::{DoneRecord, DONE_PREFIX};
use weir_core::artifact::{self, Stored};

use super::{ArtifactStore, Shared};
use crate::Engine;

/// The shortest time between two passes.
pub const EVERY_MS_MIN: u64 = 1_000;
/// The longest time between two passes.
pub const EVERY_MS_MAX: u64 = 10 * 60 * 1000;
/// The most deletions one pass makes (the rest wait for the next).
pub const DELETES_PER_PASS_MAX: usize = 10_000;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Artifact objects listed.
    pub listed: usize,
    /// Distinct hashes live records reference.
    pub referenced: usize,
    /// Objects deleted.
    pub deleted: usize,
    /// Half-written uploads of a folder store removed (a crash mid-put
    /// leaves one beside its object's name, never under it).
    pub staged_removed: usize,
}

/// Between two passes: half the grace, within the bounds.
pub fn every_ms(grace_ms: u64) -> u64 {
    (grace_ms / 2).clamp(EVERY_MS_MIN, EVERY_MS_MAX)
}

/// Starts the collector of `engine`'s artifacts, when they are in a store
/// it owns (not a worker's lazy one).
pub fn spawn(engine: &Arc<Engine>, artifacts: Shared) {
    let ArtifactStore::Store { grace_ms, .. } = &*artifacts else {
        return;
    };
    let every = Duration::from_millis(every_ms(*grace_ms));
    let weak: Weak<Engine> = Arc::downgrade(engine);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            let Some(engine) = weak.upgrade() else {
                return;
            };
            let store = engine.store().clone();
            let now_ms = engine.now_ms();
            // Not held across the pass: the engine's owner unwraps it at
            // shutdown.
            drop(engine);
            match pass(&store, &artifacts, now_ms).await {
                Ok(p) if p.deleted > 0 => {
                    tracing::info!(
                        listed = p.listed,
                        referenced = p.referenced,
                        deleted = p.deleted,
                        "artifacts collected"
                    )
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "artifact collection failed; next pass retries")
                }
            }
        }
    });
}

/// One pass over `artifacts`' store against the records of `store`.
pub async fn pass(
    store: &weir_actors::store::Store,
    artifacts: &ArtifactStore,
    now_ms: u64,
) -> Result<Pass, String> {
    let Some(objects) = artifacts.store() else {
        return Ok(Pass::default());
    };
    // The listing comes first: an object written after it is not
    // considered, and one listed whose record lands meanwhile is younger
    // than the grace.
    let listed = objects.list(artifact::KEY_PREFIX).await?;
    let stored: Vec<Stored> = listed
        .iter()
        .filter_map(|l| {
            artifact::hash_of_key(&l.key).map(|h| Stored {
                hash: h.to_string(),
                modified_ms: l.modified_ms,
            })
        })
        .collect();
    let records = store.clone();
    let referenced = tokio::task::spawn_blocking(move || {
        let mut hashes: HashSet<String> = HashSet::new();
        records
            .scan_each::<DoneRecord>(DONE_PREFIX, |_, d| {
                hashes.extend(d.artifacts.into_iter().map(|a| a.hash));
            })
            .map(|_| hashes)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("reading node records: {e}"))?;
    let mut doomed = artifact::collect(&stored, &referenced, now_ms, artifacts.grace_ms());
    doomed.truncate(DELETES_PER_PASS_MAX);
    let mut deleted = 0;
    for hash in &doomed {
        objects.delete(&artifact::object_key(hash)).await?;
        tracing::debug!(hash = %hash, "artifact deleted: no record references it");
        deleted += 1;
    }
    let staged_removed = match objects.local_folder() {
        Some(root) => {
            let dir = root.join(artifact::KEY_PREFIX);
            let grace_ms = artifacts.grace_ms();
            tokio::task::spawn_blocking(move || remove_staged(&dir, now_ms, grace_ms))
                .await
                .map_err(|e| e.to_string())?
        }
        None => 0,
    };
    Ok(Pass {
        listed: stored.len(),
        referenced: referenced.len(),
        deleted,
        staged_removed,
    })
}

/// Removes the staged uploads (`<hash>#<n>`) under `dir` older than the
/// grace: a folder store writes an object to such a file and renames it
/// into place, so one left behind is an upload a crash cut short. Errors
/// are traced and leave the file for the next pass.
fn remove_staged(dir: &std::path::Path, now_ms: u64, grace_ms: u64) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some((hash, _)) = name.to_str().and_then(|n| n.split_once('#')) else {
            continue;
        };
        if !artifact::is_hash(hash) {
            continue;
        }
        let modified_ms = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(now_ms, |d| d.as_millis() as u64);
        if now_ms.saturating_sub(modified_ms) <= grace_ms {
            continue;
        }
        match std::fs::remove_file(e.path()) {
            Ok(()) => removed += 1,
            Err(err) => {
                tracing::warn!(file = %e.path().display(), error = %err, "a staged upload was not removed")
            }
        }
    }
    removed
}
