//! How the API's connections are served: hyper's HTTP/1.1, with every
//! limit named here, for the engine's listener and a replicated member's
//! front alike (plain TCP or TLS: [`serve`] takes either listener).
//!
//! `axum::serve` sets no header-read timeout, so a client that sends half
//! a request head held its connection (and its task) for as long as it
//! liked: twenty such clients stayed for minutes. Here a head must arrive
//! whole within [`HEADER_READ_TIMEOUT`] of the connection's start, or of
//! the previous answer on a kept-alive connection (an idle connection is
//! closed after the same time), and may hold at most [`HEAD_BYTES_MAX`]
//! bytes and [`HEADERS_MAX`] headers. hyper's own answers to a head it
//! refuses carry the API's error body (`parse_errors`).
//!
//! Each request carries its connection's [`ClientAddr`]. A stop stops
//! accepting, lets each connection finish the request it serves (hyper's
//! graceful shutdown), and waits for them; dropping the serving future
//! drops every connection with it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::LazyLock;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::serve::Listener;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::listen::ClientAddr;
use super::parse_errors::Reshaped;

/// A request's head (request line and headers) must arrive whole within
/// this time, and an idle kept-alive connection is closed after it. Ten
/// seconds is long for any real client on a working network (a browser
/// sends its head in one write) and short enough that slow-header clients
/// (slowloris) hold no connection for long.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes a request's head may hold (hyper answers 431 past it):
/// above the 65,534-byte URI limit, so a long URI is told it is too long
/// (414); it also bounds what one connection buffers for a head.
pub const HEAD_BYTES_MAX: usize = 128 * 1024;
/// The most headers a request may carry (hyper answers 431 past it).
pub const HEADERS_MAX: usize = 100;

/// The limits as a 431's message states them.
static HEAD_LIMITS: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} KiB and {HEADERS_MAX} headers at most",
        HEAD_BYTES_MAX / 1024
    )
});

/// hyper's HTTP/1.1 server as every API connection is served.
fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_buf_size(HEAD_BYTES_MAX)
        .max_header_size(HEAD_BYTES_MAX)
        .max_headers(HEADERS_MAX)
        // Whole answers per write: see `parse_errors`.
        .writev(false);
    b
}

/// Serves `router` on `listener` until `stop` completes, then lets open
/// requests finish and returns once every connection closed.
pub async fn serve<L>(mut listener: L, router: Router, stop: impl std::future::Future<Output = ()>)
where
    L: Listener<Addr = SocketAddr>,
{
    let builder = http1();
    let mut open = JoinSet::new();
    let (closing_tx, closing) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            (io, peer) = listener.accept() => {
                open.spawn(connection(builder.clone(), io, peer, router.clone(), closing.clone()));
            }
            // Reaps finished connections, so the set holds open ones only.
            Some(_) = open.join_next(), if !open.is_empty() => {}
            () = &mut stop => break,
        }
    }
    drop(listener);
    let _ = closing_tx.send(true);
    while open.join_next().await.is_some() {}
}

async fn connection<I>(
    builder: hyper::server::conn::http1::Builder,
    io: I,
    peer: SocketAddr,
    router: Router,
    mut closing: watch::Receiver<bool>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        let mut req = req.map(Body::new);
        req.extensions_mut().insert(ConnectInfo(ClientAddr(peer)));
        let router = router.clone();
        async move { Ok::<_, Infallible>(router.oneshot(req).await.unwrap_or_else(|e| match e {})) }
    });
    // Upgrades: a replicated member's Raft listener hands a leader's
    // append stream its connection (`replica::stream`); no API route
    // answers 101.
    let conn = builder
        .serve_connection(TokioIo::new(Reshaped::new(io, &HEAD_LIMITS)), service)
        .with_upgrades();
    tokio::pin!(conn);
    let ended = tokio::select! {
        ended = conn.as_mut() => ended,
        // The value only ever turns true (or its sender goes: the server
        // stopped either way).
        _ = closing.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        // A client that left, a head too slow or too large: the client's
        // affair, not the server's.
        tracing::debug!(%peer, error = %e, "api connection ended");
    }
}
