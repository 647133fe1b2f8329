//! `weir bench cluster`: pools served by worker processes.
//!
//! - Scaling: the engine (no local slots) plus 1, 2 and 4 `weir worker`
//!   processes of 32 slots each, jobs whose task sleeps 20 ms, so the two
//!   cores are not what limits: jobs/s at each worker count beside the ideal
//!   (slots / 20 ms). `eff_N` = measured / ideal.
//! - Remote against local: no-op jobs through one remote worker of 32 slots
//!   beside the same jobs through a local pool of 32 slots, in the same run:
//!   `remote_ratio` = remote jobs/s / local jobs/s.
//! - Loss: a worker killed with SIGKILL while it runs attempts; how long
//!   until they run again on another worker (`requeue_ms`), beside the lease.
//!
//! Every engine is in this process with the default durability (fsync);
//! workers are this binary run as `weir worker --bench-tasks`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_core::queue::Job;

use super::procs::{free_addr, Proc, Root};
use super::report::{result_line, BenchError};
use crate::{ClusterConfig, Engine, EngineEvent, WorkerState};

/// Slots of each worker.
pub const WORKER_SLOTS: u32 = 32;
/// What each scaling job sleeps.
pub const SLEEP_MS: u64 = 20;
/// The lease of the loss phase.
pub const LEASE_MS: u64 = 2_000;
const COOKIE: &str = "weir-bench-cluster";

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

fn spawn_worker(join: &str, cookie: &Path, name: &str, slots: u32) -> Result<Proc, BenchError> {
    let exe = std::env::current_exe().map_err(failed)?;
    let child = Command::new(exe)
        .args(["worker", "--join", join, "--name", name, "--bench-tasks"])
        .arg("--cookie-file")
        .arg(cookie)
        .arg("--pool")
        .arg(format!("default={slots}"))
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(failed)?;
    Ok(Proc(child))
}

async fn cluster_engine(dir: &Path, lease_ms: u64) -> Result<(Arc<Engine>, String), BenchError> {
    let addr = free_addr()?;
    let mut config = ClusterConfig::new(addr, COOKIE);
    config.settings.lease_ms = lease_ms;
    config.settings.heartbeat_ms = (lease_ms / 5).clamp(1, 1_000);
    let engine = Engine::builder(dir)
        .pool_workers("default", WORKER_SLOTS, 0)
        .cluster(config)
        .open()
        .await
        .map_err(failed)?;
    Ok((Arc::new(engine), addr.to_string()))
}

async fn wait_joined(engine: &Engine, n: usize) -> Result<(), BenchError> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let joined = engine
            .workers()
            .await
            .map_err(failed)?
            .iter()
            .filter(|w| w.state == WorkerState::Joined)
            .count();
        if joined >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(BenchError::Failed(format!(
                "{joined} of {n} workers joined within a minute"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Enqueues `jobs` jobs of `task` and waits until the queue is idle;
/// jobs/s from the first enqueue.
async fn drain(
    engine: &Arc<Engine>,
    jobs: usize,
    task: &str,
    payload: &[u8],
) -> Result<f64, BenchError> {
    let started = Instant::now();
    let mut i = 0;
    while i < jobs {
        let n = 1_000.min(jobs - i);
        let batch: Vec<Job> = (i..i + n)
            .map(|k| {
                let mut j = Job::new(format!("job-{k}"), task, "default");
                j.payload = payload.to_vec();
                j
            })
            .collect();
        engine.enqueue_many(batch).await.map_err(failed)?;
        i += n;
    }
    engine
        .drain_until_idle(Duration::from_secs(600))
        .await
        .map_err(failed)?;
    Ok(jobs as f64 / started.elapsed().as_secs_f64())
}

async fn close(engine: Arc<Engine>) -> Result<(), BenchError> {
    let engine = Arc::try_unwrap(engine)
        .map_err(|_| BenchError::Failed("the engine is still shared".into()))?;
    engine
        .shutdown(Duration::from_secs(10))
        .await
        .map_err(failed)
}

/// jobs/s of `workers` remote workers on 20 ms sleeps.
async fn scaling(
    root: &Path,
    cookie: &Path,
    workers: usize,
    quick: bool,
) -> Result<f64, BenchError> {
    let dir = root.join(format!("scale-{workers}"));
    let (engine, join) = cluster_engine(&dir, 5_000).await?;
    let procs: Vec<Proc> = (0..workers)
        .map(|i| spawn_worker(&join, cookie, &format!("bw{i}"), WORKER_SLOTS))
        .collect::<Result<_, _>>()?;
    wait_joined(&engine, workers).await?;
    let per_slot = if quick { 20 } else { 100 };
    let jobs = workers * WORKER_SLOTS as usize * per_slot;
    let rate = drain(
        &engine,
        jobs,
        "bench.sleep",
        SLEEP_MS.to_string().as_bytes(),
    )
    .await?;
    drop(procs);
    close(engine).await?;
    Ok(rate)
}

/// jobs/s of a local pool of one worker's slots on 20 ms sleeps: what the
/// engine itself does per slot, the reference for the remote figures.
async fn local_sleeps(root: &Path, quick: bool) -> Result<f64, BenchError> {
    let engine = Arc::new(
        Engine::builder(root.join("local-sleep"))
            .pool("default", WORKER_SLOTS)
            .task_fn("bench.sleep", |ctx| async move {
                let ms: u64 = std::str::from_utf8(&ctx.payload)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(Vec::new())
            })
            .open()
            .await
            .map_err(failed)?,
    );
    let per_slot = if quick { 20 } else { 100 };
    let jobs = WORKER_SLOTS as usize * per_slot;
    let rate = drain(
        &engine,
        jobs,
        "bench.sleep",
        SLEEP_MS.to_string().as_bytes(),
    )
    .await?;
    close(engine).await?;
    Ok(rate)
}

/// No-op jobs/s through one remote worker, then through a local pool.
async fn remote_and_local(
    root: &Path,
    cookie: &Path,
    quick: bool,
) -> Result<(f64, f64), BenchError> {
    let jobs = if quick { 4_000 } else { 20_000 };
    let (engine, join) = cluster_engine(&root.join("remote"), 5_000).await?;
    let procs = [spawn_worker(&join, cookie, "remote", WORKER_SLOTS)?];
    wait_joined(&engine, 1).await?;
    let remote = drain(&engine, jobs, "bench.noop", b"").await?;
    drop(procs);
    close(engine).await?;
    let local = Arc::new(
        Engine::builder(root.join("local"))
            .pool("default", WORKER_SLOTS)
            .task_fn("bench.noop", |_ctx| async { Ok(Vec::new()) })
            .open()
            .await
            .map_err(failed)?,
    );
    let local_rate = drain(&local, jobs, "bench.noop", b"").await?;
    close(local).await?;
    Ok((remote, local_rate))
}

/// ms from the SIGKILL of a worker running attempts to the last of them
/// starting again on the other worker.
async fn requeue(root: &Path, cookie: &Path) -> Result<u64, BenchError> {
    let (engine, join) = cluster_engine(&root.join("loss"), LEASE_MS).await?;
    let mut victim = spawn_worker(&join, cookie, "victim", 4)?;
    wait_joined(&engine, 1).await?;
    let mut events = engine.subscribe();
    let jobs: Vec<Job> = (0..4)
        .map(|k| {
            let mut j = Job::new(format!("long-{k}"), "bench.sleep", "default");
            j.payload = b"600000".to_vec();
            j.policy.attempts_max = 0;
            j
        })
        .collect();
    engine.enqueue_many(jobs).await.map_err(failed)?;
    let mut started = 0;
    while started < 4 {
        match tokio::time::timeout(Duration::from_secs(30), events.recv()).await {
            Ok(Ok(EngineEvent::Started { .. })) => started += 1,
            Ok(Ok(_)) => {}
            _ => {
                return Err(BenchError::Failed(
                    "the victim did not start its attempts".into(),
                ))
            }
        }
    }
    let _other = spawn_worker(&join, cookie, "other", 4)?;
    wait_joined(&engine, 2).await?;
    let killed = Instant::now();
    let _ = victim.0.kill();
    let _ = victim.0.wait();
    let mut again = 0;
    while again < 4 {
        match tokio::time::timeout(Duration::from_secs(60), events.recv()).await {
            Ok(Ok(EngineEvent::Started { attempt, .. })) if attempt >= 2 => again += 1,
            Ok(Ok(_)) => {}
            _ => {
                return Err(BenchError::Failed(
                    "the victim's attempts did not run again".into(),
                ))
            }
        }
    }
    let ms = killed.elapsed().as_millis() as u64;
    engine.pause(true).map_err(failed)?;
    drop(_other);
    let engine = Arc::try_unwrap(engine)
        .map_err(|_| BenchError::Failed("the engine is still shared".into()))?;
    let _ = engine.shutdown(Duration::from_millis(200)).await;
    Ok(ms)
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async move {
        let root_dir = super::drain::tempfile_dir()?;
        let root = Root(root_dir);
        let cookie = root.path().join("cookie");
        std::fs::write(&cookie, COOKIE).map_err(failed)?;
        let mut pairs: Vec<(&str, String)> = Vec::new();
        let local = local_sleeps(root.path(), quick).await?;
        let ideal_1 = f64::from(WORKER_SLOTS) * 1_000.0 / SLEEP_MS as f64;
        println!(
            "local pool x {WORKER_SLOTS} slots, {SLEEP_MS} ms jobs: {local:.0} jobs/s, ideal {ideal_1:.0} (efficiency {:.2}: the engine's own cost per attempt)",
            local / ideal_1
        );
        pairs.push(("local_eff", format!("{:.3}", local / ideal_1)));
        for (n, key, ideal_key) in [(1, "eff_1", "per_s_1"), (2, "eff_2", "per_s_2"), (4, "eff_4", "per_s_4")] {
            let rate = scaling(root.path(), &cookie, n, quick).await?;
            let ideal = n as f64 * f64::from(WORKER_SLOTS) * 1_000.0 / SLEEP_MS as f64;
            println!(
                "{n} worker(s) x {WORKER_SLOTS} slots, {SLEEP_MS} ms jobs: {rate:.0} jobs/s, ideal {ideal:.0} (efficiency {:.2}, goal >= 0.9 at 4)",
                rate / ideal
            );
            pairs.push((ideal_key, format!("{rate:.0}")));
            pairs.push((key, format!("{:.3}", rate / ideal)));
        }
        let (remote, local) = remote_and_local(root.path(), &cookie, quick).await?;
        println!(
            "no-op jobs: one remote worker {remote:.0} jobs/s, a local pool {local:.0} jobs/s (ratio {:.2}, goal >= 0.5)",
            remote / local
        );
        pairs.push(("remote_per_s", format!("{remote:.0}")));
        pairs.push(("local_per_s", format!("{local:.0}")));
        pairs.push(("remote_ratio", format!("{:.3}", remote / local)));
        let ms = requeue(root.path(), &cookie).await?;
        println!(
            "a killed worker's 4 attempts ran again elsewhere {ms} ms after the kill (lease {LEASE_MS} ms, goal <= {})",
            2 * LEASE_MS
        );
        pairs.push(("requeue_ms", ms.to_string()));
        pairs.push(("lease_ms", LEASE_MS.to_string()));
        pairs.push(("requeue_goal_ms", (2 * LEASE_MS).to_string()));
        println!("{}", result_line("cluster", &pairs));
        Ok(())
    })
}
