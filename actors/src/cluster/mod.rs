//! Pools in other processes: worker processes join the engine's cluster
//! (ractor_cluster) and add their slots to the engine's pools.
//!
//! ```text
//! engine process                                  worker process
//! Queue ⇄ Proxy(worker, pool) ⇄ Gateway  ══TCP══  Link ⇄ Pool(pool) → task
//!               └ breakers, blobs                  └ heartbeats, reconnects
//! ```
//!
//! The queue knows no network: each pool of a worker is, in the engine, a
//! [`proxy`] actor that takes the queue's messages as a local pool actor
//! would. The proxy asks the target's breaker before it hands a ticket on,
//! reads the upstreams' outputs from the engine's blobs into the grant, and
//! keeps a large output in a blob before it hands the report to the queue:
//! breakers, blobs and logs stay where the store is. The [`gateway`] (one
//! per engine) admits workers — cookie by ractor_cluster, then the protocol
//! version and the pools — spawns their proxies, routes what workers send to
//! them, and watches the workers' leases. In the worker, the [`link`] (one
//! per process) connects, joins, heartbeats and reconnects, and hosts the
//! worker's pool actors ([`crate::pool`] with a remote uplink), which run the
//! attempts. What crosses is in [`crate::protocol`].
//!
//! Leases. A worker heartbeats every `heartbeat_ms`; the gateway declares a
//! worker silent for `lease_ms` lost: its proxies stop and the queue requeues
//! their running attempts, each counted as an attempt (as after a crash).
//! A connection that drops is not yet a loss: a worker that reconnects within
//! its lease resumes (its attempts go on, its reports apply once). A lost
//! worker that comes back (after SIGSTOP, say) is told so; it cancels its
//! attempts, rejoins as new, and its late reports are refused as superseded.
//!
//! Restarts. A crashed gateway is respawned by the supervisor; the proxies of
//! its incarnation are stopped and their attempts requeued (the shared
//! registry [`gateway::GatewayShared`] survives the crash), and every worker,
//! unknown to the new gateway, is told it is lost and rejoins. An engine
//! restart requeues every running attempt at open; workers reconnect with
//! backoff and rejoin.

pub mod gateway;
pub mod link;
pub mod node;
pub mod proxy;

use serde::{Deserialize, Serialize};

// The workers' views live in `msg`; re-exported here for the crate's users.
pub use crate::msg::cluster::{WorkerPoolView, WorkerState, WorkerView};

/// Leases and heartbeats of workers. Every limit explicit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterSettings {
    /// A worker silent this long is lost.
    pub lease_ms: u64,
    /// How often workers say they are alive.
    pub heartbeat_ms: u64,
    /// Lost and departed workers kept in the list, at most (the oldest go).
    pub gone_workers_max: usize,
    /// A replicated engine's Raft term when its leader started this
    /// engine (0: not replicated). Welcomes carry it; a worker that joined
    /// a newer term refuses an older one — a deposed leader's.
    pub term: u64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings {
            lease_ms: 5_000,
            heartbeat_ms: 1_000,
            gone_workers_max: 100,
            term: 0,
        }
    }
}

impl ClusterSettings {
    /// Refuses settings that would declare every worker lost.
    pub fn validate(&self) -> Result<(), String> {
        if self.heartbeat_ms == 0 {
            return Err("heartbeat_ms must be at least 1".into());
        }
        if self.lease_ms < 2 * self.heartbeat_ms {
            return Err(format!(
                "lease_ms ({}) must be at least twice heartbeat_ms ({})",
                self.lease_ms, self.heartbeat_ms
            ));
        }
        Ok(())
    }
}
