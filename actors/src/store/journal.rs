//! The journal: queue ops appended under sequence keys, with group commit.
//!
//! A [`Commit`] is every op of one batch plus the records they carry (a
//! Complete's node record, a done key). A commit that fits one journal
//! value is written as that value, carrying its records, and the records
//! after it (`carried`: atomic through the value, with no sled
//! transaction); a larger one in one atomic sled batch (a transaction when
//! it touches more than the journal tree). Either is then made durable
//! once, as the durability mode says: many ops, one flush. Nothing is
//! acknowledged before [`Store::commit`] returns.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use sled::transaction::{ConflictableTransactionError, TransactionError};
use weir_core::codec;
use weir_core::queue::Op;

use serde_bytes::ByteBuf;

use super::carried::{CarriedRecords, CarriedRef, RecordsOf, CARRIED_BYTES_MAX};
use super::kv;
use super::records::Expiring;
use super::{Store, StoreError, TreeId, Write, WriteSet};

/// One journal value: consecutive ops of one commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    /// The ops, in the order they were applied.
    pub ops: Vec<Op>,
    /// The records of its commit, when the commit fit in this one value
    /// (see `carried`): absent in values written before, and in those of
    /// commits written as a transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<CarriedRecords>,
}

/// What one commit writes.
#[derive(Debug, Clone, Default)]
pub struct Commit {
    /// Queue ops, in the order the caller applied them.
    pub ops: Vec<Op>,
    /// Records written in the same atomic batch (envelope-encoded values).
    pub puts: Vec<(String, Vec<u8>)>,
    /// Records deleted in the same batch.
    pub deletes: Vec<String>,
    /// Expiry index entries added in the same batch.
    pub expiring: Vec<Expiring>,
}

impl Commit {
    /// Whether it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && !self.has_records()
    }

    /// Whether it writes records (puts, deletes or expiry entries) beside
    /// its ops.
    pub fn has_records(&self) -> bool {
        !(self.puts.is_empty() && self.deletes.is_empty() && self.expiring.is_empty())
    }
}

/// What a commit wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The last journal sequence after it (unchanged when it had no ops).
    pub last_seq: u64,
    /// Journal values written.
    pub entries: u64,
    /// Bytes of journal values written.
    pub bytes: u64,
}

/// A rough upper bound of an op's encoding beyond its variable parts, so
/// that only ops near the limit are encoded twice to check their size.
const OP_FIXED_BYTES_MAX: usize = 512;

/// A journal value closes once its ops' estimated encoding reaches this
/// many bytes. sled keeps up to 17 values in a leaf, rewrites a leaf whole
/// as it fills, and writes any page over a quarter of its 512 KiB segment
/// to a blob file of its own, which sled does not fsync (the store must, at
/// two more fsyncs per commit: with 78 KiB values of 256 ops, that cost 40%
/// of fsync-mode throughput). Values of about 6 KiB keep a full leaf near
/// 100 KiB, inside the log.
const VALUE_BYTES_TARGET: usize = 6 << 10;

/// An op's encoded size, roughly (named encoding spells field names): for
/// cutting the journal into values, where close is enough.
fn op_bytes_estimate(op: &Op) -> usize {
    match op {
        Op::Enqueue(job) => {
            job.payload.len()
                + job.key.len()
                + job.task.len()
                + job.pool.len()
                + job.target.as_ref().map_or(0, |t| t.len())
                + job.notify.as_ref().map_or(0, |t| t.len())
                + 200
        }
        Op::Select { pool, worker, .. } => pool.len() + worker.len() + 60,
        _ => 40,
    }
}

impl Store {
    /// Refuses an op that would be over the entry limit. The queue actor
    /// calls it before applying the op, so the state never runs ahead of
    /// what the journal can hold.
    pub fn check_op(&self, op: &Op) -> Result<(), StoreError> {
        let limit = self.settings().entry_bytes_max;
        if let Op::Enqueue(job) = op {
            let estimate = job.payload.len()
                + job.key.len()
                + job.task.len()
                + job.pool.len()
                + job.target.as_ref().map_or(0, |t| t.len())
                + OP_FIXED_BYTES_MAX;
            if estimate > limit {
                let size = codec::encode(op)
                    .map_err(|source| StoreError::Encode {
                        what: format!("enqueue of key {:?}", job.key),
                        source,
                    })?
                    .len();
                if size > limit {
                    return Err(StoreError::EntryTooLarge {
                        key: job.key.to_string(),
                        size,
                        limit,
                    });
                }
            }
        }
        Ok(())
    }

    /// Appends `commit` and makes it durable. On return, every op and
    /// record of it survives a crash (as the durability mode says). On an
    /// error after anything reached sled, the store fail-stops.
    pub fn commit(&self, commit: &Commit) -> Result<CommitInfo, StoreError> {
        self.check_writable()?;
        let inner = &self.inner;
        let _one_writer = inner.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let journal_bytes = inner.bytes_since_snapshot.load(Ordering::Relaxed);
        if !commit.ops.is_empty() && journal_bytes > inner.settings.journal_bytes_max {
            return Err(StoreError::JournalFull {
                bytes: journal_bytes,
                limit: inner.settings.journal_bytes_max,
            });
        }
        for op in &commit.ops {
            self.check_op(op)?;
        }
        if !commit.is_empty() {
            self.check_space()?;
        }
        let mut seq = self.last_seq();
        let chunk = inner.settings.entry_ops_max.max(1);
        let mut buf = Vec::with_capacity(2 * VALUE_BYTES_TARGET);
        if self.carries(commit, chunk) {
            // One value holds the ops and the records: one plain insert
            // each, no transaction (see `carried`).
            let entry = EntryRef {
                ops: &commit.ops,
                records: Some(records_of(commit).carried()),
            };
            codec::encode_packed_into(&entry, &mut buf).map_err(|source| StoreError::Encode {
                what: "journal entry carrying its records".into(),
                source,
            })?;
            seq += 1;
            self.write_carried(records_of(commit), seq, &buf)?;
            return self.committed(commit, seq, 1, buf.len() as u64);
        }
        // Encode before touching sled: an encoding error writes nothing.
        let mut batch = self.batch(TreeId::Journal);
        let mut entries = 0u64;
        let mut bytes = 0u64;
        let mut start = 0;
        while start < commit.ops.len() {
            // A value takes ops until it holds `entry_ops_max` of them or
            // their estimated encoding reaches VALUE_BYTES_TARGET.
            let mut end = start;
            let mut estimate = 0;
            while end < commit.ops.len() && end - start < chunk && estimate < VALUE_BYTES_TARGET {
                estimate += op_bytes_estimate(&commit.ops[end]);
                end += 1;
            }
            let ops = &commit.ops[start..end];
            start = end;
            buf.clear();
            codec::encode_packed_into(&EntryRef { ops, records: None }, &mut buf).map_err(
                |source| StoreError::Encode {
                    what: "journal entry".into(),
                    source,
                },
            )?;
            seq += 1;
            entries += 1;
            bytes += buf.len() as u64;
            batch.insert(seq.to_be_bytes(), buf.as_slice());
        }
        if self.is_replicated() {
            let mut writes = batch.into_writes();
            records_writes(commit, &mut writes);
            if !writes.is_empty() {
                self.replicate(WriteSet {
                    what: "journal commit".into(),
                    writes,
                    ..WriteSet::default()
                })?;
            }
        } else {
            self.write_commit(commit, batch.into_local(), entries, seq, &buf)?;
        }
        self.committed(commit, seq, entries, bytes)
    }

    /// Whether `commit` goes into one journal value carrying its records:
    /// single-node, with ops and records, small enough for one value.
    fn carries(&self, commit: &Commit, entry_ops_max: usize) -> bool {
        if self.is_replicated()
            || !commit.has_records()
            || commit.ops.is_empty()
            || commit.ops.len() > entry_ops_max
        {
            return false;
        }
        let ops: usize = commit.ops.iter().map(op_bytes_estimate).sum();
        ops + records_of(commit).bytes_estimate() <= CARRIED_BYTES_MAX
    }

    /// Makes a written commit durable and counts it.
    fn committed(
        &self,
        commit: &Commit,
        seq: u64,
        entries: u64,
        bytes: u64,
    ) -> Result<CommitInfo, StoreError> {
        let inner = &self.inner;
        self.sync()?;
        inner.last_seq.store(seq, Ordering::Release);
        inner
            .ops_since_snapshot
            .fetch_add(commit.ops.len() as u64, Ordering::Relaxed);
        inner
            .bytes_since_snapshot
            .fetch_add(bytes, Ordering::Relaxed);
        Ok(CommitInfo {
            last_seq: seq,
            entries,
            bytes,
        })
    }

    /// Writes a commit's journal values (`batch`; the last is `last` at
    /// `seq`) and records into sled (single-node mode).
    fn write_commit(
        &self,
        commit: &Commit,
        batch: kv::Batch,
        entries: u64,
        seq: u64,
        last: &[u8],
    ) -> Result<(), StoreError> {
        let inner = &self.inner;
        let buf = last;
        if !commit.has_records() {
            if entries == 1 {
                // One value is atomic on its own; sled's batch would add a
                // process-wide write lock and a batch marker in its log.
                self.write_sled("journal commit", || {
                    inner.journal.insert(seq.to_be_bytes(), buf)
                })?;
            } else if entries > 1 {
                self.write_sled("journal commit", || inner.journal.apply_batch(batch))?;
            }
        } else {
            let mut records = kv::Batch::default();
            for (key, value) in &commit.puts {
                records.insert(key.as_bytes(), value.as_slice());
            }
            for key in &commit.deletes {
                records.remove(key.as_bytes());
            }
            let mut expiry = kv::Batch::default();
            for e in &commit.expiring {
                expiry.insert(e.index_key(), &[] as &[u8]);
            }
            self.write_sled("journal commit with records", || {
                kv::transaction3(
                    (&inner.journal, &inner.records, &inner.expiry),
                    |(j, r, x)| {
                        j.apply_batch(&batch)?;
                        r.apply_batch(&records)?;
                        x.apply_batch(&expiry)?;
                        Ok::<(), ConflictableTransactionError<()>>(())
                    },
                )
                .map_err(|e| match e {
                    TransactionError::Storage(e) => e,
                    TransactionError::Abort(()) => {
                        unreachable!("the commit transaction never aborts")
                    }
                })
            })?;
        }
        Ok(())
    }
}

/// A commit's records, puts, deletes and expiry entries, as replicated
/// writes after its journal values.
fn records_writes(commit: &Commit, writes: &mut Vec<Write>) {
    for (key, value) in &commit.puts {
        writes.push(Write {
            tree: TreeId::Records,
            key: ByteBuf::from(key.as_bytes()),
            value: Some(ByteBuf::from(value.as_slice())),
        });
    }
    for key in &commit.deletes {
        writes.push(Write {
            tree: TreeId::Records,
            key: ByteBuf::from(key.as_bytes()),
            value: None,
        });
    }
    for e in &commit.expiring {
        writes.push(Write {
            tree: TreeId::Expiry,
            key: ByteBuf::from(e.index_key()),
            value: Some(ByteBuf::new()),
        });
    }
}

fn records_of(commit: &Commit) -> RecordsOf<'_> {
    RecordsOf {
        puts: &commit.puts,
        deletes: &commit.deletes,
        expiring: &commit.expiring,
    }
}

/// A borrowed [`JournalEntry`], encoded the same way.
#[derive(Serialize)]
pub(super) struct EntryRef<'a> {
    pub(super) ops: &'a [Op],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) records: Option<CarriedRef<'a>>,
}

#[cfg(test)]
mod tests {
    use weir_core::queue::{Job, Op};

    use super::*;
    use crate::store::carried::RECORDS_APPLIED_KEY;
    use crate::store::{Durability, StoreSettings};

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
    fn journal_values_and_ticket_chunks_are_stored_packed_and_plain_ones_still_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let raw_format =
            |tree: &crate::store::kv::Tree, key: &[u8]| tree.get(key).unwrap().unwrap()[0];
        {
            let (store, _) = Store::open(&dir, settings()).unwrap();
            let c = store.commit(&commit_of("k", 16)).unwrap();
            for seq in c.last_seq - 3..=c.last_seq {
                let format = raw_format(&store.inner.journal, &seq.to_be_bytes());
                assert_eq!(format, codec::FORMAT_LZ4_NAMED);
                assert_eq!(journal_value(&store, seq).ops.len(), 4);
            }
            // A value as weir wrote them before packing: plain.
            let plain = codec::encode(&JournalEntry {
                ops: vec![Op::Enqueue(Job::new("old", "noop", "p"))],
                records: None,
            })
            .unwrap();
            assert_eq!(plain[0], codec::FORMAT_RMP_NAMED);
            store
                .inner
                .journal
                .insert((c.last_seq + 1).to_be_bytes(), plain)
                .unwrap();
            store.sync().unwrap();
        }
        let (store, recovered) = Store::open(&dir, settings()).unwrap();
        assert!(recovered.state.by_key("old").is_some());
        assert!(recovered.state.by_key("k15").is_some());
        assert_eq!(recovered.state.len(), 17);
        // The snapshot's ticket chunks are packed too, and read back.
        let tickets: Vec<_> = recovered.state.tickets().collect();
        store
            .write_snapshot(
                store.last_seq(),
                recovered.state.next_id(),
                tickets.len() as u64,
                tickets.iter().map(|t| (t.id, Some(*t))),
            )
            .unwrap();
        let chunk = crate::store::layout::chunk_key(0);
        assert_eq!(
            raw_format(&store.inner.snapshot, &chunk),
            codec::FORMAT_LZ4_NAMED
        );
        drop(store);
        let (_, recovered) = Store::open(&dir, settings()).unwrap();
        assert_eq!(recovered.state.len(), 17);
        assert!(recovered.state.by_key("k7").is_some());
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
