//! Model test of the store, in the style of sled's
//! `tests/test_tree_failpoints.rs`: random sequences of commits, flushes,
//! snapshots, restarts and injected failures, checked against a reference
//! model of exactly what was acknowledged.
//!
//! The harness plays the queue actor: it checks each op against the entry
//! limit, applies it to its live `QueueState` through `step`, then commits
//! the batch (with a `done/<key>` record for each ticket completed). A
//! commit that returns `Ok` is acknowledged: the reference model (`acked`)
//! takes its ops and records. At a `Restart` the store is dropped and
//! reopened, and the replayed state, the records, the last sequence and the
//! count of ops replayed must equal the model's. After an injected failure
//! every write must fail with `FailStopped`, and a restart must bring back
//! what was acknowledged before it and nothing after.
//!
//! Restarts within one process are clean drops (sled flushes on drop), so
//! the fast durability modes (`none`, `flush`) are exact here; crashes are
//! `store_crash.rs`'s part.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use weir_actors::store::{Commit, Durability, Store, StoreCold, StoreError, StoreSettings};
use weir_core::codec;
use weir_core::queue::{Applied, Job, Op, QueueState, Terminal, TicketId};

#[derive(Debug, Clone)]
enum Action {
    /// Apply these ops live (those the entry limit allows) and commit them.
    Commit(Vec<Op>),
    /// `Store::sync`.
    Flush,
    /// A snapshot of the live state with the ids changed since the last.
    Snapshot,
    /// Drop the store and reopen it.
    Restart,
    /// `Store::inject_failure`.
    Fail,
}

/// The entry limit of the model's stores; some generated payloads are over
/// it.
const ENTRY_BYTES_MAX: usize = 2_048;

fn job(key: &str, pool: &str, due_ms: u64, payload_bytes: usize) -> Job {
    Job {
        due_ms,
        payload: vec![7; payload_bytes],
        ..Job::new(key, "noop", pool)
    }
}

/// Ops over a small space of keys, pools and ids, so that sequences hit
/// duplicates, stale ids, re-enqueues of completed keys and empty pools.
fn arb_op() -> impl Strategy<Value = Op> {
    let pool = prop::sample::select(vec!["p0", "p1"]);
    let id = 0u64..20;
    let payload = prop_oneof![8 => 0usize..64, 1 => 1_500usize..3_000];
    prop_oneof![
        5 => ("[a-f]", pool.clone(), 0u64..100, payload)
            .prop_map(|(k, p, due, bytes)| Op::Enqueue(job(&k, p, due, bytes))),
        4 => (pool, 0u64..120, 0u64..200).prop_map(|(p, now, lease)| Op::Select {
            pool: p.into(),
            now_ms: now,
            worker: "w".into(),
            lease_until_ms: now + lease,
        }),
        3 => (id.clone(), any::<bool>()).prop_map(|(id, ok)| Op::Complete {
            id,
            terminal: if ok { Terminal::Succeeded } else { Terminal::Failed },
        }),
        1 => id.clone().prop_map(|id| Op::Cancel { id }),
        2 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Op::Requeue { id, due_ms }),
        1 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Op::Defer { id, due_ms }),
        1 => (id, 0u64..300).prop_map(|(id, l)| Op::Extend { id, lease_until_ms: l }),
    ]
}

fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        12 => prop::collection::vec(arb_op(), 1..8).prop_map(Action::Commit),
        2 => Just(Action::Flush),
        2 => Just(Action::Snapshot),
        3 => Just(Action::Restart),
        1 => Just(Action::Fail),
    ]
}

/// The whole queue: `q` with every ticket the store holds only read in.
fn whole(q: &QueueState, store: &Store) -> QueueState {
    let mut q = q.clone();
    q.read_in_all(&StoreCold::new(store)).unwrap();
    q
}

struct Harness {
    dir: tempfile::TempDir,
    settings: StoreSettings,
    store: Option<Store>,
    /// The actor's in-memory state: ahead of `acked` only after a failed
    /// commit.
    live: QueueState,
    /// The reference model: the state after every acknowledged commit.
    acked: QueueState,
    /// Records written by acknowledged commits.
    acked_records: BTreeMap<String, Vec<u8>>,
    /// The last sequence of the last acknowledged commit.
    acked_seq: u64,
    /// Ids changed by acknowledged ops since the last snapshot.
    dirty: BTreeSet<TicketId>,
    /// Ops acknowledged since the last snapshot: what a reopen replays.
    ops_since_snapshot: u64,
    /// Whether a failure was injected since the last open.
    failed: bool,
}

fn fail_stopped<T: std::fmt::Debug>(what: &str, r: Result<T, StoreError>) {
    assert!(
        matches!(r, Err(StoreError::FailStopped(..))),
        "{what} after a failure: got {r:?}, want FailStopped"
    );
}

impl Harness {
    fn new(
        durability: Durability,
        entry_ops_max: usize,
        snapshot_ops: u64,
        window_tickets: usize,
    ) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let settings = StoreSettings {
            durability,
            entry_bytes_max: ENTRY_BYTES_MAX,
            entry_ops_max,
            snapshot_ops,
            cache_bytes: 8 << 20,
            window_tickets,
            ..StoreSettings::default()
        };
        let (store, recovered) = Store::open(dir.path(), settings.clone()).unwrap();
        assert_eq!(recovered.state, QueueState::new());
        Harness {
            dir,
            settings,
            store: Some(store),
            live: QueueState::new(),
            acked: QueueState::new(),
            acked_records: BTreeMap::new(),
            acked_seq: 0,
            dirty: BTreeSet::new(),
            ops_since_snapshot: 0,
            failed: false,
        }
    }

    fn store(&self) -> &Store {
        self.store.as_ref().expect("store is open")
    }

    fn run(&mut self, action: &Action) {
        match action {
            Action::Commit(ops) => self.commit(ops),
            Action::Flush => {
                let r = self.store().sync();
                if self.failed {
                    fail_stopped("sync", r);
                } else {
                    r.unwrap();
                }
            }
            Action::Snapshot => self.snapshot(),
            Action::Restart => self.restart(),
            Action::Fail => {
                self.store().inject_failure();
                self.failed = true;
            }
        }
    }

    /// As the queue actor: refuse ops over the entry limit, apply the rest,
    /// commit them with their records, acknowledge on `Ok`.
    fn commit(&mut self, ops: &[Op]) {
        let mut accepted = Vec::with_capacity(ops.len());
        let mut changed = Vec::new();
        let mut puts: Vec<(String, Vec<u8>)> = Vec::new();
        for op in ops {
            if let Err(e) = self.store().check_op(op) {
                assert!(
                    matches!(
                        e,
                        StoreError::EntryTooLarge {
                            limit: ENTRY_BYTES_MAX,
                            ..
                        }
                    ),
                    "check_op: {e}"
                );
                continue;
            }
            // As the queue actor: what the op names is read in from the
            // store first, the windows refilled after.
            let store = self.store.as_ref().expect("store is open");
            let cold = StoreCold::new(store);
            self.live.prepare(op, &cold).unwrap();
            // The key of a ticket that completes, read before it leaves.
            let key = match op {
                Op::Complete { id, .. } => self.live.ticket(*id).map(|t| t.job.key.clone()),
                _ => None,
            };
            let applied = self.live.step(op);
            self.live
                .refill(&cold, self.settings.window_tickets)
                .unwrap();
            if let (Applied::Completed(id, _), Some(key)) = (&applied, key) {
                puts.push((format!("done/{key}"), codec::encode(id).unwrap()));
            }
            changed.extend(applied.changed());
            accepted.push(op.clone());
        }
        let commit = Commit {
            ops: accepted,
            puts,
            ..Commit::default()
        };
        let result = self.store().commit(&commit);
        if self.failed {
            fail_stopped("commit", result);
            return;
        }
        let info = result.unwrap();
        // Values hold at most entry_ops_max ops (fewer when large).
        let chunk = self.settings.entry_ops_max as u64;
        let ops = commit.ops.len() as u64;
        assert!(
            (ops.div_ceil(chunk)..=ops).contains(&info.entries),
            "{} values for {ops} ops, at most {chunk} a value",
            info.entries
        );
        assert_eq!(info.last_seq, self.acked_seq + info.entries, "sequences");
        // Acknowledged: the model takes it.
        for op in &commit.ops {
            let _ = self.acked.step(op);
        }
        assert_eq!(
            self.acked,
            whole(&self.live, self.store()),
            "live and model agree while healthy"
        );
        self.acked_records.extend(commit.puts);
        self.acked_seq = info.last_seq;
        self.dirty.extend(changed);
        self.ops_since_snapshot += commit.ops.len() as u64;
        if self.store().snapshot_due() {
            self.snapshot();
        }
    }

    fn snapshot(&mut self) {
        let store = self.store.as_ref().expect("store is open");
        let live = &self.live;
        let result = store.write_snapshot(
            store.last_seq(),
            live.next_id(),
            live.len() as u64,
            // Newest first: the queue actor passes them in no order, and a
            // key that passed from an ended ticket to a new one must stay
            // indexed whichever comes first.
            self.dirty.iter().rev().map(|&id| (id, live.ticket(id))),
        );
        if self.failed {
            fail_stopped("write_snapshot", result);
            return;
        }
        let meta = result.unwrap();
        assert_eq!(meta.seq, self.acked_seq);
        assert_eq!(meta.tickets, self.acked.len() as u64);
        assert!(!store.snapshot_due(), "a snapshot resets what is due");
        assert_eq!(store.inspect().unwrap().journal_entries, 0);
        self.live.snapshot_taken();
        self.dirty.clear();
        self.ops_since_snapshot = 0;
    }

    fn restart(&mut self) {
        drop(self.store.take());
        let (store, recovered) = Store::open(self.dir.path(), self.settings.clone()).unwrap();
        recovered.state.assert_invariants();
        assert!(
            recovered.state.hot_len()
                <= recovered.state.running_len()
                    + 4 * self.settings.window_tickets
                    + self.ops_since_snapshot as usize,
            "an open reads the running tickets, the tail and a window per level"
        );
        assert_eq!(
            whole(&recovered.state, &store),
            self.acked,
            "replayed state equals what was acknowledged"
        );
        assert_eq!(store.last_seq(), self.acked_seq, "last sequence");
        assert_eq!(
            recovered.ops_replayed, self.ops_since_snapshot,
            "ops replayed: those since the last snapshot"
        );
        assert!(!store.is_failed(), "a reopen clears fail-stop");
        let records: BTreeMap<String, Vec<u8>> = store
            .scan_keys("")
            .unwrap()
            .into_iter()
            .map(|k| {
                let v = store.get_raw(&k).unwrap().unwrap();
                (k, v)
            })
            .collect();
        assert_eq!(records, self.acked_records, "records");
        // The actor learns what the replayed tail changed from recovery,
        // and its next snapshot must include exactly those.
        let changed = store.changed_since_snapshot();
        assert_eq!(changed, self.dirty, "ids the replayed tail changed");
        self.dirty = changed;
        self.live = recovered.state;
        self.failed = false;
        self.store = Some(store);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if std::env::var_os("WEIR_SOAK").is_some() { 2_048 } else { 128 },
        ..ProptestConfig::default()
    })]

    #[test]
    fn store_matches_model(
        actions in prop::collection::vec(arb_action(), 1..60),
        flush in any::<bool>(),
        entry_ops_max in 1usize..4,
        snapshot_ops in 4u64..40,
        window_tickets in prop::sample::select(vec![1usize, 2, 3, 1_024]),
    ) {
        let durability = if flush { Durability::Flush } else { Durability::None };
        let mut h = Harness::new(durability, entry_ops_max, snapshot_ops, window_tickets);
        for action in &actions {
            h.run(action);
        }
        h.run(&Action::Restart);
    }
}

/// A fixed sequence through each branch once, so a change that breaks the
/// basics fails here with a readable trace before proptest shrinks anything.
#[test]
fn store_matches_model_fixed() {
    let sel = |pool: &str, now_ms: u64| Op::Select {
        pool: pool.into(),
        now_ms,
        worker: "w".into(),
        lease_until_ms: now_ms + 50,
    };
    let actions = vec![
        Action::Commit(vec![
            Op::Enqueue(job("a", "p0", 0, 10)),
            Op::Enqueue(job("b", "p0", 5, 10)),
            Op::Enqueue(job("big", "p0", 0, 5_000)),
        ]),
        Action::Commit(vec![sel("p0", 10), sel("p0", 10)]),
        Action::Restart,
        Action::Commit(vec![Op::Complete {
            id: 0,
            terminal: Terminal::Succeeded,
        }]),
        Action::Snapshot,
        Action::Commit(vec![Op::Requeue { id: 1, due_ms: 20 }]),
        Action::Restart,
        Action::Commit(vec![Op::Enqueue(job("a", "p1", 0, 1))]),
        Action::Fail,
        Action::Commit(vec![Op::Enqueue(job("lost", "p1", 0, 1))]),
        Action::Snapshot,
        Action::Flush,
        Action::Restart,
        Action::Commit(vec![
            sel("p0", 20),
            Op::Complete {
                id: 1,
                terminal: Terminal::Failed,
            },
        ]),
        Action::Restart,
    ];
    let mut h = Harness::new(Durability::Flush, 2, 1_000, 1);
    for (i, action) in actions.iter().enumerate() {
        eprintln!("#{i}: {action:?}");
        h.run(action);
    }
    assert!(h.acked.by_key("lost").is_none());
    assert_eq!(h.acked.len(), 1, "ticket 2 (key a, again) is live");
    let keys: Vec<&String> = h.acked_records.keys().collect();
    assert_eq!(keys, ["done/a", "done/b"]);
}
