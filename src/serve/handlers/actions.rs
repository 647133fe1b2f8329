//! Actions on graphs and runs: start, backfill, rerun, clear, mark, cancel,
//! pause, unpause, trigger. Each answers once the change is durable.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use weir_core::partition::PartitionRange;

use super::extract::{partition, run_partition, Body, Path};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::state::AppState;
use crate::{Backfill, BackfillOrder, MarkAs, MarkOutcome, RerunOutcome, StartOutcome};

/// Partitions started in one request at most.
pub const START_PARTITIONS_MAX: usize = 1_000;

fn adopted(s: &AppState, graph: &str) -> Result<(), ApiError> {
    weir_core::names::Name::new(graph).map_err(|e| ApiError::bad(format!("graph: {e}")))?;
    if s.engine
        .store()
        .contains(&weir_actors::scheduler::records::graph_key(graph))?
    {
        Ok(())
    } else {
        Err(ApiError::not_found(format!(
            "graph {graph:?} is not adopted"
        )))
    }
}

/// `POST .../runs`: the partitions to start, and their params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// Partitions, e.g. `["2026-11-29"]`; `["none"]` for an unpartitioned graph.
    partitions: Vec<String>,
    /// Params over the definition's defaults, e.g. `{"region": "eu"}`; a
    /// name the definition does not declare is refused (400).
    #[serde(default)]
    params: std::collections::BTreeMap<String, String>,
}

/// Starts runs (at most once per partition) with the body's params;
/// `started: false` says one existed (and it keeps its own params).
pub async fn start(
    State(s): State<AppState>,
    Path(graph): Path<String>,
    Body(b): Body<StartBody>,
) -> ApiResult<Json<Vec<StartOutcome>>> {
    adopted(&s, &graph)?;
    if b.partitions.is_empty() || b.partitions.len() > START_PARTITIONS_MAX {
        return Err(ApiError::bad(format!(
            "partitions: give 1 to {START_PARTITIONS_MAX} partitions"
        )));
    }
    let ps = b
        .partitions
        .iter()
        // The partition's own error names it: `partition "yesterday": …`.
        .map(|p| {
            p.parse::<weir_core::partition::Partition>()
                .map_err(|e| ApiError::bad(format!("partitions: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Json(s.engine.start_runs_with(&graph, ps, b.params).await?))
}

/// `POST .../backfills`: a range of windows.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackfillBody {
    /// The first window, e.g. `2026-11-01`.
    from: String,
    /// The last window, included.
    to: String,
    /// `oldest` (default) or `newest` first.
    #[serde(default, deserialize_with = "super::extract::present")]
    order: Option<String>,
}

/// Starts (or resumes) a backfill; it proceeds in the background, paced by
/// the graph's max_active_runs.
pub async fn backfill(
    State(s): State<AppState>,
    Path(graph): Path<String>,
    Body(b): Body<BackfillBody>,
) -> ApiResult<(StatusCode, Json<Backfill>)> {
    adopted(&s, &graph)?;
    let range = PartitionRange {
        from: partition("from", &b.from)?,
        to: partition("to", &b.to)?,
    };
    // Parse as the CLI does, so both refuse the same ranges with one message.
    let range: PartitionRange = format!("{}..{}", range.from, range.to)
        .parse()
        .map_err(|e| ApiError::bad(format!("from..to: {e}")))?;
    let order = match b.order.as_deref() {
        None | Some("oldest") => BackfillOrder::Oldest,
        Some("newest") => BackfillOrder::Newest,
        Some(o) => return Err(ApiError::bad(format!("order {o:?}: oldest or newest"))),
    };
    let bf = s.engine.backfill(&graph, range, order).await?;
    Ok((StatusCode::ACCEPTED, Json(bf)))
}

/// The backfills in progress and the trigger's state.
pub async fn backfills(
    State(s): State<AppState>,
    Path(graph): Path<String>,
) -> ApiResult<Json<crate::TriggerStatus>> {
    adopted(&s, &graph)?;
    Ok(Json(s.engine.trigger_status(&graph).await?))
}

/// `POST .../rerun`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunBody {
    /// Rerun the node's downstreams too (default true).
    #[serde(default, deserialize_with = "super::extract::present")]
    downstream: Option<bool>,
}

/// What a rerun answers: its outcome, as `Engine::rerun` gives it.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RerunAnswer {
    /// submitted, active, no_record or not_ready.
    pub outcome: String,
    /// The run id of the instance submitted or active.
    pub run_id: Option<String>,
}

/// A rerun outcome as JSON.
pub fn rerun_answer(o: &RerunOutcome) -> RerunAnswer {
    let (outcome, run_id) = match o {
        RerunOutcome::Submitted(id) => ("submitted", Some(id.clone())),
        RerunOutcome::Active(id) => ("active", Some(id.clone())),
        RerunOutcome::NoRecord => ("no_record", None),
        RerunOutcome::NotReady => ("not_ready", None),
    };
    RerunAnswer {
        outcome: outcome.into(),
        run_id,
    }
}

/// Reruns a node (with its downstreams unless `downstream: false`). An
/// active node answers 409 with its outcome; a node whose upstreams do not
/// allow it answers 409 `not_ready`.
pub async fn rerun(
    State(s): State<AppState>,
    Path((graph, part, node)): Path<(String, String, String)>,
    Body(b): Body<RerunBody>,
) -> ApiResult<(StatusCode, Json<RerunAnswer>)> {
    adopted(&s, &graph)?;
    let p = run_partition(&s, &graph, &part)?;
    let o = s
        .engine
        .rerun_node(&graph, p, &node, b.downstream.unwrap_or(true))
        .await?;
    let status = match o {
        RerunOutcome::Submitted(_) => StatusCode::OK,
        _ => StatusCode::CONFLICT,
    };
    Ok((status, Json(rerun_answer(&o))))
}

/// One node's answer to a clear.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClearedNode {
    /// The node.
    pub node: String,
    /// Its rerun outcome.
    #[serde(flatten)]
    pub answer: RerunAnswer,
}

/// Reruns every failed node of a run with its downstreams.
pub async fn clear(
    State(s): State<AppState>,
    Path((graph, part)): Path<(String, String)>,
) -> ApiResult<Json<Vec<ClearedNode>>> {
    adopted(&s, &graph)?;
    let p = run_partition(&s, &graph, &part)?;
    let out = s.engine.clear_failed(&graph, p).await?;
    Ok(Json(
        out.iter()
            .map(|(node, o)| ClearedNode {
                node: node.clone(),
                answer: rerun_answer(o),
            })
            .collect(),
    ))
}

/// `POST .../mark`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkBody {
    /// `succeeded` (or `success`) or `failed`.
    state: String,
}

/// Marks a node succeeded or failed.
pub async fn mark(
    State(s): State<AppState>,
    Path((graph, part, node)): Path<(String, String, String)>,
    Body(b): Body<MarkBody>,
) -> ApiResult<Json<MarkOutcome>> {
    adopted(&s, &graph)?;
    let p = run_partition(&s, &graph, &part)?;
    let mark = match b.state.as_str() {
        "succeeded" | "success" => MarkAs::Succeeded,
        "failed" => MarkAs::Failed,
        other => {
            return Err(ApiError::bad(format!(
                "state {other:?}: succeeded or failed"
            )))
        }
    };
    Ok(Json(s.engine.mark_node(&graph, p, &node, mark).await?))
}

/// A cancel's answer.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cancelled {
    /// Whether this call cancelled it (false: it was not active).
    pub cancelled: bool,
}

/// Cancels an active run; 409 when it is not active.
pub async fn cancel(
    State(s): State<AppState>,
    Path((graph, part)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Cancelled>)> {
    adopted(&s, &graph)?;
    let p = run_partition(&s, &graph, &part)?;
    if s.engine.graph_run(&graph, &p)?.is_none() {
        return Err(ApiError::not_found(format!(
            "graph {graph:?} has no run for partition {p}"
        )));
    }
    let cancelled = s.engine.cancel_run(&graph, p).await?;
    let status = if cancelled {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    Ok((status, Json(Cancelled { cancelled })))
}

/// A pause's answer.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Paused {
    /// The graph.
    pub graph: String,
    /// Whether it is paused now.
    pub paused: bool,
    /// Whether this call changed it.
    pub changed: bool,
}

async fn set_paused(s: AppState, graph: String, paused: bool) -> ApiResult<Json<Paused>> {
    adopted(&s, &graph)?;
    let changed = s.engine.set_paused(&graph, paused).await?;
    Ok(Json(Paused {
        graph,
        paused,
        changed,
    }))
}

/// Pauses a graph's triggers (cron, backfills, key schedules).
pub async fn pause(
    State(s): State<AppState>,
    Path(graph): Path<String>,
) -> ApiResult<Json<Paused>> {
    set_paused(s, graph, true).await
}

/// Unpauses a graph's triggers.
pub async fn unpause(
    State(s): State<AppState>,
    Path(graph): Path<String>,
) -> ApiResult<Json<Paused>> {
    set_paused(s, graph, false).await
}

/// Triggers a graph now.
pub async fn trigger(
    State(s): State<AppState>,
    Path(graph): Path<String>,
) -> ApiResult<Json<crate::TriggerNowOutcome>> {
    adopted(&s, &graph)?;
    Ok(Json(s.engine.trigger_now(&graph).await?))
}

/// `POST .../reconcile`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReconcileBody {
    /// Reconcile only the active run of this partition (default: every
    /// active run of the graph).
    #[serde(default, deserialize_with = "super::extract::present")]
    partition: Option<String>,
}

/// A reconciler pass now (swale's reconciler, which also runs every
/// minute): every ready node of the active runs resubmitted (the queue
/// ignores live and done run ids, so only a lost submit is new), decided
/// nodes recorded, finished runs settled. Answers its report.
pub async fn reconcile(
    State(s): State<AppState>,
    Path(graph): Path<String>,
    Body(b): Body<ReconcileBody>,
) -> ApiResult<Json<crate::ReconcileReport>> {
    adopted(&s, &graph)?;
    let p = match &b.partition {
        Some(text) => Some(run_partition(&s, &graph, text)?),
        None => None,
    };
    Ok(Json(s.engine.reconcile_now(&graph, p).await?))
}
