//! Reports of attempts: a report applies only while its attempt is the
//! ticket's running one (a resent report applies once, a superseded one
//! is refused); the retry policy decides between a retry and the end; a
//! breaker's deferral puts the ticket back with no attempt spent.

use std::sync::Arc;

use weir_core::queue::{Op, Place, Terminal, TicketId};
use weir_core::retry::{Plan, Stop};

use crate::events::EngineEvent;
use crate::msg::work::{DeferCause, Report};
use crate::records::asset::{asset_event_key, AssetEvent};
use crate::records::done::{DoneRecord, DoneStatus};
use crate::records::keys::done_key;

use super::state::{human_ms, Effect, Output, QueueActorState};

impl QueueActorState {
    pub(super) fn report(&mut self, r: Report) {
        self.awaiting_reports = self.awaiting_reports.saturating_sub(1);
        if r.regrant > 0 {
            if let Some(w) = self.workers.get_mut(&r.worker_id) {
                w.credit += u64::from(r.regrant);
                let list = self.by_pool.entry(w.pool.clone()).or_default();
                if !list.contains(&r.worker_id) {
                    list.push(r.worker_id.clone());
                }
            } else {
                // Its next registration gives the queue its free slots
                // again; until then they are missing.
                tracing::warn!(worker = %r.worker_id, slots = r.regrant, id = r.id, "slots granted back by a worker the queue does not know are dropped");
            }
        }
        let now = self.clock.now_ms();
        // A grant handed out ahead started at its instant, before this
        // report: its Started event goes out first, whichever timer fired
        // first.
        self.send_due_starts(now);
        self.open
            .effects
            .push(Effect::Ack(r.worker_id.clone(), vec![(r.id, r.attempt)]));
        let draw = rand::Rng::gen(&mut self.rng);
        let Some((op, plan)) = self.q.after_attempt_waiting(
            r.id,
            r.attempt,
            r.outcome,
            now,
            draw,
            r.retry_after_ms.unwrap_or(0),
        ) else {
            // Idempotent by (ticket, attempt): a resent report of an attempt
            // already applied, or one of an attempt superseded since (its
            // worker was lost, the ticket requeued, cancelled or ended),
            // changes nothing. It is acknowledged so its worker forgets it.
            tracing::warn!(id = r.id, attempt = r.attempt, worker = %r.worker_id, "report refused: its attempt is not the ticket's running one (superseded, or applied already)");
            let _ = self.events.send(EngineEvent::ReportRefused {
                worker: r.worker_id.to_string(),
                id: r.id,
                attempt: r.attempt,
            });
            return;
        };
        let error = r.error.clone().unwrap_or_default();
        let output = if r.output.len() > self.settings.output_bytes_max {
            r.output[..self.settings.output_bytes_max].to_vec()
        } else {
            r.output
        };
        let output = match r.output_blob {
            Some(blob) => Output::Blob(blob, r.artifacts),
            None => Output::Inline(output, r.artifacts),
        };
        self.apply_attempt_end(op, plan, Some(output), error, now, Some(r.started_ms));
    }

    /// Applies the Complete or Requeue that ends an attempt.
    pub(super) fn apply_attempt_end(
        &mut self,
        op: Op,
        plan: Plan,
        output: Option<Output>,
        error: String,
        now: u64,
        started_ms: Option<u64>,
    ) {
        let Some(t) = op.ticket_id().and_then(|id| self.q.ticket(id)) else {
            return;
        };
        let (id, attempts, tries, job) = (t.id, t.attempts(), t.tries, t.job.clone());
        let worker = match &t.place {
            weir_core::queue::Place::Running { worker, .. } => {
                Some(crate::records::done::worker_shown(worker))
            }
            _ => None,
        };
        match op {
            Op::Complete { terminal, .. } => {
                let _ = self.step(op);
                let status = match terminal {
                    Terminal::Succeeded => DoneStatus::Succeeded,
                    Terminal::Failed => DoneStatus::Failed,
                    Terminal::Skipped => DoneStatus::Skipped,
                };
                let failures = tries.failures + u32::from(status == DoneStatus::Failed);
                let (output, output_blob, artifacts) = match output {
                    Some(Output::Inline(bytes, arts)) if status == DoneStatus::Succeeded => {
                        (bytes, None, arts)
                    }
                    Some(Output::Blob(blob, arts)) if status == DoneStatus::Succeeded => {
                        (Vec::new(), Some(blob), arts)
                    }
                    _ => (Vec::new(), None, Vec::new()),
                };
                tracing::debug!(key = %job.key, id, attempts, deferrals = tries.deferrals, status = %status, plan = ?plan, "ticket completed");
                let record = DoneRecord {
                    id,
                    key: job.key.to_string(),
                    task: job.task.to_string(),
                    pool: job.pool.to_string(),
                    status,
                    attempts,
                    deferrals: tries.deferrals,
                    failures,
                    error: match (status, plan) {
                        (DoneStatus::Failed, Plan::Stop(Stop::SensorTimedOut)) => Some(format!(
                            "sensor not met within {}: {error}",
                            human_ms(job.sensor.as_ref().map_or(0, |s| s.timeout_ms))
                        )),
                        (DoneStatus::Failed, _) => Some(error),
                        (DoneStatus::Skipped, _) => Some(format!(
                            "sensor not met within {}, skipped: {error}",
                            human_ms(job.sensor.as_ref().map_or(0, |s| s.timeout_ms))
                        )),
                        _ => None,
                    },
                    output,
                    output_blob,
                    first_due_ms: tries.first_due_ms,
                    started_ms: started_ms.or_else(|| self.started.get(&id).copied()),
                    finished_ms: now,
                    pokes: tries.pokes,
                    members: None,
                    worker,
                    artifacts,
                };
                self.started.remove(&id);
                if status == DoneStatus::Failed {
                    self.record_dead(&job, &record);
                }
                if status == DoneStatus::Succeeded && !job.produces.is_empty() {
                    // The materializations go in the same atomic batch as
                    // the record: a success is never without its events.
                    for asset in &job.produces {
                        let event = AssetEvent {
                            asset: asset.to_string(),
                            key: job.key.to_string(),
                            at_ms: now,
                        };
                        match self.store.encode("asset event", &event) {
                            Ok(bytes) => self
                                .open
                                .commit
                                .puts
                                .push((asset_event_key(asset, &job.key), bytes)),
                            Err(e) => panic!("asset event of {:?} does not encode: {e}", job.key),
                        }
                    }
                    tracing::info!(key = %job.key, assets = ?job.produces, "assets materialized");
                }
                if let Some(blob) = &record.output_blob {
                    // The blob is durable already (the worker wrote it
                    // before it reported); its references go in the same
                    // atomic batch as the record.
                    match self.store.blob_index_puts(&done_key(&job.key), blob) {
                        Ok(puts) => self.open.commit.puts.extend(puts),
                        Err(e) => panic!("blob reference of {:?} does not encode: {e}", job.key),
                    }
                }
                self.record_done(&job, record);
            }
            Op::Requeue { due_ms, .. } => {
                let _ = self.step(op);
                self.started.remove(&id);
                // The event numbers attempts that ran, not hand-outs.
                // Debug formatting keeps a multi-line error (its output
                // tails) on one log line.
                tracing::info!(key = %job.key, id, attempt = attempts, due_ms, error = ?error, "attempt failed; ticket requeued");
                self.open.effects.push(Effect::Event(EngineEvent::Retrying {
                    key: job.key.clone(),
                    id,
                    attempt: attempts,
                    due_ms,
                    error,
                }));
            }
            Op::Poke { due_ms, .. } => {
                let _ = self.step(op);
                self.started.remove(&id);
                self.last_checks
                    .insert(id, crate::msg::queue::LastCheck::new(now, &error));
                tracing::info!(key = %job.key, id, due_ms, seen = %error, "sensor not met; checks again without a slot");
                self.open.effects.push(Effect::Event(EngineEvent::Poked {
                    key: job.key.clone(),
                    id,
                    due_ms,
                    seen: error,
                }));
            }
            Op::Defer { due_ms, .. } => {
                // Handed out ahead of its instant, ended before it: the
                // task never ran.
                let _ = self.step(op);
                self.started.remove(&id);
                tracing::info!(key = %job.key, id, due_ms, seen = %error, "ticket handed out ahead ended before its instant; pending again, no attempt spent");
            }
            other => {
                unreachable!("an attempt ends in Complete, Requeue, Poke or Defer, not {other:?}")
            }
        }
    }

    pub(super) fn defer(
        &mut self,
        worker_id: Arc<str>,
        id: TicketId,
        attempt: u32,
        until_ms: u64,
        cause: DeferCause,
    ) {
        self.awaiting_reports = self.awaiting_reports.saturating_sub(1);
        self.open
            .effects
            .push(Effect::Ack(worker_id.clone(), vec![(id, attempt)]));
        let Some(t) = self.q.ticket(id) else { return };
        if t.attempt != attempt || !matches!(t.place, Place::Running { .. }) {
            return;
        }
        let key = t.job.key.clone();
        // The attempt never ran: no failure is counted, so the retry policy
        // spends nothing. The attempt number stays (the next grant gets a
        // new one), so a late report of this grant is told from it.
        // weir-core keeps a grant handed out ahead pending until its
        // instant (a pool with no slot gives it back due now).
        let _ = self.step(Op::Defer {
            id,
            due_ms: until_ms,
        });
        self.started.remove(&id);
        match cause {
            DeferCause::Breaker => {
                tracing::info!(key = %key, id, until_ms, "ticket deferred by its breaker")
            }
            DeferCause::NoSlot => {
                tracing::info!(key = %key, id, worker = %worker_id, "ticket given back: the worker had no free slot")
            }
        }
        self.open.effects.push(Effect::Event(EngineEvent::Deferred {
            key,
            id,
            until_ms,
            cause,
        }));
    }
}
