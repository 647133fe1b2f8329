//! A store's health for `weir inspect`: its trees' sizes, the snapshot and
//! the journal positions, its blobs.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::handle::Store;
use super::{snapshot, StoreError};

impl Store {
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
