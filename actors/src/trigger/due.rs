//! Starting what is due: keys whose schedules fell due are claimed and
//! their runs started (or prepared ahead of their instants, and withdrawn
//! when what made them due changes), paced by `max_active_runs`; a settled
//! run finishes its key's claim; the repair pass mends claims and
//! preparations that a crash or a lost answer left behind.

use std::sync::Arc;

use ractor::ActorRef;
use rand::Rng;
use weir_core::names::Key;
use weir_core::partition::Partition;

use crate::events::EngineEvent;
use crate::msg::scheduler::{SchedulerMsg, StartOutcome};
use crate::msg::trigger::TriggerMsg;
use crate::records::graph::GraphRunRecord;
use crate::records::keys::run_key;
use crate::store::StoreError;

use super::backfill::backfill_key;
use super::cron::cron_key;
use super::settings::SCHEDULER_CALL_MS;
use super::state::{started, Res, TriggerState};

impl TriggerState {
    /// Checks the run of every key this trigger leased: a settled run
    /// whose event was lost completes the key, a run whose start was lost
    /// starts (again: a no-op if it exists).
    pub(super) async fn repair(&mut self, now: u64) -> Res<()> {
        self.repair_now = false;
        self.last_repair_ms = now;
        let Some(k) = &self.keyed else {
            return Ok(());
        };
        let leased = k.keys.leased(&self.owner);
        if leased.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        let graph = self.graph.to_string();
        let found = crate::blocking::run(move || {
            let mut out = Vec::new();
            for (key, at, waits) in leased {
                let Ok(p) = Partition::keyed_at(key.clone(), at) else {
                    continue;
                };
                let run: Option<GraphRunRecord> = store.get(&run_key(&graph, &p))?;
                out.push((key, at, waits, p, run.map(|r| r.state)));
            }
            Ok::<_, StoreError>(out)
        })
        .await??;
        let mut lost_starts = Vec::new();
        let mut lost_preparations = Vec::new();
        let mut repaired = 0;
        for (key, at, waits, p, run) in found {
            use crate::records::graph::RunState;
            match run {
                // A prepared claim's run is prepared again (to wait for the
                // same instant, or start at once if that has passed).
                None => match waits {
                    Some(w) if w > now => lost_preparations.push((p, w)),
                    _ => lost_starts.push(p),
                },
                Some(RunState::Active) => {}
                // The withdrawal landed and the key's record did not: the
                // key is as before its claim.
                Some(RunState::Withdrawn) => {
                    let k = self.keyed.as_mut().expect("checked above");
                    if !k.keys.unprepare(&key) {
                        // Not a prepared claim: its start revives the run.
                        lost_starts.push(p);
                    }
                    repaired += 1;
                }
                Some(s) => {
                    let error = self.failure(&p, &s.to_string());
                    let draw = self.rng.gen();
                    let k = self.keyed.as_mut().expect("checked above");
                    if k.keys
                        .completed(&key, at, &self.owner, now, error.as_deref(), draw)
                    {
                        repaired += 1;
                    }
                }
            }
        }
        if repaired > 0 || !lost_starts.is_empty() || !lost_preparations.is_empty() {
            tracing::info!(graph = %self.graph, completed = repaired, restarted = lost_starts.len(), prepared = lost_preparations.len(), "trigger repaired leased keys");
        }
        if !lost_starts.is_empty() || !lost_preparations.is_empty() {
            self.flush().await?;
            if self.start(lost_starts).await?.is_none()
                || self.prepare(lost_preparations).await?.is_none()
            {
                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
            }
        }
        Ok(())
    }

    /// Why run `p` of a key did not complete, from its nodes' records;
    /// `None` when it completed.
    pub(super) fn failure(&self, p: &Partition, state: &str) -> Option<String> {
        if state == "complete" {
            return None;
        }
        let detail = crate::views::run::graph_run(&self.store, self.graph.as_str(), p)
            .ok()
            .flatten()
            .and_then(|v| {
                v.nodes
                    .into_iter()
                    .find(|n| n.state == "failed" || n.state == "cancelled")
                    .map(|n| match n.error {
                        Some(e) => format!(": node {}: {e}", n.node),
                        None => format!(": node {} {}", n.node, n.state),
                    })
            })
            .unwrap_or_default();
        Some(format!("run {p} {state}{detail}"))
    }

    /// A run of the graph settled: a keyed run completes its key.
    pub(super) fn settled(&mut self, partition: &str, state: &str) {
        let Ok(p) = partition.parse::<Partition>() else {
            return;
        };
        let (Some(key), Some(at)) = (p.key().cloned(), p.at_ms()) else {
            return;
        };
        if self.keyed.is_none() {
            return;
        }
        let error = self.failure(&p, state);
        let now = self.clock.now_ms();
        let draw = self.rng.gen();
        let k = self.keyed.as_mut().expect("checked above");
        if k.keys
            .completed(&key, at, &self.owner, now, error.as_deref(), draw)
        {
            tracing::debug!(graph = %self.graph, key = %key, state, "key run ended");
        }
    }

    /// Starts cron windows, then backfill windows, then due keys, while
    /// the graph has room under its max_active_runs.
    pub(super) async fn start_due(&mut self, myself: &ActorRef<TriggerMsg>, now: u64) -> Res<()> {
        self.waiting_for_room = false;
        let cron_pending = self
            .cron
            .as_ref()
            .is_some_and(|c| !c.record.pending.is_empty());
        let keys_due = self
            .keyed
            .as_ref()
            .and_then(|k| k.keys.next_claimable())
            .is_some_and(|at| at <= now.saturating_add(self.settings.prepare_ahead_ms));
        if !cron_pending && self.backfills.backfills.is_empty() && !keys_due {
            return Ok(());
        }
        let Some(def) = self.def.clone() else {
            return Ok(());
        };
        let Some(active) = self.active_runs().await else {
            self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
            return Ok(());
        };
        let mut room = (def.max_active_runs as usize).saturating_sub(active);
        let batch_max = self.settings.start_batch_max.max(1);

        // Cron windows.
        while room > 0
            && self
                .cron
                .as_ref()
                .is_some_and(|c| !c.record.pending.is_empty())
        {
            let c = self.cron.as_ref().expect("checked");
            let n = room.min(batch_max).min(c.record.pending.len());
            let batch: Vec<Partition> = c.record.pending[..n].to_vec();
            let Some(out) = self.start(batch).await? else {
                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
                return Ok(());
            };
            room = room.saturating_sub(started(&out));
            let c = self.cron.as_mut().expect("checked");
            c.record.pending.drain(..n);
            let record = c.record.clone();
            self.put(&cron_key(self.graph.as_str()), &record).await?;
        }

        // Backfills, in the order asked for.
        while room > 0 && !self.backfills.backfills.is_empty() {
            let b = self.backfills.backfills[0].clone();
            let windows = match self.windows.get(&b.id) {
                Some(w) => w.clone(),
                None => {
                    let w = Arc::new(
                        b.ordered_windows(
                            def.partitioning,
                            self.settings.backfill_windows_max,
                            def.zone(),
                        )
                        .map_err(|e| format!("graph {}: backfill {}: {e}", self.graph, b.id))?,
                    );
                    self.windows.insert(b.id, w.clone());
                    w
                }
            };
            let from = b.cursor as usize;
            let to = (from + room.min(batch_max)).min(windows.len());
            let batch = windows[from..to].to_vec();
            let Some(out) = self.start(batch).await? else {
                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
                return Ok(());
            };
            let n = started(&out);
            room = room.saturating_sub(n);
            let b = &mut self.backfills.backfills[0];
            b.cursor = to as u64;
            b.started += n as u64;
            b.skipped += (out.len() - n) as u64;
            if b.is_done() {
                let b = self.backfills.backfills.remove(0);
                self.windows.remove(&b.id);
                tracing::info!(graph = %self.graph, backfill = b.id, started = b.started, skipped = b.skipped, "backfill done");
                let _ = self.events.send(EngineEvent::BackfillDone {
                    graph: self.graph.to_string(),
                    id: b.id,
                    started: b.started,
                    skipped: b.skipped,
                });
            }
            let record = self.backfills.clone();
            self.put(&backfill_key(self.graph.as_str()), &record)
                .await?;
        }

        // Due keys: one claim batch per pass; another pass is queued while
        // keys stay due and there is room, so signals and queries get a
        // turn between batches. Keys due within the preparation horizon
        // are prepared in the same batch, after those due now.
        let horizon = self.settings.prepare_ahead_ms;
        if room > 0 {
            if let Some(k) = self.keyed.as_mut() {
                let n = room.min(k.keys.spec.batch_size.max(1) as usize);
                let claimed = k
                    .keys
                    .claim_until(&self.owner, now, now.saturating_add(horizon), n);
                if !claimed.is_empty() {
                    // Leases are durable before their runs start: a crash in
                    // between leaves leases that the repair starts.
                    self.flush().await?;
                    let (ahead, at_once): (Vec<_>, Vec<_>) =
                        claimed.into_iter().partition(|(_, at)| *at > now);
                    let at_once: Vec<Partition> = at_once.into_iter().map(|(p, _)| p).collect();
                    tracing::debug!(graph = %self.graph, keys = at_once.len(), prepared = ahead.len(), "keys claimed");
                    for out in [self.start(at_once).await?, self.prepare(ahead).await?] {
                        match out {
                            None => {
                                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
                                return Ok(());
                            }
                            Some(out) => room = room.saturating_sub(started(&out)),
                        }
                    }
                    let more = self
                        .keyed
                        .as_ref()
                        .and_then(|k| k.keys.next_claimable())
                        .is_some_and(|at| at <= now.saturating_add(horizon));
                    if more && room > 0 {
                        self.wake_soon(myself);
                    }
                }
            }
        }
        let keys_due = self
            .keyed
            .as_ref()
            .and_then(|k| k.keys.next_claimable())
            .is_some_and(|at| at <= now.saturating_add(horizon));
        self.waiting_for_room = room == 0
            && (keys_due
                || !self.backfills.backfills.is_empty()
                || self
                    .cron
                    .as_ref()
                    .is_some_and(|c| !c.record.pending.is_empty()));
        Ok(())
    }

    /// The graph's active runs, from its scheduler; `None` when it cannot
    /// be reached (restarting).
    pub(super) async fn active_runs(&self) -> Option<usize> {
        let s = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))?;
        match ractor::call_t!(s, SchedulerMsg::ActiveRuns, SCHEDULER_CALL_MS) {
            Ok(runs) => Some(runs.len()),
            Err(e) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler did not answer");
                None
            }
        }
    }

    /// Starts runs; `None` when the scheduler cannot be reached or refused
    /// (the caller retries after `retry_ms`).
    pub(super) async fn start(&self, partitions: Vec<Partition>) -> Res<Option<Vec<StartOutcome>>> {
        if partitions.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))
        else {
            tracing::warn!(graph = %self.graph, "scheduler not running; starts wait");
            return Ok(None);
        };
        match ractor::call_t!(
            s,
            SchedulerMsg::StartRuns,
            SCHEDULER_CALL_MS,
            partitions,
            // Cron firings and backfills run with the definition's params.
            std::collections::BTreeMap::new()
        ) {
            Ok(Ok(out)) => {
                tracing::debug!(graph = %self.graph, started = started(&out), asked = out.len(), "runs started");
                Ok(Some(out))
            }
            Ok(Err(e)) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler refused to start runs");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler did not answer a start");
                Ok(None)
            }
        }
    }

    /// Prepares runs to start at their instants (`SchedulerMsg::PrepareRuns`);
    /// `None` as for [`TriggerState::start`].
    pub(super) async fn prepare(
        &self,
        runs: Vec<(Partition, u64)>,
    ) -> Res<Option<Vec<StartOutcome>>> {
        if runs.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))
        else {
            tracing::warn!(graph = %self.graph, "scheduler not running; preparations wait");
            return Ok(None);
        };
        match ractor::call_t!(s, SchedulerMsg::PrepareRuns, SCHEDULER_CALL_MS, runs) {
            Ok(Ok(out)) => {
                tracing::debug!(graph = %self.graph, prepared = started(&out), asked = out.len(), "runs prepared");
                Ok(Some(out))
            }
            Ok(Err(e)) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler refused to prepare runs");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler did not answer a preparation");
                Ok(None)
            }
        }
    }

    /// Withdraws prepared runs (`SchedulerMsg::Withdraw`): for each, whether
    /// it was withdrawn. An error when the scheduler cannot be reached: the
    /// change that asked is refused, and nothing is changed.
    pub(super) async fn withdraw(&self, runs: Vec<Partition>) -> Res<Result<Vec<bool>, String>> {
        if runs.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))
        else {
            return Ok(Err(format!(
                "graph {}: the scheduler is not running, so prepared runs cannot be withdrawn; try again",
                self.graph
            )));
        };
        match ractor::call_t!(s, SchedulerMsg::Withdraw, SCHEDULER_CALL_MS, runs) {
            Ok(Ok(out)) => Ok(Ok(out)),
            Ok(Err(e)) => Ok(Err(format!("graph {}: withdraw: {e}", self.graph))),
            Err(e) => Ok(Err(format!(
                "graph {}: the scheduler did not answer a withdrawal: {e}",
                self.graph
            ))),
        }
    }

    /// Takes back every run prepared ahead whose instant is still ahead:
    /// the keys' (written before it goes on), then the next cron firing's
    /// windows. The first withdrawal the scheduler refuses is the error;
    /// what was withdrawn before it stays withdrawn.
    pub(super) async fn withdraw_prepared(&mut self) -> Res<Result<(), String>> {
        if let Err(e) = self.withdraw_keys(None).await? {
            return Ok(Err(e));
        }
        self.flush().await?;
        let now = self.clock.now_ms();
        if let Some((at, windows)) = self.cron_prepared.clone() {
            if at > now {
                if let Err(e) = self.withdraw(windows).await? {
                    return Ok(Err(e));
                }
            }
            self.cron_prepared = None;
        }
        Ok(Ok(()))
    }

    /// Withdraws the prepared runs of `keys` (those of `None`: every key)
    /// that still wait for their instants: a withdrawn key's record is as
    /// before its claim; one found begun keeps its claim as an ordinary one.
    /// Not written here: the caller flushes.
    pub(super) async fn withdraw_keys(
        &mut self,
        keys: Option<&[Key]>,
    ) -> Res<Result<usize, String>> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_ref() else {
            return Ok(Ok(0));
        };
        let waiting = k.keys.waiting(now, keys);
        if waiting.is_empty() {
            return Ok(Ok(0));
        }
        let parts = waiting.iter().map(|(_, p)| p.clone()).collect();
        let answers = match self.withdraw(parts).await? {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let k = self.keyed.as_mut().expect("checked above");
        let mut n = 0;
        for ((key, p), withdrawn) in waiting.iter().zip(answers) {
            if withdrawn {
                k.keys.unprepare(key);
                n += 1;
                tracing::info!(graph = %self.graph, key = %key, partition = %p, "prepared key run withdrawn");
            } else {
                k.keys.begun(key);
            }
        }
        Ok(Ok(n))
    }
}
