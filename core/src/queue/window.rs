//! The queue's window over the store: while a level `(pool, priority)`
//! holds more pending tickets than memory keeps, the rest stay in the store
//! only (`crate::cold`); these read them in as they are needed (before an
//! op that names one, as the level drains, ahead of a burst's instant) and
//! evict what memory need not keep.

use std::sync::Arc;

use crate::cold::{ColdError, ColdLevel, ColdTickets};

use super::op::Op;
use super::ticket::{Place, Ticket, TicketId};
use super::QueueState;

/// The tickets in the store only: reading them in (see the `cold` module).
impl QueueState {
    /// A queue over a store's snapshot that holds `running` (every
    /// running ticket of the snapshot, read in) and, per level
    /// `(pool, priority, pending)`, that many pending tickets left in the
    /// store. Call [`QueueState::refill`] before the first select.
    pub fn restore_cold(
        next_id: TicketId,
        running: impl IntoIterator<Item = Ticket>,
        levels: impl IntoIterator<Item = (Arc<str>, i32, u64)>,
    ) -> Result<Self, String> {
        let mut state = QueueState::restore(next_id, running)?;
        if let Some(t) = state
            .tickets
            .values()
            .find(|t| !matches!(t.place, Place::Running { .. }))
        {
            return Err(format!(
                "ticket {} of the running index is not running",
                t.id
            ));
        }
        for (pool, priority, remaining) in levels {
            if remaining == 0 {
                continue;
            }
            let level = ColdLevel {
                remaining,
                bound: None,
            };
            if state.cold.insert((pool.clone(), priority), level).is_some() {
                return Err(format!("pool {pool:?} lists priority {priority} twice"));
            }
        }
        Ok(state)
    }

    /// Reads in from `cold` what `op` names and the store holds only: the
    /// ticket of an enqueued key, the ticket of an id. Replay and the live
    /// queue call it before every [`QueueState::step`], so a step finds in
    /// memory every ticket it would change. Reads nothing while no level
    /// is cold.
    pub fn prepare<C: ColdTickets>(
        &mut self,
        op: &Op,
        cold: &C,
    ) -> Result<(), ColdError<C::Error>> {
        if self.cold.is_empty() {
            return Ok(());
        }
        match (op, op.ticket_id()) {
            (Op::Enqueue(job), _) => self.fault_in_key(&job.key, cold),
            (_, Some(id)) => self.fault_in_id(id, cold),
            (_, None) => Ok(()),
        }
    }

    /// Reads in the ticket of `key` when the store holds it only, so
    /// [`QueueState::by_key`] finds it.
    pub fn fault_in_key<C: ColdTickets>(
        &mut self,
        key: &str,
        cold: &C,
    ) -> Result<(), ColdError<C::Error>> {
        if self.cold.is_empty() || self.keys.contains_key(key) {
            return Ok(());
        }
        match cold.key_id(key).map_err(ColdError::Store)? {
            Some(id) => self.fault_in_id(id, cold),
            None => Ok(()),
        }
    }

    /// Reads in ticket `id` when the store holds it only.
    pub fn fault_in_id<C: ColdTickets>(
        &mut self,
        id: TicketId,
        cold: &C,
    ) -> Result<(), ColdError<C::Error>> {
        if self.cold.is_empty()
            || id >= self.next_id
            || self.tickets.contains_key(&id)
            || self.gone.contains(&id)
        {
            return Ok(());
        }
        match cold.ticket(id).map_err(ColdError::Store)? {
            Some(ticket) => self.admit(ticket),
            None => Ok(()),
        }
    }

    /// Reads the next window of every cold level whose tickets in memory
    /// no longer include one at or before its bound, so the first of a
    /// level in memory is its first overall. Replay and the live queue
    /// call it after every step; `window` tickets are read per level at
    /// most.
    pub fn refill<C: ColdTickets>(
        &mut self,
        cold: &C,
        window: usize,
    ) -> Result<(), ColdError<C::Error>> {
        if self.cold.is_empty() {
            return Ok(());
        }
        let window = window.max(1);
        let levels: Vec<(Arc<str>, i32)> = self
            .cold
            .iter()
            .filter(|((pool, priority), level)| {
                let first = self.pending.get(pool).and_then(|o| o.first_of(*priority));
                match (first, level.bound) {
                    (Some(first), Some(bound)) => first > bound,
                    _ => true,
                }
            })
            .map(|(k, _)| k.clone())
            .collect();
        for (pool, priority) in levels {
            self.read_window(&pool, priority, cold, window)?;
        }
        Ok(())
    }

    /// Reads the cold tickets of every level that fall due after `now_ms`
    /// and by `until_ms` into memory (a burst due at one instant soon), a
    /// window at a time, until each level's cold tickets lie past it (the
    /// last window read may hold some due after it) or about `max` tickets
    /// were read in all (a window more at most). A level whose cold
    /// tickets may be due already (its last read ticket is) is left to
    /// [`QueueState::refill`]: a backlog is read as it is handed out, not
    /// ahead. Returns how many were read. Cheap when nothing is cold or
    /// due soon: a look at each cold level's bound.
    pub fn warm<C: ColdTickets>(
        &mut self,
        cold: &C,
        now_ms: u64,
        until_ms: u64,
        window: usize,
        max: usize,
    ) -> Result<usize, ColdError<C::Error>> {
        let soon = |l: &ColdLevel| {
            l.bound
                .is_some_and(|(due, _)| due > now_ms && due <= until_ms)
        };
        let levels: Vec<(Arc<str>, i32)> = self
            .cold
            .iter()
            .filter(|(_, l)| soon(l))
            .map(|(k, _)| k.clone())
            .collect();
        let mut read = 0usize;
        for (pool, priority) in levels {
            let key = (pool.clone(), priority);
            while read < max {
                let Some(level) = self.cold.get(&key).copied().filter(soon) else {
                    break;
                };
                let before = level.remaining;
                self.read_window(&pool, priority, cold, window.max(1).min(max - read))?;
                let after = self.cold.get(&key).map_or(0, |l| l.remaining);
                let n = (before - after) as usize;
                if n == 0 && self.cold.get(&key).copied() == Some(level) {
                    // Nothing moved (cannot happen: a level with tickets
                    // left reads at least one); stop rather than spin.
                    break;
                }
                read += n;
            }
        }
        Ok(read)
    }

    /// Reads every ticket the store holds only into memory (a check of the
    /// whole queue; an operator's tool, not a hot path).
    pub fn read_in_all<C: ColdTickets>(&mut self, cold: &C) -> Result<(), ColdError<C::Error>> {
        let levels: Vec<(Arc<str>, i32)> = self.cold.keys().cloned().collect();
        for (pool, priority) in levels {
            self.read_window(&pool, priority, cold, usize::MAX)?;
        }
        Ok(())
    }

    /// Reads up to `window` cold tickets of a level past its bound.
    fn read_window<C: ColdTickets>(
        &mut self,
        pool: &Arc<str>,
        priority: i32,
        cold: &C,
        window: usize,
    ) -> Result<(), ColdError<C::Error>> {
        let key = (pool.clone(), priority);
        let mut read = 0usize;
        loop {
            let Some(level) = self.cold.get(&key).copied() else {
                return Ok(());
            };
            if read >= window {
                return Ok(());
            }
            let entries = cold
                .scan(pool, priority, level.bound, window)
                .map_err(ColdError::Store)?;
            let Some(&last) = entries.last() else {
                return Err(ColdError::Inconsistent(format!(
                    "pool {pool:?} at priority {priority} counts {} more pending tickets than its index lists",
                    level.remaining
                )));
            };
            for (due_ms, id) in entries {
                if self.tickets.contains_key(&id) || self.gone.contains(&id) {
                    continue;
                }
                let Some(ticket) = cold.ticket(id).map_err(ColdError::Store)? else {
                    return Err(ColdError::Inconsistent(format!(
                        "the pending index of pool {pool:?} names ticket {id}, which is not stored"
                    )));
                };
                if ticket.place != (Place::Pending { due_ms })
                    || ticket.job.priority != priority
                    || ticket.job.pool != *pool
                {
                    return Err(ColdError::Inconsistent(format!(
                        "ticket {id} is indexed pending in pool {pool:?} at priority {priority} due {due_ms}, and stored as {:?} in pool {:?} at priority {}",
                        ticket.place, ticket.job.pool, ticket.job.priority
                    )));
                }
                self.admit(ticket)?;
                read += 1;
                if !self.cold.contains_key(&key) {
                    // The level's last cold ticket: the entries after it
                    // are in memory or gone (and `gone` was just cleared
                    // if no level is cold any more), so stop here.
                    return Ok(());
                }
            }
            if let Some(level) = self.cold.get_mut(&key) {
                level.bound = Some(last);
            }
        }
    }

    /// Takes a stored ticket into memory.
    fn admit<E>(&mut self, ticket: Ticket) -> Result<(), ColdError<E>> {
        let id = ticket.id;
        if id >= self.next_id {
            return Err(ColdError::Inconsistent(format!(
                "stored ticket {id} is at or above the next id {}",
                self.next_id
            )));
        }
        if !matches!(ticket.place, Place::Pending { .. }) {
            return Err(ColdError::Inconsistent(format!(
                "stored ticket {id} is running and not in the running index"
            )));
        }
        let level_key = (ticket.job.pool.clone(), ticket.job.priority);
        let Some(level) = self.cold.get_mut(&level_key) else {
            return Err(ColdError::Inconsistent(format!(
                "stored ticket {id} is pending in pool {:?} at priority {}, which counts none in the store",
                ticket.job.pool, ticket.job.priority
            )));
        };
        if let Some(&other) = self.keys.get(&ticket.job.key) {
            return Err(ColdError::Inconsistent(format!(
                "stored ticket {id} has the key {:?} of live ticket {other}",
                ticket.job.key
            )));
        }
        level.remaining -= 1;
        if level.remaining == 0 {
            self.cold.remove(&level_key);
        }
        self.keys.insert(ticket.job.key.clone(), id);
        self.index(&ticket);
        self.tickets.insert(id, Box::new(ticket));
        if self.cold.is_empty() && !self.snapshot_writing {
            // Nothing is read from the store any more.
            self.gone.clear();
        }
        Ok(())
    }

    /// Leaves in the store only the pending tickets of each level past
    /// its first `keep` in memory, so a backlog costs memory for a window,
    /// not for its size. Call it only right after
    /// [`QueueState::snapshot_taken`]: the store must hold every ticket as
    /// it is now. Returns how many tickets left memory.
    pub fn evict(&mut self, keep: usize) -> usize {
        self.evict_holding(keep, |_| false)
    }

    /// [`QueueState::evict`] after a snapshot that was written while the
    /// queue went on: the store holds every ticket as it was when the
    /// snapshot was taken, so the tickets changed since (`held`) stay in
    /// memory wherever they lie. A held ticket past its level's bound is
    /// what an enqueue after an eviction makes too: refills skip it, and
    /// read the cold ones before it once the level's first in memory lies
    /// past the bound.
    pub fn evict_holding(&mut self, keep: usize, held: impl Fn(TicketId) -> bool) -> usize {
        let keep = keep.max(1);
        let mut evicted = 0;
        let pools: Vec<Arc<str>> = self.pending.keys().cloned().collect();
        for pool in pools {
            let order = self.pending.get_mut(&pool).expect("listed above");
            for priority in order.priorities() {
                let Some((last_kept, moved)) = order.split_level_after(priority, keep) else {
                    continue;
                };
                let mut gone_cold = 0u64;
                for &(due_ms, id) in &moved {
                    if held(id) {
                        order.insert(priority, due_ms, id);
                        continue;
                    }
                    let t = self
                        .tickets
                        .remove(&id)
                        .expect("pending entry names a live ticket");
                    let removed = self.keys.remove(&t.job.key);
                    debug_assert_eq!(removed, Some(id));
                    gone_cold += 1;
                }
                if gone_cold == 0 {
                    continue;
                }
                evicted += gone_cold as usize;
                // Every ticket cold before lies past the old bound, every
                // one moved now past the last kept: the lower of the two
                // bounds them all.
                let level = self
                    .cold
                    .entry((pool.clone(), priority))
                    .or_insert(ColdLevel {
                        remaining: 0,
                        bound: Some(last_kept),
                    });
                level.remaining += gone_cold;
                level.bound = level.bound.map(|b| b.min(last_kept));
            }
        }
        if self.cold.is_empty() && !self.snapshot_writing {
            // Nothing is read from the store: no ended ticket to filter.
            self.gone.clear();
        }
        evicted
    }

    /// A snapshot of this state is taken, to be written while ops go on:
    /// from now on every ticket that ends is remembered (it is in the
    /// store that snapshot makes). Returns the tickets remembered so far,
    /// which that snapshot removes from the store; hand them to
    /// [`QueueState::snapshot_landed`] once it has landed.
    pub fn snapshot_begun(&mut self) -> std::collections::BTreeSet<TicketId> {
        debug_assert!(!self.snapshot_writing, "one snapshot written at a time");
        self.snapshot_writing = true;
        self.gone.clone()
    }

    /// The snapshot begun when the queue's `gone` was `gone_at_taking`
    /// has landed: the tickets that ended before it are out of the store's
    /// index; the ones that ended since are still in it, and stay
    /// remembered while a level is cold. Then call
    /// [`QueueState::evict_holding`] with the tickets changed since.
    pub fn snapshot_landed(&mut self, gone_at_taking: &std::collections::BTreeSet<TicketId>) {
        self.snapshot_writing = false;
        self.gone.retain(|id| !gone_at_taking.contains(id));
    }

    /// Whether a snapshot begun is still being written.
    pub fn snapshot_writing(&self) -> bool {
        self.snapshot_writing
    }

    /// The store has written a snapshot of this state: its index lists
    /// no ticket that left, so none needs remembering.
    pub fn snapshot_taken(&mut self) {
        self.gone.clear();
    }
}
