//! Records: durable values by string key, outside the queue's journal.
//!
//! Keys are `kind/...` paths (`run/etl/2026-11-29`, `node/etl/2026-11-29/load/0`,
//! `done/<job key>`, `sched/<graph>/<key>`, `breaker/<target>`); values are
//! weir-core envelopes. Compare-and-put gives swale's graph-run transitions
//! their atomicity; the expiry index deletes records after their retention.
//! A record that names a blob has its index records (`blobref/…`,
//! `blobof/…`, see the `blobs` module) beside it; every delete here takes
//! them in the same batch, and the blob once no record names it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError};
use weir_core::codec;

use serde_bytes::ByteBuf;

use super::kv;
use super::{printable, Guard, Store, StoreError, TreeId, Write, WriteBatch, WriteSet, RECORDS};

/// An expiry index entry: delete record `key` at `at_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expiring {
    /// When the record expires (ms since the epoch).
    pub at_ms: u64,
    /// The record's key.
    pub key: String,
}

impl Expiring {
    /// Its key in the expiry tree: time first, so a range scan finds what
    /// is due.
    pub(crate) fn index_key(&self) -> Vec<u8> {
        let mut k = Vec::with_capacity(8 + self.key.len());
        k.extend_from_slice(&self.at_ms.to_be_bytes());
        k.extend_from_slice(self.key.as_bytes());
        k
    }
}

impl Store {
    /// The raw value of a record.
    pub fn get_raw(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        // A replicated write not yet applied reads as written.
        if let Some(pending) = self.pending_record(key) {
            return Ok(pending);
        }
        Ok(self
            .inner
            .records
            .get(key.as_bytes())
            .map_err(|e| self.sled_err(e))?
            .map(|v| v.to_vec()))
    }

    /// A record, decoded. A value that does not decode is an error naming
    /// the tree and key.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        Ok(self.get_with_raw(key)?.map(|(value, _)| value))
    }

    /// A record, decoded, with its raw value (for a compare-and-put).
    pub fn get_with_raw<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<(T, Vec<u8>)>, StoreError> {
        match self.get_raw(key)? {
            None => Ok(None),
            Some(bytes) => codec::decode(&bytes)
                .map(|value| Some((value, bytes)))
                .map_err(|source| StoreError::Corrupt {
                    dir: self.dir().to_path_buf(),
                    tree: RECORDS,
                    key: key.to_string(),
                    source,
                }),
        }
    }

    /// Whether a record exists.
    pub fn contains(&self, key: &str) -> Result<bool, StoreError> {
        if let Some(pending) = self.pending_record(key) {
            return Ok(pending.is_some());
        }
        self.inner
            .records
            .contains_key(key.as_bytes())
            .map_err(|e| self.sled_err(e))
    }

    /// Every record whose key starts with `prefix`, decoded, in key order.
    pub fn scan<T: DeserializeOwned>(&self, prefix: &str) -> Result<Vec<(String, T)>, StoreError> {
        let mut out = Vec::new();
        for item in self.inner.records.scan_prefix(prefix.as_bytes()) {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            let key = String::from_utf8_lossy(&k).into_owned();
            let value = codec::decode(&v).map_err(|source| StoreError::Corrupt {
                dir: self.dir().to_path_buf(),
                tree: RECORDS,
                key: key.clone(),
                source,
            })?;
            out.push((key, value));
        }
        Ok(out)
    }

    /// Hands every record under `prefix`, decoded, to `f`, in key order,
    /// without holding them all (a scan of every node record).
    pub fn scan_each<T: DeserializeOwned>(
        &self,
        prefix: &str,
        mut f: impl FnMut(&str, T),
    ) -> Result<u64, StoreError> {
        let mut n = 0;
        for item in self.inner.records.scan_prefix(prefix.as_bytes()) {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            let key = String::from_utf8_lossy(&k);
            let value = codec::decode(&v).map_err(|source| StoreError::Corrupt {
                dir: self.dir().to_path_buf(),
                tree: RECORDS,
                key: key.to_string(),
                source,
            })?;
            f(&key, value);
            n += 1;
        }
        Ok(n)
    }

    /// Keys of the records under `prefix`, in key order.
    pub fn scan_keys(&self, prefix: &str) -> Result<Vec<String>, StoreError> {
        self.inner
            .records
            .scan_prefix(prefix.as_bytes())
            .keys()
            .map(|k| {
                k.map(|k| String::from_utf8_lossy(&k).into_owned())
                    .map_err(|e| self.sled_err(e))
            })
            .collect()
    }

    /// Encodes a value as a record.
    pub fn encode<T: Serialize>(&self, what: &str, value: &T) -> Result<Vec<u8>, StoreError> {
        codec::encode(value).map_err(|source| StoreError::Encode {
            what: what.to_string(),
            source,
        })
    }

    /// Writes `new` (or deletes, for `None`) when the stored value equals
    /// `expected` (`None` = absent), adding the `expiring` index entries and
    /// removing the `unexpiring` ones in the same transaction (a settled run
    /// that becomes active again must not expire); then makes it durable.
    /// `false` when the stored value differed: nothing was written.
    pub fn compare_and_put(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        expiring: &[Expiring],
        unexpiring: &[Expiring],
    ) -> Result<bool, StoreError> {
        let written = self.compare_and_put_unsynced(key, expected, new, expiring, unexpiring)?;
        if written {
            self.sync()?;
        }
        Ok(written)
    }

    /// [`Self::compare_and_put`] without making it durable: for many
    /// transitions followed by one [`Store::sync`] (nothing may be
    /// acknowledged before that sync).
    pub fn compare_and_put_unsynced(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
        expiring: &[Expiring],
        unexpiring: &[Expiring],
    ) -> Result<bool, StoreError> {
        self.check_writable()?;
        self.check_space()?;
        if self.is_replicated() {
            let mut writes = vec![Write {
                tree: TreeId::Records,
                key: ByteBuf::from(key.as_bytes()),
                value: new.map(ByteBuf::from),
            }];
            for (e, put) in expiring
                .iter()
                .map(|e| (e, true))
                .chain(unexpiring.iter().map(|e| (e, false)))
            {
                writes.push(Write {
                    tree: TreeId::Expiry,
                    key: ByteBuf::from(e.index_key()),
                    value: put.then(ByteBuf::new),
                });
            }
            return self.replicate(WriteSet {
                what: "record compare-and-put".into(),
                guard: Some(Guard {
                    key: key.to_string(),
                    expected: expected.map(ByteBuf::from),
                }),
                blobs: Vec::new(),
                writes,
                ..WriteSet::default()
            });
        }
        let inner = &self.inner;
        let written = self.write_sled("record compare-and-put", || {
            let result = kv::transaction2((&inner.records, &inner.expiry), |(r, x)| {
                let current = r.get(key.as_bytes())?;
                if current.as_deref() != expected {
                    return Err(ConflictableTransactionError::Abort(()));
                }
                match new {
                    Some(v) => {
                        r.insert(key.as_bytes(), v)?;
                    }
                    None => {
                        r.remove(key.as_bytes())?;
                    }
                }
                for e in expiring {
                    x.insert(e.index_key(), &[] as &[u8])?;
                }
                for e in unexpiring {
                    x.remove(e.index_key())?;
                }
                Ok(())
            });
            match result {
                Ok(()) => Ok(true),
                Err(TransactionError::Abort(())) => Ok(false),
                Err(TransactionError::Storage(e)) => Err(e),
            }
        })?;
        Ok(written)
    }

    /// Writes records and deletes others in one atomic batch, then makes it
    /// durable. A deleted record's blob index records go in the same
    /// batch, and its blob once no record references it.
    pub fn put_batch(
        &self,
        puts: &[(String, Vec<u8>)],
        deletes: &[String],
    ) -> Result<(), StoreError> {
        self.check_writable()?;
        self.check_space()?;
        let mut batch = self.batch(TreeId::Records);
        for (k, v) in puts {
            batch.insert(k.as_bytes(), v.as_slice());
        }
        let mut blobs = Vec::new();
        for k in deletes {
            batch.remove(k.as_bytes());
            self.delete_blob_index(k, &mut batch, &mut blobs)?;
        }
        self.write_batches("record batch", vec![batch])?;
        self.sync()?;
        self.remove_unreferenced_blobs(&blobs)?;
        Ok(())
    }

    /// Adds to `batch` the deletion of the blob index records of
    /// `record_key` (a record deleted in the same batch), and the blob it
    /// held to `blobs`: removed once the batch is durable, if nothing else
    /// references it.
    fn delete_blob_index(
        &self,
        record_key: &str,
        batch: &mut WriteBatch,
        blobs: &mut Vec<super::BlobRef>,
    ) -> Result<(), StoreError> {
        if let Some((keys, blob)) = self.blob_index_deletes(record_key)? {
            for k in keys {
                batch.remove(k.as_bytes());
            }
            blobs.push(blob);
        }
        Ok(())
    }

    /// One expiry pass: deletes the records whose expiry instant is at or
    /// before `now_ms`, at most `expiry_batch_max` of them, with their index
    /// entries, atomically. Returns the keys deleted.
    pub fn expire_due(&self, now_ms: u64) -> Result<Vec<String>, StoreError> {
        self.expire_due_with(now_ms, |_| Ok(()))
    }

    /// [`Self::expire_due`], calling `before` with each due key before the
    /// key and its index entry are deleted: what depends on a record goes
    /// first, so a crash between the two leaves the index entry to retry
    /// from (a settled run's node records before the run record).
    pub fn expire_due_with(
        &self,
        now_ms: u64,
        mut before: impl FnMut(&str) -> Result<(), StoreError>,
    ) -> Result<Vec<String>, StoreError> {
        self.check_writable()?;
        let inner = &self.inner;
        let end = now_ms.saturating_add(1).to_be_bytes();
        let mut index_keys = Vec::new();
        let mut keys = Vec::new();
        for item in inner
            .expiry
            .range(..end.as_slice())
            .take(inner.settings.expiry_batch_max)
        {
            let (k, _) = item.map_err(|e| self.sled_err(e))?;
            if k.len() < 8 {
                return Err(StoreError::Inconsistent {
                    dir: self.dir().to_path_buf(),
                    tree: super::EXPIRY,
                    what: format!("index key {} is shorter than its instant", printable(&k)),
                });
            }
            keys.push(String::from_utf8_lossy(&k[8..]).into_owned());
            index_keys.push(k);
        }
        if keys.is_empty() {
            return Ok(keys);
        }
        for k in &keys {
            before(k)?;
        }
        let mut records = self.batch(TreeId::Records);
        let mut blobs = Vec::new();
        for k in &keys {
            records.remove(k.as_bytes());
            self.delete_blob_index(k, &mut records, &mut blobs)?;
        }
        let mut index = self.batch(TreeId::Expiry);
        for k in &index_keys {
            index.remove(k);
        }
        if self.is_replicated() {
            self.write_batches("expiry of records", vec![records, index])?;
            self.sync()?;
            self.remove_unreferenced_blobs(&blobs)?;
            return Ok(keys);
        }
        let (records, index) = (records.into_local(), index.into_local());
        self.write_sled("expiry of records", || {
            kv::transaction2((&inner.records, &inner.expiry), |(r, x)| {
                r.apply_batch(&records)?;
                x.apply_batch(&index)?;
                Ok::<(), ConflictableTransactionError<()>>(())
            })
            .map_err(|e| match e {
                TransactionError::Storage(e) => e,
                TransactionError::Abort(()) => unreachable!("expiry never aborts"),
            })
        })?;
        self.sync()?;
        self.remove_unreferenced_blobs(&blobs)?;
        Ok(keys)
    }

    /// Deletes every record under `prefix` (a settled run's node records),
    /// in batches of `expiry_batch_max`, durably. Returns how many.
    pub fn delete_prefix(&self, prefix: &str) -> Result<usize, StoreError> {
        self.check_writable()?;
        let mut deleted = 0;
        let mut blobs = Vec::new();
        loop {
            let keys: Vec<sled::IVec> = self
                .inner
                .records
                .scan_prefix(prefix.as_bytes())
                .keys()
                .take(self.inner.settings.expiry_batch_max)
                .collect::<Result<_, _>>()
                .map_err(|e| self.sled_err(e))?;
            if keys.is_empty() {
                break;
            }
            let mut batch = self.batch(TreeId::Records);
            for k in &keys {
                batch.remove(k);
                self.delete_blob_index(&String::from_utf8_lossy(k), &mut batch, &mut blobs)?;
            }
            self.write_batches("deletion of records", vec![batch])?;
            deleted += keys.len();
        }
        if deleted > 0 {
            self.sync()?;
            self.remove_unreferenced_blobs(&blobs)?;
        }
        Ok(deleted)
    }
}
