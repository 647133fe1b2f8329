//! The durable store: one sled `Db` per engine, opened once and shared by
//! handle.
//!
//! Trees:
//! - `journal`: queue ops under big-endian `u64` sequence keys, each value
//!   a [`JournalEntry`] (the ops of one commit, or a chunk of them) in
//!   weir-core's envelope. Appended by [`Store::commit`] (group commit: many
//!   ops, one durable flush).
//! - `snapshot`: the queue's tickets by id plus a `meta` record naming the
//!   last journal sequence it covers. Written incrementally: a snapshot
//!   writes only the tickets changed since the one before, so its cost
//!   follows the load, not the queue's size.
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

mod blobs;
mod cold;
mod damage;
mod disk;
mod faults;
mod journal;
mod keys;
mod lock;
mod page;
mod records;
mod replay;
mod snapshot;

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use weir_core::codec::CodecError;
use weir_core::queue::TicketId;

pub use blobs::{BlobRef, BLOBS_DIR, BLOB_INLINE_BYTES_MAX};
pub use cold::StoreCold;
pub use disk::{statvfs_space, DiskSpace, FreeSpaceProbe};
pub use faults::{FaultErrno, FaultInjector, FaultPoint, ENV_FAULT_INJECT};
pub use journal::{Commit, CommitInfo, JournalEntry};
pub use records::Expiring;
pub use replay::{apply_journal_value, Recovered};
pub use snapshot::{decode_ticket_chunk, SnapshotMeta};

/// How durable a returned commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// sled's flush, then an fsync of sled's files: a returned commit
    /// survives a process crash, a kernel crash and a power cut (as far as
    /// the device honours fsync). The default.
    #[default]
    Fsync,
    /// sled's flush only (`sync_file_range`): survives a process crash
    /// (kill -9); a power cut may lose recent commits, since the device
    /// cache is not flushed (sled issue 1452).
    Flush,
    /// No flush at commit: sled writes in the background (every 500 ms). A
    /// process crash may lose the last half second of commits. For tests
    /// and throw-away work only.
    None,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "flush" => Ok(Durability::Flush),
            "none" => Ok(Durability::None),
            other => Err(format!(
                "durability {other:?} is not one of fsync, flush, none"
            )),
        }
    }
}

/// Settings of a store. Every limit is explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreSettings {
    /// How durable a returned commit is.
    pub durability: Durability,
    /// The largest encoded op (an Enqueue with its payload), in bytes.
    pub entry_bytes_max: usize,
    /// Ops journaled since the last snapshot that call for a new one.
    pub snapshot_ops: u64,
    /// Journal bytes since the last snapshot that call for a new one.
    pub snapshot_bytes: u64,
    /// Journal bytes past which commits are refused until a snapshot is
    /// taken (the snapshot is overdue: the caller ignored `snapshot_due`).
    pub journal_bytes_max: u64,
    /// Ops packed into one journal value at most (a value also closes near
    /// 6 KiB of ops); a commit of more ops writes several consecutive
    /// values in the same atomic batch, so no value grows into one of
    /// sled's unsynced blob files.
    pub entry_ops_max: usize,
    /// sled's page cache, in bytes.
    pub cache_bytes: u64,
    /// Pending tickets of one pool and priority read from the store at a
    /// time, at open and as they are handed out: the rest of a backlog
    /// stays in the store (see weir-core's `cold` module), so an open
    /// reads this many per level, however many are pending.
    pub window_tickets: usize,
    /// Records deleted in one expiry pass at most.
    pub expiry_batch_max: usize,
    /// Free bytes the store leaves on its filesystem at the least: a write
    /// that finds less free (or less than `disk_reserve_percent`, whichever
    /// is larger) is refused with [`StoreError::DiskFull`].
    pub disk_reserve_min_bytes: u64,
    /// Percent of the filesystem's size the store leaves free at the least
    /// (see `disk_reserve_min_bytes`); 0 by default.
    pub disk_reserve_percent: u32,
    /// Size of the preallocated reserve file (`DATA/reserve`), deleted when
    /// the store hits the disk reserve so that the last flush and the next
    /// open have room; 0 for none.
    pub reserve_file_bytes: u64,
    /// How the free space is measured (`statvfs` of the data directory;
    /// tests pass a fake). Not serialized.
    #[serde(skip)]
    pub free_space: FreeSpaceProbe,
    /// Faults to inject before writes, flushes and fsyncs (see the
    /// `faults` module): for tests only; `None` by default. Not
    /// serialized.
    #[doc(hidden)]
    #[serde(skip)]
    pub faults: Option<FaultInjector>,
}

/// Environment variables that override the disk settings, for `weir run`
/// on a small filesystem (and the tests that fill one).
pub const ENV_DISK_RESERVE_BYTES: &str = "WEIR_DISK_RESERVE_BYTES";
/// See [`ENV_DISK_RESERVE_BYTES`]: overrides `disk_reserve_percent`.
pub const ENV_DISK_RESERVE_PERCENT: &str = "WEIR_DISK_RESERVE_PERCENT";
/// See [`ENV_DISK_RESERVE_BYTES`]: overrides `reserve_file_bytes`.
pub const ENV_RESERVE_FILE_BYTES: &str = "WEIR_RESERVE_FILE_BYTES";

impl StoreSettings {
    /// These settings with the disk settings the environment overrides
    /// ([`ENV_DISK_RESERVE_BYTES`], [`ENV_DISK_RESERVE_PERCENT`],
    /// [`ENV_RESERVE_FILE_BYTES`]; whole numbers). An unparsable value is an
    /// error naming the variable.
    pub fn with_env_overrides(mut self) -> Result<Self, String> {
        fn read(name: &str) -> Result<Option<u64>, String> {
            match std::env::var(name) {
                Err(_) => Ok(None),
                Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|e| {
                    format!("environment variable {name}={v:?}: {e} (give a whole number)")
                }),
            }
        }
        if let Some(v) = read(ENV_DISK_RESERVE_BYTES)? {
            self.disk_reserve_min_bytes = v;
        }
        if let Some(v) = read(ENV_DISK_RESERVE_PERCENT)? {
            if v > 100 {
                return Err(format!(
                    "environment variable {ENV_DISK_RESERVE_PERCENT}={v}: a percent is at most 100"
                ));
            }
            self.disk_reserve_percent = v as u32;
        }
        if let Some(v) = read(ENV_RESERVE_FILE_BYTES)? {
            self.reserve_file_bytes = v;
        }
        if let Ok(spec) = std::env::var(ENV_FAULT_INJECT) {
            let faults = FaultInjector::parse(&spec)
                .map_err(|e| format!("environment variable {ENV_FAULT_INJECT}: {e}"))?;
            tracing::warn!(spec = %spec, "store fault injection is on (a test setting)");
            self.faults = Some(faults);
        }
        Ok(self)
    }
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            durability: Durability::Fsync,
            entry_bytes_max: 1 << 20,
            // The journal tail is what an open replays (about 5 us an op):
            // 20,000 ops keep that near 100 ms, and a snapshot writes only
            // the tickets changed since the last, so snapshotting ten times
            // as often costs no more in all (200,000 made a restart after a
            // busy minute take half a second in `weir bench torture`).
            snapshot_ops: 20_000,
            snapshot_bytes: 16 << 20,
            journal_bytes_max: 512 << 20,
            entry_ops_max: 256,
            cache_bytes: 256 << 20,
            window_tickets: 1_024,
            expiry_batch_max: 10_000,
            disk_reserve_min_bytes: 64 << 20,
            // A share of the filesystem is opt-in: 5% of a large shared
            // disk (12 GiB of 252) refused every write on a machine whose
            // other tenants had filled it, though 64 MiB is room enough
            // for sled's last segment writes and the next open.
            disk_reserve_percent: 0,
            reserve_file_bytes: 16 << 20,
            free_space: FreeSpaceProbe::default(),
            faults: None,
        }
    }
}

/// A failure of the store. Messages say what and where.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process (or this one) has the data directory open.
    #[error("data directory {0} is in use by another weir process")]
    InUse(PathBuf),
    /// The data directory could not be created or opened.
    #[error("data directory {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// sled failed.
    #[error("store {dir}: {source}")]
    Sled {
        /// The data directory.
        dir: PathBuf,
        /// The cause.
        source: sled::Error,
    },
    /// A write into sled failed (what the store was writing is named).
    #[error("store {dir}: {what} failed: {source}")]
    Write {
        /// The data directory.
        dir: PathBuf,
        /// What was written: `journal commit`, `record batch`, ...
        what: &'static str,
        /// The cause.
        source: sled::Error,
    },
    /// sled's flush of its log failed.
    #[error("store {dir}: flush of {dir}/sled failed: {source}")]
    Flush {
        /// The data directory.
        dir: PathBuf,
        /// The cause.
        source: sled::Error,
    },
    /// An fsync of the data directory's files failed.
    #[error("store {dir}: fsync of {file}: {source}")]
    Fsync {
        /// The data directory.
        dir: PathBuf,
        /// The file.
        file: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A stored value does not decode.
    #[error("store {dir}: tree {tree}, key {key}: {source}")]
    Corrupt {
        /// The data directory.
        dir: PathBuf,
        /// The tree.
        tree: &'static str,
        /// The key, printable.
        key: String,
        /// The cause.
        source: CodecError,
    },
    /// The journal or snapshot is inconsistent (a gap in sequences, a
    /// snapshot that does not restore).
    #[error("store {dir}: tree {tree}: {what}")]
    Inconsistent {
        /// The data directory.
        dir: PathBuf,
        /// The tree.
        tree: &'static str,
        /// What is wrong.
        what: String,
    },
    /// The filesystem of the data directory has less free space than the
    /// reserve: the write was refused and the store fail-stopped before
    /// sled could run out of space mid-write.
    #[error(
        "store {dir}: disk full: {free_bytes} bytes free, under the reserve of {reserve_bytes} bytes; \
         weir stopped writing so that nothing acknowledged is lost: free space on the filesystem \
         of {dir} (or enlarge it), then run again; the work resumes where it stopped"
    )]
    DiskFull {
        /// The data directory.
        dir: PathBuf,
        /// Free bytes found.
        free_bytes: u64,
        /// The reserve the store keeps.
        reserve_bytes: u64,
    },
    /// The store's files are damaged: sled refused them or panicked on them.
    #[error(
        "store {dir}: {file} is damaged ({what}); restore the data directory from a \
         backup, or move it aside to start empty"
    )]
    Damaged {
        /// The data directory.
        dir: PathBuf,
        /// The file (or files) found damaged.
        file: String,
        /// What was found.
        what: String,
    },
    /// A write failed earlier (the second field says which, and why); the
    /// store refuses writes until reopened.
    #[error("store {0} refuses writes after an earlier failure ({1}); reopen it")]
    FailStopped(PathBuf, String),
    /// A blob named by a record is missing or damaged.
    #[error("blob {path}: {what}")]
    Blob {
        /// The blob's file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A blob could not be written.
    #[error("blob {path}: cannot write: {source}")]
    BlobWrite {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An op is larger than the entry limit.
    #[error("op of {size} bytes is over the entry limit of {limit} bytes (key {key:?})")]
    EntryTooLarge {
        /// The op's key (for an Enqueue) or kind.
        key: String,
        /// Its encoded size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The journal is over its limit: a snapshot is overdue.
    #[error("journal of {bytes} bytes is over its limit of {limit} bytes; a snapshot is overdue")]
    JournalFull {
        /// Journal bytes since the last snapshot.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A value could not be encoded.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What.
        what: String,
        /// The cause.
        source: CodecError,
    },
}

/// How long an open waits for sled's file lock once weir's own lock is
/// held (see [`Store::open`]).
const SLED_LOCK_WAIT_MS: u64 = 15_000;

/// Tree names.
pub(crate) const JOURNAL: &str = "journal";
pub(crate) const SNAPSHOT: &str = "snapshot";
pub(crate) const RECORDS: &str = "records";
pub(crate) const EXPIRY: &str = "expiry";

/// A handle to the store; clones share it.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    settings: StoreSettings,
    db: sled::Db,
    journal: sled::Tree,
    snapshot: sled::Tree,
    records: sled::Tree,
    expiry: sled::Tree,
    /// The file sled writes its log to, kept open to fsync it.
    db_file: File,
    /// Set after a failed write; cleared only by reopening.
    failed: AtomicBool,
    /// The first failure that set `failed`, as its message.
    failure: Mutex<Option<String>>,
    /// Told of the first failure (the supervisor, which stops the engine).
    on_failure: Mutex<Option<FailureHook>>,
    /// Whether closing writes the mark (see the `damage` module): set once
    /// the open checked the store whole.
    mark_on_close: AtomicBool,
    /// The last journal sequence written.
    last_seq: AtomicU64,
    /// Sequence the last snapshot covers.
    snapshot_seq: AtomicU64,
    /// Ops and bytes journaled since the last snapshot.
    ops_since_snapshot: AtomicU64,
    bytes_since_snapshot: AtomicU64,
    /// Ids of the tickets the journal tail replayed at the last recovery
    /// changed; cleared by the next snapshot. See
    /// [`Store::changed_since_snapshot`].
    tail_changed: Mutex<BTreeSet<TicketId>>,
    /// The snapshot's key index runs, decoded (see the `keys` module).
    key_runs: std::sync::RwLock<keys::KeyRuns>,
    /// One commit at a time: sequences are assigned under it.
    commit_lock: Mutex<()>,
    /// Serializes durable flushes and remembers the newest blob file synced.
    sync: Mutex<SyncState>,
    /// weir's own blobs (`DATA/blobs`), with their pins.
    blobs: blobs::Blobs,
    /// Held for the life of the store: the directory lock.
    _lock: lock::DirLock,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.mark_on_close.load(Ordering::Acquire) {
            return;
        }
        damage::write_mark(
            &self.dir,
            self.settings.durability,
            self.last_seq.load(Ordering::Acquire),
        );
    }
}

/// A function told of the store's first failure, with its message.
type FailureHook = Box<dyn Fn(&str) + Send + Sync>;

#[derive(Default)]
struct SyncState {
    blobs_synced_upto: u64,
}

/// Health of a store, for `weir inspect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inspect {
    /// The data directory.
    pub dir: PathBuf,
    /// Journal values (entries) present, including dead ones below the
    /// snapshot not yet removed.
    pub journal_entries: u64,
    /// The last journal sequence written.
    pub last_seq: u64,
    /// The sequence the snapshot covers.
    pub snapshot_seq: u64,
    /// Tickets in the snapshot.
    pub snapshot_tickets: u64,
    /// Records.
    pub records: u64,
    /// Entries of the expiry index.
    pub expiry_entries: u64,
    /// Bytes sled uses on disk.
    pub size_on_disk_bytes: u64,
    /// Blob files under `DATA/blobs` (outputs kept out of sled).
    #[serde(default)]
    pub blob_files: u64,
    /// Their bytes.
    #[serde(default)]
    pub blob_bytes: u64,
}

impl Store {
    /// Opens (creating) the store in `dir` and replays its queue state.
    /// Fails with a clear error when the directory is in use, cannot be
    /// created, or holds anything that does not decode; damaged files are
    /// refused with [`StoreError::Damaged`] naming them, never a panic
    /// (sled's open and the replay run under `catch_unwind`).
    pub fn open(
        dir: impl AsRef<Path>,
        settings: StoreSettings,
    ) -> Result<(Store, Recovered), StoreError> {
        let dir = dir.as_ref().to_path_buf();
        create_private_dir(&dir)?;
        let lock = lock::DirLock::acquire(&dir)?;
        damage::check_files(&dir)?;
        let guarded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Store::open_locked(&dir, settings, lock)
        }));
        let (store, recovered) = match guarded {
            Ok(Ok(opened)) => opened,
            Ok(Err(e)) => return Err(damage::classify(&dir, e)),
            Err(panic) => return Err(damage::from_panic(&dir, panic.as_ref())),
        };
        damage::check_mark(&store, &recovered)?;
        // Only a store that opened whole may move the mark: a refused one
        // recovered less than the mark, and writing that would hide the
        // damage from the next open.
        store.inner.mark_on_close.store(true, Ordering::Release);
        store.ensure_reserve_file();
        Ok((store, recovered))
    }

    /// [`Store::open`] once the directory is locked and its files checked.
    fn open_locked(
        dir: &Path,
        settings: StoreSettings,
        lock: lock::DirLock,
    ) -> Result<(Store, Recovered), StoreError> {
        let dir = dir.to_path_buf();
        let sled_err = |source| StoreError::Sled {
            dir: dir.clone(),
            source,
        };
        // sled's own lock on its `db` file outlives a dropped `Db` for a
        // moment: its background threads keep the file open until their
        // last write ends (sled issues 1234, 1289), so a reopen in the same
        // process can find it busy. Holding weir's lock means no other weir
        // has the directory, so a busy sled lock is a store of this process
        // shutting down: wait for it, up to SLED_LOCK_WAIT_MS.
        let waited = std::time::Instant::now();
        let db = loop {
            let opened = sled::Config::new()
                .path(dir.join("sled"))
                .cache_capacity(settings.cache_bytes)
                // weir flushes at every commit; sled's background flush adds
                // nothing in the durable modes, but keeps `none` from losing
                // more than half a second.
                .flush_every_ms(Some(500))
                .open();
            match opened {
                Ok(db) => break db,
                Err(sled::Error::Io(ref io))
                    if io.to_string().contains("could not acquire lock") =>
                {
                    if waited.elapsed().as_millis() >= u128::from(SLED_LOCK_WAIT_MS) {
                        return Err(StoreError::InUse(dir.clone()));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(other) => return Err(sled_err(other)),
            }
        };
        let journal = db.open_tree(JOURNAL).map_err(sled_err)?;
        let snapshot = db.open_tree(SNAPSHOT).map_err(sled_err)?;
        let records = db.open_tree(RECORDS).map_err(sled_err)?;
        let expiry = db.open_tree(EXPIRY).map_err(sled_err)?;
        let db_path = dir.join("sled").join("db");
        let db_file = File::open(&db_path).map_err(|source| StoreError::Dir {
            dir: db_path.clone(),
            source,
        })?;
        let blobs = blobs::Blobs::new(&dir);
        let store = Store {
            inner: Arc::new(Inner {
                dir,
                settings,
                db,
                journal,
                snapshot,
                records,
                expiry,
                db_file,
                failed: AtomicBool::new(false),
                failure: Mutex::new(None),
                on_failure: Mutex::new(None),
                mark_on_close: AtomicBool::new(false),
                last_seq: AtomicU64::new(0),
                snapshot_seq: AtomicU64::new(0),
                ops_since_snapshot: AtomicU64::new(0),
                bytes_since_snapshot: AtomicU64::new(0),
                tail_changed: Mutex::new(BTreeSet::new()),
                key_runs: std::sync::RwLock::new(keys::KeyRuns::default()),
                commit_lock: Mutex::new(()),
                sync: Mutex::new(SyncState::default()),
                blobs,
                _lock: lock,
            }),
        };
        let recovered = replay::recover(&store)?;
        Ok((store, recovered))
    }

    /// Rebuilds the queue state from what is stored, as at open: for a
    /// queue actor restarted inside a running engine.
    pub fn recover(&self) -> Result<Recovered, StoreError> {
        replay::recover(self)
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The settings.
    pub fn settings(&self) -> &StoreSettings {
        &self.inner.settings
    }

    /// Whether the journal has grown enough since the last snapshot that a
    /// new one is due.
    pub fn snapshot_due(&self) -> bool {
        let s = &self.inner.settings;
        self.inner.ops_since_snapshot.load(Ordering::Relaxed) >= s.snapshot_ops
            || self.inner.bytes_since_snapshot.load(Ordering::Relaxed) >= s.snapshot_bytes
    }

    /// Ids of the tickets that the journal tail replayed at the last
    /// recovery changed (enqueued, selected, requeued, extended, ended),
    /// until the next snapshot is written. A caller that tracks the ids it
    /// changes for [`Store::write_snapshot`] must start from these after a
    /// recovery: the snapshot covers the tail, whose entries are removed
    /// after it, so a ticket the tail changed and the snapshot missed would
    /// be lost (or an ended one come back).
    pub fn changed_since_snapshot(&self) -> BTreeSet<TicketId> {
        self.inner
            .tail_changed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The last journal sequence written.
    pub fn last_seq(&self) -> u64 {
        self.inner.last_seq.load(Ordering::Acquire)
    }

    /// Whether a write failed and the store refuses writes.
    pub fn is_failed(&self) -> bool {
        self.inner.failed.load(Ordering::Acquire)
    }

    /// Makes everything written so far durable, as the durability mode
    /// says. Concurrent callers share flushes.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.check_writable()?;
        let result = self.sync_inner();
        if let Err(e) = &result {
            self.fail(e);
        }
        result
    }

    fn sync_inner(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        let flush = || {
            self.inject(FaultPoint::Flush)
                .map_err(sled::Error::Io)
                .and_then(|()| inner.db.flush().map(drop))
                .map_err(|source| StoreError::Flush {
                    dir: inner.dir.clone(),
                    source,
                })
        };
        match inner.settings.durability {
            Durability::None => Ok(()),
            Durability::Flush => flush(),
            Durability::Fsync => {
                flush()?;
                // sled's flush is sync_file_range, which does not flush the
                // device cache (sled issue 1452); and sled writes large pages
                // to blob files without syncing them. fsync both.
                let mut sync = inner.sync.lock().unwrap_or_else(|p| p.into_inner());
                self.inject(FaultPoint::Fsync)
                    .and_then(|()| inner.db_file.sync_data())
                    .map_err(|source| StoreError::Fsync {
                        dir: inner.dir.clone(),
                        file: inner.dir.join("sled").join("db"),
                        source,
                    })?;
                self.sync_blobs(&mut sync)
            }
        }
    }

    fn sync_blobs(&self, sync: &mut SyncState) -> Result<(), StoreError> {
        let blobs = self.inner.dir.join("sled").join("blobs");
        let Ok(entries) = std::fs::read_dir(&blobs) else {
            return Ok(());
        };
        let mut newest = sync.blobs_synced_upto;
        let mut any = false;
        for entry in entries.flatten() {
            let Some(lsn) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if lsn <= sync.blobs_synced_upto && sync.blobs_synced_upto != 0 {
                continue;
            }
            let path = entry.path();
            // A blob garbage-collected since the listing is not an error.
            if let Ok(f) = File::open(&path) {
                self.inject(FaultPoint::Fsync)
                    .and_then(|()| f.sync_data())
                    .map_err(|source| StoreError::Fsync {
                        dir: self.inner.dir.clone(),
                        file: path.clone(),
                        source,
                    })?;
                any = true;
            }
            newest = newest.max(lsn);
        }
        if any {
            if let Ok(d) = File::open(&blobs) {
                self.inject(FaultPoint::Fsync)
                    .and_then(|()| d.sync_all())
                    .map_err(|source| StoreError::Fsync {
                        dir: self.inner.dir.clone(),
                        file: blobs.clone(),
                        source,
                    })?;
            }
        }
        sync.blobs_synced_upto = newest;
        Ok(())
    }

    /// Asks the fault injector, when one is set, whether a call at `point`
    /// may go on (see the `faults` module).
    #[inline]
    pub(crate) fn inject(&self, point: FaultPoint) -> std::io::Result<()> {
        match &self.inner.settings.faults {
            None => Ok(()),
            Some(faults) => faults.check(point),
        }
    }

    /// Makes one write into sled, asking the fault injector first: its
    /// failure fail-stops the store and is an error naming `what`.
    pub(crate) fn write_sled<T>(
        &self,
        what: &'static str,
        write: impl FnOnce() -> Result<T, sled::Error>,
    ) -> Result<T, StoreError> {
        let written = self
            .inject(FaultPoint::Write)
            .map_err(sled::Error::Io)
            .and_then(|()| write());
        written.map_err(|source| {
            let e = StoreError::Write {
                dir: self.inner.dir.clone(),
                what,
                source,
            };
            self.fail(&e);
            e
        })
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        if self.is_failed() {
            return Err(StoreError::FailStopped(
                self.inner.dir.clone(),
                self.failure().unwrap_or_default(),
            ));
        }
        Ok(())
    }

    /// The failure that fail-stopped the store, as its message; `None`
    /// while it takes writes.
    pub fn failure(&self) -> Option<String> {
        self.inner
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Calls `hook` with the message of the store's first failure, once
    /// (at once when the store failed already). Replaces the hook set
    /// before: the engine's supervisor sets it, to stop the engine.
    pub fn on_failure(&self, hook: impl Fn(&str) + Send + Sync + 'static) {
        let mut slot = self
            .inner
            .on_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match self.failure() {
            Some(cause) => hook(&cause),
            None => *slot = Some(Box::new(hook)),
        }
    }

    /// Refuses a write when the data directory's filesystem has less free
    /// space than the reserve: releases the reserve file (room for the
    /// last flush and the next open) and fail-stops. A probe that fails is
    /// logged and the write goes on: the check guards against a full disk,
    /// it must not invent one.
    pub(crate) fn check_space(&self) -> Result<(), StoreError> {
        self.check_space_for(0)
    }

    /// [`Self::check_space`] for a write of `bytes` more than a record's
    /// (a blob): the reserve must be left after it.
    pub(crate) fn check_space_for(&self, bytes: u64) -> Result<(), StoreError> {
        let inner = &self.inner;
        let s = &inner.settings;
        let space = match s.free_space.probe(&inner.dir) {
            Ok(space) => space,
            Err(e) => {
                tracing::warn!(dir = %inner.dir.display(), error = %e, "cannot measure free space");
                return Ok(());
            }
        };
        let reserve = disk::reserve_bytes(
            space.total_bytes,
            s.disk_reserve_min_bytes,
            s.disk_reserve_percent,
        );
        if space.free_bytes >= reserve.saturating_add(bytes) {
            return Ok(());
        }
        let released = disk::release_reserve(&inner.dir);
        tracing::error!(
            dir = %inner.dir.display(),
            free_bytes = space.free_bytes,
            reserve_bytes = reserve,
            reserve_file_released = released,
            "disk full: refusing writes"
        );
        let e = StoreError::DiskFull {
            dir: inner.dir.clone(),
            free_bytes: space.free_bytes,
            reserve_bytes: reserve,
        };
        self.fail(&e);
        Err(e)
    }

    /// Creates the reserve file when it is missing and the filesystem has
    /// room for it above the reserve; says why not otherwise.
    fn ensure_reserve_file(&self) {
        let inner = &self.inner;
        let s = &inner.settings;
        if s.reserve_file_bytes == 0 {
            return;
        }
        let path = disk::reserve_path(&inner.dir);
        if std::fs::metadata(&path).is_ok_and(|m| m.len() >= s.reserve_file_bytes) {
            return;
        }
        let room = match s.free_space.probe(&inner.dir) {
            Ok(space) => {
                let reserve = disk::reserve_bytes(
                    space.total_bytes,
                    s.disk_reserve_min_bytes,
                    s.disk_reserve_percent,
                );
                space.free_bytes >= reserve.saturating_add(s.reserve_file_bytes)
            }
            Err(_) => false,
        };
        if !room {
            tracing::warn!(dir = %inner.dir.display(), reserve_file_bytes = s.reserve_file_bytes, "no room for the reserve file; it is made at a later open");
            return;
        }
        match disk::create_reserve(&inner.dir, s.reserve_file_bytes) {
            Ok(()) => {
                tracing::debug!(path = %path.display(), bytes = s.reserve_file_bytes, "reserve file in place")
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot create the reserve file")
            }
        }
    }

    /// Fail-stop: refuses every later write, keeps the first `cause` and
    /// tells the failure hook of it.
    pub(crate) fn fail(&self, cause: &dyn std::fmt::Display) {
        let inner = &self.inner;
        // The hook's lock first: `on_failure` reads the failure under it,
        // so a hook is either set before and called here, or set after and
        // called there.
        let hook = inner.on_failure.lock().unwrap_or_else(|p| p.into_inner());
        let first = {
            let mut failure = inner.failure.lock().unwrap_or_else(|p| p.into_inner());
            if failure.is_some() {
                false
            } else {
                *failure = Some(cause.to_string());
                true
            }
        };
        inner.failed.store(true, Ordering::Release);
        if first {
            tracing::error!(dir = %inner.dir.display(), error = %cause, "store write failed: refusing writes until reopened");
            if let Some(hook) = hook.as_ref() {
                hook(&cause.to_string());
            }
        }
    }

    /// Makes every later write fail, as after a failed append. For tests of
    /// fail-stop behaviour.
    pub fn inject_failure(&self) {
        self.fail(&"a failure injected by a test");
    }

    pub(crate) fn sled_err(&self, source: sled::Error) -> StoreError {
        StoreError::Sled {
            dir: self.inner.dir.clone(),
            source,
        }
    }

    /// Store health.
    pub fn inspect(&self) -> Result<Inspect, StoreError> {
        let inner = &self.inner;
        let meta = snapshot::read_meta(self)?;
        let (blob_files, blob_bytes) = self.blob_usage();
        Ok(Inspect {
            dir: inner.dir.clone(),
            journal_entries: inner.journal.len() as u64,
            last_seq: self.last_seq(),
            snapshot_seq: meta.as_ref().map_or(0, |m| m.seq),
            snapshot_tickets: meta.as_ref().map_or(0, |m| m.tickets),
            records: inner.records.len() as u64,
            expiry_entries: inner.expiry.len() as u64,
            size_on_disk_bytes: inner.db.size_on_disk().map_err(|e| self.sled_err(e))?,
            blob_files,
            blob_bytes,
        })
    }

    /// The sled database, for tests that corrupt it on purpose.
    #[doc(hidden)]
    pub fn raw_tree(&self, name: &str) -> Option<sled::Tree> {
        match name {
            JOURNAL => Some(self.inner.journal.clone()),
            SNAPSHOT => Some(self.inner.snapshot.clone()),
            RECORDS => Some(self.inner.records.clone()),
            EXPIRY => Some(self.inner.expiry.clone()),
            _ => None,
        }
    }
}

/// Opens the store in `dir` read-only in spirit: for `weir status` and
/// `weir inspect` while no engine runs. It takes the same lock, so it fails
/// with [`StoreError::InUse`] while an engine has the directory open.
pub fn open_for_inspection(dir: impl AsRef<Path>) -> Result<(Store, Recovered), StoreError> {
    let settings = StoreSettings {
        durability: Durability::None,
        // Reading takes no room: the reserve file is the engine's to make.
        reserve_file_bytes: 0,
        ..StoreSettings::default()
    };
    Store::open(dir, settings)
}

fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StoreError::Dir {
            dir: dir.to_path_buf(),
            source,
        })
}

/// A printable form of a key: UTF-8 as is, else hex.
pub(crate) fn printable(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if !s.chars().any(char::is_control) => s.to_string(),
        _ => key.iter().map(|b| format!("{b:02x}")).collect(),
    }
}
