//! The API's routes, one file per resource. Each handler checks its input
//! (a 400 names the field), calls the engine or reads the store, and
//! answers JSON.

mod actions;
mod graphs;
mod keys;
mod queue;
mod runs;
pub use runs::{NodeLive, RunWithLive};
mod stream;
mod system;

use axum::extract::rejection::JsonRejection;
use axum::extract::FromRequest;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

pub(crate) use system::healthz;

use super::error::ApiError;
use super::routes::Routes;

/// Every route under `/api/v1` (and `/metrics`), all behind the token.
pub fn routes() -> Routes {
    Routes::new()
        .get("/metrics", system::metrics)
        .get("/api/v1/openapi.json", system::openapi)
        .get("/api/v1/engine", system::engine)
        .post("/api/v1/reload", system::reload)
        .get("/api/v1/events", stream::events)
        .get("/api/v1/graphs", graphs::list)
        .get("/api/v1/graphs/{graph}", graphs::one)
        .get("/api/v1/graphs/{graph}/grid", graphs::grid)
        .post("/api/v1/graphs/{graph}/runs", actions::start)
        .post("/api/v1/graphs/{graph}/backfills", actions::backfill)
        .get("/api/v1/graphs/{graph}/backfills", actions::backfills)
        .post("/api/v1/graphs/{graph}/pause", actions::pause)
        .post("/api/v1/graphs/{graph}/unpause", actions::unpause)
        .post("/api/v1/graphs/{graph}/trigger", actions::trigger)
        .get("/api/v1/graphs/{graph}/keys", keys::list)
        .post("/api/v1/graphs/{graph}/keys/{key}/signal", keys::signal)
        .get("/api/v1/runs", runs::list)
        .get("/api/v1/graphs/{graph}/runs/{partition}", runs::one)
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/cancel",
            actions::cancel,
        )
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/clear",
            actions::clear,
        )
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}",
            runs::node,
        )
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/logs",
            runs::logs,
        )
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/rerun",
            actions::rerun,
        )
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/mark",
            actions::mark,
        )
        .get("/api/v1/queue/pools", queue::pools)
        .get("/api/v1/queue/tickets", queue::tickets)
        .get("/api/v1/queue/tickets/{key}", queue::ticket)
        .get("/api/v1/queue/dead", queue::dead)
        .post("/api/v1/queue/dead/requeue", queue::requeue_all)
        .post("/api/v1/queue/dead/{key}/requeue", queue::requeue)
        .get("/api/v1/breakers", queue::breakers)
        .get("/api/v1/workers", queue::workers)
        .post("/api/v1/breakers/{target}/reset", queue::reset_breaker)
}

/// A JSON body whose rejection is an [`ApiError`]: 400 naming the field,
/// 413 past the body limit, 415 without a JSON content type.
pub struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        // An empty body is an empty object: every action's fields are
        // optional or named in the error.
        let h = req.headers();
        let empty = match h.get(axum::http::header::CONTENT_LENGTH) {
            Some(v) => v == "0",
            None => h.get(axum::http::header::TRANSFER_ENCODING).is_none(),
        };
        if empty {
            return serde_json::from_str("{}")
                .map(Body)
                .map_err(|e| ApiError::bad(format!("body: {e}")));
        }
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(rej) => Err(rejection(rej)),
        }
    }
}

fn rejection(rej: JsonRejection) -> ApiError {
    let status = rej.status();
    let text = rej.body_text();
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError {
            status,
            kind: "too_large",
            message: format!("body: over the limit of {} bytes", super::BODY_BYTES_MAX),
        };
    }
    if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        return ApiError {
            status,
            kind: "unsupported_media_type",
            message: "body: send JSON with `Content-Type: application/json`".into(),
        };
    }
    ApiError::bad(format!("body: {text}"))
}

/// A query string whose rejection is a 400 naming the parameter.
pub struct Query<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e| ApiError::bad(format!("query: {}", e.body_text())))
    }
}

/// Path parameters whose rejection is a 400.
pub struct Path<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for Path<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e| ApiError::bad(format!("path: {}", e.body_text())))
    }
}

/// Parses a partition from a path or body field, naming it.
pub fn partition(field: &str, s: &str) -> Result<weir_core::partition::Partition, ApiError> {
    s.parse()
        .map_err(|e| ApiError::bad(format!("{field} {s:?}: {e}")))
}

/// The partition a path names (a partition, or a keyed graph's bare key
/// for its newest run); 404 for a key with no run.
pub fn run_partition(
    s: &super::AppState,
    graph: &str,
    text: &str,
) -> Result<weir_core::partition::Partition, ApiError> {
    match super::views::resolve_partition(s.engine.store(), graph, text) {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(ApiError::not_found(format!(
            "graph {graph:?} has no run for key {text:?}"
        ))),
        Err(super::views::QueryError::Bad(m)) => Err(ApiError::bad(m)),
        Err(super::views::QueryError::Store(e)) => Err(e.into()),
    }
}

/// Runs a blocking store read off the async threads.
pub async fn blocking<T, F>(f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ApiError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("a store read panicked: {e}")))?
}
