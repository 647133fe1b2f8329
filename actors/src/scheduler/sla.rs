//! SLAs in the scheduler (`sla` on a graph or a node): a run still active
//! past its deadline, or a node of it not succeeded or skipped by then,
//! has missed ([`weir_core::sla`] decides). Each miss is recorded once per
//! run and node, emits `sla_missed` and runs the graph's `on_sla_miss`.
//!
//! Order, for once-only across a crash: the notification ticket is
//! enqueued first, under a key named by the miss (the queue refuses the
//! same key again); then the miss record is created by a compare-and-put
//! that writes only where nothing is; then the event goes out. A crash
//! before the record finds the miss again at the next start and enqueues
//! the same key (a no-op); after it, the record is found and nothing is
//! repeated. One timer at a time, for the earliest deadline not yet
//! handled, re-armed after each pass and as runs start; the scheduler's
//! start checks at once, so a deadline passed while the engine was down is
//! a miss at the start.

use std::sync::Arc;
use std::time::Duration;

use weir_core::duration::human_ms;
use weir_core::graph::POOL_DEFAULT;
use weir_core::queue::Job;
use weir_core::readiness::NodeState;
use weir_core::sla::{anchor, deadline_ms, missed};

use crate::events::EngineEvent;
use crate::msg::queue::Enqueued;
use crate::msg::scheduler::SchedulerMsg;
use crate::records::sla::{sla_key, SlaMiss};
use crate::store::Expiring;
use crate::views::run::state_name;

use super::notice::{notify_policy, NotifyInput, RunReport, NOTIFY_KEY_PREFIX, NOTIFY_TIMEOUT_MS};
use super::state::{ActiveRun, Res, SchedulerState};

/// One SLA of a run: the node it is of (`None`: the run's), its length and
/// its deadline.
struct Due {
    node: Option<usize>,
    sla_ms: u64,
    deadline_ms: u64,
}

/// Every SLA of `run`, with its deadline.
fn dues(run: &ActiveRun) -> Vec<Due> {
    let def = run.graph.def();
    let started = run
        .record
        .not_before_ms
        .unwrap_or(run.record.requested_at_ms)
        .max(run.record.requested_at_ms);
    let (_, at) = anchor(&run.partition, def.zone(), started);
    let mut out = Vec::new();
    if let Some(sla_ms) = def.sla_ms {
        out.push(Due {
            node: None,
            sla_ms,
            deadline_ms: deadline_ms(at, sla_ms),
        });
    }
    for i in 0..run.graph.len() {
        if let Some(sla_ms) = run.graph.node_at(i).sla_ms {
            out.push(Due {
                node: Some(i),
                sla_ms,
                deadline_ms: deadline_ms(at, sla_ms),
            });
        }
    }
    out
}

/// Whether what an SLA is of is done: a node succeeded or skipped (the run,
/// while active, is not).
fn done(run: &ActiveRun, node: Option<usize>) -> bool {
    node.is_some_and(|i| {
        matches!(
            run.tracker.state(i),
            NodeState::Succeeded | NodeState::Skipped
        )
    })
}

/// The queue key of a miss's notification: one per miss.
pub fn sla_notify_key(graph: &str, partition: &str, node: Option<&str>) -> String {
    format!(
        "{NOTIFY_KEY_PREFIX}{graph}:{partition}:sla_missed:{}",
        node.unwrap_or(crate::records::sla::RUN_SLA)
    )
}

impl SchedulerState {
    /// The SLA key of `node` of run `p`.
    fn sla_key_of(&self, p: &str, run: &ActiveRun, node: Option<usize>) -> String {
        sla_key(
            self.graph.as_str(),
            p,
            node.map(|i| run.graph.node_at(i).name.as_str()),
        )
    }

    /// Arms the timer for the earliest deadline not handled yet, unless one
    /// as early is armed already.
    pub(super) fn arm_sla(&mut self) {
        let next = self
            .runs
            .iter()
            .flat_map(|(p, run)| {
                dues(run)
                    .into_iter()
                    .filter(|d| !done(run, d.node))
                    .filter(|d| !self.sla_seen.contains(&self.sla_key_of(p, run, d.node)))
                    .map(|d| d.deadline_ms)
                    .collect::<Vec<_>>()
            })
            .min();
        let Some(next) = next else { return };
        if self.sla_armed.is_some_and(|at| at <= next) {
            return;
        }
        let Some(me) = &self.myself else { return };
        let wait = next.saturating_sub(self.clock.now_ms());
        me.send_after(Duration::from_millis(wait), || SchedulerMsg::SlaCheck);
        self.sla_armed = Some(next);
    }

    /// Records every miss due now, then arms the next deadline.
    pub(super) async fn sla_check(&mut self) -> Res<()> {
        self.sla_armed = None;
        let now = self.clock.now_ms();
        let mut found = Vec::new();
        for (p, run) in &self.runs {
            for d in dues(run) {
                let key = self.sla_key_of(p, run, d.node);
                if missed(now, d.deadline_ms, done(run, d.node)) && !self.sla_seen.contains(&key) {
                    found.push((p.clone(), d, key));
                }
            }
        }
        for (p, d, key) in found {
            self.sla_miss(&p, d, key).await?;
        }
        self.arm_sla();
        Ok(())
    }

    /// Records one miss (once), after enqueueing its notification.
    async fn sla_miss(&mut self, p: &str, d: Due, key: String) -> Res<()> {
        if self.store.contains(&key)? {
            // Recorded before a restart.
            self.sla_seen.insert(key);
            return Ok(());
        }
        let Some(run) = self.runs.get(p) else {
            return Ok(());
        };
        let def = run.graph.def();
        let now = self.clock.now_ms();
        let started = run
            .record
            .not_before_ms
            .unwrap_or(run.record.requested_at_ms)
            .max(run.record.requested_at_ms);
        let (anchor_kind, anchor_ms) = anchor(&run.partition, def.zone(), started);
        let node = d.node.map(|i| run.graph.node_at(i).name.to_string());
        let state = match d.node {
            Some(i) => state_name(run.tracker.state(i)).to_string(),
            None => run.record.state.to_string(),
        };
        let miss = SlaMiss {
            graph: self.graph.to_string(),
            partition: p.to_string(),
            node: node.clone(),
            sla: human_ms(d.sla_ms),
            sla_ms: d.sla_ms,
            anchor: anchor_kind.as_str().to_string(),
            anchor_ms,
            deadline_ms: d.deadline_ms,
            deadline: def.zone().rfc3339(d.deadline_ms),
            detected_at_ms: now,
            state,
        };
        let retention_ms = run.record.retention_ms;
        if let Some(spec) = def.on_sla_miss.clone() {
            let report = RunReport {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                state: run.record.state,
                definition: run.record.definition.clone(),
                params: super::state::run_params(run),
                requested_at_ms: run.record.requested_at_ms,
                settled_at_ms: now,
                duration_ms: now.saturating_sub(run.record.requested_at_ms),
                counts: Default::default(),
                nodes: Vec::new(),
                nodes_omitted: 0,
                zone: def.timezone,
            };
            let input = NotifyInput {
                config: spec.config.clone(),
                report,
                sla_miss: Some(miss.clone()),
            };
            let nkey = sla_notify_key(self.graph.as_str(), p, node.as_deref());
            let payload = weir_core::codec::encode(&input)
                .map_err(|e| format!("notification {nkey}: {e}"))?;
            let job = Job {
                key: Arc::from(nkey.as_str()),
                task: Arc::from(spec.task.as_str()),
                pool: Arc::from(POOL_DEFAULT),
                target: None,
                due_ms: now,
                payload,
                policy: notify_policy(),
                timeout_ms: Some(NOTIFY_TIMEOUT_MS),
                notify: None,
                retention_ms: None,
                priority: 0,
                sensor: None,
                produces: Vec::new(),
            };
            match self.enqueue(vec![job]).await?.pop() {
                Some(Ok(Enqueued::New(_))) => {
                    tracing::info!(graph = %self.graph, partition = p, key = %nkey, "SLA miss notification enqueued")
                }
                Some(Ok(_)) => {
                    tracing::debug!(graph = %self.graph, partition = p, key = %nkey, "SLA miss notification exists already")
                }
                Some(Err(e)) => return Err(format!("notification {nkey}: {e}").into()),
                None => return Err("one enqueue answer for one notification".into()),
            }
        }
        let bytes = self.store.encode("SLA miss", &miss)?;
        let store = self.store.clone();
        let k = key.clone();
        let expiring = Expiring {
            at_ms: now.saturating_add(retention_ms),
            key: key.clone(),
        };
        let written = tokio::task::spawn_blocking(move || {
            store.compare_and_put(&k, None, Some(&bytes), &[expiring], &[])
        })
        .await??;
        self.sla_seen.insert(key);
        if written {
            tracing::warn!(graph = %self.graph, partition = p, node = ?node, sla = %miss.sla, deadline = %miss.deadline, "SLA missed");
            let _ = self.events.send(EngineEvent::SlaMissed {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                node,
                deadline_ms: d.deadline_ms,
            });
        }
        Ok(())
    }
}
