//! Readiness: the state of every node of one graph run, from the run's node
//! records and the nodes' trigger rules, and when the run is settled.
//!
//! A node record is the terminal outcome of one task instance of a node
//! ([`NodeStatus`]) at a rerun count. The graph run record holds the rerun
//! count it expects of each node that was rerun; a record below it is
//! superseded and reads as absent ([`is_current`], [`current_records`]).
//! A node with a current record is in that record's state. A node without
//! one is decided by its trigger rule over its upstreams' states
//! ([`crate::trigger::decide_counts`]): pending, ready, or — Airflow's early
//! decisions — skipped or upstream-failed at once, which in turn decides its
//! downstreams ([`node_states`]). A run is settled when every node is in a
//! terminal state: complete when each succeeded or was skipped, failed
//! otherwise ([`settled_state`]). No node can stay pending once nothing is
//! ready: a node whose upstreams are all terminal is always decided, so the
//! first pending node in topological order is never stuck.
//!
//! Decided states are recorded. Airflow writes a task's `skipped` or
//! `upstream_failed` to the task instance when it decides it, and weir's
//! scheduler does the same: every [`Change`] to skipped or upstream-failed
//! is written as the node's record at its expected rerun count. That makes
//! the first decision stick, which matters for the one rule whose decision
//! depends on the order its upstreams finish (`all_success` after a skip and
//! a failure, see [`crate::trigger`]), and lets a restart rebuild exactly the
//! states the run had. The pure functions agree with the [`RunTracker`] on
//! records that include those decisions; [`RunTracker::decisions_to_record`]
//! lists the ones a crash left unwritten.
//!
//! The [`RunTracker`] is the incremental form. Airflow re-evaluates every
//! task of a run on each scheduler loop; the tracker keeps, per node, the
//! counts of its upstreams by state, so that one record costs the degrees of
//! the nodes it decides — the recorded node's downstreams, and theirs when
//! an early decision cascades — and never the size of the graph. Its
//! results equal [`node_states`] and [`settled_state`] (property-tested).
//!
//! Reruns follow swale. A rerun of a node runs it again at its next count,
//! and with it every node of its [`rerun_scope`]: the nodes downstream of it
//! through edges into nodes whose rule follows success
//! ([`TriggerRule::follows_success`]). The scheduler writes the next count of
//! the node and of each scoped node that has a record into the graph run's
//! expected counts, then calls [`RunTracker::rerun`] with the same scope.
//! Nodes outside the scope keep their records: an `all_done` reporter or a
//! `one_failed` handler has done its job, and nodes past it are not reached
//! through it.
//!
//! [`TriggerRule::follows_success`]: crate::trigger::TriggerRule::follows_success

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use serde::{Deserialize, Serialize};

use crate::graph::Graph;
use crate::names::Name;
use crate::trigger::{decide_counts, Decision, UpstreamCounts, UpstreamState};

/// The outcome in a node record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// The task succeeded.
    Succeeded,
    /// The task failed: its retries are spent or the failure was permanent.
    Failed,
    /// The node was skipped, by its trigger rule or by its task.
    Skipped,
    /// The node did not run because its upstreams failed.
    UpstreamFailed,
    /// The node was cancelled; its downstreams see it as failed.
    Cancelled,
}

impl NodeStatus {
    /// How a downstream's trigger rule sees this outcome.
    pub fn upstream_state(self) -> UpstreamState {
        match self {
            NodeStatus::Succeeded => UpstreamState::Success,
            NodeStatus::Failed => UpstreamState::Failed,
            NodeStatus::Skipped => UpstreamState::Skipped,
            NodeStatus::UpstreamFailed => UpstreamState::UpstreamFailed,
            NodeStatus::Cancelled => UpstreamState::Cancelled,
        }
    }

    /// Whether a run whose nodes all end like this is complete.
    pub fn is_complete(self) -> bool {
        matches!(self, NodeStatus::Succeeded | NodeStatus::Skipped)
    }
}

/// The state of a node in a graph run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeState {
    /// No current record, and the trigger rule waits for an upstream.
    Pending,
    /// No current record, and the trigger rule is met: the node runs (or
    /// its task instance is queued or running).
    Ready,
    /// Succeeded.
    Succeeded,
    /// Failed.
    Failed,
    /// Skipped.
    Skipped,
    /// Upstream-failed.
    UpstreamFailed,
    /// Cancelled.
    Cancelled,
}

impl NodeState {
    /// The terminal status of this state, `None` for pending and ready.
    pub fn status(self) -> Option<NodeStatus> {
        match self {
            NodeState::Pending | NodeState::Ready => None,
            NodeState::Succeeded => Some(NodeStatus::Succeeded),
            NodeState::Failed => Some(NodeStatus::Failed),
            NodeState::Skipped => Some(NodeStatus::Skipped),
            NodeState::UpstreamFailed => Some(NodeStatus::UpstreamFailed),
            NodeState::Cancelled => Some(NodeStatus::Cancelled),
        }
    }

    /// Whether the node is finished in this run (until a rerun).
    pub fn is_terminal(self) -> bool {
        self.status().is_some()
    }

    /// How a downstream's trigger rule sees this state.
    pub fn upstream_state(self) -> UpstreamState {
        self.status()
            .map_or(UpstreamState::Pending, NodeStatus::upstream_state)
    }

    fn from_decision(decision: Decision) -> Self {
        match decision {
            Decision::Wait => NodeState::Pending,
            Decision::Ready => NodeState::Ready,
            Decision::Skip => NodeState::Skipped,
            Decision::UpstreamFailed => NodeState::UpstreamFailed,
        }
    }
}

impl From<NodeStatus> for NodeState {
    fn from(status: NodeStatus) -> Self {
        match status {
            NodeStatus::Succeeded => NodeState::Succeeded,
            NodeStatus::Failed => NodeState::Failed,
            NodeStatus::Skipped => NodeState::Skipped,
            NodeStatus::UpstreamFailed => NodeState::UpstreamFailed,
            NodeStatus::Cancelled => NodeState::Cancelled,
        }
    }
}

/// What readiness reads of a node record. The stored record (with its
/// attempts, timings and output) implements it; [`Record`] is the bare form.
pub trait Recorded {
    /// The record's outcome.
    fn status(&self) -> NodeStatus;
    /// The rerun count of the task instance the record is of.
    fn rerun(&self) -> u32;
}

/// A node record reduced to what readiness reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Record {
    /// The outcome.
    pub status: NodeStatus,
    /// The rerun count.
    pub rerun: u32,
}

impl Recorded for Record {
    fn status(&self) -> NodeStatus {
        self.status
    }
    fn rerun(&self) -> u32 {
        self.rerun
    }
}

/// How a settled graph run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// Every node succeeded or was skipped.
    Complete,
    /// Some node failed, was upstream-failed or was cancelled.
    Failed,
}

/// Whether a record of `node` at rerun count `rerun` is current in a run
/// that expects the counts `expected`: at or past the expected count (0 for
/// a node that was never rerun).
pub fn is_current(expected: &BTreeMap<Name, u32>, node: &str, rerun: u32) -> bool {
    rerun >= expected.get(node).copied().unwrap_or(0)
}

/// The current records among `records` (the latest record of each node, by
/// node name), given the run's expected rerun counts.
pub fn current_records<R: Recorded + Clone>(
    expected: &BTreeMap<Name, u32>,
    records: &BTreeMap<Name, R>,
) -> BTreeMap<Name, R> {
    records
        .iter()
        .filter(|(name, record)| is_current(expected, name.as_str(), record.rerun()))
        .map(|(name, record)| (name.clone(), record.clone()))
        .collect()
}

/// The state of every node of `graph`, by node index, from the current
/// records of one run (by node name; names that are not nodes of the graph
/// are ignored). O(n + e) decisions, plus a lookup per node.
pub fn node_states<R: Recorded>(graph: &Graph, current: &BTreeMap<Name, R>) -> Vec<NodeState> {
    let mut states = vec![NodeState::Pending; graph.len()];
    for &i in graph.topological_order() {
        states[i] = match current.get(graph.node_at(i).name.as_str()) {
            Some(record) => record.status().into(),
            None => {
                let counts = counts_of(graph, i, &states);
                NodeState::from_decision(decide_counts(graph.rule(i), &counts))
            }
        };
    }
    states
}

fn counts_of(graph: &Graph, idx: usize, states: &[NodeState]) -> UpstreamCounts {
    let upstreams = graph.upstreams(idx);
    let total = u32::try_from(upstreams.len()).expect("edge count fits in u32");
    let mut counts = UpstreamCounts::new(total);
    for &u in upstreams {
        counts.add(states[u].upstream_state());
    }
    counts
}

/// The outcome of a run whose nodes are in `states`, or `None` while a node
/// is pending or ready.
pub fn settled_state(states: &[NodeState]) -> Option<RunOutcome> {
    let mut outcome = RunOutcome::Complete;
    for state in states {
        match state.status() {
            None => return None,
            Some(status) if !status.is_complete() => outcome = RunOutcome::Failed,
            Some(_) => {}
        }
    }
    Some(outcome)
}

/// The nodes a rerun of node `idx` runs again, in topological order: the
/// node itself, and every node reachable from it through edges into nodes
/// whose trigger rule follows success (`all_success`, `one_success`,
/// `none_failed`, `none_failed_min_one_success`). A node with another rule
/// is not in the scope, and the nodes past it are reached only if another
/// path leads to them.
///
/// The scope is the same whether the rerun node succeeded or failed: after
/// a success the scoped nodes ran on its old output; after a failure they
/// hold the upstream-failed or skipped decisions it caused, which must be
/// taken again. (swale applies its scope after a success only; it does not
/// record decisions, weir does.)
pub fn rerun_scope(graph: &Graph, idx: usize) -> Vec<usize> {
    let mut seen = vec![false; graph.len()];
    seen[idx] = true;
    let mut scope = vec![idx];
    let mut stack = vec![idx];
    while let Some(u) = stack.pop() {
        for &d in graph.downstreams(u) {
            if !seen[d] && graph.rule(d).follows_success() {
                seen[d] = true;
                scope.push(d);
                stack.push(d);
            }
        }
    }
    scope.sort_unstable_by_key(|&i| graph.position(i));
    scope
}

/// The nodes a rerun of node `idx` *alone* (without its downstreams) runs
/// again or decides again, in topological order: the node itself, and the
/// nodes downstream of it that hold a decision rather than an outcome —
/// skipped or upstream-failed — reached through nodes that hold one too.
/// Such a decision was taken from the node's old state and must be taken
/// again from its new one (an `all_success` node upstream-failed by the
/// node's failure may run once it succeeds); a node that ran keeps its
/// record, and nothing past it is reached. `states` are the run's current
/// node states ([`RunTracker::states`]).
///
/// Marking a node (an operator sets its outcome, Airflow's "mark
/// success/failed") uses the same scope: the node's downstreams that ran
/// keep their records, and decided ones are decided again.
pub fn rerun_scope_alone(graph: &Graph, idx: usize, states: &[NodeState]) -> Vec<usize> {
    let decided = |i: usize| matches!(states[i], NodeState::Skipped | NodeState::UpstreamFailed);
    let mut seen = vec![false; graph.len()];
    seen[idx] = true;
    let mut scope = vec![idx];
    let mut stack = vec![idx];
    while let Some(u) = stack.pop() {
        for &d in graph.downstreams(u) {
            if !seen[d] && decided(d) {
                seen[d] = true;
                scope.push(d);
                stack.push(d);
            }
        }
    }
    scope.sort_unstable_by_key(|&i| graph.position(i));
    scope
}

/// A node whose state changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Change {
    /// The node's index in the graph.
    pub node: usize,
    /// Its new state.
    pub state: NodeState,
}

/// The node states of one graph run, kept up to date one record at a time.
///
/// It holds, per node, its state and the counts of its upstreams by state;
/// it does not hold the graph (pass the same one to every call). Built in
/// O(n + e) from the run's current records; [`Self::record`] and
/// [`Self::rerun`] cost the degrees of the nodes whose state changes (with
/// a log factor for visiting them in topological order).
#[derive(Debug, Clone)]
pub struct RunTracker {
    states: Vec<NodeState>,
    counts: Vec<UpstreamCounts>,
    ready: BTreeSet<usize>,
    /// Nodes in a terminal state.
    done: usize,
    /// Terminal nodes whose status makes the run failed.
    failing: usize,
    /// Edges walked since the tracker was built: a measure of work.
    edges_visited: u64,
    /// Scratch for the cascade: nodes to decide, by topological position.
    queue: BinaryHeap<Reverse<(usize, usize)>>,
    queued: Vec<bool>,
}

impl RunTracker {
    /// The tracker of a run of `graph` with the current records `current`.
    pub fn new<R: Recorded>(graph: &Graph, current: &BTreeMap<Name, R>) -> Self {
        let states = node_states(graph, current);
        let counts: Vec<UpstreamCounts> = (0..graph.len())
            .map(|i| counts_of(graph, i, &states))
            .collect();
        let edges: usize = (0..graph.len()).map(|i| graph.upstreams(i).len()).sum();
        let tracker = RunTracker {
            ready: (0..states.len())
                .filter(|&i| states[i] == NodeState::Ready)
                .collect(),
            done: states.iter().filter(|s| s.is_terminal()).count(),
            failing: states
                .iter()
                .filter(|s| s.status().is_some_and(|st| !st.is_complete()))
                .count(),
            queued: vec![false; states.len()],
            queue: BinaryHeap::new(),
            edges_visited: edges as u64,
            states,
            counts,
        };
        tracker.assert_invariants();
        tracker
    }

    /// Applies the record of node `idx` with `status`, and returns every
    /// other node whose state changed, in topological order: downstreams
    /// that became ready, and those decided skipped or upstream-failed —
    /// transitively, since a decided node decides its own downstreams. The
    /// caller submits the ready ones and records the decided ones.
    ///
    /// The first record of a node stands: a record for a node that is
    /// already terminal (a redelivered event, or a late record after a
    /// decision) changes nothing and returns no change. Records are written
    /// once per node and rerun count, so a current record is never replaced.
    pub fn record(&mut self, graph: &Graph, idx: usize, status: NodeStatus) -> Vec<Change> {
        self.assert_invariants();
        if self.states[idx].is_terminal() {
            return Vec::new();
        }
        self.set(idx, status.into());
        self.add_downstreams(graph, idx);
        let mut changes = Vec::new();
        self.cascade(graph, &mut changes);
        self.assert_invariants();
        changes
    }

    /// The downstreams of node `idx` that a record of it with `status`
    /// would make ready, without applying it, in the order of
    /// [`Graph::downstreams`]: what a scheduler may submit in the same
    /// durable batch as the record itself. Only direct downstreams: a
    /// node made ready further on follows a decision (skipped or
    /// upstream-failed) that must be recorded first. Empty when `idx` is
    /// terminal (its record would change nothing). Costs the degree of
    /// `idx`.
    pub fn ready_after(&self, graph: &Graph, idx: usize, status: NodeStatus) -> Vec<usize> {
        if self.states[idx].is_terminal() {
            return Vec::new();
        }
        let state = NodeState::from(status).upstream_state();
        let mut out: Vec<usize> = Vec::new();
        for &d in graph.downstreams(idx) {
            if self.states[d].is_terminal()
                || self.states[d] == NodeState::Ready
                || out.contains(&d)
            {
                continue;
            }
            let mut counts = self.counts[d];
            counts.add(state);
            if NodeState::from_decision(decide_counts(graph.rule(d), &counts)) == NodeState::Ready {
                out.push(d);
            }
        }
        out
    }

    /// Resets node `idx` and the nodes of `scope` (normally
    /// [`rerun_scope`]`(graph, idx)`) to not terminal, as when the run's
    /// expected rerun counts pass their records, then decides them again
    /// from their upstreams' states, with the downstreams whose counts
    /// changed. Returns, in topological order, the new state of `idx` and
    /// of every scoped node (changed or not), and every other node whose
    /// state changed. A reset node may be decided at once (an `all_success`
    /// node with another upstream failed is upstream-failed again): the
    /// caller records each decided one at the new count, as its old record
    /// is no longer current.
    pub fn rerun(&mut self, graph: &Graph, idx: usize, scope: &[usize]) -> Vec<Change> {
        self.assert_invariants();
        let mut reset: Vec<usize> = scope.iter().copied().chain([idx]).collect();
        reset.sort_unstable_by_key(|&i| graph.position(i));
        reset.dedup();
        for &r in &reset {
            let old = self.states[r];
            if old.is_terminal() {
                for &d in graph.downstreams(r) {
                    self.edges_visited += 1;
                    self.counts[d].remove(old.upstream_state());
                    self.enqueue(graph, d);
                }
            }
            self.set(r, NodeState::Pending);
            self.enqueue(graph, r);
        }
        let mut changed = Vec::new();
        self.cascade(graph, &mut changed);
        // Every reset node is reported with its new state, changed or not:
        // its record is no longer current, so a decided one is recorded
        // again at the new count. A node outside the reset set changes at
        // most once in a cascade, so its change is one from before the call.
        let is_reset = |i: usize| {
            reset
                .binary_search_by_key(&graph.position(i), |&r| graph.position(r))
                .is_ok()
        };
        let mut changes: Vec<Change> = changed.into_iter().filter(|c| !is_reset(c.node)).collect();
        changes.extend(reset.iter().map(|&i| Change {
            node: i,
            state: self.states[i],
        }));
        changes.sort_unstable_by_key(|c| graph.position(c.node));
        self.assert_invariants();
        changes
    }

    /// Sets node `idx` to `status` whatever its state (an operator's mark),
    /// after resetting the other nodes of `scope` (normally
    /// [`rerun_scope_alone`]) as [`Self::rerun`] does; then decides again
    /// every node whose upstreams changed. Returns, in topological order,
    /// the new state of every reset node (changed or not: each is recorded
    /// again at its new count when decided) and of every other node whose
    /// state changed; not `idx` itself, whose record the caller writes.
    pub fn mark(
        &mut self,
        graph: &Graph,
        idx: usize,
        status: NodeStatus,
        scope: &[usize],
    ) -> Vec<Change> {
        self.assert_invariants();
        let mut reset: Vec<usize> = scope.iter().copied().filter(|&i| i != idx).collect();
        reset.sort_unstable_by_key(|&i| graph.position(i));
        reset.dedup();
        for &r in reset.iter().chain([&idx]) {
            let old = self.states[r];
            if old.is_terminal() {
                for &d in graph.downstreams(r) {
                    self.edges_visited += 1;
                    self.counts[d].remove(old.upstream_state());
                    self.enqueue(graph, d);
                }
            }
            self.set(r, NodeState::Pending);
            if r != idx {
                self.enqueue(graph, r);
            }
        }
        self.set(idx, status.into());
        self.add_downstreams(graph, idx);
        let mut changed = Vec::new();
        self.cascade(graph, &mut changed);
        let is_reset = |i: usize| {
            reset
                .binary_search_by_key(&graph.position(i), |&r| graph.position(r))
                .is_ok()
        };
        let mut changes: Vec<Change> = changed
            .into_iter()
            .filter(|c| !is_reset(c.node) && c.node != idx)
            .collect();
        changes.extend(reset.iter().map(|&i| Change {
            node: i,
            state: self.states[i],
        }));
        changes.sort_unstable_by_key(|c| graph.position(c.node));
        self.assert_invariants();
        changes
    }

    /// The state of node `idx`.
    pub fn state(&self, idx: usize) -> NodeState {
        self.states[idx]
    }

    /// The state of every node, by index.
    pub fn states(&self) -> &[NodeState] {
        &self.states
    }

    /// The counts of node `idx`'s upstreams by state.
    pub fn counts(&self, idx: usize) -> &UpstreamCounts {
        &self.counts[idx]
    }

    /// The ready nodes, by index.
    pub fn ready(&self) -> impl Iterator<Item = usize> + '_ {
        self.ready.iter().copied()
    }

    /// The number of nodes in a terminal state.
    pub fn done(&self) -> usize {
        self.done
    }

    /// The number of nodes.
    pub fn total(&self) -> usize {
        self.states.len()
    }

    /// Whether every node is in a terminal state.
    pub fn is_settled(&self) -> bool {
        self.done == self.states.len()
    }

    /// The run's outcome once settled: [`settled_state`] of [`Self::states`],
    /// in O(1).
    pub fn outcome(&self) -> Option<RunOutcome> {
        if !self.is_settled() {
            None
        } else if self.failing == 0 {
            Some(RunOutcome::Complete)
        } else {
            Some(RunOutcome::Failed)
        }
    }

    /// Edges walked since the tracker was built (building walks each once):
    /// a measure of the work done, for tests and metrics.
    pub fn edges_visited(&self) -> u64 {
        self.edges_visited
    }

    /// The nodes decided skipped or upstream-failed that have no current
    /// record in `current`: decisions a crash left unwritten, which the
    /// caller records. Empty in a run whose decisions were all recorded.
    pub fn decisions_to_record<R: Recorded>(
        &self,
        graph: &Graph,
        current: &BTreeMap<Name, R>,
    ) -> Vec<Change> {
        graph
            .topological_order()
            .iter()
            .filter(|&&i| {
                matches!(
                    self.states[i],
                    NodeState::Skipped | NodeState::UpstreamFailed
                )
            })
            .filter(|&&i| !current.contains_key(graph.node_at(i).name.as_str()))
            .map(|&i| Change {
                node: i,
                state: self.states[i],
            })
            .collect()
    }

    /// Sets node `idx` to `new`, keeping the ready set and the tallies.
    fn set(&mut self, idx: usize, new: NodeState) {
        let old = self.states[idx];
        if old == NodeState::Ready {
            self.ready.remove(&idx);
        }
        if new == NodeState::Ready {
            self.ready.insert(idx);
        }
        let failing = |s: NodeState| s.status().is_some_and(|st| !st.is_complete());
        self.done = self.done + usize::from(new.is_terminal()) - usize::from(old.is_terminal());
        self.failing = self.failing + usize::from(failing(new)) - usize::from(failing(old));
        self.states[idx] = new;
    }

    /// Counts the terminal state of `idx` in its downstreams and queues
    /// those not terminal to be decided.
    fn add_downstreams(&mut self, graph: &Graph, idx: usize) {
        let state = self.states[idx].upstream_state();
        for &d in graph.downstreams(idx) {
            self.edges_visited += 1;
            self.counts[d].add(state);
            self.enqueue(graph, d);
        }
    }

    fn enqueue(&mut self, graph: &Graph, idx: usize) {
        if !self.states[idx].is_terminal() && !self.queued[idx] {
            self.queued[idx] = true;
            self.queue.push(Reverse((graph.position(idx), idx)));
        }
    }

    /// Decides the queued nodes in topological order, so that a node is
    /// decided once, after every upstream whose state this call changes:
    /// deciding it on the first of two upstreams decided in one cascade
    /// could take the decision [`node_states`] would not.
    fn cascade(&mut self, graph: &Graph, changes: &mut Vec<Change>) {
        while let Some(Reverse((_, d))) = self.queue.pop() {
            self.queued[d] = false;
            let old = self.states[d];
            if old.is_terminal() {
                continue;
            }
            let new = NodeState::from_decision(decide_counts(graph.rule(d), &self.counts[d]));
            if new == old {
                continue;
            }
            self.set(d, new);
            changes.push(Change {
                node: d,
                state: new,
            });
            if new.is_terminal() {
                self.add_downstreams(graph, d);
            }
        }
    }

    /// The cheap invariants, at both ends of every transition (debug).
    fn assert_invariants(&self) {
        debug_assert!(self.queue.is_empty(), "no node is left queued");
        debug_assert!(
            self.done <= self.states.len(),
            "done is at most the node count"
        );
        debug_assert!(self.failing <= self.done, "failing nodes are terminal");
        debug_assert!(
            self.ready.len() + self.done <= self.states.len(),
            "ready nodes are not terminal"
        );
        // A pending node has an unfinished upstream, so the first one in
        // topological order has a ready one: nothing ready means settled.
        debug_assert_eq!(
            self.ready.is_empty(),
            self.is_settled(),
            "the run is settled exactly when no node is ready"
        );
    }

    /// Checks every count and tally against the states, in O(n + e). For
    /// tests; too slow for each event of a large run.
    pub fn verify(&self, graph: &Graph) {
        assert_eq!(self.states.len(), graph.len(), "one state per node");
        for i in 0..graph.len() {
            assert_eq!(
                self.counts[i],
                counts_of(graph, i, &self.states),
                "counts of node {i}"
            );
            let state = self.states[i];
            if !state.is_terminal() {
                let decided =
                    NodeState::from_decision(decide_counts(graph.rule(i), &self.counts[i]));
                assert_eq!(state, decided, "node {i} is in the state its counts decide");
            }
            assert_eq!(
                self.ready.contains(&i),
                state == NodeState::Ready,
                "ready set at node {i}"
            );
        }
        assert_eq!(
            self.done,
            self.states.iter().filter(|s| s.is_terminal()).count(),
            "done tally"
        );
        assert_eq!(self.outcome(), settled_state(&self.states), "outcome tally");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::{dag, def, name, node};
    use crate::graph::GraphDef;
    use crate::trigger::TriggerRule;
    use proptest::prelude::*;

    use NodeState as S;
    use NodeStatus::{Cancelled, Failed, Skipped, Succeeded};

    /// A graph of `(name, upstreams, rule)`.
    fn graph(nodes: &[(&str, &[&str], TriggerRule)]) -> Graph {
        let nodes = nodes
            .iter()
            .map(|(n, ups, rule)| {
                let mut nd = node(n, ups);
                nd.trigger_rule = *rule;
                nd
            })
            .collect();
        def(nodes).validate().unwrap()
    }

    fn rec(records: &[(&str, NodeStatus)]) -> BTreeMap<Name, Record> {
        records
            .iter()
            .map(|(n, status)| {
                (
                    name(n),
                    Record {
                        status: *status,
                        rerun: 0,
                    },
                )
            })
            .collect()
    }

    /// Records each `(node, status)` in turn in a tracker, recording its
    /// decisions too, as the scheduler does; checks the tracker against the
    /// pure functions after each step.
    fn run(g: &Graph, steps: &[(&str, NodeStatus)]) -> (RunTracker, BTreeMap<Name, Record>) {
        let mut records: BTreeMap<Name, Record> = BTreeMap::new();
        let mut tracker = RunTracker::new(g, &records);
        for (n, status) in steps {
            let i = g.index_of(n).unwrap();
            records.insert(
                name(n),
                Record {
                    status: *status,
                    rerun: 0,
                },
            );
            for c in tracker.record(g, i, *status) {
                if let Some(status) = c.state.status() {
                    records.insert(g.node_at(c.node).name.clone(), Record { status, rerun: 0 });
                }
            }
            tracker.verify(g);
            assert_eq!(
                tracker.states(),
                node_states(g, &records).as_slice(),
                "after {n} {status:?}"
            );
        }
        (tracker, records)
    }

    #[test]
    fn diamond() {
        use TriggerRule::AllSuccess as All;
        let g = graph(&[
            ("a", &[], All),
            ("b", &["a"], All),
            ("c", &["a"], All),
            ("d", &["b", "c"], All),
        ]);
        let states = |records: &[(&str, NodeStatus)]| node_states(&g, &rec(records));
        assert_eq!(states(&[]), [S::Ready, S::Pending, S::Pending, S::Pending]);
        assert_eq!(
            states(&[("a", Succeeded)]),
            [S::Succeeded, S::Ready, S::Ready, S::Pending]
        );
        // b fails: d is upstream-failed at once, while c still runs.
        let st = states(&[("a", Succeeded), ("b", Failed)]);
        assert_eq!(st, [S::Succeeded, S::Failed, S::Ready, S::UpstreamFailed]);
        assert_eq!(settled_state(&st), None);
        let st = states(&[("a", Succeeded), ("b", Failed), ("c", Succeeded)]);
        assert_eq!(settled_state(&st), Some(RunOutcome::Failed));
        // a fails: everything below is upstream-failed, and the run settles.
        let st = states(&[("a", Failed)]);
        assert_eq!(
            st,
            [
                S::Failed,
                S::UpstreamFailed,
                S::UpstreamFailed,
                S::UpstreamFailed
            ]
        );
        assert_eq!(settled_state(&st), Some(RunOutcome::Failed));
        let st = states(&[
            ("a", Succeeded),
            ("b", Succeeded),
            ("c", Succeeded),
            ("d", Succeeded),
        ]);
        assert_eq!(settled_state(&st), Some(RunOutcome::Complete));

        let (tracker, _) = run(&g, &[("a", Succeeded), ("b", Failed)]);
        assert_eq!(tracker.ready().collect::<Vec<_>>(), [2]);
        assert_eq!(tracker.outcome(), None);
        let (tracker, _) = run(&g, &[("a", Succeeded), ("b", Failed), ("c", Succeeded)]);
        assert_eq!(tracker.outcome(), Some(RunOutcome::Failed));
        assert_eq!(tracker.done(), 4);
    }

    /// Each rule at `x`, after upstreams `a` and `b`, with `y` (all_success)
    /// after `x`: how failures and skips reach `x` and then `y`, per
    /// Airflow's `trigger_rule_dep.py`.
    #[test]
    fn rules_in_a_graph() {
        use TriggerRule::*;
        type Row = (
            TriggerRule,
            &'static [(&'static str, NodeStatus)],
            NodeState,
            NodeState,
        );
        let table: &[Row] = &[
            (
                AllSuccess,
                &[("a", Failed)],
                S::UpstreamFailed,
                S::UpstreamFailed,
            ),
            (AllSuccess, &[("a", Skipped)], S::Skipped, S::Skipped),
            (
                AllSuccess,
                &[("a", Cancelled)],
                S::UpstreamFailed,
                S::UpstreamFailed,
            ),
            (
                AllSuccess,
                &[("a", Succeeded), ("b", Succeeded)],
                S::Ready,
                S::Pending,
            ),
            (AllFailed, &[("a", Failed)], S::Pending, S::Pending),
            (
                AllFailed,
                &[("a", Failed), ("b", Failed)],
                S::Ready,
                S::Pending,
            ),
            (AllFailed, &[("a", Succeeded)], S::Skipped, S::Skipped),
            (AllDone, &[("a", Failed)], S::Pending, S::Pending),
            (
                AllDone,
                &[("a", Failed), ("b", Skipped)],
                S::Ready,
                S::Pending,
            ),
            (
                AllSkipped,
                &[("a", Skipped), ("b", Skipped)],
                S::Ready,
                S::Pending,
            ),
            (AllSkipped, &[("a", Failed)], S::Skipped, S::Skipped),
            (OneSuccess, &[("a", Succeeded)], S::Ready, S::Pending),
            (OneSuccess, &[("a", Failed)], S::Pending, S::Pending),
            (
                OneSuccess,
                &[("a", Failed), ("b", Skipped)],
                S::UpstreamFailed,
                S::UpstreamFailed,
            ),
            (
                OneSuccess,
                &[("a", Skipped), ("b", Skipped)],
                S::Skipped,
                S::Skipped,
            ),
            (OneFailed, &[("a", Cancelled)], S::Ready, S::Pending),
            (
                OneFailed,
                &[("a", Succeeded), ("b", Succeeded)],
                S::Skipped,
                S::Skipped,
            ),
            (OneDone, &[("a", Failed)], S::Ready, S::Pending),
            (
                OneDone,
                &[("a", Skipped), ("b", Skipped)],
                S::Skipped,
                S::Skipped,
            ),
            (
                NoneFailed,
                &[("a", Failed)],
                S::UpstreamFailed,
                S::UpstreamFailed,
            ),
            (
                NoneFailed,
                &[("a", Skipped), ("b", Skipped)],
                S::Ready,
                S::Pending,
            ),
            (
                NoneFailedMinOneSuccess,
                &[("a", Skipped), ("b", Skipped)],
                S::Skipped,
                S::Skipped,
            ),
            (
                NoneFailedMinOneSuccess,
                &[("a", Skipped), ("b", Succeeded)],
                S::Ready,
                S::Pending,
            ),
            (NoneSkipped, &[("a", Skipped)], S::Skipped, S::Skipped),
            (
                NoneSkipped,
                &[("a", Failed), ("b", Succeeded)],
                S::Ready,
                S::Pending,
            ),
            (Always, &[], S::Ready, S::Pending),
        ];
        for (i, (rule, steps, want_x, want_y)) in table.iter().enumerate() {
            let g = graph(&[
                ("a", &[], AllSuccess),
                ("b", &[], AllSuccess),
                ("x", &["a", "b"], *rule),
                ("y", &["x"], AllSuccess),
            ]);
            let (tracker, _) = run(&g, steps);
            let got = (tracker.state(2), tracker.state(3));
            let want = (*want_x, *want_y);
            assert_eq!(
                got, want,
                "#{i}: rule {rule}, upstream {steps:?}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn early_decisions_cascade_in_one_call() {
        use TriggerRule::AllSuccess;
        let g = graph(&[
            ("a", &[], AllSuccess),
            ("b", &["a"], AllSuccess),
            ("c", &["b"], AllSuccess),
            ("d", &["c"], TriggerRule::AllDone),
            ("e", &["d"], AllSuccess),
        ]);
        let mut t = RunTracker::new(&g, &BTreeMap::<Name, Record>::new());
        let changes = t.record(&g, 0, Failed);
        let want = [
            Change {
                node: 1,
                state: S::UpstreamFailed,
            },
            Change {
                node: 2,
                state: S::UpstreamFailed,
            },
            Change {
                node: 3,
                state: S::Ready,
            },
        ];
        assert_eq!(changes, want);
        assert_eq!(t.record(&g, 0, Succeeded), [], "the first record stands");
    }

    /// `x` (all_success) after `a` and `b`, both decided in one cascade from
    /// `r`: `x` is decided on both, as `node_states` would, not on the first.
    #[test]
    fn a_cascade_decides_a_node_after_all_its_upstreams() {
        use TriggerRule::*;
        // r fails: b (all_skipped) is skipped and a (all_success) is
        // upstream-failed in the same call. Deciding x on b alone would
        // skip it; over both, all_success says upstream-failed.
        let g = graph(&[
            ("r", &[], AllSuccess),
            ("b", &["r"], AllSkipped),
            ("a", &["r"], AllSuccess),
            ("x", &["b", "a"], AllSuccess),
        ]);
        let mut t = RunTracker::new(&g, &BTreeMap::<Name, Record>::new());
        let changes = t.record(&g, 0, Failed);
        let want = [
            Change {
                node: 1,
                state: S::Skipped,
            },
            Change {
                node: 2,
                state: S::UpstreamFailed,
            },
            Change {
                node: 3,
                state: S::UpstreamFailed,
            },
        ];
        assert_eq!(changes, want);
        let (t, _) = run(&g, &[("r", Failed)]);
        assert_eq!(t.state(3), S::UpstreamFailed);
        // r skipped: b is ready, a is skipped, so x is skipped.
        let (t, _) = run(&g, &[("r", Skipped)]);
        assert_eq!(t.states(), [S::Skipped, S::Ready, S::Skipped, S::Skipped]);
    }

    /// `all_success` after a skip, then a failure: the first decision is the
    /// one recorded (as Airflow keeps the state it wrote), although the
    /// rule over both outcomes says upstream-failed.
    #[test]
    fn the_first_decision_of_all_success_sticks() {
        use TriggerRule::AllSuccess;
        let g = graph(&[
            ("a", &[], AllSuccess),
            ("b", &[], AllSuccess),
            ("x", &["a", "b"], AllSuccess),
        ]);
        let (t, records) = run(&g, &[("a", Skipped), ("b", Failed)]);
        assert_eq!(t.state(2), S::Skipped);
        assert_eq!(records[&name("x")].status, Skipped);
        // Without the recorded decision, the pure rule sees both outcomes.
        let bare = rec(&[("a", Skipped), ("b", Failed)]);
        assert_eq!(node_states(&g, &bare)[2], S::UpstreamFailed);
        // A tracker rebuilt from those records takes that decision, and
        // lists it to be recorded.
        let t = RunTracker::new(&g, &bare);
        assert_eq!(
            t.decisions_to_record(&g, &bare),
            [Change {
                node: 2,
                state: S::UpstreamFailed
            }]
        );
        assert_eq!(t.decisions_to_record(&g, &records), []);
    }

    #[test]
    fn fan_out_and_in_cost_the_degree() {
        let mut nodes = vec![node("root", &[])];
        for i in 0..1000 {
            nodes.push(node(&format!("m{i}"), &["root"]));
        }
        let middles: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        let middles: Vec<&str> = middles.iter().map(String::as_str).collect();
        nodes.push(node("sink", &middles));
        let g = def(nodes).validate().unwrap();
        let mut t = RunTracker::new(&g, &BTreeMap::<Name, Record>::new());
        let built = t.edges_visited();
        assert_eq!(built, 2000);
        let changes = t.record(&g, 0, Succeeded);
        assert_eq!(changes.len(), 1000);
        assert!(changes.iter().all(|c| c.state == S::Ready));
        assert_eq!(t.edges_visited() - built, 1000, "the root's degree");
        for m in 1..=1000 {
            let before = t.edges_visited();
            let changes = t.record(&g, m, Succeeded);
            assert_eq!(t.edges_visited() - before, 1, "a middle's degree");
            if m < 1000 {
                assert_eq!(changes, []);
            } else {
                assert_eq!(
                    changes,
                    [Change {
                        node: 1001,
                        state: S::Ready
                    }]
                );
            }
        }
        t.record(&g, 1001, Succeeded);
        assert_eq!(t.outcome(), Some(RunOutcome::Complete));
    }

    #[test]
    fn rerun_scope_follows_success_edges() {
        use TriggerRule::*;
        let g = graph(&[
            ("a", &[], AllSuccess),
            ("b", &["a"], AllSuccess),
            ("c", &["b"], AllDone),
            ("d", &["c"], AllSuccess),
            ("e", &["a"], OneFailed),
            ("f", &["b"], NoneFailed),
            ("g", &["f"], OneDone),
            ("h", &["f", "c"], NoneFailedMinOneSuccess),
            ("i", &["a", "e"], OneSuccess),
            ("j", &["e"], AllSuccess),
        ]);
        let scope = |n: &str| -> Vec<&str> {
            rerun_scope(&g, g.index_of(n).unwrap())
                .into_iter()
                .map(|i| g.node_at(i).name.as_str())
                .collect()
        };
        let table: &[(&str, &[&str])] = &[
            // c (all_done), e (one_failed) and g (one_done) keep their
            // records; d is reached only through c; h through f; j only
            // through e.
            ("a", &["a", "b", "f", "i", "h"]),
            ("b", &["b", "f", "h"]),
            ("c", &["c", "d", "h"]),
            ("e", &["e", "i", "j"]),
            ("g", &["g"]),
        ];
        for (k, (n, want)) in table.iter().enumerate() {
            let got = scope(n);
            assert_eq!(got, *want, "#{k}: rerun of {n}: got {got:?}, want {want:?}");
        }
    }

    #[test]
    fn current_records_drop_superseded_ones() {
        let records: BTreeMap<Name, Record> = [
            ("a", Succeeded, 0),
            ("b", Succeeded, 0),
            ("c", Failed, 1),
            ("d", Succeeded, 2),
        ]
        .into_iter()
        .map(|(n, status, rerun)| (name(n), Record { status, rerun }))
        .collect();
        let expected: BTreeMap<Name, u32> = [(name("b"), 1), (name("c"), 1), (name("d"), 1)].into();
        let current = current_records(&expected, &records);
        assert_eq!(
            current.keys().map(Name::as_str).collect::<Vec<_>>(),
            ["a", "c", "d"]
        );
        assert!(is_current(&expected, "zzz", 0));
        assert!(!is_current(&expected, "b", 0));
    }

    #[test]
    fn rerun_resets_the_scope() {
        use TriggerRule::*;
        let g = graph(&[
            ("a", &[], AllSuccess),
            ("b", &["a"], AllSuccess),
            ("c", &["b"], AllDone),
            ("x", &[], AllSuccess),
            ("d", &["b", "x"], AllSuccess),
        ]);
        let (mut t, _) = run(
            &g,
            &[
                ("a", Succeeded),
                ("b", Succeeded),
                ("c", Succeeded),
                ("x", Failed),
            ],
        );
        assert_eq!(t.state(4), S::UpstreamFailed);
        assert_eq!(t.outcome(), Some(RunOutcome::Failed));
        let a = g.index_of("a").unwrap();
        let scope = rerun_scope(&g, a);
        assert_eq!(scope, [0, 1, 4]);
        let changes = t.rerun(&g, a, &scope);
        // a is ready again, b waits for it, c keeps its record, and d is
        // upstream-failed again at once because x failed.
        let want = [
            Change {
                node: 0,
                state: S::Ready,
            },
            Change {
                node: 1,
                state: S::Pending,
            },
            Change {
                node: 4,
                state: S::UpstreamFailed,
            },
        ];
        assert_eq!(changes, want);
        assert_eq!(
            t.states(),
            [
                S::Ready,
                S::Pending,
                S::Succeeded,
                S::Failed,
                S::UpstreamFailed
            ]
        );
        assert_eq!(t.outcome(), None);
        t.verify(&g);
    }

    /// The scope of a rerun alone and of a mark: the node and the decided
    /// nodes reached through decided nodes. Rows: (graph, outcomes
    /// recorded in order, node, want scope).
    #[test]
    fn rerun_alone_scope_table() {
        use TriggerRule::*;
        let g = graph(&[
            ("a", &[], AllSuccess),
            ("b", &["a"], AllSuccess),
            ("c", &["b"], AllSuccess),
            ("h", &["a"], OneFailed),
            ("r", &["a"], AllDone),
            ("s", &["r"], AllSuccess),
        ]);
        type Row<'a> = (&'a [(&'a str, NodeStatus)], &'a str, &'a [&'a str]);
        let cases: &[Row] = &[
            // a failed: b and c upstream-failed (decided), h and r ran.
            (
                &[
                    ("a", Failed),
                    ("h", Succeeded),
                    ("r", Succeeded),
                    ("s", Succeeded),
                ],
                "a",
                &["a", "b", "c"],
            ),
            // a succeeded, and so did everything downstream: a alone.
            (
                &[
                    ("a", Succeeded),
                    ("b", Succeeded),
                    ("c", Succeeded),
                    ("r", Succeeded),
                    ("s", Succeeded),
                ],
                "a",
                &["a", "h"],
            ),
            // b failed: c decided upstream-failed.
            (&[("a", Succeeded), ("b", Failed)], "b", &["b", "c"]),
        ];
        for (i, (steps, node, want)) in cases.iter().enumerate() {
            let (t, _) = run(&g, steps);
            let idx = g.index_of(node).unwrap();
            let got: Vec<&str> = rerun_scope_alone(&g, idx, t.states())
                .into_iter()
                .map(|s| g.node_at(s).name.as_str())
                .collect();
            assert_eq!(got, *want, "#{i}: {node} after {steps:?}");
        }
    }

    /// Marking a failed node succeeded lets its downstreams run; marking a
    /// ready node failed decides them.
    #[test]
    fn mark_sets_the_node_and_redecides_downstreams() {
        use TriggerRule::*;
        let g = graph(&[
            ("a", &[], AllSuccess),
            ("b", &["a"], AllSuccess),
            ("c", &["b"], AllSuccess),
        ]);
        let (mut t, _) = run(&g, &[("a", Failed)]);
        assert_eq!(t.outcome(), Some(RunOutcome::Failed));
        let scope = rerun_scope_alone(&g, 0, t.states());
        let changes = t.mark(&g, 0, Succeeded, &scope);
        assert_eq!(
            changes,
            [
                Change {
                    node: 1,
                    state: S::Ready
                },
                Change {
                    node: 2,
                    state: S::Pending
                }
            ]
        );
        assert_eq!(t.outcome(), None);
        t.verify(&g);
        // b is ready (running, say): marking it failed decides c at once.
        let scope = rerun_scope_alone(&g, 1, t.states());
        let changes = t.mark(&g, 1, Failed, &scope);
        assert_eq!(
            changes,
            [Change {
                node: 2,
                state: S::UpstreamFailed
            }]
        );
        assert_eq!(t.outcome(), Some(RunOutcome::Failed));
        t.verify(&g);
    }

    fn status_of(k: u8) -> NodeStatus {
        [Succeeded, Failed, Skipped, Cancelled][k as usize % 4]
    }

    fn rules_graph(edges: &[Vec<usize>], rules: &[usize]) -> Graph {
        let nodes = edges
            .iter()
            .enumerate()
            .map(|(i, ups)| {
                let ups: Vec<String> = ups.iter().map(|u| format!("n{u}")).collect();
                let ups: Vec<&str> = ups.iter().map(String::as_str).collect();
                let mut nd = node(&format!("n{i}"), &ups);
                nd.trigger_rule = TriggerRule::ALL[rules[i] % TriggerRule::ALL.len()];
                nd
            })
            .collect();
        GraphDef::new(name("p"), nodes).validate().unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Random DAGs and rules; random outcomes recorded for ready nodes
        /// in a random order, with reruns among them. After every step the
        /// tracker's states equal `node_states` of the current records (the
        /// tracker's decisions recorded, as the scheduler does), its outcome
        /// equals `settled_state`, and its changes are exactly the nodes
        /// whose state changed.
        #[test]
        fn tracker_equals_pure_functions(
            (edges, rules) in dag(30).prop_flat_map(|e| {
                let n = e.len();
                (Just(e), prop::collection::vec(0..11usize, n))
            }),
            ops in prop::collection::vec((0..14u8, any::<usize>(), any::<u8>()), 0..120),
        ) {
            let g = rules_graph(&edges, &rules);
            let mut records: BTreeMap<Name, Record> = BTreeMap::new();
            let mut expected: BTreeMap<Name, u32> = BTreeMap::new();
            let mut t = RunTracker::new(&g, &records);
            let next = |records: &BTreeMap<Name, Record>, n: &Name| records.get(n).map_or(0, |r| r.rerun + 1);
            for (kind, pick, k) in ops {
                let before = t.states().to_vec();
                let ready: Vec<usize> = t.ready().collect();
                let (changes, recorded, reset) = if kind < 9 && !ready.is_empty() {
                    let i = ready[pick % ready.len()];
                    let status = status_of(k);
                    let n = g.node_at(i).name.clone();
                    let rerun = next(&records, &n);
                    records.insert(n, Record { status, rerun });
                    // What a submit ahead of the record takes: each is
                    // ready after the record, and when the record decides
                    // no node (nothing cascades), they are every node it
                    // makes ready.
                    let mut ahead = t.ready_after(&g, i, status);
                    let changes = t.record(&g, i, status);
                    let mut made_ready: Vec<usize> = changes
                        .iter()
                        .filter(|c| c.state == S::Ready)
                        .map(|c| c.node)
                        .collect();
                    for d in &ahead {
                        prop_assert!(made_ready.contains(d), "node {} submitted ahead is not ready after the record", d);
                    }
                    if changes.iter().all(|c| !c.state.is_terminal()) {
                        ahead.sort_unstable();
                        made_ready.sort_unstable();
                        prop_assert_eq!(ahead, made_ready);
                    }
                    prop_assert!(t.ready_after(&g, i, status).is_empty(), "a terminal node makes nothing ready");
                    (changes, Some(i), Vec::new())
                } else if kind >= 12 {
                    // An operator's mark of any node, as the scheduler
                    // does it: the mark at the node's next count, the
                    // decided downstreams reset.
                    let i = pick % g.len();
                    let status = if k % 2 == 0 { Succeeded } else { Failed };
                    let scope = rerun_scope_alone(&g, i, t.states());
                    for &s in &scope {
                        let n = &g.node_at(s).name;
                        if s != i {
                            if let Some(r) = records.get(n) {
                                expected.insert(n.clone(), r.rerun + 1);
                            }
                        }
                    }
                    let n = g.node_at(i).name.clone();
                    let rerun = next(&records, &n);
                    expected.insert(n.clone(), rerun);
                    records.insert(n, Record { status, rerun });
                    let reset: Vec<usize> = scope.iter().copied().filter(|&s| s != i).collect();
                    (t.mark(&g, i, status, &scope), Some(i), reset)
                } else {
                    let with_record: Vec<usize> =
                        (0..g.len()).filter(|&i| records.contains_key(&g.node_at(i).name)).collect();
                    if with_record.is_empty() {
                        continue;
                    }
                    let i = with_record[pick % with_record.len()];
                    let scope = if kind >= 10 {
                        rerun_scope_alone(&g, i, t.states())
                    } else {
                        rerun_scope(&g, i)
                    };
                    for &s in &scope {
                        let n = &g.node_at(s).name;
                        if let Some(r) = records.get(n) {
                            expected.insert(n.clone(), r.rerun + 1);
                        }
                    }
                    (t.rerun(&g, i, &scope), None, scope)
                };
                for c in &changes {
                    if let Some(status) = c.state.status() {
                        let n = g.node_at(c.node).name.clone();
                        let rerun = next(&records, &n);
                        records.insert(n, Record { status, rerun });
                    }
                }
                let current = current_records(&expected, &records);
                let want = node_states(&g, &current);
                prop_assert_eq!(t.states(), want.as_slice());
                prop_assert_eq!(t.outcome(), settled_state(&want));
                prop_assert!(t.decisions_to_record(&g, &current).is_empty());
                let mut diff: Vec<Change> = (0..g.len())
                    .filter(|&i| (before[i] != t.state(i) || reset.contains(&i)) && Some(i) != recorded)
                    .map(|i| Change { node: i, state: t.state(i) })
                    .collect();
                diff.sort_unstable_by_key(|c| g.position(c.node));
                prop_assert_eq!(&changes, &diff);
                t.verify(&g);
                // A tracker rebuilt from the records agrees (a restart).
                let rebuilt = RunTracker::new(&g, &current);
                prop_assert_eq!(rebuilt.states(), t.states());
            }
            // Driving the run on, succeeding every ready node, settles it.
            loop {
                let Some(i) = t.ready().next() else { break };
                t.record(&g, i, Succeeded);
            }
            prop_assert!(t.is_settled());
            prop_assert!(t.outcome().is_some());
        }
    }
}
