//! The cluster's actor interfaces: the engine's gateway ([`GatewayMsg`]),
//! a worker process's link ([`LinkMsg`]), the engine's proxy of a remote
//! pool ([`FromWorker`]), the node server's session news, and the views of
//! workers the API answers with. The `Wire` variants carry the wire types
//! of [`crate::protocol`] across processes; the rest stay in one process.

use std::sync::Arc;
use std::time::Duration;

use ractor::{ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use weir_core::queue::TicketId;

use crate::msg::work::{PoolUp, PoolView, Report};
use crate::protocol::{wire_message, LogFrame, ToEngine, ToWorker};

/// A session's news, as the link or the gateway gets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionEvent {
    /// A session opened (not authenticated yet).
    Opened,
    /// The session authenticated (the cookie matched).
    Authenticated,
    /// The session exchanged its actors and process groups.
    Ready,
    /// The session closed.
    Closed,
}

/// A worker's state as the engine sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Joined; its pools take tickets.
    Joined,
    /// Silent past its lease (or its proxy failed): its attempts were
    /// requeued.
    Lost,
    /// It left (a graceful stop).
    Left,
}

impl std::fmt::Display for WorkerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WorkerState::Joined => "joined",
            WorkerState::Lost => "lost",
            WorkerState::Left => "left",
        })
    }
}

/// One pool of a worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkerPoolView {
    /// The pool.
    pub pool: String,
    /// Its slots in the worker.
    pub slots: u32,
    /// Attempts of it running in the worker.
    pub running: usize,
}

/// A worker as `weir workers` and `/api/v1/workers` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkerView {
    /// Its id (name and process token).
    pub worker_id: String,
    /// Its name.
    pub name: String,
    /// Where it connects from.
    pub address: String,
    /// Its host and process id.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its weir version.
    pub version: String,
    /// Joined, lost or left.
    pub state: WorkerState,
    /// Since when it is in that state (ms since the epoch).
    pub since_ms: u64,
    /// When it joined.
    pub joined_ms: u64,
    /// When the engine last heard from it.
    pub last_heartbeat_ms: u64,
    /// Its pools.
    pub pools: Vec<WorkerPoolView>,
    /// Attempts running in it.
    pub running: usize,
    /// Reports of superseded attempts refused since it first joined.
    pub reports_refused: u64,
    /// Times it was declared lost since it first joined.
    pub times_lost: u32,
    /// Why it was lost, when it was.
    pub lost_reason: Option<String>,
}

/// Messages of the gateway.
pub enum GatewayMsg {
    /// From a worker.
    Wire(ToEngine),
    /// The node server's news of a session.
    Session {
        /// The peer's address.
        peer: String,
        /// What happened.
        event: SessionEvent,
    },
    /// Timer: declare silent workers lost.
    CheckLeases,
    /// The queue restarted: every proxy registers again.
    QueueRestarted,
    /// The queue refused a report of this (queue) worker id.
    Refused(String),
    /// The workers, joined first, then lost and left, newest first.
    Workers(RpcReplyPort<Vec<WorkerView>>),
}

wire_message!(GatewayMsg, ToEngine, "to the engine");

/// Messages of the link.
pub enum LinkMsg {
    /// From the engine.
    Wire(ToWorker),
    /// A pool's message for the engine.
    FromPool {
        /// The pool.
        pool: Arc<str>,
        /// What it says.
        up: PoolUp,
    },
    /// Log output of attempts, for the engine.
    Log(Vec<LogFrame>),
    /// The node server's news of a session: its node id (one per session,
    /// so the news of an old session is told from the current one's) and
    /// what happened.
    Session(u64, SessionEvent),
    /// Timer.
    Tick,
    /// Send what the outbox holds (cast by the link to itself when the
    /// outbox gets its first message, so what arrives meanwhile goes along).
    Flush,
    /// Stop taking tickets, let running attempts end and their reports be
    /// acknowledged (at most `timeout`), then leave; answered when done.
    Drain(Duration, RpcReplyPort<DrainReport>),
    /// The link's state.
    Status(RpcReplyPort<LinkView>),
}

wire_message!(LinkMsg, ToWorker, "to a worker");

/// How a drain ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainReport {
    /// Attempts still running when the drain timed out (they were
    /// cancelled; the engine requeues them).
    pub cancelled: u32,
    /// Reports not acknowledged when the drain ended.
    pub unacked: usize,
}

/// Why a worker ended on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkEnd {
    /// Still running.
    Running,
    /// The engine refused it, or it could not authenticate: the reason.
    Refused(String),
    /// It drained and left.
    Left,
}

/// The link's state, for tests and `weir worker`'s own log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    /// Its worker id.
    pub worker_id: String,
    /// Joined now.
    pub joined: bool,
    /// Joins welcomed since start.
    pub joins: u32,
    /// Of which resumed.
    pub resumes: u32,
    /// Times the engine said this worker was lost.
    pub lost: u32,
    /// Grants refused as stale: they came on a session that had ended, or
    /// after the engine was silent past the lease.
    pub stale_grants: u32,
    /// Its pools.
    pub pools: Vec<PoolView>,
}

/// What reaches a proxy besides the queue's messages.
#[derive(Debug)]
pub enum FromWorker {
    /// What the worker's pool said.
    Up(PoolUp),
    /// A report whose output the proxy kept in a blob (from its own task).
    Kept(Report),
    /// A grant's upstream outputs could not be read: its attempt fails.
    Unresolved {
        /// The ticket.
        id: TicketId,
        /// The attempt.
        attempt: u32,
        /// Why.
        error: String,
    },
    /// The worker reconnected: where its link is now.
    Relink(ActorRef<LinkMsg>),
    /// Send the outbox (cast by the proxy to itself when the outbox gets
    /// its first message, so the grants of one queue batch go as one).
    Flush,
}
