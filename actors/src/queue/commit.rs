//! The commit pipeline: at most one batch is made durable at a time, on a
//! blocking thread (`crate::blocking`), while the next one fills; a batch waits a little for
//! the reports of what it handed out (linger) and for the downstreams of
//! its successes (early notices), so one flush serves them all. Once
//! durable, its effects run in order; snapshots bound replay. The timer is
//! armed here for the next instant anything falls due.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorProcessingErr, ActorRef};
use weir_core::queue::TicketId;

use crate::msg::pool::PoolMsg;
use crate::msg::queue::QueueMsg;
use crate::msg::work::Grant;
use crate::notify;
use crate::store::StoreCold;

use super::state::{cold_failed, Effect, QueueActorState};

impl QueueActorState {
    /// Starts making the open batch durable, unless a batch is in flight.
    pub(super) fn start_flush(&mut self, myself: &ActorRef<QueueMsg>) {
        if self.in_flight.is_some() || self.open.is_empty() {
            return;
        }
        // Linger: hold the open batch while reports of the tickets just
        // handed out are still due, up to the linger's end or the batch cap.
        if let Some(until) = self.linger_until {
            let waiting = self.awaiting_reports > 0
                && self.open.commit.ops.len() < self.settings.batch_ops_linger_max
                && tokio::time::Instant::now() < until;
            if waiting {
                return;
            }
            self.linger_until = None;
        }
        // Hold it while schedulers told early of successes in it have not
        // answered, up to the wait's end or the batch cap: their answers
        // enqueue the downstreams into it.
        if !self.awaiting_successors.is_empty() {
            if let Some(until) = self.successors_until {
                let now = tokio::time::Instant::now();
                if now < until && self.open.commit.ops.len() < self.settings.batch_ops_linger_max {
                    if !self.successors_timer {
                        self.successors_timer = true;
                        myself.send_after(until - now, || QueueMsg::FlushNow);
                    }
                    return;
                }
            }
        }
        // Answers that come after this point enqueue into the next batch.
        self.awaiting_successors.clear();
        self.successors_until = None;
        let batch = std::mem::take(&mut self.open);
        self.shared.begin(&batch.effects);
        self.in_flight = Some(batch.effects);
        self.in_flight_completing = std::mem::take(&mut self.open_completing);
        let store = self.store.clone();
        let me = myself.clone();
        let commit = batch.commit;
        // Taken here, not in the task, so that a kill after this handler
        // cannot let the next incarnation replay before this write lands.
        // Nothing else of this incarnation writes while a batch is in
        // flight, and pre_start waited for the earlier ones.
        let gate = self
            .shared
            .gate
            .clone()
            .try_lock_owned()
            .expect("no other journal write runs while a batch is in flight");
        let shared = self.shared.clone();
        let write = move || {
            let t0 = std::time::Instant::now();
            let written = store.commit(&commit).map(|_| ());
            crate::measure::commit(commit.ops.len(), t0.elapsed());
            if written.is_ok() {
                shared.landed();
            }
            drop(gate);
            written
        };
        if crate::blocking::is_inline() {
            // A simulation's write runs on its one thread, at the task's
            // first poll.
            tokio::spawn(async move {
                let result = crate::blocking::run(write)
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|r| r.map_err(|e| e.to_string()));
                let _ = me.cast(QueueMsg::Flushed(result));
            });
            return;
        }
        // The blocking thread sends the answer itself: a task awaiting it
        // in between cost two more thread wake-ups a commit (the task's,
        // then the queue's), each 20-40 µs on an idle core of this VM.
        tokio::task::spawn_blocking(move || {
            let result = caught("commit", write);
            let _ = me.cast(QueueMsg::Flushed(result));
        });
    }

    /// Makes the open batch durable now, waiting for it (and for any batch
    /// in flight first, so order holds).
    pub(super) async fn flush_inline(&mut self) -> Result<(), ActorProcessingErr> {
        // Called only with no batch in flight, so effects run in batch order.
        debug_assert!(
            self.in_flight.is_none(),
            "inline flush with a batch in flight"
        );
        let batch = std::mem::take(&mut self.open);
        let completing = std::mem::take(&mut self.open_completing);
        let store = self.store.clone();
        let commit = batch.commit;
        let gate = self.shared.gate.clone().lock_owned().await;
        self.shared.begin(&batch.effects);
        let shared = self.shared.clone();
        crate::blocking::run(move || {
            let t0 = std::time::Instant::now();
            let written = store.commit(&commit);
            crate::measure::commit(commit.ops.len(), t0.elapsed());
            if written.is_ok() {
                shared.landed();
            }
            drop(gate);
            written
        })
        .await??;
        self.batches += 1;
        self.publish_counts();
        self.run_effects(batch.effects);
        self.shared.finish();
        for key in completing {
            self.done_completing(&key);
        }
        self.publish_counts();
        Ok(())
    }

    /// Starts a snapshot when one is due and none is being written, with
    /// no batch in flight: the open batch is made durable first, so the
    /// snapshot is taken between batches.
    pub(super) async fn snapshot_if_due(
        &mut self,
        myself: &ActorRef<QueueMsg>,
    ) -> Result<(), ActorProcessingErr> {
        if !self.store.snapshot_due() || self.snapshot_writing.is_some() || self.in_flight.is_some()
        {
            return Ok(());
        }
        self.flush_inline().await?;
        if crate::blocking::is_inline() {
            // A simulation's snapshot runs in its one thread.
            self.snapshot().await
        } else {
            self.begin_snapshot(myself);
            Ok(())
        }
    }

    /// Writes a snapshot of the queue now and waits for it (a stop, a
    /// simulation); see [`QueueActorState::begin_snapshot`] for the one
    /// written while the queue goes on.
    pub(super) async fn snapshot(&mut self) -> Result<(), ActorProcessingErr> {
        let seq = self.store.last_seq();
        let taken = self.take_snapshot();
        let (n, tickets) = (taken.changed.len(), taken.tickets);
        let store = self.store.clone();
        let gate = self.shared.gate.clone().lock_owned().await;
        crate::blocking::run(move || {
            let written = store.write_snapshot(
                seq,
                taken.next_id,
                taken.tickets,
                taken.changed.iter().map(|(id, t)| (*id, t.as_ref())),
            );
            drop(gate);
            written
        })
        .await??;
        self.q.snapshot_taken();
        // The store holds every ticket as it is now (`dirty` is empty).
        let evicted = self.evict_unchanged();
        tracing::info!(seq, changed = n, tickets, evicted, "queue snapshot written");
        Ok(())
    }

    /// What a snapshot taken now holds: every ticket changed since the
    /// last (`dirty`, emptied), as it is now.
    fn take_snapshot(&mut self) -> TakenSnapshot {
        TakenSnapshot {
            changed: self
                .dirty
                .drain()
                .map(|id| (id, self.q.ticket(id).cloned()))
                .collect(),
            next_id: self.q.next_id(),
            tickets: self.q.len() as u64,
        }
    }

    /// After a snapshot landed: the pending tickets past each level's
    /// window that did not change since it was taken (not in `dirty`) may
    /// live in the store only. Returns how many left memory.
    fn evict_unchanged(&mut self) -> usize {
        let window = self.store.settings().window_tickets;
        let dirty = &self.dirty;
        let evicted = self.q.evict_holding(window, |id| dirty.contains(&id));
        if evicted > 0 {
            let cold = StoreCold::new(&self.store);
            if let Err(e) = self.q.refill(&cold, window) {
                cold_failed(&e);
            }
        }
        evicted
    }

    /// Takes a snapshot of the queue now (no batch in flight, none open)
    /// and writes it on a blocking thread while the queue goes on: a
    /// snapshot of a backlog takes tens of ms, which every hand-out used
    /// to wait for (`bench drain`: 14-54 ms every 20,000 ops). The
    /// tickets changed from here on stay in `dirty`, for the next one; the
    /// answer, [`QueueMsg::SnapshotWritten`], evicts what it covers.
    pub(super) fn begin_snapshot(&mut self, myself: &ActorRef<QueueMsg>) {
        debug_assert!(
            self.in_flight.is_none() && self.open.is_empty(),
            "a snapshot is taken between batches"
        );
        let point = self.store.snapshot_point();
        let taken = self.take_snapshot();
        let n = taken.changed.len();
        let gone = self.q.snapshot_begun();
        let gate = self
            .shared
            .snapshot_gate
            .clone()
            .try_lock_owned()
            .expect("one snapshot is written at a time");
        let store = self.store.clone();
        let me = myself.clone();
        tracing::debug!(seq = point.seq, changed = n, "queue snapshot begun");
        let handle = tokio::task::spawn_blocking(move || {
            let result = caught("snapshot", || {
                store.write_snapshot_at(
                    point,
                    taken.next_id,
                    taken.tickets,
                    taken.changed.iter().map(|(id, t)| (*id, t.as_ref())),
                )
            })
            .map(|_| ());
            drop(gate);
            let _ = me.cast(QueueMsg::SnapshotWritten(result.clone()));
            result
        });
        self.snapshot_writing = Some(super::state::SnapshotWriting {
            gone,
            changed: n,
            handle,
        });
    }

    /// The snapshot begun has landed: what it covers of the journal is
    /// gone, and the pending tickets past each level's window that did not
    /// change since it was taken may live in the store only.
    pub(super) fn snapshot_written(
        &mut self,
        result: Result<(), String>,
    ) -> Result<(), ActorProcessingErr> {
        let writing = self
            .snapshot_writing
            .take()
            .expect("an answer comes for the snapshot begun");
        result.map_err(|e| format!("the queue's snapshot failed: {e}"))?;
        self.q.snapshot_landed(&writing.gone);
        let evicted = self.evict_unchanged();
        tracing::info!(
            changed = writing.changed,
            tickets = self.q.len(),
            evicted,
            held = self.dirty.len(),
            "queue snapshot written"
        );
        Ok(())
    }

    pub(super) fn run_effects(&mut self, effects: Vec<Effect>) {
        let mut acks: HashMap<Arc<str>, Vec<(TicketId, u32)>> = HashMap::new();
        // The batch's grants, per pool actor in their order, sent as one
        // message each: before any cancel (which may name one of them), and
        // at the end.
        let mut grants: Vec<(ActorRef<PoolMsg>, Vec<Grant>)> = Vec::new();
        for effect in effects {
            match effect {
                Effect::Enqueued(reply, answers) => {
                    let _ = reply.send(answers);
                }
                Effect::Cancelled(reply, answer) => {
                    let _ = reply.send(answer);
                }
                Effect::TicketView(key, reply) => match self.ticket_view(&key) {
                    Ok(view) => {
                        let _ = reply.send(view);
                    }
                    // The caller's call fails: no answer is better than a
                    // wrong "unknown".
                    Err(e) => tracing::error!(key = %key, error = %e, "ticket view failed"),
                },
                Effect::CancelledMany(reply, answers) => {
                    let _ = reply.send(answers);
                }
                Effect::Withdrawn(reply, answers) => {
                    let _ = reply.send(Ok(answers));
                }
                Effect::RequeuedDead(reply, answer) => {
                    let _ = reply.send(answer);
                }
                Effect::Unexpire(entries) => {
                    // The records are gone (deleted by the batch that just
                    // landed) and no later batch can have written them yet,
                    // so this removes only the stale entries. Not synced: a
                    // crash keeps them, and they delete the next records of
                    // the key early, which loses nothing live.
                    let key = &entries[0].key;
                    if let Err(e) =
                        self.store
                            .compare_and_put_unsynced(key, None, None, &[], &entries)
                    {
                        tracing::warn!(key = %key, error = %e, "stale expiry entries not removed");
                    }
                }
                Effect::Dispatch(worker, grant) => {
                    match grants
                        .iter_mut()
                        .find(|(w, _)| w.get_id() == worker.get_id())
                    {
                        Some((_, list)) => list.push(grant),
                        None => grants.push((worker, vec![grant])),
                    }
                }
                Effect::Ack(worker, ids) => acks.entry(worker).or_default().extend(ids),
                Effect::CancelRunning(worker, id) => {
                    self.send_grants(&mut grants);
                    if let Some(w) = self.workers.get(&worker) {
                        let _ = w.actor.cast(PoolMsg::Cancel(id));
                    }
                }
                Effect::Notify(name, completion) => {
                    notify::completion(&self.names, &name, completion)
                }
                Effect::Presubmitted(name, key, answers) => {
                    notify::presubmitted(&self.names, &name, key, answers)
                }
                Effect::Event(e) => {
                    let _ = self.events.send(e);
                }
                Effect::StartedAt(id, attempt, at_ms, e) => self.start_at(id, attempt, at_ms, e),
            }
        }
        self.send_grants(&mut grants);
        for (worker, ids) in acks {
            if let Some(w) = self.workers.get(&worker) {
                let _ = w.actor.cast(PoolMsg::Acked(ids));
            }
        }
    }

    /// Sends each pool actor its grants, one message per pool.
    fn send_grants(&mut self, grants: &mut Vec<(ActorRef<PoolMsg>, Vec<Grant>)>) {
        let now = self.clock.now_ms();
        for (worker, mut list) in grants.drain(..) {
            // A grant handed out ahead whose batch lands while paused is
            // called back as `call_back_ahead` calls back those already at
            // their pool: its cancel follows it to the same pool, in order.
            let call_back: Vec<TicketId> = if self.paused {
                list.iter()
                    .filter(|g| g.not_before_ms.is_some_and(|at| at > now))
                    .map(|g| g.id)
                    .collect()
            } else {
                Vec::new()
            };
            let n = list.len();
            let msg = if n == 1 {
                PoolMsg::Run(list.pop().expect("one grant"))
            } else {
                PoolMsg::RunMany(list)
            };
            if worker.cast(msg).is_ok() {
                self.awaiting_reports += n;
            }
            for id in call_back {
                let _ = worker.cast(PoolMsg::Cancel(id));
            }
        }
    }

    /// Arms the timer for the earliest due instant of a pool with credit or
    /// the earliest lease end.
    pub(super) fn rearm(&mut self, myself: &ActorRef<QueueMsg>) {
        if self.settings.warm_ahead_ms > 0 {
            let now = self.clock.now_ms();
            let until = now.saturating_add(self.settings.warm_ahead_ms);
            match self.q.warm(
                &StoreCold::new(&self.store),
                now,
                until,
                self.store.settings().window_tickets,
                self.settings.warm_tickets_max,
            ) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::debug!(tickets = n, until_ms = until, "tickets due soon read ahead")
                }
                Err(e) => cold_failed(&e),
            }
        }
        let mut wake: Option<u64> = self.q.next_lease_end_ms();
        if !self.paused {
            for (pool, list) in &self.by_pool {
                if !list
                    .iter()
                    .any(|w| self.workers.get(w).is_some_and(|w| w.credit > 0))
                {
                    continue;
                }
                if let Some(due) = self.q.next_due_ms(pool) {
                    // A pool of this process with a slot free is handed
                    // the ticket ahead.
                    let ahead = list
                        .iter()
                        .any(|w| self.workers.get(w).is_some_and(|w| w.takes(true)))
                        && self.may_go_ahead(pool, due);
                    let at = if ahead {
                        due.saturating_sub(self.settings.hand_out_ahead_ms)
                    } else {
                        due
                    };
                    wake = Some(wake.map_or(at, |w| w.min(at)));
                }
            }
        }
        if let Some(at) = self.next_start_ms() {
            wake = Some(wake.map_or(at, |w| w.min(at)));
        }
        match wake {
            None => {
                if let Some((_, t)) = self.timer.take() {
                    t.abort();
                }
            }
            Some(at) => {
                if self.timer.as_ref().is_some_and(|(t, _)| *t == at) {
                    return;
                }
                if let Some((_, t)) = self.timer.take() {
                    t.abort();
                }
                let now = self.clock.now_ms();
                let delay = Duration::from_millis(at.saturating_sub(now).max(1));
                let handle = myself.send_after(delay, || QueueMsg::Tick);
                self.timer = Some((at, handle));
            }
        }
    }
}

/// A snapshot's content, taken from the queue at one point.
struct TakenSnapshot {
    changed: Vec<(TicketId, Option<weir_core::queue::Ticket>)>,
    next_id: TicketId,
    tickets: u64,
}

/// Runs `write` (a journal or snapshot write, on a blocking thread); a
/// panic in it is an error naming `what`, as its failure is.
fn caught<T, E: std::fmt::Display>(
    what: &str,
    write: impl FnOnce() -> Result<T, E>,
) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(write))
        .map_err(|p| {
            format!(
                "the {what} panicked: {}",
                crate::store::panics::message(&*p).unwrap_or_default()
            )
        })
        .and_then(|r| r.map_err(|e| e.to_string()))
}
