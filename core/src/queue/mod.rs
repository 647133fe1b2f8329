//! The durable queue as a state machine: tickets, their order, their leases
//! and their tries, changed only by [`QueueState::step`].
//!
//! Every change to the queue is an [`Op`]. The queue actor journals each op
//! before any effect of it leaves the actor (an answer, a ticket handed to a
//! pool), and at open replays snapshot plus journal through the same `step`,
//! so live state and replayed state are equal by construction. `step` is
//! total: an op that does not apply (a `Complete` of a ticket that is no
//! longer live, a second `Enqueue` of a live key) changes nothing and says so
//! in its [`Applied`] value, both live and in replay.
//!
//! States of a ticket: *pending* (in its pool's order: by priority, higher
//! first, then `(due_ms, id)`; see [`crate::pending`])
//! or *running* (leased to a worker until `lease_until_ms`). Terminal tickets
//! (completed or cancelled) leave the state; their record lives in the
//! store. Invariants, checked after every step in debug builds:
//! every live ticket is in exactly one of pending and running; each pending
//! index entry names a pending ticket of that pool with that due instant;
//! the key index and the tickets are a bijection; ids are below `next_id`.
//!
//! What survives a crash: everything journaled. What a crash means: every
//! ticket that was running when the process died was handed out durably
//! and may have run; its attempt will never report, so
//! [`QueueState::orphans`] requeues each as a failed attempt (a crash
//! counts as an attempt, so a task that kills the process runs at most
//! `attempts_max` times and never sees the same attempt number twice).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

mod op;
pub(crate) mod ticket;
mod window;

use crate::cold::ColdLevel;
use crate::pending::PendingOrder;
use crate::retry::{AttemptOutcome, Plan, Stop, Tries};

pub use op::{Applied, Ignored, Op};
pub use ticket::{Job, Place, Terminal, Ticket, TicketId};

/// One change to the queue. Journaled before it takes effect.
// Enqueue is the most frequent op and carries the largest value; boxing it
// would add an allocation to every enqueue and replay to shrink the rare
// ones.
/// Why a running ticket goes back to pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Back {
    /// Its attempt failed.
    Failed,
    /// A breaker held it back.
    Deferred,
    /// A sensor's check was not met.
    Poked,
}

/// The queue's state. Build it with [`QueueState::new`] or
/// [`QueueState::restore`]; change it only with [`QueueState::step`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueState {
    next_id: TicketId,
    /// Boxed: a B-tree moves its values when nodes split and merge, and a
    /// ticket is a few hundred bytes; a box is eight.
    tickets: BTreeMap<TicketId, Box<Ticket>>,
    /// Pending tickets per pool, ordered by (priority, due_ms, id).
    pending: BTreeMap<Arc<str>, PendingOrder>,
    /// Running tickets ordered by (lease_until_ms, id).
    leases: BTreeSet<(u64, TicketId)>,
    keys: HashMap<Arc<str>, TicketId>,
    /// Levels `(pool, priority)` with pending tickets in the store only
    /// (see the `cold` module); empty when every ticket is in memory.
    cold: BTreeMap<(Arc<str>, i32), ColdLevel>,
    /// Tickets that left the queue since the store's last snapshot while
    /// levels were cold: the store still lists them, and they must not be
    /// read in again. Kept only while `cold` is not empty (without cold
    /// levels nothing is read from the store), or while a snapshot is
    /// being written (`snapshot_writing`).
    gone: BTreeSet<TicketId>,
    /// A snapshot taken earlier is being written while ops go on: a ticket
    /// that ends now is still in the store that snapshot makes, and levels
    /// may go cold once it lands, so it is remembered in `gone` whether
    /// or not a level is cold now.
    snapshot_writing: bool,
}

/// Counts of one pool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolCounts {
    /// Pending tickets.
    pub pending: usize,
    /// Pending tickets due at the instant asked.
    pub due: usize,
}

impl QueueState {
    /// An empty queue.
    pub fn new() -> Self {
        QueueState::default()
    }

    /// A queue holding `tickets` (a snapshot), with `next_id` as the next id.
    /// Errors when a ticket repeats an id or a key, or has an id at or above
    /// `next_id`: a snapshot like that is corrupt.
    pub fn restore(
        next_id: TicketId,
        tickets: impl IntoIterator<Item = Ticket>,
    ) -> Result<Self, String> {
        let mut state = QueueState {
            next_id,
            ..QueueState::default()
        };
        for ticket in tickets {
            let id = ticket.id;
            if id >= next_id {
                return Err(format!("ticket {id} is at or above next id {next_id}"));
            }
            if state.keys.insert(ticket.job.key.clone(), id).is_some() {
                return Err(format!("key {:?} of ticket {id} repeats", ticket.job.key));
            }
            state.index(&ticket);
            if state.tickets.insert(id, Box::new(ticket)).is_some() {
                return Err(format!("ticket {id} repeats"));
            }
        }
        state.assert_invariants();
        Ok(state)
    }

    /// The next id to assign.
    pub fn next_id(&self) -> TicketId {
        self.next_id
    }

    /// Live tickets in memory, by id: every running ticket, and the
    /// pending ones read in (all of them unless levels are cold, see
    /// [`QueueState::cold_levels`]).
    pub fn tickets(&self) -> impl ExactSizeIterator<Item = &Ticket> {
        self.tickets.values().map(|t| &**t)
    }

    /// A live ticket.
    pub fn ticket(&self, id: TicketId) -> Option<&Ticket> {
        self.tickets.get(&id).map(|t| &**t)
    }

    /// The live ticket of a key.
    pub fn by_key(&self, key: &str) -> Option<&Ticket> {
        self.keys
            .get(key)
            .and_then(|id| self.tickets.get(id))
            .map(|t| &**t)
    }

    /// Live tickets in all, in memory or in the store.
    pub fn len(&self) -> usize {
        self.tickets.len() + self.cold_len() as usize
    }

    /// Whether no ticket is live.
    pub fn is_empty(&self) -> bool {
        self.tickets.is_empty() && self.cold.is_empty()
    }

    /// Live tickets in memory: every running one, and the pending ones
    /// read in.
    pub fn hot_len(&self) -> usize {
        self.tickets.len()
    }

    /// Pending tickets in the store only.
    pub fn cold_len(&self) -> u64 {
        self.cold.values().map(|l| l.remaining).sum()
    }

    /// The levels `(pool, priority)` with pending tickets in the store
    /// only.
    pub fn cold_levels(&self) -> impl Iterator<Item = (&Arc<str>, i32, &ColdLevel)> {
        self.cold.iter().map(|((pool, p), l)| (pool, *p, l))
    }

    /// Whether ticket `id` left the queue since the store's last snapshot
    /// (its stored entries are stale).
    pub fn is_gone(&self, id: TicketId) -> bool {
        self.gone.contains(&id)
    }

    /// Running tickets.
    pub fn running_len(&self) -> usize {
        self.leases.len()
    }

    /// The pools that have pending tickets.
    pub fn pools(&self) -> Vec<&Arc<str>> {
        let mut pools: Vec<&Arc<str>> = self
            .pending
            .keys()
            .chain(self.cold.keys().map(|(pool, _)| pool))
            .collect();
        pools.sort();
        pools.dedup();
        pools
    }

    /// Pending and due counts of `pool` at `now_ms`: pending counts the
    /// tickets in the store only too; due, only those in memory.
    pub fn pool_counts(&self, pool: &str, now_ms: u64) -> PoolCounts {
        let cold: u64 = self
            .cold
            .iter()
            .filter(|((p, _), _)| **p == *pool)
            .map(|(_, l)| l.remaining)
            .sum();
        match self.pending.get(pool) {
            None => PoolCounts {
                pending: cold as usize,
                due: 0,
            },
            Some(set) => PoolCounts {
                pending: set.len() + cold as usize,
                due: set.due_count(now_ms),
            },
        }
    }

    /// The earliest due instant of a pending ticket of `pool`.
    pub fn next_due_ms(&self, pool: &str) -> Option<u64> {
        self.pending.get(pool)?.next_due_ms()
    }

    /// The pending ticket of `pool` that a select at `now_ms` would take.
    pub fn peek_pending(&self, pool: &str, now_ms: u64) -> Option<&Ticket> {
        let (_, _, id) = self.pending.get(pool)?.first_due(now_ms)?;
        self.tickets.get(&id).map(|t| &**t)
    }

    /// The earliest end of a running ticket's lease.
    pub fn next_lease_end_ms(&self) -> Option<u64> {
        self.leases.first().map(|&(until, _)| until)
    }

    /// Running tickets whose lease ended at or before `now_ms`.
    pub fn expired_leases(&self, now_ms: u64) -> Vec<TicketId> {
        self.leases
            .range(..(now_ms.saturating_add(1), 0))
            .map(|&(_, id)| id)
            .collect()
    }

    /// Applies one op. Live and replay both call it, so they agree.
    pub fn step(&mut self, op: &Op) -> Applied {
        let applied = match op {
            Op::Enqueue(job) => self.enqueue(job),
            Op::Select {
                pool,
                now_ms,
                worker,
                lease_until_ms,
            } => self.select(pool, *now_ms, worker, *lease_until_ms),
            Op::Complete { id, terminal } => match self.running(*id) {
                Err(ignored) => Applied::Ignored(ignored),
                Ok(()) => {
                    self.remove(*id);
                    Applied::Completed(*id, *terminal)
                }
            },
            Op::Cancel { id } => {
                if self.tickets.contains_key(id) {
                    self.remove(*id);
                    Applied::Cancelled(*id)
                } else {
                    Applied::Ignored(Ignored::Unknown(*id))
                }
            }
            Op::Requeue { id, due_ms } => self.back_to_pending(*id, *due_ms, Back::Failed),
            Op::Defer { id, due_ms } => self.back_to_pending(*id, *due_ms, Back::Deferred),
            Op::Poke { id, due_ms } => self.back_to_pending(*id, *due_ms, Back::Poked),
            Op::Orphaned { id, due_ms } => {
                let applied = self.back_to_pending(*id, *due_ms, Back::Deferred);
                if let (Applied::Requeued(_), Some(t)) = (&applied, self.tickets.get_mut(id)) {
                    t.tries.unstarted_orphans = t.tries.unstarted_orphans.saturating_add(1);
                }
                applied
            }
            Op::Start { id, attempt } => match self.tickets.get_mut(id).map(|t| &mut **t) {
                Some(Ticket {
                    attempt: a,
                    place: Place::Running { started, .. },
                    tries,
                    ..
                }) if *a == *attempt => {
                    *started = true;
                    tries.unstarted_orphans = 0;
                    Applied::Started(*id)
                }
                Some(Ticket {
                    place: Place::Pending { .. },
                    ..
                }) => Applied::Ignored(Ignored::NotRunning(*id)),
                Some(_) => Applied::Ignored(Ignored::Superseded(*id)),
                None => Applied::Ignored(Ignored::Unknown(*id)),
            },
            Op::Extend { id, lease_until_ms } => match self.running(*id) {
                Err(ignored) => Applied::Ignored(ignored),
                Ok(()) => {
                    let ticket = self.tickets.get_mut(id).expect("running ticket is live");
                    if let Place::Running {
                        lease_until_ms: until,
                        ..
                    } = &mut ticket.place
                    {
                        self.leases.remove(&(*until, *id));
                        *until = *lease_until_ms;
                        self.leases.insert((*lease_until_ms, *id));
                    }
                    Applied::Extended(*id)
                }
            },
        };
        #[cfg(debug_assertions)]
        self.assert_invariants_cheap();
        applied
    }

    /// The op that follows attempt `attempt` of ticket `id` ending with
    /// `outcome` at `now_ms`: Complete when it succeeded or retrying is
    /// over, Requeue at the retry plan's delay otherwise. `None` when the
    /// ticket is not running that attempt (cancelled, already requeued by an
    /// expired lease, or a stale report): its outcome is dropped.
    pub fn after_attempt(
        &self,
        id: TicketId,
        attempt: u32,
        outcome: AttemptOutcome,
        now_ms: u64,
        draw: u64,
    ) -> Option<(Op, Plan)> {
        self.after_attempt_waiting(id, attempt, outcome, now_ms, draw, 0)
    }

    /// As [`QueueState::after_attempt`], a retry waiting at least
    /// `min_wait_ms` (a server's `Retry-After`).
    pub fn after_attempt_waiting(
        &self,
        id: TicketId,
        attempt: u32,
        outcome: AttemptOutcome,
        now_ms: u64,
        draw: u64,
        min_wait_ms: u64,
    ) -> Option<(Op, Plan)> {
        let ticket = self.tickets.get(&id)?;
        let Place::Running { due_ms, .. } = ticket.place else {
            return None;
        };
        if ticket.attempt != attempt {
            return None;
        }
        // Handed out ahead of its instant and ended before it: the task
        // never ran (its pool waits for the instant), whatever the report
        // says (cancelled while waiting, a lost worker, a crash). Pending
        // again at its instant; a deferral, not an attempt.
        if due_ms > now_ms {
            return Some((
                Op::Defer { id, due_ms },
                Plan::Wait(due_ms.saturating_sub(now_ms)),
            ));
        }
        if let (AttemptOutcome::NotMet, Some(sensor)) = (outcome, &ticket.job.sensor) {
            return Some(
                match crate::sensor::after_not_met(sensor, ticket.tries.first_due_ms, now_ms) {
                    crate::sensor::Poke::Again { due_ms } => (
                        Op::Poke { id, due_ms },
                        Plan::Wait(due_ms.saturating_sub(now_ms)),
                    ),
                    crate::sensor::Poke::TimedOut(on_timeout) => (
                        Op::Complete {
                            id,
                            terminal: match on_timeout {
                                crate::sensor::OnTimeout::Fail => Terminal::Failed,
                                crate::sensor::OnTimeout::Skip => Terminal::Skipped,
                            },
                        },
                        Plan::Stop(Stop::SensorTimedOut),
                    ),
                },
            );
        }
        let plan = crate::retry::plan_waiting(
            outcome,
            &ticket.job.policy,
            ticket.tries,
            now_ms,
            draw,
            min_wait_ms,
        );
        let op = match plan {
            Plan::Stop(Stop::Succeeded) => Op::Complete {
                id,
                terminal: Terminal::Succeeded,
            },
            Plan::Stop(_) => Op::Complete {
                id,
                terminal: Terminal::Failed,
            },
            Plan::Wait(wait_ms) => Op::Requeue {
                id,
                due_ms: now_ms.saturating_add(wait_ms),
            },
        };
        Some((op, plan))
    }

    /// Every ticket running at open ran an attempt in a process that died
    /// (or, replicated, on a leader that lost its place): it is requeued
    /// as a failed attempt, or completed as failed when its retries are
    /// spent (`draw` gives each its jitter). Its hand-out was durable
    /// before the task could start, and whether the task started is
    /// unknown, so the attempt counts: a task never sees the same attempt
    /// number twice and never runs more than `attempts_max` times. A
    /// hand-out known not to have run (a worker that gave it back, a
    /// breaker's deferral) is given back live, before any crash.
    pub fn orphans(&self, now_ms: u64, mut draw: impl FnMut() -> u64) -> Vec<(Op, Plan)> {
        let running: Vec<(TicketId, u32)> = self
            .leases
            .iter()
            .map(|&(_, id)| (id, self.tickets[&id].attempt))
            .collect();
        running
            .into_iter()
            .filter_map(|(id, attempt)| {
                self.after_attempt(id, attempt, AttemptOutcome::Retryable, now_ms, draw())
            })
            .collect()
    }

    fn enqueue(&mut self, job: &Job) -> Applied {
        if let Some(&id) = self.keys.get(&job.key) {
            return Applied::Duplicate(id);
        }
        let id = self.next_id;
        self.next_id += 1;
        let ticket = Ticket {
            id,
            job: job.clone(),
            tries: Tries {
                failures: 0,
                deferrals: 0,
                pokes: 0,
                unstarted_orphans: 0,
                first_due_ms: job.due_ms,
            },
            attempt: 0,
            place: Place::Pending { due_ms: job.due_ms },
        };
        self.keys.insert(job.key.clone(), id);
        self.index(&ticket);
        self.tickets.insert(id, Box::new(ticket));
        Applied::Enqueued(id)
    }

    fn select(
        &mut self,
        pool: &str,
        now_ms: u64,
        worker: &Arc<str>,
        lease_until_ms: u64,
    ) -> Applied {
        let Some(set) = self.pending.get_mut(pool) else {
            return Applied::NoneDue;
        };
        let Some((priority, due_ms, id)) = set.first_due(now_ms) else {
            return Applied::NoneDue;
        };
        set.remove(priority, due_ms, id);
        if set.is_empty() {
            self.pending.remove(pool);
        }
        let ticket = self
            .tickets
            .get_mut(&id)
            .expect("pending entry names a live ticket");
        debug_assert_eq!(ticket.place, Place::Pending { due_ms });
        ticket.attempt += 1;
        ticket.place = Place::Running {
            worker: worker.clone(),
            lease_until_ms,
            started: false,
            due_ms,
        };
        self.leases.insert((lease_until_ms, id));
        Applied::Selected(id)
    }

    fn running(&self, id: TicketId) -> Result<(), Ignored> {
        match self.tickets.get(&id).map(|t| &**t) {
            None => Err(Ignored::Unknown(id)),
            Some(Ticket {
                place: Place::Pending { .. },
                ..
            }) => Err(Ignored::NotRunning(id)),
            Some(_) => Ok(()),
        }
    }

    fn back_to_pending(&mut self, id: TicketId, due_ms: u64, why: Back) -> Applied {
        if let Err(ignored) = self.running(id) {
            return Applied::Ignored(ignored);
        }
        let ticket = self.tickets.get_mut(&id).expect("running ticket is live");
        // Never pending before the instant it was handed out for: a grant
        // handed out ahead that comes back (no slot at its pool, lost with
        // a queue incarnation) waits for it again.
        let mut due_ms = due_ms;
        if let Place::Running {
            lease_until_ms,
            due_ms: handed_for,
            ..
        } = ticket.place
        {
            self.leases.remove(&(lease_until_ms, id));
            due_ms = due_ms.max(handed_for);
        }
        match why {
            Back::Failed => ticket.tries.failures = ticket.tries.failures.saturating_add(1),
            Back::Deferred => ticket.tries.deferrals = ticket.tries.deferrals.saturating_add(1),
            Back::Poked => ticket.tries.pokes = ticket.tries.pokes.saturating_add(1),
        }
        ticket.place = Place::Pending { due_ms };
        let (pool, priority) = (ticket.job.pool.clone(), ticket.job.priority);
        self.pending_of(&pool).insert(priority, due_ms, id);
        Applied::Requeued(id)
    }

    /// The pending order of `pool`, created when missing. Looks up by
    /// reference first: `entry` would take (and drop) an owned key on
    /// every call, and this is the hottest path of enqueue.
    fn pending_of(&mut self, pool: &Arc<str>) -> &mut PendingOrder {
        if !self.pending.contains_key(pool) {
            self.pending.insert(pool.clone(), PendingOrder::new());
        }
        self.pending.get_mut(pool).expect("inserted above")
    }

    fn index(&mut self, ticket: &Ticket) {
        match &ticket.place {
            Place::Pending { due_ms } => {
                self.pending_of(&ticket.job.pool)
                    .insert(ticket.job.priority, *due_ms, ticket.id);
            }
            Place::Running { lease_until_ms, .. } => {
                self.leases.insert((*lease_until_ms, ticket.id));
            }
        }
    }

    fn remove(&mut self, id: TicketId) {
        let ticket = self.tickets.remove(&id).expect("removed ticket is live");
        match ticket.place {
            Place::Pending { due_ms } => {
                let pool = &ticket.job.pool;
                let set = self
                    .pending
                    .get_mut(pool)
                    .expect("pending ticket's pool is indexed");
                let removed = set.remove(ticket.job.priority, due_ms, id);
                debug_assert!(removed, "pending ticket {id} is in its pool's order");
                if set.is_empty() {
                    self.pending.remove(pool);
                }
            }
            Place::Running { lease_until_ms, .. } => {
                let removed = self.leases.remove(&(lease_until_ms, id));
                debug_assert!(removed, "running ticket {id} has a lease entry");
            }
        }
        let removed = self.keys.remove(&ticket.job.key);
        debug_assert_eq!(removed, Some(id), "key index names ticket {id}");
        if !self.cold.is_empty() || self.snapshot_writing {
            self.gone.insert(id);
        }
    }

    /// Counts agree: what a step can break cheaply. Full check in
    /// [`Self::assert_invariants`].
    #[cfg(debug_assertions)]
    fn assert_invariants_cheap(&self) {
        let pending: usize = self.pending.values().map(PendingOrder::len).sum();
        assert_eq!(
            pending + self.leases.len(),
            self.tickets.len(),
            "every live ticket is in exactly one of pending and running"
        );
        assert_eq!(
            self.keys.len(),
            self.tickets.len(),
            "one key per live ticket"
        );
    }

    /// Checks every invariant; panics naming the broken one.
    pub fn assert_invariants(&self) {
        let pending: usize = self.pending.values().map(PendingOrder::len).sum();
        assert_eq!(
            pending + self.leases.len(),
            self.tickets.len(),
            "every live ticket is in exactly one of pending and running"
        );
        for (pool, set) in &self.pending {
            assert!(!set.is_empty(), "pool {pool} has an empty pending set");
            for (priority, due_ms, id) in set.iter() {
                let ticket = self.tickets.get(&id);
                assert!(ticket.is_some(), "pending entry {id} names a live ticket");
                let ticket = ticket.unwrap();
                assert_eq!(
                    ticket.job.priority, priority,
                    "ticket {id} is pending at its own priority"
                );
                assert_eq!(
                    &ticket.job.pool, pool,
                    "ticket {id} is pending in its own pool"
                );
                assert_eq!(
                    ticket.place,
                    Place::Pending { due_ms },
                    "ticket {id} pending at {due_ms}"
                );
            }
        }
        for &(until, id) in &self.leases {
            let ticket = self.tickets.get(&id);
            assert!(ticket.is_some(), "lease entry {id} names a live ticket");
            assert!(
                matches!(ticket.unwrap().place, Place::Running { lease_until_ms, .. } if lease_until_ms == until),
                "ticket {id} runs with a lease until {until}"
            );
        }
        assert_eq!(
            self.keys.len(),
            self.tickets.len(),
            "one key per live ticket"
        );
        for (key, id) in &self.keys {
            let ticket = self.tickets.get(id);
            assert!(ticket.is_some(), "key {key:?} names a live ticket");
            assert_eq!(&ticket.unwrap().job.key, key, "key index of ticket {id}");
        }
        for (id, t) in &self.tickets {
            assert!(
                t.tries.deferrals <= t.attempt,
                "ticket {id}: deferrals {} within hand-outs {}",
                t.tries.deferrals,
                t.attempt
            );
        }
        if let Some((&last, _)) = self.tickets.last_key_value() {
            assert!(last < self.next_id, "ticket ids are below next_id");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retry::RetryPolicy;
    use proptest::prelude::*;
    use serde::Serialize;

    fn job(key: &str, pool: &str, due_ms: u64) -> Job {
        Job {
            key: key.into(),
            task: "noop".into(),
            pool: pool.into(),
            target: None,
            due_ms,
            payload: vec![1, 2, 3],
            policy: RetryPolicy::default(),
            timeout_ms: None,
            notify: None,
            retention_ms: None,
            priority: 0,
            sensor: None,
            produces: Vec::new(),
        }
    }

    fn select(pool: &str, now_ms: u64) -> Op {
        Op::Select {
            pool: pool.into(),
            now_ms,
            worker: "w".into(),
            lease_until_ms: now_ms + 1_000,
        }
    }

    #[test]
    fn lifecycle() {
        let mut q = QueueState::new();
        assert_eq!(
            q.step(&Op::Enqueue(job("a", "p", 10))),
            Applied::Enqueued(0)
        );
        assert_eq!(
            q.step(&Op::Enqueue(job("a", "p", 5))),
            Applied::Duplicate(0)
        );
        assert_eq!(q.step(&Op::Enqueue(job("b", "p", 5))), Applied::Enqueued(1));
        // Nothing due before 5; then the lowest (due, id) first.
        assert_eq!(q.step(&select("p", 4)), Applied::NoneDue);
        assert_eq!(q.step(&select("p", 10)), Applied::Selected(1));
        assert_eq!(q.step(&select("p", 10)), Applied::Selected(0));
        assert_eq!(q.step(&select("p", 10)), Applied::NoneDue);
        assert_eq!(q.step(&select("other", 10)), Applied::NoneDue);
        // Requeue counts a failure, Defer does not.
        assert_eq!(
            q.step(&Op::Requeue { id: 1, due_ms: 20 }),
            Applied::Requeued(1)
        );
        assert_eq!(q.ticket(1).unwrap().tries.failures, 1);
        assert_eq!(
            q.step(&Op::Defer { id: 0, due_ms: 30 }),
            Applied::Requeued(0)
        );
        assert_eq!(q.ticket(0).unwrap().tries.failures, 0);
        assert_eq!(q.ticket(0).unwrap().tries.deferrals, 1);
        assert_eq!(
            q.ticket(0).unwrap().attempts(),
            0,
            "a deferral is no attempt"
        );
        assert_eq!(q.ticket(1).unwrap().attempts(), 1);
        assert_eq!(q.ticket(1).unwrap().deferrals(), 0);
        assert_eq!(
            q.step(&Op::Defer { id: 0, due_ms: 30 }),
            Applied::Ignored(Ignored::NotRunning(0))
        );
        assert_eq!(
            q.ticket(0).unwrap().tries.deferrals,
            1,
            "an ignored op counts nothing"
        );
        assert_eq!(q.step(&select("p", 25)), Applied::Selected(1));
        assert_eq!(q.ticket(1).unwrap().attempt, 2);
        assert_eq!(
            q.step(&Op::Complete {
                id: 1,
                terminal: Terminal::Succeeded
            }),
            Applied::Completed(1, Terminal::Succeeded)
        );
        assert_eq!(
            q.step(&Op::Complete {
                id: 1,
                terminal: Terminal::Succeeded
            }),
            Applied::Ignored(Ignored::Unknown(1))
        );
        // A completed key may be enqueued again as a new ticket: the store
        // remembers completed keys, the live state does not.
        assert_eq!(q.step(&Op::Enqueue(job("b", "p", 5))), Applied::Enqueued(2));
        assert_eq!(q.step(&Op::Cancel { id: 0 }), Applied::Cancelled(0));
        assert_eq!(q.step(&select("p", 100)), Applied::Selected(2));
        assert_eq!(q.len(), 1);
        q.assert_invariants();
    }

    #[test]
    fn cancel_running_drops_its_outcome() {
        let mut q = QueueState::new();
        let _ = q.step(&Op::Enqueue(job("a", "p", 0)));
        let _ = q.step(&select("p", 0));
        let attempt = q.ticket(0).unwrap().attempt;
        assert_eq!(q.step(&Op::Cancel { id: 0 }), Applied::Cancelled(0));
        assert_eq!(
            q.after_attempt(0, attempt, AttemptOutcome::Success, 5, 0),
            None
        );
    }

    #[test]
    fn after_attempt_follows_the_policy() {
        let mut q = QueueState::new();
        let mut j = job("a", "p", 0);
        j.policy = RetryPolicy {
            attempts_max: 2,
            initial_ms: 100,
            ..RetryPolicy::default()
        };
        let _ = q.step(&Op::Enqueue(j));
        let _ = q.step(&select("p", 0));
        // A stale attempt number is dropped.
        assert_eq!(
            q.after_attempt(0, 7, AttemptOutcome::Retryable, 10, 0),
            None
        );
        let (op, _) = q
            .after_attempt(0, 1, AttemptOutcome::Retryable, 10, 0)
            .unwrap();
        assert_eq!(op, Op::Requeue { id: 0, due_ms: 110 });
        let _ = q.step(&op);
        let _ = q.step(&select("p", 110));
        let (op, plan) = q
            .after_attempt(0, 2, AttemptOutcome::Retryable, 120, 0)
            .unwrap();
        assert_eq!(
            op,
            Op::Complete {
                id: 0,
                terminal: Terminal::Failed
            }
        );
        assert_eq!(plan, Plan::Stop(Stop::AttemptsSpent));
    }

    /// A sensor's check that is not met goes back due `every` later with
    /// no attempt or failure counted; at its timeout it ends as its policy
    /// says; a ticket without a sensor policy retries a not-met as a
    /// failure.
    #[test]
    fn sensors_poke_then_time_out() {
        use crate::sensor::{OnTimeout, SensorPolicy};
        for (on_timeout, terminal) in [
            (OnTimeout::Fail, Terminal::Failed),
            (OnTimeout::Skip, Terminal::Skipped),
        ] {
            let mut q = QueueState::new();
            let mut j = job("s", "p", 100);
            j.sensor = Some(Box::new(SensorPolicy {
                every_ms: 30,
                timeout_ms: 100,
                on_timeout,
            }));
            let _ = q.step(&Op::Enqueue(j));
            let mut now = 100;
            let mut checks = 0;
            loop {
                assert_eq!(q.step(&select("p", now)), Applied::Selected(0));
                checks += 1;
                let attempt = q.ticket(0).unwrap().attempt;
                let (op, plan) = q
                    .after_attempt(0, attempt, AttemptOutcome::NotMet, now, 0)
                    .unwrap();
                if let Op::Poke { due_ms, .. } = op {
                    assert_eq!(due_ms, (now + 30).min(200), "capped at the deadline");
                    assert_eq!(plan, Plan::Wait(due_ms - now));
                    assert_eq!(q.step(&op), Applied::Requeued(0));
                    let t = q.ticket(0).unwrap();
                    assert_eq!((t.attempts(), t.tries.failures), (0, 0));
                    assert_eq!(t.tries.pokes, checks);
                    assert_eq!(q.running_len(), 0, "nothing runs between checks");
                    assert_eq!(q.peek_pending("p", due_ms - 1).map(|t| t.id), None);
                    now = due_ms;
                    continue;
                }
                assert_eq!(op, Op::Complete { id: 0, terminal });
                assert_eq!(plan, Plan::Stop(Stop::SensorTimedOut));
                assert_eq!(now, 200, "the last check is at the deadline");
                assert_eq!(checks, 5, "checks at 100, 130, 160, 190, 200");
                break;
            }
        }
        let mut q = QueueState::new();
        let _ = q.step(&Op::Enqueue(job("plain", "p", 0)));
        let _ = q.step(&select("p", 0));
        let (op, _) = q
            .after_attempt(0, 1, AttemptOutcome::NotMet, 10, 0)
            .unwrap();
        assert_eq!(
            op,
            Op::Requeue {
                id: 0,
                due_ms: 1_010
            }
        );
    }

    /// A hand-out ahead of its instant (selected as at its instant) that
    /// ends before it never ran: pending again at the instant, a deferral
    /// and no failure, whether a report, a lost worker or a crash ended
    /// it. At or after the instant it counts as any attempt does.
    #[test]
    fn a_hand_out_ahead_that_ends_before_its_instant_spends_no_attempt() {
        let mut q = QueueState::new();
        let mut once = job("once", "p", 100);
        once.policy = RetryPolicy::once();
        let _ = q.step(&Op::Enqueue(once));
        let _ = q.step(&Op::Enqueue(job("b", "p", 100)));
        assert_eq!(q.step(&select("p", 100)), Applied::Selected(0));
        assert_eq!(q.step(&select("p", 100)), Applied::Selected(1));
        // A cancelled wait reported at 40: back to pending at 100.
        assert_eq!(
            q.after_attempt(0, 1, AttemptOutcome::Retryable, 40, 0),
            Some((Op::Defer { id: 0, due_ms: 100 }, Plan::Wait(60)))
        );
        // A crash found at 60 (reopen before the instant): the same.
        let ops: Vec<Op> = q.orphans(60, || 0).into_iter().map(|(op, _)| op).collect();
        assert_eq!(
            ops,
            vec![
                Op::Defer { id: 0, due_ms: 100 },
                Op::Defer { id: 1, due_ms: 100 }
            ]
        );
        // Given back due now (a pool with no slot): pending at its instant
        // all the same.
        assert_eq!(
            q.step(&Op::Defer { id: 0, due_ms: 60 }),
            Applied::Requeued(0)
        );
        assert_eq!(q.step(&ops[1]), Applied::Requeued(1));
        let t = q.ticket(0).unwrap();
        assert_eq!((t.tries.failures, t.tries.deferrals), (0, 1));
        assert_eq!(t.place, Place::Pending { due_ms: 100 });
        // Selected again; found by a crash at its instant, it may have run:
        // the one attempt is spent.
        assert_eq!(q.step(&select("p", 100)), Applied::Selected(0));
        let ops: Vec<Op> = q.orphans(100, || 0).into_iter().map(|(op, _)| op).collect();
        assert_eq!(
            ops,
            vec![Op::Complete {
                id: 0,
                terminal: Terminal::Failed
            }]
        );
    }

    #[test]
    fn orphans_are_requeued_as_failures() {
        let mut q = QueueState::new();
        let mut once = job("once", "p", 0);
        once.policy = RetryPolicy::once();
        let _ = q.step(&Op::Enqueue(job("a", "p", 0)));
        let _ = q.step(&Op::Enqueue(once));
        let _ = q.step(&Op::Enqueue(job("c", "p", 0)));
        let _ = q.step(&select("p", 0));
        let _ = q.step(&select("p", 0));
        // Started or not: the hand-out was durable, the outcome unknown.
        assert_eq!(
            q.step(&Op::Start { id: 0, attempt: 1 }),
            Applied::Started(0)
        );
        let ops: Vec<Op> = q.orphans(50, || 0).into_iter().map(|(op, _)| op).collect();
        assert_eq!(
            ops,
            vec![
                Op::Requeue {
                    id: 0,
                    due_ms: 1_050
                },
                Op::Complete {
                    id: 1,
                    terminal: Terminal::Failed
                }
            ]
        );
    }

    /// A task that kills its process at once, with three attempts: each
    /// crash costs one, the attempt number it sees grows each time, and
    /// the ticket fails after the third.
    #[test]
    fn a_task_that_kills_its_process_runs_at_most_attempts_max_times() {
        let mut q = QueueState::new();
        let mut j = job("a", "p", 0);
        j.policy.attempts_max = 3;
        let _ = q.step(&Op::Enqueue(j));
        let mut seen = Vec::new();
        for crash in 0..10u64 {
            // Past any backoff (1 s, then 2 s).
            match q.step(&select("p", 10_000 * crash)) {
                Applied::Selected(0) => {}
                other => panic!("crash {crash}: {other:?}"),
            }
            seen.push(q.ticket(0).unwrap().attempts());
            let orphans = q.orphans(10_000 * crash + 1, || 0);
            assert_eq!(orphans.len(), 1, "crash {crash}");
            let (op, _) = &orphans[0];
            if let Op::Complete { terminal, .. } = op {
                assert_eq!(*terminal, Terminal::Failed);
                let _ = q.step(op);
                break;
            }
            assert_eq!(q.step(op), Applied::Requeued(0), "crash {crash}");
        }
        assert_eq!(seen, vec![1, 2, 3], "attempt numbers the task saw");
        assert!(q.ticket(0).is_none(), "failed after its third attempt");
    }

    /// A start of another hand-out changes nothing; journals written
    /// before orphans counted (an `Orphaned` op) still replay.
    #[test]
    fn stale_starts_and_old_orphaned_ops() {
        let mut q = QueueState::new();
        let _ = q.step(&Op::Enqueue(job("a", "p", 0)));
        let _ = q.step(&select("p", 0));
        assert_eq!(
            q.step(&Op::Orphaned { id: 0, due_ms: 0 }),
            Applied::Requeued(0)
        );
        assert_eq!(q.ticket(0).unwrap().tries.unstarted_orphans, 1);
        assert_eq!(q.ticket(0).unwrap().attempts(), 0);
        let _ = q.step(&select("p", 0));
        assert_eq!(
            q.step(&Op::Start { id: 0, attempt: 1 }),
            Applied::Ignored(Ignored::Superseded(0))
        );
        assert_eq!(
            q.step(&Op::Start { id: 0, attempt: 2 }),
            Applied::Started(0)
        );
        assert_eq!(q.ticket(0).unwrap().tries.unstarted_orphans, 0);
        assert_eq!(
            q.step(&Op::Start { id: 9, attempt: 1 }),
            Applied::Ignored(Ignored::Unknown(9))
        );
    }

    #[test]
    fn leases_expire_in_order() {
        let mut q = QueueState::new();
        for k in ["a", "b", "c"] {
            let _ = q.step(&Op::Enqueue(job(k, "p", 0)));
        }
        for now in [0, 10, 20] {
            let _ = q.step(&select("p", now));
        }
        assert_eq!(q.next_lease_end_ms(), Some(1_000));
        assert_eq!(q.expired_leases(1_010), vec![0, 1]);
        let _ = q.step(&Op::Extend {
            id: 0,
            lease_until_ms: 5_000,
        });
        assert_eq!(q.expired_leases(1_010), vec![1]);
    }

    #[test]
    fn restore_rejects_corrupt_snapshots() {
        let mut q = QueueState::new();
        let _ = q.step(&Op::Enqueue(job("a", "p", 0)));
        let t = q.ticket(0).unwrap().clone();
        assert!(QueueState::restore(0, [t.clone()]).is_err());
        assert!(QueueState::restore(5, [t.clone(), t.clone()]).is_err());
        let mut other = t.clone();
        other.id = 1;
        assert!(QueueState::restore(5, [t.clone(), other]).is_err());
        assert_eq!(QueueState::restore(1, [t]).unwrap(), q);
    }

    /// Ops over a small space of keys, pools and ids, so that sequences hit
    /// duplicates, stale ids and empty pools often.
    fn arb_op() -> impl Strategy<Value = Op> {
        let pool = prop::sample::select(vec!["p0", "p1", "p2"]);
        let id = 0u64..24;
        prop_oneof![
            4 => ("[a-h]", pool.clone(), 0u64..100).prop_map(|(k, p, due)| Op::Enqueue(job(&k, p, due))),
            4 => (pool, 0u64..120, 0u64..200).prop_map(|(p, now, lease)| Op::Select {
                pool: p.into(), now_ms: now, worker: "w".into(), lease_until_ms: now + lease
            }),
            2 => (id.clone(), any::<bool>()).prop_map(|(id, ok)| Op::Complete {
                id, terminal: if ok { Terminal::Succeeded } else { Terminal::Failed }
            }),
            1 => id.clone().prop_map(|id| Op::Cancel { id }),
            2 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Op::Requeue { id, due_ms }),
            1 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Op::Defer { id, due_ms }),
            1 => (id.clone(), 0u64..150).prop_map(|(id, due_ms)| Op::Poke { id, due_ms }),
            1 => (id.clone(), 0u64..300).prop_map(|(id, l)| Op::Extend { id, lease_until_ms: l }),
            1 => (id.clone(), 0u32..4).prop_map(|(id, attempt)| Op::Start { id, attempt }),
            1 => (id, 0u64..150).prop_map(|(id, due_ms)| Op::Orphaned { id, due_ms }),
        ]
    }

    proptest! {
        /// Replaying the journal (each op through the codec) from any
        /// snapshot point gives the state the live run reached, and the
        /// invariants hold after every op.
        #[test]
        fn replay_equals_live(ops in prop::collection::vec(arb_op(), 0..120), cut in 0usize..120) {
            let mut live = QueueState::new();
            let mut journal = Vec::new();
            let mut snapshot = None;
            for (i, op) in ops.iter().enumerate() {
                if i == cut {
                    snapshot = Some((live.next_id(), live.tickets().cloned().collect::<Vec<_>>(), journal.len()));
                }
                let _ = live.step(op);
                live.assert_invariants();
                journal.push(crate::codec::encode(op).unwrap());
            }
            let (next_id, tickets, from) = snapshot.unwrap_or((0, Vec::new(), 0));
            let mut replayed = QueueState::restore(next_id, tickets).unwrap();
            for bytes in &journal[from..] {
                let op: Op = crate::codec::decode(bytes).unwrap();
                let _ = replayed.step(&op);
            }
            prop_assert_eq!(replayed, live);
        }

        /// A key is live at most once, and every enqueue of a live key
        /// names the ticket that holds it.
        #[test]
        fn a_live_key_is_enqueued_once(ops in prop::collection::vec(arb_op(), 0..200)) {
            let mut q = QueueState::new();
            for op in &ops {
                let before = if let Op::Enqueue(j) = op { q.by_key(&j.key).map(|t| t.id) } else { None };
                let applied = q.step(op);
                if let Some(id) = before {
                    prop_assert_eq!(applied, Applied::Duplicate(id));
                }
                let mut seen = std::collections::HashSet::new();
                for t in q.tickets() {
                    prop_assert!(seen.insert(t.job.key.clone()), "key {:?} live twice", t.job.key);
                }
            }
        }

        /// Select never takes a ticket before it is due, and always takes the
        /// lowest (due, id) of its pool.
        #[test]
        fn select_takes_the_lowest_due(ops in prop::collection::vec(arb_op(), 0..200)) {
            let mut q = QueueState::new();
            for op in &ops {
                let lowest = if let Op::Select { pool, now_ms, .. } = op {
                    q.tickets()
                        .filter(|t| &t.job.pool == pool)
                        .filter_map(|t| match t.place { Place::Pending { due_ms } if due_ms <= *now_ms => Some((due_ms, t.id)), _ => None })
                        .min()
                } else { None };
                let applied = q.step(op);
                if let Op::Select { .. } = op {
                    match lowest {
                        Some((_, id)) => prop_assert_eq!(applied, Applied::Selected(id)),
                        None => prop_assert_eq!(applied, Applied::NoneDue),
                    }
                }
            }
        }
    }

    #[test]
    fn higher_priority_first_then_fifo() {
        let mut q = QueueState::new();
        for (key, prio) in [("a", 0), ("b", 5), ("c", -1), ("d", 5), ("e", 0)] {
            let _ = q.step(&Op::Enqueue(job(key, "p", 0).with_priority(prio)));
        }
        // A higher priority that is not due does not hold the others back.
        let _ = q.step(&Op::Enqueue(job("late", "p", 50).with_priority(9)));
        assert_eq!(q.peek_pending("p", 0).map(|t| &*t.job.key), Some("b"));
        let mut order = Vec::new();
        while let Applied::Selected(id) = q.step(&select("p", 10)) {
            order.push(q.ticket(id).unwrap().job.key.to_string());
        }
        assert_eq!(order, ["b", "d", "a", "e", "c"]);
        assert_eq!(q.next_due_ms("p"), Some(50));
        // A requeued ticket goes back at its priority.
        let b = q.by_key("b").unwrap().id;
        let _ = q.step(&Op::Requeue { id: b, due_ms: 20 });
        let late = q.by_key("late").unwrap().id;
        assert_eq!(q.step(&select("p", 60)), Applied::Selected(late));
        assert_eq!(q.step(&select("p", 60)), Applied::Selected(b));
        q.assert_invariants();
    }

    #[test]
    fn a_job_journaled_before_priorities_reads_priority_zero() {
        /// A job as weir wrote it before `priority` existed.
        #[derive(Serialize)]
        struct OldJob<'a> {
            key: &'a str,
            task: &'a str,
            pool: &'a str,
            due_ms: u64,
        }
        let bytes = crate::codec::encode(&Op::Enqueue(job("k", "p", 3))).unwrap();
        assert!(
            !bytes.windows(8).any(|w| w == b"priority"),
            "priority 0 stays out of the encoding"
        );
        #[derive(Serialize)]
        enum OldOp<'a> {
            Enqueue(OldJob<'a>),
        }
        let old = crate::codec::encode(&OldOp::Enqueue(OldJob {
            key: "k",
            task: "t",
            pool: "p",
            due_ms: 3,
        }))
        .unwrap();
        let Op::Enqueue(j) = crate::codec::decode::<Op>(&old).unwrap() else {
            panic!("an enqueue");
        };
        assert_eq!(j.priority, 0);
        let high = crate::codec::encode(&Op::Enqueue(job("k", "p", 3).with_priority(-7))).unwrap();
        let Op::Enqueue(j) = crate::codec::decode::<Op>(&high).unwrap() else {
            panic!("an enqueue");
        };
        assert_eq!(j.priority, -7);
    }
}
