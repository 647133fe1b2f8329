//! Dispatch and credit: each worker grants credit (its free slots); the
//! queue hands due tickets, lowest `(due_ms, id)` first, to workers of the
//! ticket's pool that have credit, round robin, each with a lease.

use std::sync::Arc;

use ractor::ActorRef;
use weir_core::queue::{Applied, Op};

use crate::events::EngineEvent;
use crate::msg::pool::PoolMsg;
use crate::msg::work::Grant;

use super::state::{Effect, QueueActorState, Worker};

impl QueueActorState {
    pub(super) fn credit(
        &mut self,
        worker: ActorRef<PoolMsg>,
        worker_id: Arc<str>,
        pool: Arc<str>,
        slots: u32,
        ahead: bool,
    ) {
        let entry = self
            .workers
            .entry(worker_id.clone())
            .or_insert_with(|| Worker {
                actor: worker,
                pool: pool.clone(),
                credit: 0,
                ahead,
            });
        entry.credit += u64::from(slots);
        let list = self.by_pool.entry(pool).or_default();
        if !list.contains(&worker_id) {
            list.push(worker_id);
        }
    }

    /// Hands due tickets to workers with credit, then, to pools of this
    /// process with a slot still free, tickets due within
    /// `hand_out_ahead_ms` (each waits at its pool for its instant).
    pub(super) fn dispatch(&mut self) {
        let now = self.clock.now_ms();
        // Grants handed out before a pause still start at their instant.
        self.send_due_starts(now);
        if self.paused {
            return;
        }
        let horizon = now.saturating_add(self.settings.hand_out_ahead_ms);
        let pools: Vec<Arc<str>> = self.by_pool.keys().cloned().collect();
        for pool in pools {
            while let Some(due) = self.q.next_due_ms(&pool) {
                let worker_id = if due <= now {
                    self.next_worker(&pool)
                } else if due <= horizon && self.may_go_ahead(&pool, due) {
                    self.next_worker_ahead(&pool)
                } else {
                    None
                };
                let Some(worker_id) = worker_id else {
                    break;
                };
                // Ahead: selected as at its instant, which is when its
                // lease starts and its task may.
                let at = now.max(due);
                let actor = self.workers[&worker_id].actor.clone();
                // The lease depends on the ticket's timeout: peek at the
                // ticket select will take.
                let lease_until_ms = at.saturating_add(self.lease_for_next(&pool, at));
                let applied = self.step(Op::Select {
                    pool: pool.clone(),
                    now_ms: at,
                    worker: worker_id.clone(),
                    lease_until_ms,
                });
                let Applied::Selected(id) = applied else {
                    break;
                };
                let w = self
                    .workers
                    .get_mut(&worker_id)
                    .expect("worker with credit exists");
                w.credit -= 1;
                let t = self.q.ticket(id).expect("selected ticket is live");
                let grant = Grant {
                    id,
                    attempt: t.attempt,
                    job: t.job.clone(),
                    lease_until_ms,
                    task_attempt: t.attempts(),
                    not_before_ms: (at > now).then_some(at),
                };
                self.started.insert(id, at);
                tracing::debug!(key = %t.job.key, id, attempt = t.attempt, worker = %worker_id, ahead_ms = at - now, "ticket selected");
                let event = EngineEvent::Started {
                    key: t.job.key.clone(),
                    id,
                    attempt: t.attempt,
                    worker: worker_id.clone(),
                };
                let attempt = t.attempt;
                self.open.effects.push(if at > now {
                    Effect::StartedAt(id, attempt, at, event)
                } else {
                    Effect::Event(event)
                });
                self.open.effects.push(Effect::Dispatch(actor, grant));
            }
        }
    }

    /// The lease of the ticket `pool` would select at `now`.
    pub(super) fn lease_for_next(&self, pool: &str, now: u64) -> u64 {
        // The ticket select takes: the highest due priority, then FIFO.
        let timeout = self
            .q
            .peek_pending(pool, now)
            .and_then(|t| t.job.timeout_ms);
        match timeout {
            Some(ms) => ms.saturating_add(self.settings.lease_grace_ms),
            None => self.settings.lease_ms,
        }
    }

    /// The next worker of `pool` with credit, round robin.
    pub(super) fn next_worker(&mut self, pool: &Arc<str>) -> Option<Arc<str>> {
        self.next_worker_where(pool, false)
    }

    /// The next worker of `pool` with credit that may be handed a ticket
    /// ahead of its instant, round robin.
    pub(super) fn next_worker_ahead(&mut self, pool: &Arc<str>) -> Option<Arc<str>> {
        self.next_worker_where(pool, true)
    }

    fn next_worker_where(&mut self, pool: &Arc<str>, ahead: bool) -> Option<Arc<str>> {
        let list = self.by_pool.get_mut(pool)?;
        for i in 0..list.len() {
            let id = &list[i];
            if self.workers.get(id).is_some_and(|w| w.takes(ahead)) {
                let id = id.clone();
                list.rotate_left(i + 1);
                return Some(id);
            }
        }
        None
    }
}
