//! What every handler shares: the extractors that answer a malformed body,
//! query or path with the API's JSON error (`Body`, `Query`, `Path`), a
//! partition read from a path, and blocking work off the runtime.

use axum::extract::rejection::JsonRejection;
use axum::extract::FromRequest;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::serve::error::ApiError;
use crate::serve::state::{AppState, BODY_BYTES_MAX};
use crate::serve::views;

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
            message: format!("body: over the limit of {} bytes", BODY_BYTES_MAX),
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

/// For an optional body field (`#[serde(default, deserialize_with =
/// "present")]`): a field given must hold a value of its type. serde
/// takes `null` for an absent `Option`; the API document types each field
/// without `null`, so the server refuses it too (400 naming the field),
/// and a client that means "none" leaves the field out.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// Parses a partition from a path or body field, naming it.
pub fn partition(field: &str, s: &str) -> Result<weir_core::partition::Partition, ApiError> {
    s.parse()
        .map_err(|e| ApiError::bad(format!("{field} {s:?}: {e}")))
}

/// The partition a path names (a partition, or a keyed graph's bare key
/// for its newest run); 404 for a key with no run.
pub fn run_partition(
    s: &AppState,
    graph: &str,
    text: &str,
) -> Result<weir_core::partition::Partition, ApiError> {
    match views::resolve_partition(s.engine.store(), graph, text) {
        Ok(Some(p)) => Ok(p),
        Ok(None) => Err(ApiError::not_found(format!(
            "graph {graph:?} has no run for key {text:?}"
        ))),
        Err(views::QueryError::Bad(m)) => Err(ApiError::bad(m)),
        Err(views::QueryError::Store(e)) => Err(e.into()),
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
