//! `weir bench growth`: does the cost of a unit of work stay flat as the
//! work grows? The same work at three sizes, each through the whole engine
//! in fsync mode, and the per-unit cost of the largest size over the
//! smallest (1.0 is flat; the goal is at most 1.5 for every family):
//!
//! - `chain`: a chain of 100 / 1,000 / 10,000 no-op nodes, start request
//!   to settle, per node;
//! - `fanout`: 1 → 100 / 1,000 / 10,000 → 1, pool of 64, per node;
//! - `drain`: 10k / 100k / 1M no-op jobs enqueued with dispatch paused,
//!   then drained by a pool of 64: resume to idle, per job.
//!
//! `--quick` runs a tenth of each size (chains of 10 / 100 / 1,000 and so
//! on; drains of 1k / 10k / 100k).

use std::time::{Duration, Instant};

use weir_actors::store::Durability;

use super::drain::tempfile_dir;
use super::graphs::{chain, fanout};
use super::report::{result_line, BenchError};
use crate::Engine;
use weir_core::queue::Job;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// The pool every family runs with where it has one.
const POOL_SLOTS: u32 = 64;

/// Jobs per enqueue call while filling the backlog.
const ENQUEUE_CHUNK: usize = 10_000;

/// Resume-to-idle time of `jobs` no-op jobs enqueued with dispatch paused.
async fn paused_drain(dir: &std::path::Path, jobs: usize) -> Result<Duration, BenchError> {
    let engine = Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", POOL_SLOTS)
        .task_fn("noop", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .map_err(failed)?;
    engine.pause(true).map_err(failed)?;
    let mut i = 0;
    while i < jobs {
        let n = ENQUEUE_CHUNK.min(jobs - i);
        let batch: Vec<Job> = (i..i + n)
            .map(|k| Job::new(format!("job-{k:08}"), "noop", "default"))
            .collect();
        engine.enqueue_many(batch).await.map_err(failed)?;
        i += n;
    }
    let started = Instant::now();
    engine.pause(false).map_err(failed)?;
    engine
        .drain_until_idle(Duration::from_secs(1_800))
        .await
        .map_err(failed)?;
    let elapsed = started.elapsed();
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    Ok(elapsed)
}

/// Per-unit cost in microseconds of `elapsed` over `units`.
fn per_unit_us(elapsed: Duration, units: usize) -> f64 {
    elapsed.as_secs_f64() * 1e6 / units.max(1) as f64
}

/// One family's three per-unit costs, printed, and its growth ratio.
fn report(family: &str, unit: &str, sizes: &[usize], costs_us: &[f64]) -> f64 {
    for (size, cost) in sizes.iter().zip(costs_us) {
        println!("{family}: {size} {unit}s: {cost:.1} us per {unit}");
    }
    let growth = costs_us.last().copied().unwrap_or(0.0) / costs_us[0].max(f64::MIN_POSITIVE);
    println!(
        "{family}: per-{unit} cost at {} over {}: {growth:.2} (goal <= 1.50)",
        sizes.last().copied().unwrap_or(0),
        sizes[0]
    );
    growth
}

/// Runs `weir bench growth`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let scale = if quick { 10 } else { 1 };
    let chain_sizes = [100 / scale, 1_000 / scale, 10_000 / scale];
    let fanout_sizes = [100 / scale, 1_000 / scale, 10_000 / scale];
    let drain_sizes = [10_000 / scale, 100_000 / scale, 1_000_000 / scale];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let mut chain_us = Vec::new();
        for &nodes in &chain_sizes {
            let c = chain(&dir.join(format!("chain-{nodes}")), nodes).await?;
            chain_us.push(per_unit_us(c.total, nodes));
        }
        let mut fanout_us = Vec::new();
        for &width in &fanout_sizes {
            let settle = fanout(&dir.join(format!("fanout-{width}")), width, POOL_SLOTS).await?;
            fanout_us.push(per_unit_us(settle, width + 2));
        }
        let mut drain_us = Vec::new();
        for &jobs in &drain_sizes {
            let elapsed = paused_drain(&dir.join(format!("drain-{jobs}")), jobs).await?;
            drain_us.push(per_unit_us(elapsed, jobs));
        }
        let growth_chain = report("chain", "node", &chain_sizes, &chain_us);
        let growth_fanout = report("fanout", "node", &fanout_sizes, &fanout_us);
        let growth_drain = report("drain", "job", &drain_sizes, &drain_us);
        let us = |v: &[f64], i: usize| format!("{:.1}", v[i]);
        println!(
            "{}",
            result_line(
                "growth",
                &[
                    ("chain_small_us", us(&chain_us, 0)),
                    ("chain_large_us", us(&chain_us, 2)),
                    ("growth_chain", format!("{growth_chain:.2}")),
                    ("fanout_small_us", us(&fanout_us, 0)),
                    ("fanout_large_us", us(&fanout_us, 2)),
                    ("growth_fanout", format!("{growth_fanout:.2}")),
                    ("drain_small_us", us(&drain_us, 0)),
                    ("drain_large_us", us(&drain_us, 2)),
                    ("growth_drain", format!("{growth_drain:.2}")),
                    ("growth_goal", "1.50".to_string()),
                ]
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}
