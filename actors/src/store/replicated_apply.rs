//! The apply of a committed entry (clustered mode): its sets' writes and
//! the state machine's own values, as plain sled inserts, not one sled
//! transaction.
//!
//! Why not atomic: an atomic sled batch or transaction rolls sled's log
//! buffer and hands it to sled's I/O threads (`pin_log`), and on this
//! machine's two shared cores the woken I/O thread preempts the apply: the
//! leader's apply, which is on the commit path, cost 0.5–1.5 ms in a
//! member for a 22 µs transaction (docs/scaling.md). The atomicity is not
//! needed: the entry is durable in the Raft log, the applied log id is
//! written last (after a membership the entry carries, too: openraft looks
//! for memberships in the log only past the applied id), and an entry
//! applied again after a crash writes the same values. sled recovers a
//! prefix of its log (its recovery stops at the first message it cannot
//! read), so after a crash the store holds every
//! entry up to its applied id and a prefix of the next one's writes.
//!
//! What makes the replay exact is the guards: a compare-and-put checked
//! again over a prefix of its own writes could fail where it held. So an
//! entry with a guard first records which of its sets held ([`DECIDED`],
//! with the entry's id), before any of its writes; an entry applied again
//! takes that record instead of checking again. Without the record on
//! disk, none of the entry's writes is either, and the check sees what it
//! saw the first time.
//!
//! What readers see: a read of one key sees a set's write or not, as
//! before; a scan running beside an apply (a listing of runs, the expiry
//! sweep) may now see the first sets of an entry and not the last, for the
//! microseconds the apply takes, where the transaction showed all or none.
//! The leader's point reads of records written and not yet applied come
//! from the pipeline's overlay; a backup and a snapshot's image hold the
//! gate the apply holds, and see whole entries.

use std::collections::HashMap;

use serde_bytes::ByteBuf;
use weir_core::codec;

use super::blobs::BlobRef;
use super::write_set::{TreeId, WriteSet};
use super::{Store, StoreError};

/// The replica tree's key of the last guarded entry's decisions.
const DECIDED: &str = "decided";

/// Which sets of one guarded entry held, recorded before its writes.
#[derive(serde::Serialize, serde::Deserialize)]
struct Decided {
    /// The entry's id (its encoded log id).
    entry: ByteBuf,
    /// Whether each set's guard held, in order.
    held: Vec<bool>,
}

/// Whether each set's guard holds, in order: a guard sees the records
/// as `current` has them, with the writes of the sets before it in the
/// entry over them (a set whose guard failed writes nothing).
fn decide_guards<E>(
    sets: &[WriteSet],
    mut current: impl FnMut(&[u8]) -> Result<Option<Vec<u8>>, E>,
) -> Result<Vec<bool>, E> {
    let mut written: HashMap<&[u8], Option<&[u8]>> = HashMap::new();
    let mut held_all = Vec::with_capacity(sets.len());
    for set in sets {
        let held = match &set.guard {
            None => true,
            Some(g) => {
                let expected = g.expected.as_ref().map(|v| v.as_slice());
                match written.get(g.key.as_bytes()) {
                    Some(value) => *value == expected,
                    None => current(g.key.as_bytes())?.as_deref() == expected,
                }
            }
        };
        if held {
            for w in set.writes.iter().filter(|w| w.tree == TreeId::Records) {
                written.insert(w.key.as_slice(), w.value.as_ref().map(|v| v.as_slice()));
            }
        }
        held_all.push(held);
    }
    Ok(held_all)
}

impl Store {
    /// Applies a committed entry (`entry`: its id, the same on every
    /// apply of it): its sets in order, then the state machine's own values
    /// `meta` (a membership), then `entry` under the key `applied`, last,
    /// so that it says the entry is applied only once all of it is. Returns whether each set's guard held (a set whose
    /// guard did not writes nothing). Not gated by fail-stop: a follower
    /// applies what the group committed. Not synced: the Raft log is
    /// durable (see the module).
    pub fn apply_replicated(
        &self,
        entry: &[u8],
        sets: &[WriteSet],
        meta: &[(&str, Vec<u8>)],
        applied: &str,
    ) -> Result<Vec<bool>, StoreError> {
        for set in sets {
            for bytes in &set.blobs {
                self.write_blob_file(&BlobRef::of(bytes), bytes)?;
            }
        }
        // Blobs hold the gate themselves; the trees' writes here, so a
        // backup sees no entry half applied.
        let _gate = self.write_gate();
        let held = if sets.iter().any(|s| s.guard.is_some()) {
            self.decided(entry, sets)?
        } else {
            vec![true; sets.len()]
        };
        for (set, held) in sets.iter().zip(&held) {
            if !held {
                continue;
            }
            for w in &set.writes {
                let tree = self.tree_of(w.tree);
                match &w.value {
                    Some(v) => tree.insert(w.key.as_slice(), v.as_slice()),
                    None => tree.remove(w.key.as_slice()),
                }
                .map_err(|e| self.apply_failed(e))?;
            }
        }
        let replica = &self.inner.replica;
        for (k, v) in meta {
            replica
                .insert(k.as_bytes(), v.as_slice())
                .map_err(|e| self.apply_failed(e))?;
        }
        replica
            .insert(applied, entry)
            .map_err(|e| self.apply_failed(e))?;
        // The entry is committed and applied here: when this member
        // proposed it, its writers are answered now (see `Proposal`).
        if let (Some(proposal), Some(pipeline)) = (
            sets.last().and_then(|s| s.proposal.as_ref()),
            self.inner.replicator.get(),
        ) {
            pipeline.applied_here(proposal, &held);
        }
        Ok(held)
    }

    fn apply_failed(&self, source: sled::Error) -> StoreError {
        StoreError::Write {
            dir: self.dir().to_path_buf(),
            what: "replicated apply",
            source,
        }
    }

    /// A guarded entry's decisions: the ones recorded by an earlier apply
    /// of it, or decided now and recorded before any of its writes.
    fn decided(&self, entry: &[u8], sets: &[WriteSet]) -> Result<Vec<bool>, StoreError> {
        let replica = &self.inner.replica;
        let recorded = replica.get(DECIDED).map_err(|e| self.apply_failed(e))?;
        if let Some(bytes) = recorded {
            let d = codec::decode::<Decided>(&bytes).map_err(|source| StoreError::Corrupt {
                dir: self.dir().to_path_buf(),
                tree: "replica",
                key: DECIDED.into(),
                source,
            })?;
            if d.entry.as_slice() == entry {
                if d.held.len() != sets.len() {
                    return Err(StoreError::Inconsistent {
                        dir: self.dir().to_path_buf(),
                        tree: "replica",
                        what: format!(
                            "the decisions recorded for an entry name {} sets, the entry has {}",
                            d.held.len(),
                            sets.len()
                        ),
                    });
                }
                return Ok(d.held);
            }
        }
        let records = &self.inner.records;
        let held =
            decide_guards::<sled::Error>(sets, |key| Ok(records.get(key)?.map(|v| v.to_vec())))
                .map_err(|e| self.apply_failed(e))?;
        let decided = Decided {
            entry: ByteBuf::from(entry),
            held,
        };
        let bytes = self.encode("a replicated entry's decisions", &decided)?;
        replica
            .insert(DECIDED, bytes)
            .map_err(|e| self.apply_failed(e))?;
        Ok(decided.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write_set::{Guard, Write};

    fn put(key: &str, value: &str) -> Write {
        Write {
            tree: TreeId::Records,
            key: ByteBuf::from(key.as_bytes()),
            value: Some(ByteBuf::from(value.as_bytes())),
        }
    }

    fn guarded(key: &str, expected: Option<&str>, writes: Vec<Write>) -> WriteSet {
        WriteSet {
            what: "test".into(),
            guard: Some(Guard {
                key: key.into(),
                expected: expected.map(|v| ByteBuf::from(v.as_bytes())),
            }),
            blobs: Vec::new(),
            writes,
            ..WriteSet::default()
        }
    }

    #[test]
    fn a_guard_sees_the_sets_before_it_and_not_a_failed_one() {
        let stored: HashMap<Vec<u8>, Vec<u8>> = [(b"k".to_vec(), b"a".to_vec())].into();
        let sets = vec![
            guarded("k", Some("a"), vec![put("k", "b")]),
            // Fails: k is b now; its write must not count for the next.
            guarded("k", Some("a"), vec![put("k", "c")]),
            guarded("k", Some("b"), vec![put("j", "x")]),
            guarded("j", Some("x"), vec![]),
            guarded("m", None, vec![]),
        ];
        let held =
            decide_guards::<()>(&sets, |key| Ok(stored.get(key).cloned())).expect("no error");
        assert_eq!(held, vec![true, false, true, true, true]);
    }

    #[test]
    fn a_guard_sees_a_removal_before_it_and_only_the_records_tree() {
        let stored: HashMap<Vec<u8>, Vec<u8>> = [(b"k".to_vec(), b"a".to_vec())].into();
        let removal = Write {
            tree: TreeId::Records,
            key: ByteBuf::from(&b"k"[..]),
            value: None,
        };
        let journal_k = Write {
            tree: TreeId::Journal,
            ..put("k", "elsewhere")
        };
        let sets = vec![
            guarded("k", Some("a"), vec![removal]),
            // k is gone now.
            guarded("k", None, vec![journal_k]),
            // The journal's "k" is not the record's.
            guarded("k", None, vec![]),
        ];
        let held =
            decide_guards::<()>(&sets, |key| Ok(stored.get(key).cloned())).expect("no error");
        assert_eq!(held, vec![true, true, true]);
    }

    fn record(store: &Store, key: &str) -> Option<Vec<u8>> {
        store.inner.records.get(key).unwrap().map(|v| v.to_vec())
    }

    #[test]
    fn an_entry_applied_again_decides_as_it_did_the_first_time() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(tmp.path().join("data"), Default::default()).unwrap();
        let sets = vec![
            // Holds the first time only: its own write changes k.
            guarded("k", None, vec![put("k", "b"), put("other", "1")]),
            guarded("k", Some("b"), vec![put("seen", "yes")]),
        ];
        let first = store
            .apply_replicated(b"entry 7", &sets, &[], "applied")
            .unwrap();
        assert_eq!(first, vec![true, true]);
        // A crash before the applied id reached the disk: the entry is
        // applied again over its own writes, and decides the same.
        let again = store
            .apply_replicated(b"entry 7", &sets, &[], "applied")
            .unwrap();
        assert_eq!(again, first);
        assert_eq!(record(&store, "k").as_deref(), Some(&b"b"[..]));
        assert_eq!(record(&store, "seen").as_deref(), Some(&b"yes"[..]));
        assert_eq!(
            store.inner.replica.get("applied").unwrap().as_deref(),
            Some(&b"entry 7"[..])
        );
        // Another entry with the same sets checks its guards anew.
        let other = store
            .apply_replicated(b"entry 8", &sets, &[], "applied")
            .unwrap();
        assert_eq!(other, vec![false, true]);
    }

    #[test]
    fn an_entry_without_guards_records_no_decision() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(tmp.path().join("data"), Default::default()).unwrap();
        let set = WriteSet {
            what: "test".into(),
            guard: None,
            blobs: Vec::new(),
            writes: vec![
                put("a", "1"),
                Write {
                    tree: TreeId::Records,
                    key: ByteBuf::from(&b"a"[..]),
                    value: None,
                },
                put("b", "2"),
            ],
            ..WriteSet::default()
        };
        let held = store
            .apply_replicated(b"entry 1", &[set], &[], "applied")
            .unwrap();
        assert_eq!(held, vec![true]);
        // In order: a's removal after its put.
        assert_eq!(record(&store, "a"), None);
        assert_eq!(record(&store, "b").as_deref(), Some(&b"2"[..]));
        assert!(store.inner.replica.get(DECIDED).unwrap().is_none());
    }

    /// A log that keeps what is submitted and never answers: only the
    /// member's own apply can tell the writer its write is durable.
    struct Silent {
        entries: std::sync::Mutex<Vec<Vec<WriteSet>>>,
        /// Dropped by the test at its end: the entries' answers fail then.
        answers: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
        waiting: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    }

    struct NoAnswer(std::sync::mpsc::Receiver<()>);

    impl crate::store::Submitted for NoAnswer {
        fn wait(self: Box<Self>) -> Result<Vec<bool>, String> {
            let _ = self.0.recv();
            Err("no answer".into())
        }
    }

    impl crate::store::Replicator for Silent {
        fn propose(&self, sets: Vec<WriteSet>) -> Result<Vec<bool>, String> {
            self.submit(sets)?.wait()
        }

        fn submit(&self, sets: Vec<WriteSet>) -> Result<Box<dyn crate::store::Submitted>, String> {
            self.entries.lock().unwrap().push(sets);
            let rx = self
                .waiting
                .lock()
                .unwrap()
                .take()
                .ok_or("one entry only")?;
            Ok(Box::new(NoAnswer(rx)))
        }
    }

    #[test]
    fn a_writer_is_answered_by_its_members_apply_of_the_entry() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(tmp.path().join("data"), Default::default()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(Silent {
            entries: Default::default(),
            answers: std::sync::Mutex::new(Some(tx)),
            waiting: std::sync::Mutex::new(Some(rx)),
        });
        store.set_replicator(log.clone());
        let writer = {
            let store = store.clone();
            std::thread::spawn(move || store.compare_and_put("k", None, Some(b"v"), &[], &[]))
        };
        let t0 = std::time::Instant::now();
        let entry = loop {
            if let Some(e) = log.entries.lock().unwrap().first() {
                break e.clone();
            }
            assert!(t0.elapsed().as_secs() < 10, "never submitted");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert!(entry.last().unwrap().proposal.is_some());
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!writer.is_finished(), "durable before any apply");
        // The member applies the committed entry: the writer is answered,
        // though the log never answered the proposal.
        let held = store
            .apply_replicated(b"entry 1", &entry, &[], "applied")
            .unwrap();
        assert_eq!(held, vec![true]);
        let t0 = std::time::Instant::now();
        while !writer.is_finished() {
            assert!(
                t0.elapsed().as_secs() < 10,
                "the apply did not answer the writer"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(writer.join().unwrap().unwrap(), "written");
        assert_eq!(record(&store, "k").as_deref(), Some(&b"v"[..]));
        // The same entry applied on another member names another pipeline.
        let tmp2 = tempfile::tempdir().unwrap();
        let (other, _) = Store::open(tmp2.path().join("data"), Default::default()).unwrap();
        other
            .apply_replicated(b"entry 1", &entry, &[], "applied")
            .unwrap();
        assert_eq!(record(&other, "k").as_deref(), Some(&b"v"[..]));
        drop(log.answers.lock().unwrap().take());
    }

    #[test]
    fn recorded_decisions_that_do_not_fit_their_entry_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let (store, _) = Store::open(tmp.path().join("data"), Default::default()).unwrap();
        let one = Decided {
            entry: ByteBuf::from(&b"entry 3"[..]),
            held: vec![true],
        };
        store
            .inner
            .replica
            .insert(DECIDED, codec::encode(&one).unwrap())
            .unwrap();
        let sets = vec![guarded("k", None, vec![]), guarded("j", None, vec![])];
        match store.apply_replicated(b"entry 3", &sets, &[], "applied") {
            Err(StoreError::Inconsistent { what, .. }) => {
                assert!(what.contains("1 sets"), "{what}")
            }
            other => panic!("{other:?}"),
        }
        assert!(store.inner.replica.get("applied").unwrap().is_none());
    }
}
