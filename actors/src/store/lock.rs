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
        // SAFETY: flock on a file descriptor we own; no memory is involved.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return Err(if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                StoreError::InUse(dir.to_path_buf())
            } else {
                StoreError::Dir {
                    dir: path,
                    source: err,
                }
            });
        }
        Ok(DirLock { _file: file })
    }
}
