//! `weir bench latency` and `weir bench sweep`: the figures that
//! `benches/compare.sh` sets beside the peers.
//!
//! `latency`: jobs enqueued one by one at fixed rates (100, 1,000 and
//! 10,000 per second, 20 s each; 2 s with `--quick`), open loop: each
//! enqueue is a task spawned at its tick, so a slow acknowledgement does
//! not slow the producer. The figure is the time from the moment the
//! enqueue is acknowledged (durable, fsync mode) to the moment the task
//! body starts on a worker; a start that comes before the caller saw the
//! acknowledgement counts as zero.
//!
//! `sweep`: 100k durable no-op jobs (10k with `--quick`) enqueued in
//! batches of 1,000, then drained with pools of 1, 8 and 32 slots, each on
//! a fresh store, beside the raw sled limit at the batch size weir reached
//! and a non-durable tokio channel moving the same count of jobs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_actors::store::Durability;
use weir_core::queue::Job;

use super::drain::{drain, peak_rss_bytes, raw_commits_per_s, tempfile_dir};
use super::report::{result_line, BenchError};
use crate::Engine;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

fn percentile_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Acknowledged-to-start latencies at one rate.
struct Rate {
    latencies: Vec<Duration>,
    achieved_per_s: f64,
}

async fn at_rate(dir: &std::path::Path, per_s: u64, secs: u64) -> Result<Rate, BenchError> {
    let starts: Arc<Mutex<HashMap<Arc<str>, Instant>>> = Arc::default();
    let task_starts = starts.clone();
    let engine = Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", 64)
        .task_fn("noop", move |ctx| {
            let starts = task_starts.clone();
            async move {
                let now = Instant::now();
                starts.lock().expect("starts lock").insert(ctx.key, now);
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .map_err(failed)?;
    let engine = Arc::new(engine);
    let total = per_s * secs;
    let period = Duration::from_nanos(1_000_000_000 / per_s);
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let began = Instant::now();
    let mut acks = tokio::task::JoinSet::new();
    for k in 0..total {
        ticks.tick().await;
        let engine = engine.clone();
        acks.spawn(async move {
            let key = format!("lat-{k:08}");
            engine
                .enqueue(Job::new(key.clone(), "noop", "default"))
                .await
                .map(|_| (key, Instant::now()))
        });
    }
    let mut acked = Vec::with_capacity(total as usize);
    while let Some(r) = acks.join_next().await {
        acked.push(r.map_err(failed)?.map_err(failed)?);
    }
    let achieved_per_s = total as f64 / began.elapsed().as_secs_f64();
    engine
        .drain_until_idle(Duration::from_secs(120))
        .await
        .map_err(failed)?;
    let starts = std::mem::take(&mut *starts.lock().expect("starts lock"));
    let mut latencies = Vec::with_capacity(acked.len());
    for (key, ack) in acked {
        let start = starts
            .get(key.as_str())
            .ok_or_else(|| BenchError::Failed(format!("job {key} never started")))?;
        latencies.push(start.saturating_duration_since(ack));
    }
    latencies.sort_unstable();
    let engine =
        Arc::try_unwrap(engine).map_err(|_| BenchError::Failed("engine still shared".into()))?;
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    Ok(Rate {
        latencies,
        achieved_per_s,
    })
}

/// Runs `weir bench latency`.
pub fn run_latency(quick: bool) -> Result<(), BenchError> {
    let secs = if quick { 2 } else { 20 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let mut pairs = vec![("secs_per_rate", secs.to_string())];
        for per_s in [100u64, 1_000, 10_000] {
            let r = at_rate(&dir.join(format!("rate-{per_s}")), per_s, secs).await?;
            let p50 = percentile_us(&r.latencies, 0.50);
            let p99 = percentile_us(&r.latencies, 0.99);
            println!(
                "latency at {per_s} jobs/s for {secs} s (achieved {:.0}/s), fsync, pool 64: acknowledged -> task start p50 {p50:.0} us, p99 {p99:.0} us{}",
                r.achieved_per_s,
                if per_s == 1_000 { " (goal p99 <= 2,000 us)" } else { "" }
            );
            pairs.push((
                match per_s {
                    100 => "r100_p50_us",
                    1_000 => "r1000_p50_us",
                    _ => "r10000_p50_us",
                },
                format!("{p50:.0}"),
            ));
            pairs.push((
                match per_s {
                    100 => "r100_p99_us",
                    1_000 => "r1000_p99_us",
                    _ => "r10000_p99_us",
                },
                format!("{p99:.0}"),
            ));
        }
        println!("{}", result_line("latency", &pairs));
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}

/// Jobs per second through an unbounded tokio channel to `workers`
/// consumers: the non-durable limit.
pub async fn channel_jobs_per_s(jobs: usize, workers: usize) -> f64 {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let started = Instant::now();
    for k in 0..jobs as u64 {
        let _ = tx.send(k);
    }
    drop(tx);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let rx = rx.clone();
        set.spawn(async move {
            loop {
                let next = rx.lock().await.recv().await;
                match next {
                    Some(k) => {
                        std::hint::black_box(k);
                    }
                    None => return,
                }
            }
        });
    }
    while set.join_next().await.is_some() {}
    jobs as f64 / started.elapsed().as_secs_f64()
}

/// Runs `weir bench sweep`.
pub fn run_sweep(quick: bool) -> Result<(), BenchError> {
    let jobs = if quick { 10_000 } else { 100_000 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let mut pairs = vec![("jobs", jobs.to_string())];
        let mut ops_per_batch: f64 = 1.0;
        let (mut w1, mut w32) = (0.0, 0.0);
        for workers in [1u32, 8, 32] {
            // One worker runs a fifth of the jobs: its rate is steady long
            // before, and the whole sweep stays within its time budget.
            let jobs = if workers == 1 { jobs / 5 } else { jobs };
            let d = drain(
                &dir.join(format!("w{workers}")),
                jobs,
                workers,
                Durability::Fsync,
            )
            .await?;
            println!(
                "drain: {jobs} no-op jobs, pool {workers}, fsync: {:.0} jobs/s ({} durable batches, {:.1} ops per batch)",
                d.jobs_per_s, d.batches, d.ops_per_batch
            );
            ops_per_batch = ops_per_batch.max(d.ops_per_batch);
            match workers {
                1 => w1 = d.jobs_per_s,
                32 => w32 = d.jobs_per_s,
                _ => {}
            }
            pairs.push((
                match workers {
                    1 => "w1_jobs_per_s",
                    8 => "w8_jobs_per_s",
                    _ => "w32_jobs_per_s",
                },
                format!("{:.0}", d.jobs_per_s),
            ));
            pairs.push((
                match workers {
                    1 => "w1_done",
                    8 => "w8_done",
                    _ => "w32_done",
                },
                jobs.to_string(),
            ));
        }
        let ops = ops_per_batch.round().max(1.0) as usize;
        let commits = ((jobs * 3) / ops).clamp(50, 5_000);
        let raw_commits = raw_commits_per_s(&dir, ops, 60, commits, true)?;
        let raw_jobs = raw_commits * ops as f64 / 3.0;
        println!(
            "limit: raw sled insert+flush+fsync, {ops} values of 60 bytes per commit: {raw_jobs:.0} jobs/s at 3 ops per job"
        );
        // A lone worker's peer: one durable commit per job, one at a time
        // (what a queue without group commit pays for every job).
        let one_commits = (jobs / 20).clamp(200, 2_000);
        let raw_one = raw_commits_per_s(&dir.join("one"), 1, 60, one_commits, true)?;
        let one_worker_ratio = w1 / raw_one;
        let w32_ratio = w32 / raw_jobs;
        println!(
            "limit: raw sled insert+flush+fsync, one commit per job: {raw_one:.0} jobs/s; 1 worker / that = {one_worker_ratio:.2} (goal >= 0.70); 32 workers / raw at weir's batch size = {w32_ratio:.2} (goal >= 0.70)"
        );
        pairs.push(("raw_one_commit_jobs_per_s", format!("{raw_one:.0}")));
        pairs.push(("one_worker_ratio", format!("{one_worker_ratio:.3}")));
        pairs.push(("w32_ratio", format!("{w32_ratio:.3}")));
        let chan = channel_jobs_per_s(jobs, 32).await;
        println!("limit: non-durable tokio mpsc to 32 consumers: {chan:.0} jobs/s");
        pairs.push(("raw_sled_jobs_per_s", format!("{raw_jobs:.0}")));
        pairs.push(("raw_ops_per_commit", ops.to_string()));
        pairs.push(("channel_jobs_per_s", format!("{chan:.0}")));
        pairs.push(("peak_rss_bytes", peak_rss_bytes().to_string()));
        println!("{}", result_line("sweep", &pairs));
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}
