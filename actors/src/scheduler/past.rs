//! `depends_on_past` in the scheduler: a node whose past is not done is
//! not submitted; it is held, by the partition it waits for, until a record
//! in that partition's run releases it. Holding is memory only: a restart
//! finds the node ready and unsubmitted, and the reconciler's pass asks the
//! gate again, so nothing starts out of order across a crash.

use std::sync::Arc;

use weir_core::graph::Graph;

use crate::store::StoreError;
use crate::views::past::{load_def, waiting_for};

use super::state::{Res, SchedulerState};

impl SchedulerState {
    /// Of `nodes` of run `p`, those that may be submitted now. The others
    /// depend on a past that is not done: they are held until
    /// [`Self::release_past`] of the partition they wait for.
    pub(super) fn past_gate(&mut self, p: &str, nodes: Vec<usize>) -> Res<Vec<usize>> {
        let Some(run) = self.runs.get(p) else {
            return Ok(nodes);
        };
        if !nodes.iter().any(|&i| run.graph.node_at(i).depends_on_past) {
            return Ok(nodes);
        }
        let (graph, partition) = (run.graph.clone(), run.partition.clone());
        let mut go = Vec::with_capacity(nodes.len());
        for idx in nodes {
            let node = graph.node_at(idx);
            if !node.depends_on_past {
                go.push(idx);
                continue;
            }
            let waits = {
                let defs = &self.defs;
                let store = &self.store;
                let mut from_store = load_def(store);
                let mut load = |hash: &str| -> Result<Option<Arc<Graph>>, StoreError> {
                    match defs.get(hash) {
                        Some(g) => Ok(Some(g.clone())),
                        None => from_store(hash),
                    }
                };
                waiting_for(store, &graph, &partition, node, &mut load)?
            };
            match waits {
                None => go.push(idx),
                Some(prev) => {
                    let prev = prev.to_string();
                    let fresh = self
                        .past_waits
                        .entry(prev.clone())
                        .or_default()
                        .insert((p.to_string(), idx));
                    if fresh {
                        tracing::info!(graph = %self.graph, partition = p, node = %node.name, waits_for = %prev, "node waits for its past (depends_on_past)");
                    }
                }
            }
        }
        Ok(go)
    }

    /// A record in the run of `q` may have finished the past that nodes of
    /// later runs wait for: each is asked again, and submitted if it may go.
    pub(super) async fn release_past(&mut self, q: &str) -> Res<()> {
        let Some(waiting) = self.past_waits.remove(q) else {
            return Ok(());
        };
        for (p, idx) in waiting {
            let still = self.runs.get(&p).is_some_and(|r| {
                !r.submitted.contains(&idx)
                    && r.tracker.state(idx) == weir_core::readiness::NodeState::Ready
            });
            if !still {
                continue;
            }
            // Asked again through submit, which holds it again if its past
            // is still not done.
            let submitted = self.submit(&p, &[idx]).await?;
            if submitted.iter().any(|(_, new)| *new) {
                tracing::info!(graph = %self.graph, partition = %p, after = q, "node released: its past is done");
            }
        }
        Ok(())
    }
}
