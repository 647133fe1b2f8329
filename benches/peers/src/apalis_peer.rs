//! apalis 1.0 with apalis-sqlite 1.0. `SqliteStorage::setup` sets
//! `PRAGMA synchronous = OFF` on the connection it runs on, so the driver
//! runs setup on a pool of its own, closes it, and opens the pool the
//! storage uses with `journal_mode = WAL` and `synchronous = FULL` on every
//! connection: each commit is fsynced.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use apalis::prelude::*;
use apalis_sqlite::{Config, SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteStorage};

use crate::{figures, fresh, open_loop, peak_rss_bytes, result, Error};

static DONE: AtomicU64 = AtomicU64::new(0);
static STARTS: Mutex<Option<HashMap<u64, Instant>>> = Mutex::new(None);
static ENDS: Mutex<Option<HashMap<u64, Instant>>> = Mutex::new(None);
static CHAIN: OnceLock<(SqlitePool, u64)> = OnceLock::new();

async fn pool(dir: &std::path::Path) -> Result<SqlitePool, Error> {
    fresh(dir)?;
    let setup = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options(dir))
        .await?;
    SqliteStorage::<()>::setup(&setup).await?;
    setup.close().await;
    pool_existing(dir).await
}

async fn pool_existing(dir: &std::path::Path) -> Result<SqlitePool, Error> {
    Ok(SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(options(dir))
        .await?)
}

fn options(dir: &std::path::Path) -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .filename(dir.join("apalis.db"))
        .create_if_missing(true)
        .pragma("journal_mode", "WAL")
        .pragma("synchronous", "FULL")
}

/// The storage the producers and handlers use, apalis-sqlite's defaults.
fn storage(pool: &SqlitePool) -> SqliteStorage<u64> {
    SqliteStorage::<u64>::new(pool)
}

/// The backend a worker fetches from. apalis-sqlite fetches again as soon
/// as a task is done, but a worker that found the queue empty sleeps until
/// its next heartbeat (30 s by default); `APALIS_HEARTBEAT_MS` (default
/// 100 ms here) shortens that, at one more write per heartbeat.
fn polled(pool: &SqlitePool) -> SqliteStorage<u64> {
    let every = std::env::var("APALIS_HEARTBEAT_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(100);
    let config = Config::default()
        .queue(std::any::type_name::<u64>())
        .heartbeat_interval(Duration::from_millis(every));
    storage(pool).with_config(config)
}

/// Pushes jobs `r` in one bulk (one transaction).
async fn push_bulk(pool: &SqlitePool, r: std::ops::Range<u64>) -> Result<(), Error> {
    storage(pool).push_bulk(r.collect()).await?;
    Ok(())
}

fn stamp(map: &Mutex<Option<HashMap<u64, Instant>>>, i: u64) {
    map.lock()
        .expect("stamps")
        .get_or_insert_with(HashMap::new)
        .insert(i, Instant::now());
}

async fn noop(i: u64) -> Result<(), BoxDynError> {
    stamp(&STARTS, i);
    if let Some((pool, n)) = CHAIN.get() {
        stamp(&ENDS, i);
        if i + 1 < *n {
            // The handler enqueues its successor (durable) before it
            // returns, as a chain on a plain queue must.
            let mut producer = storage(pool);
            producer.push(i + 1).await?;
        }
    }
    DONE.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

async fn wait_for(n: u64, deadline: Instant) {
    while DONE.load(Ordering::SeqCst) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// 1, 8 and 32 concurrent handlers over `jobs` jobs pushed in bulks of
/// 1,000, each level within `budget_s` seconds.
pub async fn drain(dir: &std::path::Path, jobs: u64, budget_s: u64) -> Result<(), Error> {
    let mut pairs = vec![("jobs", jobs.to_string())];
    for workers in [1usize, 8, 32] {
        let pool = pool(&dir.join(format!("w{workers}"))).await?;
        DONE.store(0, Ordering::SeqCst);
        let began = Instant::now();
        let deadline = began + Duration::from_secs(budget_s);
        let enq = figures::fill(jobs, figures::fill_until(began, budget_s), |r| {
            push_bulk(&pool, r)
        })
        .await?;
        let worker = WorkerBuilder::new(format!("drain-{workers}"))
            .backend(polled(&pool))
            .concurrency(workers)
            .build(noop);
        let handle = tokio::spawn(worker.run());
        wait_for(enq, deadline).await;
        let done = DONE.load(Ordering::SeqCst);
        let elapsed = began.elapsed();
        handle.abort();
        figures::drain_level("apalis", workers, (jobs, enq, done), elapsed, &mut pairs);
    }
    pairs.push(("peak_rss_bytes", peak_rss_bytes().to_string()));
    result("drain", &pairs);
    Ok(())
}

/// Open-loop single pushes at 100, 1,000 and 10,000 per second, each its
/// own durable commit, drained by 64 concurrent handlers: acknowledged push
/// to handler start.
pub async fn latency(dir: &std::path::Path, secs: u64) -> Result<(), Error> {
    let mut pairs = vec![("secs_per_rate", secs.to_string())];
    for per_s in [100u64, 1_000, 10_000] {
        let pool = pool(&dir.join(format!("r{per_s}"))).await?;
        DONE.store(0, Ordering::SeqCst);
        STARTS.lock().expect("stamps").take();
        let worker = WorkerBuilder::new(format!("latency-{per_s}"))
            .backend(polled(&pool))
            .concurrency(64)
            .build(noop);
        let handle = tokio::spawn(worker.run());
        // A warm-up job first: a fresh apalis worker takes up to its
        // heartbeat interval (30 s) to start fetching; that start-up is
        // not the latency measured here.
        storage(&pool).push(u64::MAX).await?;
        wait_for(1, Instant::now() + Duration::from_secs(120)).await;
        DONE.store(0, Ordering::SeqCst);
        let w = open_loop::run(per_s, secs, |k| {
            let mut producer = storage(&pool);
            async move {
                producer.push(k).await?;
                Ok(())
            }
        })
        .await?;
        wait_for(w.acked.len() as u64, open_loop::start_deadline(&w)).await;
        handle.abort();
        let starts = STARTS.lock().expect("stamps").take().unwrap_or_default();
        open_loop::report("apalis", per_s, &w, &starts, &mut pairs);
    }
    result("latency", &pairs);
    Ok(())
}

/// A chain of `nodes` jobs, each handler pushing its successor.
pub async fn chain(dir: &std::path::Path, nodes: u64) -> Result<(), Error> {
    let pool = pool(dir).await?;
    CHAIN
        .set((pool.clone(), nodes))
        .map_err(|_| "chain set twice")?;
    DONE.store(0, Ordering::SeqCst);
    let began = Instant::now();
    storage(&pool).push(0).await?;
    let worker = WorkerBuilder::new("chain")
        .backend(polled(&pool))
        .concurrency(8)
        .build(noop);
    let handle = tokio::spawn(worker.run());
    wait_for(nodes, Instant::now() + Duration::from_secs(600)).await;
    let total = began.elapsed();
    handle.abort();
    let starts = STARTS.lock().expect("stamps").take().unwrap_or_default();
    let ends = ENDS.lock().expect("stamps").take().unwrap_or_default();
    figures::chain_result("apalis", nodes, total, &starts, &ends);
    Ok(())
}

/// Fills a fresh store in `dir` with `pending` jobs (bulks of 1,000) and
/// closes it; then a fresh process (`recovery-open`) opens it: the time
/// from the start of the open to the first job starting.
pub async fn recovery(dir: &std::path::Path, pending: u64) -> Result<(), Error> {
    let pool = pool(dir).await?;
    let filled = Instant::now();
    figures::fill(pending, None, |r| push_bulk(&pool, r)).await?;
    pool.close().await;
    println!(
        "apalis: filled {pending} pending jobs in {:.1} s",
        filled.elapsed().as_secs_f64()
    );
    crate::recovery_child("apalis", dir, pending)
}

/// The child of [`recovery`].
pub async fn recovery_open(dir: &std::path::Path) -> Result<(), Error> {
    let began = Instant::now();
    let pool = pool_existing(dir).await?;
    let opened = began.elapsed();
    DONE.store(0, Ordering::SeqCst);
    let worker = WorkerBuilder::new("recovery")
        .backend(polled(&pool))
        .concurrency(64)
        .build(noop);
    tokio::spawn(worker.run());
    wait_for(1, Instant::now() + Duration::from_secs(300)).await;
    let first = began.elapsed();
    crate::print_child(opened, first);
    Ok(())
}
