//! The store handle: one sled `Db` and its trees, shared by clones, with
//! the fail-stop flag, the disk reserve checks and fault injection every
//! write goes through. Opening, syncing, the journal, the records, the
//! snapshot and the blobs extend it from their own files.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use weir_core::queue::TicketId;

use super::blobs::Blobs;
use super::disk;
use super::faults::FaultPoint;
use super::keys::KeyRuns;
use super::kv;
use super::lock::DirLock;
use super::{StoreError, StoreSettings};

/// Tree names.
pub(crate) const JOURNAL: &str = "journal";
pub(crate) const SNAPSHOT: &str = "snapshot";
pub(crate) const RECORDS: &str = "records";
pub(crate) const EXPIRY: &str = "expiry";
/// Tree of the replicated state machine's own values (applied log id,
/// membership, the Raft vote): beside the store's trees in the same `Db`,
/// so a set and the index it was applied at land in one transaction.
pub(crate) const REPLICA: &str = "replica";
/// Tree of the Raft log's entries.
pub(crate) const RAFT_LOG: &str = "raft_log";

/// Free space and the reserve of a store's filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DiskRoom {
    /// Bytes free.
    pub free_bytes: u64,
    /// Bytes the store leaves free at the least.
    pub reserve_bytes: u64,
}

impl DiskRoom {
    /// Whether the free space is under the reserve.
    pub fn under_reserve(&self) -> bool {
        self.free_bytes < self.reserve_bytes
    }
}

/// A handle to the store; clones share it.
#[derive(Clone)]
pub struct Store {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    pub(super) dir: PathBuf,
    pub(super) settings: StoreSettings,
    pub(super) db: kv::Db,
    pub(super) journal: kv::Tree,
    pub(super) snapshot: kv::Tree,
    pub(super) records: kv::Tree,
    pub(super) expiry: kv::Tree,
    /// The replicated state machine's values and the Raft log (clustered
    /// mode; empty trees otherwise).
    pub(super) replica: kv::Tree,
    pub(super) raft_log: kv::Tree,
    /// Where writes go in clustered mode (see the `replicated` module).
    pub(super) replicator: std::sync::OnceLock<Arc<super::pipeline::Pipeline>>,
    /// weir's own handle of the file sled writes its log to (none for a
    /// store in memory): where a sync asks whether write-back failed (see
    /// the `sync` module).
    pub(super) db_file: Option<File>,
    /// Set after a failed write; cleared only by reopening.
    pub(super) failed: AtomicBool,
    /// The first failure that set `failed`, as its message.
    pub(super) failure: Mutex<Option<String>>,
    /// Told of the first failure (the supervisor, which stops the engine).
    pub(super) on_failure: Mutex<Option<FailureHook>>,
    /// Whether closing writes the mark (see the `damage` module): set once
    /// the open checked the store whole.
    pub(super) mark_on_close: AtomicBool,
    /// The last journal sequence written.
    pub(super) last_seq: AtomicU64,
    /// Bytes of log weir's flushes made stable since the open, roughly
    /// (two flushes at once may both count the same bytes; sled's own
    /// background flush goes uncounted): about what the next open reads
    /// again unless the close writes sled's page table (see the
    /// `page_table` module), which only this threshold's side reads.
    pub(super) logged_bytes: AtomicU64,
    /// Sequence the last snapshot covers.
    pub(super) snapshot_seq: AtomicU64,
    /// Ops and bytes journaled since the last snapshot.
    pub(super) ops_since_snapshot: AtomicU64,
    pub(super) bytes_since_snapshot: AtomicU64,
    /// Ids of the tickets the journal tail replayed at the last recovery
    /// changed; cleared by the next snapshot. See
    /// [`Store::changed_since_snapshot`].
    pub(super) tail_changed: Mutex<BTreeSet<TicketId>>,
    /// The snapshot's key index runs, decoded (see the `keys` module).
    pub(super) key_runs: std::sync::RwLock<KeyRuns>,
    /// One snapshot written at a time: each plans its key runs from the
    /// ones the last installed. Commits do not take it (a snapshot may be
    /// written while they go on).
    pub(super) snapshot_lock: Mutex<()>,
    /// Held shared by every read of the snapshot's tickets (a `StoreCold`,
    /// for its life), alone by a snapshot while its batch lands and its key
    /// runs are installed: a read that scans the index and then reads
    /// chunks sees one snapshot, never the old index and the new chunks.
    /// parking_lot's lock is fair: a queue that reads again and again does
    /// not keep a landing snapshot out (std's let a reader loop starve it
    /// for a minute in a test).
    pub(super) cold_gate: parking_lot::RwLock<()>,
    /// One commit at a time: sequences are assigned under it.
    pub(super) commit_lock: Mutex<()>,
    /// Every write of the store's content (trees, blobs) holds it shared;
    /// a backup holds it alone while it reads, so a backup is the store
    /// at one point between writes (see the `backup` module).
    pub(super) backup_gate: std::sync::RwLock<()>,
    /// weir's own blobs (`DATA/blobs`), with their pins.
    pub(super) blobs: Blobs,
    /// Writes the mark at a clean close. After sled's handles above (fields
    /// drop in order), so sled is closed by then; before the lock below.
    pub(super) closing: super::close_mark::Closing,
    /// Held for the life of the store: the directory lock.
    pub(super) lock: DirLock,
}

/// A function told of the store's first failure, with its message.
pub(super) type FailureHook = Box<dyn Fn(&str) + Send + Sync>;

impl Store {
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
        let _gate = self.write_gate();
        let written = self
            .inject(FaultPoint::Write)
            .map_err(sled::Error::Io)
            .and_then(|()| write());
        written.map_err(|source| self.failed_write(what, source))
    }

    /// Asks the fault injector whether a write of `what` at `point` may go
    /// on; an injected fault fail-stops the store, as a failed write does.
    pub(crate) fn inject_write(
        &self,
        point: FaultPoint,
        what: &'static str,
    ) -> Result<(), StoreError> {
        self.inject(point)
            .map_err(|source| self.failed_write(what, sled::Error::Io(source)))
    }

    /// The error of a failed write of `what`, the store fail-stopped by it.
    fn failed_write(&self, what: &'static str, source: sled::Error) -> StoreError {
        let e = StoreError::Write {
            dir: self.inner.dir.clone(),
            what,
            source,
        };
        self.fail(&e);
        e
    }

    /// The shared side of the backup gate, for a write of the store's
    /// content.
    pub(super) fn write_gate(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.inner
            .backup_gate
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn check_writable(&self) -> Result<(), StoreError> {
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

    /// The data directory's free space and the reserve the store keeps
    /// there, as the next write would see them; `None` when the probe
    /// fails. Read, for one, by a replicated member that must not lead
    /// under the reserve.
    pub fn disk_room(&self) -> Option<DiskRoom> {
        let s = &self.inner.settings;
        let space = s.free_space.probe(&self.inner.dir).ok()?;
        Some(DiskRoom {
            free_bytes: space.free_bytes,
            reserve_bytes: disk::reserve_bytes(
                space.total_bytes,
                s.disk_reserve_min_bytes,
                s.disk_reserve_percent,
            ),
        })
    }

    /// Refuses a write unless the data directory has room above the
    /// reserve (see [`Self::check_space`]): for writes made beside the
    /// store's own, such as a replicated member's Raft log.
    pub fn ensure_room(&self) -> Result<(), StoreError> {
        self.check_space()
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
    pub(super) fn ensure_reserve_file(&self) {
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

    /// A tree of the store, for tests that corrupt it on purpose.
    #[doc(hidden)]
    pub fn raw_tree(&self, name: &str) -> Option<kv::Tree> {
        match name {
            JOURNAL => Some(self.inner.journal.clone()),
            SNAPSHOT => Some(self.inner.snapshot.clone()),
            RECORDS => Some(self.inner.records.clone()),
            EXPIRY => Some(self.inner.expiry.clone()),
            _ => None,
        }
    }
}
