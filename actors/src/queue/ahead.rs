//! Hand-outs ahead of their instant: a ticket due within
//! `hand_out_ahead_ms` goes to a pool of this process that has a slot free
//! once nothing is due now; its grant names the instant and the pool starts
//! the task no earlier. Its Started event waits here for the instant, so
//! that those who watch events see the start when it happens.

use weir_core::queue::{Place, TicketId};

use crate::events::EngineEvent;
use crate::msg::pool::PoolMsg;

use super::state::QueueActorState;

impl QueueActorState {
    /// Keeps a durable grant's Started event until its instant (sends it
    /// now when the instant has come).
    pub(super) fn start_at(&mut self, id: TicketId, attempt: u32, at_ms: u64, event: EngineEvent) {
        if at_ms <= self.clock.now_ms() {
            let _ = self.events.send(event);
            return;
        }
        self.starts_ahead.insert((at_ms, id), (attempt, event));
    }

    /// Sends the Started events whose instant has come, of grants that are
    /// still their ticket's running hand-out: one cancelled, or ended
    /// before its instant, never started, and its event is dropped here
    /// (kept at most until its instant, so the map holds no more than the
    /// grants within the horizon).
    pub(super) fn send_due_starts(&mut self, now_ms: u64) {
        while let Some(entry) = self.starts_ahead.first_entry() {
            if entry.key().0 > now_ms {
                return;
            }
            let ((_, id), (attempt, event)) = entry.remove_entry();
            let current = self
                .q
                .ticket(id)
                .is_some_and(|t| t.attempt == attempt && matches!(t.place, Place::Running { .. }));
            if current {
                let _ = self.events.send(event);
            }
        }
    }

    /// A pause (or a stop, which pauses first) calls back the grants still
    /// waiting for their instant: nothing starts while paused, and a
    /// stopping engine leaves no grant to start after it (a leader that
    /// steps down would otherwise start one its successor also runs). Each
    /// ends unstarted and comes back as a deferral to its instant.
    pub(super) fn call_back_ahead(&mut self) {
        let now = self.clock.now_ms();
        let waiting: Vec<(TicketId, std::sync::Arc<str>)> = self
            .q
            .tickets()
            .filter_map(|t| match &t.place {
                Place::Running { worker, due_ms, .. } if *due_ms > now => {
                    Some((t.id, worker.clone()))
                }
                _ => None,
            })
            .collect();
        for (id, worker) in &waiting {
            if let Some(w) = self.workers.get(worker) {
                let _ = w.actor.cast(PoolMsg::Cancel(*id));
            }
        }
        if !waiting.is_empty() {
            tracing::info!(
                grants = waiting.len(),
                "grants waiting for their instant called back"
            );
        }
    }

    /// Whether the ticket `pool` would hand out at `due_ms` may go ahead of
    /// its instant: only a first hand-out (a prepared run's ticket, a job
    /// enqueued due later), and not one with a target.
    ///
    /// - A hand-out lost with its process counts as an attempt once its
    ///   instant has passed (the task may have started), so going ahead
    ///   widens that window by up to `hand_out_ahead_ms`; a retry already
    ///   spent attempts and waits for its backoff at the queue instead.
    /// - A target's breaker is asked as the grant reaches its pool: one
    ///   open until a time still within the horizon would defer the ticket
    ///   there over and over.
    pub(super) fn may_go_ahead(&self, pool: &str, due_ms: u64) -> bool {
        self.q
            .peek_pending(pool, due_ms)
            .is_some_and(|t| t.attempt == 0 && t.job.target.is_none())
    }

    /// The earliest instant a kept Started event waits for.
    pub(super) fn next_start_ms(&self) -> Option<u64> {
        self.starts_ahead.keys().next().map(|(at, _)| *at)
    }
}
