//! A full disk costs availability, never data (issue 13, item 1), at the
//! store's edge: a fake free-space probe drops below the reserve in the
//! middle of a workload of commits and record writes. The next write is
//! refused with `DiskFull`, the store is fail-stop (every later write
//! refused), the reserve file is released, and a reopen finds every
//! acknowledged op and record, and makes the reserve file again once there
//! is room.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use weir_actors::store::{
    Commit, DiskSpace, Durability, FreeSpaceProbe, Store, StoreError, StoreSettings,
};
use weir_core::codec;
use weir_core::queue::{Job, Op};

const TOTAL_BYTES: u64 = 1 << 30;
const RESERVE_MIN_BYTES: u64 = 8 << 20;
const RESERVE_FILE_BYTES: u64 = 1 << 20;

/// Settings whose probe reports `free` bytes free of a 1 GiB filesystem.
fn settings(free: &Arc<AtomicU64>) -> StoreSettings {
    let free = free.clone();
    StoreSettings {
        durability: Durability::Flush,
        disk_reserve_min_bytes: RESERVE_MIN_BYTES,
        disk_reserve_percent: 0,
        reserve_file_bytes: RESERVE_FILE_BYTES,
        free_space: FreeSpaceProbe::new(move |_: &Path| {
            Ok(DiskSpace {
                free_bytes: free.load(Ordering::SeqCst),
                total_bytes: TOTAL_BYTES,
            })
        }),
        ..StoreSettings::default()
    }
}

fn enqueue(key: &str) -> Op {
    Op::Enqueue(Job {
        payload: vec![7; 64],
        ..Job::new(key, "noop", "p")
    })
}

/// What a write acknowledged: keys enqueued, records written.
type Written = (Vec<String>, Vec<(String, u64)>);

/// One step of the workload: a kind of write, by its index.
fn write(store: &Store, i: usize) -> Result<Written, StoreError> {
    let key = format!("k{i}");
    let rec = format!("r/{i}");
    let value = codec::encode(&(i as u64)).unwrap();
    match i % 4 {
        // A commit of ops.
        0 => store
            .commit(&Commit {
                ops: vec![enqueue(&key)],
                ..Commit::default()
            })
            .map(|_| (vec![key], vec![])),
        // A commit of ops and a record.
        1 => store
            .commit(&Commit {
                ops: vec![enqueue(&key)],
                puts: vec![(rec.clone(), value)],
                ..Commit::default()
            })
            .map(|_| (vec![key], vec![(rec, i as u64)])),
        // A batch of records.
        2 => store
            .put_batch(&[(rec.clone(), value)], &[])
            .map(|()| (vec![], vec![(rec, i as u64)])),
        // A compare-and-put of a new record.
        _ => store
            .compare_and_put(&rec, None, Some(&value), &[], &[])
            .map(|written| {
                assert!(written, "#{i}: {rec} is new");
                (vec![], vec![(rec, i as u64)])
            }),
    }
}

#[test]
fn a_write_below_the_reserve_is_refused_and_nothing_acknowledged_is_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let free = Arc::new(AtomicU64::new(TOTAL_BYTES / 2));
    let reserve_file = tmp.path().join("reserve");
    let (store, _) = Store::open(tmp.path(), settings(&free)).expect("store opens");
    assert_eq!(
        std::fs::metadata(&reserve_file).map(|m| m.len()).ok(),
        Some(RESERVE_FILE_BYTES),
        "the open makes the reserve file"
    );

    // The workload: every kind of write in turn; the disk fills at step 37.
    let full_at = 37;
    let mut keys = Vec::new();
    let mut records = BTreeMap::new();
    let mut refused = None;
    for i in 0..100 {
        if i == full_at {
            free.store(RESERVE_MIN_BYTES - 1, Ordering::SeqCst);
        }
        match write(&store, i) {
            Ok((k, r)) => {
                assert!(i < full_at, "#{i}: a write below the reserve was taken");
                keys.extend(k);
                records.extend(r);
            }
            Err(e) => {
                refused = Some((i, e));
                break;
            }
        }
    }
    let (at, err) = refused.expect("a write is refused once the disk is full");
    assert_eq!(at, full_at, "the first write below the reserve is refused");
    match &err {
        StoreError::DiskFull {
            dir,
            free_bytes,
            reserve_bytes,
        } => {
            assert_eq!(dir, tmp.path());
            assert_eq!(*free_bytes, RESERVE_MIN_BYTES - 1);
            assert_eq!(*reserve_bytes, RESERVE_MIN_BYTES);
        }
        other => panic!("want DiskFull, got {other:?}"),
    }
    let msg = err.to_string();
    for says in ["disk full", "free space", "run again"] {
        assert!(msg.contains(says), "message {msg:?} does not say {says:?}");
    }
    assert!(store.is_failed(), "a full disk fail-stops the store");
    assert!(
        !reserve_file.exists(),
        "the reserve file is released for the last flush and the next open"
    );

    // Fail-stop: every kind of write is refused, even with room again.
    free.store(TOTAL_BYTES / 2, Ordering::SeqCst);
    for i in full_at..full_at + 4 {
        match write(&store, i) {
            Err(StoreError::FailStopped(_, cause)) => {
                assert!(
                    cause.contains("disk full"),
                    "#{i}: the cause is kept: {cause}"
                );
            }
            other => panic!("#{i}: after a full disk: got {other:?}, want FailStopped"),
        }
    }
    drop(store);

    // A reopen with room finds everything acknowledged and makes the
    // reserve file again.
    let (store, recovered) = Store::open(tmp.path(), settings(&free)).expect("store reopens");
    assert!(!store.is_failed(), "a reopen clears fail-stop");
    for k in &keys {
        assert!(
            recovered.state.tickets().any(|t| *t.job.key == **k),
            "acknowledged enqueue {k} was lost"
        );
    }
    assert_eq!(
        recovered.state.len(),
        keys.len(),
        "nothing refused was enqueued"
    );
    for (rec, want) in &records {
        assert_eq!(
            store.get::<u64>(rec).unwrap(),
            Some(*want),
            "acknowledged record {rec}"
        );
    }
    assert_eq!(
        store.scan_keys("r/").unwrap().len(),
        records.len(),
        "nothing refused was written"
    );
    assert_eq!(
        std::fs::metadata(&reserve_file).map(|m| m.len()).ok(),
        Some(RESERVE_FILE_BYTES),
        "the reopen makes the reserve file again"
    );
    write(&store, 1000).expect("the reopened store takes writes");
}

/// A reopen while the disk is still full opens (status and the last flush
/// need it), makes no reserve file, and refuses the first write.
#[test]
fn a_reopen_on_a_full_disk_opens_and_refuses_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let free = Arc::new(AtomicU64::new(TOTAL_BYTES / 2));
    {
        let (store, _) = Store::open(tmp.path(), settings(&free)).unwrap();
        write(&store, 0).unwrap();
    }
    std::fs::remove_file(tmp.path().join("reserve")).unwrap();
    free.store(RESERVE_MIN_BYTES + RESERVE_FILE_BYTES - 1, Ordering::SeqCst);
    let (store, recovered) = Store::open(tmp.path(), settings(&free)).expect("opens");
    assert_eq!(recovered.state.len(), 1);
    assert!(
        !tmp.path().join("reserve").exists(),
        "no reserve file without room for it above the reserve"
    );
    // Above the reserve, though not by enough for the reserve file: writes
    // go on.
    write(&store, 4).expect("a write above the reserve");
    free.store(RESERVE_MIN_BYTES / 2, Ordering::SeqCst);
    assert!(matches!(write(&store, 8), Err(StoreError::DiskFull { .. })));
}

/// The reserve is the larger of the minimum and the percentage.
#[test]
fn the_reserve_is_the_larger_of_its_two_settings() {
    // Each row: total bytes, min bytes, percent, free bytes, refused.
    let cases: &[(u64, u64, u32, u64, bool)] = &[
        (1000 << 20, 64 << 20, 5, 64 << 20, false),
        (1000 << 20, 64 << 20, 5, (64 << 20) - 1, true),
        (4000 << 20, 64 << 20, 5, 199 << 20, true),
        (4000 << 20, 64 << 20, 5, 200 << 20, false),
        (4000 << 20, 0, 0, 0, false),
    ];
    for (i, &(total, min, pct, free_bytes, want_refused)) in cases.iter().enumerate() {
        let tmp = tempfile::tempdir().unwrap();
        let free = Arc::new(AtomicU64::new(free_bytes));
        let s = StoreSettings {
            durability: Durability::None,
            disk_reserve_min_bytes: min,
            disk_reserve_percent: pct,
            reserve_file_bytes: 0,
            free_space: FreeSpaceProbe::new(move |_: &Path| {
                Ok(DiskSpace {
                    free_bytes: free.load(Ordering::SeqCst),
                    total_bytes: total,
                })
            }),
            ..StoreSettings::default()
        };
        let (store, _) = Store::open(tmp.path(), s).unwrap();
        let got = write(&store, 0);
        assert_eq!(
            matches!(got, Err(StoreError::DiskFull { .. })),
            want_refused,
            "#{i}: total {total}, min {min}, {pct}%, free {free_bytes}: got {got:?}"
        );
    }
}
