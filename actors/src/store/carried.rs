//! Records carried by a journal value: a commit small enough for one value
//! writes its records inside it, so the value alone is the commit's atomic
//! unit and sled's multi-tree transaction is not needed.
//!
//! Why: a sled transaction (or any atomic batch) seals the log buffer
//! before and after a reservation of its own, so a commit's bytes reach the
//! disk as two or three buffers, each a `pwrite` plus a waited
//! `sync_file_range`, before the fsync. A chain of one-node commits paid
//! three device round trips per commit where one insert pays two
//! (measured: commit p50 574 us against 337 us for a plain insert and its
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
use weir_core::codec;

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

impl<'a> CarriedRef<'a> {
    pub(super) fn of(commit: &'a super::Commit) -> CarriedRef<'a> {
        CarriedRef {
            puts: commit
                .puts
                .iter()
                .map(|(key, value)| CarriedPutRef { key, value })
                .collect(),
            deletes: &commit.deletes,
            expiring: &commit.expiring,
        }
    }
}

/// The estimated encoded size of a commit's records.
pub(super) fn records_bytes_estimate(commit: &super::Commit) -> usize {
    let puts: usize = commit.puts.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let deletes: usize = commit.deletes.iter().map(|k| k.len() + 4).sum();
    let expiring: usize = commit.expiring.iter().map(|e| e.key.len() + 16).sum();
    puts + deletes + expiring + 32
}

impl Store {
    /// Writes a carried value at `seq` and then its records and the marker,
    /// each a plain insert into sled's log, in that order (see the module
    /// doc). The caller flushes.
    pub(super) fn write_carried(
        &self,
        commit: &super::Commit,
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
                commit.puts.iter().map(|(k, v)| (k.as_str(), v.as_slice())),
                &commit.deletes,
                &commit.expiring,
            )
        })
    }

    /// The sequence of the last value whose records are all written, 0
    /// when no value ever carried any.
    fn records_applied(&self) -> Result<u64, StoreError> {
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

/// The envelope of a journal value that carries `commit`'s records.
pub(super) fn encode_carried(
    ops: &[weir_core::queue::Op],
    commit: &super::Commit,
    buf: &mut Vec<u8>,
) -> Result<(), codec::CodecError> {
    codec::encode_into(
        &super::journal::EntryRef {
            ops,
            records: Some(CarriedRef::of(commit)),
        },
        buf,
    )
}

#[cfg(test)]
mod tests {
    use weir_core::queue::{Job, Op};

    use super::*;
    use crate::store::{Commit, Durability, JournalEntry, StoreSettings};

    fn settings() -> StoreSettings {
        StoreSettings {
            durability: Durability::Fsync,
            entry_ops_max: 4,
            ..StoreSettings::default()
        }
    }

    fn expiring(key: &str) -> Expiring {
        Expiring {
            at_ms: 5_000,
            key: format!("done/{key}"),
        }
    }

    /// A commit of `ops` enqueues, with a done record and its expiry.
    fn commit_of(key: &str, ops: usize) -> Commit {
        Commit {
            ops: (0..ops)
                .map(|i| Op::Enqueue(Job::new(format!("{key}{i}"), "noop", "p")))
                .collect(),
            puts: vec![(format!("done/{key}"), codec::encode(&7u64).unwrap())],
            deletes: vec![],
            expiring: vec![expiring(key)],
        }
    }

    fn journal_value(store: &Store, seq: u64) -> JournalEntry {
        let v = store.inner.journal.get(seq.to_be_bytes()).unwrap().unwrap();
        codec::decode(&v).unwrap()
    }

    fn has_expiry(store: &Store, key: &str) -> bool {
        let k = expiring(key).index_key();
        store.inner.expiry.get(k).unwrap().is_some()
    }

    #[test]
    fn a_commit_cut_after_its_journal_value_gets_its_records_at_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let seq = {
            let (store, _) = Store::open(&dir, settings()).unwrap();
            store.commit(&commit_of("a", 1)).unwrap();
            let seq = store.commit(&commit_of("b", 2)).unwrap().last_seq;
            assert_eq!(store.records_applied().unwrap(), seq);
            // The cut: the last value reached the disk, its records and
            // the marker did not.
            store.inner.records.remove(b"done/b").unwrap();
            store
                .inner
                .expiry
                .remove(expiring("b").index_key())
                .unwrap();
            store
                .inner
                .snapshot
                .insert(RECORDS_APPLIED_KEY, &(seq - 1).to_be_bytes()[..])
                .unwrap();
            store.sync().unwrap();
            seq
        };
        let (store, recovered) = Store::open(&dir, settings()).unwrap();
        assert_eq!(store.get::<u64>("done/b").unwrap(), Some(7));
        assert!(has_expiry(&store, "b"));
        assert_eq!(store.get::<u64>("done/a").unwrap(), Some(7));
        assert_eq!(store.records_applied().unwrap(), seq);
        assert!(recovered.state.by_key("b1").is_some());
        // Written again once: a second open finds the marker at the value.
        assert!(!store
            .reapply_last(seq, journal_value(&store, seq).records.as_ref().unwrap())
            .unwrap());
    }

    #[test]
    fn records_of_a_value_whose_marker_landed_are_never_written_again() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        {
            let (store, _) = Store::open(&dir, settings()).unwrap();
            store.commit(&commit_of("a", 1)).unwrap();
            // A later write outside the journal removes the record.
            store.inner.records.remove(b"done/a").unwrap();
            store.sync().unwrap();
        }
        let (store, _) = Store::open(&dir, settings()).unwrap();
        assert_eq!(store.get::<u64>("done/a").unwrap(), None);
    }

    #[test]
    fn only_a_commit_that_fits_one_value_carries_its_records() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(tmp.path().join("data"), settings()).unwrap();
        let small = store.commit(&commit_of("s", 3)).unwrap();
        assert_eq!(small.entries, 1);
        let carried = journal_value(&store, small.last_seq).records.unwrap();
        assert_eq!(carried.puts[0].key, "done/s");
        assert_eq!(codec::decode::<u64>(&carried.puts[0].value).unwrap(), 7);
        assert_eq!(carried.expiring, vec![expiring("s")]);
        // More ops than a value holds: values of ops only, records written
        // in the same transaction, the marker left where it was.
        let large = store.commit(&commit_of("l", 9)).unwrap();
        assert_eq!(large.entries, 3);
        for seq in small.last_seq + 1..=large.last_seq {
            assert_eq!(journal_value(&store, seq).records, None);
        }
        assert_eq!(store.get::<u64>("done/l").unwrap(), Some(7));
        assert_eq!(store.records_applied().unwrap(), small.last_seq);
        // A commit with no records is a plain value too.
        let plain = Commit {
            ops: vec![Op::Enqueue(Job::new("p0", "noop", "p"))],
            ..Commit::default()
        };
        let plain = store.commit(&plain).unwrap();
        assert_eq!(journal_value(&store, plain.last_seq).records, None);
    }

    #[test]
    fn a_value_written_before_records_were_carried_still_reads() {
        #[derive(Serialize)]
        struct Old {
            ops: Vec<Op>,
        }
        let ops = vec![Op::Enqueue(Job::new("k", "noop", "p"))];
        let old = codec::encode(&Old { ops: ops.clone() }).unwrap();
        let entry: JournalEntry = codec::decode(&old).unwrap();
        assert_eq!(entry, JournalEntry { ops, records: None });
    }
}
