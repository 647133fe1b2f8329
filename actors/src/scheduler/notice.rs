//! Notifications of settled runs: a graph's `on_failure` and `on_success`
//! tasks, run once per settle with the run's summary.
//!
//! When a run settles failed or complete (by its last node, or by an
//! operator's mark), and its definition names a task for that outcome, the
//! scheduler builds the run's [`RunReport`] and enqueues one ticket of that
//! task ([`NotifyInput`] as its payload): just before it writes the
//! settle (after, for a mark). The ticket is journaled like any other, so
//! once enqueued it survives a crash and runs; it has its own
//! small retry ([`NOTIFY_ATTEMPTS_MAX`] attempts with doubling waits) and
//! timeout, runs in the pool `default`, and tells no scheduler when it
//! ends: it can neither fail nor hold back the run, which is settled
//! before it is enqueued. A notification whose attempts all fail is
//! logged and kept as a dead letter, from where `weir dead --requeue`
//! runs it again.
//!
//! Once per settle: the ticket's key names the graph, the partition, the
//! state and the run's generation (the sum of its expected rerun counts,
//! which every rerun and mark raises), so a settle repeated after a crash
//! (the notification was journaled, the settle was not written) enqueues
//! the same key, which the queue refuses, and a later settle after a rerun
//! gets a new one. What is not covered: a crash while the notification
//! runs runs it again (as any ticket's attempt); a crash between a mark's
//! write and its notification's enqueue loses that one; and a notification
//! may start a moment before the run reads as settled. Cancelled runs
//! notify nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_core::graph::{TaskSpec, POOL_DEFAULT};
use weir_core::queue::Job;
use weir_core::readiness::{current_records, NodeState};
use weir_core::retry::RetryPolicy;

use crate::msg::queue::Enqueued;
use crate::records::graph::{GraphRunRecord, RunState};
use crate::views::run::{latest_node_records, state_name};

use super::state::{Res, SchedulerState};

/// Attempts of a notification, the first included.
pub const NOTIFY_ATTEMPTS_MAX: u32 = 3;
/// The wait before a notification's first retry; each next one doubles.
pub const NOTIFY_BACKOFF_INITIAL_MS: u64 = 1_000;
/// The longest wait between a notification's attempts.
pub const NOTIFY_BACKOFF_MAX_MS: u64 = 10_000;
/// How long one attempt of a notification may run.
pub const NOTIFY_TIMEOUT_MS: u64 = 60_000;
/// The longest node error a summary keeps (its head).
pub const NOTIFY_ERROR_BYTES_MAX: usize = 2 << 10;
/// The summary's node list is bounded by this many bytes (roughly): past
/// it, only the nodes that did not succeed are listed, and the count of
/// those left out is given.
pub const NOTIFY_NODES_BYTES_MAX: usize = 256 << 10;

/// A node of a settled run, as its notification sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node.
    pub node: String,
    /// succeeded, failed, skipped, upstream_failed, cancelled.
    pub state: String,
    /// The rerun count of its current record.
    pub rerun: u32,
    /// Attempts of its current record.
    pub attempts: u32,
    /// Its error, cut to [`NOTIFY_ERROR_BYTES_MAX`].
    pub error: Option<String>,
    /// When its last attempt started.
    pub started_ms: Option<u64>,
    /// When it ended.
    pub finished_ms: Option<u64>,
}

/// A settled run's summary: what a notification reads on its stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// complete or failed.
    pub state: RunState,
    /// The definition's content hash.
    pub definition: String,
    /// The run's params.
    pub params: BTreeMap<String, String>,
    /// When it started.
    pub requested_at_ms: u64,
    /// When it settled.
    pub settled_at_ms: u64,
    /// settled - requested.
    pub duration_ms: u64,
    /// Nodes by state.
    pub counts: BTreeMap<String, usize>,
    /// Its nodes, in topological order (see [`NOTIFY_NODES_BYTES_MAX`]).
    pub nodes: Vec<NodeReport>,
    /// Nodes left out of `nodes` for its bound (succeeded ones).
    pub nodes_omitted: usize,
    /// The graph's zone; absent for UTC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<weir_core::zone::Zone>,
}

/// The payload of a notification ticket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotifyInput {
    /// The notification task's config (for `weir`'s: argv and cwd).
    pub config: serde_json::Value,
    /// The run's summary.
    pub report: RunReport,
    /// For an `on_sla_miss` notification: the miss, which is its stdin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_miss: Option<crate::records::sla::SlaMiss>,
}

/// What every notification's queue key starts with.
pub const NOTIFY_KEY_PREFIX: &str = "notify:";

/// The queue key of the notification of run `partition` of `graph`
/// settling in `state` at generation `generation`: one per settle.
pub fn notify_key(graph: &str, partition: &str, state: RunState, generation: u64) -> String {
    format!("{NOTIFY_KEY_PREFIX}{graph}:{partition}:{state}:{generation}")
}

/// The retry policy of notifications.
pub fn notify_policy() -> RetryPolicy {
    RetryPolicy {
        attempts_max: NOTIFY_ATTEMPTS_MAX,
        initial_ms: NOTIFY_BACKOFF_INITIAL_MS,
        multiplier: 2.0,
        max_ms: NOTIFY_BACKOFF_MAX_MS,
        ..RetryPolicy::default()
    }
}

/// `text` cut to at most `max` bytes, on a char boundary.
fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

impl SchedulerState {
    /// Enqueues the notification of run `p`, which settles as `record`
    /// says with its nodes in `states` (by index), if its definition names
    /// one for its state. Never fails the settle: a failure is logged.
    pub(super) async fn notify_settled(
        &mut self,
        p: &str,
        record: &GraphRunRecord,
        states: &[NodeState],
    ) {
        if let Err(e) = self.try_notify(p, record, states).await {
            tracing::warn!(graph = %self.graph, partition = p, state = %record.state, error = %e, "notification of a settled run not enqueued");
        }
    }

    async fn try_notify(
        &mut self,
        p: &str,
        record: &GraphRunRecord,
        states: &[NodeState],
    ) -> Res<()> {
        let state = record.state;
        let Some(run) = self.runs.get(p) else {
            return Ok(());
        };
        let spec: Option<&TaskSpec> = match state {
            RunState::Failed => run.graph.def().on_failure.as_ref(),
            RunState::Complete => run.graph.def().on_success.as_ref(),
            RunState::Active | RunState::Cancelled | RunState::Withdrawn => None,
        };
        let zone = run.graph.def().timezone;
        let Some(spec) = spec.cloned() else {
            return Ok(());
        };
        let graph = run.graph.clone();
        let partition = run.partition.clone();
        let store = self.store.clone();
        let latest = crate::blocking::run({
            let (graph, partition) = (graph.clone(), partition.clone());
            move || latest_node_records(&store, &graph, &partition)
        })
        .await??;
        let current = current_records(&record.expected_reruns, &latest);
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut nodes = Vec::with_capacity(graph.len());
        let mut bytes = 0usize;
        for &i in graph.topological_order() {
            let name = graph.node_at(i).name.as_str();
            let st = state_name(states[i]).to_string();
            *counts.entry(st.clone()).or_default() += 1;
            let n = match current.get(name) {
                Some(r) => NodeReport {
                    node: name.to_string(),
                    state: st,
                    rerun: r.rerun,
                    attempts: r.done.attempts,
                    error: r
                        .done
                        .error
                        .as_deref()
                        .map(|e| head(e, NOTIFY_ERROR_BYTES_MAX)),
                    started_ms: r.done.started_ms,
                    finished_ms: Some(r.done.finished_ms),
                },
                None => NodeReport {
                    node: name.to_string(),
                    state: st,
                    rerun: record.expected_reruns.get(name).copied().unwrap_or(0),
                    attempts: 0,
                    error: None,
                    started_ms: None,
                    finished_ms: None,
                },
            };
            bytes += n.node.len() + n.error.as_ref().map_or(0, String::len) + 120;
            nodes.push(n);
        }
        let mut nodes_omitted = 0;
        if bytes > NOTIFY_NODES_BYTES_MAX {
            let mut kept = Vec::new();
            let mut budget = 0usize;
            for n in nodes {
                let cost = n.node.len() + n.error.as_ref().map_or(0, String::len) + 120;
                if n.state != "succeeded" && budget + cost <= NOTIFY_NODES_BYTES_MAX {
                    budget += cost;
                    kept.push(n);
                } else {
                    nodes_omitted += 1;
                }
            }
            nodes = kept;
        }
        let settled_at_ms = record.settled_at_ms.unwrap_or_else(|| self.clock.now_ms());
        let generation: u64 = record.expected_reruns.values().map(|&r| u64::from(r)).sum();
        let key = notify_key(self.graph.as_str(), p, state, generation);
        let input = NotifyInput {
            sla_miss: None,
            config: spec.config.clone(),
            report: RunReport {
                graph: self.graph.to_string(),
                partition: p.to_string(),
                state,
                definition: record.definition.clone(),
                params: record.params.clone(),
                requested_at_ms: record.requested_at_ms,
                settled_at_ms,
                duration_ms: settled_at_ms.saturating_sub(record.requested_at_ms),
                counts,
                nodes,
                nodes_omitted,
                zone,
            },
        };
        if self.enqueue_notification(&key, &spec.task, &input).await? {
            tracing::info!(graph = %self.graph, partition = p, state = %state, key = %key, task = %spec.task, "notification enqueued")
        } else {
            tracing::debug!(graph = %self.graph, partition = p, key = %key, "notification of this settle exists already")
        }
        Ok(())
    }

    /// Enqueues the notification `input` as one ticket of `task` under
    /// `key` (one key per notification, so a repeat after a crash is
    /// refused by the queue): in the pool `default`, with the
    /// notifications' retry and timeout, telling no scheduler when it
    /// ends. `true` when it is new, `false` when the key exists already.
    pub(super) async fn enqueue_notification(
        &self,
        key: &str,
        task: &weir_core::names::Name,
        input: &NotifyInput,
    ) -> Res<bool> {
        // The key is no run id (it has no `/`): nothing takes the
        // notification's end for a node's.
        debug_assert!(crate::records::keys::parse_run_id(key).is_none());
        let payload =
            weir_core::codec::encode(input).map_err(|e| format!("notification {key}: {e}"))?;
        let job = Job {
            key: Arc::from(key),
            task: Arc::from(task.as_str()),
            pool: Arc::from(POOL_DEFAULT),
            target: None,
            due_ms: self.clock.now_ms(),
            payload,
            policy: notify_policy(),
            timeout_ms: Some(NOTIFY_TIMEOUT_MS),
            notify: None,
            retention_ms: None,
            priority: 0,
            sensor: None,
            produces: Vec::new(),
        };
        let answer = self
            .enqueue(vec![job])
            .await?
            .pop()
            .ok_or("one enqueue answer for one notification")?;
        match answer {
            Ok(Enqueued::New(_)) => Ok(true),
            Ok(Enqueued::Live(_) | Enqueued::Done) => Ok(false),
            Err(e) => Err(format!("notification {key}: {e}").into()),
        }
    }
}
