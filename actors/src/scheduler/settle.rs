//! Completions and settling: a durable completion notice records the
//! node, decides what it makes ready or can no longer run (Airflow's early
//! decisions), submits the ready, and settles the run once every node has
//! its record (compare-and-put of the run record; events wait for the sync).

use ractor::ActorRef;
use weir_core::readiness::{Change, NodeState, NodeStatus, RunOutcome};

use crate::events::EngineEvent;
use crate::msg::queue::Completion;
use crate::msg::scheduler::SchedulerMsg;
use crate::records::done::{DoneRecord, DoneStatus};
use crate::records::graph::{done_status, RunState};
use crate::records::keys::{done_key, run_id, run_key};
use crate::store::Expiring;
use crate::views::run::state_name;

use super::state::{Res, SchedulerState};

impl SchedulerState {
    pub(super) async fn completed(&mut self, c: Completion) -> Res<()> {
        let Some((id, member)) = crate::records::keys::parse_node_key(&c.key) else {
            return Ok(());
        };
        if let Some(m) = member {
            return self.member_ended(id, m, c.status).await;
        }
        let Some(run) = self.runs.get_mut(&id.partition) else {
            return Ok(());
        };
        let Some(idx) = run.graph.index_of(&id.node) else {
            return Ok(());
        };
        if id.rerun != run.expected(idx) || run.tracker.state(idx).is_terminal() {
            // A superseded instance, or a repeat: nothing changes.
            return Ok(());
        }
        let status = crate::records::graph::node_status(c.status);
        self.record_node(&id.partition, idx, id.rerun, status).await
    }

    /// Node `idx` of run `p` has a durable record at `rerun`: its
    /// downstreams are decided or submitted, the run settles when done, and
    /// a success that materializes assets has them delivered.
    pub(super) async fn record_node(
        &mut self,
        p: &str,
        idx: usize,
        rerun: u32,
        status: NodeStatus,
    ) -> Res<()> {
        let Some(run) = self.runs.get_mut(p) else {
            return Ok(());
        };
        run.recorded[idx] = Some(rerun);
        run.maps.remove(&idx);
        let graph = run.graph.clone();
        let changes = run.tracker.record(&graph, idx, status);
        let node = graph.node_at(idx);
        let _ = self.events.send(EngineEvent::NodeChanged {
            graph: self.graph.to_string(),
            partition: p.to_string(),
            node: node.name.to_string(),
            rerun,
            state: done_status(status).to_string(),
        });
        if status == NodeStatus::Succeeded && !node.produces.is_empty() {
            // The materializations are durable with the record; the assets
            // actor delivers them (and finds them at its next pass if this
            // cast is lost).
            if let Some(assets) =
                ActorRef::<crate::msg::assets::AssetsMsg>::where_is(self.names.assets())
            {
                let _ = assets.cast(crate::msg::assets::AssetsMsg::Deliver);
            }
        }
        self.apply_changes(p, changes).await?;
        self.settle_if_done(p).await?;
        // Later partitions' nodes may wait on this one's (depends_on_past).
        self.release_past(p).await?;
        Ok(())
    }

    /// Records decided nodes (durably), then submits the ready ones.
    /// Returns how many submits were new to the queue.
    pub(super) async fn apply_changes(&mut self, p: &str, changes: Vec<Change>) -> Res<usize> {
        if changes.is_empty() {
            return Ok(0);
        }
        let now = self.clock.now_ms();
        let run = self
            .runs
            .get_mut(p)
            .ok_or("changes to a run that is not active")?;
        let mut puts = Vec::new();
        let mut ready = Vec::new();
        for ch in &changes {
            let name = run.graph.node_at(ch.node).name.clone();
            let rerun = run.expected(ch.node);
            let status = match ch.state {
                NodeState::Ready => {
                    ready.push(ch.node);
                    None
                }
                NodeState::Skipped => Some(DoneStatus::Skipped),
                NodeState::UpstreamFailed => Some(DoneStatus::UpstreamFailed),
                _ => None,
            };
            let _ = self.events.send(EngineEvent::NodeChanged {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                node: name.to_string(),
                rerun,
                state: state_name(ch.state).to_string(),
            });
            if let Some(status) = status {
                let id = run_id(self.graph.as_str(), &run.partition, name.as_str(), rerun);
                let node = run.graph.node_at(ch.node);
                let record = DoneRecord {
                    id: 0,
                    key: id.clone(),
                    task: node.task.task.to_string(),
                    pool: node.pool.to_string(),
                    status,
                    attempts: 0,
                    deferrals: 0,
                    failures: 0,
                    error: None,
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
                puts.push((done_key(&id), self.store.encode("node record", &record)?));
                run.recorded[ch.node] = Some(rerun);
                tracing::info!(run_id = %id, status = %status, "node decided without running");
            }
        }
        if !puts.is_empty() {
            let store = self.store.clone();
            crate::blocking::run(move || store.put_batch(&puts, &[])).await??;
        }
        let ready: Vec<usize> = ready
            .into_iter()
            .filter(|i| !run.submitted.contains(i))
            .collect();
        let submitted = self.submit(p, &ready).await?;
        Ok(submitted.iter().filter(|(_, new)| *new).count())
    }

    /// Settles run `p` when every node is terminal: a compare-and-put of its
    /// record, with its expiry.
    pub(super) async fn settle_if_done(&mut self, p: &str) -> Res<bool> {
        let Some(run) = self.runs.get(p) else {
            return Ok(false);
        };
        let Some(outcome) = run.tracker.outcome() else {
            return Ok(false);
        };
        let state = match outcome {
            RunOutcome::Complete => RunState::Complete,
            RunOutcome::Failed => RunState::Failed,
        };
        let written = self.write_settled(p, state, false).await?;
        if written {
            self.runs.remove(p);
        }
        Ok(written)
    }

    /// Writes the final state of run `p` against its stored bytes.
    /// With `durable_now` false the write is synced by the next
    /// [`SchedulerMsg::SyncSettled`] (queued behind the messages already in
    /// the mailbox), and its event goes out after that sync.
    pub(super) async fn write_settled(
        &mut self,
        p: &str,
        state: RunState,
        durable_now: bool,
    ) -> Res<bool> {
        let run = self
            .runs
            .get(p)
            .ok_or("settle of a run that is not active")?;
        let now = self.clock.now_ms();
        let mut settled = run.record.clone();
        settled.state = state;
        settled.settled_at_ms = Some(now);
        let key = run_key(self.graph.as_str(), &run.partition);
        let bytes = self.store.encode("run record", &settled)?;
        let expiring = Expiring {
            at_ms: now.saturating_add(settled.retention_ms),
            key: key.clone(),
        };
        // The notification is journaled before the settle is written: a
        // crash between the two settles the run again at the next start,
        // and the notification's key (one per settle) makes that a no-op.
        let notifies = match state {
            RunState::Failed => run.graph.def().on_failure.is_some(),
            RunState::Complete => run.graph.def().on_success.is_some(),
            RunState::Active | RunState::Cancelled | RunState::Withdrawn => false,
        };
        if notifies {
            let states: Vec<NodeState> =
                (0..run.graph.len()).map(|i| run.tracker.state(i)).collect();
            self.notify_settled(p, &settled, &states).await;
        }
        let run = self
            .runs
            .get(p)
            .ok_or("settle of a run that is not active")?;
        let store = self.store.clone();
        let expected = run.bytes.clone();
        let b = bytes.clone();
        let written = crate::blocking::run(move || {
            if durable_now {
                store.compare_and_put(&key, Some(&expected), Some(&b), &[expiring], &[])
            } else {
                store.compare_and_put_unsynced(&key, Some(&expected), Some(&b), &[expiring], &[])
            }
        })
        .await??;
        if written && state == RunState::Withdrawn {
            // Not a settle: no task of it ran, and nothing waits for it.
            tracing::info!(graph = %self.graph, partition = p, "prepared graph run withdrawn");
        } else if written {
            tracing::info!(graph = %self.graph, partition = p, state = %state, "graph run settled");
            let event = EngineEvent::RunSettled {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                state: state.to_string(),
            };
            if durable_now {
                let _ = self.events.send(event);
            } else {
                if self.unsynced_settles.is_empty() {
                    if let Some(me) = &self.myself {
                        let _ = me.cast(SchedulerMsg::SyncSettled);
                    }
                }
                self.unsynced_settles.push(event);
            }
        } else {
            // Someone else wrote the record: reload it and try again on the
            // next event or reconcile.
            tracing::warn!(graph = %self.graph, partition = p, "run record changed under the scheduler; reloading");
            let partition = run.partition.clone();
            match self.load_run(&partition)? {
                Some(r) if r.record.state == RunState::Active => {
                    self.runs.insert(p.to_string(), r);
                }
                _ => {
                    self.runs.remove(p);
                }
            }
        }
        Ok(written)
    }

    /// Syncs the settles written since the last sync, then sends their
    /// events.
    pub(super) async fn sync_settled(&mut self) -> Res<()> {
        if self.unsynced_settles.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        crate::blocking::run(move || store.sync()).await??;
        for e in std::mem::take(&mut self.unsynced_settles) {
            let _ = self.events.send(e);
        }
        Ok(())
    }
}
