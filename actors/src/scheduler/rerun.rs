//! Reruns (swale's rerun scope): a node at its next rerun count, with its
//! downstreams or alone, and clearing every failed node of a run; their
//! dead letters are dropped so they do not stay listed as dead.

use weir_core::partition::Partition;
use weir_core::readiness::{rerun_scope, rerun_scope_alone, Change, NodeState};

use crate::events::EngineEvent;
use crate::msg::scheduler::RerunOutcome;
use crate::records::done::DoneRecord;
use crate::records::graph::RunState;
use crate::records::keys::{dead_key, done_key, run_id, run_key};
use crate::store::Expiring;

use super::state::{Res, SchedulerState};

impl SchedulerState {
    pub(super) async fn rerun(
        &mut self,
        partition: &Partition,
        node: &str,
        downstream: bool,
    ) -> Res<RerunOutcome> {
        let p = self.load_for_change(partition)?;
        let result = self.rerun_loaded(&p, node, downstream).await;
        self.unload_if_settled(&p);
        result
    }

    /// Reruns every node of the run whose current record failed, each with
    /// its downstreams, in topological order. A failed node already reset
    /// by the scope of one before it answers as that rerun left it.
    pub(super) async fn clear_failed(
        &mut self,
        partition: &Partition,
    ) -> Res<Vec<(String, RerunOutcome)>> {
        let p = self.load_for_change(partition)?;
        let run = self.runs.get(&p).expect("loaded");
        let failed: Vec<String> = run
            .graph
            .topological_order()
            .iter()
            .filter(|&&i| run.tracker.state(i) == NodeState::Failed)
            .map(|&i| run.graph.node_at(i).name.to_string())
            .collect();
        let mut out = Vec::with_capacity(failed.len());
        let mut result = Ok(());
        for node in failed {
            match self.rerun_loaded(&p, &node, true).await {
                Ok(o) => out.push((node, o)),
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        tracing::info!(graph = %self.graph, partition = %p, failed = out.len(), "failed nodes cleared");
        self.unload_if_settled(&p);
        result.map(|()| out)
    }

    /// Deletes the dead letters of task instances a rerun or a mark
    /// superseded (best effort: a crash before it leaves letters that a
    /// requeue answers as the node's current state).
    pub(super) async fn drop_dead_letters(&self, ids: Vec<String>) -> Res<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        crate::blocking::run(move || {
            let mut dead = Vec::new();
            for id in ids {
                let k = dead_key(&id);
                if store.contains(&k)? {
                    dead.push(k);
                }
            }
            if !dead.is_empty() {
                store.put_batch(&[], &dead)?;
            }
            Ok::<_, crate::store::StoreError>(())
        })
        .await??;
        Ok(())
    }

    pub(super) async fn rerun_loaded(
        &mut self,
        p: &str,
        node: &str,
        downstream: bool,
    ) -> Res<RerunOutcome> {
        let run = self.runs.get(p).expect("loaded");
        let idx = run
            .graph
            .index_of(node)
            .ok_or_else(|| format!("graph {} has no node {node:?}", self.graph))?;
        let Some(rec_rerun) = run.recorded[idx] else {
            // Not recorded at its expected count: active at it, waiting
            // for its upstreams in the scope of another node's rerun (its
            // record at the count before is there), or never run.
            let expected = run.expected(idx);
            let id = run_id(self.graph.as_str(), &run.partition, node, expected);
            if run.submitted.contains(&idx) || run.tracker.state(idx) == NodeState::Ready {
                return Ok(RerunOutcome::Active(id));
            }
            let earlier = match expected.checked_sub(1) {
                Some(r) => {
                    let key = done_key(&run_id(self.graph.as_str(), &run.partition, node, r));
                    self.store.get::<DoneRecord>(&key)?.is_some()
                }
                None => false,
            };
            return Ok(if earlier {
                RerunOutcome::NotReady
            } else {
                RerunOutcome::NoRecord
            });
        };
        let graph = run.graph.clone();
        let scope = if downstream {
            rerun_scope(&graph, idx)
        } else {
            rerun_scope_alone(&graph, idx, run.tracker.states())
        };
        let superseded: Vec<String> = scope
            .iter()
            .filter_map(|&s| {
                run.recorded[s].map(|r| {
                    run_id(
                        self.graph.as_str(),
                        &run.partition,
                        graph.node_at(s).name.as_str(),
                        r,
                    )
                })
            })
            .collect();
        let mut record = run.record.clone();
        let next = rec_rerun + 1;
        for &s in &scope {
            let name = graph.node_at(s).name.clone();
            if s == idx {
                record.expected_reruns.insert(name, next);
            } else if let Some(r) = run.recorded[s] {
                record.expected_reruns.insert(name, r + 1);
            }
        }
        // Check readiness on a copy first: a refused rerun changes nothing.
        let mut tracker = run.tracker.clone();
        let changes = tracker.rerun(&graph, idx, &scope);
        if tracker.state(idx) != NodeState::Ready {
            return Ok(RerunOutcome::NotReady);
        }
        let was_settled = record.settled_at_ms;
        record.state = RunState::Active;
        record.settled_at_ms = None;
        let key = run_key(self.graph.as_str(), &run.partition);
        let bytes = self.store.encode("run record", &record)?;
        let unexpire: Vec<Expiring> = was_settled
            .map(|at| Expiring {
                at_ms: at.saturating_add(record.retention_ms),
                key: key.clone(),
            })
            .into_iter()
            .collect();
        let store = self.store.clone();
        let expected = run.bytes.clone();
        let b = bytes.clone();
        let written = crate::blocking::run(move || {
            store.compare_and_put(&key, Some(&expected), Some(&b), &[], &unexpire)
        })
        .await??;
        if !written {
            return Err(format!(
                "the run of graph {} for partition {p} changed during the rerun; try again",
                self.graph
            )
            .into());
        }
        if was_settled.is_some() {
            let _ = self.events.send(EngineEvent::RunStarted {
                graph: self.graph.to_string(),
                partition: p.to_string(),
            });
        }
        let run = self.runs.get_mut(p).expect("loaded");
        run.record = record;
        run.bytes = bytes;
        run.tracker = tracker;
        let mut superseded_members = Vec::new();
        for &s in &scope {
            if s == idx || run.recorded[s].is_some() {
                if let (Some(r), true) = (run.recorded[s], graph.node_at(s).map.is_some()) {
                    superseded_members.push((graph.node_at(s).name.to_string(), r));
                }
                run.recorded[s] = None;
                run.submitted.remove(&s);
                run.maps.remove(&s);
            }
        }
        tracing::info!(graph = %self.graph, partition = p, node, rerun = next, scope = scope.len(), downstream, "node rerun");
        self.drop_dead_letters(superseded).await?;
        if let Some(run) = self.runs.get(p) {
            for (name, r) in &superseded_members {
                self.drop_member_letters(run, name, *r).await?;
            }
        }
        // Decided nodes in the scope are recorded again at their new
        // counts; the node itself is submitted on its own, for its answer.
        let others: Vec<Change> = changes.into_iter().filter(|c| c.node != idx).collect();
        self.apply_changes(p, others).await?;
        let submitted = self.submit(p, &[idx]).await?;
        let (id, new) = submitted
            .into_iter()
            .next()
            .ok_or("a submit of one node answers once")?;
        Ok(if new {
            RerunOutcome::Submitted(id)
        } else {
            RerunOutcome::Active(id)
        })
    }
}
