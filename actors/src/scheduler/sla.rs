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

use weir_core::duration::human_ms;
use weir_core::readiness::NodeState;
use weir_core::sla::{anchor, deadline_ms, missed, Anchor};

use crate::events::EngineEvent;
use crate::msg::scheduler::SchedulerMsg;
use crate::records::sla::{sla_key, SlaMiss};
use crate::store::Expiring;
use crate::views::run::state_name;

use super::notice::{NotifyInput, RunReport, NOTIFY_KEY_PREFIX};
use super::state::{ActiveRun, Res, SchedulerState};

/// One SLA of a run: the node it is of (`None`: the run's), its length,
/// what it counts from, and its deadline.
struct Due {
    node: Option<usize>,
    sla_ms: u64,
    anchor: (Anchor, u64),
    deadline_ms: u64,
}

/// Every SLA of `run`, with its deadline.
fn dues(run: &ActiveRun) -> Vec<Due> {
    let def = run.graph.def();
    let from = anchor(&run.partition, def.zone(), run.record.started_ms());
    let due = |node, sla_ms| Due {
        node,
        sla_ms,
        anchor: from,
        deadline_ms: deadline_ms(from.1, sla_ms),
    };
    let own = def.sla_ms.map(|sla_ms| due(None, sla_ms));
    let nodes =
        (0..run.graph.len()).filter_map(|i| Some(due(Some(i), run.graph.node_at(i).sla_ms?)));
    own.into_iter().chain(nodes).collect()
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
        self.sla_armed = self.arm_at(self.sla_armed, next, || SchedulerMsg::SlaCheck);
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
        let (anchor_kind, anchor_ms) = d.anchor;
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
            if self.enqueue_notification(&nkey, &spec.task, &input).await? {
                tracing::info!(graph = %self.graph, partition = p, key = %nkey, "SLA miss notification enqueued")
            } else {
                tracing::debug!(graph = %self.graph, partition = p, key = %nkey, "SLA miss notification exists already")
            }
        }
        let bytes = self.store.encode("SLA miss", &miss)?;
        let store = self.store.clone();
        let k = key.clone();
        let expiring = Expiring {
            at_ms: now.saturating_add(retention_ms),
            key: key.clone(),
        };
        let written = crate::blocking::run(move || {
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
