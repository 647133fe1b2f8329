//! The data directory's lock: one engine per directory, across processes
//! and within one.
//!
//! An exclusive, non-blocking `flock` on `weir.lock`. `flock` locks belong
//! to the open file description, so a second open in the same process
//! conflicts too, and the kernel drops the lock when the process dies (a
//! kill -9 leaves no stale lock behind).

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::StoreError;

/// How long a busy lock is retried before the directory counts as in use.
/// A lock this process just released can look busy for a moment: a child
/// forked by another thread holds a copy of every descriptor until its
/// exec, and with it the lock's open file description (a command task
/// spawned while a store is dropped and reopened).
pub(crate) const LOCK_WAIT_MS: u64 = 250;

/// How long a busy lock is retried while this process closes the store of
/// that directory: a clean close writes the mark, sled's page table and the
/// files' digest before it lets go of the lock (about one open of the
/// store), and an engine reopened in the same process waits it out.
pub(crate) const CLOSE_WAIT_MS: u64 = 60_000;

/// The pause between tries of a busy lock.
const LOCK_RETRY_MS: u64 = 5;

/// Directories whose store this process is closing.
static CLOSING: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn closing_dirs() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    // A set of paths only: a panic elsewhere leaves it whole.
    CLOSING.lock().unwrap_or_else(|p| p.into_inner())
}

/// A held lock; released on drop (the file closes).
pub(crate) struct DirLock {
    file: Option<File>,
    /// The directory, as the registry of closes names it.
    dir: PathBuf,
    closing: bool,
}

/// The name of `dir` in the registry of closes: one directory opened by
/// two paths (relative, a link) has one name.
fn registry_name(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

impl DirLock {
    /// Takes the lock of `dir`, or fails at once with `InUse`.
    pub(crate) fn acquire(dir: &Path) -> Result<DirLock, StoreError> {
        let path: PathBuf = dir.join("weir.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|source| StoreError::Dir {
                dir: path.clone(),
                source,
            })?;
        let name = registry_name(dir);
        let started = std::time::Instant::now();
        loop {
            // SAFETY: flock on a file descriptor we own; no memory is involved.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(DirLock {
                    file: Some(file),
                    dir: name,
                    closing: false,
                });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Dir {
                    dir: path,
                    source: err,
                });
            }
            let wait_ms = if closing_dirs().contains(&name) {
                CLOSE_WAIT_MS
            } else {
                LOCK_WAIT_MS
            };
            if started.elapsed().as_millis() >= u128::from(wait_ms) {
                return Err(StoreError::InUse(dir.to_path_buf()));
            }
            std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_MS));
        }
    }

    /// Says this process is closing the store that holds the lock: an
    /// open of the directory in this process waits for the lock up to
    /// [`CLOSE_WAIT_MS`] instead of [`LOCK_WAIT_MS`].
    pub(crate) fn closing(&mut self) {
        closing_dirs().insert(self.dir.clone());
        self.closing = true;
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        // The lock first, then the registry: an open that sees no close
        // any more finds the lock free, or waits its usual moment.
        drop(self.file.take());
        if self.closing {
            closing_dirs().remove(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// Holds `lock` for `held_ms` on another thread, then drops it.
    fn release_after(lock: DirLock, held_ms: u64) -> std::thread::JoinHandle<()> {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(held_ms));
            drop(lock);
        })
    }

    #[test]
    fn an_open_waits_for_this_process_closing_the_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let mut first = DirLock::acquire(tmp.path()).unwrap();
        first.closing();
        let held_ms = 2 * LOCK_WAIT_MS;
        let releaser = release_after(first, held_ms);
        let t0 = Instant::now();
        let second = DirLock::acquire(tmp.path()).expect("the close is waited out");
        assert!(t0.elapsed() >= Duration::from_millis(LOCK_WAIT_MS));
        releaser.join().unwrap();
        drop(second);
        assert!(
            !closing_dirs().contains(&registry_name(tmp.path())),
            "a close leaves the registry once its lock is released"
        );
    }

    #[test]
    fn a_lock_held_open_is_in_use_after_the_usual_wait() {
        let tmp = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(tmp.path()).unwrap();
        let releaser = release_after(first, 2 * LOCK_WAIT_MS);
        let t0 = Instant::now();
        match DirLock::acquire(tmp.path()) {
            Err(StoreError::InUse(_)) => {}
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a lock held open is in use"),
        }
        assert!(t0.elapsed() < Duration::from_millis(2 * LOCK_WAIT_MS));
        releaser.join().unwrap();
    }
}
