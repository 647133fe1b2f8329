//! The routes of one-time login links ([`super::codes`]): `POST
//! /api/v1/ui-codes` makes one for the caller's token, `GET
//! /ui-session/code?c=CODE` spends it for a session.

use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::codes::UI_CODE_TTL_MS;
use super::hardened::hardened;
use super::session::Session;
use crate::serve::access::tokens::{self, Caller};
use crate::serve::error::ApiError;
use crate::serve::state::AppState;

/// The answer to `POST /api/v1/ui-codes`.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct UiCode {
    /// The one-time code.
    pub code: String,
    /// The path to open on this engine (or any member of its group):
    /// `/ui-session/code?c=CODE`.
    pub path: String,
    /// When it expires unused (ms since the epoch).
    pub expires_at_ms: u64,
}

/// `POST /api/v1/ui-codes`: a one-time login code for the caller's token.
pub async fn issue(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<UiCode>, ApiError> {
    let now_ms = s.engine.now_ms();
    let code = s
        .access
        .ui_codes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .issue(&caller.name, now_ms, rand::random())
        .map_err(ApiError::conflict)?;
    tracing::info!(who = %caller.name, "ui login code issued");
    Ok(Json(UiCode {
        path: format!("/ui-session/code?c={code}"),
        code,
        expires_at_ms: now_ms + UI_CODE_TTL_MS,
    }))
}

#[derive(Debug, Deserialize)]
pub struct CodeQuery {
    c: String,
}

/// `GET /ui-session/code?c=CODE`: the code's session cookie, and on to
/// the UI (303); a spent, expired or unknown code is a 401 that says to
/// ask for another.
pub async fn redeem(
    State(s): State<AppState>,
    q: Result<Query<CodeQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let now_ms = s.engine.now_ms();
    let name = q.ok().and_then(|Query(q)| {
        s.access
            .ui_codes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .redeem(q.c.trim(), now_ms)
    });
    let refused = |why: &str| {
        tracing::warn!(reason = why, "ui login by code refused");
        hardened(
            ApiError::unauthorized(format!(
                "{why}: a login link works once, within {} s (run `weir ui` for another)",
                UI_CODE_TTL_MS / 1000
            ))
            .into_response(),
        )
    };
    let Some(name) = name else {
        return refused("this login code is spent, expired or unknown");
    };
    let caller = match tokens::by_name(s.engine.store(), &s.token, &name, now_ms) {
        Ok(Some(c)) => c,
        Ok(None) => return refused("the token this code was made for is revoked or expired"),
        Err(e) => return hardened(ApiError::from(e).into_response()),
    };
    tracing::info!(who = %caller.name, role = %caller.role, "ui login by code");
    let session = Session::new(&caller.name, &caller.hash);
    let mut r = hardened((StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response());
    if let Ok(v) = HeaderValue::from_str(&session.set_cookie(s.access.tls)) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    // The code is in this URL: not kept (hardened sends no referrer).
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
