//! `weir bench drain`: 100k durable no-op jobs through the whole runner
//! (enqueue acknowledged after a durable flush, run, complete durable) with
//! a pool of 64, fsync mode, beside the store's raw group-commit limit
//! measured in the same run at the batch size weir reached.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_actors::store::Durability;
use weir_core::queue::Job;

use super::report::{result_line, BenchError};
use crate::Engine;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// Resident set size of this process, in bytes.
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// Anonymous resident memory of this process (heap, stacks), in bytes:
/// the resident set without the pages of files mapped in (the binary's
/// own code, which is shared and clean, and counts in the RSS as the
/// kernel maps it around each page touched).
pub fn rss_anon_bytes() -> u64 {
    status_bytes("RssAnon:")
}

/// Peak resident set size of this process, in bytes.
pub fn peak_rss_bytes() -> u64 {
    status_bytes("VmHWM:")
}

/// A size of `/proc/self/status` in bytes; 0 when it cannot be read.
fn status_bytes(field: &str) -> u64 {
    super::store::proc_status_bytes(field).unwrap_or(0)
}

/// The figures of one drain.
pub struct Drain {
    /// Jobs per second, first enqueue to idle.
    pub jobs_per_s: f64,
    /// Ops per durable batch, on average.
    pub ops_per_batch: f64,
    /// Durable batches.
    pub batches: u64,
}

/// Drains `jobs` no-op jobs through an engine in `dir`.
pub async fn drain(
    dir: &std::path::Path,
    jobs: usize,
    capacity: u32,
    durability: Durability,
) -> Result<Drain, BenchError> {
    let engine = Engine::builder(dir)
        .durability(durability)
        .pool("default", capacity)
        .task_fn("noop", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .map_err(failed)?;
    let engine = Arc::new(engine);
    let seq_before = engine.store().last_seq();
    let batches_before = engine.counts().borrow().batches;
    let started = Instant::now();
    let chunk = 1_000;
    let producer = {
        let engine = engine.clone();
        tokio::spawn(async move {
            let mut i = 0;
            while i < jobs {
                let n = chunk.min(jobs - i);
                let batch: Vec<Job> = (i..i + n)
                    .map(|k| Job::new(format!("job-{k}"), "noop", "default"))
                    .collect();
                engine.enqueue_many(batch).await?;
                i += n;
            }
            Ok::<(), crate::EngineError>(())
        })
    };
    producer.await.map_err(failed)?.map_err(failed)?;
    engine
        .drain_until_idle(Duration::from_secs(600))
        .await
        .map_err(failed)?;
    let elapsed = started.elapsed().as_secs_f64();
    let batches = engine.counts().borrow().batches - batches_before;
    let _ = seq_before;
    let engine =
        Arc::try_unwrap(engine).map_err(|_| BenchError::Failed("engine still shared".into()))?;
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    let ops = 3.0 * jobs as f64;
    Ok(Drain {
        jobs_per_s: jobs as f64 / elapsed,
        ops_per_batch: ops / batches.max(1) as f64,
        batches,
    })
}

/// Memory per pending ticket: enqueue `n` jobs with dispatch paused.
pub async fn bytes_per_pending(dir: &std::path::Path, n: usize) -> Result<f64, BenchError> {
    let engine = Engine::builder(dir)
        .durability(Durability::None)
        .pool("default", 1)
        .task_fn("noop", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .map_err(failed)?;
    engine.pause(true).map_err(failed)?;
    // Warm up allocator and sled's cache with a first batch.
    let warm: Vec<Job> = (0..1_000)
        .map(|k| Job::new(format!("warm-{k}"), "noop", "default"))
        .collect();
    engine.enqueue_many(warm).await.map_err(failed)?;
    let before = rss_bytes();
    let mut i = 0;
    while i < n {
        let m = 10_000.min(n - i);
        let batch: Vec<Job> = (i..i + m)
            .map(|k| Job::new(format!("pending-{k:08}"), "noop", "default"))
            .collect();
        engine.enqueue_many(batch).await.map_err(failed)?;
        i += m;
    }
    // Snapshots are written beside the enqueues, and the tickets enqueued
    // while one was written leave memory when the next lands: measure once
    // the tickets in memory stop changing (at most 5 s).
    let mut last = usize::MAX;
    for _ in 0..50 {
        let in_memory = engine.status().await.map_err(failed)?.in_memory;
        if in_memory == last {
            break;
        }
        last = in_memory;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = rss_bytes();
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

/// Raw limit: sled insert + flush (+ fsync) of `ops_per_commit` values of
/// `value_bytes`, as commits per second.
pub fn raw_commits_per_s(
    dir: &std::path::Path,
    ops_per_commit: usize,
    value_bytes: usize,
    commits: usize,
    fsync: bool,
) -> Result<f64, BenchError> {
    // With `fsync`, sled's log write ends in an fdatasync, as in the
    // store's fsync mode.
    let db = sled::Config::new()
        .path(dir.join("raw"))
        .sync_to_device(fsync)
        .open()
        .map_err(failed)?;
    let tree = db.open_tree("journal").map_err(failed)?;
    let value = vec![7u8; value_bytes];
    let mut seq = 0u64;
    let started = Instant::now();
    for _ in 0..commits {
        let mut batch = sled::Batch::default();
        for _ in 0..ops_per_commit {
            seq += 1;
            batch.insert(&seq.to_be_bytes(), value.as_slice());
        }
        tree.apply_batch(batch).map_err(failed)?;
        db.flush().map_err(failed)?;
    }
    Ok(commits as f64 / started.elapsed().as_secs_f64())
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let jobs = if quick { 10_000 } else { 100_000 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let d = drain(&dir.join("drain"), jobs, 64, Durability::Fsync).await?;
        println!(
            "drain: {jobs} no-op jobs, pool 64, fsync: {:.0} jobs/s; {} durable batches, {:.1} ops per batch",
            d.jobs_per_s, d.batches, d.ops_per_batch
        );
        // The raw limit at the batch size weir reached: one journal value
        // of ~60 bytes per op (a Select or Complete; an Enqueue is larger).
        let ops = d.ops_per_batch.round().max(1.0) as usize;
        let commits = ((jobs * 3) / ops).clamp(50, 5_000);
        let raw_commits = raw_commits_per_s(&dir, ops, 60, commits, true)?;
        let raw_jobs = raw_commits * ops as f64 / 3.0;
        let ratio = d.jobs_per_s / raw_jobs;
        println!(
            "raw sled insert+flush+fsync, {ops} values of 60 bytes per commit: {raw_commits:.0} commits/s = {raw_jobs:.0} jobs/s at 3 ops per job; weir/raw = {ratio:.2} (goal >= 0.50); goal >= 30,000 jobs/s"
        );
        let pending = if quick { 20_000 } else { 200_000 };
        let bpp = bytes_per_pending(&dir.join("pending"), pending).await?;
        println!("memory: {bpp:.0} bytes per pending ticket (empty payload, key of 16 bytes) over {pending} tickets; goal <= 300");
        println!("peak RSS: {} bytes", peak_rss_bytes());
        println!(
            "{}",
            result_line(
                "drain",
                &[
                    ("jobs", jobs.to_string()),
                    ("jobs_per_s", format!("{:.0}", d.jobs_per_s)),
                    ("raw_jobs_per_s", format!("{raw_jobs:.0}")),
                    ("ratio_to_limit", format!("{ratio:.3}")),
                    ("ops_per_batch", format!("{:.1}", d.ops_per_batch)),
                    ("bytes_per_pending", format!("{bpp:.0}")),
                ]
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}

/// A fresh directory under the system temp dir for one run.
pub fn tempfile_dir() -> Result<std::path::PathBuf, BenchError> {
    let dir = std::env::temp_dir().join(format!(
        "weir-bench-{}-{}",
        std::process::id(),
        Instant::now().elapsed().as_nanos()
    ));
    std::fs::create_dir_all(&dir).map_err(failed)?;
    Ok(dir)
}
