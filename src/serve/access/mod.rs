//! Who may do what, and what they did: every route under the token names
//! the [`Role`] it needs (the route table records it, the API document
//! states it), each request is tied to a caller (a token, or a UI session
//! standing for one), a caller beyond its role gets 403 naming the role it
//! needs, and every request that may change something is written to the
//! audit log before it runs ([`audit`]); one refused before any handler
//! ran (its role, no route, a wrong method, a body over the limit) is
//! written whole, within its caller's refusal budget ([`refusals`]).

pub mod audit;
pub mod refusals;
pub mod role;
pub mod settings;
pub mod tokens;

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::listen::ClientAddr;
use axum::body::Body;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorBody};
use super::state::{AppState, BODY_BYTES_MAX};
use crate::ui::session::{self, Session};
pub use role::Role;
pub use settings::Access;
pub use tokens::Caller;

/// An error body is read back for the audit log up to this many bytes.
const ERROR_BODY_BYTES_MAX: usize = 16 * 1024;

/// The token of an `Authorization` header: its scheme is matched without
/// regard to case (RFC 7235: `Bearer`, `bearer`, `BEARER`).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

fn refused(e: tokens::AuthError) -> ApiError {
    match e {
        tokens::AuthError::Refused(why) => ApiError::unauthorized(why.to_string()),
        tokens::AuthError::Store(s) => s.into(),
    }
}

/// The caller of a request: its bearer token's, or its UI session's (then
/// a request that changes something must carry the anti-CSRF header too,
/// since a browser sends cookies on its own).
pub fn caller_of(
    state: &AppState,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    caller_in(
        state.engine.store(),
        &state.token,
        state.engine.now_ms(),
        method,
        headers,
    )
}

/// [`caller_of`] against `store`'s tokens and the file token
/// `file_token` at `now_ms`: also for a replicated engine's fronts, which
/// answer some routes themselves, with the store every member holds.
pub fn caller_in(
    store: &weir_actors::store::Store,
    file_token: &str,
    now_ms: u64,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let given = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    if let Some(secret) = given {
        return tokens::authenticate(store, file_token, secret.trim(), now_ms).map_err(refused);
    }
    let Some(name) = Session::name_in(headers) else {
        return Err(ApiError::unauthorized(
            "this route needs `Authorization: Bearer TOKEN` (the token is in DATA/token)",
        ));
    };
    let live = tokens::by_name(store, file_token, name, now_ms)?;
    let Some((caller, session)) = live
        .map(|c| {
            let s = Session::new(&c.name, &c.hash);
            (c, s)
        })
        .filter(|(_, s)| s.has_cookie(headers))
    else {
        return Err(ApiError::unauthorized(
            "the session's token is revoked, expired or unknown: log in again",
        ));
    };
    let safe = matches!(*method, Method::GET | Method::HEAD);
    if !safe && !session.has_csrf(headers) {
        return Err(ApiError::forbidden(format!(
            "a browser action needs the {} header (the UI sends it)",
            session::CSRF_HEADER
        )));
    }
    Ok(caller)
}

/// The middleware in front of every route under the token: finds the
/// caller, writes the audit entry of a request that may change something,
/// refuses a caller beyond its role, and records how the request ended.
pub async fn authorize(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let caller = match caller_of(&state, &method, req.headers()) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%method, %path, error = %e.message, "request refused: no caller");
            return Err(e);
        }
    };
    let method_name = method.as_str().to_ascii_lowercase();
    let matched = req
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    // A route missing from the table needs the highest role: a route added
    // without a role is closed, not open.
    let (route, needed) = state
        .access
        .roles
        .iter()
        .find(|((m, p), _)| *m == method_name && Some(*p) == matched)
        .map_or(("", Role::Admin), |((_, p), r)| (*p, *r));
    let mutating = !matches!(method, Method::GET | Method::HEAD);
    let mut req = req;
    req.extensions_mut().insert(caller.clone());
    if !mutating {
        if !caller.role.allows(needed) {
            return Err(beyond_role(&method, &path, needed, &caller));
        }
        return Ok(next.run(req).await);
    }
    let client = client_of(&req);
    let (path_kept, mut secrets) = audit::path_and_secrets(
        req.uri()
            .path_and_query()
            .map_or(path.as_str(), |p| p.as_str()),
    );
    let asked = Asked {
        method: method.to_string(),
        route: route.to_string(),
        path: path_kept,
        params: String::new(),
        client,
    };
    // The body is read here (the route's own limit) so the entry holds its
    // parameters; the handler gets the same bytes.
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, BODY_BYTES_MAX).await {
        Ok(b) => b,
        Err(_) => {
            let e = ApiError {
                status: axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                kind: "too_large",
                message: format!("the body is over {BODY_BYTES_MAX} bytes"),
            };
            let asked = Asked {
                params: format!("(a body over {BODY_BYTES_MAX} bytes, not read)"),
                ..asked
            };
            record_refusal(&state, &caller, asked, &e, started)?;
            return Err(e);
        }
    };
    let (params, body_secrets) = audit::params_and_secrets(&bytes);
    secrets.extend(body_secrets);
    let asked = Asked { params, ..asked };
    if !caller.role.allows(needed) {
        let e = beyond_role(&method, &path, needed, &caller);
        record_refusal(&state, &caller, asked, &e, started)?;
        return Err(e);
    }
    let entry = asked.entry(&state, &caller, None, 0);
    let seq = state.access.seq.fetch_add(1, Ordering::Relaxed);
    // Written ahead: if the log cannot hold it, nothing happens.
    let pending = audit::begin(
        state.engine.store(),
        entry,
        seq,
        state.access.audit_retention,
    )?;
    let req = Request::from_parts(parts, Body::from(bytes));
    let resp = next.run(req).await;
    let (resp, error) = if resp.status().as_u16() >= 400 {
        error_of(resp).await
    } else {
        (resp, None)
    };
    let outcome = audit::Outcome {
        status: resp.status().as_u16(),
        // An error that quotes a secret parameter does not put it back.
        error: error.map(|m| audit::scrub(&m, &secrets)),
        took_ms: started.elapsed().as_millis() as u64,
    };
    tracing::info!(
        who = %caller.name, %method, route, status = outcome.status,
        "audited request"
    );
    audit::finish(state.engine.store(), pending, outcome)?;
    Ok(resp)
}

/// What a changing request asked, as its audit entry keeps it.
struct Asked {
    method: String,
    route: String,
    /// The path and query, secret query values left out.
    path: String,
    /// The body, secrets left out.
    params: String,
    client: String,
}

impl Asked {
    fn entry(
        self,
        state: &AppState,
        caller: &Caller,
        outcome: Option<audit::Outcome>,
        refusals_dropped: u64,
    ) -> audit::AuditEntry {
        audit::AuditEntry {
            at_ms: state.engine.now_ms(),
            who: caller.name.clone(),
            role: caller.role,
            method: self.method,
            route: self.route,
            path: self.path,
            params: self.params,
            client: self.client,
            outcome,
            boot_ms: state.started_at_ms,
            refusals_dropped,
        }
    }
}

/// The client's address, as the listener saw it.
fn client_of(req: &Request) -> String {
    req.extensions()
        .get::<ConnectInfo<ClientAddr>>()
        .map_or_else(|| "unknown".to_string(), |c| c.0 .0.to_string())
}

/// Writes the entry of a changing request refused before any handler ran
/// (it changed nothing: one write, with its outcome), if its caller's
/// refusal budget allows; else counts it as dropped.
fn record_refusal(
    state: &AppState,
    caller: &Caller,
    asked: Asked,
    e: &ApiError,
    started: Instant,
) -> Result<(), ApiError> {
    let now_ms = state.engine.now_ms();
    let Some(dropped_before) = refusals::admit(&state.access.refusals, &caller.name, now_ms) else {
        tracing::debug!(who = %caller.name, method = %asked.method, path = %asked.path,
            "refusal over the caller's audit budget: not written, counted");
        return Ok(());
    };
    let outcome = audit::Outcome {
        status: e.status.as_u16(),
        error: Some(e.message.clone()),
        took_ms: started.elapsed().as_millis() as u64,
    };
    tracing::info!(who = %caller.name, method = %asked.method, path = %asked.path,
        status = outcome.status, dropped_before, "audited refusal");
    let entry = asked.entry(state, caller, Some(outcome), dropped_before);
    let seq = state.access.seq.fetch_add(1, Ordering::Relaxed);
    audit::write_whole(
        state.engine.store(),
        entry,
        seq,
        state.access.audit_retention,
    )?;
    Ok(())
}

/// The answer to a request no route takes (404) or no method of its route
/// takes (405): `error`, and, for a changing request whose caller is known,
/// its audit entry (every changing request with a valid token is in the
/// log), within the caller's refusal budget. A request with no valid
/// caller names nobody and gets the same answer, unlogged.
pub async fn unrouted(state: AppState, req: Request, error: ApiError) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    if matches!(method, Method::GET | Method::HEAD) {
        return error.into_response();
    }
    let Ok(caller) = caller_of(&state, &method, req.headers()) else {
        return error.into_response();
    };
    let (path, _) = audit::path_and_secrets(
        req.uri()
            .path_and_query()
            .map_or(req.uri().path(), |p| p.as_str()),
    );
    let asked = Asked {
        method: method.to_string(),
        route: String::new(),
        path,
        // No handler reads it: the body is left unread.
        params: String::new(),
        client: client_of(&req),
    };
    match record_refusal(&state, &caller, asked, &error, started) {
        Ok(()) => error.into_response(),
        // The log cannot take it: say so, as a routed request would.
        Err(e) => e.into_response(),
    }
}

fn beyond_role(method: &Method, path: &str, needed: Role, caller: &Caller) -> ApiError {
    tracing::warn!(who = %caller.name, role = %caller.role, %method, path, needed = %needed, "request beyond the caller's role");
    ApiError::forbidden(format!(
        "{method} {path} needs the {needed} role; token {:?} has the {} role",
        caller.name, caller.role
    ))
}

/// An error answer's message, and the answer rebuilt from its bytes.
async fn error_of(resp: Response) -> (Response, Option<String>) {
    let (parts, body) = resp.into_parts();
    match axum::body::to_bytes(body, ERROR_BODY_BYTES_MAX).await {
        Ok(bytes) => {
            let message = serde_json::from_slice::<ErrorBody>(&bytes)
                .map(|b| b.error.message)
                .unwrap_or_else(|_| String::from_utf8_lossy(&bytes).into_owned());
            (
                Response::from_parts(parts, Body::from(bytes)),
                Some(message),
            )
        }
        Err(_) => (
            Response::from_parts(parts, Body::empty()),
            Some("(the error's body was over the audit's limit)".into()),
        ),
    }
}
