//! A graph's scheduler's interface: [`SchedulerMsg`] and the outcomes its
//! calls answer with (swale's StartOutcome, RerunOutcome and
//! ReconcileReport, and what a mark did).

use std::collections::BTreeMap;
use std::sync::Arc;

use ractor::RpcReplyPort;
use serde::{Deserialize, Serialize};
use weir_core::partition::Partition;
use weir_core::readiness::NodeStatus;

use crate::msg::queue::{Completion, EarlyCompletion, Enqueued};
use crate::records::done::DoneStatus;
use crate::records::graph::RunState;

/// The result of starting a run (swale's StartOutcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StartOutcome {
    /// The partition.
    pub partition: String,
    /// Whether this call created the run; `false` when one existed.
    pub started: bool,
    /// Run ids of the nodes submitted at start: the roots, and `always`
    /// nodes (ready before any upstream ends).
    pub submitted: Vec<String>,
}

/// The result of a rerun (swale's RerunOutcome).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum RerunOutcome {
    /// The task instance at the next rerun count was submitted.
    Submitted(String),
    /// It is active from an earlier rerun: nothing was submitted.
    Active(String),
    /// The node has no record yet: it never ran.
    NoRecord,
    /// The node's upstreams do not satisfy its trigger rule: a decided
    /// node, or one that waits at its next rerun count in the scope of an
    /// upstream's rerun (its earlier record superseded).
    NotReady,
}

/// What a mark did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MarkResult {
    /// The node's record is now the mark.
    Marked {
        /// The run id the mark's record is written under.
        run_id: String,
        /// The status marked.
        status: DoneStatus,
        /// The run id of the live instance the mark cancelled, if one was.
        cancelled: Option<String>,
        /// The run's state after the mark.
        run_state: RunState,
    },
    /// The node's current record has that status already.
    Unchanged {
        /// Its run id.
        run_id: String,
        /// Its status.
        status: DoneStatus,
    },
}

/// Counts of a reconciler pass (swale's ReconcileReport).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ReconcileReport {
    /// Active runs visited.
    pub active_runs: usize,
    /// Nodes newly submitted.
    pub submitted: usize,
    /// Runs settled.
    pub settled: usize,
    /// Task instances cancelled for cancelled runs.
    pub cancelled: usize,
}

/// Messages of a graph's scheduler.
pub enum SchedulerMsg {
    /// A ticket of this graph ended (from the queue, once durable).
    Completed(Completion),
    /// A node of this graph succeeded in the queue's open batch, not yet
    /// durable: the downstreams it makes ready are enqueued into the same
    /// batch (answered with `Successors` or `NoSuccessors`, always once).
    /// Its record, the decisions, events and settling wait for
    /// [`SchedulerMsg::Completed`].
    Completing(EarlyCompletion),
    /// The durable answers of the downstreams submitted ahead of the
    /// record of the key (sent before the batch's notices).
    Presubmitted(Arc<str>, Vec<Result<Enqueued, String>>),
    /// A new definition was adopted for the graph.
    Adopted(String),
    /// Start runs of the adopted definition, with params over its
    /// defaults (none: the defaults; a name it does not declare is
    /// refused).
    StartRuns(
        Vec<Partition>,
        BTreeMap<String, String>,
        RpcReplyPort<Result<Vec<StartOutcome>, String>>,
    ),
    /// Prepare runs ahead of their instants: each run is created as
    /// `StartRuns` creates it (the definition's params), its first tickets
    /// enqueued durably, but none handed out before its instant (ms since
    /// the epoch). A withdrawn run of the partition is revived.
    PrepareRuns(
        Vec<(Partition, u64)>,
        RpcReplyPort<Result<Vec<StartOutcome>, String>>,
    ),
    /// Take prepared runs back before their instants (what made them due
    /// changed): `true` for each run now withdrawn, `false` for one that is
    /// not a prepared run waiting for its instant any more (a ticket of it
    /// was handed out, its instant passed, or it is not active), which
    /// then runs as it would have.
    Withdraw(Vec<Partition>, RpcReplyPort<Result<Vec<bool>, String>>),
    /// Rerun a node of a run.
    Rerun(
        Partition,
        String,
        RpcReplyPort<Result<RerunOutcome, String>>,
    ),
    /// Rerun a node of a run, with its downstreams (`true`, as `Rerun`) or
    /// alone (its decided downstreams are decided again).
    RerunNode(
        Partition,
        String,
        bool,
        RpcReplyPort<Result<RerunOutcome, String>>,
    ),
    /// Rerun every failed node of a run with its downstreams; one outcome
    /// per failed node, in topological order.
    ClearFailed(
        Partition,
        RpcReplyPort<Result<Vec<(String, RerunOutcome)>, String>>,
    ),
    /// Mark a node succeeded or failed (an operator's outcome).
    Mark(
        Partition,
        String,
        NodeStatus,
        RpcReplyPort<Result<MarkResult, String>>,
    ),
    /// Cancel a run.
    CancelRun(Partition, RpcReplyPort<Result<bool, String>>),
    /// A reconciler pass (timer, or on request with a reply).
    Reconcile(Option<RpcReplyPort<ReconcileReport>>),
    /// A reconciler pass now, over every active run or only the run of a
    /// partition (an operator's `weir reconcile`), answered with its report.
    ReconcileNow(Option<Partition>, RpcReplyPort<ReconcileReport>),
    /// Active runs.
    ActiveRuns(RpcReplyPort<Vec<String>>),
    /// Fault injection, for tests only: the next this many completion
    /// notices are dropped on arrival, exactly as if they were lost on the
    /// way, so a test can show the reconciler repairing them.
    DropNotices(u32),
    /// Make the settled runs written since the last one durable, then
    /// announce them (one sync for a burst of settles).
    SyncSettled,
    /// Submit the members of a mapped node (run, node index) that its
    /// bound lets run now, and settle it once every member ended. Cast by
    /// the scheduler to itself, so a burst of member ends costs one
    /// enqueue.
    MapTopUp(String, usize),
    /// Fail the active runs past their `run_timeout` (timer).
    RunTimeouts,
    /// Record the SLA misses due (timer).
    SlaCheck,
}

impl ractor::Message for SchedulerMsg {}
