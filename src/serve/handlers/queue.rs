//! The queue: pools, one ticket, dead letters, breakers.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};

use super::extract::{blocking, Path, Query};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::state::AppState;
use crate::{
    BreakerView, DeadLetterPage, LiveTicket, QueueStatus, RequeueOutcome, TicketFilter, TicketView,
};

/// Dead letters a page holds at most.
pub const DEAD_PAGE_MAX: usize = 1_000;

/// Pools with their slots, running and pending tickets.
pub async fn pools(State(s): State<AppState>) -> ApiResult<Json<QueueStatus>> {
    Ok(Json(s.engine.status().await?))
}

/// The ticket list's query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TicketParams {
    /// `pending` or `running` (default both).
    state: Option<String>,
    /// Only this pool's.
    pool: Option<String>,
    /// At most this many (default 100, at most [`TICKETS_PAGE_MAX`]).
    limit: Option<usize>,
}

/// Live tickets a page holds at most.
pub const TICKETS_PAGE_MAX: usize = 1_000;

/// Live tickets by state and pool, oldest first.
pub async fn tickets(
    State(s): State<AppState>,
    Query(q): Query<TicketParams>,
) -> ApiResult<Json<Vec<LiveTicket>>> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > TICKETS_PAGE_MAX {
        return Err(ApiError::bad(format!(
            "limit: {limit} is not within 1..={TICKETS_PAGE_MAX}"
        )));
    }
    let running = match q.state.as_deref() {
        None => None,
        Some("pending") => Some(false),
        Some("running") => Some(true),
        Some(o) => return Err(ApiError::bad(format!("state {o:?}: pending or running"))),
    };
    let filter = TicketFilter {
        running,
        pool: q.pool,
        limit,
    };
    Ok(Json(s.engine.tickets(filter).await?))
}

/// One ticket by key: live with its tries, or its done record.
pub async fn ticket(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<TicketView>> {
    s.engine
        .ticket(&key)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no ticket has the key {key:?}")))
}

/// The dead-letter query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadParams {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// Tickets whose tries are spent, newest first.
pub async fn dead(
    State(s): State<AppState>,
    Query(q): Query<DeadParams>,
) -> ApiResult<Json<DeadLetterPage>> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > DEAD_PAGE_MAX {
        return Err(ApiError::bad(format!(
            "limit: {limit} is not within 1..={DEAD_PAGE_MAX}"
        )));
    }
    let engine = s.engine.clone();
    blocking(move || Ok(Json(engine.dead_letters(limit, q.cursor.as_deref())?))).await
}

/// Requeues one dead letter.
pub async fn requeue(
    State(s): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<Json<RequeueOutcome>> {
    Ok(Json(s.engine.requeue_dead(&key).await?))
}

/// One answer of a requeue of all.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Requeued {
    /// The key.
    pub key: String,
    /// What happened.
    pub outcome: Option<RequeueOutcome>,
    /// Why not, when it failed.
    pub error: Option<String>,
}

/// Requeues every dead letter.
pub async fn requeue_all(State(s): State<AppState>) -> ApiResult<Json<Vec<Requeued>>> {
    let out = s.engine.requeue_all_dead().await?;
    Ok(Json(
        out.into_iter()
            .map(|(key, r)| match r {
                Ok(o) => Requeued {
                    key,
                    outcome: Some(o),
                    error: None,
                },
                Err(e) => Requeued {
                    key,
                    outcome: None,
                    error: Some(e),
                },
            })
            .collect(),
    ))
}

/// `GET /api/v1/workers`: the cluster's worker processes.
pub async fn workers(State(s): State<AppState>) -> ApiResult<Json<Vec<crate::WorkerView>>> {
    Ok(Json(s.engine.workers().await?))
}

/// Every breaker with its state.
pub async fn breakers(State(s): State<AppState>) -> ApiResult<Json<Vec<BreakerView>>> {
    Ok(Json(s.engine.breakers().await?))
}

/// Resets a breaker to closed.
pub async fn reset_breaker(
    State(s): State<AppState>,
    Path(target): Path<String>,
) -> ApiResult<Json<BreakerView>> {
    weir_core::names::Name::new(target.as_str())
        .map_err(|e| ApiError::bad(format!("target: {e}")))?;
    Ok(Json(s.engine.reset_breaker(&target).await?))
}
