//! The Raft log in the member's own files (the store's `raft/` segments,
//! appended and fdatasynced: see the store's `raft_wal`); the vote, the
//! committed and the last purged log id in the `replica` tree. An append
//! is acknowledged to Raft only once durable (the store's `fsync` mode):
//! the log is what a majority's acknowledgement stands on.
//!
//! A data directory from before kept the log in sled's `raft_log` tree:
//! the open moves it into the files once (written and synced before the
//! tree is cleared; a move cut by a crash goes on where it stopped).

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, Entry, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError,
    Vote,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use weir_actors::store::{RaftWal, Store, StoreError};
use weir_core::codec;

use super::types::TypeConfig;

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "purged";
/// The state machine's applied log id (written by its apply, last in
/// each entry; read here by a purge, which waits for it).
pub(super) const APPLIED: &str = "applied";

/// The longest a purge waits for the store to apply what it purges (a
/// snapshot's install; past it, the core stops and the member exits 3).
const PURGE_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(120);

/// Entries moved from an older layout's `raft_log` tree per frame.
const MIGRATE_ENTRIES_PER_FRAME: usize = 1_024;

/// The log store: a handle on the member's store and its log's files.
#[derive(Clone)]
pub struct LogStore {
    pub(super) store: Store,
    wal: Arc<Mutex<RaftWal>>,
}

pub(super) type StorageResult<T> = Result<T, StorageError<u64>>;

/// A storage error of kind `make` saying `e`.
pub(super) fn io(
    make: fn(AnyError) -> StorageIOError<u64>,
    e: impl std::fmt::Display,
) -> StorageError<u64> {
    StorageError::IO {
        source: make(AnyError::error(e)),
    }
}

/// Reads a value of the replica tree.
pub(super) fn read_meta<T: DeserializeOwned>(
    store: &Store,
    key: &str,
) -> Result<Option<T>, String> {
    match store.replica_tree().get(key).map_err(|e| e.to_string())? {
        None => Ok(None),
        Some(v) => codec::decode(&v)
            .map(Some)
            .map_err(|e| format!("replica value {key:?} does not decode: {e}")),
    }
}

/// Encodes a value of the replica tree.
pub(super) fn encode_meta<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    codec::encode(value).map_err(|e| e.to_string())
}

impl LogStore {
    /// Opens the log's files, moving an older layout's log into them and
    /// forgetting entries at or below the purged id (a purge cut by a
    /// crash leaves them).
    pub fn open(store: &Store) -> Result<LogStore, String> {
        let mut wal = store.open_raft_wal().map_err(|e| e.to_string())?;
        let tree = store.raft_log_tree();
        if !tree.is_empty() {
            // From past what the files hold: a move cut by a crash goes on
            // where it stopped (the tree is cleared only once all of it is
            // in the files).
            let from = wal.bounds().map_or(0, |(_, last)| last + 1);
            let mut frame = Vec::new();
            let mut moved = 0usize;
            for item in tree.range(from.to_be_bytes()..) {
                let (k, v) = item.map_err(|e| e.to_string())?;
                let index: [u8; 8] = k
                    .as_ref()
                    .try_into()
                    .map_err(|_| format!("raft_log tree: a key of {} bytes, not 8", k.len()))?;
                frame.push((u64::from_be_bytes(index), v.to_vec()));
                moved += 1;
                if frame.len() == MIGRATE_ENTRIES_PER_FRAME {
                    wal.append(&frame).map_err(|e| e.to_string())?;
                    frame.clear();
                }
            }
            wal.append(&frame).map_err(|e| e.to_string())?;
            tracing::info!(
                entries = moved,
                from,
                "replica: the Raft log moved from sled's raft_log tree to its own files"
            );
            tree.clear().map_err(|e| e.to_string())?;
            store.sync_replica().map_err(|e| e.to_string())?;
        }
        let purged: Option<LogId<u64>> = read_meta(store, PURGED)?;
        if let Some(p) = purged {
            wal.purge(p.index).map_err(|e| e.to_string())?;
        }
        Ok(LogStore {
            store: store.clone(),
            wal: Arc::new(Mutex::new(wal)),
        })
    }

    fn wal(&self) -> MutexGuard<'_, RaftWal> {
        self.wal.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the log on the core's task in place (a write and an
    /// fdatasync on the commit path: a hand-off to a blocking thread would
    /// add a wake-up).
    async fn in_place<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut RaftWal) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, String> {
        let logs = self.clone();
        weir_actors::blocking::in_place(move || f(&mut logs.wal()).map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Whether the log holds an entry.
    pub fn is_empty(&self) -> bool {
        self.wal().is_empty()
    }

    /// The last index the log holds.
    pub fn last_index(&self) -> Option<u64> {
        self.wal().bounds().map(|(_, last)| last)
    }

    /// Forgets every entry (a member that forgets its group).
    pub fn clear(&self) -> Result<(), String> {
        self.wal().clear().map_err(|e| e.to_string())
    }

    fn put_meta<T: Serialize>(&self, key: &str, value: &T) -> Result<(), String> {
        let bytes = encode_meta(value)?;
        self.store
            .replica_tree()
            .insert(key, bytes)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Makes the vote and the store durable (sled's flush, then fsync),
    /// blocking the core's task in place.
    async fn sync(&self) -> Result<(), String> {
        let store = self.store.clone();
        weir_actors::blocking::in_place(move || store.sync_replica().map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }

    /// Waits until the store has applied entry `index` or past it. A
    /// snapshot's install runs on the state machine's task while openraft's
    /// core purges the log behind it at once: synced before the install
    /// lands, the store would hold neither the snapshot nor the entries.
    /// (A purge after a snapshot built here finds it applied already.)
    async fn wait_applied(&self, index: u64) -> Result<(), String> {
        let started = std::time::Instant::now();
        loop {
            let applied: Option<LogId<u64>> = read_meta(&self.store, APPLIED)?;
            if applied.is_some_and(|a| a.index >= index) {
                return Ok(());
            }
            if started.elapsed() > PURGE_WAIT_MAX {
                return Err(format!(
                    "the log up to entry {index} is to be purged, but the store has applied only up to {:?} after {} s",
                    applied.map(|a| a.index),
                    PURGE_WAIT_MAX.as_secs()
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    fn last_log_id(&self) -> Result<Option<LogId<u64>>, String> {
        let wal = self.wal();
        let Some((_, last)) = wal.bounds() else {
            return Ok(None);
        };
        let Some((_, v)) = wal.read(last, last).map_err(|e| e.to_string())?.pop() else {
            return Ok(None);
        };
        let entry: Entry<TypeConfig> =
            codec::decode(&v).map_err(|e| format!("log entry {last} does not decode: {e}"))?;
        Ok(Some(entry.log_id))
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        let start = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => x + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(0) => return Ok(Vec::new()),
            Bound::Excluded(x) => x - 1,
            Bound::Unbounded => u64::MAX,
        };
        let read = self
            .wal()
            .read(start, end)
            .map_err(|e| io(StorageIOError::read_logs, e))?;
        let mut out = Vec::with_capacity(read.len());
        for (index, v) in read {
            let entry = codec::decode(&v).map_err(|e| {
                io(
                    StorageIOError::read_logs,
                    format!("log entry {index} does not decode: {e}"),
                )
            })?;
            out.push(entry);
        }
        Ok(out)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        let purged: Option<LogId<u64>> =
            read_meta(&self.store, PURGED).map_err(|e| io(StorageIOError::read_logs, e))?;
        let last = self
            .last_log_id()
            .map_err(|e| io(StorageIOError::read_logs, e))?
            .or(purged);
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> StorageResult<()> {
        self.put_meta(VOTE, vote)
            .map_err(|e| io(StorageIOError::write_vote, e))?;
        self.sync()
            .await
            .map_err(|e| io(StorageIOError::write_vote, e))
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<u64>>> {
        read_meta(&self.store, VOTE).map_err(|e| io(StorageIOError::read_vote, e))
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> StorageResult<()> {
        // Not synced: a lost committed id is learned again from the leader.
        self.put_meta(COMMITTED, &committed)
            .map_err(|e| io(StorageIOError::write_logs, e))
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<u64>>> {
        Ok(read_meta::<Option<LogId<u64>>>(&self.store, COMMITTED)
            .map_err(|e| io(StorageIOError::read_logs, e))?
            .flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        // The reserve first: the disk must never fill mid-write.
        // Refused, openraft's core stops and the member exits 3.
        self.store
            .ensure_room()
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        let started = std::time::Instant::now();
        let mut encoded = Vec::new();
        for entry in entries {
            let bytes = codec::encode(&entry).map_err(|e| io(StorageIOError::write_logs, e))?;
            encoded.push((entry.log_id.index, bytes));
        }
        let count = encoded.len();
        let written = started.elapsed();
        let synced = self.in_place(move |wal| wal.append(&encoded)).await;
        // The commit path's stages, for profiles: this append, a
        // follower's "append served", "applied", the proposer's
        // "committed".
        tracing::trace!(
            entries = count,
            encode_us = written.as_micros() as u64,
            write_sync_us = (started.elapsed() - written).as_micros() as u64,
            "replica: log appended"
        );
        let failed = synced.as_ref().err().cloned();
        callback.log_io_completed(synced.map_err(std::io::Error::other));
        match failed {
            None => Ok(()),
            Some(e) => Err(io(StorageIOError::write_logs, e)),
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> StorageResult<()> {
        self.in_place(move |wal| wal.truncate(log_id.index))
            .await
            .map_err(|e| io(StorageIOError::write_logs, e))
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> StorageResult<()> {
        // Once the store has applied past the id, the purged id first, and
        // the store synced with it: the state machine's applies are not
        // synced one by one (the log holds them), so it is made durable
        // past the entries about to go. A crash after it leaves entries at
        // or below the id, which the open forgets.
        self.wait_applied(log_id.index)
            .await
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        self.put_meta(PURGED, &log_id)
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        self.sync()
            .await
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        self.wal()
            .purge(log_id.index)
            .map_err(|e| io(StorageIOError::write_logs, e))
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};
    use weir_actors::store::StoreSettings;

    use super::*;

    fn blank(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    fn ids(entries: &[Entry<TypeConfig>]) -> Vec<u64> {
        entries.iter().map(|e| e.log_id.index).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_older_layouts_log_moves_into_the_files_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        {
            let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
            for i in 1..=3 {
                let bytes = codec::encode(&blank(i)).unwrap();
                store
                    .raft_log_tree()
                    .insert(i.to_be_bytes(), bytes)
                    .unwrap();
            }
            store.sync_replica().unwrap();
        }
        for _ in 0..2 {
            let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
            let mut logs = LogStore::open(&store).unwrap();
            assert!(store.raft_log_tree().is_empty());
            assert_eq!(
                ids(&logs.try_get_log_entries(0..).await.unwrap()),
                [1, 2, 3]
            );
            assert_eq!(ids(&logs.try_get_log_entries(2..=2).await.unwrap()), [2]);
            let state = logs.get_log_state().await.unwrap();
            assert_eq!(state.last_log_id.map(|l| l.index), Some(3));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_move_cut_by_a_crash_goes_on_where_it_stopped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
        let encoded = |i: u64| codec::encode(&blank(i)).unwrap();
        for i in 1..=5u64 {
            store
                .raft_log_tree()
                .insert(i.to_be_bytes(), encoded(i))
                .unwrap();
        }
        // The files got the first two, then the process died.
        let mut wal = store.open_raft_wal().unwrap();
        wal.append(&[(1, encoded(1)), (2, encoded(2))]).unwrap();
        drop(wal);
        let mut logs = LogStore::open(&store).unwrap();
        assert!(store.raft_log_tree().is_empty());
        assert_eq!(
            ids(&logs.try_get_log_entries(0..).await.unwrap()),
            [1, 2, 3, 4, 5]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_purge_is_remembered_and_its_entries_stay_forgotten() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        {
            let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
            let mut logs = LogStore::open(&store).unwrap();
            let frame: Vec<(u64, Vec<u8>)> = (1..=5)
                .map(|i| (i, codec::encode(&blank(i)).unwrap()))
                .collect();
            logs.wal().append(&frame).unwrap();
            // The purge waits for the store to have applied what it purges.
            let mut purging = logs.clone();
            let purge = tokio::spawn(async move { purging.purge(blank(5).log_id).await });
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert!(
                !purge.is_finished(),
                "purged before the store applied entry 5"
            );
            logs.put_meta(APPLIED, &blank(5).log_id).unwrap();
            purge.await.unwrap().unwrap();
            // One frame: the purge forgets the entries, the file keeps them.
            let state = logs.get_log_state().await.unwrap();
            assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(5));
            assert_eq!(state.last_log_id.map(|l| l.index), Some(5));
            assert!(logs.try_get_log_entries(0..).await.unwrap().is_empty());
        }
        let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
        let mut logs = LogStore::open(&store).unwrap();
        assert!(logs.try_get_log_entries(0..).await.unwrap().is_empty());
        assert!(logs.is_empty());
        let state = logs.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.map(|l| l.index), Some(5));
    }
}
