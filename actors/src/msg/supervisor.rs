//! The supervisor's interface: what other actors ask of it (a breaker or a
//! scheduler spawned on demand, the store's fail-stop) and the roles it
//! supervises.

use std::sync::Arc;

use ractor::{ActorCell, ActorRef, RpcReplyPort};
use weir_core::names::Name;

use crate::msg::breaker::BreakerMsg;
use crate::msg::scheduler::SchedulerMsg;
use crate::msg::trigger::TriggerMsg;

/// What a supervised actor does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// The queue.
    Queue,
    /// Worker `index` of a pool.
    Pool(Arc<str>, u32),
    /// The breaker of a target.
    Breaker(Arc<str>),
    /// The scheduler of a graph.
    Scheduler(Name),
    /// The trigger of a graph (cron, backfills, key schedules).
    Trigger(Name),
    /// The cluster gateway (worker processes).
    Gateway,
    /// The assets actor (materializations to the graphs that start on
    /// them).
    Assets,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Role::Queue => write!(f, "queue"),
            Role::Pool(p, i) => write!(f, "pool {p} worker {i}"),
            Role::Breaker(t) => write!(f, "breaker {t}"),
            Role::Scheduler(g) => write!(f, "scheduler {g}"),
            Role::Trigger(g) => write!(f, "trigger {g}"),
            Role::Gateway => write!(f, "cluster gateway"),
            Role::Assets => write!(f, "assets"),
        }
    }
}

/// Messages of the supervisor.
pub enum SupervisorMsg {
    /// The breaker of a target, spawned if it is not running.
    EnsureBreaker(Arc<str>, RpcReplyPort<Option<ActorRef<BreakerMsg>>>),
    /// The scheduler of a graph, spawned if it is not running.
    EnsureScheduler(Name, RpcReplyPort<Result<ActorRef<SchedulerMsg>, String>>),
    /// The trigger of a graph, spawned if it is not running; a running one
    /// is told that a definition was adopted.
    EnsureTrigger(Name, RpcReplyPort<Result<ActorRef<TriggerMsg>, String>>),
    /// Starts the triggers held at open (`SupervisorArgs::triggers_held`):
    /// of every stored graph with cron, keys or a backfill whose trigger
    /// is not running yet. Answers how many it started.
    StartTriggers(RpcReplyPort<Result<usize, String>>),
    /// Delete expired records (timer).
    Expire,
    /// Respawn a role (after its backoff).
    Respawn(Role),
    /// Resize a pool's workers.
    ResizePool(Arc<str>, u32),
    /// The refs of every running child, for tests and tools.
    Children(RpcReplyPort<Vec<(Role, ActorCell)>>),
    /// The store fail-stopped (a write, flush or fsync failed, or the disk
    /// is full), with its failure: the engine stops.
    StoreFailed(String),
}

impl ractor::Message for SupervisorMsg {}
