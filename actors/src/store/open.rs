//! Opening a store: the directory lock, sled's open and recovery under
//! `catch_unwind` (sled 0.34.7 panics on some damaged files), the replay of
//! the queue state, the checks that refuse a damaged store naming its
//! files, and the mark a clean close leaves.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::blobs::Blobs;
use super::content::Content;
use super::handle::{Inner, Store, EXPIRY, JOURNAL, RECORDS, SNAPSHOT};
use super::keys::KeyRuns;
use super::panics;
use super::replay::Recovered;
use super::{
    close_mark, damage, kv, lock, replay, Durability, StoreError, StoreSettings, RAFT_LOG, REPLICA,
};

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
        let guarded = panics::guarded(|| Store::open_locked(&dir, settings, lock));
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
    pub(super) fn open_locked(
        dir: &Path,
        settings: StoreSettings,
        lock: lock::DirLock,
    ) -> Result<(Store, Recovered), StoreError> {
        let dir = dir.to_path_buf();
        let sled_err = |source| StoreError::Sled {
            dir: dir.clone(),
            source,
        };
        // A store in memory (a simulation's) has no files to open or check.
        let (db, db_file) = match &settings.memory {
            Some(memory) => (kv::Db::Memory(memory.clone()), None),
            None => {
                // Before sled opens them: its open writes.
                let unchanged = damage::files_unchanged(&dir);
                let db = open_sled(&dir, &settings)?;
                // Before anything writes: the mark's content describes the
                // store as it closed, not as it is once the replay or an
                // engine writes.
                damage::check_content(&dir, &db, unchanged)?;
                let db_path = dir.join("sled").join("db");
                let db_file = File::open(&db_path).map_err(|source| StoreError::Dir {
                    dir: db_path.clone(),
                    source,
                })?;
                if settings.durability == Durability::Fsync {
                    super::sync::sync_sled_blobs(&dir)?;
                }
                (kv::Db::Sled(db), Some(db_file))
            }
        };
        let journal = db.open_tree(JOURNAL).map_err(sled_err)?;
        let snapshot = db.open_tree(SNAPSHOT).map_err(sled_err)?;
        let records = db.open_tree(RECORDS).map_err(sled_err)?;
        let expiry = db.open_tree(EXPIRY).map_err(sled_err)?;
        let replica = db.open_tree(REPLICA).map_err(sled_err)?;
        let raft_log = db.open_tree(RAFT_LOG).map_err(sled_err)?;
        let blobs = Blobs::new(&dir);
        let store = Store {
            inner: Arc::new(Inner {
                dir,
                settings,
                db,
                journal,
                snapshot,
                records,
                expiry,
                replica,
                raft_log,
                replicator: std::sync::OnceLock::new(),
                db_file,
                failed: AtomicBool::new(false),
                failure: Mutex::new(None),
                on_failure: Mutex::new(None),
                mark_on_close: AtomicBool::new(false),
                last_seq: AtomicU64::new(0),
                logged_bytes: AtomicU64::new(0),
                snapshot_seq: AtomicU64::new(0),
                ops_since_snapshot: AtomicU64::new(0),
                bytes_since_snapshot: AtomicU64::new(0),
                tail_changed: Mutex::new(BTreeSet::new()),
                key_runs: std::sync::RwLock::new(KeyRuns::default()),
                snapshot_lock: Mutex::new(()),
                cold_gate: parking_lot::RwLock::new(()),
                commit_lock: Mutex::new(()),
                backup_gate: std::sync::RwLock::new(()),
                blobs,
                closing: close_mark::Closing::default(),
                lock,
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
}

/// The configuration weir opens sled's folder `sled_dir` with (and the
/// recovery bench's floor, so that it opens the files as weir does).
pub fn sled_config(sled_dir: &Path, settings: &StoreSettings) -> sled::Config {
    sled::Config::new()
        .path(sled_dir)
        .cache_capacity(settings.cache_bytes)
        // weir flushes at every commit; sled's background flush adds
        // nothing in the durable modes, but keeps `none` from losing more
        // than half a second, and reclaims dead segments.
        .flush_every_ms(Some(settings.background_flush_ms.max(1)))
        .sync_to_device(settings.durability == Durability::Fsync)
}

/// Opens sled's files in `dir`. sled's own lock on its `db` file outlives
/// a dropped `Db` for a moment: its background threads keep the file open
/// until their last write ends (sled issues 1234, 1289), so a reopen in the
/// same process can find it busy. Holding weir's lock means no other weir
/// has the directory, so a busy sled lock is a store of this process
/// shutting down: wait for it, up to SLED_LOCK_WAIT_MS.
fn open_sled(dir: &Path, settings: &StoreSettings) -> Result<sled::Db, StoreError> {
    super::page_table::remove_unfinished(&dir.join("sled")).map_err(|source| StoreError::Dir {
        dir: dir.to_path_buf(),
        source,
    })?;
    let waited = std::time::Instant::now();
    loop {
        let opened = sled_config(&dir.join("sled"), settings).open();
        match opened {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(ref io)) if io.to_string().contains("could not acquire lock") => {
                if waited.elapsed().as_millis() >= u128::from(SLED_LOCK_WAIT_MS) {
                    return Err(StoreError::InUse(dir.to_path_buf()));
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(source) => {
                return Err(StoreError::Sled {
                    dir: dir.to_path_buf(),
                    source,
                })
            }
        }
    }
}

/// How long an open waits for sled's file lock once weir's own lock is
/// held (see [`Store::open`]).
const SLED_LOCK_WAIT_MS: u64 = 15_000;

/// Opens the store in `dir` read-only in spirit: for `weir status` and
/// `weir inspect` while no engine runs. It takes the same lock, so it fails
/// with [`StoreError::InUse`] while an engine has the directory open.
pub fn open_for_inspection(dir: impl AsRef<Path>) -> Result<(Store, Recovered), StoreError> {
    let settings = StoreSettings {
        // Nothing is committed, so no commit waits on a flush; but the close
        // is a clean one and leaves the mark whole again (the content, the
        // files' digest) after the open cut it. Under `none` it left the
        // sequence only, and every later open skipped the content check.
        durability: Durability::Flush,
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

/// A clean close leaves the mark (see the `damage` module) once the open
/// found the store whole.
impl Drop for Inner {
    fn drop(&mut self) {
        // From here until the lock is released, an open of this directory
        // in this process waits for this close.
        self.lock.closing();
        if let Some(p) = self.replicator.get() {
            p.stop();
        }
        if !self.mark_on_close.load(Ordering::Acquire) {
            return;
        }
        // What the store holds, as the next open must find it: only once
        // everything is flushed, and never from a store that failed (its
        // memory may hold what its disk does not).
        let content = if self.failed.load(Ordering::Acquire)
            || self.settings.durability == Durability::None
        {
            None
        } else {
            let sled = self.db.as_sled();
            let flushed = |db: &sled::Db| {
                let n = db.flush()?;
                self.logged_bytes.fetch_add(n as u64, Ordering::Relaxed);
                Content::of(db)
            };
            match sled.map(flushed) {
                None => None,
                Some(Ok(content)) => Some(content),
                Some(Err(e)) => {
                    tracing::warn!(dir = %self.dir.display(), error = %e, "cannot read the store's content for its mark");
                    None
                }
            }
        };
        let mark = close_mark::PendingMark {
            dir: self.dir.clone(),
            durability: self.settings.durability,
            last_seq: self.last_seq.load(Ordering::Acquire),
            logged_bytes: self.logged_bytes.load(Ordering::Relaxed),
            content,
        };
        *self.closing.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(mark);
    }
}
