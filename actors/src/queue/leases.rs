//! Leases and loss: a worker that died has its running tickets requeued
//! as failed attempts; a lease that ran out does the same; after a queue
//! restart a live worker says what it holds, and a ticket it does not hold
//! was never handed over (pending again, no attempt spent).

use std::collections::HashSet;
use std::sync::Arc;

use weir_core::queue::{Op, Place, TicketId};
use weir_core::retry::AttemptOutcome;

use super::state::{Effect, QueueActorState};

impl QueueActorState {
    pub(super) fn holding(&mut self, worker_id: &Arc<str>, held: Vec<TicketId>) {
        let held: HashSet<TicketId> = held.into_iter().collect();
        let lost: Vec<TicketId> = self
            .q
            .tickets()
            .filter(|t| {
                matches!(&t.place, Place::Running { worker, .. } if worker == worker_id)
                    && !held.contains(&t.id)
                    // Granted by this incarnation: the worker may not have
                    // had it yet when it listed what it holds.
                    && !self.started.contains_key(&t.id)
            })
            .map(|t| t.id)
            .collect();
        if lost.is_empty() {
            return;
        }
        tracing::warn!(worker = %worker_id, lost = lost.len(), "grants lost with a queue incarnation; tickets pending again");
        let now = self.clock.now_ms();
        for id in lost {
            // weir-core keeps a grant handed out ahead pending until its
            // instant.
            let _ = self.step(Op::Defer { id, due_ms: now });
            self.started.remove(&id);
        }
    }

    pub(super) fn worker_gone(&mut self, worker_id: &Arc<str>) {
        if let Some(w) = self.workers.remove(worker_id) {
            if let Some(list) = self.by_pool.get_mut(&w.pool) {
                list.retain(|x| x != worker_id);
            }
        }
        let now = self.clock.now_ms();
        let theirs: Vec<(TicketId, u32)> = self
            .q
            .tickets()
            .filter(|t| matches!(&t.place, Place::Running { worker, .. } if worker == worker_id))
            .map(|t| (t.id, t.attempt))
            .collect();
        tracing::warn!(worker = %worker_id, running = theirs.len(), "worker gone; requeueing its attempts");
        // Their reports will never come: stop waiting for them.
        self.awaiting_reports = self.awaiting_reports.saturating_sub(theirs.len());
        for (id, attempt) in theirs {
            let draw = rand::Rng::gen(&mut self.rng);
            if let Some((op, plan)) =
                self.q
                    .after_attempt(id, attempt, AttemptOutcome::Retryable, now, draw)
            {
                self.apply_attempt_end(
                    op,
                    plan,
                    None,
                    format!("worker {worker_id} died during the attempt"),
                    now,
                    None,
                );
            }
        }
    }

    pub(super) fn expire_leases(&mut self) {
        let now = self.clock.now_ms();
        for id in self.q.expired_leases(now) {
            let Some(t) = self.q.ticket(id) else { continue };
            let (attempt, worker) = match &t.place {
                Place::Running { worker, .. } => (t.attempt, worker.clone()),
                Place::Pending { .. } => continue,
            };
            let draw = rand::Rng::gen(&mut self.rng);
            if let Some((op, plan)) =
                self.q
                    .after_attempt(id, attempt, AttemptOutcome::Timeout, now, draw)
            {
                tracing::warn!(id, attempt, worker = %worker, "lease expired");
                self.open.effects.push(Effect::CancelRunning(worker, id));
                self.apply_attempt_end(
                    op,
                    plan,
                    None,
                    "the attempt's lease expired".into(),
                    now,
                    None,
                );
            }
        }
    }
}
