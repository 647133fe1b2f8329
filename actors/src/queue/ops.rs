//! The ops callers ask of the queue: enqueue (a known key is a no-op),
//! cancel, cancel many (a mapped node's members), and withdraw (all or
//! nothing: only tickets not handed out). Each applies at once to the
//! state and joins the open batch; its answer is an effect of that batch,
//! sent once durable.

use ractor::RpcReplyPort;
use weir_core::queue::{Applied, Job, Op, Place};

use crate::events::EngineEvent;
use crate::msg::queue::{Cancelled, Enqueued};
use crate::records::done::{DoneRecord, DoneStatus};
use crate::records::keys::done_key;
use crate::store::StoreCold;

use super::state::{cold_failed, Effect, QueueActorState};

impl QueueActorState {
    pub(super) fn enqueue(
        &mut self,
        jobs: Vec<Job>,
        reply: RpcReplyPort<Vec<Result<Enqueued, String>>>,
    ) {
        let answers = self.enqueue_answers(jobs);
        self.open.effects.push(Effect::Enqueued(reply, answers));
    }

    /// Enqueues `jobs` into the open batch (none past the per-call limit);
    /// one answer each, in order.
    pub(super) fn enqueue_answers(&mut self, jobs: Vec<Job>) -> Vec<Result<Enqueued, String>> {
        if jobs.len() > self.settings.enqueue_batch_max {
            let err = format!(
                "enqueue of {} jobs is over the limit of {} per call",
                jobs.len(),
                self.settings.enqueue_batch_max
            );
            return jobs.iter().map(|_| Err(err.clone())).collect();
        }
        jobs.into_iter().map(|job| self.enqueue_one(job)).collect()
    }

    /// Reads the ticket of `key` in from the store when only the store
    /// holds it, so `by_key` finds it.
    pub(super) fn fault_in_key(&mut self, key: &str) {
        if let Err(e) = self.q.fault_in_key(key, &StoreCold::new(&self.store)) {
            cold_failed(&e);
        }
    }

    pub(super) fn enqueue_one(&mut self, job: Job) -> Result<Enqueued, String> {
        self.fault_in_key(&job.key);
        if let Some(t) = self.q.by_key(&job.key) {
            return Ok(Enqueued::Live(t.id));
        }
        if self.completing.contains_key(&job.key) {
            return Ok(Enqueued::Done);
        }
        if self
            .store
            .contains(&done_key(&job.key))
            .map_err(|e| e.to_string())?
        {
            return Ok(Enqueued::Done);
        }
        let op = Op::Enqueue(job);
        self.store.check_op(&op).map_err(|e| e.to_string())?;
        let Op::Enqueue(job) = &op else {
            unreachable!()
        };
        let (key, pool) = (job.key.clone(), job.pool.clone());
        match self.step_prepared(op) {
            Applied::Enqueued(id) => {
                tracing::debug!(key = %key, id, pool = %pool, "ticket enqueued");
                self.open
                    .effects
                    .push(Effect::Event(EngineEvent::Enqueued { key, id, pool }));
                Ok(Enqueued::New(id))
            }
            other => Err(format!("enqueue of key {key:?} applied as {other:?}")),
        }
    }

    pub(super) fn cancel(&mut self, key: &str, reply: RpcReplyPort<Cancelled>) {
        let answer = self.cancel_one(key);
        self.open.effects.push(Effect::Cancelled(reply, answer));
    }

    pub(super) fn cancel_many(&mut self, keys: Vec<String>, reply: RpcReplyPort<Vec<Cancelled>>) {
        let answers = keys.iter().map(|k| self.cancel_one(k)).collect();
        self.open
            .effects
            .push(Effect::CancelledMany(reply, answers));
    }

    /// See [`QueueMsg::Withdraw`]: the check and the cancels are one
    /// handler, so no hand-out falls between them.
    pub(super) fn withdraw(
        &mut self,
        keys: Vec<String>,
        reply: RpcReplyPort<Result<Vec<Cancelled>, String>>,
    ) {
        for key in &keys {
            self.fault_in_key(key);
            let started = self
                .q
                .by_key(key)
                .is_some_and(|t| !matches!(t.place, Place::Pending { .. }));
            if started || self.completing.contains_key(key.as_str()) {
                tracing::debug!(key = %key, "withdraw refused: the ticket was handed out");
                let _ = reply.send(Err(key.clone()));
                return;
            }
        }
        let answers = keys.iter().map(|k| self.cancel_one(k)).collect();
        self.open.effects.push(Effect::Withdrawn(reply, answers));
    }

    pub(super) fn cancel_one(&mut self, key: &str) -> Cancelled {
        self.fault_in_key(key);
        match self
            .q
            .by_key(key)
            .map(|t| (t.id, t.place.clone(), t.attempts(), t.tries, t.job.clone()))
        {
            Some((id, place, attempts, tries, job)) => {
                let now = self.clock.now_ms();
                let _ = self.step(Op::Cancel { id });
                if let Place::Running { worker, .. } = &place {
                    self.open
                        .effects
                        .push(Effect::CancelRunning(worker.clone(), id));
                }
                let record = DoneRecord {
                    id,
                    key: job.key.to_string(),
                    task: job.task.to_string(),
                    pool: job.pool.to_string(),
                    status: DoneStatus::Cancelled,
                    attempts,
                    deferrals: tries.deferrals,
                    failures: tries.failures,
                    error: None,
                    output: Vec::new(),
                    output_blob: None,
                    first_due_ms: tries.first_due_ms,
                    // A grant cancelled while it waited for its instant
                    // never started.
                    started_ms: self.started.remove(&id).filter(|s| *s <= now),
                    finished_ms: now,
                    pokes: tries.pokes,
                    members: None,
                    artifacts: Vec::new(),
                    worker: match &place {
                        Place::Running { worker, .. } => {
                            Some(crate::records::done::worker_shown(worker))
                        }
                        Place::Pending { .. } => None,
                    },
                };
                self.record_done(&job, record);
                tracing::info!(key, id, "ticket cancelled");
                Cancelled::Cancelled(id)
            }
            None => {
                if self.completing.contains_key(key)
                    || self.store.contains(&done_key(key)).unwrap_or(false)
                {
                    Cancelled::AlreadyDone
                } else {
                    Cancelled::Unknown
                }
            }
        }
    }
}
