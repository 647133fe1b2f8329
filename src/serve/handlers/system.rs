//! `/healthz`, `/metrics`, the OpenAPI document, the engine's facts, reload.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::serve::error::{ApiError, ApiResult};
use crate::serve::{AppState, ReloadReport};

/// Liveness: 200 while the engine runs, 503 once it stopped. No token.
pub async fn healthz(State(s): State<AppState>) -> impl IntoResponse {
    match s.engine.error() {
        None => (StatusCode::OK, "ok\n".to_string()),
        Some(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("stopped: {e}\n")),
    }
}

/// Readiness, for load balancers and Kubernetes probes: a single engine
/// is ready while it runs (a replicated member answers from its own Raft
/// state instead). No token.
pub async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    match s.engine.error() {
        None => (StatusCode::OK, "ready\n".to_string()),
        Some(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("stopped: {e}\n")),
    }
}

/// A backup of the store at one point between writes, streamed (see
/// `crate::backup`).
pub async fn backup(State(s): State<AppState>) -> axum::response::Response {
    crate::backup::response(s.engine.store().clone()).await
}

/// Prometheus' text format.
pub async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    let body = s.metrics.render(&s.engine).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
}

/// The OpenAPI document of every route.
pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::serve::openapi::DOCUMENT,
    )
}

/// What the engine is.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineFacts {
    /// weir's version.
    pub version: String,
    /// The process.
    pub pid: u32,
    /// The data directory.
    pub data_dir: String,
    /// When the engine started.
    pub started_at_ms: u64,
    /// Now, by the engine's clock.
    pub now_ms: u64,
    /// Pools and their slots.
    pub pools: std::collections::BTreeMap<String, u32>,
    /// Whether definitions can be reloaded.
    pub reloadable: bool,
}

/// The engine's facts.
pub async fn engine(State(s): State<AppState>) -> Json<EngineFacts> {
    Json(EngineFacts {
        version: env!("CARGO_PKG_VERSION").into(),
        pid: std::process::id(),
        data_dir: s.data_dir.display().to_string(),
        started_at_ms: s.started_at_ms,
        now_ms: s.engine.now_ms(),
        pools: s.engine.pool_capacities(),
        reloadable: s.reloader.is_some(),
    })
}

/// Re-reads the definition files and adopts what changed (as SIGHUP does).
pub async fn reload(State(s): State<AppState>) -> ApiResult<Json<ReloadReport>> {
    let Some(r) = s.reloader.clone() else {
        return Err(ApiError::conflict(
            "this engine has no definition files to reload (it was built by an application)",
        ));
    };
    Ok(Json(r(s.engine.clone()).await))
}
