//! The Raft transport: each member serves `/raft/*` over HTTP on its own
//! address (the `--raft-peers` one), or HTTPS with mutual TLS
//! (`--peer-ca`), bodies in MessagePack, and every request carries the
//! cluster's cookie. Peers are named by IP or host name; a name is
//! resolved on every new connection. A separate listener from the API:
//! Raft's heartbeats must not queue behind an API request, and the API's
//! tokens and roles say nothing about the peers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::guard;
use super::stream::{
    Answered, AppendStream, STREAM_FAILURES_MAX, STREAM_IDLE_MAX, STREAM_PROTOCOL,
    STREAM_RETRY_AFTER,
};
use super::tls::PeerTls;
use super::types::{wall_ms, Member, TypeConfig};

/// The header the cookie travels in.
pub const COOKIE_HEADER: &str = "x-weir-cookie";

/// When each peer last answered (ms since the epoch), by id.
pub type Contacts = Arc<Mutex<BTreeMap<u64, u64>>>;

/// Makes clients to peers.
#[derive(Clone)]
pub struct Network {
    /// How this member reaches each peer, from its flags: it wins over
    /// the address the membership holds (a peer behind NAT, or a proxy).
    pub(super) routes: Arc<BTreeMap<u64, String>>,
    pub(super) http: reqwest::Client,
    pub(super) cookie: Arc<str>,
    pub(super) contacts: Contacts,
    /// The least time a request may take: openraft bounds an append by the
    /// heartbeat interval, which a follower's fsync on a busy disk
    /// overruns; an append that times out is sent again, and a follower
    /// that never gets one through stands for election.
    pub(super) rpc_timeout_min: Duration,
    /// This member's current term, kept by the member's metrics watcher:
    /// a peer's answer is checked against it as its requests are.
    pub(super) term: Arc<AtomicU64>,
    /// `https` with mutual TLS between members, else `http`.
    pub(super) scheme: &'static str,
    /// When this member last took an append from a leader (ms since the
    /// epoch; 0 never): a follower's measure of hearing the group.
    pub(super) leader_heard_ms: Arc<AtomicU64>,
}

impl Network {
    pub(super) fn new(
        cookie: &str,
        routes: BTreeMap<u64, String>,
        rpc_timeout_min: Duration,
        tls: Option<&PeerTls>,
    ) -> Result<Network, String> {
        let mut http = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(30));
        if let Some(tls) = tls {
            // This member's certificate, and the group's CA alone.
            http = http.use_preconfigured_tls((*tls.client).clone());
        }
        let http = http
            .build()
            .map_err(|e| format!("cannot build the Raft transport's client: {e}"))?;
        Ok(Network {
            routes: Arc::new(routes),
            http,
            cookie: Arc::from(cookie),
            contacts: Arc::new(Mutex::new(BTreeMap::new())),
            rpc_timeout_min,
            term: Arc::new(AtomicU64::new(0)),
            scheme: if tls.is_some() { "https" } else { "http" },
            leader_heard_ms: Arc::new(AtomicU64::new(0)),
        })
    }
}

/// A client to one peer.
pub struct Peer {
    net: Network,
    target: u64,
    base: String,
    /// The append stream to the peer, once open (see the `stream` module).
    /// In a mutex only for `Sync` (openraft's bound): it is reached
    /// through `&mut self`, never locked.
    stream: Option<Mutex<AppendStream>>,
    /// Appends go over HTTP until then: the peer did not offer a stream,
    /// or its streams did not answer.
    http_until: Option<Instant>,
    /// Streams in a row that opened and failed before any answer.
    stream_failures: u32,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &Member) -> Peer {
        Peer {
            net: self.clone(),
            target,
            base: format!(
                "{}://{}/raft",
                self.scheme,
                self.routes.get(&target).unwrap_or(&node.raft)
            ),
            stream: None,
            http_until: None,
            stream_failures: 0,
        }
    }
}

/// Why a call failed: the peer was not reached, or it answered an error.
enum CallError<E> {
    Unreachable(String),
    Remote(E),
}

/// Why an append stream did not open.
enum OpenError {
    /// The peer answered, and not 101: it offers no stream (an older
    /// version); appends go over HTTP.
    NotOffered(String),
    /// The peer was not reached.
    Unreachable(String),
}

impl Peer {
    /// Opens an append stream to the peer (see the `stream` module),
    /// within `ttl`.
    async fn open_stream(&self, ttl: Duration) -> Result<AppendStream, OpenError> {
        let resp = self
            .net
            .http
            .get(format!("{}/stream", self.base))
            .header(COOKIE_HEADER, &*self.net.cookie)
            .header(reqwest::header::CONNECTION, "upgrade")
            .header(reqwest::header::UPGRADE, STREAM_PROTOCOL)
            .timeout(ttl)
            .send()
            .await
            .map_err(|e| OpenError::Unreachable(e.to_string()))?;
        let status = resp.status();
        if status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
            return Err(OpenError::NotOffered(format!(
                "{}/stream answered {status}",
                self.base
            )));
        }
        let io = resp
            .upgrade()
            .await
            .map_err(|e| OpenError::Unreachable(e.to_string()))?;
        tracing::info!(peer = self.target, "replica: append stream open");
        Ok(AppendStream::new(io))
    }

    /// Sends an append over the stream, opening it first: `None` when the
    /// peer offers none (the caller sends it over HTTP).
    async fn append_streamed(
        &mut self,
        rpc: &AppendEntriesRequest<TypeConfig>,
        ttl: Duration,
    ) -> Option<Result<AppendEntriesResponse<u64>, CallError<RaftError<u64>>>> {
        let ttl = ttl.max(self.net.rpc_timeout_min);
        let deadline = Instant::now() + ttl;
        if let Some(s) = &mut self.stream {
            let s = s.get_mut().unwrap_or_else(|p| p.into_inner());
            // An exchange cut (its append cancelled) leaves the stream out
            // of step; one idle for half the peer's limit may be closed by
            // now (no heartbeats while a snapshot is sent): another.
            if s.is_cut() || s.idle_for() > STREAM_IDLE_MAX / 2 {
                tracing::debug!(
                    peer = self.target,
                    cut = s.is_cut(),
                    "replica: an append stream dropped; opening another"
                );
                self.stream = None;
            }
        }
        // Over HTTP for a while: its call encodes the append itself.
        if self.stream.is_none() && self.http_until.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        let body = match rmp_serde::to_vec_named(rpc) {
            Ok(b) => b,
            Err(e) => return Some(Err(CallError::Unreachable(e.to_string()))),
        };
        // A stream that answered before and fails now may have been closed
        // by the peer (idle, a refused frame): the append goes once more on
        // a fresh one. Appends are idempotent.
        for retry in [true, false] {
            let fresh = self.stream.is_none();
            if fresh {
                match self.open_stream(ttl).await {
                    Ok(s) => self.stream = Some(Mutex::new(s)),
                    Err(OpenError::NotOffered(why)) => {
                        tracing::info!(peer = self.target, why = %why, "replica: the peer offers no append stream; appends go over HTTP");
                        self.http_until = Some(Instant::now() + STREAM_RETRY_AFTER);
                        return None;
                    }
                    Err(OpenError::Unreachable(why)) => {
                        return Some(Err(CallError::Unreachable(why)))
                    }
                }
            }
            let stream = self
                .stream
                .as_mut()?
                .get_mut()
                .unwrap_or_else(|p| p.into_inner());
            let started = Instant::now();
            let left = deadline.saturating_duration_since(started);
            let failed = match tokio::time::timeout(left, stream.exchange(&body)).await {
                Ok(Ok(answered)) => {
                    self.stream_failures = 0;
                    tracing::trace!(
                        peer = self.target,
                        path = "stream",
                        elapsed_us = started.elapsed().as_micros() as u64,
                        "replica: call answered"
                    );
                    return Some(match answered {
                        Answered::Refused(why) => Err(CallError::Unreachable(format!(
                            "{}/stream refused the append: {why}",
                            self.base
                        ))),
                        Answered::Answer(bytes) => self.answer(&bytes, guard::check_append_answer),
                    });
                }
                Ok(Err(why)) => why,
                Err(_) => format!(
                    "{}/stream: no answer within {} ms",
                    self.base,
                    ttl.as_millis()
                ),
            };
            // Out of step with the peer, or closed: never used again.
            self.stream = None;
            if !fresh && retry && Instant::now() < deadline {
                continue;
            }
            if fresh {
                self.stream_failures += 1;
                // Opened and never answering (a proxy that takes the
                // upgrade and carries nothing): HTTP for a while.
                if self.stream_failures >= STREAM_FAILURES_MAX {
                    tracing::warn!(peer = self.target, failures = self.stream_failures, why = %failed, "replica: append streams to the peer open and do not answer; appends go over HTTP");
                    self.http_until = Some(Instant::now() + STREAM_RETRY_AFTER);
                    self.stream_failures = 0;
                }
            }
            return Some(Err(CallError::Unreachable(failed)));
        }
        None
    }

    /// Decodes a peer's answer and checks it against this member's term;
    /// notes the peer's contact.
    fn answer<Resp: DeserializeOwned, E: DeserializeOwned>(
        &self,
        bytes: &[u8],
        check: fn(&Resp, u64) -> Result<(), String>,
    ) -> Result<Resp, CallError<E>> {
        let answer: Result<Resp, E> =
            rmp_serde::from_slice(bytes).map_err(|e| CallError::Unreachable(e.to_string()))?;
        if let Ok(r) = &answer {
            // An answer out of bounds is no answer: openraft never sees it.
            check(r, self.net.term.load(Ordering::Relaxed)).map_err(|why| {
                tracing::warn!(peer = self.target, why = %why, "replica: a peer's answer out of bounds refused");
                CallError::Unreachable(format!("{} answered out of bounds: {why}", self.base))
            })?;
        }
        self.net
            .contacts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.target, wall_ms());
        answer.map_err(CallError::Remote)
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned, E: DeserializeOwned>(
        &self,
        path: &str,
        req: &Req,
        ttl: Duration,
        check: fn(&Resp, u64) -> Result<(), String>,
    ) -> Result<Resp, CallError<E>> {
        let body =
            rmp_serde::to_vec_named(req).map_err(|e| CallError::Unreachable(e.to_string()))?;
        let started = Instant::now();
        let resp = self
            .net
            .http
            .post(format!("{}/{path}", self.base))
            .header(COOKIE_HEADER, &*self.net.cookie)
            .header("content-type", "application/msgpack")
            .timeout(ttl.max(self.net.rpc_timeout_min))
            .body(body)
            .send()
            .await
            .map_err(|e| CallError::Unreachable(e.to_string()))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| CallError::Unreachable(e.to_string()))?;
        if !status.is_success() {
            return Err(CallError::Unreachable(format!(
                "{} answered {status}: {}",
                self.base,
                String::from_utf8_lossy(&bytes)
            )));
        }
        // The commit path's stages: the round trip as the leader sees it,
        // beside the peer's "append served" (see the log store's "log
        // appended").
        tracing::trace!(
            peer = self.target,
            path,
            elapsed_us = started.elapsed().as_micros() as u64,
            "replica: call answered"
        );
        self.answer(&bytes, check)
    }
}

fn unreachable<E: std::error::Error>(why: String) -> RPCError<u64, Member, E> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other(why)))
}

fn network<E: std::error::Error>(why: String) -> RPCError<u64, Member, E> {
    RPCError::Network(NetworkError::new(&std::io::Error::other(why)))
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, Member, RaftError<u64>>> {
        let streamed = self.append_streamed(&rpc, option.hard_ttl()).await;
        let answered = match streamed {
            Some(answered) => answered,
            None => {
                self.call(
                    "append",
                    &rpc,
                    option.hard_ttl(),
                    guard::check_append_answer,
                )
                .await
            }
        };
        match answered {
            Ok(r) => Ok(r),
            Err(CallError::Unreachable(why)) => Err(unreachable(why)),
            Err(CallError::Remote(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, Member, RaftError<u64, InstallSnapshotError>>,
    > {
        match self
            .call(
                "snapshot",
                &rpc,
                option.hard_ttl(),
                guard::check_snapshot_answer,
            )
            .await
        {
            Ok(r) => Ok(r),
            // A chunk that failed is sent again; the peer is there.
            Err(CallError::Unreachable(why)) => Err(network(why)),
            Err(CallError::Remote(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, Member, RaftError<u64>>> {
        match self
            .call("vote", &rpc, option.hard_ttl(), guard::check_vote_answer)
            .await
        {
            Ok(r) => Ok(r),
            Err(CallError::Unreachable(why)) => Err(unreachable(why)),
            Err(CallError::Remote(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    use openraft::Vote;

    use super::*;

    /// What a test peer's `/raft/stream` does.
    #[derive(Clone, Copy)]
    enum Streams {
        /// Answers 404: a peer of before the append stream.
        NotOffered,
        /// Each stream answers this many appends (Success), then closes.
        Answering(usize),
        /// Each stream takes appends and never answers.
        Silent,
    }

    /// A peer whose `/raft/stream` does as `streams` says and whose
    /// `/raft/append` answers Success; counts the streams asked for and the
    /// appends over HTTP.
    async fn test_peer(streams: Streams) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
        use crate::replica::stream::{read_frame, write_frame, ANSWER};
        let (asked, appends) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (o, a) = (asked.clone(), appends.clone());
        let success = || {
            let answer: Result<AppendEntriesResponse<u64>, RaftError<u64>> =
                Ok(AppendEntriesResponse::Success);
            rmp_serde::to_vec_named(&answer).unwrap()
        };
        let app = axum::Router::new()
            .route(
                "/raft/append",
                post(move || async move {
                    a.fetch_add(1, Ordering::SeqCst);
                    success()
                }),
            )
            .route(
                "/raft/stream",
                get(move |mut req: axum::extract::Request| async move {
                    o.fetch_add(1, Ordering::SeqCst);
                    let answers = match streams {
                        Streams::NotOffered => {
                            return axum::http::StatusCode::NOT_FOUND.into_response()
                        }
                        Streams::Answering(n) => Some(n),
                        Streams::Silent => None,
                    };
                    let upgrade = hyper::upgrade::on(&mut req);
                    tokio::spawn(async move {
                        let mut io = hyper_util::rt::TokioIo::new(upgrade.await.unwrap());
                        let mut served = 0;
                        while read_frame(&mut io, 1 << 20).await.is_ok() {
                            match answers {
                                Some(n) if served < n => {
                                    write_frame(&mut io, ANSWER, &success()).await.unwrap();
                                    served += 1;
                                    if served == n {
                                        return;
                                    }
                                }
                                _ => {}
                            }
                        }
                    });
                    axum::http::Response::builder()
                        .status(axum::http::StatusCode::SWITCHING_PROTOCOLS)
                        .header(axum::http::header::CONNECTION, "upgrade")
                        .header(axum::http::header::UPGRADE, STREAM_PROTOCOL)
                        .body(axum::body::Body::empty())
                        .unwrap()
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (addr, asked, appends)
    }

    fn heartbeat() -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            entries: Vec::new(),
            leader_commit: None,
        }
    }

    async fn peer_at(addr: String, rpc_timeout_min: Duration) -> Peer {
        let mut net = Network::new("cookie", BTreeMap::new(), rpc_timeout_min, None).unwrap();
        net.new_client(2, &Member { raft: addr }).await
    }

    #[tokio::test]
    async fn an_append_on_a_stream_the_peer_closed_goes_again_on_a_fresh_one() {
        // Each stream answers one append and closes, as a peer closes an
        // idle one: every append still succeeds, none over HTTP.
        let (addr, opened, appends) = test_peer(Streams::Answering(1)).await;
        let mut peer = peer_at(addr, Duration::from_millis(500)).await;
        for _ in 0..3 {
            let answer = peer
                .append_entries(heartbeat(), RPCOption::new(Duration::from_secs(5)))
                .await;
            assert!(
                matches!(answer, Ok(AppendEntriesResponse::Success)),
                "{answer:?}"
            );
        }
        assert_eq!(opened.load(Ordering::SeqCst), 3);
        assert_eq!(appends.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn streams_that_open_and_never_answer_give_way_to_http() {
        let (addr, opened, appends) = test_peer(Streams::Silent).await;
        // Deadlines of a second: an open or an HTTP append on a loaded machine
        // must not be taken for a stream that never answers.
        let mut peer = peer_at(addr, Duration::from_secs(1)).await;
        for _ in 0..STREAM_FAILURES_MAX {
            let answer = peer
                .append_entries(heartbeat(), RPCOption::new(Duration::from_secs(1)))
                .await;
            assert!(answer.is_err(), "{answer:?}");
        }
        let answer = peer
            .append_entries(heartbeat(), RPCOption::new(Duration::from_secs(1)))
            .await;
        assert!(
            matches!(answer, Ok(AppendEntriesResponse::Success)),
            "{answer:?}"
        );
        assert_eq!(opened.load(Ordering::SeqCst), STREAM_FAILURES_MAX as usize);
        assert_eq!(
            appends.load(Ordering::SeqCst),
            1,
            "over HTTP after the failures"
        );
    }

    #[tokio::test]
    async fn appends_to_a_peer_without_the_stream_go_over_http() {
        let (addr, asked_stream, appends) = test_peer(Streams::NotOffered).await;
        let mut peer = peer_at(addr, Duration::from_millis(500)).await;
        for _ in 0..3 {
            let answer = peer
                .append_entries(heartbeat(), RPCOption::new(Duration::from_secs(5)))
                .await;
            assert!(
                matches!(answer, Ok(AppendEntriesResponse::Success)),
                "{answer:?}"
            );
        }
        assert_eq!(appends.load(Ordering::SeqCst), 3, "every append over HTTP");
        assert_eq!(
            asked_stream.load(Ordering::SeqCst),
            1,
            "asked once, not again before STREAM_RETRY_AFTER"
        );
        assert!(peer.stream.is_none());
    }
}
