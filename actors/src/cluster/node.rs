//! The ractor_cluster node of an engine or a worker: its `NodeServer`,
//! TLS, the worker's connection to the engine, and the node server's
//! session events turned into messages for the gateway or the link.
//!
//! ractor_cluster authenticates every session with the cookie (a SHA-256
//! challenge; the cookie itself never crosses) and, when TLS is set, runs
//! it over tokio-rustls. Frames are limited to
//! [`crate::protocol::FRAME_BYTES_MAX`] both ways.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeConnectionMode;
use ractor_cluster::{
    IncomingEncryptionMode, NodeEventSubscription, NodeServer, NodeServerMessage,
};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

// The session news lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::cluster::SessionEvent;
use crate::msg::cluster::{GatewayMsg, LinkMsg};
use crate::protocol::FRAME_BYTES_MAX;

/// A failure to set up a cluster node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A file could not be read.
    #[error("{what} {path}: {error}")]
    File {
        /// What the file is.
        what: &'static str,
        /// Where.
        path: String,
        /// Why.
        error: String,
    },
    /// TLS settings are not valid.
    #[error("tls: {0}")]
    Tls(String),
    /// The node server did not start.
    #[error("cluster node: {0}")]
    Start(String),
}

/// Reads a cookie file: its content, trimmed; an empty one is refused.
pub fn read_cookie(path: &Path) -> Result<String, NodeError> {
    let raw = std::fs::read_to_string(path).map_err(|e| NodeError::File {
        what: "cookie file",
        path: path.display().to_string(),
        error: e.to_string(),
    })?;
    let cookie = raw.trim().to_string();
    if let Some(mode) = loose_mode(path) {
        // A shared secret others on the machine can read is no secret.
        tracing::warn!(path = %path.display(), mode = format!("{mode:o}"), "cookie file is readable by others: chmod 600 it");
    }
    if cookie.is_empty() {
        return Err(NodeError::File {
            what: "cookie file",
            path: path.display().to_string(),
            error: "it is empty".into(),
        });
    }
    Ok(cookie)
}

/// The permission bits of `path` when its group or others may read it.
fn loose_mode(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then_some(mode)
}

/// The crypto provider of every TLS config weir makes (ring).
pub fn crypto() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The PEM certificates of `path`; none is an error.
pub fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, NodeError> {
    use rustls::pki_types::pem::PemObject;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| NodeError::File {
            what: "certificate file",
            path: path.display().to_string(),
            error: e.to_string(),
        })?
        .collect();
    let certs = certs.map_err(|e| NodeError::File {
        what: "certificate file",
        path: path.display().to_string(),
        error: e.to_string(),
    })?;
    if certs.is_empty() {
        return Err(NodeError::File {
            what: "certificate file",
            path: path.display().to_string(),
            error: "it holds no PEM certificate".into(),
        });
    }
    Ok(certs)
}

/// The engine's TLS acceptor from a PEM certificate chain and key.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<tokio_rustls::TlsAcceptor, NodeError> {
    use rustls::pki_types::pem::PemObject;
    let chain = certs(cert)?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| NodeError::File {
        what: "key file",
        path: key.display().to_string(),
        error: e.to_string(),
    })?;
    let config = rustls::ServerConfig::builder_with_provider(crypto())
        .with_safe_default_protocol_versions()
        .map_err(|e| NodeError::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| NodeError::Tls(e.to_string()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// A worker's TLS connector trusting the CA certificates of `ca`.
pub fn tls_connector(ca: &Path) -> Result<tokio_rustls::TlsConnector, NodeError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in certs(ca)? {
        roots
            .add(c)
            .map_err(|e| NodeError::Tls(format!("{}: {e}", ca.display())))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(crypto())
        .with_safe_default_protocol_versions()
        .map_err(|e| NodeError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// Starts a node server listening on `listen` (an explicit port: workers
/// are told it). `name` must be unique in the cluster.
pub async fn start_server(
    listen: SocketAddr,
    cookie: String,
    name: String,
    tls: Option<tokio_rustls::TlsAcceptor>,
) -> Result<ActorRef<NodeServerMessage>, NodeError> {
    let encryption = tls.map(IncomingEncryptionMode::Tls);
    let server = NodeServer::new(
        listen.port(),
        cookie,
        name,
        listen.ip().to_string(),
        encryption,
        Some(NodeConnectionMode::Isolated),
    )
    .with_listen_addr(listen.ip())
    .with_max_inbound_frame_size(FRAME_BYTES_MAX);
    let (actor, _) = Actor::spawn(None, server, ())
        .await
        .map_err(|e| NodeError::Start(e.to_string()))?;
    Ok(actor)
}

/// Where the node server's events go.
#[derive(Clone)]
enum EventSink {
    Link(ActorRef<LinkMsg>),
    Gateway(ActorRef<GatewayMsg>),
}

struct Subscription(EventSink);

impl Subscription {
    fn send(&self, id: u64, peer: String, e: SessionEvent) {
        match &self.0 {
            EventSink::Link(l) => {
                let _ = l.cast(LinkMsg::Session(id, e));
            }
            EventSink::Gateway(g) => {
                let _ = g.cast(GatewayMsg::Session { peer, event: e });
            }
        }
    }
}

impl NodeEventSubscription for Subscription {
    fn node_session_opened(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        self.send(ses.node_id, ses.peer_addr, SessionEvent::Opened);
    }

    fn node_session_disconnected(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        self.send(ses.node_id, ses.peer_addr, SessionEvent::Closed);
    }

    fn node_session_authenticated(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        self.send(ses.node_id, ses.peer_addr, SessionEvent::Authenticated);
    }

    fn node_session_ready(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        self.send(ses.node_id, ses.peer_addr, SessionEvent::Ready);
    }
}

/// Sends the gateway the node server's session events.
pub fn subscribe_gateway(server: &ActorRef<NodeServerMessage>, gateway: ActorRef<GatewayMsg>) {
    let _ = server.cast(NodeServerMessage::SubscribeToEvents {
        id: "weir.gateway".into(),
        subscription: Box::new(Subscription(EventSink::Gateway(gateway))),
    });
}

/// How a worker reaches the engine.
#[derive(Clone)]
pub struct Connector {
    server: ActorRef<NodeServerMessage>,
    /// The engine's addresses: one, or a replicated engine's members (only
    /// the leader listens; a follower refuses the connection at once).
    addresses: Arc<Vec<String>>,
    /// The address tried first: the last one that answered.
    current: Arc<std::sync::atomic::AtomicUsize>,
    tls: Option<tokio_rustls::TlsConnector>,
    /// How long the kernel may hold unacknowledged data or an idle
    /// connection without an answer before it drops it: the engine's lease
    /// once a welcome said it.
    silence_ms: Arc<std::sync::atomic::AtomicU64>,
}

/// How long one address may take to accept a connection (and its TLS
/// handshake) before the next member is tried.
pub const ADDRESS_CONNECT_TIMEOUT_MS: u64 = 1_500;

/// The silence bound of a worker's socket before an engine's welcome gives
/// its lease (the engine's default lease).
pub const SILENCE_MS_DEFAULT: u64 = 5_000;

impl Connector {
    /// Connects through `server` to `address` (`host:port`, or several
    /// separated by commas: the members of a replicated engine, tried in
    /// turn), over TLS when `tls` is set.
    pub fn new(
        server: ActorRef<NodeServerMessage>,
        address: String,
        tls: Option<tokio_rustls::TlsConnector>,
    ) -> Result<Connector, NodeError> {
        let addresses: Vec<String> = address
            .split(',')
            .map(|a| a.trim().to_string())
            .filter(|a| !a.is_empty())
            .collect();
        if addresses.is_empty() {
            return Err(NodeError::Tls(format!("no engine address in {address:?}")));
        }
        if tls.is_some() {
            for a in &addresses {
                server_name(a)?;
            }
        }
        Ok(Connector {
            server,
            addresses: Arc::new(addresses),
            current: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            tls,
            silence_ms: Arc::new(std::sync::atomic::AtomicU64::new(SILENCE_MS_DEFAULT)),
        })
    }

    /// Bounds the silence of the next sessions' sockets (the engine's lease).
    pub fn set_silence_ms(&self, ms: u64) {
        self.silence_ms
            .store(ms.max(1_000), std::sync::atomic::Ordering::Relaxed);
    }

    /// Closes every session of this node (a worker has one: the engine's),
    /// so that a reconnect starts afresh instead of waiting on a connection
    /// the network went silent on.
    pub fn close_sessions(&self) {
        let server = self.server.clone();
        tokio::spawn(async move { close_all(&server).await });
    }

    /// As [`Connector::close_sessions`], returning once each session
    /// stopped (at most a second each).
    pub async fn close_sessions_now(&self) {
        close_all(&self.server).await;
    }

    /// Makes the next connect start with the next address (the current
    /// one is a deposed leader).
    pub fn next_address(&self) {
        self.current
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// How many addresses the engine has (a replicated engine's members).
    pub fn members(&self) -> usize {
        self.addresses.len()
    }

    /// The engine's address tried first (the last that answered).
    pub fn address(&self) -> &str {
        let i = self.current.load(std::sync::atomic::Ordering::Relaxed);
        &self.addresses[i % self.addresses.len()]
    }

    /// Sends `link` the node server's session events.
    pub fn subscribe(&self, link: ActorRef<LinkMsg>) {
        let _ = self.server.cast(NodeServerMessage::SubscribeToEvents {
            id: "weir.link".into(),
            subscription: Box::new(Subscription(EventSink::Link(link))),
        });
    }

    /// Opens a session to the engine (its authentication follows, and is
    /// reported as session events).
    ///
    /// The socket is made here rather than by ractor_cluster so that it
    /// gets TCP keepalive and `TCP_USER_TIMEOUT` near the lease: a network
    /// that drops packets silently would otherwise hold a dead connection
    /// for as long as the kernel's retransmissions last.
    pub async fn connect(&self) -> Result<(), ConnectError> {
        // Each member in turn from the last that answered: a follower of a
        // replicated engine does not listen, so it refuses at once. Each
        // address has its own deadline: a member that drops packets (a
        // powered-off machine, a firewall) costs its deadline, not the
        // round, and the next is tried.
        let n = self.addresses.len();
        let first = self.current.load(std::sync::atomic::Ordering::Relaxed);
        let mut errors: Vec<String> = Vec::new();
        let mut tls_error = None;
        for k in 0..n {
            let i = (first + k) % n;
            let address = &self.addresses[i];
            let tried = tokio::time::timeout(
                std::time::Duration::from_millis(ADDRESS_CONNECT_TIMEOUT_MS),
                self.connect_to(address),
            )
            .await
            .unwrap_or_else(|_| {
                Err(ConnectError::Unreachable(format!(
                    "no answer within {ADDRESS_CONNECT_TIMEOUT_MS} ms"
                )))
            });
            match tried {
                Ok(()) => {
                    self.current.store(i, std::sync::atomic::Ordering::Relaxed);
                    return Ok(());
                }
                Err(e) => {
                    if n > 1 {
                        tracing::debug!(engine = %address, error = %e, "member refused; trying the next");
                    }
                    if let ConnectError::Tls(t) = &e {
                        tls_error.get_or_insert_with(|| format!("{address}: {t}"));
                    }
                    errors.push(format!("{address}: {e}"));
                }
            }
        }
        // Every address failed: the error names each, with its own cause.
        Err(match tls_error {
            Some(t) if n == 1 => ConnectError::Tls(t),
            _ => ConnectError::Unreachable(errors.join("; ")),
        })
    }

    async fn connect_to(&self, address: &str) -> Result<(), ConnectError> {
        let unreachable = |e: std::io::Error| ConnectError::Unreachable(e.to_string());
        let stream = tokio::net::TcpStream::connect(address)
            .await
            .map_err(unreachable)?;
        stream.set_nodelay(true).map_err(unreachable)?;
        let silence_ms = self.silence_ms.load(std::sync::atomic::Ordering::Relaxed);
        if let Err(e) = bound_silence(&stream, silence_ms) {
            tracing::warn!(error = %e, "cannot set keepalive and TCP_USER_TIMEOUT on the engine's socket");
        }
        let peer_addr = stream.peer_addr().map_err(unreachable)?;
        let local_addr = stream.local_addr().map_err(unreachable)?;
        let net = match &self.tls {
            None => ractor_cluster::NetworkStream::Raw {
                peer_addr,
                local_addr,
                stream,
            },
            Some(c) => {
                let name = server_name(address).map_err(|e| ConnectError::Tls(e.to_string()))?;
                ractor_cluster::NetworkStream::TlsClient {
                    peer_addr,
                    local_addr,
                    stream: c
                        .connect(name, stream)
                        .await
                        .map_err(|e| ConnectError::Tls(e.to_string()))?,
                }
            }
        };
        self.server
            .cast(NodeServerMessage::ConnectionOpened {
                stream: Box::new(net),
                is_server: false,
            })
            .map_err(|e| ConnectError::Unreachable(format!("the cluster node stopped: {e}")))
    }
}

/// The TLS server name of `address` (`host:port`).
fn server_name(address: &str) -> Result<ServerName<'static>, NodeError> {
    let host = address
        .rsplit_once(':')
        .map_or(address, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    match host.parse::<IpAddr>() {
        Ok(ip) => Ok(ServerName::IpAddress(ip.into())),
        Err(_) => ServerName::try_from(host.clone())
            .map_err(|e| NodeError::Tls(format!("server name {host:?}: {e}"))),
    }
}

async fn close_all(server: &ActorRef<NodeServerMessage>) {
    if let Ok(sessions) = ractor::call_t!(server, NodeServerMessage::GetSessions, 1_000) {
        for s in sessions.values() {
            tracing::info!(peer = %s.peer_addr, "closing a session of the worker's");
            let _ = s
                .actor
                .stop_and_wait(
                    Some("closed by the worker".into()),
                    Some(std::time::Duration::from_secs(1)),
                )
                .await;
        }
    }
}

/// Bounds how long the kernel keeps a connection whose peer went silent:
/// `TCP_USER_TIMEOUT` (unacknowledged data) and keepalive probes (an idle
/// connection) both give up after about `silence_ms`.
fn bound_silence(stream: &tokio::net::TcpStream, silence_ms: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = stream.as_raw_fd();
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| {
        // SAFETY: `fd` is a live socket owned by `stream`, and the option
        // value is a c_int of the size passed.
        let r = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let secs = (silence_ms / 1_000).max(1) as libc::c_int;
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, secs)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, 1)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3)?;
    set(
        libc::IPPROTO_TCP,
        libc::TCP_USER_TIMEOUT,
        silence_ms.min(i32::MAX as u64) as libc::c_int,
    )
}

/// Why a worker could not open a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// No connection (the engine is down, or the address is wrong).
    #[error("{0}")]
    Unreachable(String),
    /// The TLS handshake failed (the engine's certificate is not signed by
    /// the CA given, or the engine does not speak TLS).
    #[error("TLS handshake failed: {0}")]
    Tls(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_cookie_others_can_read_is_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cookie");
        std::fs::write(&path, "secret\n").unwrap();
        for (mode, loose) in [(0o644, true), (0o640, true), (0o600, false), (0o400, false)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(loose_mode(&path).is_some(), loose, "{mode:o}");
            assert_eq!(read_cookie(&path).unwrap(), "secret");
        }
    }
}
