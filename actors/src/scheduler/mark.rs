//! An operator's mark (Airflow's "mark success" / "mark failed"): a node's
//! outcome set by hand.
//!
//! A live instance of the node is cancelled first (durably, through the
//! queue), so its outcome, when it comes, is of a superseded count and
//! changes nothing. The mark is then written as the node's record at the
//! right count: the count after its current record, or after the cancelled
//! (or just ended) instance; the count it expects when no instance exists.
//! Its decided downstreams (skipped, upstream-failed) are decided again
//! from the new outcome, as a rerun alone does ([`rerun_scope_alone`]);
//! downstreams that ran keep their records. The run record then takes the
//! new expected counts and the run's new state in one compare-and-put: a
//! settled run becomes active again only if a node can now run, else it
//! stays settled in the state its records now give (a failed run whose
//! failed node is marked succeeded, and whose other nodes succeeded, is
//! complete).
//!
//! Order of effects: the cancel, then the mark's record (durable), then the
//! run record, then the decided downstreams' records and the submits of
//! ready ones. A crash after the mark's record leaves a current record
//! the run record does not expect yet; the reconciler of an active run
//! takes it as the node's outcome.

use ractor::ActorRef;
use weir_core::partition::Partition;
use weir_core::readiness::{rerun_scope_alone, NodeStatus, RunOutcome};

use crate::events::EngineEvent;
use crate::msg::queue::{Cancelled, QueueMsg};
use crate::msg::scheduler::MarkResult;
use crate::records::done::DoneRecord;
use crate::records::graph::{done_status, RunState};
use crate::records::keys::{done_key, run_id, run_key};
use crate::store::Expiring;

use super::settings::QUEUE_CALL_MS;
use super::state::{Res, SchedulerState};

impl SchedulerState {
    pub(super) async fn mark(
        &mut self,
        partition: &Partition,
        node: &str,
        status: NodeStatus,
    ) -> Res<MarkResult> {
        debug_assert!(matches!(status, NodeStatus::Succeeded | NodeStatus::Failed));
        let p = self.load_for_change(partition)?;
        let result = self.mark_loaded(&p, node, status).await;
        self.unload_if_settled(&p);
        result
    }

    async fn mark_loaded(&mut self, p: &str, node: &str, status: NodeStatus) -> Res<MarkResult> {
        let graph_name = self.graph.to_string();
        let run = self.runs.get(p).expect("loaded");
        let idx = run
            .graph
            .index_of(node)
            .ok_or_else(|| format!("graph {graph_name} has no node {node:?}"))?;
        let graph = run.graph.clone();
        let partition = run.partition.clone();
        let expected = run.expected(idx);
        let recorded = run.recorded[idx];
        if let Some(r) = recorded {
            if run.tracker.state(idx).status() == Some(status) {
                return Ok(MarkResult::Unchanged {
                    run_id: run_id(&graph_name, &partition, node, r),
                    status: done_status(status),
                });
            }
        }
        // The count the mark is recorded at, past any instance that ran or
        // runs.
        let (count, cancelled) = match recorded {
            Some(r) => (r + 1, None),
            None if graph.node_at(idx).map.is_some() => {
                // A mapped node: its live members are cancelled, and the
                // mark goes past their generation.
                let run = self.runs.get(p).expect("loaded");
                if self.has_members(run, idx)? {
                    let n = self.cancel_members(run, idx).await?;
                    let id = run_id(&graph_name, &partition, node, expected);
                    (expected + 1, (n > 0).then_some(id))
                } else {
                    (expected, None)
                }
            }
            None => {
                let id = run_id(&graph_name, &partition, node, expected);
                let queue = ActorRef::<QueueMsg>::where_is(self.names.queue())
                    .ok_or("the queue is not running")?;
                let c = ractor::call_t!(queue, QueueMsg::Cancel, QUEUE_CALL_MS, id.clone())
                    .map_err(|e| format!("cancel of {id}: {e}"))?;
                match c {
                    Cancelled::Cancelled(_) => (expected + 1, Some(id)),
                    // Ended just now; its notice is still on its way.
                    Cancelled::AlreadyDone => (expected + 1, None),
                    Cancelled::Unknown => (expected, None),
                }
            }
        };
        let run = self.runs.get(p).expect("loaded");
        let scope = rerun_scope_alone(&graph, idx, run.tracker.states());
        let mut record = run.record.clone();
        let mut superseded = Vec::new();
        if let Some(r) = recorded {
            superseded.push(run_id(&graph_name, &partition, node, r));
        }
        record
            .expected_reruns
            .insert(graph.node_at(idx).name.clone(), count);
        for &s in scope.iter().filter(|&&s| s != idx) {
            if let Some(r) = run.recorded[s] {
                let name = graph.node_at(s).name.clone();
                superseded.push(run_id(&graph_name, &partition, name.as_str(), r));
                record.expected_reruns.insert(name, r + 1);
            }
        }
        let mut tracker = run.tracker.clone();
        let changes = tracker.mark(&graph, idx, status, &scope);
        let now = self.clock.now_ms();
        let old_state = record.state;
        let new_state = match tracker.outcome() {
            None => RunState::Active,
            Some(RunOutcome::Complete) => RunState::Complete,
            Some(RunOutcome::Failed) => RunState::Failed,
        };
        let key = run_key(&graph_name, &partition);
        let unexpiring: Vec<Expiring> = record.expiry(&key).into_iter().collect();
        let was_settled = !unexpiring.is_empty();
        record.state = new_state;
        record.settled_at_ms = (new_state != RunState::Active).then_some(now);
        let expiring: Vec<Expiring> = record.expiry(&key).into_iter().collect();

        // The mark's record, durable before the run record expects it.
        let mark_id = run_id(&graph_name, &partition, node, count);
        let def = graph.node_at(idx);
        let done = DoneRecord {
            id: 0,
            key: mark_id.clone(),
            task: def.task.task.to_string(),
            pool: def.pool.to_string(),
            status: done_status(status),
            attempts: 0,
            deferrals: 0,
            failures: 0,
            error: (status == NodeStatus::Failed).then(|| "marked failed by an operator".into()),
            output: Vec::new(),
            output_blob: None,
            first_due_ms: now,
            started_ms: None,
            finished_ms: now,
            pokes: 0,
            members: None,
            worker: None,
            artifacts: Vec::new(),
        };
        let done_bytes = self.store.encode("node record", &done)?;
        let run_bytes = self.store.encode("run record", &record)?;
        let store = self.store.clone();
        let old_bytes = run.bytes.clone();
        let (dk, rk, rb) = (done_key(&mark_id), key.clone(), run_bytes.clone());
        let written = crate::blocking::run(move || {
            store.put_batch(&[(dk, done_bytes)], &[])?;
            store.compare_and_put(&rk, Some(&old_bytes), Some(&rb), &expiring, &unexpiring)
        })
        .await??;
        if !written {
            return Err(format!(
                "the run of graph {graph_name} for partition {p} changed during the mark; try again"
            )
            .into());
        }
        let run = self.runs.get_mut(p).expect("loaded");
        run.record = record;
        run.bytes = run_bytes;
        run.tracker = tracker;
        run.recorded[idx] = Some(count);
        run.submitted.remove(&idx);
        run.maps.remove(&idx);
        for &s in scope.iter().filter(|&&s| s != idx) {
            if run.recorded[s].is_some() {
                run.recorded[s] = None;
                run.submitted.remove(&s);
            }
        }
        tracing::info!(
            graph = %graph_name,
            partition = p,
            node,
            rerun = count,
            status = %done_status(status),
            cancelled = ?cancelled,
            run_state = %new_state,
            "node marked by an operator"
        );
        let _ = self.events.send(EngineEvent::NodeChanged {
            graph: graph_name.clone(),
            partition: p.to_string(),
            node: node.to_string(),
            rerun: count,
            state: done_status(status).to_string(),
        });
        self.apply_changes(p, changes).await?;
        self.drop_dead_letters(superseded).await?;
        // A mark may finish the past later partitions wait on.
        self.release_past(p).await?;
        if new_state == RunState::Active {
            if was_settled {
                let _ = self.events.send(EngineEvent::RunStarted {
                    graph: graph_name.clone(),
                    partition: p.to_string(),
                });
            }
        } else if old_state != new_state {
            tracing::info!(graph = %graph_name, partition = p, state = %new_state, "graph run settled");
            // Right after the mark's write (a refused mark notifies
            // nothing).
            if let Some(run) = self.runs.get(p) {
                let record = run.record.clone();
                let states: Vec<_> = (0..run.graph.len()).map(|i| run.tracker.state(i)).collect();
                self.notify_settled(p, &record, &states).await;
            }
            let _ = self.events.send(EngineEvent::RunSettled {
                graph: graph_name.clone(),
                partition: p.to_string(),
                state: new_state.to_string(),
            });
        }
        Ok(MarkResult::Marked {
            run_id: mark_id,
            status: done_status(status),
            cancelled,
            run_state: new_state,
        })
    }
}
