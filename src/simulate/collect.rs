//! What the simulator watches while the engine runs: the engine's events
//! (retries, deferrals, dead letters, SLA misses, breaker transitions),
//! tallied per graph with their virtual instants, and the queue's depth as
//! a step series. Runs and their timings are read from the store at the
//! end; the slots held come from the simulated task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use weir_actors::clock::Clock;
use weir_actors::events::EngineEvent;
use weir_actors::msg::work::DeferCause;
use weir_actors::records::done::DoneStatus;

/// Counts of one graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphTally {
    /// Attempts started (sensor checks included).
    pub attempts: u64,
    /// Sensor checks that found their condition not met.
    pub pokes: u64,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Tickets the breaker held back.
    pub deferrals_breaker: u64,
    /// Tickets given back for want of a slot.
    pub deferrals_slot: u64,
    /// Tickets that ended failed (their dead letters).
    pub dead: u64,
    /// SLA misses (of runs and of nodes).
    pub sla_misses: u64,
}

/// Everything tallied.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Per graph.
    pub graphs: BTreeMap<String, GraphTally>,
    /// Breaker transitions: (at, target, state).
    pub breakers: Vec<(u64, String, String)>,
    /// Queue depth (tickets live and not running): (at, depth) at each change.
    pub depth: Vec<(u64, u64)>,
    /// Events seen.
    pub events: u64,
    /// Events missed because the watcher fell behind (0 in a sound run).
    pub lagged: u64,
    /// Actor restarts seen (the supervisor's).
    pub restarts: u64,
    /// Engine restarts (the scenario's).
    pub engine_restarts: u64,
    /// Every ticket key enqueued and how often each completed, when
    /// audited (the invariant mode).
    pub audit: Option<Audit>,
    /// Attempts under way: ticket key → when it started.
    pub running: BTreeMap<String, u64>,
    /// Attempts that held a slot: (ticket key, start, end).
    pub slots: Vec<(String, u64, u64)>,
}

impl Tally {
    fn started(&mut self, key: &str, now: u64) {
        if let Some(from) = self.running.insert(key.to_string(), now) {
            self.slots.push((key.to_string(), from, now));
        }
    }

    fn ended(&mut self, key: &str, now: u64) {
        if let Some(from) = self.running.remove(key) {
            self.slots.push((key.to_string(), from, now));
        }
    }

    /// Closes the attempts still under way at `now` (the span's end).
    pub fn close(&mut self, now: u64) {
        for (key, from) in std::mem::take(&mut self.running) {
            self.slots.push((key, from, now));
        }
    }
}

/// The graph and node of a ticket key (`graph/partition/node/…`).
pub fn node_of(key: &str) -> Option<(&str, &str)> {
    let mut parts = key.split('/');
    let graph = parts.next()?;
    let _partition = parts.next()?;
    Some((graph, parts.next()?))
}

/// What the invariant mode checks: every key enqueued completes, once.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    /// Keys enqueued (acknowledged).
    pub enqueued: std::collections::BTreeSet<String>,
    /// Completions per key.
    pub completed: BTreeMap<String, u32>,
}

/// The graph of a run id (`graph/partition/node/rerun`).
fn graph_of(key: &str) -> String {
    key.split('/').next().unwrap_or_default().to_string()
}

/// Set when an engine is killed: what it says while dying is not counted.
pub type Muted = Arc<std::sync::atomic::AtomicBool>;

fn muted(m: &Muted) -> bool {
    m.load(std::sync::atomic::Ordering::SeqCst)
}

/// Watches `events` into `tally` until the channel closes (or, once
/// `mute` is set, ignoring them).
pub fn watch_events(
    mut events: broadcast::Receiver<EngineEvent>,
    clock: Clock,
    tally: Arc<Mutex<Tally>>,
    mute: Muted,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let e = match events.recv().await {
                Ok(e) => e,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tally.lock().unwrap_or_else(|p| p.into_inner()).lagged += n;
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            if muted(&mute) {
                continue;
            }
            let now = clock.now_ms();
            let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
            t.events += 1;
            if let Some(a) = t.audit.as_mut() {
                match &e {
                    EngineEvent::Enqueued { key, .. } => {
                        a.enqueued.insert(key.to_string());
                    }
                    EngineEvent::Completed { key, .. } => {
                        *a.completed.entry(key.to_string()).or_default() += 1;
                    }
                    _ => {}
                }
            }
            match &e {
                EngineEvent::Started { key, .. } => t.started(key, now),
                EngineEvent::Poked { key, .. }
                | EngineEvent::Retrying { key, .. }
                | EngineEvent::Completed { key, .. } => t.ended(key, now),
                _ => {}
            }
            match e {
                EngineEvent::Started { key, .. } => {
                    t.graphs.entry(graph_of(&key)).or_default().attempts += 1
                }
                EngineEvent::Poked { key, .. } => {
                    t.graphs.entry(graph_of(&key)).or_default().pokes += 1
                }
                EngineEvent::Retrying { key, .. } => {
                    t.graphs.entry(graph_of(&key)).or_default().retries += 1
                }
                EngineEvent::Deferred { key, cause, .. } => {
                    let g = t.graphs.entry(graph_of(&key)).or_default();
                    match cause {
                        DeferCause::Breaker => g.deferrals_breaker += 1,
                        DeferCause::NoSlot => g.deferrals_slot += 1,
                    }
                }
                EngineEvent::Completed {
                    key,
                    status: DoneStatus::Failed,
                    ..
                } => t.graphs.entry(graph_of(&key)).or_default().dead += 1,
                EngineEvent::SlaMissed { graph, .. } => {
                    t.graphs.entry(graph).or_default().sla_misses += 1
                }
                EngineEvent::Breaker { target, state } => {
                    t.breakers.push((now, target.to_string(), state))
                }
                EngineEvent::Restarted { .. } => t.restarts += 1,
                _ => {}
            }
        }
    })
}

/// Watches the queue's counts into `tally`'s depth series until the
/// engine drops them.
pub fn watch_depth(
    mut counts: tokio::sync::watch::Receiver<weir_actors::queue::QueueCounts>,
    clock: Clock,
    tally: Arc<Mutex<Tally>>,
    mute: Muted,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            if muted(&mute) {
                return;
            }
            let depth = {
                let c = counts.borrow_and_update();
                c.live.saturating_sub(c.running) as u64
            };
            let now = clock.now_ms();
            {
                let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                match t.depth.last_mut() {
                    Some(last) if last.0 == now => last.1 = last.1.max(depth),
                    Some(last) if last.1 == depth => {}
                    _ => t.depth.push((now, depth)),
                }
            }
            if counts.changed().await.is_err() {
                return;
            }
        }
    })
}
