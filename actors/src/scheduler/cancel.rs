//! Cancelling a run, and withdrawing a prepared run before its instant:
//! the run record first, then the queue (all or nothing for a withdrawal:
//! a ticket handed out meanwhile puts the run back and it goes on).

use ractor::ActorRef;
use weir_core::partition::Partition;

use crate::msg::queue::{Cancelled, QueueMsg};
use crate::records::graph::{GraphRunRecord, RunState};
use crate::records::keys::{run_id, run_key};
use crate::store::Expiring;

use super::settings::QUEUE_CALL_MS;
use super::state::{ActiveRun, Res, SchedulerState};

impl SchedulerState {
    pub(super) async fn cancel_run(&mut self, partition: &Partition) -> Res<bool> {
        let p = partition.to_string();
        if !self.runs.contains_key(&p) {
            return Ok(false);
        }
        let written = self.write_settled(&p, RunState::Cancelled, true).await?;
        if !written {
            return Ok(false);
        }
        let run = self.runs.remove(&p).expect("active");
        let n = self.cancel_instances(&run).await?;
        tracing::info!(graph = %self.graph, partition = %p, cancelled = n, "graph run cancelled");
        Ok(true)
    }

    /// Cancels the live task instance of every node of `run` without a
    /// current record.
    pub(super) async fn cancel_instances(&mut self, run: &ActiveRun) -> Res<usize> {
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let mut n = 0;
        for idx in 0..run.graph.len() {
            if run.recorded[idx].is_some() {
                continue;
            }
            if run.graph.node_at(idx).map.is_some() {
                n += self.cancel_members(run, idx).await?;
                continue;
            }
            let id = run_id(
                self.graph.as_str(),
                &run.partition,
                run.graph.node_at(idx).name.as_str(),
                run.expected(idx),
            );
            let r = ractor::call_t!(queue, QueueMsg::Cancel, QUEUE_CALL_MS, id)
                .map_err(|e| format!("cancel: {e}"))?;
            if matches!(r, Cancelled::Cancelled(_)) {
                n += 1;
            }
        }
        Ok(n)
    }

    pub(super) async fn cancel_unrecorded(&mut self, partition: &Partition) -> Res<usize> {
        let Some(run) = self.load_run(partition)? else {
            return Ok(0);
        };
        self.cancel_instances(&run).await
    }

    /// See [`SchedulerMsg::Withdraw`].
    pub(super) async fn withdraw(&mut self, partitions: &[Partition]) -> Res<Vec<bool>> {
        let mut out = Vec::with_capacity(partitions.len());
        for partition in partitions {
            out.push(self.withdraw_one(partition).await?);
        }
        Ok(out)
    }

    /// Withdraws one prepared run: its record first (as a cancel writes
    /// its record first: a crash after it finishes the withdrawal at the
    /// next start), then its tickets, all or none; when one was handed out
    /// meanwhile, the record goes back to active and the run goes on.
    pub(super) async fn withdraw_one(&mut self, partition: &Partition) -> Res<bool> {
        let p = partition.to_string();
        let now = self.clock.now_ms();
        let Some(run) = self.runs.get(&p) else {
            return Ok(false);
        };
        // Only a run nothing of which has happened: no record, no mapped
        // node's members (those are not withdrawn: the run goes on).
        let waiting = run.record.not_before_ms.is_some_and(|at| at > now)
            && run.recorded.iter().all(Option::is_none)
            && run.maps.is_empty();
        if !waiting {
            return Ok(false);
        }
        if !self.write_settled(&p, RunState::Withdrawn, true).await? {
            return Ok(false);
        }
        let run = self.runs.remove(&p).expect("written above, so active");
        if self.withdraw_tickets(&run).await? {
            return Ok(true);
        }
        self.restore_withdrawn(&run).await?;
        Ok(false)
    }

    /// Withdraws the tickets of every node of `run` without a record at the
    /// queue, all or none; `false` when one was handed out.
    pub(super) async fn withdraw_tickets(&self, run: &ActiveRun) -> Res<bool> {
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let ids: Vec<String> = (0..run.graph.len())
            .filter(|&i| run.recorded[i].is_none() && run.graph.node_at(i).map.is_none())
            .map(|i| {
                run_id(
                    self.graph.as_str(),
                    &run.partition,
                    run.graph.node_at(i).name.as_str(),
                    run.expected(i),
                )
            })
            .collect();
        match ractor::call_t!(queue, QueueMsg::Withdraw, QUEUE_CALL_MS, ids)
            .map_err(|e| format!("withdraw: {e}"))?
        {
            Ok(_) => Ok(true),
            Err(key) => {
                tracing::info!(graph = %self.graph, partition = %run.partition, key, "prepared run not withdrawn: its ticket was handed out");
                Ok(false)
            }
        }
    }

    /// Puts a withdrawn run's record back to active (a ticket of it was
    /// handed out before the withdrawal reached the queue) and tracks it.
    pub(super) async fn restore_withdrawn(&mut self, run: &ActiveRun) -> Res<()> {
        let key = run_key(self.graph.as_str(), &run.partition);
        let store = self.store.clone();
        let mut active = run.record.clone();
        active.state = RunState::Active;
        active.settled_at_ms = None;
        let bytes = self.store.encode("run record", &active)?;
        crate::blocking::run(move || {
            let Some((stored, current)) = store.get_with_raw::<GraphRunRecord>(&key)? else {
                return Ok(());
            };
            let unexpire: Vec<Expiring> = stored.expiry(&key).into_iter().collect();
            store.compare_and_put(&key, Some(&current), Some(&bytes), &[], &unexpire)?;
            Ok::<_, crate::store::StoreError>(())
        })
        .await??;
        if let Some(r) = self.load_run(&run.partition)? {
            if r.record.state == RunState::Active {
                self.runs.insert(run.partition.to_string(), r);
            }
        }
        Ok(())
    }

    /// At start: the tickets of a withdrawn run are withdrawn (again; a
    /// crash may have come between its record and its tickets), and a run
    /// one of whose tickets was handed out meanwhile is active again.
    pub(super) async fn finish_withdraw(&mut self, partition: &Partition) -> Res<()> {
        let Some(run) = self.load_run(partition)? else {
            return Ok(());
        };
        if !self.withdraw_tickets(&run).await? {
            tracing::warn!(graph = %self.graph, partition = %partition, "a withdrawn run's ticket was handed out before the withdrawal landed; the run goes on");
            self.restore_withdrawn(&run).await?;
        }
        Ok(())
    }
}
