//! The member's public listener (`--listen`): every member serves the API
//! and UI at the same paths. The leader's front passes requests to its
//! engine's API (on a loopback port of its own); a follower's front passes
//! them to the leader's front; with no leader known it answers 503 naming
//! the members. `/healthz`, `/readyz` and `GET /api/v1/members` are
//! answered by the member itself, so a client sees the group even during
//! an election; the first two from its own state alone.
//! Adding and removing members (admin) happens on the leader.
//!
//! A request is passed on as received: its method, its path and query
//! byte for byte (a `..` or `%2e%2e` segment reaches the engine as it
//! came, which answers it as a single engine does, not as the path it
//! would resolve to), its headers but the hop-by-hop ones. The client's
//! address goes with it, vouched for ([`crate::serve::client`]): to the
//! member's own engine under the process's key, to the leader's front
//! under the key every member derives from the cookie; the engine's audit
//! log and its loopback-only answers see the real client.
//!
//! A body is read only after its caller is known: a request with a body
//! to a route under the token is refused here (401, 403) by the engine's
//! own rule against the store every member holds, before a byte of the
//! body is read and before any connection to the leader is opened; and no
//! body over the engine's own limit ([`BODY_BYTES_MAX`]) is read (413). A
//! token created a moment ago through another member is known here once
//! this member applied its creation (the same replication the members and
//! backup routes answer from).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Deserialize;
use tokio_rustls::rustls;

use super::front_audit::{Asked, FrontAudit};
use super::node::Replica;
use super::types::wall_ms;
use crate::serve::access;
use crate::serve::access::audit;
use crate::serve::access::role::Role;
use crate::serve::client::{Voucher, CLIENT_HEADER};
use crate::serve::connections::HEADER_READ_TIMEOUT;
use crate::serve::error::ApiError;
use crate::serve::listen::{ClientAddr, TlsListener};
use crate::serve::BODY_BYTES_MAX;

/// Marks a request a front passed on: it is not passed on again (two
/// members that each think the other leads do not bounce it).
const PASSED_HEADER: &str = "x-weir-passed";
/// The member whose front answered.
const MEMBER_HEADER: &str = "x-weir-member";
/// The largest body of `POST /api/v1/members`.
const MEMBERS_BODY_BYTES_MAX: usize = 64 << 10;
/// How long a front waits for a connection to the engine or the leader.
const PASS_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// A pooled connection idle this long is closed by the front: well before
/// the other end closes it (an idle connection lives
/// [`HEADER_READ_TIMEOUT`] there), so a request is never sent on a
/// connection being closed under it.
const PASS_IDLE_TIMEOUT: Duration = Duration::from_secs(HEADER_READ_TIMEOUT.as_secs() / 2);
/// Headers of one connection, not of the request: not passed on
/// (RFC 9110 §7.6.1), in either direction.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// The client a front passes requests with: hyper's own, so the path goes
/// out as it came in.
type PassClient = hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Body>;

#[derive(Clone)]
struct FrontState {
    replica: Replica,
    /// The engine's API URL while this member leads.
    local: Arc<RwLock<Option<String>>>,
    http: PassClient,
    token: Arc<str>,
    /// Vouches for clients to the other members' fronts, and checks theirs.
    members: Voucher,
    /// The path templates of the routes under the token.
    guarded: Arc<Vec<&'static str>>,
    /// The leader's API URL as last asked, by its id: a follower asks the
    /// leader once per term, not once per request.
    leader_api: Arc<Mutex<Option<(u64, String)>>>,
    /// The audit log of the membership changes this front makes.
    audit: FrontAudit,
}

/// A running front.
pub struct Front {
    local: Arc<RwLock<Option<String>>>,
    addr: std::net::SocketAddr,
    scheme: &'static str,
    join: tokio::task::JoinHandle<()>,
}

/// The client a front passes requests with, trusting the system's roots
/// and `ca` (a private CA the members' certificates are signed by).
fn pass_client(ca: Option<&std::path::Path>) -> Result<PassClient, String> {
    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::debug!(error = %e, "replica: a system root certificate was not loaded");
    }
    roots.add_parsable_certificates(native.certs);
    if let Some(ca) = ca {
        for c in weir_actors::cluster::node::certs(ca).map_err(|e| e.to_string())? {
            roots.add(c).map_err(|e| format!("{}: {e}", ca.display()))?;
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(weir_actors::cluster::node::crypto())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    tcp.set_connect_timeout(Some(PASS_CONNECT_TIMEOUT));
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp);
    Ok(
        hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(PASS_IDLE_TIMEOUT)
            .build(connector),
    )
}

impl Front {
    /// Serves on `listener` (over TLS with `tls`); `token` is the file
    /// token (DATA/token or --token-file) every member shares.
    pub fn spawn(
        listener: tokio::net::TcpListener,
        tls: Option<tokio_rustls::TlsAcceptor>,
        replica: Replica,
        token: &str,
        ca: Option<&std::path::Path>,
        audit_retention: std::time::Duration,
    ) -> Result<Front, String> {
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let local = Arc::new(RwLock::new(None));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let guarded = crate::serve::routes_with_roles()
            .into_iter()
            .map(|(_, path, _)| path)
            .collect();
        let state = FrontState {
            audit: FrontAudit::new(replica.store.clone(), audit_retention),
            members: Voucher::members(&replica.settings.cookie),
            replica,
            local: local.clone(),
            http: pass_client(ca)?,
            token: Arc::from(token),
            guarded: Arc::new(guarded),
            leader_api: Arc::new(Mutex::new(None)),
        };
        let app = axum::Router::new().fallback(handle).with_state(state);
        let forever = std::future::pending::<()>();
        let join = match tls {
            None => tokio::spawn(crate::serve::connections::serve(listener, app, forever)),
            Some(acceptor) => {
                let listener = TlsListener::new(listener, acceptor).map_err(|e| e.to_string())?;
                tokio::spawn(crate::serve::connections::serve(listener, app, forever))
            }
        };
        Ok(Front {
            local,
            addr,
            scheme,
            join,
        })
    }

    /// The front's URL.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme, self.addr)
    }

    /// Passes requests to the engine at `url` (this member leads), or no
    /// longer (`None`: it stopped leading).
    pub fn set_local(&self, url: Option<String>) {
        *self.local.write().unwrap_or_else(|p| p.into_inner()) = url;
    }

    /// Stops serving (open connections end with it).
    pub fn stop(&self) {
        self.join.abort();
    }
}

/// The body of `POST /api/v1/members`.
#[derive(Debug, Deserialize)]
struct AddMember {
    id: u64,
    raft: String,
}

/// Names the member that answered (`x-weir-member`), whoever's answer it
/// passes on: the UI says which member it is on.
async fn handle(
    State(s): State<FrontState>,
    ConnectInfo(peer): ConnectInfo<ClientAddr>,
    mut req: Request,
) -> Response {
    // Another member's front vouches for the client it passes on; anyone
    // else's claim is dropped.
    let client = s.members.check(req.headers()).unwrap_or(peer.0);
    req.headers_mut().remove(CLIENT_HEADER);
    let mut resp = answer(&s, client, req).await;
    if let Ok(v) = HeaderValue::from_str(&s.replica.settings.id.to_string()) {
        resp.headers_mut().insert(MEMBER_HEADER, v);
    }
    resp
}

async fn answer(s: &FrontState, client: SocketAddr, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    // Both from the member's own state: no peer is asked.
    if path == "/healthz" && method == Method::GET {
        let h = s.replica.health();
        return axum::Json(serde_json::json!({
            "status": "ok",
            "member": h.member,
            "state": h.state,
            "leader": h.leader,
            "term": h.term,
        }))
        .into_response();
    }
    if path == "/readyz" && method == Method::GET {
        let mut h = s.replica.health();
        // A leader is ready once its engine serves (it opens the engine
        // on its store after winning).
        let serving = s.local.read().unwrap_or_else(|p| p.into_inner()).is_some();
        if h.ready && h.leader == Some(h.member) && !serving {
            h.ready = false;
            h.why_not = Some("it leads; its engine is opening".into());
        }
        let status = if h.ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        return (status, axum::Json(h)).into_response();
    }
    if path == "/api/v1/members" || path.starts_with("/api/v1/members/") {
        return members(s, client, &method, &path, req).await;
    }
    // Any member backs up its own store, at its applied index: a
    // follower's backup costs the leader nothing.
    if path == "/api/v1/backup" && method == Method::GET {
        let role = match access::caller_in(
            &s.replica.store,
            &s.token,
            wall_ms(),
            &method,
            req.headers(),
        ) {
            Ok(c) => c.role,
            Err(e) => return e.into_response(),
        };
        if role < Role::Admin {
            return ApiError::forbidden("GET /api/v1/backup needs the admin role").into_response();
        }
        return crate::backup::response(s.replica.store.clone()).await;
    }
    pass(s, client, req).await
}

async fn members(
    s: &FrontState,
    client: SocketAddr,
    method: &Method,
    path: &str,
    req: Request,
) -> Response {
    let started = std::time::Instant::now();
    // The engine's own rule (bearer token, or a UI session with its
    // anti-CSRF header on a change), against the store every member holds.
    let caller =
        match access::caller_in(&s.replica.store, &s.token, wall_ms(), method, req.headers()) {
            Ok(c) => c,
            Err(e) => return e.into_response(),
        };
    if *method == Method::GET && path == "/api/v1/members" {
        // The leader's view says how far each follower is behind; a
        // follower's own view stands in when no leader answers.
        let leader = s.replica.leader();
        let passed = req.headers().contains_key(PASSED_HEADER);
        if leader.is_some() && leader != Some(s.replica.settings.id) && !passed {
            let resp = pass(s, client, req).await;
            if resp.status().is_success() {
                return resp;
            }
        }
        return axum::Json(s.replica.members_view().await).into_response();
    }
    let remove = path
        .strip_prefix("/api/v1/members/")
        .and_then(|r| r.strip_suffix("/remove"))
        .map(|id| id.parse::<u64>().map_err(|_| id.to_string()));
    let route = match (path == "/api/v1/members", &remove) {
        (true, _) => "/api/v1/members",
        (false, Some(_)) => "/api/v1/members/{id}/remove",
        (false, None) => {
            return ApiError::not_found(format!("no route {path}")).into_response();
        }
    };
    if *method != Method::POST {
        return ApiError::method_not_allowed(format!("{path} does not take {method}"))
            .into_response();
    }
    // A change is checked, audited and made by the leader: a follower
    // passes it on (once: the leader's front answers it, or says the
    // leader moved), so one entry stands for one request.
    let leader = s.replica.leader();
    if leader.is_some()
        && leader != Some(s.replica.settings.id)
        && !req.headers().contains_key(PASSED_HEADER)
    {
        return pass(s, client, req).await;
    }
    if s.replica.leader() != Some(s.replica.settings.id) {
        return match s.replica.leader() {
            Some(l) => ApiError::unavailable(format!(
                "member {} leads: ask it (weir members reads every member)",
                l
            ))
            .into_response(),
            None => ApiError::unavailable("no leader yet: try again in a moment").into_response(),
        };
    }
    // The client a member passed this from, as it vouched for it.
    let client = client.to_string();
    let (path_kept, mut secrets) =
        audit::path_and_secrets(req.uri().path_and_query().map_or(path, |p| p.as_str()));
    let asked = |params: String| Asked {
        method: method.to_string(),
        route,
        path: path_kept.clone(),
        params,
        client: client.clone(),
    };
    let Ok(bytes) = axum::body::to_bytes(req.into_body(), MEMBERS_BODY_BYTES_MAX).await else {
        let e = ApiError::too_large(MEMBERS_BODY_BYTES_MAX);
        let params = format!("(a body over {MEMBERS_BODY_BYTES_MAX} bytes, not read)");
        if let Err(w) = s
            .audit
            .refused(&caller, asked(params), 413, &e.message, started)
            .await
        {
            return ApiError::internal(w).into_response();
        }
        return e.into_response();
    };
    let (params, body_secrets) = audit::params_and_secrets(&bytes);
    secrets.extend(body_secrets);
    if caller.role < Role::Admin {
        let e = ApiError::forbidden(format!("{method} {path} needs the admin role"));
        if let Err(w) = s
            .audit
            .refused(&caller, asked(params), 403, &e.message, started)
            .await
        {
            return ApiError::internal(w).into_response();
        }
        return e.into_response();
    }
    // Written ahead: if the log cannot hold it, nothing changes.
    let pending = match s.audit.begin(&caller, asked(params)).await {
        Ok(p) => p,
        Err(w) => return ApiError::internal(w).into_response(),
    };
    let done: Result<(), ApiError> = match remove {
        None => match serde_json::from_slice::<AddMember>(&bytes) {
            Ok(add) => s
                .replica
                .add_member(add.id, add.raft)
                .await
                .map_err(ApiError::conflict),
            Err(e) => Err(ApiError::bad(format!(
                "body: {{\"id\": N, \"raft\": \"HOST:PORT\"}} is expected: {e}"
            ))),
        },
        Some(Ok(id)) => s
            .replica
            .remove_member(id)
            .await
            .map_err(ApiError::conflict),
        Some(Err(id)) => Err(ApiError::not_found(format!(
            "no member {id:?}: a member's id is a number"
        ))),
    };
    let (status, error) = match &done {
        Ok(()) => (200, None),
        Err(e) => (e.status.as_u16(), Some(audit::scrub(&e.message, &secrets))),
    };
    tracing::info!(who = %caller.name, %method, route, status, "audited membership change");
    if let Err(w) = s.audit.finish(pending, status, error, started).await {
        return ApiError::internal(w).into_response();
    }
    match done {
        Ok(()) => axum::Json(s.replica.members_view().await).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Whether `path` is served under the token: it matches a route's
/// template (`{x}` one segment, `{*x}` the rest), as the engine's router
/// matches the raw path.
fn guarded(templates: &[&str], path: &str) -> bool {
    templates.iter().any(|t| {
        let mut want = t.split('/');
        let mut got = path.split('/');
        loop {
            match (want.next(), got.next()) {
                (None, None) => return true,
                (Some(w), Some(g)) if w.starts_with("{*") => return !g.is_empty(),
                (Some(w), Some(g)) if w.starts_with('{') => {
                    if g.is_empty() {
                        return false;
                    }
                }
                (Some(w), Some(g)) => {
                    if w != g {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    })
}

/// The length a request declares for its body (`None`: none, or
/// chunked), and whether it has one at all.
fn body_of(headers: &HeaderMap) -> (Option<u64>, bool) {
    let len = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    (len, chunked || len.is_some_and(|n| n > 0))
}

/// Where a request is passed: this member's engine, or the leader's front.
enum Target {
    Engine(String),
    Leader(u64, String),
}

/// Where to pass a request now, or why nowhere (503).
async fn target(s: &FrontState, passed: bool) -> Result<Target, ApiError> {
    if let Some(url) = s.local.read().unwrap_or_else(|p| p.into_inner()).clone() {
        return Ok(Target::Engine(url));
    }
    if passed {
        return Err(ApiError::unavailable(
            "the leader is changing: try again in a moment",
        ));
    }
    match s.replica.leader() {
        Some(id) if id != s.replica.settings.id => {
            let cached = s
                .leader_api
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            if let Some((cached_id, url)) = cached {
                if cached_id == id {
                    return Ok(Target::Leader(id, url));
                }
            }
            match s.replica.info_of(id).await {
                Ok(info) => {
                    *s.leader_api.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some((id, info.api_url.clone()));
                    Ok(Target::Leader(id, info.api_url))
                }
                Err(e) => {
                    tracing::warn!(leader = id, error = %e, "replica: the leader does not answer");
                    Err(ApiError::unavailable(format!(
                        "member {id} leads but does not answer: try again in a moment"
                    )))
                }
            }
        }
        Some(_) => Err(ApiError::unavailable(
            "this member leads; its engine is opening: try again in a moment",
        )),
        None => Err(ApiError::unavailable(format!(
            "no leader yet (members {}): try again in a moment",
            s.replica
                .settings
                .peers
                .keys()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// Passes a request to the engine (this member leads) or the leader.
async fn pass(s: &FrontState, client: SocketAddr, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    // The caller, then the declared size (the engine's order): a request
    // that would be refused costs no read of its body and no connection.
    let (declared, has_body) = body_of(&parts.headers);
    if has_body && guarded(&s.guarded, parts.uri.path()) {
        if let Err(e) = access::caller_in(
            &s.replica.store,
            &s.token,
            wall_ms(),
            &parts.method,
            &parts.headers,
        ) {
            return e.into_response();
        }
    }
    if declared.is_some_and(|n| n > BODY_BYTES_MAX as u64) {
        return ApiError::too_large(BODY_BYTES_MAX).into_response();
    }
    let passed = parts.headers.contains_key(PASSED_HEADER);
    let target = match target(s, passed).await {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let Ok(bytes) = axum::body::to_bytes(body, BODY_BYTES_MAX).await else {
        return ApiError::too_large(BODY_BYTES_MAX).into_response();
    };
    let (base, vouched) = match &target {
        Target::Engine(url) => (url, Voucher::process().vouch(client)),
        Target::Leader(_, url) => (url, s.members.vouch(client)),
    };
    // The path and query exactly as they came: nothing is parsed or
    // resolved on the way.
    let uri = base.parse::<Uri>().map(|b| {
        let mut p = b.into_parts();
        p.path_and_query = parts.uri.path_and_query().cloned();
        Uri::from_parts(p)
    });
    let Ok(Ok(uri)) = uri else {
        tracing::error!(%base, path = ?parts.uri, "replica: no URI to pass the request to");
        return ApiError::internal("the request cannot be passed on").into_response();
    };
    let mut headers = parts.headers;
    // The body is read whole: its length is the bytes', and no 100
    // Continue is asked of the other end.
    for h in HOP_BY_HOP.iter().chain(&["content-length", "expect"]) {
        headers.remove(*h);
    }
    headers.insert(PASSED_HEADER, HeaderValue::from_static("1"));
    headers.insert(CLIENT_HEADER, vouched);
    let mut out = hyper::Request::new(Body::from(bytes));
    *out.method_mut() = parts.method;
    *out.uri_mut() = uri;
    *out.headers_mut() = headers;
    let who = match &target {
        Target::Engine(_) => "this member's engine".to_string(),
        Target::Leader(id, _) => format!("member {id} (the leader)"),
    };
    let resp = match s.http.request(out).await {
        Ok(r) => r,
        // Not connected: the request went nowhere, a client may send it
        // again (503). Otherwise it may have taken effect: 502. Neither
        // names the address it was passed to (the engine's is internal).
        Err(e) if e.is_connect() => {
            tracing::warn!(%base, error = ?e, "replica: passing a request: not connected");
            *s.leader_api.lock().unwrap_or_else(|p| p.into_inner()) = None;
            return ApiError::unavailable(format!("{who} did not answer: try again in a moment"))
                .into_response();
        }
        Err(e) => {
            tracing::warn!(%base, error = ?e, "replica: passing a request: failed mid-request");
            return ApiError::bad_gateway(format!(
                "{who} failed mid-request; the request may have taken effect: check before sending it again"
            ))
            .into_response();
        }
    };
    let (mut head, body) = resp.into_parts();
    for h in HOP_BY_HOP {
        head.headers.remove(h);
    }
    Response::from_parts(head, Body::new(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_paths_match_templates_segment_by_segment() {
        let t = [
            "/api/v1/graphs/{graph}/pause",
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/artifacts/{*name}",
        ];
        let cases = [
            ("/api/v1/graphs/etl/pause", true),
            ("/api/v1/graphs/%2e%2e/pause", true),
            ("/api/v1/graphs//pause", false),
            ("/api/v1/graphs/etl/pause/", false),
            ("/api/v1/graphs/x/keys/%2e%2e/%2e%2e/etl/pause", false),
            ("/api/v1/graphs/g/runs/p/nodes/n/artifacts/a/b.html", true),
            ("/api/v1/graphs/g/runs/p/nodes/n/artifacts/", false),
            ("/ui-session/login", false),
        ];
        for (i, (path, want)) in cases.into_iter().enumerate() {
            assert_eq!(guarded(&t, path), want, "#{i}: {path}");
        }
    }
}
