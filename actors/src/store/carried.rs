//! Records carried by a journal value: a commit small enough for one value
//! writes its records inside it, so the value alone is the commit's atomic
//! unit and sled's multi-tree transaction is not needed.
//!
//! Why: a sled transaction (or any atomic batch) seals the log buffer
//! before and after a reservation of its own, so a commit's bytes reach the
//! disk as two or three buffers, each a `pwrite` and a wait on the device
//! (then a waited `sync_file_range`; an fdatasync since sled's log write
//! ends in one). A chain of one-node commits paid three device round trips
//! per commit where one insert pays one (measured, with the waits of
//! then: commit p50 574 us against 337 us for a plain insert and its
//! fsync, `bench chain --quick`).
//!
//! How it stays atomic: the commit writes, in this order and before its
//! one flush, the journal value (ops and records), each record, each
//! expiry entry, and last the key [`RECORDS_APPLIED_KEY`] in the snapshot
//! tree, set to the value's sequence. sled recovers a prefix of its log
//! (it stops at the first torn message), and these writes take log
//! positions in that order. So after any crash either the value is gone
//! (and so is everything after it), or it is there and its records may be
//! partly there; then the marker is behind the value's sequence, and the
//! open writes the records again from the value ([`reapply_last`]). Only
//! the journal's last value can be in that state: a later write made it to
//! disk only if every earlier one did, the marker included. A value whose
//! marker did land is never applied again, so a later write of the same
//! record (by another commit, or outside the journal) is never undone.

use serde::{Deserialize, Serialize};

use super::kv;
use super::records::Expiring;
use super::{printable, Store, StoreError, SNAPSHOT};

/// The snapshot tree's key that holds the sequence of the last journal
/// value whose carried records are all written (8 bytes, big-endian).
pub(crate) const RECORDS_APPLIED_KEY: &[u8] = b"r";

/// A carried value holds at most this many bytes of ops and records
/// (estimated); a larger commit goes through a transaction, as before.
/// The journal's own value target, so a leaf stays inside the log.
pub(crate) const CARRIED_BYTES_MAX: usize = 6 << 10;

/// One record a journal value carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CarriedPut {
    /// The record's key.
    pub key: String,
    /// Its envelope-encoded value.
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
}

/// The records a journal value carries: what its commit wrote beside its
/// ops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CarriedRecords {
    /// Records written.
    #[serde(default)]
    pub puts: Vec<CarriedPut>,
    /// Records deleted, after the puts.
    #[serde(default)]
    pub deletes: Vec<String>,
    /// Expiry index entries added.
    #[serde(default)]
    pub expiring: Vec<Expiring>,
}

/// A borrowed [`CarriedPut`], encoded the same way.
#[derive(Serialize)]
pub(super) struct CarriedPutRef<'a> {
    key: &'a str,
    #[serde(with = "serde_bytes")]
    value: &'a [u8],
}

/// A borrowed [`CarriedRecords`], encoded the same way.
#[derive(Serialize)]
pub(super) struct CarriedRef<'a> {
    puts: Vec<CarriedPutRef<'a>>,
    deletes: &'a [String],
    expiring: &'a [Expiring],
}

/// A commit's records, borrowed: what it puts, deletes and indexes to
/// expire.
#[derive(Clone, Copy)]
pub(super) struct RecordsOf<'a> {
    pub(super) puts: &'a [(String, Vec<u8>)],
    pub(super) deletes: &'a [String],
    pub(super) expiring: &'a [Expiring],
}

impl<'a> RecordsOf<'a> {
    /// The value's part that carries them.
    pub(super) fn carried(self) -> CarriedRef<'a> {
        CarriedRef {
            puts: self
                .puts
                .iter()
                .map(|(key, value)| CarriedPutRef { key, value })
                .collect(),
            deletes: self.deletes,
            expiring: self.expiring,
        }
    }

    /// Their estimated encoded size.
    pub(super) fn bytes_estimate(self) -> usize {
        let puts: usize = self.puts.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
        let deletes: usize = self.deletes.iter().map(|k| k.len() + 4).sum();
        let expiring: usize = self.expiring.iter().map(|e| e.key.len() + 16).sum();
        puts + deletes + expiring + 32
    }
}

impl Store {
    /// Writes a carried value at `seq` and then its records and the marker,
    /// each a plain insert into sled's log, in that order (see the module
    /// doc). The caller flushes.
    pub(super) fn write_carried(
        &self,
        records: RecordsOf<'_>,
        seq: u64,
        value: &[u8],
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        // Two writes, so that a failure between them (the fault injector's
        // `write` point, or the disk) leaves what a crash there would: the
        // value without its records, which the next open writes again.
        self.write_sled("journal commit carrying its records", || {
            inner.journal.insert(seq.to_be_bytes(), value)
        })?;
        self.write_sled("records of a journal commit", || {
            write_records(
                &inner.records,
                &inner.expiry,
                &inner.snapshot,
                seq,
                records.puts.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
                records.deletes,
                records.expiring,
            )
        })
    }

    /// The sequence of the last value whose records are all written, 0
    /// when no value ever carried any.
    pub(super) fn records_applied(&self) -> Result<u64, StoreError> {
        let Some(v) = self
            .inner
            .snapshot
            .get(RECORDS_APPLIED_KEY)
            .map_err(|e| self.sled_err(e))?
        else {
            return Ok(0);
        };
        <[u8; 8]>::try_from(v.as_ref())
            .map(u64::from_be_bytes)
            .map_err(|_| StoreError::Inconsistent {
                dir: self.dir().to_path_buf(),
                tree: SNAPSHOT,
                what: format!(
                    "key {} holds {} bytes where a sequence number of 8 is kept",
                    printable(RECORDS_APPLIED_KEY),
                    v.len()
                ),
            })
    }

    /// At open, after the replay: writes again the records of the
    /// journal's last value (`seq`) when it carries some and its marker
    /// is behind it, a crash having cut its commit short; makes that
    /// durable. Returns whether it wrote them.
    pub(super) fn reapply_last(
        &self,
        seq: u64,
        carried: &CarriedRecords,
    ) -> Result<bool, StoreError> {
        let applied = self.records_applied()?;
        if applied >= seq {
            return Ok(false);
        }
        let inner = &self.inner;
        self.write_sled("records of the journal's last value", || {
            write_records(
                &inner.records,
                &inner.expiry,
                &inner.snapshot,
                seq,
                carried
                    .puts
                    .iter()
                    .map(|p| (p.key.as_str(), p.value.as_slice())),
                &carried.deletes,
                &carried.expiring,
            )
        })?;
        self.sync()?;
        tracing::info!(
            dir = %self.dir().display(),
            seq,
            marker_seq = applied,
            puts = carried.puts.len(),
            deletes = carried.deletes.len(),
            expiring = carried.expiring.len(),
            "records of the journal's last value written again: its commit was cut short"
        );
        Ok(true)
    }
}

/// The records, then the marker at `seq`: plain inserts, in log order.
fn write_records<'a>(
    records: &kv::Tree,
    expiry: &kv::Tree,
    snapshot: &kv::Tree,
    seq: u64,
    puts: impl Iterator<Item = (&'a str, &'a [u8])>,
    deletes: &[String],
    expiring: &[Expiring],
) -> Result<(), sled::Error> {
    for (key, value) in puts {
        records.insert(key.as_bytes(), value)?;
    }
    for key in deletes {
        records.remove(key.as_bytes())?;
    }
    for e in expiring {
        expiry.insert(e.index_key(), &[] as &[u8])?;
    }
    snapshot.insert(RECORDS_APPLIED_KEY, &seq.to_be_bytes()[..])?;
    Ok(())
}
