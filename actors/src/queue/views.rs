//! What the queue shows of itself: counts published after every batch,
//! its status by pool, a ticket by key (live, or ended: its done record),
//! and the live tickets by state and pool.

use std::collections::BTreeMap;

use ractor::ActorProcessingErr;
use weir_core::queue::Place;

use crate::msg::queue::{
    LiveTicket, PoolStatus, QueueCounts, QueueStatus, TicketFilter, TicketView,
};
use crate::records::done::DoneRecord;
use crate::records::keys::done_key;
use crate::store::StoreCold;

use super::state::QueueActorState;

impl QueueActorState {
    pub(super) fn publish_counts(&self) {
        // A ticket whose Complete or Cancel is applied in memory but not yet
        // durable still counts as live: a waiter that sees `live == 0` must
        // find every done record readable.
        let completing: usize = self.completing.values().map(|&n| n as usize).sum();
        self.counts.send_replace(QueueCounts {
            live: self.q.len() + completing,
            running: self.q.running_len(),
            batches: self.batches,
        });
    }

    pub(super) fn status(&self) -> QueueStatus {
        let now = self.clock.now_ms();
        let mut pools: BTreeMap<String, PoolStatus> = BTreeMap::new();
        for t in self.q.tickets() {
            let p = pools.entry(t.job.pool.to_string()).or_default();
            match t.place {
                Place::Pending { due_ms } => {
                    p.pending += 1;
                    if due_ms <= now {
                        p.due += 1;
                    }
                }
                Place::Running { .. } => p.running += 1,
            }
        }
        // Tickets kept in the store: counted by level; the due ones among
        // them by a walk of the index from each level's window on (keys
        // only), which stops at the first not due.
        if self.q.cold_len() > 0 {
            let cold = StoreCold::new(&self.store);
            for (pool, priority, level) in self.q.cold_levels() {
                let p = pools.entry(pool.to_string()).or_default();
                p.pending += level.remaining as usize;
                let mut after = level.bound;
                'walk: loop {
                    let Ok(entries) =
                        weir_core::cold::ColdTickets::scan(&cold, pool, priority, after, 4_096)
                    else {
                        break;
                    };
                    let Some(&last) = entries.last() else { break };
                    for (due_ms, id) in entries {
                        if due_ms > now {
                            break 'walk;
                        }
                        if self.q.ticket(id).is_none() && !self.q.is_gone(id) {
                            p.due += 1;
                        }
                    }
                    after = Some(last);
                }
            }
        }
        for w in self.workers.values() {
            let p = pools.entry(w.pool.to_string()).or_default();
            p.workers += 1;
            p.credit += w.credit;
        }
        QueueStatus {
            pools,
            live: self.q.len(),
            running: self.q.running_len(),
            in_memory: self.q.hot_len(),
            last_seq: self.store.last_seq(),
        }
    }

    pub(super) fn ticket_view(
        &mut self,
        key: &str,
    ) -> Result<Option<TicketView>, ActorProcessingErr> {
        self.fault_in_key(key);
        if let Some(t) = self.q.by_key(key) {
            let (running, at_ms) = match t.place {
                Place::Pending { due_ms } => (false, due_ms),
                Place::Running { lease_until_ms, .. } => (true, lease_until_ms),
            };
            let worker = match &t.place {
                Place::Running { worker, .. } => Some(crate::records::done::worker_shown(worker)),
                Place::Pending { .. } => None,
            };
            return Ok(Some(TicketView::Live {
                worker,
                started_ms: running.then(|| self.started.get(&t.id).copied()).flatten(),
                id: t.id,
                running,
                attempts: t.attempts(),
                deferrals: t.deferrals(),
                failures: t.tries.failures,
                at_ms,
                pokes: t.tries.pokes,
                last_check: self.last_checks.get(&t.id).cloned(),
            }));
        }
        Ok(self
            .store
            .get::<DoneRecord>(&done_key(key))?
            .map(TicketView::Done))
    }

    /// Live tickets matching `f`, by id (enqueue order), at most
    /// `f.limit`. It walks every live ticket: an operator's view, not a
    /// hot path.
    pub(super) fn list(&self, f: &TicketFilter) -> Vec<LiveTicket> {
        let mut out: Vec<LiveTicket> = self
            .q
            .tickets()
            .filter(|t| f.pool.as_deref().is_none_or(|p| *t.job.pool == *p))
            .filter_map(|t| {
                let (running, at_ms) = match t.place {
                    Place::Pending { due_ms } => (false, due_ms),
                    Place::Running { lease_until_ms, .. } => (true, lease_until_ms),
                };
                f.running.is_none_or(|r| r == running).then(|| LiveTicket {
                    key: t.job.key.to_string(),
                    id: t.id,
                    pool: t.job.pool.to_string(),
                    task: t.job.task.to_string(),
                    target: t.job.target.as_deref().map(str::to_string),
                    running,
                    attempts: t.attempt,
                    failures: t.tries.failures,
                    at_ms,
                })
            })
            .collect();
        if self.q.cold_len() > 0 {
            // Pending tickets kept in the store, in id order, skipping
            // those in memory (their stored copy is stale) and those gone.
            let mut cold: Vec<LiveTicket> = Vec::new();
            let pending_wanted = f.running != Some(true);
            if pending_wanted {
                let result = self.store.for_each_stored_ticket(|t| {
                    if self.q.ticket(t.id).is_some() || self.q.is_gone(t.id) {
                        return Ok(true);
                    }
                    if f.pool.as_deref().is_none_or(|p| *t.job.pool == *p) {
                        let at_ms = match t.place {
                            Place::Pending { due_ms } => due_ms,
                            Place::Running { lease_until_ms, .. } => lease_until_ms,
                        };
                        cold.push(LiveTicket {
                            key: t.job.key.to_string(),
                            id: t.id,
                            pool: t.job.pool.to_string(),
                            task: t.job.task.to_string(),
                            target: t.job.target.as_deref().map(str::to_string),
                            running: false,
                            attempts: t.attempt,
                            failures: t.tries.failures,
                            at_ms,
                        });
                    }
                    Ok(cold.len() < f.limit)
                });
                if let Err(e) = result {
                    tracing::warn!(error = %e, "listing the tickets kept in the store failed");
                }
            }
            out.extend(cold);
        }
        out.sort_by_key(|t| t.id);
        out.truncate(f.limit);
        out
    }
}
