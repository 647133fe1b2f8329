//! `weir bench recovery`: a store holding 1M pending tickets (100k with
//! `--quick`), written with dispatch paused in fsync mode and closed; then
//! a fresh process (this binary again, so the RSS is the recovery's alone)
//! opens it and the figure is the time from the start of `open` to the
//! first task body starting, and the process's RSS at that moment.
//! Beside it, the floor: sled's own open of a copy of the same files, in
//! a fresh process too (`raw_sled_open_ms`), which every recovery on sled
//! 0.34 pays before it reads a ticket.
//!
//! To profile the open alone: `WEIR_BENCH_RECOVERY_FILL=DIR` only fills
//! `DIR` and closes it; `WEIR_BENCH_RECOVERY_DIR=DIR` (on a copy: an open
//! changes the store) only recovers it and prints the figures.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use weir_actors::store::Durability;
use weir_core::queue::Job;

use super::drain::{peak_rss_bytes, rss_anon_bytes, rss_bytes, tempfile_dir};
use super::report::{result_line, BenchError};
use crate::Engine;

/// Set in the child process: the store to recover.
const CHILD_ENV: &str = "WEIR_BENCH_RECOVERY_DIR";
/// Set to fill a store there and stop.
const FILL_ENV: &str = "WEIR_BENCH_RECOVERY_FILL";
/// Set in the floor's child process: sled's folder of a copy of the
/// filled store, to open with sled alone.
const RAW_ENV: &str = "WEIR_BENCH_RECOVERY_RAW";

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

async fn fill(dir: &std::path::Path, pending: usize) -> Result<(), BenchError> {
    let engine = Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", 64)
        .task_fn("noop", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .map_err(failed)?;
    engine.pause(true).map_err(failed)?;
    let mut i = 0;
    while i < pending {
        let n = 10_000.min(pending - i);
        let batch: Vec<Job> = (i..i + n)
            .map(|k| Job::new(format!("pending-{k:08}"), "noop", "default"))
            .collect();
        engine.enqueue_many(batch).await.map_err(failed)?;
        i += n;
    }
    engine
        .shutdown(Duration::from_secs(60))
        .await
        .map_err(failed)
}

/// The child: open, wait for the first start, print the figures.
async fn recover(dir: &std::path::Path) -> Result<(), BenchError> {
    let first = Arc::new(Notify::new());
    let signal = first.clone();
    let began = Instant::now();
    let engine = Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", 64)
        .task_fn("noop", move |_ctx| {
            let signal = signal.clone();
            async move {
                signal.notify_one();
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .map_err(failed)?;
    let opened = began.elapsed();
    first.notified().await;
    let first_dispatch = began.elapsed();
    let (rss, anon) = (rss_bytes(), rss_anon_bytes());
    println!(
        "CHILD open_ms={:.1} first_dispatch_ms={:.1} rss_bytes={rss} rss_anon_bytes={anon} peak_rss_bytes={}",
        opened.as_secs_f64() * 1e3,
        first_dispatch.as_secs_f64() * 1e3,
        peak_rss_bytes()
    );
    engine.pause(true).map_err(failed)?;
    // Leave the rest pending: the figure is taken; a kill is what a
    // crash would do and the store is thrown away.
    std::process::exit(0);
}

/// The floor's child: sled's own open of the store's files, with the
/// settings weir opens them with, and nothing else. What any recovery on
/// sled 0.34 pays before it can read a ticket.
fn raw_open(sled_dir: &std::path::Path) -> Result<(), BenchError> {
    let settings = weir_actors::store::StoreSettings::default();
    let began = Instant::now();
    let db = weir_actors::store::sled_config(sled_dir, &settings)
        .open()
        .map_err(failed)?;
    let opened = began.elapsed();
    println!("RAW open_ms={:.1}", opened.as_secs_f64() * 1e3);
    drop(db);
    std::process::exit(0);
}

/// Runs this binary's `bench recovery` as a child with `env` set to
/// `dir`; the line of its stdout that starts with `prefix`, or why there
/// is none.
fn child_line(env: &str, dir: &std::path::Path, prefix: &str) -> Result<String, BenchError> {
    let exe = std::env::current_exe().map_err(failed)?;
    let out = std::process::Command::new(exe)
        .args(["bench", "recovery"])
        .env(env, dir)
        .output()
        .map_err(failed)?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with(prefix))
        .map(str::to_string)
        .ok_or_else(|| {
            BenchError::Failed(format!(
                "the child process printed no `{prefix}` line: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        })
}

/// Runs `weir bench recovery`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    run_pending(if quick { 100_000 } else { 1_000_000 })
}

/// Runs it with `pending` tickets (`--full`: 10M).
pub fn run_pending(pending: usize) -> Result<(), BenchError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        return rt.block_on(recover(std::path::Path::new(&dir)));
    }
    if let Ok(dir) = std::env::var(FILL_ENV) {
        return rt.block_on(fill(std::path::Path::new(&dir), pending));
    }
    if let Ok(dir) = std::env::var(RAW_ENV) {
        return raw_open(std::path::Path::new(&dir));
    }
    let dir = tempfile_dir()?;
    let store = dir.join("recovery");
    let measured = measure(&rt, &dir, &store, pending);
    if std::env::var_os("WEIR_BENCH_KEEP").is_some() {
        println!("kept the store at {}", store.display());
    } else {
        // Also when a step failed: a store of 1M tickets is 100+ MB.
        let _ = std::fs::remove_dir_all(&dir);
    }
    measured
}

/// Fills `store` with `pending` tickets, recovers it in a child process,
/// opens a copy with sled alone in another, and prints the figures.
fn measure(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    store: &std::path::Path,
    pending: usize,
) -> Result<(), BenchError> {
    let filled = Instant::now();
    rt.block_on(fill(store, pending))?;
    println!(
        "filled {pending} pending tickets in {:.1} s (fsync, batches of 10,000, dispatch paused)",
        filled.elapsed().as_secs_f64()
    );
    // What the recovering open reads: sled's open scans all the log
    // written since its last open, here the whole fill.
    let store_bytes = super::store::dir_bytes(store);
    // The floor opens a copy of sled's files as the fill left them: an
    // open changes them (sled zeroes its free segments).
    let raw_copy = dir.join("raw-sled");
    super::backup::copy_tree(&store.join("sled"), &raw_copy)?;
    let line = child_line(CHILD_ENV, store, "CHILD ")?;
    let raw_line = child_line(RAW_ENV, &raw_copy, "RAW ")?;
    let field_of = |line: &str, k: &str| -> String {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")).map(str::to_string))
            .unwrap_or_default()
    };
    let field = |k: &str| field_of(&line, k);
    let raw_open_ms = field_of(&raw_line, "open_ms");
    // The goals of the issue, and the peers' figures at 100k pending
    // (BENCHMARKS.md, benches/compare.sh).
    let (goal_ms, goal_mib) = if pending > 1_000_000 {
        (100, 128)
    } else {
        (50, 64)
    };
    let rss: f64 = field("rss_bytes").parse().unwrap_or(0.0);
    let anon: f64 = field("rss_anon_bytes").parse().unwrap_or(0.0);
    let mib = (1u64 << 20) as f64;
    println!(
        "recovery of {pending} pending tickets: open {} ms, first dispatch {} ms after the start of open (goal <= {goal_ms} ms; apalis 12 ms, taquba 14 ms at 100k), RSS {:.1} MiB (goal <= {goal_mib} MiB; apalis 11, taquba 16 at 100k), of which {:.1} MiB anonymous (the rest is the binary's own pages mapped in); the store it read {:.1} MB",
        field("open_ms"),
        field("first_dispatch_ms"),
        rss / mib,
        anon / mib,
        store_bytes as f64 / 1e6
    );
    println!(
        "floor: sled's own open of the same files in a fresh process, nothing else: {raw_open_ms} ms"
    );
    println!(
        "{}",
        result_line(
            "recovery",
            &[
                ("pending", pending.to_string()),
                ("open_ms", field("open_ms")),
                ("first_dispatch_ms", field("first_dispatch_ms")),
                ("rss_bytes", field("rss_bytes")),
                ("rss_anon_bytes", field("rss_anon_bytes")),
                ("store_bytes", store_bytes.to_string()),
                ("raw_sled_open_ms", raw_open_ms),
            ]
        )
    );
    Ok(())
}
