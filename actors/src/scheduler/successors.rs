//! Early notices: a node's success in the queue's open batch, told before it
//! is durable, so the downstreams it makes ready join the same batch (one
//! durable commit per edge). The answers come back before the durable
//! notice; the record, the decisions and the settle still wait for it.

use std::sync::Arc;

use ractor::ActorRef;
use weir_core::queue::Job;
use weir_core::readiness::NodeStatus;

use crate::msg::queue::{EarlyCompletion, Enqueued, QueueMsg};
use crate::records::done::DoneStatus;
use crate::records::graph::UpstreamRecord;

use super::state::{NodeIds, Res, SchedulerState};

impl SchedulerState {
    /// Answers the queue's early notice of a success: the downstreams it
    /// makes ready ([`RunTracker::ready_after`]; not mapped ones, whose
    /// members go through a top-up) are enqueued into the batch that holds
    /// the success, with its output as their input. Nothing is recorded,
    /// decided or settled here: that follows the durable notice, which
    /// finds these submitted. A failure here only costs the saving: the
    /// durable notice submits what this did not.
    pub(super) fn presubmit(&mut self, e: EarlyCompletion) {
        let ahead = match self.successors_of(&e) {
            Ok(ahead) => ahead,
            Err(err) => {
                tracing::warn!(key = %e.key, error = %err, "downstreams not submitted ahead of their upstream's record");
                None
            }
        };
        let Some((p, jobs, ids)) = ahead else {
            self.no_successors(e.key);
            return;
        };
        let Some(queue) = ActorRef::<QueueMsg>::where_is(self.names.queue()) else {
            return;
        };
        let notify: Arc<str> = Arc::from(self.names.scheduler(self.graph.as_str()));
        tracing::debug!(key = %e.key, jobs = jobs.len(), "downstreams submitted ahead of their upstream's record");
        if queue
            .cast(QueueMsg::Successors(e.key.clone(), jobs, notify))
            .is_ok()
        {
            self.presubmits.insert(e.key, (p, ids));
        }
    }

    /// Answers an early notice of `key` with nothing to submit, so the
    /// queue's batch need not wait for it.
    pub(super) fn no_successors(&self, key: Arc<str>) {
        if let Some(queue) = ActorRef::<QueueMsg>::where_is(self.names.queue()) {
            let _ = queue.cast(QueueMsg::NoSuccessors(key));
        }
    }

    /// Takes the durable answers of a submit ahead: its nodes are
    /// submitted. One that failed is submitted again, and its error
    /// reported, by the success's notice (which comes after).
    pub(super) fn presubmitted(&mut self, key: &str, answers: Vec<Result<Enqueued, String>>) {
        let Some((p, ids)) = self.presubmits.remove(key) else {
            return;
        };
        if answers.len() != ids.len() || answers.iter().any(|a| a.is_err()) {
            return;
        }
        if let Err(err) = self.absorb_answers(&p, ids, &mut answers.into_iter()) {
            tracing::debug!(key, error = %err, "answers of downstreams submitted ahead not taken");
        }
    }

    /// The jobs of the downstreams a success makes ready, if any: (run,
    /// jobs, ids).
    pub(super) fn successors_of(
        &self,
        e: &EarlyCompletion,
    ) -> Res<Option<(String, Vec<Job>, NodeIds)>> {
        let Some((id, None)) = crate::records::keys::parse_node_key(&e.key) else {
            return Ok(None);
        };
        let Some(run) = self.runs.get(&id.partition) else {
            return Ok(None);
        };
        let Some(idx) = run.graph.index_of(&id.node) else {
            return Ok(None);
        };
        if id.rerun != run.expected(idx) || run.tracker.state(idx).is_terminal() {
            return Ok(None);
        }
        let ready: Vec<usize> = run
            .tracker
            .ready_after(&run.graph, idx, NodeStatus::Succeeded)
            .into_iter()
            // Nodes that depend on their past go through the gate of the
            // durable notice, not ahead of it.
            .filter(|d| {
                let n = run.graph.node_at(*d);
                !run.submitted.contains(d) && n.map.is_none() && !n.depends_on_past
            })
            .collect();
        if ready.is_empty() {
            return Ok(None);
        }
        // The rest of a large fan-out is submitted by the durable notice.
        let mut ready = ready;
        ready.truncate(self.settings.submit_batch_max);
        let record = UpstreamRecord {
            status: DoneStatus::Succeeded,
            output: e.output.clone(),
            output_blob: e.output_blob.clone(),
            rerun: id.rerun,
            artifacts: e.artifacts.clone(),
        };
        let p = id.partition.to_string();
        let (jobs, ids) = self.build_jobs(&p, &ready, Some((idx, record)))?;
        Ok(Some((p, jobs, ids)))
    }
}
