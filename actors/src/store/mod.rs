//! The durable store: one sled `Db` per engine, opened once and shared by
//! handle.
//!
//! Trees:
//! - `journal`: queue ops under big-endian `u64` sequence keys, each value
//!   a [`JournalEntry`] (the ops of one commit, or a chunk of them, and
//!   the records of a commit that fits one value) in weir-core's envelope.
//!   Appended by [`Store::commit`] (group commit: many ops, one durable
//!   flush).
//! - `snapshot`: the queue's tickets by id plus a `meta` record naming the
//!   last journal sequence it covers. Written incrementally: a snapshot
//!   writes only the tickets changed since the one before, so its cost
//!   follows the load, not the queue's size. Also `r`: the last journal
//!   value whose carried records are all written (see `carried`).
//! - `records`: everything else that is durable (definitions, graph runs,
//!   node records, done keys, key schedules, breaker states), by string key.
//! - `expiry`: `(expire_at_ms, record key)` index of records to delete.
//!
//! Large values (task outputs over [`BLOB_INLINE_BYTES_MAX`]) are not in
//! sled: they are content-addressed files under `DATA/blobs/`, written
//! before the record naming them (see the `blobs` module).
//!
//! What a crash leaves: every commit that returned is durable (in the
//! `fsync` mode, through the device cache); every commit that did not
//! return is either wholly there or wholly absent (sled batches are
//! atomic), and replay treats both the same. Journal entries at or below the
//! snapshot's sequence are dead whether or not they were removed yet.
//!
//! Fail-stop: after an append or flush fails, every later write fails with
//! [`StoreError::FailStopped`] until the store is reopened, because the
//! in-memory state of the caller may now be ahead of the disk. A write that
//! would eat into the disk's reserve fail-stops the same way, with
//! [`StoreError::DiskFull`] (see the `disk` module): a full disk costs
//! availability, never data.
//!
//! Opening is guarded: sled's open and recovery run under `catch_unwind`,
//! since sled 0.34.7 panics on some damaged files (a truncated segment
//! indexes out of bounds), and every refusal is a [`StoreError`] that names
//! the data directory's files and what was found.

pub mod backup;
mod blob_files;
mod blobs;
mod carried;
mod close_mark;
mod closed_files;
mod cold;
mod content;
mod damage;
mod disk;
mod error;
mod faults;
mod handle;
mod image;
mod inspect;
mod journal;
mod key_index;
mod keys;
pub mod kv;
mod layout;
mod lock;
mod open;
mod page;
mod page_table;
pub(crate) mod panics;
mod pipeline;
mod raft_wal;
mod records;
mod replay;
mod replicated;
mod replicated_apply;
mod settings;
mod snapshot;
mod sync;
mod write_set;

pub use blobs::{BlobRef, BLOBS_DIR, BLOB_INLINE_BYTES_MAX};
pub use carried::{CarriedPut, CarriedRecords};
pub use cold::StoreCold;
pub use disk::{fallocate_range, statvfs_space, DiskSpace, FreeSpaceProbe};
pub use error::StoreError;
pub use faults::{FaultErrno, FaultInjector, FaultPoint, ENV_FAULT_INJECT};
pub use handle::{DiskRoom, Store};
pub use image::{StoreImage, LOG_KEYS};
pub use inspect::Inspect;
pub use journal::{Commit, CommitInfo, JournalEntry};
pub use kv::MemoryStore;
pub use layout::decode_ticket_chunk;
pub use open::{open_for_inspection, sled_config};
pub use raft_wal::RaftWal;
pub use records::Expiring;
pub use replay::{apply_journal_value, Recovered};
pub use settings::{
    Durability, StoreSettings, ENV_DISK_RESERVE_BYTES, ENV_DISK_RESERVE_PERCENT,
    ENV_RESERVE_FILE_BYTES,
};
pub use snapshot::{SnapshotMeta, SnapshotPoint};
pub(crate) use write_set::WriteBatch;
pub use write_set::{Guard, Replicator, Submitted, TreeId, Write, WriteSet};

pub(crate) use error::printable;
pub(crate) use handle::{EXPIRY, JOURNAL, RAFT_LOG, RECORDS, REPLICA, SNAPSHOT};
