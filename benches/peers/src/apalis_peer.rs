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
use apalis_sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteStorage};

use crate::{fresh, pct_us, peak_rss_bytes, result, Error};

static DONE: AtomicU64 = AtomicU64::new(0);
static STARTS: Mutex<Option<HashMap<u64, Instant>>> = Mutex::new(None);
static ENDS: Mutex<Option<HashMap<u64, Instant>>> = Mutex::new(None);
static CHAIN: OnceLock<(SqlitePool, u64)> = OnceLock::new();

async fn pool(dir: &std::path::Path) -> Result<SqlitePool, Error> {
    fresh(dir)?;
    let opts = SqliteConnectOptions::new()
        .filename(dir.join("apalis.db"))
        .create_if_missing(true)
        .pragma("journal_mode", "WAL")
        .pragma("synchronous", "FULL");
    let setup = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts.clone())
        .await?;
    SqliteStorage::<u64>::setup(&setup).await?;
    setup.close().await;
    Ok(SqlitePoolOptions::new()
        .max_connections(8)
        .connect_with(opts)
        .await?)
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
            let mut storage = SqliteStorage::<u64>::new(pool);
            storage.push(i + 1).await?;
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
        let mut storage = SqliteStorage::<u64>::new(&pool);
        DONE.store(0, Ordering::SeqCst);
        let began = Instant::now();
        let deadline = began + Duration::from_secs(budget_s);
        let mut enq = 0u64;
        while enq < jobs && began.elapsed().as_secs() * 2 < budget_s {
            let n = 1_000.min(jobs - enq);
            storage.push_bulk((enq..enq + n).collect()).await?;
            enq += n;
        }
        let worker = WorkerBuilder::new(format!("drain-{workers}"))
            .backend(SqliteStorage::<u64>::new(&pool))
            .concurrency(workers)
            .build(noop);
        let handle = tokio::spawn(worker.run());
        wait_for(enq, deadline).await;
        let done = DONE.load(Ordering::SeqCst);
        let el = began.elapsed().as_secs_f64();
        handle.abort();
        let rate = done as f64 / el;
        println!("apalis drain, concurrency {workers}: {enq} of {jobs} enqueued, {done} run in {el:.1} s = {rate:.0} jobs/s");
        pairs.push((
            match workers {
                1 => "w1_jobs_per_s",
                8 => "w8_jobs_per_s",
                _ => "w32_jobs_per_s",
            },
            format!("{rate:.0}"),
        ));
    }
    pairs.push(("peak_rss_bytes", peak_rss_bytes().to_string()));
    result("drain", &pairs);
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
    SqliteStorage::<u64>::new(&pool).push(0).await?;
    let worker = WorkerBuilder::new("chain")
        .backend(SqliteStorage::<u64>::new(&pool))
        .concurrency(8)
        .build(noop);
    let handle = tokio::spawn(worker.run());
    wait_for(nodes, Instant::now() + Duration::from_secs(600)).await;
    let total = began.elapsed();
    handle.abort();
    let starts = STARTS.lock().expect("stamps").take().unwrap_or_default();
    let ends = ENDS.lock().expect("stamps").take().unwrap_or_default();
    let mut edges: Vec<Duration> = (0..nodes.saturating_sub(1))
        .filter_map(|i| {
            Some(
                starts
                    .get(&(i + 1))?
                    .saturating_duration_since(*ends.get(&i)?),
            )
        })
        .collect();
    edges.sort_unstable();
    let (p50, p99) = (pct_us(&edges, 0.5), pct_us(&edges, 0.99));
    println!(
        "apalis chain of {nodes}: {:.1} ms ({} of {nodes} ran), edge p50 {p50:.0} us, p99 {p99:.0} us",
        total.as_secs_f64() * 1e3,
        DONE.load(Ordering::SeqCst)
    );
    result(
        "chain",
        &[
            ("nodes", nodes.to_string()),
            ("settle_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
            ("edge_p50_us", format!("{p50:.0}")),
            ("edge_p99_us", format!("{p99:.0}")),
        ],
    );
    Ok(())
}
