//! The member's Raft listener: `/raft/append`, `/raft/vote`,
//! `/raft/snapshot` (MessagePack, from peers) and `/raft/info` (JSON: the
//! member's API URL and worker address, for followers that proxy to it and
//! for clients). Every route needs the cluster's cookie.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use super::network::COOKIE_HEADER;
use super::types::Raft;

/// What `/raft/info` says of a member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberInfo {
    /// Its Raft id.
    pub id: u64,
    /// Its API's URL (every member serves one; followers proxy).
    pub api_url: String,
    /// Where workers join it (`--cluster`), if they may.
    pub cluster: Option<String>,
}

/// The Raft routes' state.
#[derive(Clone)]
struct Rpc {
    raft: Raft,
    cookie: Arc<str>,
    info: Arc<MemberInfo>,
}

/// The largest request body a peer may send (a batch of entries or a
/// snapshot chunk).
pub const RPC_BODY_BYTES_MAX: usize = 256 << 20;

/// Serves the Raft routes on `listener` until the runtime ends.
pub(super) fn spawn(
    listener: tokio::net::TcpListener,
    raft: Raft,
    cookie: &str,
    about: MemberInfo,
) -> tokio::task::JoinHandle<()> {
    let state = Rpc {
        raft,
        cookie: Arc::from(cookie),
        info: Arc::new(about),
    };
    let app = axum::Router::new()
        .route("/raft/append", post(append))
        .route("/raft/vote", post(vote))
        .route("/raft/snapshot", post(snapshot))
        .route("/raft/info", get(member_info))
        .layer(axum::extract::DefaultBodyLimit::max(RPC_BODY_BYTES_MAX))
        .with_state(state);
    // No Nagle: an append's answer is one small write the leader waits on.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "replica: cannot set TCP_NODELAY");
        }
    });
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "replica: the Raft listener failed");
        }
    })
}

/// Binds the Raft address.
pub(super) async fn bind(addr: &str) -> Result<tokio::net::TcpListener, String> {
    let parsed: SocketAddr = addr
        .parse()
        .map_err(|e| format!("Raft address {addr:?}: {e} (write HOST:PORT)"))?;
    tokio::net::TcpListener::bind(parsed)
        .await
        .map_err(|e| format!("cannot listen on the Raft address {addr}: {e}"))
}

fn cookie_ok(state: &Rpc, headers: &HeaderMap) -> bool {
    let given = headers
        .get(COOKIE_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    // Equal hashes: a comparison whose time says nothing of the cookie.
    blake3::hash(given) == blake3::hash(state.cookie.as_bytes())
}

fn refused() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        "a Raft request without the cluster's cookie",
    )
        .into_response()
}

fn msgpack<T: Serialize>(value: &T) -> Response {
    match rmp_serde::to_vec_named(value) {
        Ok(bytes) => (
            [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
            bytes,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

fn bad(e: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        format!("a Raft request that does not decode: {e}"),
    )
        .into_response()
}

async fn append(State(s): State<Rpc>, headers: HeaderMap, body: Bytes) -> Response {
    if !cookie_ok(&s, &headers) {
        return refused();
    }
    match rmp_serde::from_slice(&body) {
        Ok(req) => msgpack(&s.raft.append_entries(req).await),
        Err(e) => bad(e),
    }
}

async fn vote(State(s): State<Rpc>, headers: HeaderMap, body: Bytes) -> Response {
    if !cookie_ok(&s, &headers) {
        return refused();
    }
    match rmp_serde::from_slice(&body) {
        Ok(req) => msgpack(&s.raft.vote(req).await),
        Err(e) => bad(e),
    }
}

async fn snapshot(State(s): State<Rpc>, headers: HeaderMap, body: Bytes) -> Response {
    if !cookie_ok(&s, &headers) {
        return refused();
    }
    match rmp_serde::from_slice(&body) {
        Ok(req) => msgpack(&s.raft.install_snapshot(req).await),
        Err(e) => bad(e),
    }
}

async fn member_info(State(s): State<Rpc>, headers: HeaderMap) -> Response {
    if !cookie_ok(&s, &headers) {
        return refused();
    }
    axum::Json(&*s.info).into_response()
}
