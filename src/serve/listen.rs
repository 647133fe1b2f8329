//! The API's listeners: plain TCP, or TLS (rustls) in front of it.
//!
//! Under TLS, handshakes run in tasks of their own (a slow client cannot
//! hold up the others), bounded by [`HANDSHAKE_TIMEOUT`]; a connection
//! whose first bytes are a plain HTTP request gets a `400` (in the API's
//! error shape) saying to use `https://`, not a broken handshake. Each
//! connection carries the client's address ([`ClientAddr`]) for the audit
//! log.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// A TLS handshake that takes longer is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections handshaken but not yet taken by the server, at most.
pub const ACCEPTED_QUEUE_MAX: usize = 128;
/// After refusing a plain request, the rest of it is read and dropped, at
/// most this many bytes...
pub const PLAIN_DRAIN_BYTES_MAX: usize = 64 * 1024;
/// ...for at most this long, so that the close is a FIN and not a reset.
pub const PLAIN_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// The address a request came from.
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        ClientAddr(*stream.remote_addr())
    }
}

/// A listener that hands over connections once their TLS handshake is done.
pub struct TlsListener {
    local: SocketAddr,
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl TlsListener {
    /// TLS over `tcp` with `acceptor`.
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(ACCEPTED_QUEUE_MAX);
        let accept = tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // EMFILE and friends: wait, as axum's own loop does.
                        tracing::warn!(error = %e, "api accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Answers are small writes a client waits on.
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(error = %e, "cannot set TCP_NODELAY");
                }
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    if let Some(s) = handshake(stream, peer, acceptor).await {
                        let _ = tx.send((s, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { local, rx, accept })
    }
}

async fn handshake(
    stream: TcpStream,
    peer: SocketAddr,
    acceptor: TlsAcceptor,
) -> Option<TlsStream<TcpStream>> {
    let mut first = [0u8; 8];
    let peeked = tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first))
        .await
        .ok()?
        .ok()?;
    // A TLS record starts with 0x16 (handshake); a plain request with a
    // method's letters.
    if peeked > 0 && first[0].is_ascii_uppercase() {
        refuse_plain(stream, peer).await;
        return None;
    }
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => Some(s),
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "tls handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "tls handshake timed out");
            None
        }
    }
}

async fn refuse_plain(mut stream: TcpStream, peer: SocketAddr) {
    tracing::info!(%peer, "plain HTTP on the TLS port refused");
    // The API's error shape, as every other refusal.
    let body = serde_json::json!({"error": {
        "status": 400,
        "kind": "bad_request",
        "message": "this engine serves HTTPS only: use https:// (and --ca FILE for a private CA)",
    }})
    .to_string();
    let answer = format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
    // Closing a socket with unread bytes in it sends a reset, which can
    // overtake the answer (the client reads ECONNRESET, not the 400) or
    // break the client's own write of its body. So read what the client
    // still sends, up to its end or a bound, before closing: a lingering
    // close, as web servers do.
    let _ = tokio::time::timeout(PLAIN_DRAIN_TIMEOUT, async {
        let mut sink = [0u8; 4096];
        let mut drained = 0usize;
        while drained < PLAIN_DRAIN_BYTES_MAX {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

impl Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept task ended (it loops forever unless aborted at
            // drop): nothing more will come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
