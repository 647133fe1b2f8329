//! Server-Sent Event streams: the engine's events (with resume ids) and a
//! running attempt's log lines.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use tokio::sync::broadcast::error::RecvError;

use super::extract::{blocking, Query};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::events::{Numbered, Resume};
use crate::serve::state::AppState;

/// Keep-alive comments on idle streams, so proxies and clients see life.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The event stream's query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    /// Resume after this id (as the `Last-Event-ID` header does).
    last_event_id: Option<String>,
}

fn sse_event(s: &AppState, n: &Numbered) -> Event {
    // One flat object: the sequence number, the kind and the event's fields.
    let mut data = serde_json::to_value(&n.event).unwrap_or_default();
    if let Some(o) = data.as_object_mut() {
        o.insert("seq".into(), n.seq.into());
    }
    Event::default()
        .id(s.hub.id(n.seq))
        .event(n.kind)
        .data(data.to_string())
}

/// The engine's events as SSE: `id` is `<epoch>-<seq>`; a client resumes
/// with `Last-Event-ID` (or `?last_event_id=`) and gets what it missed, or
/// a `reset` event when that id is gone (refetch, then follow).
pub async fn events(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<EventParams>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(q.last_event_id)
        // An empty id is no id (the SSE spec), not a reset.
        .filter(|id| !id.trim().is_empty());
    let (resume, rx) = s.hub.subscribe(last.as_deref());
    let first: Vec<Event> = match resume {
        Resume::Replay(v) => v.iter().map(|n| sse_event(&s, n)).collect(),
        Resume::Reset => vec![Event::default().event("reset").data(
            serde_json::json!({ "reason": "the id is from another engine or too old; refetch" })
                .to_string(),
        )],
    };
    let after = first.len();
    let stop = s.stop.clone();
    let st = s.clone();
    let live = stream::unfold((rx, st, stop), |(mut rx, st, stop)| async move {
        let got = tokio::select! {
            () = stop.cancelled() => return None,
            got = rx.recv() => got,
        };
        let e = match got {
            Ok(n) => sse_event(&st, &n),
            Err(RecvError::Lagged(missed)) => Event::default().event("reset").data(
                serde_json::json!({ "reason": format!("the stream fell {missed} events behind; refetch") })
                    .to_string(),
            ),
            Err(RecvError::Closed) => return None,
        };
        Some((e, (rx, st, stop)))
    });
    tracing::debug!(replayed = after, "event stream opened");
    Sse::new(stream::iter(first).chain(live).map(Ok))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// A page of log lines, or a live stream of them.
pub async fn logs(
    s: AppState,
    run_id: String,
    attempt: Option<u32>,
    from_line: u64,
    limit: Option<usize>,
    follow: bool,
) -> ApiResult<Response> {
    let paths = crate::logs::LogPaths::new(&s.data_dir);
    let attempt = match attempt {
        Some(a) => a,
        None => {
            let (p, id) = (paths.clone(), run_id.clone());
            let root = s.data_dir.clone();
            let list =
                blocking(move || crate::logs::attempts(&p, &id).map_err(|e| log_error(e, &root)))
                    .await?;
            list.last().map(|a| a.attempt).ok_or_else(|| {
                ApiError::not_found(format!(
                    "{run_id}: no attempt has logs (not started yet, or not a command)"
                ))
            })?
        }
    };
    let lines_max = limit.unwrap_or(LOG_LINES_MAX);
    if lines_max == 0 || lines_max > LOG_LINES_MAX {
        return Err(ApiError::bad(format!(
            "limit: {lines_max} is not within 1..={}",
            LOG_LINES_MAX
        )));
    }
    if !follow {
        let root = s.data_dir.clone();
        let chunk = blocking(move || {
            crate::logs::read(&paths, &run_id, attempt, from_line, lines_max)
                .map_err(|e| log_error(e, &root))
        })
        .await?;
        return Ok(Json(chunk).into_response());
    }
    let stop = s.stop.clone();
    let lines = crate::logs::follow(paths, run_id, attempt, from_line);
    let events = lines
        .take_until(async move { stop.cancelled().await })
        .map(|r| {
            Ok::<_, Infallible>(match r {
                Ok(line) => Event::default()
                    .event("line")
                    .data(serde_json::to_string(&line).unwrap_or_default()),
                Err(e) => Event::default().event("error").data(e.to_string()),
            })
        })
        .chain(stream::once(async {
            Ok(Event::default().event("end").data("{}"))
        }));
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// A log read's error as an API error. Its message names files under the
/// data directory as `DATA/…`: no error body carries a host path.
fn log_error(e: crate::logs::LogError, data_dir: &std::path::Path) -> ApiError {
    use crate::logs::LogError;
    let message = e
        .to_string()
        .replace(&data_dir.display().to_string(), "DATA");
    match e {
        LogError::NotFound { .. } => ApiError::not_found(message),
        LogError::BadRunId { .. } => ApiError::bad(message),
        LogError::Io { .. } | LogError::Malformed { .. } => ApiError::internal(message),
    }
}

/// Lines a log page returns at most.
pub const LOG_LINES_MAX: usize = 10_000;
