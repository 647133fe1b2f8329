//! Mapped nodes in the scheduler: a node run once per item, as members
//! (the decisions are weir-core's `mapped`; this file journals and
//! applies them).
//!
//! When a mapped node is ready, its scheduler reads the items (from the
//! definition, or from the record of the upstream it maps over), writes
//! the generation's ledger (`map/…`: its fingerprint and, per member, the
//! generation whose record holds its outcome, so a rerun with the same
//! inputs keeps the members that succeeded) durably, then submits the
//! members — tickets keyed `graph/partition/node/rerun/member`, each with
//! its item in its payload — at most `max_active_members` live at once.
//! Each member's end (a completion notice, like a node's) frees a place
//! for the next; the top-ups are casts to itself
//! ([`super::SchedulerMsg::MapTopUp`]), so a burst of ends costs one
//! enqueue. When every member has a record, the scheduler writes the
//! node's record (the members' outputs in item order as its output, or
//! the first failure's error and the counts) durably, with the
//! materializations of the assets it produces, and goes on as after any
//! node's record.
//!
//! Nothing of this is only in memory: the ledger and the members' records
//! are in the store, so a restarted scheduler (or a reconcile) rebuilds
//! the node from them and submits again the first `max_active_members`
//! members that have no record — the queue answers for the live ones —
//! which never puts more than the bound live (see weir-core's
//! `mapped::Members`). Cancelling the run cancels the members that have
//! not ended; the run's expiry deletes members and ledgers with it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ractor::ActorRef;
use serde_json::Value;
use weir_core::mapped::{
    fingerprint, items_of_output, output_array, plan_sources, Ledger, MapSource, MemberStatus,
    Members,
};
use weir_core::readiness::{NodeState, NodeStatus};

use crate::events::EngineEvent;
use crate::msg::queue::{Cancelled, Enqueued, QueueMsg};
use crate::msg::scheduler::SchedulerMsg;
use crate::records::done::{DoneRecord, DoneStatus};
use crate::records::graph::MemberInput;
use crate::records::keys::done_key;
use crate::records::keys::{ledger_key, member_id, run_id, LEDGER_PREFIX};
use crate::store::{BlobRef, BLOB_INLINE_BYTES_MAX};

use super::settings::QUEUE_CALL_MS;
use super::state::{node_job, run_due_ms, run_params, ActiveRun, MapRun, Res, SchedulerState};

/// The member status of a member's done status.
fn member_status(s: DoneStatus) -> MemberStatus {
    match s {
        DoneStatus::Succeeded => MemberStatus::Succeeded,
        DoneStatus::Skipped => MemberStatus::Skipped,
        DoneStatus::Cancelled => MemberStatus::Cancelled,
        DoneStatus::Failed | DoneStatus::UpstreamFailed => MemberStatus::Failed,
    }
}

impl SchedulerState {
    /// A ready mapped node is submitted: its members start (or resume)
    /// with a top-up. Returns its run id and whether this generation is
    /// new (no ledger yet).
    pub(super) fn kick_mapped(&mut self, p: &str, idx: usize) -> Res<(String, bool)> {
        let run = self
            .runs
            .get_mut(p)
            .ok_or("submit to a run that is not active")?;
        let rerun = run.expected(idx);
        let name = run.graph.node_at(idx).name.clone();
        let id = run_id(self.graph.as_str(), &run.partition, name.as_str(), rerun);
        let new = !self.store.contains(&ledger_key(
            self.graph.as_str(),
            &run.partition,
            name.as_str(),
            rerun,
        ))?;
        run.submitted.insert(idx);
        self.ask_top_up(p, idx);
        Ok((id, new))
    }

    /// Casts a top-up of node `idx` of run `p` to itself, once until it is
    /// handled.
    fn ask_top_up(&mut self, p: &str, idx: usize) {
        if let Some(m) = self.runs.get_mut(p).and_then(|r| r.maps.get_mut(&idx)) {
            if m.topup_pending {
                return;
            }
            m.topup_pending = true;
        }
        if let Some(me) = &self.myself {
            let _ = me.cast(SchedulerMsg::MapTopUp(p.to_string(), idx));
        }
    }

    /// A member's ticket ended (its record is durable).
    pub(super) async fn member_ended(
        &mut self,
        id: crate::records::keys::RunId,
        member: u32,
        status: DoneStatus,
    ) -> Res<()> {
        let Some(run) = self.runs.get_mut(&id.partition) else {
            return Ok(());
        };
        let Some(idx) = run.graph.index_of(&id.node) else {
            return Ok(());
        };
        if id.rerun != run.expected(idx) || run.tracker.state(idx).is_terminal() {
            return Ok(());
        }
        // Without the node in memory (a reconcile rebuilt the run), the
        // next top-up reads this record from the store.
        let Some(map) = run.maps.get_mut(&idx) else {
            return Ok(());
        };
        let m = member as usize;
        if map.rerun != id.rerun || map.ledger.sources.get(m) != Some(&id.rerun) {
            return Ok(());
        }
        if !map.members.end(m, member_status(status), None) {
            return Ok(());
        }
        tracing::debug!(graph = %id.graph, partition = %id.partition, node = %id.node, rerun = id.rerun, member, status = %status, ended = map.members.ended(), total = map.members.len(), "member ended");
        let _ = self.events.send(EngineEvent::MemberEnded {
            graph: id.graph.clone(),
            partition: id.partition.clone(),
            node: id.node.clone(),
            rerun: id.rerun,
            member,
            state: status.to_string(),
        });
        self.ask_top_up(&id.partition, idx);
        Ok(())
    }

    /// Submits what the bound lets run of mapped node `idx` of run `p`
    /// (building it from the store first when it is not in memory), and
    /// writes its record once every member ended.
    pub(super) async fn map_top_up(&mut self, p: &str, idx: usize) -> Res<()> {
        let Some(run) = self.runs.get_mut(p) else {
            return Ok(());
        };
        if run.recorded[idx].is_some() || run.tracker.state(idx) != NodeState::Ready {
            return Ok(());
        }
        let rerun = run.expected(idx);
        if let Some(m) = run.maps.get_mut(&idx) {
            m.topup_pending = false;
        }
        if run.maps.get(&idx).is_none_or(|m| m.rerun != rerun) {
            match self.load_map(p, idx, rerun)? {
                Ok(map) => {
                    let run = self.runs.get_mut(p).ok_or("the run left")?;
                    run.maps.insert(idx, map);
                }
                Err(fault) => return self.fail_mapped(p, idx, rerun, fault).await,
            }
        }
        loop {
            let (jobs, which) = self.member_jobs(p, idx)?;
            if jobs.is_empty() {
                break;
            }
            let answers = self.enqueue(jobs).await?;
            let mut ended_now = false;
            for (i, answer) in which.into_iter().zip(answers) {
                match answer {
                    Ok(Enqueued::New(_)) | Ok(Enqueued::Live(_)) => {}
                    Ok(Enqueued::Done) => {
                        // Ended while the scheduler did not know it (a lost
                        // notice, or before a restart): its record says how.
                        let key = self.member_key(p, idx, i)?;
                        let status = self
                            .store
                            .get::<DoneRecord>(&done_key(&key))?
                            .map_or(DoneStatus::Failed, |d| d.status);
                        if let Some(map) = self.runs.get_mut(p).and_then(|r| r.maps.get_mut(&idx)) {
                            ended_now |= map.members.end(i, member_status(status), None);
                        }
                    }
                    Err(e) => return Err(format!("submit of a member of {p}: {e}").into()),
                }
            }
            if !ended_now {
                break;
            }
        }
        let settled = self
            .runs
            .get(p)
            .and_then(|r| r.maps.get(&idx))
            .is_some_and(|m| m.members.settled().is_some());
        if settled {
            self.finish_mapped(p, idx).await?;
        }
        Ok(())
    }

    /// The key of member `i` of the generation in memory of node `idx`.
    fn member_key(&self, p: &str, idx: usize, i: usize) -> Res<String> {
        let run = self.runs.get(p).ok_or("the run left")?;
        let map = run.maps.get(&idx).ok_or("the node left")?;
        Ok(member_id(
            self.graph.as_str(),
            &run.partition,
            run.graph.node_at(idx).name.as_str(),
            map.ledger.sources[i],
            i as u32,
        ))
    }

    /// The jobs of the members the bound lets run now, and their indexes.
    fn member_jobs(
        &mut self,
        p: &str,
        idx: usize,
    ) -> Res<(Vec<weir_core::queue::Job>, Vec<usize>)> {
        let notify: Arc<str> = Arc::from(self.names.scheduler(self.graph.as_str()));
        let now = self.clock.now_ms();
        let which = {
            let run = self.runs.get_mut(p).ok_or("the run left")?;
            let map = run.maps.get_mut(&idx).ok_or("the node left")?;
            map.members.to_submit()
        };
        if which.is_empty() {
            return Ok((Vec::new(), which));
        }
        let run = self.runs.get(p).ok_or("the run left")?;
        let map = run.maps.get(&idx).ok_or("the node left")?;
        let node = run.graph.node_at(idx);
        let params = run_params(run);
        let mut read = HashMap::new();
        let mut jobs = Vec::with_capacity(which.len());
        for &i in &which {
            let key = member_id(
                self.graph.as_str(),
                &run.partition,
                node.name.as_str(),
                map.rerun,
                i as u32,
            );
            let input = self.input_of(
                run,
                idx,
                &mut read,
                &params,
                Some(MemberInput {
                    index: i as u32,
                    item: map.items[i].clone(),
                }),
            )?;
            jobs.push(node_job(node, &key, &input, run_due_ms(run, now), &notify)?);
        }
        tracing::debug!(graph = %self.graph, partition = p, node = %node.name, rerun = map.rerun, members = which.len(), live = map.members.live(), "members submitted");
        Ok((jobs, which))
    }

    /// The items of node `idx` of `run`, or why there are none.
    fn items_of(&self, run: &ActiveRun, idx: usize) -> Res<Result<Vec<Value>, String>> {
        let node = run.graph.node_at(idx);
        let map = node.map.as_ref().ok_or("not a mapped node")?;
        let upstream = match &map.over {
            MapSource::Items(items) => return Ok(Ok(items.clone())),
            MapSource::Upstream(u) => u,
        };
        let Some(u) = run.graph.index_of(upstream.as_str()) else {
            return Ok(Err(format!("map_over: {upstream:?} is not a node")));
        };
        let Some(ur) = run.recorded[u] else {
            return Ok(Err(format!(
                "map_over: upstream {:?} has not ended, so its output holds no items yet (a mapped node's trigger rule must wait for it)",
                upstream.as_str()
            )));
        };
        let key = done_key(&run_id(
            self.graph.as_str(),
            &run.partition,
            upstream.as_str(),
            ur,
        ));
        let Some(d) = self.store.get::<DoneRecord>(&key)? else {
            return Ok(Err(format!(
                "map_over: upstream {:?} has no record",
                upstream.as_str()
            )));
        };
        let bytes = d.load_output(&self.store)?;
        Ok(
            items_of_output(upstream.as_str(), d.status.as_str(), &bytes)
                .map_err(|e| e.to_string()),
        )
    }

    /// Builds node `idx`'s generation `rerun` from the store: its items,
    /// its ledger (written now, durably, when it is new) and the members
    /// that ended. `Err` inside: the node cannot have members (its items
    /// cannot be read), with the reason.
    fn load_map(&mut self, p: &str, idx: usize, rerun: u32) -> Res<Result<MapRun, String>> {
        let run = self.runs.get(p).ok_or("the run left")?;
        let node = run.graph.node_at(idx);
        let spec = node.map.clone().ok_or("not a mapped node")?;
        let items = match self.items_of(run, idx)? {
            Ok(items) => items,
            Err(fault) => return Ok(Err(fault)),
        };
        // The upstreams' records, by name: their status and the hash of
        // their output.
        let mut tokens = BTreeMap::new();
        for &u in run.graph.upstreams(idx) {
            let Some(ur) = run.recorded[u] else { continue };
            let un = run.graph.node_at(u).name.as_str();
            let key = done_key(&run_id(self.graph.as_str(), &run.partition, un, ur));
            if let Some(d) = self.store.get::<DoneRecord>(&key)? {
                let digest = match &d.output_blob {
                    Some(b) => b.hash.clone(),
                    None => BlobRef::of(&d.output).hash,
                };
                tokens.insert(un.to_string(), format!("{}:{digest}", d.status));
            }
        }
        let print = fingerprint(&items, &tokens);
        let graph = self.graph.as_str();
        let name = node.name.as_str();
        let lkey = ledger_key(graph, &run.partition, name, rerun);
        let ledger = match self.store.get::<Ledger>(&lkey)? {
            Some(l) if l.len() == items.len() => {
                if l.fingerprint != print {
                    tracing::warn!(
                        graph,
                        partition = p,
                        node = name,
                        rerun,
                        "a mapped node's inputs changed within a generation; its ledger stands"
                    );
                }
                l
            }
            _ => {
                let prefix = format!("{LEDGER_PREFIX}{graph}/{}/{name}/", run.partition);
                let prev = self
                    .store
                    .scan::<Ledger>(&prefix)?
                    .into_iter()
                    .map(|(_, l)| l)
                    .filter(|l| l.rerun < rerun)
                    .max_by_key(|l| l.rerun);
                let succeeded = |i: usize| -> bool {
                    let Some(prev) = &prev else { return false };
                    let key = member_id(graph, &run.partition, name, prev.sources[i], i as u32);
                    matches!(
                        self.store.get::<DoneRecord>(&done_key(&key)),
                        Ok(Some(d)) if d.status == DoneStatus::Succeeded
                    )
                };
                let l = plan_sources(rerun, print, items.len(), prev.as_ref(), succeeded);
                let bytes = self.store.encode("member ledger", &l)?;
                self.store.put_batch(&[(lkey.clone(), bytes)], &[])?;
                tracing::info!(
                    graph,
                    partition = p,
                    node = name,
                    rerun,
                    members = l.len(),
                    kept = l.kept(),
                    max_active = spec.max_active_members,
                    "mapped node's members start"
                );
                l
            }
        };
        let mut ended = Vec::new();
        for (i, &src) in ledger.sources.iter().enumerate() {
            let key = member_id(graph, &run.partition, name, src, i as u32);
            if let Some(d) = self.store.get::<DoneRecord>(&done_key(&key))? {
                ended.push((i, member_status(d.status), None));
            }
        }
        let members = Members::new(ledger.len(), ended, spec.max_active_members);
        Ok(Ok(MapRun {
            rerun,
            ledger,
            members,
            items: Arc::new(items),
            topup_pending: false,
        }))
    }

    /// Writes the record of mapped node `idx`, whose members have all
    /// ended, and goes on as after any node's record.
    async fn finish_mapped(&mut self, p: &str, idx: usize) -> Res<()> {
        let run = self.runs.get(p).ok_or("the run left")?;
        let map = run.maps.get(&idx).ok_or("the node left")?;
        let node = run.graph.node_at(idx);
        let rerun = map.rerun;
        let graph = self.graph.as_str();
        let name = node.name.as_str();
        let mut records = Vec::with_capacity(map.ledger.len());
        for (i, &src) in map.ledger.sources.iter().enumerate() {
            let key = member_id(graph, &run.partition, name, src, i as u32);
            let d = self
                .store
                .get::<DoneRecord>(&done_key(&key))?
                .ok_or_else(|| format!("member {key} ended without a record"))?;
            records.push(d);
        }
        let members = Members::new(
            records.len(),
            records
                .iter()
                .enumerate()
                .map(|(i, d)| (i, member_status(d.status), d.error.clone())),
            1,
        );
        let settled = members
            .settled()
            .ok_or("a settled node has every member ended")?;
        let mut status = if settled.succeeded {
            DoneStatus::Succeeded
        } else {
            DoneStatus::Failed
        };
        let mut error = settled.error.clone();
        let mut output = Vec::new();
        // Each member's artifacts, under its index: a downstream finds
        // member 3's raw.csv as `3/raw.csv`.
        let artifacts: Vec<weir_core::artifact::ArtifactRef> = if settled.succeeded {
            records
                .iter()
                .enumerate()
                .flat_map(|(i, d)| {
                    d.artifacts
                        .iter()
                        .map(move |a| weir_core::artifact::ArtifactRef {
                            name: format!("{i}/{}", a.name),
                            ..a.clone()
                        })
                })
                .collect()
        } else {
            Vec::new()
        };
        if settled.succeeded {
            let mut outs = Vec::with_capacity(records.len());
            for d in &records {
                outs.push(
                    (d.status == DoneStatus::Succeeded)
                        .then(|| d.load_output(&self.store))
                        .transpose()?,
                );
            }
            match output_array(outs.iter().map(|o| o.as_deref())) {
                Ok(o) => output = o,
                Err(e) => {
                    status = DoneStatus::Failed;
                    error = Some(e.to_string());
                }
            }
        }
        let id = run_id(graph, &run.partition, name, rerun);
        let now = self.clock.now_ms();
        let first_due_ms = records.iter().map(|d| d.first_due_ms).min().unwrap_or(now);
        let started_ms = records.iter().filter_map(|d| d.started_ms).min();
        let attempts = records.iter().map(|d| d.attempts).sum();
        let failures = records.iter().map(|d| d.failures).sum();
        let produces: Vec<String> = if status == DoneStatus::Succeeded {
            node.produces.iter().map(|a| a.to_string()).collect()
        } else {
            Vec::new()
        };
        let pool = node.pool.to_string();
        let task = node.task.task.to_string();
        let counts = settled.counts;
        let store = self.store.clone();
        let dkey = done_key(&id);
        let rid = id.clone();
        crate::blocking::run(move || -> Result<(), crate::store::StoreError> {
            let (output, output_blob) = if output.len() > BLOB_INLINE_BYTES_MAX {
                (Vec::new(), Some(store.write_blob(&output)?))
            } else {
                (output, None)
            };
            let record = DoneRecord {
                id: 0,
                key: rid.clone(),
                task,
                pool,
                status,
                attempts,
                deferrals: 0,
                failures,
                error,
                output,
                output_blob: output_blob.clone(),
                first_due_ms,
                started_ms,
                finished_ms: now,
                pokes: 0,
                members: Some(Box::new(counts)),
                worker: None,
                artifacts,
            };
            let mut puts = vec![(dkey.clone(), store.encode("node record", &record)?)];
            if let Some(b) = &output_blob {
                puts.extend(store.blob_index_puts(&dkey, b)?);
            }
            for asset in &produces {
                let event = crate::records::asset::AssetEvent {
                    asset: asset.clone(),
                    key: rid.clone(),
                    at_ms: now,
                };
                puts.push((
                    crate::records::asset::asset_event_key(asset, &rid),
                    store.encode("asset event", &event)?,
                ));
            }
            let written = store.put_batch(&puts, &[]);
            if let Some(b) = &output_blob {
                store.unpin_blob(b);
            }
            written
        })
        .await??;
        tracing::info!(run_id = %id, status = %status, total = counts.total, succeeded = counts.succeeded, failed = counts.failed, skipped = counts.skipped, "mapped node ended");
        let status = crate::records::graph::node_status(status);
        self.record_node(p, idx, rerun, status).await
    }

    /// Node `idx` cannot have members (`fault` says why): it fails.
    async fn fail_mapped(&mut self, p: &str, idx: usize, rerun: u32, fault: String) -> Res<()> {
        let run = self.runs.get(p).ok_or("the run left")?;
        let node = run.graph.node_at(idx);
        let id = run_id(
            self.graph.as_str(),
            &run.partition,
            node.name.as_str(),
            rerun,
        );
        let now = self.clock.now_ms();
        let record = DoneRecord {
            id: 0,
            key: id.clone(),
            task: node.task.task.to_string(),
            pool: node.pool.to_string(),
            status: DoneStatus::Failed,
            attempts: 0,
            deferrals: 0,
            failures: 0,
            error: Some(fault.clone()),
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
        let bytes = self.store.encode("node record", &record)?;
        let store = self.store.clone();
        let key = done_key(&id);
        crate::blocking::run(move || store.put_batch(&[(key, bytes)], &[])).await??;
        tracing::warn!(run_id = %id, error = %fault, "mapped node failed: it has no items");
        self.record_node(p, idx, rerun, NodeStatus::Failed).await
    }

    /// Cancels the members of node `idx` of `run` at its expected
    /// generation that have not ended. Returns how many were live.
    pub(super) async fn cancel_members(&self, run: &ActiveRun, idx: usize) -> Res<usize> {
        let rerun = run.expected(idx);
        let name = run.graph.node_at(idx).name.as_str();
        let graph = self.graph.as_str();
        let keys: Vec<String> = match run.maps.get(&idx).filter(|m| m.rerun == rerun) {
            Some(m) => m
                .members
                .unended()
                .filter(|&i| m.ledger.sources[i] == rerun)
                .map(|i| member_id(graph, &run.partition, name, rerun, i as u32))
                .collect(),
            None => {
                match self
                    .store
                    .get::<Ledger>(&ledger_key(graph, &run.partition, name, rerun))?
                {
                    Some(l) => l
                        .sources
                        .iter()
                        .enumerate()
                        .filter(|(_, &s)| s == rerun)
                        .map(|(i, _)| member_id(graph, &run.partition, name, rerun, i as u32))
                        .collect(),
                    None => Vec::new(),
                }
            }
        };
        if keys.is_empty() {
            return Ok(0);
        }
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let answers = ractor::call_t!(queue, QueueMsg::CancelMany, QUEUE_CALL_MS, keys)
            .map_err(|e| format!("cancel of members: {e}"))?;
        let n = answers
            .iter()
            .filter(|a| matches!(a, Cancelled::Cancelled(_)))
            .count();
        tracing::info!(graph, partition = %run.partition, node = name, rerun, cancelled = n, "members cancelled");
        Ok(n)
    }

    /// Whether node `idx` of `run` has members at its expected generation
    /// (a ledger), so that a mark must go past that generation.
    pub(super) fn has_members(&self, run: &ActiveRun, idx: usize) -> Res<bool> {
        let rerun = run.expected(idx);
        if run.maps.get(&idx).is_some_and(|m| m.rerun == rerun) {
            return Ok(true);
        }
        Ok(self.store.contains(&ledger_key(
            self.graph.as_str(),
            &run.partition,
            run.graph.node_at(idx).name.as_str(),
            rerun,
        ))?)
    }

    /// Deletes the dead letters of the members of generation `rerun` of
    /// node `name` (a rerun or a mark superseded them).
    pub(super) async fn drop_member_letters(
        &self,
        run: &ActiveRun,
        name: &str,
        rerun: u32,
    ) -> Res<()> {
        let prefix = format!(
            "{}{}/",
            crate::records::keys::DEAD_PREFIX,
            run_id(self.graph.as_str(), &run.partition, name, rerun)
        );
        let store = self.store.clone();
        crate::blocking::run(move || store.delete_prefix(&prefix)).await??;
        Ok(())
    }
}
