//! The store's blobs on disk: writing one (durably, pinned until the
//! record naming it is durable), reading one back (checked against its
//! hash), the index of who references a blob, and the sweep that removes
//! blobs nothing references. The shapes are in the `blobs` module.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::blobs::{of_key, ref_key, sync_dir, BlobRef, BLOB_REF_PREFIX, TMP_PREFIX};
use super::{Durability, FaultPoint, Store, StoreError};

impl Store {
    /// The path of a blob.
    pub fn blob_path(&self, blob: &BlobRef) -> PathBuf {
        let dir = &self.inner.blobs.dir;
        if blob.is_well_formed() {
            dir.join(&blob.hash[..2]).join(&blob.hash)
        } else {
            // Never a path outside the folder, whatever a record holds.
            dir.join("malformed")
        }
    }

    /// Writes `bytes` as a blob, durable (in the `fsync` and `flush`
    /// modes) before it returns, and pins it: call [`Store::unpin_blob`]
    /// once the record naming it is durable, or was refused. A blob that
    /// is there already and whole is not written again. Checks the disk
    /// reserve first, as every write of the store does.
    pub fn write_blob(&self, bytes: &[u8]) -> Result<BlobRef, StoreError> {
        self.check_writable()?;
        self.check_space_for(bytes.len() as u64)?;
        let blob = BlobRef::of(bytes);
        *self
            .inner
            .blobs
            .pins()
            .entry(blob.hash.clone())
            .or_insert(0) += 1;
        if self.is_replicated() {
            // The blob travels in an entry of its own, committed before
            // the entry of the record naming it.
            let set = super::WriteSet {
                what: "blob".into(),
                blobs: vec![serde_bytes::ByteBuf::from(bytes)],
                ..super::WriteSet::default()
            };
            if let Err(e) = self.replicate(set).and_then(|_| self.sync()) {
                self.unpin_blob(&blob);
                return Err(e);
            }
            return Ok(blob);
        }
        let written = self.write_blob_file(&blob, bytes);
        if let Err(e) = written {
            self.unpin_blob(&blob);
            // An I/O error in the data directory is the disk failing, as
            // a failed sled write is: the store fail-stops. The attempt
            // whose output this is fails, and its report is refused.
            self.fail(&e);
            return Err(e);
        }
        Ok(blob)
    }

    pub(super) fn write_blob_file(&self, blob: &BlobRef, bytes: &[u8]) -> Result<(), StoreError> {
        let _gate = self.write_gate();
        let path = self.blob_path(blob);
        if self.read_blob(blob).is_ok() {
            tracing::trace!(path = %path.display(), "blob already stored");
            return Ok(());
        }
        let durable = self.inner.settings.durability != Durability::None;
        let shard = path
            .parent()
            .expect("a blob path has a folder")
            .to_path_buf();
        let io_err = |file: &Path, source: io::Error| StoreError::BlobWrite {
            path: file.to_path_buf(),
            source,
        };
        let fsync = |path: &Path| {
            self.inject(FaultPoint::Fsync)
                .and_then(|()| sync_dir(path))
                .map_err(|e| io_err(path, e))
        };
        if !shard.is_dir() {
            std::fs::create_dir_all(&shard).map_err(|e| io_err(&shard, e))?;
            if durable {
                // The new folder's entry in `blobs/`, and `blobs/`'s own.
                fsync(&self.inner.blobs.dir)?;
                fsync(self.dir())?;
            }
        }
        let seq = self.inner.blobs.tmp_seq.fetch_add(1, Ordering::Relaxed);
        let tmp = shard.join(format!(
            "{TMP_PREFIX}{}-{}-{seq}",
            &blob.hash,
            std::process::id()
        ));
        let made = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| io_err(&tmp, e))?;
            self.inject(FaultPoint::Write)
                .and_then(|()| f.write_all(bytes))
                .map_err(|e| io_err(&tmp, e))?;
            if durable {
                self.inject(FaultPoint::Fsync)
                    .and_then(|()| f.sync_all())
                    .map_err(|e| io_err(&tmp, e))?;
            }
            drop(f);
            std::fs::rename(&tmp, &path).map_err(|e| io_err(&path, e))?;
            if durable {
                fsync(&shard)?;
            }
            Ok(())
        })();
        if made.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        made
    }

    /// Releases a pin taken by [`Store::write_blob`].
    pub fn unpin_blob(&self, blob: &BlobRef) {
        let mut pins = self.inner.blobs.pins();
        if let Some(n) = pins.get_mut(&blob.hash) {
            *n -= 1;
            if *n == 0 {
                pins.remove(&blob.hash);
            }
        }
    }

    /// A blob's content, checked against its size and hash. A missing,
    /// short or altered file is a [`StoreError::Blob`] naming it.
    pub fn read_blob(&self, blob: &BlobRef) -> Result<Vec<u8>, StoreError> {
        let path = self.blob_path(blob);
        let bad = |what: String| StoreError::Blob {
            path: path.clone(),
            what,
        };
        if !blob.is_well_formed() {
            return Err(bad(format!(
                "a record names the blob {:?}, which is no blake3 hash",
                blob.hash
            )));
        }
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(bad(format!(
                    "missing (a record names this blob of {} bytes)",
                    blob.bytes
                )))
            }
            Err(e) => return Err(bad(format!("cannot be read: {e}"))),
        };
        if bytes.len() as u64 != blob.bytes {
            return Err(bad(format!(
                "damaged: {} bytes, its record says {}",
                bytes.len(),
                blob.bytes
            )));
        }
        let got = blake3::hash(&bytes).to_hex();
        if got.as_str() != blob.hash {
            return Err(bad(format!(
                "damaged: its content hashes to {got}, not to its name"
            )));
        }
        Ok(bytes)
    }

    /// The index records of `record_key` holding `blob`: put them in the
    /// same atomic batch as the record.
    pub fn blob_index_puts(
        &self,
        record_key: &str,
        blob: &BlobRef,
    ) -> Result<[(String, Vec<u8>); 2], StoreError> {
        // Both values are envelopes, as every record is (the open checks
        // that every record decodes).
        let value = self.encode("blob reference", blob)?;
        Ok([
            (ref_key(&blob.hash, record_key), value.clone()),
            (of_key(record_key), value),
        ])
    }

    /// The blob `record_key` holds, by its index record.
    pub(crate) fn blob_of(&self, record_key: &str) -> Result<Option<BlobRef>, StoreError> {
        self.get(&of_key(record_key))
    }

    /// The index keys to delete with `record_key`, and the blob it held.
    pub(crate) fn blob_index_deletes(
        &self,
        record_key: &str,
    ) -> Result<Option<([String; 2], BlobRef)>, StoreError> {
        Ok(self
            .blob_of(record_key)?
            .map(|b| ([ref_key(&b.hash, record_key), of_key(record_key)], b)))
    }

    /// Whether any record references `hash`.
    fn blob_referenced(&self, hash: &str) -> Result<bool, StoreError> {
        let prefix = format!("{BLOB_REF_PREFIX}{hash}/");
        match self.inner.records.scan_prefix(prefix.as_bytes()).next() {
            None => Ok(false),
            Some(Ok(_)) => Ok(true),
            Some(Err(e)) => Err(self.sled_err(e)),
        }
    }

    /// Removes the blobs among `blobs` that no record references and no
    /// writer pins. Call it after the deletion of their references is
    /// durable. Returns how many files were removed.
    pub(crate) fn remove_unreferenced_blobs(&self, blobs: &[BlobRef]) -> Result<usize, StoreError> {
        let mut removed = 0;
        for b in blobs {
            if !b.is_well_formed() {
                continue;
            }
            // Under the pins' lock: a writer pins before it looks for the
            // file, so it either sees the file gone and writes it again, or
            // pinned it before this check.
            let pins = self.inner.blobs.pins();
            if pins.contains_key(&b.hash) || self.blob_referenced(&b.hash)? {
                continue;
            }
            let path = self.blob_path(b);
            let gate = self.write_gate();
            let gone = std::fs::remove_file(&path);
            drop(gate);
            match gone {
                Ok(()) => {
                    removed += 1;
                    tracing::debug!(path = %path.display(), "blob removed: no record references it");
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    // A leak, not a loss: the next sweep at open retries.
                    tracing::warn!(path = %path.display(), error = %e, "blob not removed");
                }
            }
            drop(pins);
        }
        Ok(removed)
    }

    /// Removes every blob no record references and every temporary file
    /// left by a crash: for the engine's open, before anything runs (no
    /// pins). Returns (blobs kept, files removed).
    pub fn sweep_blobs(&self) -> Result<(usize, usize), StoreError> {
        let dir = self.inner.blobs.dir.clone();
        let Ok(shards) = std::fs::read_dir(&dir) else {
            return Ok((0, 0));
        };
        let (mut kept, mut removed) = (0, 0);
        for shard in shards.flatten() {
            let Ok(files) = std::fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                let path = f.path();
                let unreferenced = if name.starts_with(TMP_PREFIX) {
                    true
                } else {
                    let b = BlobRef {
                        hash: name.clone(),
                        bytes: 0,
                    };
                    if !b.is_well_formed() {
                        // Not weir's: leave it.
                        continue;
                    }
                    let pinned = self.inner.blobs.pins().contains_key(&name);
                    !pinned && !self.blob_referenced(&name)?
                };
                if !unreferenced {
                    kept += 1;
                    continue;
                }
                match std::fs::remove_file(&path) {
                    Ok(()) => {
                        removed += 1;
                        tracing::info!(path = %path.display(), "unreferenced blob removed (left by a crash or an interrupted expiry)");
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "unreferenced blob not removed")
                    }
                }
            }
        }
        Ok((kept, removed))
    }

    /// Blob files and their bytes, for `weir inspect`.
    pub fn blob_usage(&self) -> (u64, u64) {
        let (mut files, mut bytes) = (0, 0);
        if let Ok(shards) = std::fs::read_dir(&self.inner.blobs.dir) {
            for shard in shards.flatten() {
                if let Ok(entries) = std::fs::read_dir(shard.path()) {
                    for e in entries.flatten() {
                        if let Ok(m) = e.metadata() {
                            files += 1;
                            bytes += m.len();
                        }
                    }
                }
            }
        }
        (files, bytes)
    }
}
