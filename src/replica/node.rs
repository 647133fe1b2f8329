//! A running member: its Raft node over its store, started, initialized
//! and asked who leads.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::{Config, ServerState, SnapshotPolicy};
use weir_actors::store::Store;

use super::log_store::LogStore;
use super::machine::Machine;
use super::network::{self, COOKIE_HEADER};
use super::proposer::Proposer;
use super::rpc::{self, MemberInfo};
use super::runtime;
use super::settings::ReplicaSettings;
use super::types::{Member, Raft, ServerStateExt};

/// How often a member compares its disk's free space with the reserve.
pub const DISK_CHECK_MS: u64 = 250;

/// A follower with more of its log than this not yet applied is not ready.
pub const READY_LAG_ENTRIES: u64 = 1_000;

/// What a member says of itself on `/healthz` and `/readyz`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Health {
    /// Its id.
    pub member: u64,
    /// leader, follower, candidate, learner.
    pub state: &'static str,
    /// The leader it knows.
    pub leader: Option<u64>,
    /// Its term.
    pub term: u64,
    /// The last index applied to its store.
    pub applied_index: Option<u64>,
    /// Whether a load balancer may send it requests.
    pub ready: bool,
    /// Why not, when not.
    pub why_not: Option<String>,
}

/// A running member: its Raft node over its store.
#[derive(Clone)]
pub struct Replica {
    /// The Raft node.
    pub raft: Raft,
    /// The member's store (the state machine).
    pub store: Store,
    /// Its settings.
    pub settings: Arc<ReplicaSettings>,
    pub(super) net: network::Network,
    /// Its Raft log (shared with the node).
    logs: LogStore,
    elections: Arc<std::sync::atomic::AtomicU64>,
    /// When a majority last acknowledged this member as leader (an append
    /// sent then), as the metrics watcher saw it (see
    /// [`Replica::quorum_ack_ms_ago`]); `None` while it does not lead.
    quorum_acked: Arc<std::sync::Mutex<Option<Instant>>>,
    /// Whether the data directory is under the store's disk reserve (see
    /// [`Replica::watch_disk`]).
    disk_low: Arc<std::sync::atomic::AtomicBool>,
}

impl Replica {
    /// Starts the member on `store` (opened, not yet written): binds its
    /// Raft address, starts the node, sends the store's writes to it, and
    /// — on the lowest id, when the group is new — makes the group of
    /// `peers`.
    pub async fn start(store: Store, settings: ReplicaSettings) -> Result<Replica, String> {
        let own = settings.peers.get(&settings.id).ok_or_else(|| {
            format!(
                "--raft-id {}: not among --raft-peers ({})",
                settings.id,
                settings
                    .peers
                    .keys()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        let listener = rpc::bind(own).await?;
        // The member's election timeout split into openraft's lease and
        // its own timeout (see `RaftTimers`).
        let timers = settings.timers();
        let config = Config {
            cluster_name: "weir".into(),
            heartbeat_interval: timers.heartbeat_ms,
            election_timeout_min: timers.raft_election_min_ms,
            election_timeout_max: timers.lease_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(settings.snapshot_entries),
            max_in_snapshot_log_to_keep: (settings.snapshot_entries / 2).min(1_000),
            // With entries of at most about 1 MiB (the store's flushes), an
            // append stays well under the listener's body limit.
            max_payload_entries: 64,
            install_snapshot_timeout: 10_000,
            ..Config::default()
        }
        .validate()
        .map_err(|e| format!("Raft settings: {e}"))?;
        // openraft's deadlines on appends and votes: never under the
        // transport's own (see `RpcRuntime`).
        runtime::set_rpc_deadline_min(Duration::from_millis(settings.election_min_ms));
        let mut routes = settings.peers.clone();
        routes.remove(&settings.id);
        let net = network::Network::new(
            &settings.cookie,
            routes,
            Duration::from_millis(settings.election_min_ms),
            settings.tls.as_ref(),
        )?;
        let logs = LogStore::open(&store)?;
        let machine = Machine::new(store.clone());
        let raft = Raft::new(
            settings.id,
            Arc::new(config),
            net.clone(),
            logs.clone(),
            machine,
        )
        .await
        .map_err(|e| format!("cannot start the Raft node: {e}"))?;
        store.set_replicator(Arc::new(Proposer::new(
            raft.clone(),
            Duration::from_millis(settings.election_max_ms * 3),
        )));
        rpc::spawn(
            listener,
            settings.tls.as_ref().map(|t| t.acceptor.clone()),
            raft.clone(),
            &settings.cookie,
            MemberInfo {
                id: settings.id,
                api_url: settings.api_url.clone(),
                cluster: settings.cluster.clone(),
                disk: None,
            },
            net.leader_heard_ms.clone(),
            store.clone(),
        );
        let replica = Replica {
            raft,
            store,
            settings: Arc::new(settings),
            net,
            logs,
            elections: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            quorum_acked: Arc::new(std::sync::Mutex::new(None)),
            disk_low: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        replica.watch_elections();
        replica.watch_disk();
        replica.initialize_if_new().await?;
        Ok(replica)
    }

    /// The lowest id makes a new group of every peer; a group made before
    /// (this member's log or vote says so) is left as it is.
    async fn initialize_if_new(&self) -> Result<(), String> {
        let s = &self.settings;
        if s.peers.keys().next() != Some(&s.id) {
            return Ok(());
        }
        let voted = self
            .store
            .replica_tree()
            .contains_key("vote")
            .unwrap_or(true);
        let logged = !self.logs.is_empty();
        if voted || logged {
            return Ok(());
        }
        let members: BTreeMap<u64, Member> = s
            .peers
            .iter()
            .map(|(id, raft)| (*id, Member { raft: raft.clone() }))
            .collect();
        match self.raft.initialize(members).await {
            Ok(()) => {
                tracing::info!(members = s.peers.len(), "replica: group made");
                Ok(())
            }
            Err(openraft::error::RaftError::APIError(
                openraft::error::InitializeError::NotAllowed(_),
            )) => Ok(()),
            Err(e) => Err(format!("cannot make the Raft group: {e}")),
        }
    }

    /// Counts the terms this member saw begin, and logs each change of
    /// leader.
    /// Also sets the Raft metrics: `weir_raft_term`, `weir_raft_leader`
    /// (1 on the member that leads), `weir_raft_elections_total`,
    /// `weir_raft_applied_index` and, on the leader,
    /// `weir_raft_lag_entries{member}` (commit latency is the store pipeline's
    /// `weir_raft_commit_seconds`).
    fn watch_elections(&self) {
        let mut rx = self.raft.metrics();
        let elections = self.elections.clone();
        let id = self.settings.id;
        let term = self.net.term.clone();
        let quorum_acked = self.quorum_acked.clone();
        tokio::spawn(async move {
            let mut last = (0u64, None::<u64>);
            while rx.changed().await.is_ok() {
                let m = rx.borrow_and_update().clone();
                // The metric is an age when the core last flushed its
                // metrics (on each event, at least every tick): kept as
                // an instant, so the fence counts the time since.
                let acked = m
                    .millis_since_quorum_ack
                    .filter(|_| m.state == ServerState::Leader)
                    .and_then(|ms| Instant::now().checked_sub(Duration::from_millis(ms)));
                *quorum_acked.lock().unwrap_or_else(|p| p.into_inner()) = acked;
                term.store(m.current_term, std::sync::atomic::Ordering::Relaxed);
                metrics::gauge!("weir_raft_applied_index")
                    .set(m.last_applied.map_or(0, |l| l.index) as f64);
                if let Some(replication) = &m.replication {
                    let last_index = m.last_log_index.unwrap_or(0);
                    for (member, matched) in replication {
                        let lag = last_index.saturating_sub(matched.map_or(0, |l| l.index));
                        metrics::gauge!("weir_raft_lag_entries", "member" => member.to_string())
                            .set(lag as f64);
                    }
                }
                if m.current_term != last.0 || m.current_leader != last.1 {
                    if m.current_term > last.0 && last.0 != 0 {
                        elections.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        metrics::counter!("weir_raft_elections_total").increment(1);
                    }
                    let leads = m.current_leader == Some(id);
                    metrics::gauge!("weir_raft_leader").set(if leads { 1.0 } else { 0.0 });
                    tracing::info!(member = id, term = m.current_term, leader = ?m.current_leader, state = ?m.state, "replica: leadership");
                    metrics::gauge!("weir_raft_term").set(m.current_term as f64);
                    last = (m.current_term, m.current_leader);
                }
            }
        });
    }

    /// Watches the data directory's free space against the store's
    /// reserve, every [`DISK_CHECK_MS`]. Under it, the member neither
    /// stands for election nor sends heartbeats: if it leads, the others
    /// stop hearing it and elect one of themselves after the leader's
    /// lease (its engine stops at once: see `cli::replicated`); it takes
    /// no entries (its Raft listener answers 507). When there is room
    /// again it may stand and catches up.
    fn watch_disk(&self) {
        let replica = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(DISK_CHECK_MS));
            loop {
                tick.tick().await;
                let room = replica.store.disk_room();
                let low = room.is_some_and(|r| r.under_reserve());
                let was = replica
                    .disk_low
                    .swap(low, std::sync::atomic::Ordering::Relaxed);
                if low == was {
                    continue;
                }
                let config = replica.raft.runtime_config();
                config.elect(!low);
                config.heartbeat(!low);
                let (free, reserve) = room.map_or((0, 0), |r| (r.free_bytes, r.reserve_bytes));
                if low {
                    tracing::error!(member = replica.settings.id, free_bytes = free, reserve_bytes = reserve, dir = %replica.store.dir().display(), "replica: the disk is under the reserve: this member does not stand for election, steps down if it leads, and takes no entries");
                } else {
                    tracing::info!(
                        member = replica.settings.id,
                        free_bytes = free,
                        reserve_bytes = reserve,
                        "replica: room on the disk again: this member may stand and catches up"
                    );
                }
            }
        });
    }

    /// Whether the data directory is under the store's disk reserve.
    pub fn disk_low(&self) -> bool {
        self.disk_low.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether this member leads and has heard a majority within its
    /// fence (see [`super::RaftTimers`]): only then may its engine run.
    pub fn leads(&self) -> bool {
        let m = self.raft.metrics().borrow().clone();
        m.state == ServerState::Leader
            && m.current_leader == Some(self.settings.id)
            && self.heard_majority(&m)
    }

    /// Waits until this member leads with every entry of its term applied:
    /// its store is then the group's, and the engine may open on it.
    pub async fn until_leading(&self) {
        let mut rx = self.raft.metrics();
        loop {
            {
                let m = rx.borrow_and_update();
                let applied = m.last_applied.map(|l| l.index);
                // A majority heard in this term: a member restarted with
                // its own vote (openraft resumes leading then) waits until
                // the others confirm it, not on its word alone.
                if m.state == ServerState::Leader
                    && m.current_leader == Some(self.settings.id)
                    && applied.is_some()
                    && applied == m.last_log_index
                    && self.heard_majority(&m)
                {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    pub(super) fn heard_majority(&self, m: &openraft::RaftMetrics<u64, Member>) -> bool {
        self.quorum_ack_ms_ago(m)
            .is_some_and(|ms| ms < self.settings.timers().fence_ms)
    }

    /// How long ago a majority acknowledged this member as leader, at the
    /// least: `m`'s own figure, or the watcher's instant aged since — the
    /// metrics are flushed only on the core's events and ticks, so a
    /// leader cut off would otherwise read an age up to a tick old.
    pub(super) fn quorum_ack_ms_ago(&self, m: &openraft::RaftMetrics<u64, Member>) -> Option<u64> {
        let seen = m.millis_since_quorum_ack?;
        let watched = self
            .quorum_acked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .map(|at| at.elapsed().as_millis() as u64);
        Some(watched.map_or(seen, |w| w.max(seen)))
    }

    /// Whether a follower took an append from its leader `contact_ms_ago`
    /// within the top of the election timeout.
    pub(super) fn heard_leader(&self, contact_ms_ago: Option<u64>) -> bool {
        contact_ms_ago.is_some_and(|ms| ms < self.settings.election_max_ms)
    }

    /// Resolves when this member's Raft core stops of itself — a storage
    /// error (a full disk, a failed fsync), a panic — with why. The member
    /// can then neither vote nor apply: it must stop (exit 3), not go on
    /// answering healthy with no Raft. Not to be awaited across a clean
    /// [`Replica::shutdown`], which stops the core too.
    pub async fn core_stopped(&self) -> String {
        let mut rx = self.raft.metrics();
        loop {
            if let Err(e) = &rx.borrow_and_update().running_state {
                return e.to_string();
            }
            // The sender goes with the core's task, a panic included.
            if rx.changed().await.is_err() {
                return "the Raft core's task ended (a panic)".into();
            }
        }
    }

    /// Milliseconds since this member last took an append from a leader.
    pub fn leader_contact_ms_ago(&self) -> Option<u64> {
        match self
            .net
            .leader_heard_ms
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            0 => None,
            at => Some(super::types::wall_ms().saturating_sub(at)),
        }
    }

    /// What `/healthz` and `/readyz` say, from this member's own state
    /// alone (no peer is asked: an answer in microseconds, whatever the
    /// peers do). Ready: it leads and hears a majority, or it follows a
    /// leader it heard within the election timeout's top and has applied
    /// its log to within [`READY_LAG_ENTRIES`].
    pub fn health(&self) -> Health {
        let m = self.raft.metrics().borrow().clone();
        let leads = m.state == ServerState::Leader && m.current_leader == Some(self.settings.id);
        let applied = m.last_applied.map_or(0, |l| l.index);
        let lag = m.last_log_index.unwrap_or(0).saturating_sub(applied);
        let contact = self.leader_contact_ms_ago();
        let why_not = if self.disk_low() {
            Some(format!(
                "the disk of {} is under the store's reserve",
                self.store.dir().display()
            ))
        } else if leads {
            (!self.heard_majority(&m)).then(|| {
                format!(
                    "it leads but no majority acknowledged it within {} ms",
                    self.settings.timers().fence_ms
                )
            })
        } else if m.current_leader.is_none() {
            Some("no leader known (an election, or this member is cut off)".into())
        } else if !self.heard_leader(contact) {
            Some(format!(
                "no append from the leader (member {}) within {} ms",
                m.current_leader.unwrap_or_default(),
                self.settings.election_max_ms
            ))
        } else if lag > READY_LAG_ENTRIES {
            Some(format!(
                "{lag} entries of its log not applied yet (ready within {READY_LAG_ENTRIES})"
            ))
        } else {
            None
        };
        Health {
            member: self.settings.id,
            state: m.state.name(),
            leader: m.current_leader,
            term: m.current_term,
            applied_index: m.last_applied.map(|l| l.index),
            ready: why_not.is_none(),
            why_not,
        }
    }

    /// The leader's id, as this member knows it.
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// What `/raft/info` of member `id` says.
    pub async fn info_of(&self, id: u64) -> Result<MemberInfo, String> {
        let addr = self
            .address_of(id)
            .ok_or_else(|| format!("no member {id}"))?;
        let resp = self
            .net
            .http
            .get(format!("{}://{addr}/raft/info", self.net.scheme))
            .header(COOKIE_HEADER, &*self.net.cookie)
            .timeout(Duration::from_millis(1_000))
            .send()
            .await
            .map_err(|e| format!("member {id} at {addr}: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("member {id} at {addr} answered {}", resp.status()));
        }
        resp.json()
            .await
            .map_err(|e| format!("member {id} at {addr}: {e}"))
    }

    /// How this member reaches member `id`: the flags' address, else the
    /// membership's.
    pub fn address_of(&self, id: u64) -> Option<String> {
        if let Some(a) = self.net.routes.get(&id) {
            return Some(a.clone());
        }
        let m = self.raft.metrics().borrow().clone();
        m.membership_config
            .membership()
            .get_node(&id)
            .map(|n| n.raft.clone())
            .or_else(|| self.settings.peers.get(&id).cloned())
    }

    /// Adds member `id` at Raft address `raft`: a learner first, which
    /// catches up (from a snapshot when the log behind was purged), then a
    /// voter.
    pub async fn add_member(&self, id: u64, raft: String) -> Result<(), String> {
        self.raft
            .add_learner(id, Member { raft }, true)
            .await
            .map_err(|e| format!("member {id} not added: {e}"))?;
        let mut voters: BTreeSet<u64> = self.voters();
        voters.insert(id);
        self.raft
            .change_membership(voters, false)
            .await
            .map_err(|e| format!("member {id} not made a voter: {e}"))?;
        Ok(())
    }

    /// Removes member `id` from the group.
    pub async fn remove_member(&self, id: u64) -> Result<(), String> {
        let mut voters = self.voters();
        if !voters.remove(&id) {
            return Err(format!("no member {id} in the group"));
        }
        if voters.is_empty() {
            return Err("the last member cannot be removed".into());
        }
        self.raft
            .change_membership(voters, false)
            .await
            .map_err(|e| format!("member {id} not removed: {e}"))?;
        Ok(())
    }

    fn voters(&self) -> BTreeSet<u64> {
        let m = self.raft.metrics().borrow().clone();
        m.membership_config.membership().voter_ids().collect()
    }

    /// Elections this member saw since it started.
    pub fn elections(&self) -> u64 {
        self.elections.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stops the Raft node.
    pub async fn shutdown(&self) {
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "replica: Raft shutdown");
        }
    }
}
