//! Snapshots: the queue's tickets, so replay starts from them instead of
//! from the first op ever journaled.
//!
//! The snapshot tree holds `meta` (the last journal sequence covered, the
//! next ticket id, the ticket count) and one value per live ticket under
//! `t` + its id. A snapshot is incremental: the caller passes the tickets
//! changed since the one before (a put for each live one, a delete for each
//! that left), and they are written with the new `meta` in one atomic batch.
//! The journal entries it covers are removed after; until they are, replay
//! skips them by sequence, so a crash between the two steps loses nothing
//! and replays nothing twice. Disk use stays bounded under a steady load:
//! the journal holds at most what came since the last snapshot.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use weir_core::codec;
use weir_core::queue::{Ticket, TicketId};

use super::{Store, StoreError, SNAPSHOT};

/// The key of the snapshot's meta record.
pub(crate) const META_KEY: &[u8] = b"meta";
/// The prefix of ticket keys.
pub(crate) const TICKET_PREFIX: u8 = b't';

/// What a snapshot covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SnapshotMeta {
    /// The last journal sequence whose ops it includes.
    pub seq: u64,
    /// The next ticket id at that point.
    pub next_id: u64,
    /// Live tickets it holds.
    pub tickets: u64,
}

pub(crate) fn ticket_key(id: TicketId) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = TICKET_PREFIX;
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
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

impl Store {
    /// Writes a snapshot covering the journal up to `seq` (which must be the
    /// last sequence committed when the caller's state was read): `changed`
    /// lists every ticket id changed since the previous snapshot, with its
    /// ticket when live and `None` when it left. Then removes the journal
    /// entries it covers and makes it durable.
    pub fn write_snapshot<'a>(
        &self,
        seq: u64,
        next_id: TicketId,
        tickets: u64,
        changed: impl IntoIterator<Item = (TicketId, Option<&'a Ticket>)>,
    ) -> Result<SnapshotMeta, StoreError> {
        self.check_writable()?;
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
        };
        let mut batch = sled::Batch::default();
        let mut buf = Vec::with_capacity(256);
        for (id, ticket) in changed {
            match ticket {
                Some(t) => {
                    debug_assert_eq!(t.id, id, "changed ticket under its own id");
                    buf.clear();
                    codec::encode_into(t, &mut buf).map_err(|source| StoreError::Encode {
                        what: format!("ticket {id}"),
                        source,
                    })?;
                    batch.insert(&ticket_key(id), buf.as_slice());
                }
                None => batch.remove(&ticket_key(id)),
            }
        }
        let meta_bytes = self.encode("snapshot meta", &meta)?;
        batch.insert(META_KEY, meta_bytes);
        if let Err(e) = inner.snapshot.apply_batch(batch) {
            self.fail();
            return Err(self.sled_err(e));
        }
        // The snapshot must be durable before the entries it covers go.
        self.sync()?;
        inner.snapshot_seq.store(seq, Ordering::Release);
        inner.ops_since_snapshot.store(0, Ordering::Relaxed);
        inner.bytes_since_snapshot.store(0, Ordering::Relaxed);
        self.remove_journal_upto(seq)?;
        tracing::debug!(seq, next_id, tickets, "snapshot written");
        Ok(meta)
    }

    /// Removes journal entries at or below `seq` (already in the snapshot).
    pub(crate) fn remove_journal_upto(&self, seq: u64) -> Result<u64, StoreError> {
        let inner = &self.inner;
        let end = seq.saturating_add(1).to_be_bytes();
        let mut batch = sled::Batch::default();
        let mut removed = 0u64;
        for key in inner.journal.range(..end.as_slice()).keys() {
            let key = key.map_err(|e| self.sled_err(e))?;
            batch.remove(key);
            removed += 1;
        }
        if removed > 0 {
            if let Err(e) = inner.journal.apply_batch(batch) {
                self.fail();
                return Err(self.sled_err(e));
            }
        }
        Ok(removed)
    }
}
