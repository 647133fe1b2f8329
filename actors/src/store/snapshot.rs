//! Snapshots: the queue's tickets, so replay starts from them instead of
//! from the first op ever journaled.
//!
//! The snapshot tree holds `meta` (the last journal sequence covered, the
//! next ticket id, the ticket count) and the live tickets in chunks: under
//! `c` + chunk number, the live tickets whose id divided by
//! [`TICKETS_PER_CHUNK`] is that number, in id order. One value per ticket
//! made opening a store of 1M tickets take 11 s in sled's iteration alone
//! (sled costs microseconds per item); chunks of 16 cut the items 16-fold
//! while a full leaf of them (~17 values of ~5 KiB with 100-byte payloads)
//! stays under sled's blob threshold. A snapshot is incremental: the caller
//! passes the tickets changed since the one before (a put for each live
//! one, a delete for each that left); each chunk they fall in is read,
//! changed and rewritten (removed when empty), with the new `meta`, in one
//! atomic batch. Ids are assigned in order, so changes cluster in few
//! chunks; at worst a snapshot rewrites every chunk, a full snapshot.
//! The journal entries it covers are removed after; until they are, replay
//! skips them by sequence, so a crash between the two steps loses nothing
//! and replays nothing twice. Disk use stays bounded under a steady load:
//! the journal holds at most what came since the last snapshot.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use weir_core::codec;
use weir_core::queue::{Ticket, TicketId};

use super::cold::{IndexWrites, LevelCounts};
use super::layout::{
    chunk_key, decode_chunk, run_error, TicketChunkRef, COUNTS_KEY, LAYOUT_INDEXED, META_KEY,
    TICKETS_PER_CHUNK,
};
use super::{Store, StoreError, TreeId, SNAPSHOT};

/// What a snapshot covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SnapshotMeta {
    /// The last journal sequence whose ops it includes.
    pub seq: u64,
    /// The next ticket id at that point.
    pub next_id: u64,
    /// Live tickets it holds.
    pub tickets: u64,
    /// 2 when it has the ticket indexes of the `cold` module (1: their
    /// per-ticket first form; 0: written before them; either is indexed
    /// again at the next open).
    #[serde(default)]
    pub layout: u32,
}

pub(crate) fn read_meta(store: &Store) -> Result<Option<SnapshotMeta>, StoreError> {
    let Some(bytes) = store
        .inner
        .snapshot
        .get(META_KEY)
        .map_err(|e| store.sled_err(e))?
    else {
        return Ok(None);
    };
    codec::decode(&bytes)
        .map(Some)
        .map_err(|source| StoreError::Corrupt {
            dir: store.dir().to_path_buf(),
            tree: SNAPSHOT,
            key: "meta".into(),
            source,
        })
}

/// The point a snapshot is taken at: the last sequence committed when
/// the caller read its state, and the ops and bytes journaled since the
/// snapshot before, which the new one covers. Taken with
/// [`Store::snapshot_point`] while no commit runs; a snapshot written from
/// it may then run while later commits go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotPoint {
    /// The last journal sequence the snapshot covers.
    pub seq: u64,
    /// Ops journaled since the snapshot before, up to `seq`.
    pub ops: u64,
    /// Bytes journaled since the snapshot before, up to `seq`.
    pub bytes: u64,
}

impl Store {
    /// The point a snapshot taken now covers. Call it while no commit
    /// runs (the queue: between batches), with the state it describes.
    pub fn snapshot_point(&self) -> SnapshotPoint {
        SnapshotPoint {
            seq: self.last_seq(),
            ops: self.inner.ops_since_snapshot.load(Ordering::Relaxed),
            bytes: self.inner.bytes_since_snapshot.load(Ordering::Relaxed),
        }
    }

    /// Writes a snapshot covering the journal up to `seq` (which must be the
    /// last sequence committed when the caller's state was read): `changed`
    /// lists every ticket id changed since the previous snapshot, with its
    /// ticket when live and `None` when it left. Then removes the journal
    /// entries it covers and makes it durable. No commit may run meanwhile;
    /// see [`Store::write_snapshot_at`] for one that may.
    pub fn write_snapshot<'a>(
        &self,
        seq: u64,
        next_id: TicketId,
        tickets: u64,
        changed: impl IntoIterator<Item = (TicketId, Option<&'a Ticket>)>,
    ) -> Result<SnapshotMeta, StoreError> {
        // The counts are read once no other snapshot is being written (one
        // that was would subtract what it covered from them).
        let _one_snapshot = self.one_snapshot();
        let point = SnapshotPoint {
            seq,
            ..self.snapshot_point()
        };
        self.write_snapshot_locked(point, next_id, tickets, changed)
    }

    fn one_snapshot(&self) -> std::sync::MutexGuard<'_, ()> {
        self.inner
            .snapshot_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// [`Store::write_snapshot`] of the state at `point`, while commits
    /// after it may go on: what they journal stays in the journal (past
    /// `point.seq`) and in the counts toward the next snapshot. Reads of
    /// the snapshot's tickets meanwhile see the snapshot before; its batch
    /// lands and its key runs are installed while none runs (the store's
    /// cold gate), so each read sees one snapshot whole.
    pub fn write_snapshot_at<'a>(
        &self,
        point: SnapshotPoint,
        next_id: TicketId,
        tickets: u64,
        changed: impl IntoIterator<Item = (TicketId, Option<&'a Ticket>)>,
    ) -> Result<SnapshotMeta, StoreError> {
        let _one_snapshot = self.one_snapshot();
        self.write_snapshot_locked(point, next_id, tickets, changed)
    }

    /// [`Store::write_snapshot_at`] with `snapshot_lock` held.
    fn write_snapshot_locked<'a>(
        &self,
        point: SnapshotPoint,
        next_id: TicketId,
        tickets: u64,
        changed: impl IntoIterator<Item = (TicketId, Option<&'a Ticket>)>,
    ) -> Result<SnapshotMeta, StoreError> {
        let seq = point.seq;
        self.check_writable()?;
        self.check_space()?;
        self.inject_write(super::FaultPoint::Snapshot, "snapshot")?;
        let started = std::time::Instant::now();
        let inner = &self.inner;
        let last = self.last_seq();
        assert!(
            seq <= last,
            "snapshot at {seq} is past the last committed sequence {last}"
        );
        let meta = SnapshotMeta {
            seq,
            next_id,
            tickets,
            layout: LAYOUT_INDEXED,
        };
        let mut counts = self.read_counts()?.to_map();
        // The changes, by chunk.
        let mut chunks: BTreeMap<u64, Vec<(TicketId, Option<&'a Ticket>)>> = BTreeMap::new();
        for (id, ticket) in changed {
            if let Some(t) = ticket {
                debug_assert_eq!(t.id, id, "changed ticket under its own id");
            }
            chunks
                .entry(id / TICKETS_PER_CHUNK)
                .or_default()
                .push((id, ticket));
        }
        let mut batch = self.batch(TreeId::Snapshot);
        let mut buf = Vec::with_capacity(8 << 10);
        let mut index = IndexWrites::default();
        for (chunk, changes) in chunks {
            let key = chunk_key(chunk);
            let stored = match inner.snapshot.get(key).map_err(|e| self.sled_err(e))? {
                Some(bytes) => decode_chunk(self, &key, &bytes)?.tickets,
                None => Vec::new(),
            };
            let mut live: BTreeMap<TicketId, &Ticket> = stored.iter().map(|t| (t.id, t)).collect();
            for (id, ticket) in changes {
                match ticket {
                    Some(t) => live.insert(id, t),
                    None => live.remove(&id),
                };
            }
            index.chunk(
                &mut batch,
                &mut counts,
                chunk,
                stored.iter(),
                live.values().copied(),
            );
            if live.is_empty() {
                batch.remove(key);
                continue;
            }
            buf.clear();
            let value = TicketChunkRef {
                tickets: live.into_values().collect(),
            };
            codec::encode_packed_into(&value, &mut buf).map_err(|source| StoreError::Encode {
                what: format!("ticket chunk {chunk}"),
                source,
            })?;
            batch.insert(key, buf.as_slice());
        }
        // The key index's change: planned now, installed in memory once
        // the batch has landed (nothing reads the runs meanwhile: the
        // queue waits for its snapshot).
        // Planned under the read lock: lookups go on meanwhile, and no
        // other snapshot installs runs (`snapshot_lock`).
        let run_change = self
            .key_runs()
            .plan(&index.finish(), tickets == 0)
            .map_err(|e| run_error(self, e))?;
        run_change.write(&mut batch);
        let counts_bytes = self.encode("snapshot level counts", &LevelCounts::from_map(&counts))?;
        batch.insert(COUNTS_KEY, counts_bytes);
        let meta_bytes = self.encode("snapshot meta", &meta)?;
        batch.insert(META_KEY, meta_bytes);
        let built_us = started.elapsed().as_micros() as u64;
        // No read of the snapshot's tickets runs from here to the install
        // of the runs: each sees the old snapshot whole, or the new.
        let landing = self.inner.cold_gate.write();
        self.write_batches("snapshot", vec![batch])?;
        let applied_us = started.elapsed().as_micros() as u64;
        // The snapshot must be durable before the entries it covers go.
        self.sync()?;
        let synced_us = started.elapsed().as_micros() as u64;
        let mut runs = self.key_runs_mut();
        runs.install(run_change).map_err(|e| run_error(self, e))?;
        let (key_runs, key_entries) = (runs.len(), runs.entries());
        drop(runs);
        drop(landing);
        inner.snapshot_seq.store(seq, Ordering::Release);
        inner
            .tail_changed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        // What commits after the point journaled counts toward the next.
        let covered = |counter: &std::sync::atomic::AtomicU64, by: u64| {
            let _ = counter.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                Some(n.saturating_sub(by))
            });
        };
        covered(&inner.ops_since_snapshot, point.ops);
        covered(&inner.bytes_since_snapshot, point.bytes);
        let removed = self.remove_journal_upto(seq)?;
        tracing::debug!(
            seq,
            next_id,
            tickets,
            removed,
            key_runs,
            key_entries,
            built_us,
            applied_us,
            synced_us,
            elapsed_us = started.elapsed().as_micros() as u64,
            "snapshot written"
        );
        Ok(meta)
    }

    /// Removes journal entries at or below `seq` (already in the snapshot).
    pub(crate) fn remove_journal_upto(&self, seq: u64) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let end = seq.saturating_add(1).to_be_bytes();
        let mut batch = self.batch(TreeId::Journal);
        let mut removed = 0u64;
        for key in inner.journal.range(..end.as_slice()).keys() {
            let key = key.map_err(|e| self.sled_err(e))?;
            batch.remove(key);
            removed += 1;
        }
        if removed > 0 {
            self.write_batches("journal compaction", vec![batch])?;
        }
        Ok(removed)
    }
}
