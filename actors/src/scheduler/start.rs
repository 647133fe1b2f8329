//! Starting runs and submitting nodes: a run is created at most once per
//! partition (a withdrawn one is revived one rerun on), its ready nodes are
//! built into jobs carrying their upstreams' records and submitted to the
//! queue, whose idempotent enqueue makes a repeated submit a no-op.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use ractor::ActorRef;
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::queue::Job;
use weir_core::readiness::RunTracker;

use crate::events::EngineEvent;
use crate::msg::queue::{Enqueued, QueueMsg};
use crate::msg::scheduler::StartOutcome;
use crate::records::done::DoneRecord;
use crate::records::graph::{GraphRunRecord, NodeRecord, RunState, TaskInput, UpstreamRecord};
use crate::records::keys::{done_key, run_id, run_key};

use super::settings::QUEUE_CALL_MS;
use super::state::{
    node_job, revive, run_due_ms, run_params, ActiveRun, JobsOf, Res, SchedulerState,
};

impl SchedulerState {
    pub(super) async fn start_runs(
        &mut self,
        asked: Vec<(Partition, Option<u64>)>,
        given: &BTreeMap<String, String>,
    ) -> Res<Vec<StartOutcome>> {
        let hash = self
            .adopted
            .clone()
            .ok_or_else(|| format!("graph {} has no adopted definition", self.graph))?;
        let graph = self.graph_def(&hash)?;
        // Refused before anything is written: a start with a param the
        // definition does not declare starts nothing.
        let params = weir_core::params::resolve(self.graph.as_str(), &graph.def().params, given)
            .map_err(|e| e.to_string())?;
        // Each window as the graph's zone names it (`2026-10-25T01` in
        // Berlin is `2026-10-25T01:00+02:00`): one run per window, whatever
        // way it was asked for. A window the zone does not have starts
        // nothing.
        let zone = graph.def().zone();
        let asked = asked
            .into_iter()
            .map(|(p, at)| p.in_zone(zone).map(|p| (p, at)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("graph {}: {e}", self.graph))?;
        // Every run record is created (at most once per partition) in one
        // blocking pass and made durable by one sync, then the ready nodes
        // of every new run go to the queue together: a burst of starts (a
        // backfill, 10,000 keys due at once) costs a few flushes, not two
        // per run.
        let now = self.clock.now_ms();
        let mut writes = Vec::with_capacity(asked.len());
        for (partition, not_before_ms) in &asked {
            let record = GraphRunRecord {
                definition: hash.clone(),
                state: RunState::Active,
                requested_at_ms: now,
                settled_at_ms: None,
                expected_reruns: BTreeMap::new(),
                retention_ms: graph.def().retention_ms,
                params: params.clone(),
                not_before_ms: not_before_ms.filter(|at| *at > now),
                failure: None,
            };
            writes.push((run_key(self.graph.as_str(), partition), record));
        }
        let store = self.store.clone();
        let names: Vec<Name> = (0..graph.len())
            .map(|i| graph.node_at(i).name.clone())
            .collect();
        // Per partition: the record this call wrote (new, or a withdrawn
        // run revived), or `None` when a run exists.
        let created: Vec<Option<(GraphRunRecord, Vec<u8>)>> = crate::blocking::run(move || {
            let mut created = Vec::with_capacity(writes.len());
            for (k, record) in writes {
                let bytes = store.encode("run record", &record)?;
                if store.compare_and_put_unsynced(&k, None, Some(&bytes), &[], &[])? {
                    created.push(Some((record, bytes)));
                    continue;
                }
                created.push(revive(&store, &k, record, &names)?);
            }
            if created.iter().any(|c| c.is_some()) {
                store.sync()?;
            }
            Ok::<_, crate::store::StoreError>(created)
        })
        .await??;
        let partitions: Vec<Partition> = asked.into_iter().map(|(p, _)| p).collect();
        let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
        for (partition, created) in partitions.iter().zip(&created) {
            let Some((record, bytes)) = created.clone() else {
                continue;
            };
            tracing::info!(graph = %self.graph, partition = %partition, definition = %hash, params = ?record.params, "graph run started");
            let _ = self.events.send(EngineEvent::RunStarted {
                graph: self.graph.to_string(),
                partition: partition.to_string(),
            });
            let tracker = RunTracker::new(&graph, &BTreeMap::<Name, NodeRecord>::new());
            // Every node ready at once: the roots, and any node whose rule
            // needs nothing of its upstreams (`always`), which no upstream's
            // record would make ready later.
            let ready: Vec<usize> = tracker.ready().collect();
            let p = partition.to_string();
            self.runs.insert(
                p.clone(),
                ActiveRun {
                    partition: partition.clone(),
                    graph: graph.clone(),
                    record,
                    bytes,
                    tracker,
                    recorded: vec![None; graph.len()],
                    submitted: HashSet::new(),
                    maps: HashMap::new(),
                },
            );
            groups.push((p, ready));
        }
        self.arm_run_timeouts();
        self.arm_sla();
        let mut submitted = self.submit_many(groups).await?.into_iter();
        let mut out = Vec::with_capacity(partitions.len());
        for (partition, created) in partitions.iter().zip(created) {
            let p = partition.to_string();
            if created.is_none() {
                out.push(StartOutcome {
                    partition: p,
                    started: false,
                    submitted: Vec::new(),
                });
                continue;
            }
            let ids = submitted.next().ok_or("one submit answer per new run")?;
            out.push(StartOutcome {
                partition: p.clone(),
                started: true,
                submitted: ids.into_iter().map(|(id, _)| id).collect(),
            });
            // A run with nothing ready is settled already (not possible
            // today: roots are always ready), through the normal path.
            self.settle_if_done(&p).await?;
        }
        Ok(out)
    }

    /// [`Self::submit`] for several runs in one go: one enqueue (per
    /// `submit_batch_max` jobs) for all. Answers per run, in order.
    pub(super) async fn submit_many(
        &mut self,
        groups: Vec<(String, Vec<usize>)>,
    ) -> Res<Vec<Vec<(String, bool)>>> {
        // Nodes whose past is not done are held back (depends_on_past).
        let groups = groups
            .into_iter()
            .map(|(p, nodes)| {
                let go = self.past_gate(&p, nodes)?;
                Ok((p, go))
            })
            .collect::<Res<Vec<_>>>()?;
        let mut jobs = Vec::new();
        let mut spans = Vec::with_capacity(groups.len());
        for (p, nodes) in &groups {
            let (j, ids) = self.build_jobs(p, nodes, None)?;
            jobs.extend(j);
            spans.push(ids);
        }
        let mut answers = self.enqueue(jobs).await?.into_iter();
        let mut out = Vec::with_capacity(groups.len());
        for ((p, _), ids) in groups.iter().zip(spans) {
            out.push(self.absorb_answers(p, ids, &mut answers)?);
        }
        // Mapped nodes: their members go to the queue from a top-up.
        for ((p, nodes), got) in groups.iter().zip(out.iter_mut()) {
            for &idx in nodes {
                let mapped = self
                    .runs
                    .get(p)
                    .is_some_and(|r| r.graph.node_at(idx).map.is_some());
                if mapped {
                    got.push(self.kick_mapped(p, idx)?);
                }
            }
        }
        Ok(out)
    }

    /// Takes the enqueue answers of the jobs `ids` of run `p` (one each,
    /// in order): each node is submitted. Returns (run id, newly
    /// submitted).
    pub(super) fn absorb_answers(
        &mut self,
        p: &str,
        ids: Vec<(usize, String)>,
        answers: &mut impl Iterator<Item = Result<Enqueued, String>>,
    ) -> Res<Vec<(String, bool)>> {
        let run = self
            .runs
            .get_mut(p)
            .ok_or("submit to a run that is not active")?;
        let mut got = Vec::with_capacity(ids.len());
        for (idx, id) in ids {
            let answer = answers.next().ok_or("one enqueue answer per job")?;
            let new = match answer {
                Ok(Enqueued::New(_)) => true,
                Ok(Enqueued::Live(_)) | Ok(Enqueued::Done) => false,
                Err(e) => return Err(format!("submit of {id}: {e}").into()),
            };
            run.submitted.insert(idx);
            if new {
                tracing::debug!(run_id = %id, "task instance submitted");
            }
            got.push((id, new));
        }
        Ok(got)
    }

    /// Enqueues jobs in batches of at most `submit_batch_max`; one answer
    /// per job, in order.
    pub(super) async fn enqueue(&self, jobs: Vec<Job>) -> Res<Vec<Result<Enqueued, String>>> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let queue =
            ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or("the queue is not running")?;
        let mut answers = Vec::with_capacity(jobs.len());
        let mut rest = jobs;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(self.settings.submit_batch_max));
            let batch = std::mem::replace(&mut rest, tail);
            let a = ractor::call_t!(queue, QueueMsg::Enqueue, QUEUE_CALL_MS, batch)
                .map_err(|e| format!("submit to the queue: {e}"))?;
            answers.extend(a);
        }
        Ok(answers)
    }

    /// Submits `nodes` of run `p` at their expected rerun counts, with the
    /// records of their upstreams. Returns (run id, newly submitted).
    pub(super) async fn submit(&mut self, p: &str, nodes: &[usize]) -> Res<Vec<(String, bool)>> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        let mut out = self
            .submit_many(vec![(p.to_string(), nodes.to_vec())])
            .await?;
        Ok(out.pop().unwrap_or_default())
    }

    /// The jobs of `nodes` of run `p`, with the ids they answer for. A
    /// mapped node has no job of its own (its members are submitted by
    /// [`SchedulerMsg::MapTopUp`]), so it is left out here.
    pub(super) fn build_jobs(
        &self,
        p: &str,
        nodes: &[usize],
        ahead: Option<(usize, UpstreamRecord)>,
    ) -> Res<JobsOf> {
        let notify: Arc<str> = Arc::from(self.names.scheduler(self.graph.as_str()));
        let now = self.clock.now_ms();
        let run = self
            .runs
            .get(p)
            .ok_or("submit to a run that is not active")?;
        let mut jobs = Vec::with_capacity(nodes.len());
        let mut ids = Vec::with_capacity(nodes.len());
        // Each upstream record is read once per submit: the downstreams of
        // one node, submitted together, share it (a fan-out of 10,000 reads
        // its root once, not 10,000 times).
        let mut read: HashMap<usize, Option<UpstreamRecord>> = HashMap::new();
        // An upstream whose record is not durable yet (a submit ahead of
        // it) has it given here.
        if let Some((u, record)) = ahead {
            read.insert(u, Some(record));
        }
        let params = run_params(run);
        for &idx in nodes {
            if run.graph.node_at(idx).map.is_some() {
                continue;
            }
            let node = run.graph.node_at(idx);
            let rerun = run.expected(idx);
            let id = run_id(
                self.graph.as_str(),
                &run.partition,
                node.name.as_str(),
                rerun,
            );
            let input = self.input_of(run, idx, &mut read, &params, None)?;
            jobs.push(node_job(node, &id, &input, run_due_ms(run, now), &notify)?);
            ids.push((idx, id));
        }
        Ok((jobs, ids))
    }

    /// The task input of node `idx` of `run` (of one of its members, with
    /// `member`), with the records of its upstreams (each read once per
    /// `read`).
    pub(super) fn input_of(
        &self,
        run: &ActiveRun,
        idx: usize,
        read: &mut HashMap<usize, Option<UpstreamRecord>>,
        params: &BTreeMap<String, String>,
        member: Option<crate::records::graph::MemberInput>,
    ) -> Res<TaskInput> {
        let node = run.graph.node_at(idx);
        let mut upstreams = BTreeMap::new();
        for &u in run.graph.upstreams(idx) {
            let un = run.graph.node_at(u).name.as_str();
            let record = match read.get(&u) {
                Some(r) => r.clone(),
                None => {
                    let Some(ur) = run.recorded[u] else { continue };
                    let key = done_key(&run_id(self.graph.as_str(), &run.partition, un, ur));
                    let r = self.store.get::<DoneRecord>(&key)?.map(|d| UpstreamRecord {
                        status: d.status,
                        output: d.output,
                        output_blob: d.output_blob,
                        rerun: ur,
                        artifacts: d.artifacts,
                    });
                    read.insert(u, r.clone());
                    r
                }
            };
            if let Some(r) = record {
                upstreams.insert(un.to_string(), r);
            }
        }
        Ok(TaskInput {
            graph: self.graph.to_string(),
            partition: run.partition.to_string(),
            node: node.name.to_string(),
            rerun: run.expected(idx),
            definition: run.record.definition.clone(),
            config: node.task.config.clone(),
            upstreams,
            params: params.clone(),
            member,
            zone: run.graph.def().timezone,
        })
    }
}
