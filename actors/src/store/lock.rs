//! The data directory's lock: one engine per directory, across processes
//! and within one.
//!
//! An exclusive, non-blocking `flock` on `weir.lock`. `flock` locks belong
//! to the open file description, so a second open in the same process
//! conflicts too, and the kernel drops the lock when the process dies (a
//! kill -9 leaves no stale lock behind).

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::StoreError;

/// How long a busy lock is retried before the directory counts as in use.
/// A lock this process just released can look busy for a moment: a child
/// forked by another thread holds a copy of every descriptor until its
/// exec, and with it the lock's open file description (a command task
/// spawned while a store is dropped and reopened).
pub(crate) const LOCK_WAIT_MS: u64 = 250;

/// The pause between tries of a busy lock.
const LOCK_RETRY_MS: u64 = 5;

/// A held lock; released on drop (the file closes).
pub(crate) struct DirLock {
    _file: File,
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
        let started = std::time::Instant::now();
        loop {
            // SAFETY: flock on a file descriptor we own; no memory is involved.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(DirLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(StoreError::Dir {
                    dir: path,
                    source: err,
                });
            }
            if started.elapsed().as_millis() >= u128::from(LOCK_WAIT_MS) {
                return Err(StoreError::InUse(dir.to_path_buf()));
            }
            std::thread::sleep(std::time::Duration::from_millis(LOCK_RETRY_MS));
        }
    }
}
