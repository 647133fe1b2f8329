//! The Raft log on the member's own sled: entries under big-endian index
//! keys in the `raft_log` tree; the vote, the committed and the last
//! purged log id in the `replica` tree. An append is acknowledged to Raft
//! only once flushed and fsynced (the store's `fsync` mode): the log is
//! what a majority's acknowledgement stands on.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{
    AnyError, Entry, LogId, LogState, OptionalSend, RaftLogReader, StorageError, StorageIOError,
    Vote,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use weir_actors::store::Store;
use weir_core::codec;

use super::types::TypeConfig;

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "purged";

/// The log store: a handle on the member's store.
#[derive(Clone)]
pub struct LogStore {
    pub(super) store: Store,
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
    fn put_meta<T: Serialize>(&self, key: &str, value: &T) -> Result<(), String> {
        let bytes = encode_meta(value)?;
        self.store
            .replica_tree()
            .insert(key, bytes)
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Makes the log durable (sled's flush, then fsync), blocking the
    /// core's task in place: it is on the commit path.
    async fn sync(&self) -> Result<(), String> {
        let store = self.store.clone();
        weir_actors::blocking::in_place(move || store.sync_replica().map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }

    fn last_log_id(&self) -> Result<Option<LogId<u64>>, String> {
        match self
            .store
            .raft_log_tree()
            .last()
            .map_err(|e| e.to_string())?
        {
            None => Ok(None),
            Some((_, v)) => {
                let entry: Entry<TypeConfig> = codec::decode(&v).map_err(|e| e.to_string())?;
                Ok(Some(entry.log_id))
            }
        }
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
        let mut out = Vec::new();
        for item in self.store.raft_log_tree().range(start.to_be_bytes()..) {
            let (k, v) = item.map_err(|e| io(StorageIOError::read_logs, e))?;
            let index = u64::from_be_bytes(k.as_ref().try_into().unwrap_or([0xff; 8]));
            if !range.contains(&index) {
                break;
            }
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
        // The reserve first: sled must never meet a full disk mid-write.
        // Refused, openraft's core stops and the member exits 3.
        self.store
            .ensure_room()
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        let started = std::time::Instant::now();
        let mut encoded = Vec::new();
        for entry in entries {
            let bytes = codec::encode(&entry).map_err(|e| io(StorageIOError::write_logs, e))?;
            encoded.push((entry.log_id.index.to_be_bytes(), bytes));
        }
        let count = encoded.len();
        let tree = self.store.raft_log_tree();
        if count == 1 {
            let (key, bytes) = encoded.swap_remove(0);
            // One entry (a chain's every commit): a plain insert. sled's
            // batch takes its process-wide write lock, waiting out every
            // read and write of the engine in flight, and rolls its log
            // buffer; one key needs neither to be atomic.
            tree.insert(key, bytes)
                .map_err(|e| io(StorageIOError::write_logs, e))?;
        } else {
            let mut batch = weir_actors::store::kv::Batch::default();
            for (key, bytes) in encoded {
                batch.insert(&key, bytes);
            }
            tree.apply_batch(batch)
                .map_err(|e| io(StorageIOError::write_logs, e))?;
        }
        let written = started.elapsed();
        let synced = self.sync().await;
        // The commit path's stages, for profiles: this append, a
        // follower's "append served", "applied", the proposer's
        // "committed".
        tracing::trace!(
            entries = count,
            write_us = written.as_micros() as u64,
            sync_us = (started.elapsed() - written).as_micros() as u64,
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
        let tree = self.store.raft_log_tree();
        let mut batch = weir_actors::store::kv::Batch::default();
        for k in tree.range(log_id.index.to_be_bytes()..).keys() {
            batch.remove(k.map_err(|e| io(StorageIOError::write_logs, e))?);
        }
        tree.apply_batch(batch)
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        self.sync()
            .await
            .map_err(|e| io(StorageIOError::write_logs, e))
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> StorageResult<()> {
        // The purged id first: a crash between the two leaves entries at or
        // below it, which reads skip.
        self.put_meta(PURGED, &log_id)
            .map_err(|e| io(StorageIOError::write_logs, e))?;
        let tree = self.store.raft_log_tree();
        let mut batch = weir_actors::store::kv::Batch::default();
        for k in tree.range(..=log_id.index.to_be_bytes()).keys() {
            batch.remove(k.map_err(|e| io(StorageIOError::write_logs, e))?);
        }
        tree.apply_batch(batch)
            .map_err(|e| io(StorageIOError::write_logs, e))
    }
}
