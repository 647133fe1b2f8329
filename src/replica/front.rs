//! The member's public listener (`--listen`): every member serves the API
//! and UI at the same paths. The leader's front passes requests to its
//! engine's API (on a loopback port of its own); a follower's front passes
//! them to the leader's front; with no leader known it answers 503 naming
//! the members. `/healthz`, `/readyz` and `GET /api/v1/members` are
//! answered by the member itself, so a client sees the group even during
//! an election; the first two from its own state alone.
//! Adding and removing members (admin) happens on the leader.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::node::Replica;
use super::types::wall_ms;
use crate::serve::access;
use crate::serve::access::role::Role;
use crate::serve::error::ApiError;
use crate::serve::listen::{ClientAddr, TlsListener};

/// Marks a request a front passed on: it is not passed on again (two
/// members that each think the other leads do not bounce it).
const PASSED_HEADER: &str = "x-weir-passed";
/// The member whose front answered.
const MEMBER_HEADER: &str = "x-weir-member";
/// The client's address, as the first front saw it.
const FORWARDED_HEADER: &str = "x-forwarded-for";
/// The largest body a front passes on.
const PASS_BODY_BYTES_MAX: usize = 16 << 20;

#[derive(Clone)]
struct FrontState {
    replica: Replica,
    /// The engine's API URL while this member leads.
    local: Arc<RwLock<Option<String>>>,
    http: reqwest::Client,
    token: Arc<str>,
}

/// A running front.
pub struct Front {
    local: Arc<RwLock<Option<String>>>,
    addr: std::net::SocketAddr,
    scheme: &'static str,
    join: tokio::task::JoinHandle<()>,
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
    ) -> Result<Front, String> {
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let local = Arc::new(RwLock::new(None));
        let mut http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(2));
        if let Some(ca) = ca {
            let pem = std::fs::read(ca).map_err(|e| format!("{}: {e}", ca.display()))?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| format!("{}: {e}", ca.display()))?;
            http = http.add_root_certificate(cert);
        }
        let http = http.build().map_err(|e| e.to_string())?;
        let scheme = if tls.is_some() { "https" } else { "http" };
        let state = FrontState {
            replica,
            local: local.clone(),
            http,
            token: Arc::from(token),
        };
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(state)
            .into_make_service_with_connect_info::<ClientAddr>();
        let join = match tls {
            None => tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "replica: the front failed");
                }
            }),
            Some(acceptor) => {
                let listener = TlsListener::new(listener, acceptor).map_err(|e| e.to_string())?;
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app).await {
                        tracing::error!(error = %e, "replica: the front failed");
                    }
                })
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

    /// Stops serving.
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
    ConnectInfo(client): ConnectInfo<ClientAddr>,
    req: Request,
) -> Response {
    let mut resp = answer(&s, client, req).await;
    if let Ok(v) = HeaderValue::from_str(&s.replica.settings.id.to_string()) {
        resp.headers_mut().insert(MEMBER_HEADER, v);
    }
    resp
}

async fn answer(s: &FrontState, client: ClientAddr, req: Request) -> Response {
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
    client: ClientAddr,
    method: &Method,
    path: &str,
    req: Request,
) -> Response {
    // The engine's own rule (bearer token, or a UI session with its
    // anti-CSRF header on a change), against the store every member holds.
    let role = match access::caller_in(&s.replica.store, &s.token, wall_ms(), method, req.headers())
    {
        Ok(c) => c.role,
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
    if *method != Method::POST {
        return ApiError::method_not_allowed(format!("{path} does not take {method}"))
            .into_response();
    }
    if role < Role::Admin {
        return ApiError::forbidden(format!("{method} {path} needs the admin role"))
            .into_response();
    }
    // A change is made by the leader: a follower passes it on (once: the
    // leader's front answers it, or says the leader moved).
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
    let done = if path == "/api/v1/members" {
        let bytes = match axum::body::to_bytes(req.into_body(), 64 << 10).await {
            Ok(b) => b,
            Err(e) => return ApiError::unavailable(e.to_string()).into_response(),
        };
        let add: AddMember = match serde_json::from_slice(&bytes) {
            Ok(a) => a,
            Err(e) => {
                return (StatusCode::BAD_REQUEST, axum::Json(serde_json::json!({"error": format!("the body must be {{\"id\": N, \"raft\": \"HOST:PORT\"}}: {e}")}))).into_response()
            }
        };
        s.replica.add_member(add.id, add.raft).await
    } else if let Some(id) = path
        .strip_prefix("/api/v1/members/")
        .and_then(|r| r.strip_suffix("/remove"))
        .and_then(|id| id.parse::<u64>().ok())
    {
        s.replica.remove_member(id).await
    } else {
        return ApiError::not_found(format!("no route {path}")).into_response();
    };
    match done {
        Ok(()) => axum::Json(s.replica.members_view().await).into_response(),
        Err(e) => ApiError::conflict(e).into_response(),
    }
}

/// Passes a request to the engine (this member leads) or the leader.
async fn pass(s: &FrontState, client: ClientAddr, req: Request) -> Response {
    let local = s.local.read().unwrap_or_else(|p| p.into_inner()).clone();
    let passed = req.headers().contains_key(PASSED_HEADER);
    let base = match local {
        Some(url) => url,
        None if passed => {
            return ApiError::unavailable("the leader is changing: try again in a moment")
                .into_response()
        }
        None => match s.replica.leader() {
            Some(id) if id != s.replica.settings.id => match s.replica.info_of(id).await {
                Ok(info) => info.api_url,
                Err(e) => {
                    return ApiError::unavailable(format!(
                        "member {id} leads but does not answer: {e}"
                    ))
                    .into_response()
                }
            },
            Some(_) => {
                return ApiError::unavailable(
                    "this member leads; its engine is opening: try again in a moment",
                )
                .into_response()
            }
            None => {
                return ApiError::unavailable(format!(
                    "no leader yet (members: {}): try again in a moment",
                    s.replica
                        .settings
                        .peers
                        .iter()
                        .map(|(id, a)| format!("{id}={a}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .into_response()
            }
        },
    };
    let (parts, body) = req.into_parts();
    let target = format!(
        "{base}{}",
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let bytes = match axum::body::to_bytes(body, PASS_BODY_BYTES_MAX).await {
        Ok(b) => b,
        Err(e) => {
            return (StatusCode::PAYLOAD_TOO_LARGE, format!("request body: {e}")).into_response()
        }
    };
    let mut headers = parts.headers.clone();
    headers.remove(axum::http::header::HOST);
    headers.remove(axum::http::header::CONTENT_LENGTH);
    headers.insert(PASSED_HEADER, HeaderValue::from_static("1"));
    if !headers.contains_key(FORWARDED_HEADER) {
        if let Ok(v) = HeaderValue::from_str(&client.0.to_string()) {
            headers.insert(FORWARDED_HEADER, v);
        }
    }
    let sent = s
        .http
        .request(parts.method.clone(), &target)
        .headers(headers)
        .body(bytes)
        .send()
        .await;
    let resp = match sent {
        Ok(r) => r,
        // Not connected: the request went nowhere, a client may send it
        // again (503). Otherwise it may have taken effect: 502.
        Err(e) if e.is_connect() => {
            return ApiError::unavailable(format!("the leader's API ({base}) did not answer: {e}")).into_response()
        }
        Err(e) => {
            return (
                StatusCode::BAD_GATEWAY,
                axum::Json(serde_json::json!({"error": {"code": "bad_gateway", "message": format!("the leader's API ({base}) failed mid-request: {e}; the request may have taken effect")}})),
            )
                .into_response()
        }
    };
    let mut out = Response::builder().status(resp.status());
    for (k, v) in resp.headers() {
        if k != axum::http::header::TRANSFER_ENCODING && k != axum::http::header::CONNECTION {
            out = out.header(k, v);
        }
    }
    out.body(Body::from_stream(resp.bytes_stream()))
        .unwrap_or_else(|e| ApiError::internal(e.to_string()).into_response())
}
