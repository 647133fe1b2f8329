//! Engine events: every state transition, as a value subscribers receive
//! (and as a `tracing` event with the same fields where it happens).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_core::queue::TicketId;

use crate::records::done::DoneStatus;

/// Something that happened in the engine.
///
/// Serialized as one object: its kind in snake_case under `kind`, beside
/// its fields (`{"kind": "run_started", "graph": …}`): the names the API's
/// event stream and its clients use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EngineEvent {
    /// A ticket was enqueued (durably).
    Enqueued {
        /// Its key.
        key: Arc<str>,
        /// Its id.
        id: TicketId,
        /// Its pool.
        pool: Arc<str>,
    },
    /// An attempt started on a worker.
    Started {
        /// The ticket's key.
        key: Arc<str>,
        /// The ticket.
        id: TicketId,
        /// The attempt number.
        attempt: u32,
        /// The worker.
        worker: Arc<str>,
    },
    /// An attempt failed and the ticket waits to run again.
    Retrying {
        /// The ticket's key.
        key: Arc<str>,
        /// The ticket.
        id: TicketId,
        /// The attempt that failed.
        attempt: u32,
        /// When it runs again.
        due_ms: u64,
        /// Why it failed.
        error: String,
    },
    /// A pool gave the ticket back without running it: the target's
    /// breaker held it back, or the pool had no free slot (`cause`); no
    /// attempt was spent.
    Deferred {
        /// The ticket's key.
        key: Arc<str>,
        /// The ticket.
        id: TicketId,
        /// When it may run.
        until_ms: u64,
        /// Why.
        #[serde(default)]
        cause: crate::msg::work::DeferCause,
    },
    /// A sensor's check found its condition not met: the ticket waits
    /// for its next check without a slot, no attempt spent.
    Poked {
        /// The ticket's key.
        key: Arc<str>,
        /// The ticket.
        id: TicketId,
        /// When it checks again.
        due_ms: u64,
        /// What the check saw.
        seen: String,
    },
    /// A ticket ended.
    Completed {
        /// Its key.
        key: Arc<str>,
        /// Its id.
        id: TicketId,
        /// How it ended.
        status: DoneStatus,
        /// Attempts it took.
        attempts: u32,
    },
    /// A breaker changed state.
    Breaker {
        /// The target.
        target: Arc<str>,
        /// The new state: open, half_open, closed.
        state: String,
    },
    /// A supervised actor failed and was restarted.
    Restarted {
        /// Its role.
        role: String,
        /// Why it failed.
        error: String,
    },
    /// A graph run started.
    RunStarted {
        /// The graph.
        graph: String,
        /// The partition.
        partition: String,
    },
    /// A run, or a node of it, missed its SLA (recorded once).
    SlaMissed {
        /// The graph.
        graph: String,
        /// The partition.
        partition: String,
        /// The node; none for the graph's own SLA.
        node: Option<String>,
        /// The deadline missed, in ms since the epoch.
        deadline_ms: u64,
    },
    /// A graph run settled (complete, failed or cancelled).
    RunSettled {
        /// The graph.
        graph: String,
        /// The partition.
        partition: String,
        /// Its final state.
        state: String,
    },
    /// A node of a graph run changed state.
    NodeChanged {
        /// The graph.
        graph: String,
        /// The partition.
        partition: String,
        /// The node.
        node: String,
        /// The rerun count of the instance.
        rerun: u32,
        /// Its new state (ready, succeeded, failed, skipped, upstream_failed, cancelled).
        state: String,
    },
    /// A member of a mapped node ended.
    MemberEnded {
        /// The graph.
        graph: String,
        /// The partition.
        partition: String,
        /// The mapped node.
        node: String,
        /// The generation (the node's rerun count).
        rerun: u32,
        /// The member's index (its item's place).
        member: u32,
        /// How it ended.
        state: String,
    },
    /// A node's success materialized an asset (durably), and graphs that
    /// start on it are told.
    AssetMaterialized {
        /// The asset.
        asset: String,
        /// The producing graph.
        graph: String,
        /// The producing node.
        node: String,
        /// The partition.
        partition: String,
    },
    /// A materialization started (or found) a run of a consuming graph.
    AssetTriggered {
        /// The asset.
        asset: String,
        /// The consuming graph.
        graph: String,
        /// Its partition started.
        partition: String,
        /// Whether the run is new (false: it existed).
        started: bool,
    },
    /// A reconciler pass ended.
    Reconciled {
        /// The graph.
        graph: String,
        /// Active runs visited.
        active_runs: usize,
        /// Nodes newly submitted.
        submitted: usize,
        /// Runs settled.
        settled: usize,
        /// Task instances cancelled for cancelled runs.
        cancelled: usize,
    },
    /// Records expired.
    Expired {
        /// Records deleted.
        records: usize,
    },
    /// A keyed graph's inventory loaded.
    InventoryLoaded {
        /// The graph.
        graph: String,
        /// Keys it lists.
        keys: usize,
        /// Keys new to it.
        added: usize,
        /// Keys no longer listed (their schedules are gone).
        removed: usize,
    },
    /// An inventory load failed; the keys of the last good load are kept.
    InventoryFailed {
        /// The graph.
        graph: String,
        /// Why, naming the graph and the file or command.
        error: String,
        /// Keys kept.
        keys_kept: usize,
    },
    /// A cron firing (several, after downtime) made windows due.
    CronFired {
        /// The graph.
        graph: String,
        /// The newest firing handled, in ms since the epoch.
        firing_ms: u64,
        /// The windows made due, oldest first.
        windows: Vec<String>,
        /// Whether older missed firings were left out (catch-up off or
        /// past its bound).
        older_dropped: bool,
    },
    /// A backfill handled its last window.
    BackfillDone {
        /// The graph.
        graph: String,
        /// The backfill's number.
        id: u64,
        /// Runs it started.
        started: u64,
        /// Windows skipped because their run existed.
        skipped: u64,
    },
    /// A graph's triggers were paused or unpaused (durably): while
    /// paused, cron firings, backfill pacing and key schedules start no run.
    GraphPaused {
        /// The graph.
        graph: String,
        /// Paused (true) or unpaused (false).
        paused: bool,
    },
    /// A dead letter (a ticket whose tries were spent) was requeued: a plain
    /// job as a fresh ticket, a graph node as a rerun.
    DeadRequeued {
        /// The dead ticket's key.
        key: String,
    },
    /// A worker process joined the engine's cluster (or rejoined as new).
    WorkerJoined {
        /// Its id.
        worker: String,
        /// Its pools and their slots.
        pools: Vec<(String, u32)>,
    },
    /// A worker was declared lost: its running attempts were requeued.
    WorkerLost {
        /// Its id.
        worker: String,
        /// Why.
        reason: String,
    },
    /// A worker left (a graceful stop).
    WorkerLeft {
        /// Its id.
        worker: String,
    },
    /// A report of an attempt that is no longer its ticket's running one
    /// (the ticket was requeued, cancelled or completed since) was refused.
    ReportRefused {
        /// The reporting pool worker's id in the queue.
        worker: String,
        /// The ticket.
        id: TicketId,
        /// The attempt reported.
        attempt: u32,
    },
    /// The engine stopped because an actor failed too often.
    Stopped {
        /// The error.
        error: String,
    },
}
