//! `GET /api/v1/graphs/{graph}/runs/{partition}/trace`: a settled run's
//! span tree, as `weir trace` prints it and the run page draws it.

use axum::extract::State;
use axum::Json;

use super::view::RunTrace;
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::handlers::extract::{blocking, run_partition, Path};
use crate::serve::state::AppState;

/// The handler.
pub async fn trace(
    State(s): State<AppState>,
    Path((graph, part)): Path<(String, String)>,
) -> ApiResult<Json<RunTrace>> {
    blocking(move || {
        // A keyed graph's key names its partition, as on the run's route.
        let p = run_partition(&s, &graph, &part)?.to_string();
        let spans = super::export::run_spans(
            s.engine.store(),
            &s.data_dir,
            &graph,
            &p,
            &Default::default(),
        )
        .map_err(ApiError::internal)?;
        RunTrace::of(&graph, &p, &spans).map(Json).ok_or_else(|| {
            ApiError::not_found(format!(
                "graph {graph:?} has no settled run for {part:?}: a trace is made when a run settles"
            ))
        })
    })
    .await
}
