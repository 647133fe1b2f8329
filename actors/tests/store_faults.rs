//! Faults at the storage edge (issue 13): the N-th write, flush or fsync
//! the store makes fails with EIO or ENOSPC, injected through the store's
//! fault hook (`StoreSettings::faults`), in the middle of a workload of
//! every kind of write: commits of one op and of many (several journal
//! values), a Select + Complete with its done record, record batches,
//! compare-and-puts, blobs with the record naming them, snapshots and an
//! expiry pass.
//!
//! What must hold for every N: the failing call returns an error naming
//! what failed and the OS error; the store is fail-stop (the next write is
//! refused, naming that first failure); a reopen without faults finds every
//! acknowledged enqueue, completion, record, deletion and blob, each once
//! (no completed ticket is live again), and nothing that was never
//! written but the one write in flight at the fault.
//!
//! N sweeps 1..=20 for each point (EIO for odd N, ENOSPC for even);
//! `WEIR_SOAK=1` sweeps 1..=150.

use std::collections::{BTreeMap, BTreeSet};

use weir_actors::store::{
    BlobRef, Commit, Durability, Expiring, FaultErrno, FaultInjector, FaultPoint, Store,
    StoreError, StoreSettings,
};
use weir_core::codec;
use weir_core::queue::{Applied, Job, Op, QueueState, Terminal, TicketId};

fn soak() -> bool {
    std::env::var_os("WEIR_SOAK").is_some_and(|v| v == "1")
}

/// The workload's steps at most: more than any N swept needs.
const STEPS_MAX: usize = 2_000;
/// Ops of the large commit (several journal values).
const MANY_OPS: usize = 300;

fn settings(faults: Option<FaultInjector>) -> StoreSettings {
    StoreSettings {
        durability: Durability::Fsync,
        reserve_file_bytes: 0,
        faults,
        ..StoreSettings::default()
    }
}

fn job(key: &str) -> Job {
    Job {
        payload: vec![3; 48],
        ..Job::new(key, "noop", "p")
    }
}

/// What the store acknowledged: the state its acknowledged ops built, and
/// the records, deletions and blobs it acknowledged.
#[derive(Default)]
struct Acked {
    state: QueueState,
    /// Keys whose Complete was acknowledged.
    completed: BTreeSet<String>,
    /// Records and their values.
    records: BTreeMap<String, u64>,
    /// Records whose deletion was acknowledged.
    deleted: BTreeSet<String>,
    /// Blobs a durable record names.
    blobs: Vec<BlobRef>,
    /// Tickets changed since the last snapshot.
    dirty: BTreeSet<TicketId>,
}

/// What the write in flight at the fault might leave behind (allowed
/// there or not).
#[derive(Default)]
struct InFlight {
    keys: BTreeSet<String>,
    records: BTreeSet<String>,
    /// The key the write in flight completes, if it completes one.
    completing: Option<String>,
}

impl Acked {
    /// Applies ops the store acknowledged.
    fn apply(&mut self, ops: &[Op]) {
        for op in ops {
            match self.state.step(op) {
                Applied::Enqueued(id)
                | Applied::Selected(id)
                | Applied::Completed(id, _)
                | Applied::Requeued(id) => {
                    self.dirty.insert(id);
                }
                other => panic!("the workload's op {op:?} did nothing: {other:?}"),
            }
        }
    }
}

fn value(i: usize) -> Vec<u8> {
    codec::encode(&(i as u64)).unwrap()
}

/// Step `i` of the workload: one write of the kind `i` picks. `Ok` when the
/// store acknowledged it (and `acked` holds it), else the store's error,
/// with what the write might have left in `flight`.
fn step(
    store: &Store,
    acked: &mut Acked,
    i: usize,
    flight: &mut InFlight,
) -> Result<(), StoreError> {
    *flight = InFlight::default();
    let key = format!("k{i:05}");
    let rec = format!("r/{i:05}");
    match i % 9 {
        // One enqueue: one journal value.
        0 | 5 => {
            let ops = vec![Op::Enqueue(job(&key))];
            flight.keys.insert(key);
            store.commit(&Commit {
                ops: ops.clone(),
                ..Commit::default()
            })?;
            acked.apply(&ops);
        }
        // Select + Complete of the oldest pending ticket, with its done
        // record, in one commit.
        1 | 6 => {
            let mut scratch = acked.state.clone();
            let select = Op::Select {
                pool: "p".into(),
                now_ms: 1,
                worker: "w".into(),
                lease_until_ms: 1_000,
            };
            let Applied::Selected(id) = scratch.step(&select) else {
                // Nothing pending yet: enqueue instead.
                let ops = vec![Op::Enqueue(job(&key))];
                flight.keys.insert(key);
                store.commit(&Commit {
                    ops: ops.clone(),
                    ..Commit::default()
                })?;
                acked.apply(&ops);
                return Ok(());
            };
            let done_key = scratch.ticket(id).unwrap().job.key.to_string();
            let ops = vec![
                select,
                Op::Complete {
                    id,
                    terminal: Terminal::Succeeded,
                },
            ];
            let done = format!("done/{done_key}");
            flight.records.insert(done.clone());
            flight.completing = Some(done_key.clone());
            store.commit(&Commit {
                ops: ops.clone(),
                puts: vec![(done.clone(), value(i))],
                ..Commit::default()
            })?;
            acked.apply(&ops);
            acked.completed.insert(done_key);
            acked.records.insert(done, i as u64);
        }
        // A record batch.
        2 => {
            flight.records.insert(rec.clone());
            store.put_batch(&[(rec.clone(), value(i))], &[])?;
            acked.records.insert(rec, i as u64);
        }
        // A compare-and-put of a new record.
        3 => {
            flight.records.insert(rec.clone());
            let written = store.compare_and_put(&rec, None, Some(&value(i)), &[], &[])?;
            assert!(written, "#{i}: {rec} is new");
            acked.records.insert(rec, i as u64);
        }
        // A blob, then the record naming it with its index records.
        4 => {
            let content: Vec<u8> = (0..5_000u32).map(|b| (b as usize * 31 + i) as u8).collect();
            let blob = store.write_blob(&content)?;
            let mut puts = vec![(rec.clone(), value(i))];
            puts.extend(store.blob_index_puts(&rec, &blob)?);
            flight.records.insert(rec.clone());
            let committed = store.commit(&Commit {
                puts,
                ..Commit::default()
            });
            store.unpin_blob(&blob);
            committed?;
            acked.records.insert(rec, i as u64);
            acked.blobs.push(blob);
        }
        // Many enqueues: several journal values in one atomic batch.
        7 => {
            let ops: Vec<Op> = (0..MANY_OPS)
                .map(|j| {
                    let k = format!("{key}-{j:03}");
                    flight.keys.insert(k.clone());
                    Op::Enqueue(job(&k))
                })
                .collect();
            store.commit(&Commit {
                ops: ops.clone(),
                ..Commit::default()
            })?;
            acked.apply(&ops);
        }
        // Every other round a snapshot (it also compacts the journal),
        // else a record that expires and the expiry pass that deletes it.
        _ => {
            if (i / 9).is_multiple_of(2) {
                let changed: Vec<(TicketId, Option<weir_core::queue::Ticket>)> = acked
                    .dirty
                    .iter()
                    .map(|&id| (id, acked.state.ticket(id).cloned()))
                    .collect();
                store.write_snapshot(
                    store.last_seq(),
                    acked.state.next_id(),
                    acked.state.len() as u64,
                    changed.iter().map(|(id, t)| (*id, t.as_ref())),
                )?;
                acked.dirty.clear();
            } else {
                let gone = format!("x/{i:05}");
                flight.records.insert(gone.clone());
                store.commit(&Commit {
                    puts: vec![(gone.clone(), value(i))],
                    expiring: vec![Expiring {
                        at_ms: 5,
                        key: gone.clone(),
                    }],
                    ..Commit::default()
                })?;
                // Acknowledged; its deletion is in flight from here on: a
                // failed expiry pass may have deleted it or not.
                let expired = store.expire_due(10)?;
                assert_eq!(expired, vec![gone.clone()], "#{i}: the expiry pass");
                acked.deleted.insert(gone);
            }
        }
    }
    Ok(())
}

/// What a message naming a failure of `point` says.
fn names_the_failure(msg: &str, point: FaultPoint) -> bool {
    match point {
        FaultPoint::Write => {
            msg.contains(" failed: ") || (msg.contains("blob ") && msg.contains("cannot write"))
        }
        FaultPoint::Flush => msg.contains("flush of"),
        FaultPoint::Fsync => {
            msg.contains("fsync of") || (msg.contains("blob ") && msg.contains("cannot write"))
        }
        FaultPoint::Snapshot => msg.contains("snapshot"),
    }
}

/// One case: the `n`-th call at `point` fails with `errno`.
fn case(point: FaultPoint, n: u64, errno: FaultErrno) {
    let what = format!("{point} #{n} {errno:?}");
    let tmp = tempfile::tempdir().unwrap();
    let faults = FaultInjector::nth(point, n, errno);
    let (store, _) = Store::open(tmp.path(), settings(Some(faults))).expect("store opens");
    let mut acked = Acked::default();
    let mut flight = InFlight::default();
    let mut failed = None;
    for i in 0..STEPS_MAX {
        if let Err(e) = step(&store, &mut acked, i, &mut flight) {
            failed = Some((i, e));
            break;
        }
    }
    let (at, err) = failed.unwrap_or_else(|| panic!("{what}: the fault never hit"));
    let msg = err.to_string();
    assert!(
        msg.contains(&errno.text()),
        "{what}: step {at}: the error names the OS error {:?}: {msg}",
        errno.text()
    );
    assert!(
        names_the_failure(&msg, point),
        "{what}: step {at}: the error names what failed: {msg}"
    );
    assert!(
        msg.contains(&tmp.path().display().to_string()),
        "{what}: the error names the data directory: {msg}"
    );
    assert!(store.is_failed(), "{what}: fail-stop");
    assert_eq!(store.failure().as_deref(), Some(msg.as_str()), "{what}");
    match store.commit(&Commit {
        ops: vec![Op::Enqueue(job("after"))],
        ..Commit::default()
    }) {
        Err(StoreError::FailStopped(dir, cause)) => {
            assert_eq!(dir, tmp.path(), "{what}");
            assert_eq!(cause, msg, "{what}: the refusal names the first failure");
        }
        other => panic!("{what}: a write after the fault: got {other:?}, want FailStopped"),
    }
    drop(store);

    let (store, recovered) =
        Store::open(tmp.path(), settings(None)).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let state = &recovered.state;
    let mut live: BTreeMap<&str, u32> = BTreeMap::new();
    for t in state.tickets() {
        *live.entry(&t.job.key).or_default() += 1;
    }
    for t in acked.state.tickets() {
        if flight.completing.as_deref() == Some(&*t.job.key) && !live.contains_key(&*t.job.key) {
            // The commit in flight at the fault landed after all: the
            // ticket completed, with its done record.
            assert!(
                store.contains(&format!("done/{}", t.job.key)).unwrap(),
                "{what}: {} left the queue without its done record",
                t.job.key
            );
            continue;
        }
        assert!(
            live.contains_key(&*t.job.key),
            "{what}: acknowledged enqueue {} was lost",
            t.job.key
        );
    }
    for (k, count) in &live {
        assert_eq!(*count, 1, "{what}: {k} is live {count} times");
        assert!(
            !acked.completed.contains(*k),
            "{what}: {k} was completed (acknowledged), and is live again"
        );
        assert!(
            acked.state.by_key(k).is_some() || flight.keys.contains(*k),
            "{what}: {k} is live but was never acknowledged nor in flight"
        );
    }
    for (rec, want) in &acked.records {
        assert_eq!(
            store.get::<u64>(rec).unwrap(),
            Some(*want),
            "{what}: acknowledged record {rec}"
        );
    }
    for rec in &acked.deleted {
        assert_eq!(
            store.get::<u64>(rec).unwrap(),
            None,
            "{what}: {rec}'s deletion was acknowledged"
        );
    }
    for rec in store.scan_keys("r/").unwrap() {
        assert!(
            acked.records.contains_key(&rec) || flight.records.contains(&rec),
            "{what}: record {rec} was never acknowledged nor in flight"
        );
    }
    for blob in &acked.blobs {
        store
            .read_blob(blob)
            .unwrap_or_else(|e| panic!("{what}: acknowledged blob: {e}"));
    }
    store
        .commit(&Commit {
            ops: vec![Op::Enqueue(job("after"))],
            ..Commit::default()
        })
        .unwrap_or_else(|e| panic!("{what}: the reopened store takes writes: {e}"));
}

fn sweep(point: FaultPoint) {
    let n_max: u64 = if soak() { 150 } else { 20 };
    for n in 1..=n_max {
        let errno = if !n.is_multiple_of(2) {
            FaultErrno::Eio
        } else {
            FaultErrno::Enospc
        };
        case(point, n, errno);
    }
}

#[test]
fn a_failed_write_fail_stops_and_loses_nothing_acknowledged() {
    sweep(FaultPoint::Write);
}

#[test]
fn a_failed_flush_fail_stops_and_loses_nothing_acknowledged() {
    sweep(FaultPoint::Flush);
}

#[test]
fn a_failed_fsync_fail_stops_and_loses_nothing_acknowledged() {
    sweep(FaultPoint::Fsync);
}

/// Unset, the hook changes nothing: the same workload runs its whole
/// length. And a spec from the environment variable is the same fault.
#[test]
fn without_a_fault_the_workload_runs_to_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, _) = Store::open(tmp.path(), settings(None)).unwrap();
    let mut acked = Acked::default();
    let mut flight = InFlight::default();
    for i in 0..200 {
        step(&store, &mut acked, i, &mut flight).unwrap_or_else(|e| panic!("#{i}: {e}"));
    }
    assert!(!store.is_failed());
    assert_eq!(store.failure(), None);
}

#[test]
fn a_failure_hook_hears_the_first_failure_once() {
    use std::sync::{Arc, Mutex};
    let tmp = tempfile::tempdir().unwrap();
    let faults = FaultInjector::parse("fsync:2:eio").unwrap();
    let (store, _) = Store::open(tmp.path(), settings(Some(faults))).unwrap();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let h = heard.clone();
    store.on_failure(move |cause| h.lock().unwrap().push(cause.to_string()));
    let one = codec::encode(&1u64).unwrap();
    store
        .put_batch(&[("r/1".into(), one.clone())], &[])
        .unwrap();
    let err = store
        .put_batch(&[("r/2".into(), one.clone())], &[])
        .unwrap_err();
    assert!(store.put_batch(&[("r/3".into(), one)], &[]).is_err());
    assert_eq!(*heard.lock().unwrap(), vec![err.to_string()]);
    // A hook set after the failure hears it at once.
    let late = Arc::new(Mutex::new(Vec::new()));
    let l = late.clone();
    store.on_failure(move |cause| l.lock().unwrap().push(cause.to_string()));
    assert_eq!(*late.lock().unwrap(), vec![err.to_string()]);
}
