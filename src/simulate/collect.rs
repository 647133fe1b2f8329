//! What the simulator watches while the engine runs: the engine's events
//! (attempts, retries, deferrals, dead letters, SLA misses, breaker
//! transitions, settled runs), tallied per graph with their virtual
//! instants, and the queue's depth. Everything is kept as running
//! aggregates ([`Tally`]): counts, a bounded lateness histogram and Gantt
//! per graph ([`RunTally`]), and series of a fixed number of buckets (the
//! queue's depth, each pool's busy slots), so memory does not grow with the
//! span. A settled run's timings are read from its record in the store when
//! its `RunSettled` arrives; runs still active at the span's end are
//! counted by the driver then.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use weir_actors::clock::Clock;
use weir_actors::event_channel::EventReceiver;
use weir_actors::events::EngineEvent;
use weir_actors::msg::work::DeferCause;
use weir_actors::records::done::DoneStatus;
use weir_actors::records::graph::{GraphRunRecord, RunState};
use weir_actors::records::keys::runs_prefix;
use weir_actors::store::Store;
use weir_core::simulate::stats::{Buckets, StepMax};
use weir_core::zone::Zone;

use super::runs::RunTally;

/// Counts of one graph.
#[derive(Debug, Clone, Default)]
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
    /// Its runs.
    pub runs: RunTally,
}

/// A pool's busy slots over the span.
#[derive(Debug, Clone, Default)]
pub struct PoolBusy {
    /// Per bucket, slots busy × ms.
    pub area: Vec<u128>,
    /// Slot-ms busy over the span.
    pub busy_ms: u64,
}

/// What the watchers know of the span and the definitions.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The series' buckets.
    pub buckets: Buckets,
    /// The span's end, ms.
    pub until_ms: u64,
    /// Each graph's time zone (for its windows).
    pub zones: BTreeMap<String, Zone>,
    /// Each node's pool, by (graph, node).
    pub pools: BTreeMap<(String, String), String>,
}

/// Everything tallied.
#[derive(Debug, Clone)]
pub struct Tally {
    /// The span and the definitions.
    pub setup: Arc<Setup>,
    /// Per graph.
    pub graphs: BTreeMap<String, GraphTally>,
    /// Breaker transitions: (at, target, state).
    pub breakers: Vec<(u64, String, String)>,
    /// Queue depth (tickets live and not running), highest per bucket.
    pub depth: StepMax,
    /// Events seen.
    pub events: u64,
    /// Events missed because the watcher fell behind (0 in a sound run).
    pub lagged: u64,
    /// Actor restarts seen (the supervisor's).
    pub restarts: u64,
    /// Engine restarts (the scenario's).
    pub engine_restarts: u64,
    /// Leaders lost (the scenario's), each followed by a failover.
    pub leader_losses: u64,
    /// The failovers' time in all (no leader, no engine), ms.
    pub failover_ms: u64,
    /// Every ticket key enqueued and how often each completed, when
    /// audited (the invariant mode; it grows with the span).
    pub audit: Option<Audit>,
    /// Attempts under way: ticket key → when it started.
    pub running: BTreeMap<String, u64>,
    /// Busy slots per pool.
    pub pools: BTreeMap<String, PoolBusy>,
}

impl Tally {
    /// An empty tally.
    pub fn new(setup: Setup, audit: bool) -> Tally {
        Tally {
            depth: StepMax::new(setup.buckets),
            setup: Arc::new(setup),
            graphs: BTreeMap::new(),
            breakers: Vec::new(),
            events: 0,
            lagged: 0,
            restarts: 0,
            engine_restarts: 0,
            leader_losses: 0,
            failover_ms: 0,
            audit: audit.then(Audit::default),
            running: BTreeMap::new(),
            pools: BTreeMap::new(),
        }
    }

    fn started(&mut self, key: &str, now: u64) {
        if let Some(from) = self.running.insert(key.to_string(), now) {
            self.held(key, from, now);
        }
    }

    fn ended(&mut self, key: &str, now: u64) {
        if let Some(from) = self.running.remove(key) {
            self.held(key, from, now);
        }
    }

    /// An attempt held a slot of its node's pool over `[from, to)` (cut at
    /// the span's end).
    fn held(&mut self, key: &str, from: u64, to: u64) {
        let setup = self.setup.clone();
        let pool = node_of(key)
            .and_then(|(g, n)| setup.pools.get(&(g.to_string(), n.to_string())))
            .map_or("default", String::as_str);
        let busy = self
            .pools
            .entry(pool.to_string())
            .or_insert_with(|| PoolBusy {
                area: vec![0; setup.buckets.count],
                busy_ms: 0,
            });
        let to = to.min(setup.until_ms);
        setup.buckets.add_interval(&mut busy.area, from, to, 1);
        busy.busy_ms += to.saturating_sub(from);
    }

    /// Closes the attempts still under way at `now` (the span's end).
    pub fn close(&mut self, now: u64) {
        for (key, from) in std::mem::take(&mut self.running) {
            self.held(&key, from, now);
        }
    }

    /// Counts the run of `graph` and `partition` as `record` has it at
    /// `now`.
    pub fn run(&mut self, graph: &str, partition: &str, record: &GraphRunRecord, now: u64) {
        let zone = self.setup.zones.get(graph).copied().unwrap_or(Zone::UTC);
        let until = self.setup.until_ms;
        self.graphs
            .entry(graph.to_string())
            .or_default()
            .runs
            .count(partition, record, zone, until, now);
    }

    /// A run settled at `now`: counted now, from its record, unless it
    /// settled at the span's end or after (the driver counts what the
    /// store holds then).
    fn settled(&mut self, store: &Store, graph: &str, partition: &str, state: &str, now: u64) {
        let key = format!("{}{partition}", runs_prefix(graph));
        let record = match store.get::<GraphRunRecord>(&key) {
            Ok(Some(r)) if r.settled_at_ms.is_some() => r,
            // Gone or active again already (a rerun): counted as the event
            // says, settled now.
            other => {
                tracing::warn!(graph, partition, found = ?other.as_ref().map(|r| r.as_ref().map(|r| r.state)), "a settled run's record is not settled");
                GraphRunRecord {
                    state: state.parse().unwrap_or(RunState::Complete),
                    requested_at_ms: now,
                    settled_at_ms: Some(now),
                    ..other.ok().flatten().unwrap_or_else(|| empty_record(now))
                }
            }
        };
        if record
            .settled_at_ms
            .is_some_and(|s| s < self.setup.until_ms)
        {
            self.run(graph, partition, &record, now);
        }
    }
}

fn empty_record(now: u64) -> GraphRunRecord {
    GraphRunRecord {
        definition: String::new(),
        state: RunState::Active,
        requested_at_ms: now,
        settled_at_ms: None,
        expected_reruns: BTreeMap::new(),
        retention_ms: 0,
        params: BTreeMap::new(),
        not_before_ms: None,
        failure: None,
    }
}

/// The graph and node of a ticket key (`graph/partition/node/…`).
pub fn node_of(key: &str) -> Option<(&str, &str)> {
    let mut parts = key.split('/');
    let graph = parts.next()?;
    let _partition = parts.next()?;
    Some((graph, parts.next()?))
}

/// The most violations an audit keeps (the first).
pub const VIOLATIONS_MAX: usize = 100;

/// What the invariant mode checks: every key enqueued completes, once, and
/// is never lost in between. Checked as the span runs: a second completion
/// when its event arrives, a lost ticket whenever the driver asks
/// ([`Audit::check_present`]); each violation keeps the virtual instant it
/// was found at.
#[derive(Debug, Clone, Default)]
pub struct Audit {
    /// Keys enqueued (acknowledged).
    pub enqueued: std::collections::BTreeSet<String>,
    /// Completions per key.
    pub completed: BTreeMap<String, u32>,
    /// Invariants found broken, in order (the first [`VIOLATIONS_MAX`]).
    pub violations: Vec<Violation>,
    /// Tickets found where they should be, over every check: a check that
    /// asked nothing proves nothing.
    pub present_checked: u64,
}

/// An invariant found broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The virtual instant, ms since the epoch.
    pub at_ms: u64,
    /// What broke, naming the ticket.
    pub what: String,
}

impl Audit {
    fn violated(&mut self, at_ms: u64, what: String) {
        if self.violations.len() < VIOLATIONS_MAX {
            self.violations.push(Violation { at_ms, what });
        }
    }

    /// `key` was enqueued (acknowledged).
    pub fn enqueue(&mut self, key: &str) {
        self.enqueued.insert(key.to_string());
    }

    /// `key` completed at `now`: a second completion is a violation.
    pub fn complete(&mut self, key: &str, now: u64) {
        let n = self.completed.entry(key.to_string()).or_default();
        *n += 1;
        if *n == 2 {
            self.violated(now, format!("ticket {key} completed a second time"));
        }
    }

    /// Checks at `now` that every acknowledged ticket not completed yet is
    /// somewhere: `present` says whether the store (or the queue state
    /// rebuilt from it) holds it, pending, leased or done. Returns how many
    /// it checked.
    pub fn check_present(&mut self, now: u64, mut present: impl FnMut(&str) -> bool) -> usize {
        let open: Vec<String> = self
            .enqueued
            .iter()
            .filter(|k| !self.completed.contains_key(*k))
            .cloned()
            .collect();
        for key in &open {
            if present(key) {
                self.present_checked += 1;
            } else {
                self.violated(
                    now,
                    format!("acknowledged ticket {key} is nowhere: not pending, leased or done"),
                );
            }
        }
        open.len()
    }
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
/// `mute` is set, ignoring them); a settled run's record is read from
/// `store`.
pub fn watch_events(
    mut events: EventReceiver,
    store: Store,
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
                    EngineEvent::Enqueued { key, .. } => a.enqueue(key),
                    EngineEvent::Completed { key, .. } => a.complete(key, now),
                    _ => {}
                }
            }
            // The span is half-open: an attempt that starts at its end
            // (a grant handed out ahead of that instant) is not in it.
            if matches!(e, EngineEvent::Started { .. }) && now >= t.setup.until_ms {
                continue;
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
                EngineEvent::RunSettled {
                    graph,
                    partition,
                    state,
                } => t.settled(&store, &graph, &partition, &state, now),
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
            tally
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .depth
                .set(now, depth);
            if counts.changed().await.is_err() {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checker is not vacuous: a duplicate completion is caught at the
    /// second one, with its instant; a ticket absent from the store is
    /// caught, one completed is not asked about.
    #[test]
    fn audit_catches_duplicates_and_lost_tickets() {
        let mut a = Audit::default();
        a.enqueue("g/p/a/0");
        a.enqueue("g/p/b/0");
        a.enqueue("g/p/c/0");
        a.complete("g/p/a/0", 10);
        assert!(a.violations.is_empty());
        a.complete("g/p/a/0", 25);
        assert_eq!(
            a.violations,
            vec![Violation {
                at_ms: 25,
                what: "ticket g/p/a/0 completed a second time".into()
            }]
        );
        // A third completion is the same broken fact: not counted again.
        a.complete("g/p/a/0", 30);
        assert_eq!(a.violations.len(), 1);

        let mut asked = Vec::new();
        let checked = a.check_present(40, |k| {
            asked.push(k.to_string());
            k != "g/p/c/0"
        });
        assert_eq!(checked, 2);
        assert_eq!(asked, ["g/p/b/0", "g/p/c/0"]);
        assert_eq!(a.present_checked, 1);
        assert_eq!(a.violations.len(), 2);
        assert_eq!(a.violations[1].at_ms, 40);
        assert!(
            a.violations[1].what.contains("g/p/c/0"),
            "{:?}",
            a.violations
        );

        // Everything present: nothing new.
        a.check_present(50, |_| true);
        assert_eq!(a.violations.len(), 2);
    }

    #[test]
    fn violations_are_bounded() {
        let mut a = Audit::default();
        for i in 0..(VIOLATIONS_MAX + 10) {
            a.enqueue(&format!("k{i}"));
        }
        a.check_present(1, |_| false);
        assert_eq!(a.violations.len(), VIOLATIONS_MAX);
    }
}
