//! A keyed graph's keys and their schedules; signals.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;

use super::extract::{Body, Path};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::state::AppState;
use crate::KeyScheduleView;

fn keyed(s: &AppState, graph: &str) -> Result<(), ApiError> {
    weir_core::names::Name::new(graph).map_err(|e| ApiError::bad(format!("graph: {e}")))?;
    let store = s.engine.store();
    let Some(rec) = store.get::<weir_actors::scheduler::records::GraphRecord>(
        &weir_actors::scheduler::records::graph_key(graph),
    )?
    else {
        return Err(ApiError::not_found(format!(
            "graph {graph:?} is not adopted"
        )));
    };
    let def = store.get::<weir_core::graph::GraphDef>(
        &weir_actors::scheduler::records::def_key(&rec.definition),
    )?;
    if def.is_some_and(|d| d.keyed.is_some()) {
        Ok(())
    } else {
        Err(ApiError::bad(format!(
            "graph {graph:?} is not a keyed graph"
        )))
    }
}

/// Every key's schedule: due instant and reason, lease, last start and
/// finish, last error, consecutive failures.
pub async fn list(
    State(s): State<AppState>,
    Path(graph): Path<String>,
) -> ApiResult<Json<Vec<KeyScheduleView>>> {
    keyed(&s, &graph)?;
    Ok(Json(s.engine.schedules(&graph).await?))
}

/// `POST .../keys/{key}/signal`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    /// Due now instead of after the debounce.
    #[serde(default, deserialize_with = "super::extract::present")]
    immediate: Option<bool>,
    /// Accept a key the inventory does not list (it gets a schedule).
    #[serde(default, deserialize_with = "super::extract::present")]
    add: Option<bool>,
    /// Where it comes from (kept as the due reason); default `api`.
    #[serde(default, deserialize_with = "super::extract::present")]
    source: Option<String>,
}

/// Signals a key; an unknown key is refused (404) unless `add`.
pub async fn signal(
    State(s): State<AppState>,
    Path((graph, key)): Path<(String, String)>,
    Body(b): Body<SignalBody>,
) -> ApiResult<Json<KeyScheduleView>> {
    keyed(&s, &graph)?;
    weir_core::names::Key::new(key.as_str()).map_err(|e| ApiError::bad(format!("key: {e}")))?;
    let source = b.source.unwrap_or_else(|| "api".into());
    if source.is_empty() || source.len() > 128 {
        return Err(ApiError::bad("source: 1 to 128 characters"));
    }
    Ok(Json(
        s.engine
            .signal_key(
                &graph,
                &key,
                &source,
                b.immediate.unwrap_or(false),
                b.add.unwrap_or(false),
            )
            .await?,
    ))
}
