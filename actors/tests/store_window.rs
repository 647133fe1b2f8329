//! The snapshot's ticket indexes: built at the first open of a store
//! written before them, and checked, so a damaged one is refused by name.

use weir_actors::store::{
    kv, Commit, Durability, SnapshotMeta, Store, StoreCold, StoreError, StoreSettings,
};
use weir_core::codec;
use weir_core::cold::ColdTickets;
use weir_core::queue::{Job, Op, QueueState};

fn settings(window_tickets: usize) -> StoreSettings {
    StoreSettings {
        durability: Durability::Flush,
        window_tickets,
        ..StoreSettings::default()
    }
}

/// A store holding `n` tickets (every fifth at priority 2), two of them
/// running, all in its snapshot; returns the queue it holds.
fn filled(dir: &std::path::Path, n: usize) -> QueueState {
    let (store, recovered) = Store::open(dir, settings(1_024)).unwrap();
    let mut q = recovered.state;
    let mut commit = Commit::default();
    for i in 0..n {
        let mut job = Job::new(format!("k{i}"), "noop", if i % 2 == 0 { "a" } else { "b" });
        job.priority = if i % 5 == 0 { 2 } else { 0 };
        let op = Op::Enqueue(job);
        let _ = q.step(&op);
        commit.ops.push(op);
    }
    for _ in 0..2 {
        let op = Op::Select {
            pool: "a".into(),
            now_ms: 10,
            worker: "w".into(),
            lease_until_ms: 60_000,
        };
        let _ = q.step(&op);
        commit.ops.push(op);
    }
    store.commit(&commit).unwrap();
    let ids: Vec<u64> = q.tickets().map(|t| t.id).collect();
    store
        .write_snapshot(
            store.last_seq(),
            q.next_id(),
            q.len() as u64,
            ids.iter().map(|&id| (id, q.ticket(id))),
        )
        .unwrap();
    q
}

/// Opens the store in `dir`, lets `edit` change its snapshot tree behind
/// the store's back (a damaged or older store), and flushes it.
fn edit_snapshot(dir: &std::path::Path, edit: impl FnOnce(&kv::Tree)) {
    let (store, _) = Store::open(dir, settings(1_024)).unwrap();
    let tree = store.raw_tree("snapshot").unwrap();
    edit(&tree);
    tree.flush().unwrap();
}

/// Rewrites the snapshot's meta through `edit`.
fn edit_meta(tree: &kv::Tree, edit: impl FnOnce(&mut SnapshotMeta)) {
    let mut meta: SnapshotMeta = codec::decode(&tree.get(b"meta").unwrap().unwrap()).unwrap();
    edit(&mut meta);
    tree.insert(b"meta", codec::encode(&meta).unwrap()).unwrap();
}

/// Removes the snapshot tree's entries whose keys start with one of
/// `prefixes`.
fn remove_entries(tree: &kv::Tree, prefixes: &[u8]) {
    let mut batch = kv::Batch::default();
    for key in tree.iter().keys() {
        let key = key.unwrap();
        if prefixes.contains(&key[0]) {
            batch.remove(key);
        }
    }
    tree.apply_batch(batch).unwrap();
}

/// Removes every index entry and marks the meta as the first layout: a
/// store as the weir before the indexes wrote it.
fn strip_indexes(dir: &std::path::Path) {
    edit_snapshot(dir, |tree| {
        remove_entries(tree, b"lwknK");
        edit_meta(tree, |meta| meta.layout = 0);
    });
}

fn whole(q: &QueueState, store: &Store) -> QueueState {
    let mut q = q.clone();
    q.read_in_all(&StoreCold::new(store)).unwrap();
    q
}

#[test]
fn a_store_written_before_the_indexes_is_indexed_at_its_first_open() {
    let dir = tempfile::tempdir().unwrap();
    let q = filled(dir.path(), 2_000);
    strip_indexes(dir.path());
    let (store, recovered) = Store::open(dir.path(), settings(16)).unwrap();
    assert_eq!(recovered.state.len(), 2_000);
    // The running two and a window of each of four levels.
    assert!(
        recovered.state.hot_len() <= 2 + 4 * 16,
        "{}",
        recovered.state.hot_len()
    );
    assert_eq!(whole(&recovered.state, &store), q);
    assert_eq!(recovered.snapshot.layout, 3);
    drop(store);
    // The next open reads the built indexes and builds nothing.
    let (store, recovered) = Store::open(dir.path(), settings(16)).unwrap();
    assert_eq!(whole(&recovered.state, &store), q);
}

/// A store of the first indexed layout (an entry per pending and per
/// running ticket, under `p` and `r`) is indexed again at its first open,
/// and its per-ticket entries are removed.
#[test]
fn a_store_of_the_per_ticket_index_layout_is_indexed_again() {
    let dir = tempfile::tempdir().unwrap();
    let q = filled(dir.path(), 2_000);
    edit_snapshot(dir.path(), |tree| {
        remove_entries(tree, b"lw");
        // Layout 1's entries, as it wrote them.
        let mut batch = kv::Batch::default();
        for t in q.tickets() {
            let mut k = Vec::new();
            match t.place {
                weir_core::queue::Place::Pending { due_ms } => {
                    k.push(b'p');
                    k.extend_from_slice(&(t.job.pool.len() as u16).to_be_bytes());
                    k.extend_from_slice(t.job.pool.as_bytes());
                    k.extend_from_slice(&((t.job.priority as u32) ^ 0x8000_0000).to_be_bytes());
                    k.extend_from_slice(&due_ms.to_be_bytes());
                }
                weir_core::queue::Place::Running { .. } => k.push(b'r'),
            }
            k.extend_from_slice(&t.id.to_be_bytes());
            batch.insert(k, &[] as &[u8]);
        }
        tree.apply_batch(batch).unwrap();
        edit_meta(tree, |meta| meta.layout = 1);
    });
    let (store, recovered) = Store::open(dir.path(), settings(16)).unwrap();
    assert_eq!(recovered.snapshot.layout, 3);
    assert!(recovered.state.hot_len() <= 2 + 4 * 16);
    assert_eq!(whole(&recovered.state, &store), q);
    let tree = store.raw_tree("snapshot").unwrap();
    assert_eq!(
        tree.scan_prefix(b"p").count(),
        0,
        "per-ticket pending entries left"
    );
    assert_eq!(
        tree.scan_prefix(b"r").count(),
        0,
        "per-ticket running entries left"
    );
    // One running entry per chunk with a running ticket (the first two
    // tickets of pool a share chunk 0), and a level entry per chunk and
    // level: far fewer than the tickets.
    assert_eq!(tree.scan_prefix(b"w").count(), 1);
    let levels = tree.scan_prefix(b"l").count();
    assert!(levels <= 4 * 2_000 / 16 + 4, "{levels} level entries");
}

#[test]
fn a_pending_index_that_lost_an_entry_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let _ = filled(dir.path(), 100);
    edit_snapshot(dir.path(), |tree| {
        let key = tree.scan_prefix(b"l").keys().nth(3).unwrap().unwrap();
        tree.remove(key).unwrap();
    });
    match Store::open(dir.path(), settings(1_024)) {
        Err(e @ StoreError::Inconsistent { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("snapshot"), "{msg}");
            assert!(
                msg.contains("more pending tickets than its index lists"),
                "{msg}"
            );
        }
        other => panic!("a damaged index opened: {:?}", other.map(|_| ())),
    }
}

#[test]
fn counts_that_disagree_with_the_meta_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _ = filled(dir.path(), 100);
    edit_snapshot(dir.path(), |tree| edit_meta(tree, |meta| meta.tickets += 3));
    match Store::open(dir.path(), settings(1_024)) {
        Err(e @ StoreError::Inconsistent { .. }) => {
            assert!(e.to_string().contains("its meta counts 103 tickets"), "{e}");
        }
        other => panic!("inconsistent counts opened: {:?}", other.map(|_| ())),
    }
}

/// An open of a store with a large backlog reads its running tickets and
/// a window per level, not the backlog: 50,000 pending here, 1,000,000
/// with `WEIR_SOAK=1`.
#[test]
fn an_open_over_a_large_backlog_reads_a_window() {
    let n = if std::env::var_os("WEIR_SOAK").is_some() {
        1_000_000
    } else {
        50_000
    };
    let dir = tempfile::tempdir().unwrap();
    let _ = filled(dir.path(), n);
    let started = std::time::Instant::now();
    let (_store, recovered) = Store::open(dir.path(), settings(1_024)).unwrap();
    let elapsed = started.elapsed();
    let state = &recovered.state;
    assert_eq!(state.len(), n);
    assert_eq!(state.running_len(), 2);
    // Two pools at two priorities: four windows.
    assert!(
        state.hot_len() <= 2 + 4 * 1_024,
        "{} in memory",
        state.hot_len()
    );
    assert_eq!(state.cold_len() as usize, n - state.hot_len());
    eprintln!(
        "open of {n} pending: {} in memory, {:.1} ms",
        state.hot_len(),
        elapsed.as_secs_f64() * 1e3
    );
}

/// The key index of every ticket `q` holds that the store has not read
/// in answers as `q` does, and an unknown key answers none.
fn assert_keys_answer(q: &QueueState, store: &Store) {
    let cold = StoreCold::new(store);
    for t in q.tickets() {
        assert_eq!(
            cold.key_id(&t.job.key).unwrap(),
            Some(t.id),
            "key {}",
            t.job.key
        );
    }
    assert_eq!(cold.key_id("no-such-key").unwrap(), None);
}

/// A store of the layout with an entry per key (under `k`) is indexed
/// again at its first open: its key entries become one run and are
/// removed, and every key still finds its ticket.
#[test]
fn a_store_of_the_per_key_index_layout_is_indexed_again() {
    let dir = tempfile::tempdir().unwrap();
    let q = filled(dir.path(), 2_000);
    edit_snapshot(dir.path(), |tree| {
        remove_entries(tree, b"K");
        let mut batch = kv::Batch::default();
        for t in q.tickets() {
            let mut k = vec![b'k'];
            k.extend_from_slice(t.job.key.as_bytes());
            batch.insert(k, &t.id.to_be_bytes());
        }
        tree.apply_batch(batch).unwrap();
        edit_meta(tree, |meta| meta.layout = 2);
    });
    let (store, recovered) = Store::open(dir.path(), settings(16)).unwrap();
    assert_eq!(recovered.snapshot.layout, 3);
    let tree = store.raw_tree("snapshot").unwrap();
    assert_eq!(tree.scan_prefix(b"k").count(), 0, "per-key entries left");
    assert_eq!(tree.scan_prefix(b"K").count(), 1, "one run of every key");
    assert_keys_answer(&q, &store);
    assert_eq!(whole(&recovered.state, &store), q);
}

/// Snapshots that add and remove keys leave few runs, and after a
/// reopen every key still finds its ticket, a removed one none.
#[test]
fn keys_survive_many_snapshots_and_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let _ = filled(dir.path(), 500);
    let q = {
        let (store, recovered) = Store::open(dir.path(), settings(16)).unwrap();
        let mut state = recovered.state;
        state.read_in_all(&StoreCold::new(&store)).unwrap();
        let mut before: Vec<u64> = Vec::new();
        for round in 0..40 {
            let mut commit = Commit::default();
            let mut changed = Vec::new();
            let mut enqueued = Vec::new();
            for i in 0..50 {
                let op = Op::Enqueue(Job::new(format!("r{round}-{i}"), "noop", "a"));
                let id = state.step(&op).changed().expect("a new key");
                enqueued.push(id);
                changed.push(id);
                commit.ops.push(op);
            }
            // Every round cancels what the round before enqueued.
            for id in std::mem::replace(&mut before, enqueued) {
                let op = Op::Cancel { id };
                changed.extend(state.step(&op).changed());
                commit.ops.push(op);
            }
            store.commit(&commit).unwrap();
            store
                .write_snapshot(
                    store.last_seq(),
                    state.next_id(),
                    state.len() as u64,
                    changed.iter().map(|&id| (id, state.ticket(id))),
                )
                .unwrap();
            let runs = store
                .raw_tree("snapshot")
                .unwrap()
                .scan_prefix(b"K")
                .count();
            assert!(runs <= 12, "{runs} runs after round {round}");
        }
        state
    };
    let (store, recovered) = Store::open(dir.path(), settings(16)).unwrap();
    assert_keys_answer(&q, &store);
    let cold = StoreCold::new(&store);
    assert_eq!(cold.key_id("r10-3").unwrap(), None, "a cancelled key");
    assert_eq!(whole(&recovered.state, &store), q);
}

/// A key index run whose bytes were damaged is refused at open, named.
#[test]
fn a_damaged_key_index_run_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let _ = filled(dir.path(), 100);
    edit_snapshot(dir.path(), |tree| {
        let (k, v) = tree.scan_prefix(b"K").next().unwrap().unwrap();
        let mut v = v.to_vec();
        let mid = v.len() / 2;
        v[mid] ^= 0x5a;
        tree.insert(k, v).unwrap();
    });
    match Store::open(dir.path(), settings(1_024)) {
        Err(e @ StoreError::Inconsistent { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("snapshot"), "{msg}");
            assert!(msg.contains("key index run"), "{msg}");
        }
        other => panic!("a damaged key index opened: {:?}", other.map(|_| ())),
    }
}

/// A snapshot written while the queue reads the tickets kept in the store
/// (its refills, its fault-ins): each read sees one snapshot whole. The
/// writer moves pending tickets (selects, completes, requeues to a later
/// instant) and writes a snapshot after each change, as the queue does
/// beside its commits; the reader scans every level and reads each
/// ticket the index names, which must be there, pending, at the instant
/// and priority the index gives. Without the store's cold gate a scan
/// could read the old index and the new chunks (a review of the
/// concurrent snapshot found it); with std's lock, whose readers can keep
/// a writer out, the writer here starved for a minute.
#[test]
fn reads_of_the_store_see_one_snapshot_while_another_lands() {
    let dir = tempfile::tempdir().unwrap();
    let mut q = filled(dir.path(), 2_000);
    let (store, _) = Store::open(dir.path(), settings(1_024)).unwrap();
    let store = std::sync::Arc::new(store);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let cold = StoreCold::new(&store);
                for (pool, priority) in [("a", 0), ("a", 2), ("b", 0), ("b", 2)] {
                    let mut after = None;
                    loop {
                        let entries = cold.scan(pool, priority, after, 64).unwrap();
                        let Some(&last) = entries.last() else { break };
                        for (due_ms, id) in entries {
                            let t = cold.ticket(id).unwrap().unwrap_or_else(|| {
                                panic!("ticket {id} is indexed in {pool}/{priority} and not stored")
                            });
                            assert_eq!(
                                t.place,
                                weir_core::queue::Place::Pending { due_ms },
                                "ticket {id}"
                            );
                            assert_eq!((&*t.job.pool, t.job.priority), (pool, priority));
                            reads += 1;
                        }
                        after = Some(last);
                    }
                }
            }
            reads
        })
    };
    let mut snapshots = 0;
    let started = std::time::Instant::now();
    let mut round = 0u64;
    while started.elapsed() < std::time::Duration::from_millis(1_500) {
        round += 1;
        let mut commit = Commit::default();
        let mut changed = Vec::new();
        for pool in ["a", "b"] {
            for _ in 0..8 {
                let select = Op::Select {
                    pool: pool.into(),
                    now_ms: 1_000_000 + round,
                    worker: "w".into(),
                    lease_until_ms: u64::MAX / 2,
                };
                let weir_core::queue::Applied::Selected(id) = q.step(&select) else {
                    continue;
                };
                commit.ops.push(select);
                // Half go back to a later instant (their index entry
                // moves), half end (it goes).
                let op = if id % 2 == 0 {
                    Op::Requeue {
                        id,
                        due_ms: 2_000_000 + round,
                    }
                } else {
                    Op::Complete {
                        id,
                        terminal: weir_core::queue::Terminal::Succeeded,
                    }
                };
                let _ = q.step(&op);
                commit.ops.push(op);
                changed.push(id);
            }
        }
        if commit.ops.is_empty() {
            break;
        }
        store.commit(&commit).unwrap();
        let point = store.snapshot_point();
        store
            .write_snapshot_at(
                point,
                q.next_id(),
                q.len() as u64,
                changed.iter().map(|&id| (id, q.ticket(id))),
            )
            .unwrap();
        snapshots += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reader.join().expect("every read saw one snapshot");
    assert!(snapshots >= 20, "{snapshots} snapshots");
    assert!(reads > 1_000, "{reads} reads");
}
