//! `GET /api/v1/graphs`, `GET /api/v1/graphs/{graph}` and its grid.

use axum::extract::State;
use axum::Json;

use serde::Deserialize;

use super::extract::{blocking, Path, Query};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::state::AppState;
use crate::serve::views::{self, GraphDetail, GraphSummary};

/// Every adopted graph with its partitioning, cron and next firing,
/// paused or not, content hash and newest run.
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Vec<GraphSummary>>> {
    let engine = s.engine.clone();
    blocking(move || {
        let store = engine.store();
        let now = engine.now_ms();
        let mut out = Vec::new();
        for g in views::graph_names(store)? {
            let paused = engine.is_paused(&g)?;
            if let Some((summary, _)) = views::graph_summary(store, &g, now, paused)? {
                out.push(summary);
            }
        }
        Ok(Json(out))
    })
    .await
}

/// One graph: its summary, its adopted definition and its hash history.
pub async fn one(
    State(s): State<AppState>,
    Path(graph): Path<String>,
) -> ApiResult<Json<GraphDetail>> {
    let engine = s.engine.clone();
    blocking(move || {
        let store = engine.store();
        let paused = engine.is_paused(&graph)?;
        let Some((summary, definition)) =
            views::graph_summary(store, &graph, engine.now_ms(), paused)?
        else {
            return Err(ApiError::not_found(format!(
                "graph {graph:?} is not adopted"
            )));
        };
        let history = views::graph_history(store, &graph)?;
        Ok(Json(GraphDetail {
            summary,
            definition,
            history,
        }))
    })
    .await
}

/// The grid's query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GridParams {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// A graph's grid: runs as columns (newest first), nodes as rows, each
/// cell a node's state in that run.
pub async fn grid(
    State(s): State<AppState>,
    Path(graph): Path<String>,
    Query(q): Query<GridParams>,
) -> ApiResult<Json<crate::serve::grid::Grid>> {
    let engine = s.engine.clone();
    blocking(move || {
        let store = engine.store();
        let Some((_, definition)) = views::graph_summary(store, &graph, engine.now_ms(), false)?
        else {
            return Err(ApiError::not_found(format!(
                "graph {graph:?} is not adopted"
            )));
        };
        crate::serve::grid::grid(store, &graph, &definition, q.limit, q.cursor)
            .map(Json)
            .map_err(|e| match e {
                views::QueryError::Bad(m) => ApiError::bad(m),
                views::QueryError::Store(e) => e.into(),
            })
    })
    .await
}

/// Every asset: its producers, the graphs that start on it, its last
/// materialization and the materializations waiting to be delivered.
pub async fn assets(State(s): State<AppState>) -> ApiResult<Json<Vec<crate::AssetView>>> {
    let engine = s.engine.clone();
    blocking(move || Ok(Json(engine.assets()?))).await
}
