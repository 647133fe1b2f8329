//! `weir bench chain` and `weir bench fanout`: graph runs through the whole
//! engine in fsync mode.
//!
//! `chain`: 400 no-op nodes in a chain (100 with `--quick`). The figures
//! are the time per node (start request to settle, over the nodes) and
//! the latency of one edge: from the moment node i's ticket is handed to a
//! worker to the moment node i+1's is. Method: a collector task drains the
//! engine's event stream and stamps each event with `Instant::now()` on
//! receipt; `EngineEvent::Started` is sent as a grant goes to the worker,
//! after its Select is durable. Both stamps carry the same receive delay,
//! so their difference is the edge: the no-op attempt, its report, the
//! early notice to the scheduler, the downstream's enqueue into the batch
//! that holds the completion, and that one durable flush (completion,
//! record, enqueue and select), then the grant. So every edge needs one
//! durable flush: the raw latency of one sled insert+flush+fsync, measured
//! in the same run, is printed as the floor, and the durable batches per
//! node are counted.
//!
//! `fanout`: 1 → 10,000 → 1 no-op nodes (1,000 with `--quick`), pool of 64:
//! the time from the start request to the run's settle event, as nodes per
//! second beside `weir bench drain`'s jobs per second for the same count of
//! plain jobs at the same pool size, measured in the same run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::RecvError;
use weir_actors::events::EngineEvent;
use weir_actors::store::Durability;
use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::retry::RetryPolicy;

use super::drain::{drain, tempfile_dir};
use super::report::{result_line, BenchError};
use crate::Engine;

pub(super) fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

pub(super) fn name(s: &str) -> Result<Name, BenchError> {
    Name::new(s).map_err(failed)
}

pub(super) fn noop_node(n: &str, ups: &[String]) -> Result<NodeDef, BenchError> {
    let ups = ups.iter().map(|u| name(u)).collect::<Result<Vec<_>, _>>()?;
    let mut node = NodeDef::new(
        name(n)?,
        ups,
        TaskSpec {
            task: name("noop")?,
            config: serde_json::Value::Null,
        },
    );
    node.retry = RetryPolicy::once();
    Ok(node)
}

async fn engine(dir: &std::path::Path, capacity: u32) -> Result<Engine, BenchError> {
    Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", capacity)
        .task_fn("noop", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .map_err(failed)
}

/// What the collector saw, stamped on receipt.
#[derive(Default)]
pub(super) struct Stamps {
    started: HashMap<Arc<str>, Instant>,
    pub(super) settled: Option<(Instant, String)>,
    lagged: u64,
}

/// Drains `rx` until the run of `graph` settles (or the channel closes),
/// stamping first attempts' starts and the settle.
pub(super) fn collect(
    mut rx: weir_actors::event_channel::EventReceiver,
    graph: String,
) -> tokio::task::JoinHandle<Stamps> {
    tokio::spawn(async move {
        let mut s = Stamps::default();
        loop {
            match rx.recv().await {
                Ok(e) => {
                    let now = Instant::now();
                    match e {
                        EngineEvent::Started {
                            key, attempt: 1, ..
                        } => {
                            s.started.insert(key, now);
                        }
                        EngineEvent::RunSettled {
                            graph: g, state, ..
                        } if g == graph => {
                            s.settled = Some((now, state));
                            return s;
                        }
                        _ => {}
                    }
                }
                Err(RecvError::Lagged(n)) => s.lagged += n,
                Err(RecvError::Closed) => return s,
            }
        }
    })
}

fn percentile_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Latencies of `commits` raw durable commits (sled insert and flush, the
/// log write ending in an fdatasync: `sync_to_device`, as the store's fsync
/// mode does) of one 60-byte value, after `warmup` unmeasured ones; sorted.
pub fn fsync_latencies(
    dir: &std::path::Path,
    warmup: usize,
    commits: usize,
) -> Result<Vec<Duration>, BenchError> {
    let db = sled::Config::new()
        .path(dir)
        .sync_to_device(true)
        .open()
        .map_err(failed)?;
    let tree = db.open_tree("journal").map_err(failed)?;
    let value = [7u8; 60];
    let mut out = Vec::with_capacity(commits);
    for i in 0..warmup + commits {
        let started = Instant::now();
        tree.insert((i as u64).to_be_bytes(), &value[..])
            .map_err(failed)?;
        db.flush().map_err(failed)?;
        if i >= warmup {
            out.push(started.elapsed());
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The figures of one chain run.
pub struct Chain {
    /// Edge latencies, sorted.
    pub edges: Vec<Duration>,
    /// Start request to settle.
    pub total: Duration,
    /// Durable batches the queue wrote from the start request to settle.
    pub batches: u64,
}

/// Runs a chain of `nodes` no-op nodes in an engine in `dir`.
pub async fn chain(dir: &std::path::Path, nodes: usize) -> Result<Chain, BenchError> {
    let engine = engine(dir, 8).await?;
    let names: Vec<String> = (0..nodes).map(|i| format!("n{i:04}")).collect();
    let defs = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let ups = if i == 0 {
                Vec::new()
            } else {
                vec![names[i - 1].clone()]
            };
            noop_node(n, &ups)
        })
        .collect::<Result<Vec<_>, _>>()?;
    engine
        .adopt(GraphDef::new(name("chain")?, defs))
        .await
        .map_err(failed)?;
    let collector = collect(engine.subscribe(), "chain".into());
    let batches_before = engine.counts().borrow().batches;
    let started = Instant::now();
    engine
        .start_run("chain", Partition::NONE)
        .await
        .map_err(failed)?;
    let stamps = tokio::time::timeout(Duration::from_secs(600), collector)
        .await
        .map_err(|_| BenchError::Failed("the chain did not settle in 600 s".into()))?
        .map_err(failed)?;
    let (settled_at, state) = stamps
        .settled
        .clone()
        .ok_or_else(|| BenchError::Failed("the event stream closed before the settle".into()))?;
    if state != "complete" {
        return Err(BenchError::Failed(format!("the chain settled {state}")));
    }
    if stamps.lagged > 0 {
        return Err(BenchError::Failed(format!(
            "the collector missed {} events",
            stamps.lagged
        )));
    }
    let batches = engine.counts().borrow().batches - batches_before;
    let key = |n: &str| -> Arc<str> { Arc::from(format!("chain/none/{n}/0")) };
    let mut edges = Vec::with_capacity(nodes);
    for w in names.windows(2) {
        let up = stamps.started.get(&key(&w[0]));
        let down = stamps.started.get(&key(&w[1]));
        match (up, down) {
            (Some(u), Some(d)) => edges.push(d.saturating_duration_since(*u)),
            _ => {
                return Err(BenchError::Failed(format!(
                    "edge {} -> {}: an event is missing",
                    w[0], w[1]
                )))
            }
        }
    }
    edges.sort_unstable();
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    Ok(Chain {
        edges,
        total: settled_at.duration_since(started),
        batches,
    })
}

/// Start request to settle of a 1 → `width` → 1 run, in an engine in `dir`
/// with a pool of `capacity`.
pub async fn fanout(
    dir: &std::path::Path,
    width: usize,
    capacity: u32,
) -> Result<Duration, BenchError> {
    let engine = engine(dir, capacity).await?;
    let mids: Vec<String> = (0..width).map(|i| format!("m{i:05}")).collect();
    let mut defs = Vec::with_capacity(width + 2);
    defs.push(noop_node("root", &[])?);
    for m in &mids {
        defs.push(noop_node(m, &["root".to_string()])?);
    }
    defs.push(noop_node("sink", &mids)?);
    engine
        .adopt(GraphDef::new(name("fanout")?, defs))
        .await
        .map_err(failed)?;
    let collector = collect(engine.subscribe(), "fanout".into());
    let started = Instant::now();
    engine
        .start_run("fanout", Partition::NONE)
        .await
        .map_err(failed)?;
    let stamps = tokio::time::timeout(Duration::from_secs(600), collector)
        .await
        .map_err(|_| BenchError::Failed("the fan-out did not settle in 600 s".into()))?
        .map_err(failed)?;
    let (settled_at, state) = stamps
        .settled
        .ok_or_else(|| BenchError::Failed("the event stream closed before the settle".into()))?;
    if state != "complete" {
        return Err(BenchError::Failed(format!("the fan-out settled {state}")));
    }
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    Ok(settled_at.duration_since(started))
}

/// Runs `weir bench chain`.
pub fn run_chain(quick: bool) -> Result<(), BenchError> {
    let nodes = if quick { 100 } else { 400 };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let c = chain(&dir.join("chain"), nodes).await?;
        let p50 = percentile_us(&c.edges, 0.50);
        let p99 = percentile_us(&c.edges, 0.99);
        let max = percentile_us(&c.edges, 1.0);
        // The floor: one durable commit of one small value, the median of
        // 500 after 100 to warm the file up.
        let floor = fsync_latencies(&dir.join("raw"), 100, 500)?;
        let floor_us = percentile_us(&floor, 0.50);
        let floor_p99_us = percentile_us(&floor, 0.99);
        // The machine's own parts of that floor and of the hops around
        // it: a small append into allocated blocks and its fdatasync, and
        // a round trip between two threads.
        let mut appends = super::floor::append_latencies(&dir.join("file"), 50, 300)?;
        let file_fsync_us = super::floor::median_ms(&mut appends)
            .ok_or_else(|| BenchError::Failed("no append sample".into()))?
            * 1e3;
        let thread_rtt_us = super::floor::thread_rtt_ms(50, 500)? * 1e3;
        println!(
            "chain: {nodes} no-op nodes, fsync: settled in {:.1} ms ({:.0} nodes/s)",
            c.total.as_secs_f64() * 1e3,
            nodes as f64 / c.total.as_secs_f64()
        );
        let per_node_ms = c.total.as_secs_f64() * 1e3 / nodes as f64;
        let batches_per_node = c.batches as f64 / nodes as f64;
        println!(
            "per node: {per_node_ms:.3} ms (goal <= 0.35); {batches_per_node:.2} durable batches per node"
        );
        println!(
            "edge latency (upstream's ticket handed to a worker -> downstream's, {} edges: attempt, report, one durable flush): p50 {p50:.0} us, p99 {p99:.0} us (goal <= 1,000), max {max:.0} us",
            c.edges.len()
        );
        println!(
            "floor: one sled insert+flush+fsync of a 60-byte value: p50 {floor_us:.0} us, p99 {floor_p99_us:.0} us; each edge needs one durable flush (the upstream's completion with the downstream's enqueue and select), so edge p50 >= {floor_us:.0} us; edge p50 / floor = {:.2}",
            p50 / floor_us
        );
        let beyond_fsync_us = per_node_ms * 1e3 - file_fsync_us;
        println!(
            "the machine, same run: a small append into allocated blocks and its fdatasync p50 {file_fsync_us:.0} us; a round trip between two threads p50 {thread_rtt_us:.0} us; per node beyond that fdatasync: {beyond_fsync_us:.0} us, {:.1} such round trips",
            beyond_fsync_us / thread_rtt_us
        );
        println!(
            "{}",
            result_line(
                "chain",
                &[
                    ("nodes", nodes.to_string()),
                    ("per_node_ms", format!("{per_node_ms:.3}")),
                    ("batches_per_node", format!("{batches_per_node:.2}")),
                    ("edge_p50_us", format!("{p50:.0}")),
                    ("edge_p99_us", format!("{p99:.0}")),
                    ("fsync_floor_us", format!("{floor_us:.0}")),
                    ("file_fsync_us", format!("{file_fsync_us:.0}")),
                    ("thread_rtt_us", format!("{thread_rtt_us:.0}")),
                    ("settle_ms", format!("{:.1}", c.total.as_secs_f64() * 1e3)),
                ]
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}

/// Runs `weir bench fanout`.
pub fn run_fanout(quick: bool) -> Result<(), BenchError> {
    let width = if quick { 1_000 } else { 10_000 };
    let capacity = 64;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(async {
        let dir = tempfile_dir()?;
        let settle = fanout(&dir.join("fanout"), width, capacity).await?;
        let nodes = width + 2;
        let nodes_per_s = nodes as f64 / settle.as_secs_f64();
        let d = drain(&dir.join("drain"), nodes, capacity, Durability::Fsync).await?;
        let ratio = nodes_per_s / d.jobs_per_s;
        println!(
            "fanout: 1 -> {width} -> 1 no-op nodes, pool {capacity}, fsync: settled in {:.1} ms = {nodes_per_s:.0} nodes/s",
            settle.as_secs_f64() * 1e3
        );
        println!(
            "drain: {nodes} no-op jobs, pool {capacity}, fsync: {:.0} jobs/s ({} durable batches); fanout/drain = {ratio:.2} (goal >= 0.70)",
            d.jobs_per_s, d.batches
        );
        println!(
            "{}",
            result_line(
                "fanout",
                &[
                    ("nodes", nodes.to_string()),
                    ("settle_ms", format!("{:.1}", settle.as_secs_f64() * 1e3)),
                    ("nodes_per_s", format!("{nodes_per_s:.0}")),
                    ("drain_jobs_per_s", format!("{:.0}", d.jobs_per_s)),
                    ("ratio_to_drain", format!("{ratio:.3}")),
                ]
            )
        );
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    })
}
