//! The scheduler actor of one graph: starts runs, submits a node when its
//! trigger rule is met, records nodes that can no longer run, settles runs,
//! reruns and cancels (swale's scheduler, as an actor).
//!
//! It keeps every active run of its graph in memory as a
//! [`RunTracker`] (weir-core), so one node's terminal record costs time in
//! proportion to the node's degree. Everything it knows is in the store:
//! run records (`run/…`), node records (`done/…`, written by the queue
//! with each Complete, or by the scheduler for decided nodes) and
//! definitions, so a restarted scheduler rebuilds its runs and reconciles
//! them at once.
//!
//! Order of effects: a decided node's record is durable before any node it
//! makes ready is submitted; a submit (an Enqueue, idempotent by run id) is
//! durable before the scheduler moves on; a run is settled by a
//! compare-and-put of its record. A lost completion notice is repaired by
//! the reconciler, which submits every ready node of every active run
//! (the queue ignores a run id that is live or done) — so no node runs twice
//! and no run wedges.

mod cancel;
mod mapped;
mod mark;
pub mod notice;
mod past;
mod reconcile;
mod rerun;
mod settings;
mod settle;
pub mod sla;
mod start;
mod state;
mod successors;
mod timeout;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use weir_core::names::Name;

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::names::Names;
use crate::records::graph::{GraphRecord, GraphRunRecord, RunState};
use crate::records::keys::{graph_key, runs_prefix};
use crate::store::Store;
use weir_core::partition::Partition;

// The scheduler's interface lives in `msg`; re-exported here for the
// crate's users, as are the records and views it used to hold.
pub use crate::msg::scheduler::{
    MarkResult, ReconcileReport, RerunOutcome, SchedulerMsg, StartOutcome,
};
pub use crate::records::graph as records;
pub use crate::views::run as view;
pub use settings::{SchedulerSettings, QUEUE_CALL_MS};
pub use state::SchedulerState;

/// The scheduler actor.
pub struct SchedulerActor;

/// What it needs to start.
pub struct SchedulerArgs {
    /// Its graph.
    pub graph: Name,
    /// Engine names.
    pub names: Names,
    /// The store.
    pub store: Store,
    /// The clock.
    pub clock: Clock,
    /// Engine events.
    pub events: EventSender,
    /// Settings.
    pub settings: SchedulerSettings,
}

impl Actor for SchedulerActor {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = SchedulerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<SchedulerMsg>,
        args: SchedulerArgs,
    ) -> Result<SchedulerState, ActorProcessingErr> {
        let mut state = SchedulerState {
            graph: args.graph,
            names: args.names,
            store: args.store,
            clock: args.clock,
            events: args.events,
            settings: args.settings,
            adopted: None,
            defs: HashMap::new(),
            runs: BTreeMap::new(),
            drop_notices: 0,
            presubmits: HashMap::new(),
            unsynced_settles: Vec::new(),
            myself: None,
            timeout_armed: None,
            past_waits: BTreeMap::new(),
            sla_seen: Default::default(),
            sla_armed: None,
        };
        state.adopted = state
            .store
            .get::<GraphRecord>(&graph_key(state.graph.as_str()))?
            .map(|g| g.definition);
        let runs: Vec<(String, GraphRunRecord)> =
            state.store.scan(&runs_prefix(state.graph.as_str()))?;
        let prefix_len = runs_prefix(state.graph.as_str()).len();
        let mut cancelled = Vec::new();
        let mut withdrawn = Vec::new();
        for (key, record) in runs {
            let partition: Partition = key[prefix_len..]
                .parse()
                .map_err(|e| format!("run record {key}: partition does not parse: {e}"))?;
            match record.state {
                RunState::Active => {
                    let run = state.load_run(&partition)?;
                    if let Some(run) = run {
                        state.runs.insert(partition.to_string(), run);
                    }
                }
                RunState::Cancelled => cancelled.push(partition),
                RunState::Withdrawn => withdrawn.push(partition),
                RunState::Complete | RunState::Failed => {}
            }
        }
        tracing::info!(graph = %state.graph, active_runs = state.runs.len(), "scheduler started");
        // Cancelled runs whose cancels a crash may have cut short.
        let mut n = 0;
        for p in cancelled {
            n += state.cancel_unrecorded(&p).await?;
        }
        if n > 0 {
            tracing::info!(graph = %state.graph, cancelled = n, "cancelled leftover task instances of cancelled runs");
        }
        // Withdrawn runs whose tickets a crash may have left waiting.
        for p in withdrawn {
            state.finish_withdraw(&p).await?;
        }
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<SchedulerMsg>,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        state.myself = Some(myself.clone());
        // Reconcile at once: a crash may have cut an advance short.
        let report = state.reconcile(None).await?;
        state.emit_report(report);
        // Runs that outlived their run_timeout while the engine was down
        // fail now; the others at their deadline.
        state.run_timeouts().await?;
        // SLAs whose deadline passed while the engine was down are missed
        // now; the others at their deadline.
        state.sla_check().await?;
        let interval = Duration::from_millis(state.settings.reconcile_interval_ms.max(1));
        myself.send_interval(interval, || SchedulerMsg::Reconcile(None));
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<SchedulerMsg>,
        msg: SchedulerMsg,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SchedulerMsg::Completed(c) if state.drop_notices > 0 => {
                state.drop_notices -= 1;
                tracing::warn!(key = %c.key, "completion notice dropped (fault injection)");
            }
            SchedulerMsg::Completed(c) => {
                // Its answers came before it, or never will.
                state.presubmits.remove(&c.key);
                state.completed(c).await?
            }
            SchedulerMsg::Completing(e) if state.drop_notices > 0 => {
                // A lost notice is lost early too (fault injection): the
                // queue is told not to wait, and nothing is submitted.
                state.no_successors(e.key);
            }
            SchedulerMsg::Completing(e) => state.presubmit(e),
            SchedulerMsg::Presubmitted(key, answers) => state.presubmitted(&key, answers),
            SchedulerMsg::Adopted(hash) => {
                tracing::info!(graph = %state.graph, definition = %hash, "definition adopted");
                // Load and index the definition now, not in the first start
                // request: for a large graph that is the longest step of a
                // start (weir-core's validate hashes the whole definition).
                if let Err(e) = state.graph_def(&hash) {
                    tracing::warn!(graph = %state.graph, definition = %hash, error = %e, "adopted definition does not load");
                }
                state.adopted = Some(hash);
            }
            SchedulerMsg::StartRuns(partitions, params, reply) => {
                let partitions = partitions.into_iter().map(|p| (p, None)).collect();
                let r = state.start_runs(partitions, &params).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::PrepareRuns(prepared, reply) => {
                let partitions = prepared.into_iter().map(|(p, at)| (p, Some(at))).collect();
                let r = state.start_runs(partitions, &BTreeMap::new()).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Withdraw(partitions, reply) => {
                let r = state.withdraw(&partitions).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Rerun(partition, node, reply) => {
                let r = state.rerun(&partition, &node, true).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::RerunNode(partition, node, downstream, reply) => {
                let r = state.rerun(&partition, &node, downstream).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::ClearFailed(partition, reply) => {
                let r = state.clear_failed(&partition).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Mark(partition, node, status, reply) => {
                let r = state.mark(&partition, &node, status).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::CancelRun(partition, reply) => {
                let r = state.cancel_run(&partition).await;
                let _ = reply.send(r.map_err(|e| e.to_string()));
            }
            SchedulerMsg::Reconcile(reply) => {
                let report = state.reconcile(None).await?;
                state.emit_report(report);
                if let Some(reply) = reply {
                    let _ = reply.send(report);
                }
            }
            SchedulerMsg::ReconcileNow(partition, reply) => {
                let report = state.reconcile(partition.as_ref()).await?;
                state.emit_report(report);
                let _ = reply.send(report);
            }
            SchedulerMsg::ActiveRuns(reply) => {
                let _ = reply.send(state.runs.keys().cloned().collect());
            }
            SchedulerMsg::DropNotices(n) => state.drop_notices = n,
            SchedulerMsg::SyncSettled => state.sync_settled().await?,
            SchedulerMsg::MapTopUp(p, idx) => state.map_top_up(&p, idx).await?,
            SchedulerMsg::RunTimeouts => state.run_timeouts().await?,
            SchedulerMsg::SlaCheck => state.sla_check().await?,
        }
        Ok(())
    }
}
