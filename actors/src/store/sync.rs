//! Making what was written durable: sled's flush. In the `fsync` mode
//! sled's log writes end in an fdatasync and its blob files are synced
//! before the log names them (`sync_to_device`, set by `sled_config`; see
//! vendor/sled/WEIR.md), so the flush is the durable step whole: one device
//! wait, where sled's `sync_file_range` and a second fdatasync of weir's
//! paid two, and a listing of sled's blob folder per commit is not needed.

use std::sync::atomic::Ordering;

use super::faults::FaultPoint;
use super::handle::Store;
use super::{Durability, StoreError};

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
                .and_then(|()| inner.db.flush())
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
                // The fsync is sled's, inside its flush (see above); the
                // injector is asked for it here, before the flush.
                self.inject(FaultPoint::Fsync)
                    .map_err(|source| StoreError::Fsync {
                        dir: inner.dir.clone(),
                        file: inner.dir.join("sled").join("db"),
                        source,
                    })?;
                flush()
            }
        }
    }
}
