//! The driver: opens the real engine (supervisor, queue, schedulers,
//! triggers, pools, breakers) on a throw-away store under a temporary
//! folder, with the simulated task in place of every command, HTTP call
//! and sensor and a clock anchored at the span's start (seeded, so jitter
//! repeats), then plays the scenario's inputs at their instants and lets
//! virtual time run to the span's end. Must run on a current-thread
//! runtime whose clock is paused: time then jumps from one timer to the
//! next whenever every actor is idle.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_actors::clock::Clock;
use weir_core::graph::GraphDef;
use weir_core::keyed::InventorySource;
use weir_core::partition::{Partition, PartitionRange};
use weir_core::simulate::stats::Buckets;
use weir_core::zone::Zone;

use super::collect::{self, Setup, Tally};
use super::scenario::{Fault, Input, Scenario};
use super::task::{NodeFacts, SimNotify, SimTask};

use crate::definition::Definitions;
use crate::{Engine, EngineBuilder, RunSummary};

/// How long the engine gets to stop at the span's end (virtual time).
const SHUTDOWN_MS: u64 = 5_000;
/// In the invariant mode (`audit`), how often (virtual time) the store is
/// checked to hold every acknowledged ticket; it is after every fault too.
pub const AUDIT_EVERY_MS: u64 = 10 * 60_000;

/// A simulation that could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario or the definitions do not fit together.
    #[error("{0}")]
    Input(String),
    /// The engine failed.
    #[error("engine: {0}")]
    Engine(String),
    /// An invariant broke (the invariant mode): where in virtual time, and
    /// what.
    #[error("{0}")]
    Invariant(String),
}

/// What a simulation observed.
#[derive(Debug, Clone)]
pub struct Observed {
    /// The graphs' definitions (as simulated).
    pub graphs: BTreeMap<String, GraphDef>,
    /// Each graph's runs in the store at the span's end, by partition:
    /// those still active, and those settled and not yet expired.
    pub runs: BTreeMap<String, Vec<RunSummary>>,
    /// What the events said, with the runs counted.
    pub tally: Tally,
    /// Each pool's slots.
    pub pools: BTreeMap<String, u32>,
    /// Inputs that the engine refused, with why.
    pub refused: Vec<String>,
    /// Each target's breaker cooldown, ms (how long an opening denies).
    pub cooldowns: BTreeMap<String, u64>,
}

/// The definitions as simulated: each keyed graph's inventory replaced by
/// a file under `dir` (the scenario's keys, or a copy of its file), so
/// inventory inputs can change it and no inventory command runs.
fn prepared(
    defs: &Definitions,
    scenario: &Scenario,
    dir: &Path,
) -> Result<BTreeMap<String, GraphDef>, SimError> {
    let mut out = BTreeMap::new();
    for loaded in &defs.graphs {
        let mut def = loaded.graph.def().clone();
        let name = def.name.to_string();
        if let Some(spec) = def.keyed.as_mut() {
            let text = match (scenario.keys.get(&name), &spec.inventory) {
                (Some(keys), _) => keys.join("\n") + "\n",
                (None, InventorySource::File(f)) => std::fs::read_to_string(f)
                    .map_err(|e| SimError::Input(format!("graph {name:?}: inventory {f}: {e}")))?,
                (None, InventorySource::Command(_)) => {
                    return Err(SimError::Input(format!(
                        "graph {name:?}: its inventory is a command, which a simulation does not run: give its keys in the scenario ([keys] {name} = [\"…\"] or a count)"
                    )))
                }
            };
            let file = inventory_file(dir, &name);
            std::fs::write(&file, text)
                .map_err(|e| SimError::Engine(format!("{}: {e}", file.display())))?;
            spec.inventory = InventorySource::File(file.to_string_lossy().into_owned());
        }
        out.insert(name, def);
    }
    Ok(out)
}

fn inventory_file(dir: &Path, graph: &str) -> std::path::PathBuf {
    dir.join(format!("inventory-{graph}.txt"))
}

/// Runs `scenario` over `defs` with `seed`, keeping the store under `dir`.
pub async fn simulate(
    defs: &Definitions,
    scenario: Arc<Scenario>,
    seed: u64,
    dir: &Path,
) -> Result<Observed, SimError> {
    simulate_with(defs, scenario, seed, dir, false).await
}

/// [`simulate`], with every ticket's enqueue and completions kept when
/// `audit` (the invariant mode's checks).
pub async fn simulate_with(
    defs: &Definitions,
    scenario: Arc<Scenario>,
    seed: u64,
    dir: &Path,
    audit: bool,
) -> Result<Observed, SimError> {
    simulate_probed(defs, scenario, seed, dir, audit, None).await
}

/// Something called at instants of the span while it runs (how `weir bench
/// simulate` samples its memory): every `every_ms` of the span after its
/// start, with the time since the start and the engine. It only looks: the
/// engine does the same with or without it.
pub struct Probe<'a> {
    /// Time between calls, ms (at least 1).
    pub every_ms: u64,
    /// The call.
    pub call: &'a mut dyn FnMut(u64, &Engine),
}

/// [`simulate_with`], calling `probe` as it says.
pub async fn simulate_probed(
    defs: &Definitions,
    scenario: Arc<Scenario>,
    seed: u64,
    dir: &Path,
    audit: bool,
    mut probe: Option<Probe<'_>>,
) -> Result<Observed, SimError> {
    let graphs = prepared(defs, &scenario, dir)?;
    let mut nodes = BTreeMap::new();
    for (g, def) in &graphs {
        for n in &def.nodes {
            nodes.insert(
                (g.clone(), n.name.to_string()),
                NodeFacts {
                    pool: n.pool.to_string(),
                    target: n.target.as_ref().map(|t| t.to_string()),
                    sensor: n.sensor.is_some(),
                },
            );
        }
    }
    let clock = Clock::anchored(scenario.from_ms).seeded(seed);
    let sim: Arc<dyn weir_actors::task::Task> = Arc::new(SimTask {
        scenario: scenario.clone(),
        nodes: Arc::new(nodes),
        seed,
        clock: clock.clone(),
        sensors: Arc::default(),
    });
    let mut pools = defs.pools.clone();
    pools.entry("default".into()).or_insert(4);
    let trees = super::scratch::ScratchTrees::from_env().map_err(SimError::Input)?;
    let make = Make {
        dir: dir.to_path_buf(),
        trees,
        clock: clock.clone(),
        pools,
        targets: defs.targets.clone(),
        sim,
    };
    let mut engine = make
        .builder()
        .open()
        .await
        .map_err(|e| SimError::Engine(e.to_string()))?;
    let setup = Setup {
        buckets: Buckets::for_span(scenario.from_ms, scenario.until_ms),
        until_ms: scenario.until_ms,
        zones: graphs
            .iter()
            .map(|(g, def)| (g.clone(), def.timezone.unwrap_or(Zone::UTC)))
            .collect(),
        pools: graphs
            .iter()
            .flat_map(|(g, def)| {
                def.nodes
                    .iter()
                    .map(move |n| ((g.clone(), n.name.to_string()), n.pool.to_string()))
            })
            .collect(),
    };
    let tally = Arc::new(Mutex::new(Tally::new(setup, audit)));
    let mut mute = collect::Muted::default();
    let mut events = vec![collect::watch_events(
        engine.subscribe(),
        engine.store().clone(),
        clock.clone(),
        tally.clone(),
        mute.clone(),
    )];
    let mut depths = vec![collect::watch_depth(
        engine.counts(),
        clock.clone(),
        tally.clone(),
        mute.clone(),
    )];
    adopt(&engine, &graphs).await?;
    // Inputs, faults and probes in one timeline; at one instant, inputs
    // first, then faults, then probes.
    let every_ms = probe.as_ref().map_or(u64::MAX, |p| p.every_ms.max(1));
    let probes = (1..)
        .map_while(|k: u64| k.checked_mul(every_ms))
        .map_while(|off| scenario.from_ms.checked_add(off))
        .take_while(|at| *at < scenario.until_ms)
        .map(|at| (at, Step::Probe));
    let mut timeline: Vec<(u64, Step)> = scenario
        .inputs
        .iter()
        .map(|(at, g, i)| (*at, Step::Input(g.clone(), i.clone())))
        .chain(
            scenario
                .faults
                .iter()
                .map(|(at, f)| (*at, Step::Fault(f.clone()))),
        )
        .chain(probes)
        .chain(audits(&scenario, audit))
        .collect();
    timeline.sort_by_key(|(at, s)| (*at, s.order()));
    let mut refused = Vec::new();
    let mut leader_losses = 0u32;
    for (at, step) in timeline {
        if at >= scenario.until_ms {
            break;
        }
        sleep_until(&clock, at).await;
        if matches!(step, Step::Fault(_)) {
            // A fault acts at a quiet instant: one more millisecond passes
            // only once every actor is idle and every store write under way
            // has landed, so what the fault interrupts does not depend on
            // how fast a blocking thread ran.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let when = weir_core::duration::human_ms(at - scenario.from_ms);
        let step_order = step.order();
        match step {
            Step::Probe => {
                if let Some(p) = probe.as_mut() {
                    (p.call)(at - scenario.from_ms, &engine);
                }
            }
            Step::Input(graph, input) => {
                if let Err(e) = apply(&engine, dir, &graph, &input).await {
                    tracing::warn!(graph = %graph, at, error = %e, "a simulated input was refused");
                    refused.push(format!("+{when} {graph}: {e}"));
                }
            }
            Step::Fault(fault @ (Fault::EngineRestart { .. } | Fault::LeaderLost { .. })) => {
                let down_ms = match fault {
                    Fault::LeaderLost {
                        election_min_ms,
                        election_max_ms,
                    } => {
                        leader_losses += 1;
                        failover_ms(seed, leader_losses, election_min_ms, election_max_ms)
                    }
                    Fault::EngineRestart { down_ms } => down_ms,
                    _ => unreachable!("matched above"),
                };
                // At a quiet instant the watchers have read every event
                // so far; the dying engine's are not counted.
                mute.store(true, std::sync::atomic::Ordering::SeqCst);
                engine = restart(engine, &make, &graphs, down_ms).await?;
                mute = collect::Muted::default();
                {
                    let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
                    if matches!(fault, Fault::LeaderLost { .. }) {
                        t.leader_losses += 1;
                        t.failover_ms += down_ms;
                    } else {
                        t.engine_restarts += 1;
                    }
                }
                events.push(collect::watch_events(
                    engine.subscribe(),
                    engine.store().clone(),
                    clock.clone(),
                    tally.clone(),
                    mute.clone(),
                ));
                depths.push(collect::watch_depth(
                    engine.counts(),
                    clock.clone(),
                    tally.clone(),
                    mute.clone(),
                ));
            }
            Step::Fault(fault) => {
                if let Err(e) = crash(&engine, &fault).await {
                    refused.push(format!("+{when} {fault:?}: {e}"));
                }
            }
            Step::Audit => {}
        }
        if audit && matches!(step_order, ORDER_FAULT | ORDER_AUDIT) {
            if step_order == ORDER_FAULT {
                // The next quiet instant: the fault's effects have landed.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            audit_store(&engine, &tally, &clock).await;
            broken(&tally, scenario.from_ms)?;
        }
    }
    sleep_until(&clock, scenario.until_ms).await;
    // The runs the watcher has not counted: those still active, and those
    // that settled at this very instant (it leaves them to this pass).
    let mut runs = BTreeMap::new();
    for g in graphs.keys() {
        let r = engine
            .list_runs(g, None)
            .map_err(|e| SimError::Engine(e.to_string()))?;
        let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
        for run in &r {
            if run
                .record
                .settled_at_ms
                .is_none_or(|s| s >= scenario.until_ms)
            {
                t.run(g, &run.partition, &run.record, scenario.until_ms);
            }
        }
        drop(t);
        runs.insert(g.clone(), r);
    }
    let capacities = engine.pool_capacities();
    engine
        .shutdown(Duration::from_millis(SHUTDOWN_MS))
        .await
        .map_err(|e| SimError::Engine(e.to_string()))?;
    // The event watchers end with their channels, having read every
    // event; the depth watchers wait for changes that will not come.
    for w in events {
        let _ = w.await;
    }
    for w in depths {
        w.abort();
    }
    broken(&tally, scenario.from_ms)?;
    let mut tally = tally.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Attempts under way at the span's end hold their slots to its end.
    tally.close(scenario.until_ms);
    Ok(Observed {
        graphs,
        runs,
        tally,
        pools: capacities,
        refused,
        cooldowns: defs
            .targets
            .iter()
            .map(|(t, s)| (t.clone(), s.cooldown_ms))
            .collect(),
    })
}

/// One step of the timeline.
enum Step {
    Input(String, Input),
    Fault(Fault),
    Probe,
    /// The invariant mode's check of the store.
    Audit,
}

const ORDER_INPUT: u8 = 0;
const ORDER_FAULT: u8 = 1;
const ORDER_PROBE: u8 = 2;
const ORDER_AUDIT: u8 = 3;

impl Step {
    /// Its place among the steps of one instant.
    fn order(&self) -> u8 {
        match self {
            Step::Input(..) => ORDER_INPUT,
            Step::Fault(_) => ORDER_FAULT,
            Step::Probe => ORDER_PROBE,
            Step::Audit => ORDER_AUDIT,
        }
    }
}

/// The invariant mode's checks, every [`AUDIT_EVERY_MS`] of the span (none
/// when not `audit`).
fn audits(scenario: &Scenario, audit: bool) -> impl Iterator<Item = (u64, Step)> {
    let (from, until) = (scenario.from_ms, scenario.until_ms);
    (1..)
        .map_while(move |k: u64| k.checked_mul(AUDIT_EVERY_MS)?.checked_add(from))
        .take_while(move |at| audit && *at < until)
        .map(|at| (at, Step::Audit))
}

/// Checks at this (quiet) instant that every acknowledged ticket not yet
/// seen completing is live in the queue — whose state, after a fault, is
/// what it rebuilt from the store — or has its done record in the store.
/// A queue that cannot answer now (restarting after a crash) is asked at
/// the next check.
async fn audit_store(engine: &Engine, tally: &Arc<Mutex<Tally>>, clock: &Clock) {
    let open: Vec<String> = {
        let t = tally.lock().unwrap_or_else(|p| p.into_inner());
        let Some(a) = t.audit.as_ref() else { return };
        a.enqueued
            .iter()
            .filter(|k| !a.completed.contains_key(*k))
            .cloned()
            .collect()
    };
    let mut present = std::collections::BTreeSet::new();
    for key in &open {
        match engine.ticket(key).await {
            Ok(Some(_)) => {
                present.insert(key.clone());
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(error = %e, "the queue cannot answer now; checked later");
                return;
            }
        }
    }
    let now = clock.now_ms();
    let mut t = tally.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(a) = t.audit.as_mut() {
        // A ticket enqueued while the queue was asked is asked next time.
        let asked: std::collections::BTreeSet<&str> = open.iter().map(String::as_str).collect();
        a.check_present(now, |k| present.contains(k) || !asked.contains(k));
    }
}

/// The first invariant broken so far, as the error naming its instant.
fn broken(tally: &Arc<Mutex<Tally>>, from_ms: u64) -> Result<(), SimError> {
    let t = tally.lock().unwrap_or_else(|p| p.into_inner());
    let Some(v) = t.audit.as_ref().and_then(|a| a.violations.first()) else {
        return Ok(());
    };
    let rfc = chrono::DateTime::from_timestamp_millis(v.at_ms as i64)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default();
    let after_ms = v.at_ms.saturating_sub(from_ms);
    Err(SimError::Invariant(format!(
        "invariant broken at +{}h{:02}m{:02}.{:03}s ({rfc}): {}{}",
        after_ms / 3_600_000,
        after_ms / 60_000 % 60,
        after_ms / 1_000 % 60,
        after_ms % 1_000,
        v.what,
        match t.audit.as_ref().map_or(0, |a| a.violations.len()) {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        }
    )))
}

/// What every incarnation of the engine is built from.
struct Make {
    dir: std::path::PathBuf,
    /// The store's trees: every incarnation of the engine reopens them.
    trees: super::scratch::ScratchTrees,
    clock: Clock,
    pools: BTreeMap<String, u32>,
    targets: BTreeMap<String, weir_core::breaker::BreakerSettings>,
    sim: Arc<dyn weir_actors::task::Task>,
}

impl Make {
    fn builder(&self) -> EngineBuilder {
        let mut builder = Engine::builder(self.dir.join("data"))
            .store_settings(super::scratch::store_settings(&self.dir, &self.trees))
            .clock(self.clock.clone())
            .hold_triggers()
            .logs_dir(self.dir.join("logs"));
        for (p, c) in &self.pools {
            builder = builder.pool(p, *c);
        }
        for (t, s) in &self.targets {
            builder = builder.target(t, s.clone());
        }
        for name in [
            crate::task::command::COMMAND_TASK,
            crate::task::http::HTTP_TASK,
            crate::task::sensor::SENSOR_TASK,
        ] {
            builder = builder.task(name, self.sim.clone());
        }
        builder = builder.task(crate::task::notify::NOTIFY_TASK, Arc::new(SimNotify));
        let resolver_task = self.sim.clone();
        builder.resolver(Arc::new(move |_| Some(resolver_task.clone())))
    }
}

/// Adopts the graphs and starts their triggers (as `weir serve` does).
async fn adopt(engine: &Engine, graphs: &BTreeMap<String, GraphDef>) -> Result<(), SimError> {
    for def in graphs.values() {
        engine
            .adopt(def.clone())
            .await
            .map_err(|e| SimError::Input(format!("graph {:?}: {e}", def.name.as_str())))?;
    }
    engine
        .start_triggers()
        .await
        .map_err(|e| SimError::Engine(e.to_string()))?;
    Ok(())
}

/// Kills every actor of `engine` at once (a crash: nothing graceful, no
/// flush), waits `down_ms`, and opens a new engine on the same store,
/// which recovers from it as after a crash (orphaned attempts requeued).
async fn restart(
    engine: Engine,
    make: &Make,
    graphs: &BTreeMap<String, GraphDef>,
    down_ms: u64,
) -> Result<Engine, SimError> {
    let store = engine.store().clone();
    for cell in engine.supervisor().get_cell().get_children() {
        cell.kill();
    }
    engine.supervisor().kill();
    let _ = engine.stopped().await;
    drop(engine);
    // Store work runs inline on this thread (and virtual time would not
    // pass while any ran on a blocking thread), so after this sleep every
    // write of the killed actors has landed.
    tokio::time::sleep(Duration::from_millis(down_ms.max(1))).await;
    let engine = make
        .builder()
        .opened_store(store)
        .open()
        .await
        .map_err(|e| SimError::Engine(format!("restart: {e}")))?;
    adopt(&engine, graphs).await?;
    Ok(engine)
}

/// How long the `nth` leader loss of a span leaves the engine without a
/// leader: a draw in `[min_ms, max_ms)` (`min_ms` when they are equal),
/// from the seed and `nth` only, so a replay draws the same.
fn failover_ms(seed: u64, nth: u32, min_ms: u64, max_ms: u64) -> u64 {
    let u = super::draw::unit(seed, "leader_lost", nth, 0);
    min_ms + ((max_ms - min_ms) as f64 * u) as u64
}

/// Kills the actor a fault names; its supervisor restarts it.
async fn crash(engine: &Engine, fault: &Fault) -> Result<(), String> {
    use weir_actors::supervisor::Role;
    let children = engine.children().await.map_err(|e| e.to_string())?;
    let hit = children.iter().find(|(role, _)| match (fault, role) {
        (Fault::WorkerLost { pool }, Role::Pool(p, _)) => p.as_ref() == pool,
        (Fault::ActorCrash { actor }, role) => matches!(
            (actor.as_str(), role),
            ("queue", Role::Queue)
                | ("pool", Role::Pool(..))
                | ("breaker", Role::Breaker(..))
                | ("scheduler", Role::Scheduler(..))
                | ("trigger", Role::Trigger(..))
        ),
        _ => false,
    });
    match hit {
        Some((_, cell)) => {
            cell.kill();
            Ok(())
        }
        None => Err("no such actor is running".into()),
    }
}

async fn sleep_until(clock: &Clock, at_ms: u64) {
    let now = clock.now_ms();
    if at_ms > now {
        tokio::time::sleep(Duration::from_millis(at_ms - now)).await;
    }
}

async fn apply(engine: &Engine, dir: &Path, graph: &str, input: &Input) -> Result<(), String> {
    match input {
        Input::Backfill { from, to } => {
            let range: PartitionRange = format!("{from}..{to}")
                .parse()
                .map_err(|e| format!("backfill {from}..{to}: {e}"))?;
            engine
                .backfill(graph, range, crate::BackfillOrder::Oldest)
                .await
                .map_err(|e| e.to_string())?;
        }
        Input::Start { partition } => {
            let p: Partition = partition
                .parse()
                .map_err(|e| format!("partition {partition:?}: {e}"))?;
            engine
                .start_run(graph, p)
                .await
                .map_err(|e| e.to_string())?;
        }
        Input::Signal { key, immediate } => {
            engine
                .signal(graph, key, "simulate", *immediate)
                .await
                .map_err(|e| e.to_string())?;
        }
        Input::Inventory { keys } => {
            let file = inventory_file(dir, graph);
            std::fs::write(&file, keys.join("\n") + "\n").map_err(|e| e.to_string())?;
            engine
                .reload_inventory(graph)
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A violation the audit recorded stops the span with an error naming
    /// its virtual instant (after the span's start, and in UTC) and what
    /// broke; none, no error.
    #[test]
    fn a_violation_is_named_with_its_instant() {
        let from_ms = 1_793_577_600_000; // 2026-11-02T00:00:00Z
        let setup = Setup {
            buckets: Buckets::for_span(from_ms, from_ms + 86_400_000),
            until_ms: from_ms + 86_400_000,
            zones: BTreeMap::new(),
            pools: BTreeMap::new(),
        };
        let tally = Arc::new(Mutex::new(Tally::new(setup, true)));
        assert!(broken(&tally, from_ms).is_ok());
        {
            let mut t = tally.lock().unwrap();
            let a = t.audit.as_mut().unwrap();
            a.enqueue("g/p/n/0");
            a.complete("g/p/n/0", from_ms + 3_600_000);
            a.complete("g/p/n/0", from_ms + 3_600_000 + 250);
        }
        let e = broken(&tally, from_ms).unwrap_err().to_string();
        assert_eq!(
            e,
            "invariant broken at +1h00m00.250s (2026-11-02T01:00:00.250Z): ticket g/p/n/0 completed a second time"
        );
    }
}
