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
use std::time::Duration;

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
        }
    }
}

/// Why a call failed: the peer was not reached, or it answered an error.
enum CallError<E> {
    Unreachable(String),
    Remote(E),
}

impl Peer {
    async fn call<Req: Serialize, Resp: DeserializeOwned, E: DeserializeOwned>(
        &self,
        path: &str,
        req: &Req,
        ttl: Duration,
        check: fn(&Resp, u64) -> Result<(), String>,
    ) -> Result<Resp, CallError<E>> {
        let body =
            rmp_serde::to_vec_named(req).map_err(|e| CallError::Unreachable(e.to_string()))?;
        let started = std::time::Instant::now();
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
        let answer: Result<Resp, E> =
            rmp_serde::from_slice(&bytes).map_err(|e| CallError::Unreachable(e.to_string()))?;
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
        match self
            .call(
                "append",
                &rpc,
                option.hard_ttl(),
                guard::check_append_answer,
            )
            .await
        {
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
