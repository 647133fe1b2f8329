//! taquba 0.16 on a local directory (object_store's `LocalFileSystem`):
//! its durable transitions (`enqueue`, `ack`) await SlateDB's WAL flush,
//! the crate's documented durability, at SlateDB's default flush interval.
//! `LocalFileSystem` writes each WAL object to a file and renames it into
//! place; it does not fsync.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use taquba::object_store::local::LocalFileSystem;
use taquba::{
    run_worker_concurrent, JobRecord, LeaseHandle, OpenOptions, Queue, Worker, WorkerError,
};
use tokio_util::sync::CancellationToken;

use crate::{figures, fresh, open_loop, peak_rss_bytes, result, Error};

/// SlateDB's WAL flush interval: `TAQUBA_FLUSH_MS` if set, else SlateDB's
/// default (100 ms). Every durable transition waits for the next flush.
pub fn flush_interval() -> Option<Duration> {
    std::env::var("TAQUBA_FLUSH_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
}

async fn open(dir: &std::path::Path) -> Result<Arc<Queue>, Error> {
    fresh(dir)?;
    open_existing(dir).await
}

async fn open_existing(dir: &std::path::Path) -> Result<Arc<Queue>, Error> {
    let store = Arc::new(LocalFileSystem::new_with_prefix(dir)?);
    let mut opts = OpenOptions::default();
    if let Some(every) = flush_interval() {
        opts = opts.flush_interval(every);
    }
    Ok(Arc::new(
        Queue::open_with_options(store, "bench", opts).await?,
    ))
}

/// Enqueues jobs `r` in one batch, each payload its index.
async fn enqueue_bulk(q: &Queue, r: std::ops::Range<u64>) -> Result<(), Error> {
    let batch = r.map(|k| k.to_be_bytes().to_vec()).collect();
    q.enqueue_batch("work", batch).await?;
    Ok(())
}

fn index(job: &JobRecord) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&job.payload[..8]);
    u64::from_be_bytes(b)
}

struct Count {
    done: AtomicU64,
    starts: Mutex<HashMap<u64, Instant>>,
    ends: Mutex<HashMap<u64, Instant>>,
    chain: Option<(Arc<Queue>, u64)>,
}

impl Worker for Count {
    async fn process(&self, job: &JobRecord, _lease: &LeaseHandle) -> Result<(), WorkerError> {
        let i = index(job);
        self.starts
            .lock()
            .expect("starts")
            .insert(i, Instant::now());
        if let Some((q, n)) = &self.chain {
            // The handler enqueues its successor (durable) before its own
            // ack, as a chain on a plain queue must.
            self.ends.lock().expect("ends").insert(i, Instant::now());
            if i + 1 < *n {
                q.enqueue("work", (i + 1).to_be_bytes().to_vec()).await?;
            }
        }
        self.done.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn counter(chain: Option<(Arc<Queue>, u64)>) -> Arc<Count> {
    Arc::new(Count {
        done: AtomicU64::new(0),
        starts: Mutex::default(),
        ends: Mutex::default(),
        chain,
    })
}

async fn wait_for(c: &Count, n: u64, deadline: Instant) {
    while c.done.load(Ordering::SeqCst) < n && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// 1, 8 and 32 workers over `jobs` jobs enqueued in batches of 1,000,
/// each level within `budget_s` seconds.
pub async fn drain(dir: &std::path::Path, jobs: u64, budget_s: u64) -> Result<(), Error> {
    let mut pairs = vec![("jobs", jobs.to_string())];
    for workers in [1usize, 8, 32] {
        let q = open(&dir.join(format!("w{workers}"))).await?;
        let began = Instant::now();
        let deadline = began + Duration::from_secs(budget_s);
        let enq = figures::fill(jobs, figures::fill_until(began, budget_s), |r| {
            enqueue_bulk(&q, r)
        })
        .await?;
        let c = counter(None);
        let stop = CancellationToken::new();
        let loop_q = q.clone();
        let loop_c = c.clone();
        let loop_stop = stop.clone();
        let handle = tokio::spawn(async move {
            run_worker_concurrent(
                &loop_q,
                "work",
                loop_c,
                workers,
                Duration::from_millis(250),
                loop_stop.cancelled_owned(),
            )
            .await
        });
        wait_for(&c, enq, deadline).await;
        let done = c.done.load(Ordering::SeqCst);
        let elapsed = began.elapsed();
        stop.cancel();
        let _ = handle.await;
        figures::drain_level("taquba", workers, (jobs, enq, done), elapsed, &mut pairs);
    }
    pairs.push(("peak_rss_bytes", peak_rss_bytes().to_string()));
    result("drain", &pairs);
    Ok(())
}

/// Open-loop single enqueues at 100, 1,000 and 10,000 per second.
pub async fn latency(dir: &std::path::Path, secs: u64) -> Result<(), Error> {
    let mut pairs = vec![("secs_per_rate", secs.to_string())];
    for per_s in [100u64, 1_000, 10_000] {
        let q = open(&dir.join(format!("r{per_s}"))).await?;
        let c = counter(None);
        let stop = CancellationToken::new();
        let (lq, lc, ls) = (q.clone(), c.clone(), stop.clone());
        let handle = tokio::spawn(async move {
            run_worker_concurrent(
                &lq,
                "work",
                lc,
                64,
                Duration::from_millis(250),
                ls.cancelled_owned(),
            )
            .await
        });
        let w = open_loop::run(per_s, secs, |k| {
            let q = q.clone();
            async move {
                q.enqueue("work", k.to_be_bytes().to_vec()).await?;
                Ok(())
            }
        })
        .await?;
        wait_for(&c, w.acked.len() as u64, open_loop::start_deadline(&w)).await;
        stop.cancel();
        let _ = handle.await;
        let starts = c.starts.lock().expect("starts").clone();
        open_loop::report("taquba", per_s, &w, &starts, &mut pairs);
    }
    result("latency", &pairs);
    Ok(())
}

/// A chain of `nodes` jobs, each handler enqueueing its successor.
pub async fn chain(dir: &std::path::Path, nodes: u64) -> Result<(), Error> {
    let q = open(dir).await?;
    let c = counter(Some((q.clone(), nodes)));
    let stop = CancellationToken::new();
    let (lq, lc, ls) = (q.clone(), c.clone(), stop.clone());
    let began = Instant::now();
    q.enqueue("work", 0u64.to_be_bytes().to_vec()).await?;
    let handle = tokio::spawn(async move {
        run_worker_concurrent(
            &lq,
            "work",
            lc,
            8,
            Duration::from_millis(250),
            ls.cancelled_owned(),
        )
        .await
    });
    wait_for(&c, nodes, Instant::now() + Duration::from_secs(600)).await;
    let total = began.elapsed();
    stop.cancel();
    let _ = handle.await;
    let starts = c.starts.lock().expect("starts");
    let ends = c.ends.lock().expect("ends");
    figures::chain_result("taquba", nodes, total, &starts, &ends);
    Ok(())
}

/// Fills a fresh queue in `dir` with `pending` jobs (batches of 1,000) and
/// closes it; then a fresh process (`recovery-open`) opens it, so its RSS
/// is the recovery's alone: the time from the start of the open to the
/// first job starting.
pub async fn recovery(dir: &std::path::Path, pending: u64) -> Result<(), Error> {
    let q = open(dir).await?;
    let filled = Instant::now();
    figures::fill(pending, None, |r| enqueue_bulk(&q, r)).await?;
    let q = Arc::try_unwrap(q).map_err(|_| "the queue is still shared")?;
    q.close().await?;
    println!(
        "taquba: filled {pending} pending jobs in {:.1} s",
        filled.elapsed().as_secs_f64()
    );
    crate::recovery_child("taquba", dir, pending)
}

/// The child of [`recovery`].
pub async fn recovery_open(dir: &std::path::Path) -> Result<(), Error> {
    let began = Instant::now();
    let q = open_existing(dir).await?;
    let opened = began.elapsed();
    let c = counter(None);
    let stop = CancellationToken::new();
    let (lq, lc, ls) = (q.clone(), c.clone(), stop.clone());
    tokio::spawn(async move {
        run_worker_concurrent(
            &lq,
            "work",
            lc,
            64,
            Duration::from_millis(250),
            ls.cancelled_owned(),
        )
        .await
    });
    wait_for(&c, 1, Instant::now() + Duration::from_secs(300)).await;
    let first = began.elapsed();
    crate::print_child(opened, first);
    Ok(())
}
