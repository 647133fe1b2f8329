//! The window-backed queue against the queue that holds every ticket in
//! memory: for random op sequences with snapshots and restarts at random
//! points, both answer every op alike and hold the same tickets in the
//! same order, whatever the window size. Snapshots are taken at once, or
//! taken and landed later with ops in between (as the queue actor writes
//! them beside its commits), evicting then only what did not change since.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::convert::Infallible;
use std::sync::Arc;

use proptest::prelude::*;
use weir_core::cold::ColdTickets;
use weir_core::queue::{Applied, Job, Op, Place, QueueState, Terminal, Ticket, TicketId};

/// A snapshot as the store holds it: tickets, the pending index by
/// (pool, priority, due, id), the key index, and the next id.
#[derive(Default)]
struct MemCold {
    tickets: BTreeMap<TicketId, Ticket>,
    index: BTreeSet<(Arc<str>, i32, u64, TicketId)>,
    keys: HashMap<Arc<str>, TicketId>,
    next_id: TicketId,
}

impl MemCold {
    fn of(tickets: Vec<Ticket>, next_id: TicketId) -> MemCold {
        let mut m = MemCold {
            next_id,
            ..MemCold::default()
        };
        for t in tickets {
            if let Place::Pending { due_ms } = t.place {
                m.index
                    .insert((t.job.pool.clone(), t.job.priority, due_ms, t.id));
            }
            m.keys.insert(t.job.key.clone(), t.id);
            m.tickets.insert(t.id, t);
        }
        m
    }

    /// The queue a restart opens: the running tickets read in, every
    /// pending one left in the store.
    fn open(&self) -> QueueState {
        let running: Vec<Ticket> = self
            .tickets
            .values()
            .filter(|t| matches!(t.place, Place::Running { .. }))
            .cloned()
            .collect();
        let mut levels: BTreeMap<(Arc<str>, i32), u64> = BTreeMap::new();
        for (pool, priority, _, _) in &self.index {
            *levels.entry((pool.clone(), *priority)).or_default() += 1;
        }
        QueueState::restore_cold(
            self.next_id,
            running,
            levels.into_iter().map(|((p, pr), n)| (p, pr, n)),
        )
        .expect("a consistent snapshot restores")
    }
}

impl ColdTickets for MemCold {
    type Error = Infallible;

    fn scan(
        &self,
        pool: &str,
        priority: i32,
        after: Option<(u64, TicketId)>,
        n: usize,
    ) -> Result<Vec<(u64, TicketId)>, Infallible> {
        let pool: Arc<str> = pool.into();
        // Ids stay far below u64::MAX here, so `id + 1` never wraps.
        let from = match after {
            Some((due, id)) => (pool.clone(), priority, due, id + 1),
            None => (pool.clone(), priority, 0, 0),
        };
        Ok(self
            .index
            .range(from..)
            .take_while(|(p, pr, _, _)| *p == pool && *pr == priority)
            .take(n)
            .map(|(_, _, due, id)| (*due, *id))
            .collect())
    }

    fn ticket(&self, id: TicketId) -> Result<Option<Ticket>, Infallible> {
        Ok(self.tickets.get(&id).cloned())
    }

    fn key_id(&self, key: &str) -> Result<Option<TicketId>, Infallible> {
        Ok(self.keys.get(key).copied())
    }
}

/// A snapshot being written: the store it makes, the queue's `gone` when
/// it was taken, the journal ops it covers, and every ticket changed since.
struct Taken {
    cold: MemCold,
    gone: BTreeSet<TicketId>,
    covers: usize,
    changed: BTreeSet<TicketId>,
}

/// The ids whose ticket differs between two views of the model.
fn changed_between(before: &BTreeMap<TicketId, Ticket>, after: &QueueState) -> BTreeSet<TicketId> {
    let now: BTreeMap<TicketId, &Ticket> = after.tickets().map(|t| (t.id, t)).collect();
    let mut ids: BTreeSet<TicketId> = before
        .iter()
        .filter(|(id, t)| now.get(id).is_none_or(|n| *n != *t))
        .map(|(id, _)| *id)
        .collect();
    ids.extend(now.keys().filter(|id| !before.contains_key(id)));
    ids
}

/// Lands `taken`: the store becomes its snapshot, the journal loses what
/// it covers.
fn land(q: &mut QueueState, cold: &mut MemCold, tail: &mut Vec<Op>, taken: Taken) {
    *cold = taken.cold;
    tail.drain(..taken.covers);
    q.snapshot_landed(&taken.gone);
}

/// Every live ticket of a window-backed queue: those in memory and those
/// in the store only.
fn logical(q: &QueueState, cold: &MemCold) -> Vec<Ticket> {
    let mut all: BTreeMap<TicketId, Ticket> = q.tickets().map(|t| (t.id, t.clone())).collect();
    for (pool, priority, _, id) in &cold.index {
        let in_cold_level = q
            .cold_levels()
            .any(|(p, pr, _)| p == pool && pr == *priority);
        if in_cold_level && !q.is_gone(*id) && !all.contains_key(id) {
            all.insert(*id, cold.tickets[id].clone());
        }
    }
    all.into_values().collect()
}

fn job(key: &str, pool: &str, due_ms: u64, priority: i32) -> Job {
    let mut j = Job::new(key, "noop", pool).with_priority(priority);
    j.due_ms = due_ms;
    j
}

#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // test steps, a few hundred at a time
enum Step {
    Op(Op),
    Snapshot,
    /// A snapshot, then all but `keep` pending tickets of each level left
    /// in the store, as the queue actor does after each snapshot.
    SnapshotEvict(usize),
    /// Cold tickets due after the first instant and by the second read
    /// ahead, at most so many.
    Warm(u64, u64, usize),
    Restart,
    /// A snapshot taken now and written while ops go on (the queue
    /// actor's): it lands at the next `Land`, a restart, or another
    /// snapshot.
    Take,
    /// The snapshot taken lands; all but `keep` pending tickets of each
    /// level that did not change since it was taken are left in the store.
    Land(usize),
}

fn arb_step() -> impl Strategy<Value = Step> {
    let pool = prop::sample::select(vec!["p0", "p1"]);
    let id = 0u64..120;
    prop_oneof![
        6 => ("[a-z][a-d]?", pool.clone(), 0u64..100, prop::sample::select(vec![0, 0, 3])).prop_map(|(k, p, due, pr)| Step::Op(Op::Enqueue(job(&k, p, due, pr)))),
        4 => (pool, 0u64..120, 0u64..200).prop_map(|(p, now, lease)| Step::Op(Op::Select {
            pool: p.into(), now_ms: now, worker: "w".into(), lease_until_ms: now + lease
        })),
        2 => (id.clone(), any::<bool>()).prop_map(|(id, ok)| Step::Op(Op::Complete {
            id, terminal: if ok { Terminal::Succeeded } else { Terminal::Failed }
        })),
        2 => id.clone().prop_map(|id| Step::Op(Op::Cancel { id })),
        2 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Step::Op(Op::Requeue { id, due_ms })),
        1 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Step::Op(Op::Defer { id, due_ms })),
        1 => (id.clone(), 0u32..4).prop_map(|(id, attempt)| Step::Op(Op::Start { id, attempt })),
        1 => (id, 0u64..150).prop_map(|(id, due_ms)| Step::Op(Op::Orphaned { id, due_ms })),
        1 => Just(Step::Snapshot),
        1 => (1usize..4).prop_map(Step::SnapshotEvict),
        1 => (0u64..100, 0u64..60, 1usize..20).prop_map(|(now, ahead, max)| Step::Warm(now, now + ahead, max)),
        1 => Just(Step::Restart),
        1 => Just(Step::Take),
        1 => (1usize..4).prop_map(Step::Land),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("WEIR_SOAK").is_some() { 8_192 } else { 512 }))]

    #[test]
    fn window_backed_queue_equals_the_in_memory_one(
        steps in prop::collection::vec(arb_step(), 0..300),
        window in 1usize..9,
    ) {
        let mut model = QueueState::new();
        // The store: its last snapshot and the journal since.
        let mut cold = MemCold::default();
        let mut tail: Vec<Op> = Vec::new();
        let mut q = QueueState::new();
        let mut taken: Option<Taken> = None;
        for step in steps {
            // A snapshot lands before another is taken, and before a
            // restart reads the store (the actor waits for its write).
            if matches!(step, Step::Snapshot | Step::SnapshotEvict(_) | Step::Take | Step::Restart) {
                if let Some(t) = taken.take() {
                    land(&mut q, &mut cold, &mut tail, t);
                }
            }
            match step {
                Step::Op(op) => {
                    let before: BTreeMap<TicketId, Ticket> =
                        model.tickets().map(|t| (t.id, t.clone())).collect();
                    q.prepare(&op, &cold).unwrap();
                    let got = q.step(&op);
                    q.refill(&cold, window).unwrap();
                    let want = model.step(&op);
                    prop_assert_eq!(&got, &want, "op {:?}", op);
                    tail.push(op);
                    if let Some(t) = taken.as_mut() {
                        t.changed.extend(changed_between(&before, &model));
                    }
                }
                Step::Take => {
                    taken = Some(Taken {
                        cold: MemCold::of(logical(&q, &cold), q.next_id()),
                        gone: q.snapshot_begun(),
                        covers: tail.len(),
                        changed: BTreeSet::new(),
                    });
                }
                Step::Land(keep) => {
                    if let Some(t) = taken.take() {
                        let changed = t.changed.clone();
                        land(&mut q, &mut cold, &mut tail, t);
                        q.evict_holding(keep, |id| changed.contains(&id));
                        q.refill(&cold, window).unwrap();
                    }
                }
                Step::Snapshot => {
                    cold = MemCold::of(logical(&q, &cold), q.next_id());
                    q.snapshot_taken();
                    tail.clear();
                }
                Step::SnapshotEvict(keep) => {
                    cold = MemCold::of(logical(&q, &cold), q.next_id());
                    q.snapshot_taken();
                    tail.clear();
                    q.evict(keep);
                    q.refill(&cold, window).unwrap();
                }
                Step::Warm(now, until, max) => {
                    let hot = q.hot_len();
                    let n = q.warm(&cold, now, until, window, max).unwrap();
                    prop_assert_eq!(q.hot_len(), hot + n);
                    // A window past the bound at most.
                    prop_assert!(n < max + 2 * window, "{} read for a bound of {}", n, max);
                    // What is still cold lies past the instant, or the
                    // bound was reached.
                    if n < max {
                        for (_, _, level) in q.cold_levels() {
                            prop_assert!(level.bound.is_none_or(|(due, _)| due <= now || due > until));
                        }
                    }
                }
                Step::Restart => {
                    q = cold.open();
                    q.refill(&cold, window).unwrap();
                    for op in &tail {
                        q.prepare(op, &cold).unwrap();
                        let _ = q.step(op);
                        q.refill(&cold, window).unwrap();
                    }
                }
            }
            q.assert_invariants();
            prop_assert_eq!(logical(&q, &cold), model.tickets().cloned().collect::<Vec<_>>());
            prop_assert_eq!(q.len(), model.len());
            for pool in ["p0", "p1"] {
                prop_assert_eq!(q.next_due_ms(pool), model.next_due_ms(pool));
                for now in [0, 50, 200] {
                    prop_assert_eq!(
                        q.peek_pending(pool, now).map(|t| t.id),
                        model.peek_pending(pool, now).map(|t| t.id)
                    );
                }
            }
            for key in ["a", "e", "p"] {
                q.fault_in_key(key, &cold).unwrap();
                prop_assert_eq!(q.by_key(key).map(|t| t.id), model.by_key(key).map(|t| t.id));
            }
        }
    }
}

/// A restart over a large backlog reads one window per level, not the
/// backlog; draining it reads window after window, in order.
#[test]
fn an_open_reads_one_window() {
    let mut model = QueueState::new();
    for i in 0..10_000 {
        let _ = model.step(&Op::Enqueue(job(&format!("k{i}"), "p", i, 0)));
    }
    let cold = MemCold::of(model.tickets().cloned().collect(), model.next_id());
    let mut q = cold.open();
    q.refill(&cold, 64).unwrap();
    assert_eq!(q.hot_len(), 64);
    assert_eq!(q.len(), 10_000);
    for i in 0..10_000u64 {
        let op = Op::Select {
            pool: "p".into(),
            now_ms: 20_000,
            worker: "w".into(),
            lease_until_ms: 30_000,
        };
        q.prepare(&op, &cold).unwrap();
        assert_eq!(q.step(&op), Applied::Selected(i));
        let _ = q.step(&Op::Complete {
            id: i,
            terminal: Terminal::Succeeded,
        });
        q.refill(&cold, 64).unwrap();
        assert!(q.hot_len() <= 64, "memory holds a window: {}", q.hot_len());
    }
    assert!(q.is_empty());
}

/// Read ahead: a burst due at one instant, left in the store by an
/// eviction, is in memory before its instant, and tickets due later stay
/// in the store.
#[test]
fn warm_reads_a_burst_due_soon_and_nothing_later() {
    let mut model = QueueState::new();
    for i in 0..64 {
        let _ = model.step(&Op::Enqueue(job(&format!("k{i}"), "p", 10, 0)));
    }
    for i in 64..128 {
        let _ = model.step(&Op::Enqueue(job(&format!("k{i}"), "p", 1_000, 0)));
    }
    let cold = MemCold::of(model.tickets().cloned().collect(), model.next_id());
    let mut q = cold.open();
    q.refill(&cold, 8).unwrap();
    assert_eq!(q.hot_len(), 8);
    assert_eq!(
        q.warm(&cold, 0, 5, 8, 1_000).unwrap(),
        0,
        "nothing due by 5"
    );
    assert_eq!(
        q.warm(&cold, 10, 20, 8, 1_000).unwrap(),
        0,
        "a burst due already is a backlog: read as it is handed out"
    );
    // The rest of the burst due at 10, and the one window after it that
    // shows the level's cold tickets lie past 10.
    let n = q.warm(&cold, 5, 10, 8, 1_000).unwrap();
    assert_eq!(n, 56 + 8);
    assert_eq!(q.hot_len(), 72);
    assert_eq!(
        q.cold_levels().count(),
        1,
        "the tickets due at 1,000 stay cold"
    );
    assert_eq!(
        q.warm(&cold, 5, 10, 8, 1_000).unwrap(),
        0,
        "a second read finds nothing"
    );
    let mut q2 = cold.open();
    q2.refill(&cold, 8).unwrap();
    assert_eq!(q2.warm(&cold, 5, 10, 8, 20).unwrap(), 20, "the bound");
}

/// Eviction leaves a window per level in memory, and the queue hands out
/// the same tickets in the same order as before it.
#[test]
fn eviction_keeps_a_window_and_the_order() {
    let mut model = QueueState::new();
    for i in 0..5_000 {
        let _ = model.step(&Op::Enqueue(job(
            &format!("k{i}"),
            "p",
            5_000 - i,
            i as i32 % 3,
        )));
    }
    let mut q = model.clone();
    let cold = MemCold::of(q.tickets().cloned().collect(), q.next_id());
    q.snapshot_taken();
    assert_eq!(q.evict(16), 5_000 - 3 * 16);
    assert_eq!(q.hot_len(), 3 * 16);
    assert_eq!(q.len(), 5_000);
    for _ in 0..5_000 {
        let op = Op::Select {
            pool: "p".into(),
            now_ms: 10_000,
            worker: "w".into(),
            lease_until_ms: 20_000,
        };
        q.prepare(&op, &cold).unwrap();
        assert_eq!(q.step(&op), model.step(&op));
        q.refill(&cold, 16).unwrap();
    }
    assert_eq!(q.len(), model.len());
}

/// A store whose counts name more tickets than its index lists is refused
/// with a message, not trusted.
#[test]
fn counts_beyond_the_index_are_inconsistent() {
    let cold = MemCold::default();
    let mut q = QueueState::restore_cold(5, Vec::new(), [("p".into(), 0, 3)]).unwrap();
    let err = q.refill(&cold, 8).unwrap_err();
    assert!(err.to_string().contains("counts 3 more pending"), "{err}");
}
