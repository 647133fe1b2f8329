//! How a ticket ends in the store: its done record (written in the batch
//! that completes it, with its expiry), its dead letter when its tries are
//! spent, and a dead letter requeued as a fresh ticket. A key whose end is
//! not durable yet is "completing": an enqueue of it is a duplicate.

use std::sync::Arc;
use std::time::Duration;

use ractor::RpcReplyPort;
use weir_core::queue::{Applied, Job, Op};

use crate::events::EngineEvent;
use crate::msg::queue::{Completion, EarlyCompletion, Enqueued};
use crate::notify;
use crate::records::done::{DeadRecord, DoneRecord, DoneStatus};
use crate::records::keys::{dead_key, done_key};
use crate::store::Expiring;

use super::state::{Effect, QueueActorState};

impl QueueActorState {
    /// Adds the done record of `job` to the open batch, with its expiry
    /// entry, the event and the notification.
    pub(super) fn record_done(&mut self, job: &Job, mut record: DoneRecord) {
        self.last_checks.remove(&record.id);
        let key = done_key(&job.key);
        match self.store.encode("done record", &record) {
            Ok(bytes) => self.open.commit.puts.push((key.clone(), bytes)),
            Err(e) => {
                // A record of plain strings and numbers always encodes.
                panic!("done record of {:?} does not encode: {e}", job.key);
            }
        }
        let retention = job.retention_ms.unwrap_or(self.settings.retention_ms);
        if retention > 0 {
            self.open.commit.expiring.push(Expiring {
                at_ms: record.finished_ms.saturating_add(retention),
                key,
            });
        }
        *self.completing.entry(job.key.clone()).or_insert(0) += 1;
        self.open_completing.push(job.key.clone());
        let completion = Completion {
            key: job.key.clone(),
            id: record.id,
            status: record.status,
        };
        self.open
            .effects
            .push(Effect::Event(EngineEvent::Completed {
                key: job.key.clone(),
                id: record.id,
                status: record.status,
                attempts: record.attempts,
            }));
        if let Some(notify) = &job.notify {
            if record.status == DoneStatus::Succeeded && self.settings.successors_wait_us > 0 {
                // The record is encoded above: its output moves on.
                let early = EarlyCompletion {
                    key: job.key.clone(),
                    output: std::mem::take(&mut record.output),
                    output_blob: record.output_blob.take(),
                    artifacts: std::mem::take(&mut record.artifacts),
                };
                if notify::completing(&self.names, notify, early) {
                    self.awaiting_successors.insert(job.key.clone());
                    self.successors_until.get_or_insert_with(|| {
                        tokio::time::Instant::now()
                            + Duration::from_micros(self.settings.successors_wait_us)
                    });
                }
            }
            self.open
                .effects
                .push(Effect::Notify(notify.clone(), completion));
        }
    }

    /// Adds the dead letter of `job`, which ended Failed, to the open
    /// batch: the same atomic batch as its Complete and done record, with
    /// the done record's expiry instant.
    pub(super) fn record_dead(&mut self, job: &Job, done: &DoneRecord) {
        let retention = job.retention_ms.unwrap_or(self.settings.retention_ms);
        let expires_at_ms = (retention > 0).then(|| done.finished_ms.saturating_add(retention));
        let mut kept = job.clone();
        if kept.notify.is_some() {
            // A graph node is requeued as a rerun, which builds its input.
            kept.payload = Vec::new();
        }
        let record = DeadRecord {
            job: kept,
            id: done.id,
            attempts: done.attempts,
            failures: done.failures,
            error: done.error.clone(),
            first_due_ms: done.first_due_ms,
            finished_ms: done.finished_ms,
            expires_at_ms,
        };
        let key = dead_key(&job.key);
        match self.store.encode("dead letter", &record) {
            Ok(bytes) => self.open.commit.puts.push((key.clone(), bytes)),
            Err(e) => panic!("dead letter of {:?} does not encode: {e}", job.key),
        }
        if let Some(at_ms) = expires_at_ms {
            self.open.commit.expiring.push(Expiring { at_ms, key });
        }
        tracing::warn!(key = %job.key, id = done.id, attempts = done.attempts, error = ?done.error, "ticket dead-lettered: its tries are spent");
    }

    /// Requeues the dead letter of `key`, a plain job: in one durable batch
    /// its done record and letter are deleted and its job is enqueued again
    /// as a fresh ticket (due now; its tries start over). Replay sees an
    /// ordinary Enqueue. Graph nodes are rerun by their scheduler instead.
    pub(super) fn requeue_dead(
        &mut self,
        key: &str,
        reply: RpcReplyPort<Result<Enqueued, String>>,
    ) {
        let answer = self.requeue_dead_one(key);
        self.open.effects.push(Effect::RequeuedDead(reply, answer));
    }

    pub(super) fn requeue_dead_one(&mut self, key: &str) -> Result<Enqueued, String> {
        self.fault_in_key(key);
        if let Some(t) = self.q.by_key(key) {
            return Ok(Enqueued::Live(t.id));
        }
        let record: DeadRecord = match self.store.get(&dead_key(key)) {
            Ok(Some(r)) => r,
            Ok(None) => return Err(format!("no dead letter has the key {key:?}")),
            Err(e) => return Err(e.to_string()),
        };
        if record.is_graph_node() {
            return Err(format!(
                "dead letter {key:?} is a graph node: it is requeued by a rerun of the node"
            ));
        }
        let mut job = record.job.clone();
        job.due_ms = self.clock.now_ms();
        let op = Op::Enqueue(job);
        self.store.check_op(&op).map_err(|e| e.to_string())?;
        let pool = match &op {
            Op::Enqueue(j) => j.pool.clone(),
            _ => unreachable!(),
        };
        match self.step(op) {
            Applied::Enqueued(id) => {
                // A dead letter's done record is a failure's: it names no
                // blob, so no blob index goes with it.
                self.open.commit.deletes.push(done_key(key));
                self.open.commit.deletes.push(dead_key(key));
                // The expiry entries of the deleted records would delete
                // the next ones of this key early: remove them once the
                // deletes are durable.
                if let Some(at_ms) = record.expires_at_ms {
                    self.open.effects.push(Effect::Unexpire(vec![
                        Expiring {
                            at_ms,
                            key: done_key(key),
                        },
                        Expiring {
                            at_ms,
                            key: dead_key(key),
                        },
                    ]));
                }
                let key: Arc<str> = Arc::from(key);
                tracing::info!(key = %key, id, pool = %pool, "dead letter requeued as a fresh ticket");
                self.open.effects.push(Effect::Event(EngineEvent::Enqueued {
                    key: key.clone(),
                    id,
                    pool,
                }));
                self.open
                    .effects
                    .push(Effect::Event(EngineEvent::DeadRequeued {
                        key: key.to_string(),
                    }));
                Ok(Enqueued::New(id))
            }
            other => Err(format!(
                "requeue of dead letter {key:?} applied as {other:?}"
            )),
        }
    }

    pub(super) fn done_completing(&mut self, key: &Arc<str>) {
        if let Some(n) = self.completing.get_mut(key) {
            *n -= 1;
            if *n == 0 {
                self.completing.remove(key);
            }
        }
    }
}
