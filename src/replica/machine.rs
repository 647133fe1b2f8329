//! The replicated state machine: the member's weir store. A committed
//! entry's write set is applied, then the log id it was applied at, so
//! after a crash the store says where replay starts (an entry applied in
//! part is applied again: see the store's `replicated_apply`). Applies are
//! not synced: the log is durable, and a snapshot syncs the store before
//! the log behind it may be purged.

use std::io::Cursor;
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{
    Entry, EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StorageIOError, StoredMembership,
};
use tokio::sync::Mutex;
use weir_actors::store::Store;

use super::log_store::{encode_meta, io, read_meta, StorageResult, APPLIED};
use super::types::{Member, TypeConfig};

const MEMBERSHIP: &str = "membership";

/// The last snapshot: its meta and its image.
type Current = Option<(SnapshotMeta<u64, Member>, Vec<u8>)>;
/// The applied log id and membership.
type Applied = (Option<LogId<u64>>, StoredMembership<u64, Member>);

/// The state machine: the store, and the last snapshot built or installed.
#[derive(Clone)]
pub struct Machine {
    pub(super) store: Store,
    /// Held while applying and while an image is read, so an image is the
    /// store at one applied index.
    gate: Arc<Mutex<()>>,
    current: Arc<std::sync::Mutex<Current>>,
}

impl Machine {
    pub(super) fn new(store: Store) -> Machine {
        Machine {
            store,
            gate: Arc::new(Mutex::new(())),
            current: Arc::new(std::sync::Mutex::new(None)),
        }
    }

    fn applied(&self) -> Result<Applied, String> {
        let applied = read_meta::<LogId<u64>>(&self.store, APPLIED)?;
        let membership = read_meta(&self.store, MEMBERSHIP)?.unwrap_or_default();
        Ok((applied, membership))
    }
}

impl RaftStateMachine<TypeConfig> for Machine {
    type SnapshotBuilder = Machine;

    async fn applied_state(&mut self) -> StorageResult<Applied> {
        self.applied()
            .map_err(|e| io(StorageIOError::read_state_machine, e))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Vec<bool>>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let count = entries.len();
        let started = std::time::Instant::now();
        let _gate = self.gate.lock().await;
        let gated = started.elapsed();
        let store = self.store.clone();
        // In place: the leader's apply is on the commit path.
        let (applied, hop) = weir_actors::blocking::in_place(move || {
            let hop = started.elapsed();
            let mut out = Vec::with_capacity(entries.len());
            for entry in entries {
                let log_id = encode_meta(&entry.log_id)?;
                let empty: Vec<weir_actors::store::WriteSet> = Vec::new();
                let (sets, membership) = match &entry.payload {
                    EntryPayload::Blank => (&empty, None),
                    EntryPayload::Normal(sets) => (sets, None),
                    EntryPayload::Membership(m) => (
                        &empty,
                        Some(encode_meta(&StoredMembership::new(
                            Some(entry.log_id),
                            m.clone(),
                        ))?),
                    ),
                };
                // The applied log id goes last, after the membership.
                let meta: Vec<(&str, Vec<u8>)> =
                    membership.map(|m| (MEMBERSHIP, m)).into_iter().collect();
                let held = store
                    .apply_replicated(&log_id, sets, &meta, APPLIED)
                    .map_err(|e| format!("entry {}: {e}", entry.log_id))?;
                out.push(held);
            }
            Ok::<_, String>((out, hop))
        })
        .await
        .map_err(|e| io(StorageIOError::write_state_machine, e))?
        .map_err(|e| io(StorageIOError::write_state_machine, e))?;
        // The commit path's stages (see the log store's "log appended").
        tracing::trace!(
            entries = count,
            gate_us = gated.as_micros() as u64,
            hop_us = hop.as_micros() as u64,
            elapsed_us = started.elapsed().as_micros() as u64,
            "replica: applied"
        );
        Ok(applied)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<Cursor<Vec<u8>>>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, Member>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> StorageResult<()> {
        let bytes = snapshot.into_inner();
        let _gate = self.gate.lock().await;
        let store = self.store.clone();
        let image = bytes.clone();
        tokio::task::spawn_blocking(move || store.install_image(&image))
            .await
            .map_err(|e| io(StorageIOError::write_state_machine, e))?
            .map_err(|e| io(StorageIOError::write_state_machine, e))?;
        tracing::info!(snapshot = %meta.snapshot_id, last = ?meta.last_log_id, bytes = bytes.len(), "replica: snapshot installed");
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some((meta.clone(), bytes));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        Ok(current.as_ref().map(|(meta, bytes)| Snapshot {
            meta: meta.clone(),
            snapshot: Box::new(Cursor::new(bytes.clone())),
        }))
    }
}

impl RaftSnapshotBuilder<TypeConfig> for Machine {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let _gate = self.gate.lock().await;
        let (applied, membership) = self
            .applied()
            .map_err(|e| io(StorageIOError::read_state_machine, e))?;
        let store = self.store.clone();
        // Synced first: the log up to `applied` may be purged once the
        // snapshot exists, and the store is then all there is of it.
        let bytes = tokio::task::spawn_blocking(move || {
            store.sync_replica()?;
            store.export_image()
        })
        .await
        .map_err(|e| io(StorageIOError::read_state_machine, e))?
        .map_err(|e| io(StorageIOError::read_state_machine, e))?;
        let snapshot_id = match &applied {
            Some(id) => format!("{}-{}-{}", id.leader_id, id.index, bytes.len()),
            None => format!("empty-{}", bytes.len()),
        };
        let meta = SnapshotMeta {
            last_log_id: applied,
            last_membership: membership,
            snapshot_id,
        };
        tracing::info!(snapshot = %meta.snapshot_id, bytes = bytes.len(), "replica: snapshot built");
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((meta.clone(), bytes.clone()));
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}
