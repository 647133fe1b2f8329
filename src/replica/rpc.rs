//! The member's Raft listener: `/raft/append`, `/raft/vote`,
//! `/raft/snapshot` (MessagePack, from peers), `/raft/stream` (a leader's
//! appends on a connection of their own: the `stream` module) and
//! `/raft/info` (JSON: the
//! member's API URL and worker address, for followers that proxy to it and
//! for clients). Every route needs the cluster's cookie, checked with the
//! declared length before any body byte is read; what decodes is checked
//! against the member's term ([`super::guard`]) before openraft takes it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use weir_actors::store::{DiskRoom, Store};

use super::guard;
use super::network::COOKIE_HEADER;
use super::stream::{
    read_frame, write_frame, FrameError, ANSWER, REFUSED, REQUEST, STREAM_IDLE_MAX, STREAM_PROTOCOL,
};
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
    /// Its data directory's free space and reserve, as it answers.
    #[serde(default)]
    pub disk: Option<DiskRoom>,
}

/// The Raft routes' state.
#[derive(Clone)]
struct Rpc {
    raft: Raft,
    cookie: Arc<str>,
    info: Arc<MemberInfo>,
    /// Held while a snapshot chunk is read and installed: one transfer at a
    /// time, so two leaders (an old one and a new one) cannot make a member
    /// hold two chunks.
    snapshot: Arc<tokio::sync::Mutex<()>>,
    /// Set when an append from a leader is taken (see `Network`).
    leader_heard_ms: Arc<std::sync::atomic::AtomicU64>,
    /// The member's store: its disk's room.
    store: Store,
}

/// The largest vote a peer may send: a vote and a log id.
pub const VOTE_BODY_BYTES_MAX: u64 = 64 << 10;
/// The largest append a peer may send: at most 64 entries (openraft's
/// `max_payload_entries`) of at most about 1 MiB each (one flush of the
/// store), and their envelopes.
pub const APPEND_BODY_BYTES_MAX: u64 = 96 << 20;
/// The largest snapshot chunk a peer may send: openraft cuts snapshots
/// into chunks of 3 MiB.
pub const SNAPSHOT_BODY_BYTES_MAX: u64 = 16 << 20;

/// The body limit of a Raft route, by path.
fn body_limit(path: &str) -> u64 {
    match path {
        "/raft/append" => APPEND_BODY_BYTES_MAX,
        "/raft/snapshot" => SNAPSHOT_BODY_BYTES_MAX,
        "/raft/vote" => VOTE_BODY_BYTES_MAX,
        _ => 0,
    }
}

/// Serves the Raft routes on `listener` until the runtime ends.
pub(super) fn spawn(
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    raft: Raft,
    cookie: &str,
    about: MemberInfo,
    leader_heard_ms: Arc<std::sync::atomic::AtomicU64>,
    store: Store,
) -> tokio::task::JoinHandle<()> {
    let state = Rpc {
        raft,
        cookie: Arc::from(cookie),
        info: Arc::new(about),
        snapshot: Arc::new(tokio::sync::Mutex::new(())),
        leader_heard_ms,
        store,
    };
    let limited = |bytes: u64| axum::extract::DefaultBodyLimit::max(bytes as usize);
    let app = axum::Router::new()
        .route(
            "/raft/append",
            post(append).layer(limited(APPEND_BODY_BYTES_MAX)),
        )
        .route("/raft/vote", post(vote).layer(limited(VOTE_BODY_BYTES_MAX)))
        .route("/raft/stream", get(open_stream))
        .route(
            "/raft/snapshot",
            post(snapshot).layer(limited(SNAPSHOT_BODY_BYTES_MAX)),
        )
        .route("/raft/info", get(member_info))
        // Before any body byte is read: the cookie, the declared length.
        .layer(axum::middleware::from_fn_with_state(state.clone(), admit))
        .with_state(state);
    if let Some(acceptor) = tls {
        // Handshakes in tasks of their own, bounded; TCP_NODELAY set there.
        return tokio::spawn(async move {
            match crate::serve::listen::TlsListener::new(listener, acceptor) {
                Ok(listener) => {
                    crate::serve::connections::serve(listener, app, std::future::pending()).await
                }
                Err(e) => tracing::error!(error = %e, "replica: the Raft listener failed"),
            }
        });
    }
    // No Nagle: an append's answer is one small write the leader waits on.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "replica: cannot set TCP_NODELAY");
        }
    });
    // Served as the API is (`serve::connections`): a request head must
    // arrive whole within its header-read timeout and limits, so a
    // stranger's half-sent head holds no connection (a member's own
    // connections carry a heartbeat every few tens of ms, never idle that
    // long). It runs until its task is aborted.
    tokio::spawn(crate::serve::connections::serve(
        listener,
        app,
        std::future::pending(),
    ))
}

/// Admits a request on its head alone: the cookie, then a declared length
/// within the route's limit (a body without one is cut at the limit as it
/// streams in), then, for a snapshot chunk, no other transfer under way.
/// A stranger's request costs the member its headers, never its body.
async fn admit(
    State(s): State<Rpc>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !cookie_ok(&s, req.headers()) {
        tracing::warn!(path = %req.uri().path(), "replica: a Raft request without the cluster's cookie refused");
        return refused();
    }
    let limit = body_limit(req.uri().path());
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(n) = declared {
        if n > limit {
            tracing::warn!(path = %req.uri().path(), bytes = n, limit, "replica: a Raft request over its body limit refused");
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "a Raft request of {n} bytes to {}: the limit is {limit}",
                    req.uri().path()
                ),
            )
                .into_response();
        }
    }
    if req.uri().path() == "/raft/snapshot" {
        let Ok(held) = s.snapshot.clone().try_lock_owned() else {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                "a snapshot transfer is under way; send the chunk again",
            )
                .into_response();
        };
        let resp = next.run(req).await;
        drop(held);
        return resp;
    }
    next.run(req).await
}

/// Binds the Raft address. A name is resolved, and the member listens on
/// the first of its addresses it can bind (IPv4 first); when none is this machine's (a
/// name that points at a load balancer or a NAT), on every interface at
/// that port.
pub(super) async fn bind(addr: &str) -> Result<tokio::net::TcpListener, String> {
    let mut resolved: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| format!("Raft address {addr:?}: {e} (write HOST:PORT)"))?
        .collect();
    // IPv4 first: `localhost` names ::1 and 127.0.0.1, and a peer that
    // dials the name falls back from one to the other, but a peer given
    // the IPv4 address does not.
    resolved.sort_by_key(|a| !a.is_ipv4());
    let mut last = None;
    for a in &resolved {
        match tokio::net::TcpListener::bind(a).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some((*a, e)),
        }
    }
    match last {
        Some((a, e)) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            let any = SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), a.port());
            tracing::info!(address = addr, resolved = %a, listen = %any, "replica: the Raft address is not this machine's; listening on every interface");
            tokio::net::TcpListener::bind(any)
                .await
                .map_err(|e| format!("cannot listen on the Raft address {addr} (as {any}): {e}"))
        }
        Some((a, e)) => Err(format!(
            "cannot listen on the Raft address {addr} ({a}): {e}"
        )),
        None => Err(format!("Raft address {addr:?} resolves to no address")),
    }
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
        Ok(bytes) => msgpack_body(bytes),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// An answer of MessagePack `bytes`.
fn msgpack_body(bytes: Vec<u8>) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/msgpack")],
        bytes,
    )
        .into_response()
}

/// This member's current term, for the guard.
fn term_of(s: &Rpc) -> u64 {
    s.raft.metrics().borrow().current_term
}

/// Decodes a request and checks it against this member's term: the
/// request, or the 400 that refuses it (logged when out of bounds).
fn admitted<Req: serde::de::DeserializeOwned>(
    s: &Rpc,
    body: &[u8],
    check: fn(&Req, u64) -> Result<(), String>,
) -> Result<Req, (StatusCode, String)> {
    let req = rmp_serde::from_slice(body).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            format!("a Raft request that does not decode: {e}"),
        )
    })?;
    check(&req, term_of(s)).map_err(|why| {
        tracing::warn!(why = %why, "replica: a Raft request out of bounds refused");
        (
            StatusCode::BAD_REQUEST,
            format!("a Raft request out of bounds: {why}"),
        )
    })?;
    Ok(req)
}

/// A member under its disk reserve takes no entries (nor snapshots): it
/// answers 507, the leader replicates to the others, and it catches up
/// once there is room again. Heartbeats still reach it.
fn no_room(s: &Rpc) -> Option<Response> {
    no_room_why(s).map(IntoResponse::into_response)
}

/// [`no_room`]'s refusal, as a status and a message.
fn no_room_why(s: &Rpc) -> Option<(StatusCode, String)> {
    let room = s.store.disk_room()?;
    room.under_reserve().then(|| {
        tracing::warn!(free_bytes = room.free_bytes, reserve_bytes = room.reserve_bytes, dir = %s.store.dir().display(), "replica: entries refused: the disk is under the reserve");
        (
            StatusCode::INSUFFICIENT_STORAGE,
            format!(
                "member {}: {} MiB free in {}, under the reserve of {} MiB: no entries taken until there is room",
                s.info.id,
                room.free_bytes >> 20,
                s.store.dir().display(),
                room.reserve_bytes >> 20
            ),
        )
    })
}

async fn append(State(s): State<Rpc>, body: Bytes) -> Response {
    match append_answer(&s, &body).await {
        Ok(bytes) => msgpack_body(bytes),
        Err(refused) => refused.into_response(),
    }
}

/// Serves one append, over HTTP or the append stream: the answer's
/// MessagePack, or why it was refused (a status and a message).
async fn append_answer(s: &Rpc, body: &[u8]) -> Result<Vec<u8>, (StatusCode, String)> {
    let req = admitted(s, body, guard::check_append)?;
    if !req.entries.is_empty() {
        if let Some(refused) = no_room_why(s) {
            return Err(refused);
        }
    }
    let entries = req.entries.len();
    let started = std::time::Instant::now();
    let answer = s.raft.append_entries(req).await;
    tracing::trace!(
        entries,
        elapsed_us = started.elapsed().as_micros() as u64,
        "replica: append served"
    );
    if matches!(
        answer,
        Ok(openraft::raft::AppendEntriesResponse::Success
            | openraft::raft::AppendEntriesResponse::PartialSuccess(_)
            | openraft::raft::AppendEntriesResponse::Conflict)
    ) {
        s.leader_heard_ms.store(
            super::types::wall_ms(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }
    rmp_serde::to_vec_named(&answer).map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// Takes a leader's append stream (see the `stream` module): answers 101
/// and serves the connection's frames in a task of its own. The cookie was
/// checked on the head, as for every route.
async fn open_stream(State(s): State<Rpc>, mut req: axum::extract::Request) -> Response {
    let offered = req
        .headers()
        .get(axum::http::header::UPGRADE)
        .is_some_and(|v| {
            v.as_bytes()
                .eq_ignore_ascii_case(STREAM_PROTOCOL.as_bytes())
        });
    if !offered {
        return (
            StatusCode::BAD_REQUEST,
            format!("/raft/stream takes `Upgrade: {STREAM_PROTOCOL}`"),
        )
            .into_response();
    }
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => serve_stream(s, hyper_util::rt::TokioIo::new(io)).await,
            Err(e) => tracing::debug!(error = %e, "replica: an append stream did not open"),
        }
    });
    axum::http::Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(axum::http::header::CONNECTION, "upgrade")
        .header(axum::http::header::UPGRADE, STREAM_PROTOCOL)
        .body(axum::body::Body::empty())
        .unwrap_or_else(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response())
}

/// Serves an append stream's frames until the leader closes it, it goes
/// idle past [`STREAM_IDLE_MAX`], or a frame is out of bounds (too large,
/// of a kind other than a request, not whole in time): the stream closes,
/// and the leader opens another.
async fn serve_stream<I>(s: Rpc, mut io: I)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let frame =
            match tokio::time::timeout(STREAM_IDLE_MAX, read_frame(&mut io, APPEND_BODY_BYTES_MAX))
                .await
            {
                Ok(Ok(frame)) => frame,
                Ok(Err(FrameError::Io(e))) => {
                    tracing::debug!(error = %e, "replica: an append stream ended");
                    return;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "replica: an append stream closed");
                    let _ = write_frame(&mut io, REFUSED, e.to_string().as_bytes()).await;
                    return;
                }
                Err(_) => {
                    tracing::debug!("replica: an idle append stream closed");
                    return;
                }
            };
        if frame.kind != REQUEST {
            tracing::warn!(
                kind = frame.kind,
                "replica: a frame of unknown kind on an append stream"
            );
            return;
        }
        let (kind, bytes) = match append_answer(&s, &frame.payload).await {
            Ok(bytes) => (ANSWER, bytes),
            Err((_, why)) => (REFUSED, why.into_bytes()),
        };
        // A leader that does not read its answers holds no task for long.
        match tokio::time::timeout(STREAM_IDLE_MAX, write_frame(&mut io, kind, &bytes)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "replica: an append stream ended");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    "replica: an append stream closed: its answer not taken within the idle limit"
                );
                return;
            }
        }
    }
}

async fn vote(State(s): State<Rpc>, body: Bytes) -> Response {
    match admitted(&s, &body, guard::check_vote) {
        Ok(req) => msgpack(&s.raft.vote(req).await),
        Err(refused) => refused.into_response(),
    }
}

async fn snapshot(State(s): State<Rpc>, body: Bytes) -> Response {
    if let Some(refused) = no_room(&s) {
        return refused;
    }
    match admitted(&s, &body, guard::check_snapshot) {
        Ok(req) => msgpack(&s.raft.install_snapshot(req).await),
        Err(refused) => refused.into_response(),
    }
}

async fn member_info(State(s): State<Rpc>) -> Response {
    let mut info = (*s.info).clone();
    info.disk = s.store.disk_room();
    axum::Json(info).into_response()
}
