//! Making what was written durable: sled's flush, then (in the `fsync`
//! mode) an fsync of sled's files and of the blob files written since the
//! last sync; one sync at a time.

use std::fs::File;
use std::sync::atomic::Ordering;

use super::faults::FaultPoint;
use super::handle::{Store, SyncState};
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
                flush()?;
                // sled's flush is sync_file_range, which does not flush the
                // device cache (sled issue 1452); and sled writes large pages
                // to blob files without syncing them. fsync both.
                let mut sync = inner.sync.lock().unwrap_or_else(|p| p.into_inner());
                self.inject(FaultPoint::Fsync)
                    .and_then(|()| inner.db_file.as_ref().map_or(Ok(()), File::sync_data))
                    .map_err(|source| StoreError::Fsync {
                        dir: inner.dir.clone(),
                        file: inner.dir.join("sled").join("db"),
                        source,
                    })?;
                self.sync_blobs(&mut sync)
            }
        }
    }

    pub(super) fn sync_blobs(&self, sync: &mut SyncState) -> Result<(), StoreError> {
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
}
