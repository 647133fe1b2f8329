//! Making what was written durable: sled's flush. In the `fsync` mode
//! sled's log writes end in an fdatasync and its blob files are synced
//! before the log names them (`sync_to_device`, set by `sled_config`; see
//! vendor/sled/WEIR.md), so the flush is the durable step whole: one device
//! wait, where sled's `sync_file_range` and a second fdatasync of weir's
//! paid two, and a listing of sled's blob folder per commit is not needed.
//!
//! One question is left to weir after the flush: did the write-back of
//! sled's file fail? Linux reports a write-back error once per open file,
//! to the first sync that asks on it, and sled's file is one open file for
//! all its threads: its background flush may take the error and only log
//! it, and a commit's own fdatasync then succeeds. So weir asks on a handle
//! of its own, opened with the store ([`wait_writeback`]): a wait on pages
//! already written (no device flush), which reports any write-back error
//! of the file since weir last asked.

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::faults::FaultPoint;
use super::handle::Store;
use super::{Durability, StoreError};

/// Waits for the write-back of `file`'s pages in flight and reports a
/// write-back error of the file not yet reported on this handle:
/// `sync_file_range(WAIT_AFTER)` over the whole file, which checks the
/// file's error sequence for this handle (Linux 4.14 and later). It writes
/// nothing and flushes no device cache.
fn wait_writeback(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: a call on a descriptor we own; no memory is involved.
    let rc =
        unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, libc::SYNC_FILE_RANGE_WAIT_AFTER) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Syncs every blob file sled holds, and their folder: at an open in the
/// `fsync` mode, since a store written in `flush` mode wrote blobs that
/// nothing synced (sled syncs a blob as it writes it only in `fsync`).
/// weir's values stay far below sled's blob size, so the folder is
/// usually missing or empty.
pub(super) fn sync_sled_blobs(dir: &Path) -> Result<(), StoreError> {
    let blobs = dir.join("sled").join("blobs");
    let fsync_err = |file: &Path| {
        let file = file.to_path_buf();
        move |source| StoreError::Fsync {
            dir: dir.to_path_buf(),
            file,
            source,
        }
    };
    let Ok(entries) = std::fs::read_dir(&blobs) else {
        return Ok(());
    };
    let mut any = false;
    for entry in entries {
        let path = entry.map_err(fsync_err(&blobs))?.path();
        match File::open(&path) {
            Ok(f) => f.sync_data().map_err(fsync_err(&path))?,
            // sled's background flush, running since its open, may collect
            // a blob between the listing and here.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(fsync_err(&path)(e)),
        }
        any = true;
    }
    if any {
        super::blobs::sync_dir(&blobs).map_err(fsync_err(&blobs))?;
    }
    Ok(())
}

impl Store {
    /// Makes everything written so far durable, as the durability mode
    /// says. Concurrent callers share flushes.
    pub fn sync(&self) -> Result<(), StoreError> {
        self.check_writable()?;
        if self.is_replicated() {
            // Durable once committed: on a majority, this node's log
            // included.
            return self.sync_replicated();
        }
        let result = self.sync_inner();
        if let Err(e) = &result {
            self.fail(e);
        }
        result
    }

    pub(super) fn sync_inner(&self) -> Result<(), StoreError> {
        let inner = &self.inner;
        let flush = || {
            self.inject(FaultPoint::Flush)
                .map_err(sled::Error::Io)
                .and_then(|()| {
                    // In the fsync mode sled writes its log buffer on this
                    // thread (vendor/sled/WEIR.md), where its pool caught a
                    // panic of the write and left the buffer unwritten: an
                    // assertion there is sled's bug, and the store
                    // fail-stops on it rather than unwinding through the
                    // commit.
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.db.flush()))
                        .unwrap_or_else(|p| {
                            Err(sled::Error::ReportableBug(format!(
                                "sled's log write panicked: {}",
                                super::panics::message(p.as_ref()).unwrap_or_default()
                            )))
                        })
                })
                .map(|n| {
                    inner.logged_bytes.fetch_add(n as u64, Ordering::Relaxed);
                })
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
                // The fdatasync was sled's, inside its flush; whether its
                // write-back failed is asked here (see above), and a
                // failure, or an injected one, is the fsync's.
                self.inject(FaultPoint::Fsync)
                    .and_then(|()| inner.db_file.as_ref().map_or(Ok(()), wait_writeback))
                    .map_err(|source| StoreError::Fsync {
                        dir: inner.dir.clone(),
                        file: inner.dir.join("sled").join("db"),
                        source,
                    })
            }
        }
    }
}
