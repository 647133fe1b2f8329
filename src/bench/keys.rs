//! `weir bench keys`: keyed schedules at scale.
//!
//! 1. Load and schedule: a keyed graph over an inventory file of 100,000
//!    keys (10,000 with `--quick`), 1-hour interval with 1 hour of jitter:
//!    the time from `adopt` (which reads the inventory) to every key's
//!    schedule being durable, and the RSS growth it costs.
//! 2. Lateness of a burst nothing could prepare: a second keyed graph of
//!    10,000 keys with no jitter, so all fall due at the instant the
//!    inventory is applied, with pools that have room for all of them: for
//!    each key, the start of its first task minus its due instant (the `@`
//!    instant of its partition), by the engine's clock. Default durability
//!    (fsync).
//! 3. Lateness of a burst due at a known instant: once every key of the
//!    second graph has run, one signal for all of them makes each due at
//!    the same instant, the graph's debounce delay (8 s) later. The
//!    trigger prepares their runs within its horizon (`prepare_ahead_ms`,
//!    5 s by default), so at the instant only the hand-out remains; the
//!    same lateness, measured for the second run of each key.
//!
//! 4. The raw floor of step 3, in the same run: 10,000 bare tokio tasks
//!    sleeping until one instant on the same runtime ([`super::wake_floor`]).
//!
//! Goals printed beside: load and schedule <= 2 s, <= 200 MiB, p99
//! lateness of the burst due at one instant <= 10 ms (the prepared one:
//! the unprepared burst is printed beside it as the cost without
//! preparation), and the floor's p99 beside that.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::keyed::{InventorySource, KeyedSpec};
use weir_core::names::Name;
use weir_core::partition::{Partition, Partitioning};
use weir_core::schedule::ScheduleSettings;

use super::drain::{rss_bytes, tempfile_dir};
use super::report::{percentile, result_line, BenchError};
use crate::Engine;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// The debounce delay of the burst graph: the signal of step 3 makes every
/// key due this long after it.
const BURST_DELAY_MS: u64 = 8_000;

fn keyed_graph(name: &str, inventory: &std::path::Path, jitter_ms: u64, runs_max: u32) -> GraphDef {
    let node = NodeDef::new(
        Name::new("work").expect("a valid name"),
        vec![],
        TaskSpec {
            task: Name::new("mark").expect("a valid name"),
            config: serde_json::Value::Null,
        },
    );
    let mut g = GraphDef::new(Name::new(name).expect("a valid name"), vec![node]);
    g.partitioning = Partitioning::Keyed;
    g.max_active_runs = runs_max;
    let mut spec = KeyedSpec::new(InventorySource::File(
        inventory.to_string_lossy().into_owned(),
    ));
    spec.schedule = ScheduleSettings {
        interval_ms: 3_600_000,
        retry_interval_ms: 0,
        jitter_ms,
    };
    spec.debounce.delay_ms = BURST_DELAY_MS;
    g.keyed = Some(spec);
    g
}

fn write_inventory(path: &std::path::Path, prefix: &str, n: usize) -> Result<(), BenchError> {
    let mut text = String::with_capacity(n * 16);
    for i in 0..n {
        text.push_str(&format!("{prefix}-{i:07}\n"));
    }
    std::fs::write(path, text).map_err(failed)
}

/// (p50, p99, max) of `ms`.
fn percentiles(mut ms: Vec<u64>) -> (u64, u64, u64) {
    ms.sort_unstable();
    (
        percentile(&ms, 0.5),
        percentile(&ms, 0.99),
        ms.last().copied().unwrap_or(0),
    )
}

/// Waits until `n` first attempts are recorded (600 s at most).
async fn wait_for(late: &Mutex<Vec<(u64, u64)>>, n: usize, what: &str) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let got = late.lock().unwrap_or_else(|p| p.into_inner()).len();
        if got >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Failed(format!(
                "{what}: only {got} of {n} within 600 s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let keys = if quick { 10_000 } else { 100_000 };
    let burst = 10_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        // (due instant, lateness) of each "burst" key's first attempt of
        // each run, by the engine clock.
        let late: Arc<Mutex<Vec<(u64, u64)>>> =
            Arc::new(Mutex::new(Vec::with_capacity(2 * burst)));
        let clock = weir_actors::clock::Clock::system();
        let (l, c) = (late.clone(), clock.clone());
        // WEIR_BENCH_DURABILITY=flush|none to compare; fsync by default.
        let durability = std::env::var("WEIR_BENCH_DURABILITY")
            .ok()
            .and_then(|d| d.parse().ok())
            .unwrap_or_default();
        let engine = Engine::builder(dir.join("db"))
            .durability(durability)
            .clock(clock)
            .pool("default", burst as u32 + 1_000)
            .task_fn("mark", move |ctx| {
                let now = c.now_ms();
                let l = l.clone();
                async move {
                    let mut parts = ctx.key.split('/');
                    let graph = parts.next().unwrap_or_default();
                    let due = parts
                        .next()
                        .and_then(|p| p.parse::<Partition>().ok())
                        .and_then(|p| p.at_ms());
                    if let (true, Some(due), 1) = (graph == "burst", due, ctx.attempt) {
                        l.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((due, now.saturating_sub(due)));
                    }
                    Ok(Vec::new())
                }
            })
            .open()
            .await
            .map_err(failed)?;

        // 1. Load and schedule.
        let inv = dir.join("keys.txt");
        write_inventory(&inv, "key", keys)?;
        let before = rss_bytes();
        let started = Instant::now();
        engine
            .adopt(keyed_graph("keys", &inv, 3_600_000, 1_000))
            .await
            .map_err(failed)?;
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        let rss = rss_bytes().saturating_sub(before);
        let scheduled = engine.schedules("keys").await.map_err(failed)?.len();
        if scheduled != keys {
            return Err(BenchError::Failed(format!(
                "{scheduled} of {keys} keys have a schedule"
            )));
        }
        println!(
            "load and schedule: {keys} keys (1 h interval, 1 h jitter): {load_ms:.0} ms (goal <= 2000 ms); RSS growth {:.1} MiB (goal <= 200 MiB)",
            rss as f64 / (1 << 20) as f64
        );

        // 2. Lateness of 10,000 keys due at once.
        let inv2 = dir.join("burst.txt");
        write_inventory(&inv2, "b", burst)?;
        let started = Instant::now();
        engine
            .adopt(keyed_graph("burst", &inv2, 0, burst as u32 + 1_000))
            .await
            .map_err(failed)?;
        wait_for(&late, burst, "burst keys started").await?;
        let all_started_ms = started.elapsed().as_secs_f64() * 1e3;
        let first: Vec<u64> = late
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(_, l)| *l)
            .collect();
        let (u50, u99, umax) = percentiles(first);
        println!(
            "lateness, not prepared: {burst} keys due at the instant their inventory is applied, pools with room for all, fsync: first task start - due: p50 {u50} ms, p99 {u99} ms, max {umax} ms; all started {all_started_ms:.0} ms after the adopt began"
        );

        // 3. The same keys due at one known instant: prepared ahead.
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let leased = engine
                .schedules("burst")
                .await
                .map_err(failed)?
                .iter()
                .filter(|s| s.lease_owner.is_some())
                .count();
            if leased == 0 {
                break;
            }
            if Instant::now() > deadline {
                return Err(BenchError::Failed(format!(
                    "{leased} burst keys still leased after 600 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        engine
            .signal_all("burst", "bench", false)
            .await
            .map_err(failed)?;
        let due = engine
            .schedules("burst")
            .await
            .map_err(failed)?
            .iter()
            .map(|s| s.due_at_ms)
            .min()
            .unwrap_or_default();
        wait_for(&late, 2 * burst, "burst keys started twice").await?;
        let second: Vec<u64> = late
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(d, _)| *d >= due)
            .map(|(_, l)| *l)
            .collect();
        if second.len() != burst {
            return Err(BenchError::Failed(format!(
                "{} second runs are due at or after the signalled instant, not {burst}",
                second.len()
            )));
        }
        let min = second.iter().copied().min().unwrap_or(0);
        let (p50, p99, max) = percentiles(second);
        println!(
            "lateness, prepared: {burst} keys due at one instant {BURST_DELAY_MS} ms after a signal, prepared up to {} ms ahead: first task start - due: min {min} ms, p50 {p50} ms, p99 {p99} ms (goal <= 10 ms; not prepared: {u99} ms), max {max} ms",
            crate::TriggerSettings::default().prepare_ahead_ms
        );
        // 4. The same burst with nothing but tokio: the engine is idle.
        let floor = super::wake_floor::measure(burst).await;
        let over_floor = p99 as f64 / floor.p99_ms.max(0.001);
        println!(
            "floor: {} bare tokio tasks sleeping until one instant {} ms ahead, same runtime: start - instant: min {:.1} ms, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; the prepared burst's p99 is {:.2}x it",
            floor.tasks,
            super::wake_floor::AHEAD_MS,
            floor.min_ms,
            floor.p50_ms,
            floor.p99_ms,
            floor.max_ms,
            over_floor
        );
        println!(
            "{}",
            result_line(
                "keys",
                &[
                    ("keys", keys.to_string()),
                    ("load_ms", format!("{load_ms:.0}")),
                    ("rss_bytes", rss.to_string()),
                    ("burst", burst.to_string()),
                    ("lateness_min_ms", min.to_string()),
                    ("lateness_p50_ms", p50.to_string()),
                    ("lateness_p99_ms", p99.to_string()),
                    ("lateness_max_ms", max.to_string()),
                    ("lateness_goal_ms", "10".to_string()),
                    ("floor_p50_ms", format!("{:.1}", floor.p50_ms)),
                    ("floor_p99_ms", format!("{:.1}", floor.p99_ms)),
                    ("lateness_over_floor", format!("{over_floor:.2}")),
                    ("unprepared_p50_ms", u50.to_string()),
                    ("unprepared_p99_ms", u99.to_string()),
                    ("unprepared_max_ms", umax.to_string()),
                ]
            )
        );
        engine
            .shutdown(Duration::from_secs(30))
            .await
            .map_err(failed)?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}
