//! `weir bench keys`: keyed schedules at scale.
//!
//! 1. Load and schedule: a keyed graph over an inventory file of 100,000
//!    keys (10,000 with `--quick`), 1-hour interval with 1 hour of jitter:
//!    the time from `adopt` (which reads the inventory) to every key's
//!    schedule being durable, and the RSS growth it costs.
//! 2. Lateness: a second keyed graph of 10,000 keys with no jitter, so all
//!    fall due at the instant the inventory is applied, with pools that
//!    have room for all of them: for each key, the start of its first
//!    task minus its due instant (the `@` instant of its partition), by the
//!    engine's clock. Default durability (fsync).
//!
//! Goals printed beside: load and schedule <= 2 s, <= 200 MiB, p99
//! lateness <= 10 ms.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::keyed::{InventorySource, KeyedSpec};
use weir_core::names::Name;
use weir_core::partition::{Partition, Partitioning};
use weir_core::schedule::ScheduleSettings;

use super::drain::{rss_bytes, tempfile_dir};
use super::{result_line, BenchError};
use crate::Engine;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

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

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
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
        // Lateness of each "burst" key's first task, by the engine clock.
        let late: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::with_capacity(burst)));
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
                        l.lock().unwrap_or_else(|p| p.into_inner()).push(now.saturating_sub(due));
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
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let n = late.lock().unwrap_or_else(|p| p.into_inner()).len();
            if n >= burst {
                break;
            }
            if Instant::now() > deadline {
                return Err(BenchError::Failed(format!(
                    "only {n} of {burst} burst keys started within 600 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let all_started_ms = started.elapsed().as_secs_f64() * 1e3;
        let mut l = late.lock().unwrap_or_else(|p| p.into_inner()).clone();
        l.sort_unstable();
        let (p50, p99, max) = (percentile(&l, 0.5), percentile(&l, 0.99), *l.last().unwrap_or(&0));
        println!(
            "lateness: {burst} keys due at once, pools with room for all, fsync: first task start - due: p50 {p50} ms, p99 {p99} ms (goal <= 10 ms), max {max} ms; all started {all_started_ms:.0} ms after the adopt began"
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
                    ("lateness_p50_ms", p50.to_string()),
                    ("lateness_p99_ms", p99.to_string()),
                    ("lateness_max_ms", max.to_string()),
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
