//! The store's edges, one test each: corruption is found at open and named
//! by tree and key; disk use stays bounded under a steady load with
//! snapshots; the data directory is locked against a second open in this
//! process and in another; a failed write fail-stops every later write
//! until reopen; the entry limit and the journal limit refuse what they
//! should and nothing else; compare-and-put, expiry, inspect, and a commit's
//! records being atomic with its ops.
//!
//! The second-process lock test re-runs this test binary as the child
//! (`lock_child`, a no-op unless `WEIR_LOCK_CHILD_DIR` is set), so no helper
//! binary has to be built.
// Table rows are tuples, one per case, as in the other tables.
#![allow(clippy::type_complexity)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use weir_actors::store::{
    Commit, Durability, Expiring, Inspect, JournalEntry, Store, StoreError, StoreSettings,
};
use weir_core::codec;
use weir_core::queue::{Applied, Job, Op, QueueState, Terminal, TicketId};

const LOCK_CHILD_ENV: &str = "WEIR_LOCK_CHILD_DIR";

fn job(key: &str, payload_bytes: usize) -> Job {
    Job {
        payload: vec![0xab; payload_bytes],
        ..Job::new(key, "noop", "p")
    }
}

fn settings(durability: Durability) -> StoreSettings {
    StoreSettings {
        durability,
        ..StoreSettings::default()
    }
}

fn open(dir: &Path) -> (Store, weir_actors::store::Recovered) {
    Store::open(dir, settings(Durability::Flush)).expect("store opens")
}

fn enqueues(keys: impl IntoIterator<Item = String>) -> Commit {
    Commit {
        ops: keys.into_iter().map(|k| Op::Enqueue(job(&k, 16))).collect(),
        ..Commit::default()
    }
}

/// Sum of the sizes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        // The reserve file is preallocated room, not data.
        if entry.file_name() == "reserve" {
            continue;
        }
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            total += dir_bytes(&entry.path());
        } else {
            total += meta.len();
        }
    }
    total
}

/// Writes a full snapshot of `state` at the store's last sequence, every
/// live ticket changed (the first snapshot of a store).
fn snapshot_all(store: &Store, state: &QueueState) {
    store
        .write_snapshot(
            store.last_seq(),
            state.next_id(),
            state.len() as u64,
            state.tickets().map(|t| (t.id, Some(t))),
        )
        .expect("snapshot");
}

/// A store with a snapshot of tickets 0..3 and a journal tail of 2 entries,
/// plus one record: something of each kind to corrupt.
fn populated(dir: &Path) -> (u64, u64) {
    let (store, _) = open(dir);
    let mut state = QueueState::new();
    let commit = enqueues((0..3).map(|i| format!("a{i}")));
    for op in &commit.ops {
        let _ = state.step(op);
    }
    store.commit(&commit).unwrap();
    snapshot_all(&store, &state);
    let first = store
        .commit(&enqueues(["b0".to_string()]))
        .unwrap()
        .last_seq;
    let second = store
        .commit(&Commit {
            ops: vec![Op::Enqueue(job("b1", 16))],
            puts: vec![(
                "run/g/1".into(),
                codec::encode(&"running".to_string()).unwrap(),
            )],
            ..Commit::default()
        })
        .unwrap()
        .last_seq;
    (first, second)
}

fn expect_corrupt(dir: &Path, tree: &str, key: &str) {
    let err = Store::open(dir, settings(Durability::Flush))
        .err()
        .expect("a corrupt store does not open");
    match &err {
        StoreError::Corrupt {
            tree: t, key: k, ..
        } => {
            assert_eq!(*t, tree, "error names the tree: {err}");
            assert_eq!(k, key, "error names the key: {err}");
        }
        other => panic!("want Corrupt in tree {tree}, key {key}; got {other}"),
    }
    let msg = err.to_string();
    assert!(msg.contains(&format!("tree {tree}")), "{msg}");
    assert!(msg.contains(key), "{msg}");
}

/// Overwritten bytes in each tree stop the open with an error that names
/// the tree and the key (for the journal, the sequence).
#[test]
fn corruption_is_named_at_open() {
    // Each row: the tree, the key to overwrite (None: the journal entry at
    // the tail's first sequence), the bytes written, the key the error
    // names (None: "sequence N").
    // Tickets 0..3 are in snapshot chunk 0, under `c` + its number.
    let chunk_key: Vec<u8> = {
        let mut k = vec![b'c'];
        k.extend_from_slice(&0u64.to_be_bytes());
        k
    };
    let cases: Vec<(&str, Option<Vec<u8>>, Vec<u8>, Option<String>)> = vec![
        ("journal", None, vec![1, 0xc1, 0xff], None),
        ("journal", None, vec![], None),
        ("journal", None, vec![7, 1, 2, 3], None),
        (
            "snapshot",
            Some(chunk_key.clone()),
            vec![1, 0x93, 0x01],
            Some("630000000000000000".into()),
        ),
        (
            "snapshot",
            Some(b"meta".to_vec()),
            vec![1, 0xc1],
            Some("meta".into()),
        ),
        (
            "records",
            Some(b"run/g/1".to_vec()),
            vec![1, 0xc1],
            Some("run/g/1".into()),
        ),
    ];
    for (i, (tree, key, bytes, want_key)) in cases.into_iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let (first, _) = populated(tmp.path());
        {
            let (store, _) = open(tmp.path());
            let raw = store.raw_tree(tree).expect("tree exists");
            let key = key.unwrap_or_else(|| first.to_be_bytes().to_vec());
            assert!(
                raw.get(&key).unwrap().is_some(),
                "#{i}: tree {tree} holds the key to corrupt"
            );
            raw.insert(key, bytes.clone()).unwrap();
        }
        let want_key = want_key.unwrap_or_else(|| format!("sequence {first}"));
        eprintln!("#{i}: tree {tree}, key {want_key}, bytes {bytes:?}");
        expect_corrupt(tmp.path(), tree, &want_key);
    }
}

/// A journal entry lost from the middle of the tail is a gap, named with
/// the missing sequences; replaying past it would build a state that never
/// was.
#[test]
fn a_journal_gap_is_inconsistent() {
    let tmp = tempfile::tempdir().unwrap();
    let (first, second) = populated(tmp.path());
    {
        let (store, _) = open(tmp.path());
        store.commit(&enqueues(["c0".to_string()])).unwrap();
        store
            .raw_tree("journal")
            .unwrap()
            .remove(second.to_be_bytes())
            .unwrap();
    }
    let err = Store::open(tmp.path(), settings(Durability::Flush))
        .err()
        .expect("a journal with a gap does not open");
    assert!(
        matches!(
            err,
            StoreError::Inconsistent {
                tree: "journal",
                ..
            }
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("follows {first}")) && msg.contains(&format!("{second}..")),
        "{msg}"
    );
}

/// A corrupt record is also reported by a later read of it, with its key.
#[test]
fn a_corrupt_record_is_named_on_read() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = open(tmp.path());
    store
        .put_batch(&[("breaker/x".into(), vec![1, 0xc1])], &[])
        .unwrap();
    let err = store.get::<String>("breaker/x").unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { tree: "records", key, .. } if key == "breaker/x"),
        "{err}"
    );
}

/// A steady stream of ops with snapshots as `snapshot_due` says: the data
/// directory stays under a bound that does not grow with the ops streamed,
/// and the journal after each snapshot holds only what came since.
///
/// Bound: the live data (a queue of ~1,000 tickets and at most one snapshot
/// interval of 20,000 ops of journal) is a few MiB; sled keeps it in 512 KiB
/// segments, some only partly live until its GC rewrites them. The bound is
/// 32 MiB, against ~25 MiB of ops streamed (~170 MiB with WEIR_SOAK=1).
/// Measured: 12 MiB after 150k ops, 15 MiB after 1M: flat, not growing
/// with the stream.
#[test]
fn disk_use_stays_bounded() {
    let soak = std::env::var_os("WEIR_SOAK").is_some();
    let ops_total: u64 = if soak { 1_000_000 } else { 150_000 };
    let bound_bytes: u64 = 32 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        durability: Durability::Flush,
        snapshot_ops: 20_000,
        ..StoreSettings::default()
    };
    let snapshot_ops = settings.snapshot_ops;
    let (store, _) = Store::open(tmp.path(), settings).unwrap();
    let mut state = QueueState::new();
    let mut dirty: BTreeSet<TicketId> = BTreeSet::new();
    let pool: Arc<str> = "p".into();
    let worker: Arc<str> = "w".into();
    let mut streamed = 0u64;
    let mut next_key = 0u64;
    let mut snapshots = 0;
    let mut max_dir = 0u64;
    // Ops of each kind in one commit.
    let per_kind = 32;
    while streamed < ops_total {
        // One commit: enqueue some, select as many (once ~1,000 are
        // pending), complete those selected by the commit before.
        let mut ops = Vec::with_capacity(3 * per_kind);
        for _ in 0..per_kind {
            ops.push(Op::Enqueue(job(&format!("k{next_key}"), 100)));
            next_key += 1;
        }
        if state.len() > 1_000 {
            for _ in 0..per_kind {
                ops.push(Op::Select {
                    pool: pool.clone(),
                    now_ms: 1,
                    worker: worker.clone(),
                    lease_until_ms: 60_000,
                });
            }
        }
        let running: Vec<TicketId> = state
            .expired_leases(u64::MAX)
            .into_iter()
            .take(per_kind)
            .collect();
        for id in running {
            ops.push(Op::Complete {
                id,
                terminal: Terminal::Succeeded,
            });
        }
        for op in &ops {
            match state.step(op) {
                Applied::Enqueued(id) | Applied::Selected(id) | Applied::Completed(id, _) => {
                    dirty.insert(id);
                }
                other => panic!("op {op:?} gave {other:?}"),
            }
        }
        streamed += ops.len() as u64;
        store
            .commit(&Commit {
                ops,
                ..Commit::default()
            })
            .unwrap();
        if store.snapshot_due() {
            let changed = std::mem::take(&mut dirty);
            store
                .write_snapshot(
                    store.last_seq(),
                    state.next_id(),
                    state.len() as u64,
                    changed.into_iter().map(|id| (id, state.ticket(id))),
                )
                .unwrap();
            snapshots += 1;
            let journal = store.inspect().unwrap().journal_entries;
            assert_eq!(
                journal, 0,
                "a snapshot at the last sequence leaves no journal"
            );
            let size = dir_bytes(tmp.path());
            max_dir = max_dir.max(size);
            assert!(
                size < bound_bytes,
                "after {streamed} ops and {snapshots} snapshots the data directory holds {size} bytes, over {bound_bytes}"
            );
        }
        // The journal since the last snapshot holds at most one snapshot
        // interval of ops, in values of several ops each (a commit of up
        // to 96 ops of at most ~350 bytes fills a few values of ~6 KiB).
        let journal = store.inspect().unwrap().journal_entries;
        assert!(
            journal <= snapshot_ops / 4,
            "journal of {journal} entries after {streamed} ops"
        );
    }
    assert!(snapshots >= 5, "only {snapshots} snapshots");
    let inspect = store.inspect().unwrap();
    eprintln!(
        "streamed {streamed} ops, {snapshots} snapshots, data directory at most {max_dir} bytes, now {} ({inspect:?})",
        dir_bytes(tmp.path())
    );
    drop(store);
    let (_, recovered) = open(tmp.path());
    assert_eq!(
        recovered.state, state,
        "reopened state equals the streamed one"
    );
}

/// The child of [`a_second_process_cannot_open`]: tries to open the store
/// and reports. A no-op in a normal test run.
#[test]
fn lock_child() {
    let Some(dir) = std::env::var_os(LOCK_CHILD_ENV) else {
        return;
    };
    match Store::open(&dir, settings(Durability::Flush)) {
        Ok(_) => println!("LOCK-CHILD opened"),
        Err(e) => println!("LOCK-CHILD error: {e}"),
    }
}

fn run_lock_child(dir: &Path) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lock_child", "--nocapture", "--test-threads=1"])
        .env(LOCK_CHILD_ENV, dir)
        .output()
        .expect("child runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    stdout
        .lines()
        // The harness prints "test lock_child ... " on the same line.
        .find_map(|l| l.split_once("LOCK-CHILD ").map(|(_, said)| said))
        .unwrap_or_else(|| panic!("child said nothing: {stdout}"))
        .to_string()
}

/// One store per data directory: a second open in this process fails with
/// `InUse` and the message the user sees; a second process too; once the
/// first is dropped, the directory opens again.
#[test]
fn a_second_open_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let (store, _) = open(&dir);
    let want = format!(
        "data directory {} is in use by another weir process",
        dir.display()
    );

    let err = Store::open(&dir, settings(Durability::Flush))
        .err()
        .expect("a second open in the same process fails");
    assert!(matches!(&err, StoreError::InUse(d) if d == &dir), "{err}");
    assert_eq!(err.to_string(), want);
    let err = weir_actors::store::open_for_inspection(&dir)
        .err()
        .expect("inspection of an open store fails");
    assert_eq!(err.to_string(), want);

    assert_eq!(run_lock_child(&dir), format!("error: {want}"));

    // A failed open must not have disturbed the open store.
    store.commit(&enqueues(["x".to_string()])).unwrap();
    drop(store);
    assert_eq!(run_lock_child(&dir), "opened");
    let (_, recovered) = open(&dir);
    assert!(recovered.state.by_key("x").is_some());
}

/// After a failed write every later write fails with `FailStopped`, whatever
/// the kind; reads still work; a reopen clears it and keeps what was
/// written before.
#[test]
fn a_failure_stops_every_write_until_reopen() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = open(tmp.path());
    let info = store.commit(&enqueues(["a".to_string()])).unwrap();
    store
        .put_batch(&[("r/1".into(), codec::encode(&1u32).unwrap())], &[])
        .unwrap();
    assert!(!store.is_failed());
    store.inject_failure();
    assert!(store.is_failed());

    let one = codec::encode(&1u32).unwrap();
    let two = codec::encode(&2u32).unwrap();
    let results: Vec<(&str, Result<(), StoreError>)> = vec![
        (
            "commit",
            store.commit(&enqueues(["b".to_string()])).map(drop),
        ),
        (
            "commit of records only",
            store
                .commit(&Commit {
                    puts: vec![("r/2".into(), one.clone())],
                    ..Commit::default()
                })
                .map(drop),
        ),
        (
            "compare_and_put",
            store
                .compare_and_put("r/1", Some(&one), Some(&two), &[], &[])
                .map(drop),
        ),
        (
            "put_batch",
            store.put_batch(&[("r/3".into(), one.clone())], &[]),
        ),
        ("expire_due", store.expire_due(u64::MAX).map(drop)),
        (
            "write_snapshot",
            store
                .write_snapshot(info.last_seq, 1, 0, std::iter::empty())
                .map(drop),
        ),
        ("sync", store.sync()),
    ];
    for (i, (what, result)) in results.into_iter().enumerate() {
        match result {
            Err(StoreError::FailStopped(dir, cause)) => {
                assert_eq!(dir, tmp.path(), "#{i}: {what} names the directory");
                assert!(
                    cause.contains("injected"),
                    "#{i}: {what} names the cause: {cause}"
                );
            }
            other => panic!("#{i}: {what}: got {other:?}, want FailStopped"),
        }
    }
    let msg = StoreError::FailStopped(tmp.path().into(), "fsync of x: EIO".into()).to_string();
    assert!(
        msg.contains("refuses writes") && msg.contains("reopen") && msg.contains("fsync of x: EIO"),
        "{msg}"
    );
    // Reads still answer.
    assert_eq!(store.get::<u32>("r/1").unwrap(), Some(1));
    assert_eq!(store.last_seq(), info.last_seq);

    drop(store);
    let (store, recovered) = open(tmp.path());
    assert!(!store.is_failed());
    assert!(recovered.state.by_key("a").is_some());
    assert!(recovered.state.by_key("b").is_none());
    assert_eq!(store.get::<u32>("r/1").unwrap(), Some(1));
    assert_eq!(store.get::<u32>("r/2").unwrap(), None);
    assert_eq!(store.get::<u32>("r/3").unwrap(), None);
    store.commit(&enqueues(["b".to_string()])).unwrap();
}

/// The entry limit refuses exactly the Enqueues whose encoding is over it,
/// names the key, size and limit, writes nothing and does not fail-stop.
#[test]
fn the_entry_limit_refuses_large_enqueues() {
    let limit = 2048;
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(
        tmp.path(),
        StoreSettings {
            durability: Durability::Flush,
            entry_bytes_max: limit,
            ..StoreSettings::default()
        },
    )
    .unwrap();
    // Each row: payload bytes, whether the op is accepted. 1,800 is under
    // the limit but near enough that the size estimate is over it, so the
    // store encodes it to decide.
    let cases = [
        (0, true),
        (1_000, true),
        (1_800, true),
        (2_048, false),
        (100_000, false),
    ];
    for (i, (payload, ok)) in cases.into_iter().enumerate() {
        let key = format!("k{i}");
        let op = Op::Enqueue(job(&key, payload));
        let size = codec::encode(&op).unwrap().len();
        assert_eq!(
            size <= limit,
            ok,
            "#{i}: the table's row agrees with the encoding"
        );
        let checked = store.check_op(&op);
        let before = store.last_seq();
        let committed = store.commit(&Commit {
            ops: vec![Op::Enqueue(job("small", 1)), op],
            ..Commit::default()
        });
        match (ok, checked, committed) {
            (true, Ok(()), Ok(_)) => {}
            (false, Err(e1), Err(e2)) => {
                for e in [&e1, &e2] {
                    match e {
                        StoreError::EntryTooLarge {
                            key: k,
                            size: s,
                            limit: l,
                        } => {
                            assert_eq!((k.as_str(), *s, *l), (key.as_str(), size, limit), "#{i}")
                        }
                        other => panic!("#{i}: got {other}, want EntryTooLarge"),
                    }
                }
                let msg = e1.to_string();
                assert!(
                    msg.contains(&format!("{size} bytes"))
                        && msg.contains(&format!("limit of {limit} bytes"))
                        && msg.contains(&key),
                    "#{i}: {msg}"
                );
                assert_eq!(
                    store.last_seq(),
                    before,
                    "#{i}: a refused commit writes nothing"
                );
                assert!(!store.is_failed(), "#{i}: a refused op does not fail-stop");
            }
            (ok, checked, committed) => {
                panic!("#{i}: payload {payload}: want ok={ok}, got check {checked:?}, commit {committed:?}")
            }
        }
        // Other ops are never over the limit.
        store
            .check_op(&Op::Cancel { id: 7 })
            .expect("a cancel is small");
    }
}

/// Commits are refused with `JournalFull` once the journal since the last
/// snapshot is over its limit, and accepted again after a snapshot.
#[test]
fn an_overdue_snapshot_refuses_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(
        tmp.path(),
        StoreSettings {
            durability: Durability::None,
            journal_bytes_max: 10_000,
            ..StoreSettings::default()
        },
    )
    .unwrap();
    let mut state = QueueState::new();
    let mut n = 0;
    let err = loop {
        let commit = enqueues([format!("k{n}")]);
        n += 1;
        match store.commit(&commit) {
            Ok(_) => {
                for op in &commit.ops {
                    let _ = state.step(op);
                }
            }
            Err(e) => break e,
        }
        assert!(n < 10_000, "never refused");
    };
    assert!(
        matches!(err, StoreError::JournalFull { limit: 10_000, .. }),
        "{err}"
    );
    assert!(!store.is_failed(), "an overdue snapshot is not a failure");
    // Records-only commits still pass: they do not grow the journal.
    store
        .commit(&Commit {
            puts: vec![("r".into(), codec::encode(&1u8).unwrap())],
            ..Commit::default()
        })
        .unwrap();
    snapshot_all(&store, &state);
    store.commit(&enqueues(["after".to_string()])).unwrap();
}

/// compare_and_put writes only when the stored value is the expected one
/// (absent included), deletes with `None`, and its expiry entries come and
/// go with it. Values survive a reopen.
#[test]
fn compare_and_put_semantics() {
    let tmp = tempfile::tempdir().unwrap();
    let v = |s: &str| codec::encode(&s.to_string()).unwrap();
    let (a, b, c) = (v("a"), v("b"), v("c"));
    {
        let (store, _) = open(tmp.path());
        let exp = Expiring {
            at_ms: 50,
            key: "run/1".into(),
        };
        // Each row: expected, new, want written, stored value after.
        let rows: Vec<(Option<&[u8]>, Option<&[u8]>, bool, Option<&[u8]>)> = vec![
            (Some(&a), Some(&b), false, None), // absent, but expected a
            (None, Some(&a), true, Some(&a)),  // absent as expected
            (None, Some(&b), false, Some(&a)), // present, but expected absent
            (Some(&b), Some(&c), false, Some(&a)),
            (Some(&a), Some(&b), true, Some(&b)),
            (Some(&b), None, true, None), // delete
            (Some(&b), Some(&c), false, None),
            (None, Some(&c), true, Some(&c)),
        ];
        for (i, (expected, new, want, after)) in rows.into_iter().enumerate() {
            let got = store
                .compare_and_put("run/1", expected, new, &[], &[])
                .unwrap();
            let stored = store.get_raw("run/1").unwrap();
            assert_eq!(
                (got, stored.as_deref()),
                (want, after),
                "#{i}: expected {expected:?}, new {new:?}"
            );
        }
        // A failed compare adds no expiry entry; a successful one does, and
        // a later one can remove it.
        assert!(!store
            .compare_and_put("run/1", Some(&a), Some(&b), std::slice::from_ref(&exp), &[])
            .unwrap());
        assert_eq!(store.inspect().unwrap().expiry_entries, 0);
        assert!(store
            .compare_and_put("run/1", Some(&c), Some(&b), std::slice::from_ref(&exp), &[])
            .unwrap());
        assert_eq!(store.inspect().unwrap().expiry_entries, 1);
        assert!(store
            .compare_and_put("run/1", Some(&b), Some(&a), &[], std::slice::from_ref(&exp))
            .unwrap());
        assert_eq!(store.inspect().unwrap().expiry_entries, 0);
        assert_eq!(store.expire_due(u64::MAX).unwrap(), Vec::<String>::new());
    }
    let (store, _) = open(tmp.path());
    assert_eq!(store.get_raw("run/1").unwrap().as_deref(), Some(&a[..]));
}

/// expire_due deletes the records due at or before now, with their index
/// entries, at most `expiry_batch_max` a pass, and keeps the rest.
#[test]
fn expiry_deletes_due_records_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(
        tmp.path(),
        StoreSettings {
            durability: Durability::Flush,
            expiry_batch_max: 2,
            ..StoreSettings::default()
        },
    )
    .unwrap();
    let at = [("r/a", 100), ("r/b", 200), ("r/c", 200), ("r/d", 300)];
    let one = codec::encode(&1u8).unwrap();
    store
        .commit(&Commit {
            puts: at
                .iter()
                .map(|(k, _)| (k.to_string(), one.clone()))
                .collect(),
            expiring: at
                .iter()
                .map(|&(k, at_ms)| Expiring {
                    at_ms,
                    key: k.into(),
                })
                .collect(),
            ..Commit::default()
        })
        .unwrap();
    store
        .put_batch(&[("r/keep".into(), one.clone())], &[])
        .unwrap();
    // Each row: now, the keys deleted by that pass (in expiry order).
    let passes: [(u64, &[&str]); 5] = [
        (99, &[]),
        (200, &["r/a", "r/b"]), // the batch limit stops it at two
        (200, &["r/c"]),
        (299, &[]),
        (1_000, &["r/d"]),
    ];
    for (i, (now_ms, want)) in passes.into_iter().enumerate() {
        let got = store.expire_due(now_ms).unwrap();
        assert_eq!(got, want, "#{i}: expire_due({now_ms})");
        for k in want {
            assert!(!store.contains(k).unwrap(), "#{i}: {k} deleted");
        }
    }
    assert_eq!(store.scan_keys("r/").unwrap(), vec!["r/keep".to_string()]);
    assert_eq!(store.inspect().unwrap().expiry_entries, 0);
}

/// inspect() counts what was written.
#[test]
fn inspect_counts() {
    let tmp = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        durability: Durability::Flush,
        entry_ops_max: 4,
        ..StoreSettings::default()
    };
    let (store, recovered) = Store::open(tmp.path(), settings.clone()).unwrap();
    assert_eq!(recovered.ops_replayed, 0);
    let empty = store.inspect().unwrap();
    assert_eq!(
        (
            empty.journal_entries,
            empty.last_seq,
            empty.snapshot_seq,
            empty.snapshot_tickets,
            empty.records,
            empty.expiry_entries
        ),
        (0, 0, 0, 0, 0, 0)
    );
    assert_eq!(empty.dir, tmp.path());

    let mut state = QueueState::new();
    // 10 ops in values of 4: 3 entries.
    let commit = enqueues((0..10).map(|i| format!("k{i}")));
    for op in &commit.ops {
        let _ = state.step(op);
    }
    let info = store.commit(&commit).unwrap();
    assert_eq!((info.last_seq, info.entries), (3, 3));
    let decoded: JournalEntry = codec::decode(
        &store
            .raw_tree("journal")
            .unwrap()
            .get(3u64.to_be_bytes())
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(decoded.ops, commit.ops[8..]);
    snapshot_all(&store, &state);
    store
        .commit(&Commit {
            ops: vec![Op::Cancel { id: 0 }],
            puts: vec![("r/1".into(), codec::encode(&1u8).unwrap())],
            expiring: vec![Expiring {
                at_ms: 5,
                key: "r/1".into(),
            }],
            ..Commit::default()
        })
        .unwrap();
    let got = store.inspect().unwrap();
    assert_eq!(got.journal_entries, 1, "{got:?}");
    assert_eq!(got.last_seq, 4, "{got:?}");
    assert_eq!(got.snapshot_seq, 3, "{got:?}");
    assert_eq!(got.snapshot_tickets, 10, "{got:?}");
    assert_eq!(got.records, 1, "{got:?}");
    assert_eq!(got.expiry_entries, 1, "{got:?}");
    assert!(got.size_on_disk_bytes > 0, "{got:?}");

    drop(store);
    let (store, recovered) = Store::open(tmp.path(), settings).unwrap();
    assert_eq!(recovered.snapshot_tickets, 10);
    assert_eq!((recovered.entries_replayed, recovered.ops_replayed), (1, 1));
    assert_eq!(recovered.state.len(), 9);
    let again = store.inspect().unwrap();
    assert_eq!(
        Inspect {
            size_on_disk_bytes: 0,
            ..again
        },
        Inspect {
            size_on_disk_bytes: 0,
            ..got
        }
    );
}

/// A commit's records are written with its ops or not at all: after a
/// commit returns both are there, a refused commit leaves neither, and
/// deletes in a commit take effect with its ops.
#[test]
fn a_commits_records_go_with_its_ops() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = open(tmp.path());
    let done = codec::encode(&"succeeded".to_string()).unwrap();
    store
        .commit(&Commit {
            ops: vec![Op::Enqueue(job("a", 4))],
            puts: vec![("node/a".into(), done.clone())],
            ..Commit::default()
        })
        .unwrap();
    // Refused for its size: neither the op nor the record is written.
    let refused = store.commit(&Commit {
        ops: vec![Op::Enqueue(job("big", 2 << 20))],
        puts: vec![("node/big".into(), done.clone())],
        ..Commit::default()
    });
    assert!(matches!(refused, Err(StoreError::EntryTooLarge { .. })));
    assert!(!store.contains("node/big").unwrap());
    // A delete with an op.
    store
        .commit(&Commit {
            ops: vec![Op::Cancel { id: 0 }],
            deletes: vec!["node/a".into()],
            puts: vec![("done/a".into(), done.clone())],
            ..Commit::default()
        })
        .unwrap();
    drop(store);
    let (store, recovered) = open(tmp.path());
    assert!(recovered.state.is_empty());
    assert_eq!(
        recovered.state.next_id(),
        1,
        "the refused enqueue took no id"
    );
    assert_eq!(store.scan_keys("").unwrap(), vec!["done/a".to_string()]);
}

/// A commit's ops are cut into journal values of a few KiB at most (or
/// `entry_ops_max` ops), in order, and the values decode to the commit's
/// ops: large values would land in sled blob files that need fsyncs of
/// their own.
#[test]
fn journal_values_stay_small() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = open(tmp.path());
    // Each row: ops in the commit, payload bytes of each, the most values
    // and the fewest allowed.
    let cases = [
        (1, 100, 1, 1),
        (256, 100, 20, 5),
        (64, 1_000, 64, 8),
        (3, 50_000, 3, 3),
    ];
    for (i, (n, payload, most, fewest)) in cases.into_iter().enumerate() {
        let commit = Commit {
            ops: (0..n)
                .map(|k| Op::Enqueue(job(&format!("{i}-{k}"), payload)))
                .collect(),
            ..Commit::default()
        };
        let before = store.last_seq();
        let info = store.commit(&commit).unwrap();
        assert!(
            (fewest..=most).contains(&info.entries),
            "#{i}: {n} ops of {payload} bytes in {} values, want {fewest}..={most}",
            info.entries
        );
        let journal = store.raw_tree("journal").unwrap();
        let mut ops = Vec::new();
        for seq in before + 1..=info.last_seq {
            let bytes = journal.get(seq.to_be_bytes()).unwrap().unwrap();
            let entry: JournalEntry = codec::decode(&bytes).unwrap();
            assert!(
                bytes.len() <= 8 << 10 || entry.ops.len() == 1,
                "#{i}: value {seq} of {} bytes holds {} ops",
                bytes.len(),
                entry.ops.len()
            );
            ops.extend(entry.ops);
        }
        assert_eq!(
            ops, commit.ops,
            "#{i}: the values hold the commit's ops in order"
        );
    }
}

/// A snapshot in the first layout (one ticket a key, under `t`) is refused
/// at open with an error that names it, rather than read as empty.
#[test]
fn the_old_snapshot_layout_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    populated(tmp.path());
    {
        let (store, _) = open(tmp.path());
        let mut key = vec![b't'];
        key.extend_from_slice(&7u64.to_be_bytes());
        store
            .raw_tree("snapshot")
            .unwrap()
            .insert(key, vec![1, 0x80])
            .unwrap();
    }
    let err = Store::open(tmp.path(), settings(Durability::Flush))
        .err()
        .expect("an old layout does not open");
    assert!(
        matches!(
            err,
            StoreError::Inconsistent {
                tree: "snapshot",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("7400000000000000007")
            || err.to_string().contains("740000000000000007"),
        "{err}"
    );
}

/// A store dropped and opened again while another thread spawns child
/// processes opens every time: a child forked at the moment of the drop
/// holds the lock's descriptor until its exec, which must not read as
/// another weir having the directory.
#[test]
fn a_reopen_while_children_are_spawned_is_not_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawners: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut spawned = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::process::Command::new("true").status().unwrap();
                    spawned += 1;
                }
                spawned
            })
        })
        .collect();
    let mut refused = Vec::new();
    for i in 0..100 {
        match Store::open(&dir, settings(Durability::None)) {
            Ok((store, _)) => drop(store),
            Err(e) => refused.push(format!("open {i}: {e}")),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let spawned: u32 = spawners.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(spawned > 0);
    assert!(refused.is_empty(), "{refused:?}");
}
