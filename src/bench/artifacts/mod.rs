//! `weir bench artifacts [--quick]`: files passed from node to node through
//! the artifact store, on a local folder and on an S3-compatible server
//! (s3s-fs on 127.0.0.1, started here), each beside raw puts and gets of
//! the same bytes through the same [`Objects`] in the same run. The engine
//! runs in this process, built as `weir run` builds its own (fsync, the
//! command task with its logs and the store); the nodes are real `sh`
//! commands.
//!
//! - Throughput: a 1 → 20 → 1 graph, pool of 4: `make` writes a 10 MiB
//!   file, each middle node copies it from `$WEIR_ARTIFACTS_IN` into its
//!   own artifact (plus its index), `join` fetches the 20 parts: 21 puts
//!   and 40 gets, 610 MiB moved. The same graph without artifacts (the
//!   commands write and read the same files in a shared WEIR_DATA folder)
//!   is the baseline: the run's time (start request to settle) minus the
//!   baseline's is the time of artifact handling (fetch and check, hash,
//!   upload, the attempt's folders). Raw: the same 21 puts (`put_bytes`
//!   from memory) and 40 gets (`get_stream`, drained) in the graph's order
//!   and 4 at a time, as the pool and the join's fetch
//!   ([`crate::artifacts::TRANSFERS_IN_FLIGHT`]) run them. `local_ratio` and `s3_ratio` are
//!   the artifact bytes per second of handling over the raw bytes per
//!   second (goal ≥ 0.8); medians of rounds that rotate the three.
//!   A line beside them times each step of one transfer at a time
//!   (`put_file`, `hash_file`, `get_file` beside raw put and get), to show
//!   where the handling goes.
//! - Small: a chain of 25 nodes that each fetch their upstream's 1 KiB
//!   artifact and store their own, run 2 times (5 without `--quick`), each
//!   beside a run of the same chain without artifacts and as many raw
//!   get + put of 1 KiB in a node's order (the object put the step before,
//!   then a new one), in rotating order; samples pooled. The attempt's
//!   time (ticket handed to a worker → completion durable, from the
//!   engine's events) p50, minus the baseline's p50, minus the raw p50:
//!   `small_overhead_p50_ms`, the larger of the two stores (goal ≤ 2 ms).
//!   On s3s-fs most small GETs, raw or not, wait ~40 ms for a delayed ACK
//!   (its sockets have no TCP_NODELAY; see [`STALL_MS`]): that half
//!   compares the samples that did not wait with each other when there
//!   are enough, else those that did, and prints both.
//! - RSS: this process's peak RSS over a run of the fan-out (VmHWM, reset
//!   at the run's start, minus the RSS then) passing 1 MiB files and
//!   passing 10 MiB (50 MiB without `--quick`): the growth over the growth
//!   in MiB moved, `rss_bytes_per_mib_moved`, the larger of the two
//!   stores. A streamed path's buffers are bounded by its blocks in
//!   flight, not by the file: an upload holds a file up to
//!   [`SINGLE_PUT_BYTES_MAX`] whole (one request), past that
//!   [`BLOCK_BYTES`] parts, [`PARTS_IN_FLIGHT`] at once; a download
//!   [`READ_BLOCK_BYTES`] blocks. So RSS grows with the file up to that
//!   bound (times the pool's 4 attempts) and stays flat past it.
//!
//! [`SINGLE_PUT_BYTES_MAX`]: crate::objects::SINGLE_PUT_BYTES_MAX
//! [`BLOCK_BYTES`]: crate::objects::BLOCK_BYTES
//! [`PARTS_IN_FLIGHT`]: crate::objects::PARTS_IN_FLIGHT
//! [`READ_BLOCK_BYTES`]: crate::objects::READ_BLOCK_BYTES

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::RecvError;
use weir_actors::events::EngineEvent;
use weir_actors::store::Durability;
use weir_core::partition::Partition;

use super::drain::{peak_rss_bytes, rss_bytes, tempfile_dir};
use super::procs::Root;
use super::report::{result_line, BenchError};
use crate::artifacts::{ArtifactStore, GRACE_MS_DEFAULT};
use crate::objects::Objects;
use crate::task::command::{CommandTask, COMMAND_TASK};
use crate::Engine;

mod common;
mod raw;
mod s3;

use common::*;

use raw::{delete_all, raw_fan, raw_small, steps, Raw};
use s3::{s3s_fs_binary, start_s3};

// ---- definitions ----------------------------------------------------------

/// The 1 → WIDTH → 1 graph `name` passing `bytes`-byte files: through
/// artifacts, or (the baseline) through a folder of WEIR_DATA.
fn fan_toml(name: &str, bytes: u64, artifacts: bool) -> String {
    let mut t = format!("name = \"{name}\"\npartitioning = \"daily\"\n");
    let dir = "\\\"$WEIR_DATA/$WEIR_GRAPH-$WEIR_PARTITION\\\"";
    let (make, arts) = if artifacts {
        (
            format!("head -c {bytes} /dev/urandom > \\\"$WEIR_ARTIFACTS_OUT/data.bin\\\""),
            "artifacts = [\"data.bin\"]\n",
        )
    } else {
        (
            format!("mkdir -p {dir} && head -c {bytes} /dev/urandom > {dir}/data.bin"),
            "",
        )
    };
    t.push_str(&format!(
        "\n[[nodes]]\nname = \"make\"\ncommand = [\"sh\", \"-c\", \"{make}\"]\n{arts}"
    ));
    let mut ups = Vec::with_capacity(WIDTH);
    for i in 0..WIDTH {
        let (copy, arts) = if artifacts {
            (
                format!("cat \\\"$WEIR_ARTIFACTS_IN/make/data.bin\\\" > \\\"$WEIR_ARTIFACTS_OUT/part.bin\\\" && echo {i} >> \\\"$WEIR_ARTIFACTS_OUT/part.bin\\\""),
                "artifacts = [\"part.bin\"]\n",
            )
        } else {
            (
                format!("cat {dir}/data.bin > {dir}/part{i}.bin && echo {i} >> {dir}/part{i}.bin"),
                "",
            )
        };
        t.push_str(&format!(
            "\n[[nodes]]\nname = \"m{i:02}\"\nupstreams = [\"make\"]\ncommand = [\"sh\", \"-c\", \"{copy}\"]\n{arts}"
        ));
        ups.push(format!("\"m{i:02}\""));
    }
    let list = if artifacts {
        "wc -c \\\"$WEIR_ARTIFACTS_IN\\\"/*/part.bin > \\\"$WEIR_OUTPUT\\\"".to_string()
    } else {
        format!("wc -c {dir}/part*.bin > \\\"$WEIR_OUTPUT\\\"")
    };
    t.push_str(&format!(
        "\n[[nodes]]\nname = \"join\"\nupstreams = [{}]\ncommand = [\"sh\", \"-c\", \"{list}\"]\n",
        ups.join(", ")
    ));
    t
}

/// A chain of `nodes` nodes each passing a SMALL_BYTES file to the next:
/// through artifacts, or (the baseline) through a folder of WEIR_DATA.
fn chain_toml(name: &str, nodes: usize, artifacts: bool) -> String {
    let mut t = format!("name = \"{name}\"\npartitioning = \"daily\"\n");
    let dir = "\\\"$WEIR_DATA/$WEIR_GRAPH-$WEIR_PARTITION\\\"";
    // The first KiB less the index's 24 digits of the upstream's file, then
    // the index: each node's content is its own (no deduplication).
    let keep = SMALL_BYTES - 24;
    for i in 0..nodes {
        let (cmd, arts, ups) = match (i, artifacts) {
            (0, true) => (
                format!("head -c {SMALL_BYTES} /dev/urandom > \\\"$WEIR_ARTIFACTS_OUT/s.bin\\\""),
                "artifacts = [\"s.bin\"]\n",
                String::new(),
            ),
            (0, false) => (
                format!("mkdir -p {dir} && head -c {SMALL_BYTES} /dev/urandom > {dir}/c000.bin"),
                "",
                String::new(),
            ),
            (_, true) => (
                format!(
                    "head -c {keep} \\\"$WEIR_ARTIFACTS_IN/c{:03}/s.bin\\\" > \\\"$WEIR_ARTIFACTS_OUT/s.bin\\\" && printf %024d {i} >> \\\"$WEIR_ARTIFACTS_OUT/s.bin\\\"",
                    i - 1
                ),
                "artifacts = [\"s.bin\"]\n",
                format!("upstreams = [\"c{:03}\"]\n", i - 1),
            ),
            (_, false) => (
                format!(
                    "head -c {keep} {dir}/c{:03}.bin > {dir}/c{i:03}.bin && printf %024d {i} >> {dir}/c{i:03}.bin",
                    i - 1
                ),
                "",
                format!("upstreams = [\"c{:03}\"]\n", i - 1),
            ),
        };
        t.push_str(&format!(
            "\n[[nodes]]\nname = \"c{i:03}\"\n{ups}command = [\"sh\", \"-c\", \"{cmd}\"]\n{arts}"
        ));
    }
    t
}

/// The graphs' names.
fn fan_name(bytes: u64, artifacts: bool) -> String {
    format!("f{}{}m", if artifacts { "a" } else { "b" }, bytes >> 20)
}
const CHAIN_A: &str = "ca";
const CHAIN_B: &str = "cb";

/// Bytes a run of the fan-out moves through the store: make's put, the
/// middles' gets of it and puts of their parts, the join's gets of them.
fn fan_moved(bytes: u64) -> u64 {
    let parts: u64 = (0..WIDTH)
        .map(|i| bytes + i.to_string().len() as u64 + 1)
        .sum();
    bytes + WIDTH as u64 * bytes + 2 * parts
}

// ---- the engine and its runs ----------------------------------------------

/// The engine `weir run` opens on `data`, for these graphs and this store.
async fn open_engine(
    data: &Path,
    defs: &crate::definition::Definitions,
    objects: Objects,
) -> Result<Engine, BenchError> {
    let artifacts = Arc::new(ArtifactStore::Store {
        objects,
        grace_ms: GRACE_MS_DEFAULT,
    });
    let engine = Engine::builder(data)
        .durability(Durability::Fsync)
        .pool("default", IN_FLIGHT as u32)
        .task(
            COMMAND_TASK,
            Arc::new(CommandTask {
                scratch: data.join("scratch"),
                work: data.join("work"),
                logs: Some(crate::logs::LogPaths::new(data)),
                log_limits: Default::default(),
                remote: None,
                artifacts,
            }),
        )
        .open()
        .await
        .map_err(failed("open the engine"))?;
    for l in &defs.graphs {
        engine
            .adopt(l.graph.def().clone())
            .await
            .map_err(failed("adopt"))?;
    }
    Ok(engine)
}

/// What a run's events showed, stamped on receipt.
#[derive(Default)]
struct Seen {
    started: HashMap<Arc<str>, Instant>,
    completed: HashMap<Arc<str>, Instant>,
    retried: Vec<String>,
    settled: Option<(Instant, String)>,
    lagged: u64,
}

/// Drains `rx` until the run of `graph` for `partition` settles.
fn collect(
    mut rx: weir_actors::event_channel::EventReceiver,
    graph: String,
    partition: String,
) -> tokio::task::JoinHandle<Seen> {
    tokio::spawn(async move {
        let mut s = Seen::default();
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
                        EngineEvent::Completed { key, .. } => {
                            s.completed.insert(key, now);
                        }
                        EngineEvent::Retrying { key, error, .. } => {
                            s.retried.push(format!("{key}: {error}"));
                        }
                        EngineEvent::RunSettled {
                            graph: g,
                            partition: p,
                            state,
                            ..
                        } if g == graph && p == partition => {
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

/// Resets this process's peak RSS (VmHWM) to its RSS now.
fn reset_peak_rss() {
    // Linux ≥ 4.0: "5" resets the peak; without it the peak is the
    // process's, and the growth figures are upper bounds.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// A settled run's figures.
struct Ran {
    /// Start request to settle.
    total: Duration,
    /// Each node's attempt: handed to a worker → completion durable.
    per_node: HashMap<String, Duration>,
    /// Peak RSS over the run minus RSS at its start.
    rss_growth: i64,
}

/// The day `n` days after 2026-01-01: a fresh partition for each run.
fn day(n: u64) -> Result<Partition, BenchError> {
    let d = chrono::NaiveDate::from_ymd_opt(2026, 1, 1)
        .and_then(|d| d.checked_add_days(chrono::Days::new(n)))
        .ok_or_else(|| BenchError::Failed(format!("no day {n} after 2026-01-01")))?;
    d.format("%Y-%m-%d")
        .to_string()
        .parse()
        .map_err(failed("partition"))
}

/// One engine's runs on one store, each on a new partition.
struct Runner<'a> {
    engine: &'a Engine,
    objects: &'a Objects,
    data: &'a Path,
    runs: u64,
}

impl Runner<'_> {
    /// Runs `graph` on a new partition to its settle; then deletes what
    /// the run left (the store's objects, the baseline's folder) and
    /// writes every dirty page back, outside the timing.
    async fn run(&mut self, graph: &str) -> Result<Ran, BenchError> {
        let p = day(self.runs)?;
        self.runs += 1;
        let partition = p.to_string();
        let collector = collect(
            self.engine.subscribe(),
            graph.to_string(),
            partition.clone(),
        );
        reset_peak_rss();
        let rss_start = rss_bytes();
        let started = Instant::now();
        self.engine
            .start_run(graph, p.clone())
            .await
            .map_err(failed("start a run"))?;
        let seen = tokio::time::timeout(Duration::from_secs(SETTLE_WAIT_S), collector)
            .await
            .map_err(|_| {
                BenchError::Failed(format!(
                    "the run of {graph} did not settle in {SETTLE_WAIT_S} s"
                ))
            })?
            .map_err(failed("the event collector"))?;
        let rss_growth = peak_rss_bytes() as i64 - rss_start as i64;
        let (settled_at, state) = seen.settled.clone().ok_or_else(|| {
            BenchError::Failed(format!("the events of {graph} stopped before its settle"))
        })?;
        if state != "complete" {
            return Err(BenchError::Failed(format!(
                "the run of {graph} {partition} settled {state}; retried: {:?}",
                seen.retried
            )));
        }
        if !seen.retried.is_empty() {
            return Err(BenchError::Failed(format!(
                "the run of {graph} {partition} retried attempts (its time is not one attempt per node): {:?}",
                seen.retried
            )));
        }
        if seen.lagged > 0 {
            return Err(BenchError::Failed(format!(
                "the collector missed {} events",
                seen.lagged
            )));
        }
        let prefix = format!("{graph}/{partition}/");
        let mut per_node = HashMap::new();
        for (key, at) in &seen.started {
            let Some(node) = key.strip_prefix(&prefix).and_then(|k| k.split('/').next()) else {
                continue;
            };
            let done = seen.completed.get(key).ok_or_else(|| {
                BenchError::Failed(format!("{key} started but its completion was not seen"))
            })?;
            per_node.insert(node.to_string(), done.saturating_duration_since(*at));
        }
        let _ = std::fs::remove_dir_all(self.data.join("work").join(format!("{graph}-{p}")));
        delete_all(self.objects, "artifacts").await?;
        sync_disks();
        Ok(Ran {
            total: settled_at.duration_since(started),
            per_node,
            rss_growth,
        })
    }
}

// ---- one store --------------------------------------------------------------

/// The sizes of a run of the scenario.
struct Plan {
    rounds: usize,
    chain: usize,
    chain_reps: usize,
    rss_big_bytes: u64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A store the scenario runs on.
struct Store {
    /// How it is named in what is printed.
    label: &'static str,
    objects: Objects,
    /// Whether small GETs may wait for the client's delayed ACK (s3s-fs:
    /// see [`STALL_MS`]).
    stalls: bool,
}

/// One store's figures.
struct Figures {
    graph_ms: f64,
    base_ms: f64,
    handling_ms: f64,
    raw_ms: f64,
    art_mb_per_s: f64,
    raw_mb_per_s: f64,
    ratio: f64,
    raw_mem_ms: f64,
    raw_mem_mb_per_s: f64,
    mem_ratio: f64,
    small_a_p50_ms: f64,
    small_b_p50_ms: f64,
    small_raw_p50_ms: f64,
    small_overhead_p50_ms: f64,
    rss_small: i64,
    rss_file: i64,
    rss_big: i64,
    rss_bytes_per_mib_moved: f64,
}

/// The scenario on one store: `label` names it in what is printed.
async fn measure(
    store: &Store,
    data: &Path,
    defs: &crate::definition::Definitions,
    plan: &Plan,
) -> Result<Figures, BenchError> {
    let (label, objects) = (store.label, store.objects.clone());
    let engine = open_engine(data, defs, objects.clone()).await?;
    let mut runner = Runner {
        engine: &engine,
        objects: &objects,
        data,
        runs: 0,
    };
    // RSS first, small files: the least of the process's history.
    let rss_small = runner
        .run(&fan_name(RSS_SMALL_BYTES, true))
        .await?
        .rss_growth;

    let (mut graph, mut base, mut raw, mut raw_mem) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut rss_file = i64::MIN;
    let mut raw_moved = 0;
    for round in 0..plan.rounds {
        // The order rotates: the disk and the machine drift.
        for step in 0..4 {
            match (round + step) % 4 {
                0 => {
                    let r = runner.run(&fan_name(FILE_BYTES, true)).await?;
                    rss_file = rss_file.max(r.rss_growth);
                    graph.push(r.total);
                }
                1 => base.push(runner.run(&fan_name(FILE_BYTES, false)).await?.total),
                2 => {
                    let files = Raw::Files(&data.join("raw"));
                    let (took, moved) =
                        raw_fan(&objects, &format!("r{round}"), FILE_BYTES, files).await?;
                    raw.push(took);
                    raw_moved = moved;
                }
                _ => {
                    let (took, _) =
                        raw_fan(&objects, &format!("m{round}"), FILE_BYTES, Raw::Memory).await?;
                    raw_mem.push(took);
                }
            }
        }
    }
    let (graph, base, raw, raw_mem) = (median(graph), median(base), median(raw), median(raw_mem));
    let handling = graph.saturating_sub(base);
    let moved = fan_moved(FILE_BYTES);
    let art_mb_per_s = moved as f64 / 1e6 / handling.as_secs_f64();
    let raw_mb_per_s = raw_moved as f64 / 1e6 / raw.as_secs_f64();
    let ratio = art_mb_per_s / raw_mb_per_s;
    let raw_mem_mb_per_s = raw_moved as f64 / 1e6 / raw_mem.as_secs_f64();
    let mem_ratio = art_mb_per_s / raw_mem_mb_per_s;
    println!(
        "{label}: 1 -> {WIDTH} -> 1, {} MiB files, pool {IN_FLIGHT}, fsync, median of {}: run {:.0} ms, the same graph without artifacts {:.0} ms: artifact handling {:.0} ms for {:.0} MiB moved ({} puts, {} gets) = {art_mb_per_s:.0} MB/s",
        FILE_BYTES >> 20,
        plan.rounds,
        ms(graph),
        ms(base),
        ms(handling),
        moved as f64 / MIB,
        1 + WIDTH,
        2 * WIDTH,
    );
    println!(
        "{label}: raw copies file -> store -> file (put_file, a get written to a file, no hash) of the same bytes through the same store, same order, {IN_FLIGHT} in flight: {:.0} ms = {raw_mb_per_s:.0} MB/s; artifacts/raw = {ratio:.2} (goal >= {GOAL_RATIO})",
        ms(raw)
    );
    println!(
        "{label}: raw from memory to nowhere (put_bytes, a get drained), the store's own speed: {:.0} ms = {raw_mem_mb_per_s:.0} MB/s; artifacts/that = {mem_ratio:.2}",
        ms(raw_mem)
    );

    // Where the handling goes: one transfer at a time, each step beside
    // its raw peer.
    let [raw_put, put_file, hash, raw_get, get_file] =
        steps(&objects, &data.join("steps"), FILE_BYTES, STEP_REPS).await?;
    println!(
        "{label}: one {} MiB file at a time, median of {STEP_REPS}: raw put {:.1} ms, put_file {:.1} ms; hash_file {:.1} ms; raw get {:.1} ms, get_file (hash-checked, into a file) {:.1} ms",
        FILE_BYTES >> 20,
        ms(raw_put),
        ms(put_file),
        ms(hash),
        ms(raw_get),
        ms(get_file),
    );

    // Small artifacts: repetitions of the chain, its baseline and the
    // raw transfers, in rotating order, so that each sees the disk and
    // the machine as the others do; the samples of each are pooled.
    let node_times = |r: &Ran| -> Result<Vec<Duration>, BenchError> {
        // The first node fetches nothing: every other one gets one
        // artifact and puts one.
        let v: Vec<Duration> = r
            .per_node
            .iter()
            .filter(|(n, _)| n.as_str() != "c000")
            .map(|(_, d)| *d)
            .collect();
        if v.len() + 1 != plan.chain {
            return Err(BenchError::Failed(format!(
                "a chain of {}: {} attempts seen past the first",
                plan.chain,
                v.len()
            )));
        }
        Ok(v)
    };
    let (mut a, mut b, mut small_raw) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..plan.chain_reps {
        for step in 0..3 {
            match (rep + step) % 3 {
                0 => a.extend(node_times(&runner.run(CHAIN_A).await?)?),
                1 => b.extend(node_times(&runner.run(CHAIN_B).await?)?),
                _ => small_raw.extend(raw_small(&objects, plan.chain - 1).await?),
            }
        }
    }
    let samples = a.len();
    // The server's delayed-ACK waits are its own, in raw and artifact GETs
    // alike but in shares (and lengths) that vary from run to run: samples
    // are compared with their like, those without the wait when both kinds
    // hold enough of them, else those with it.
    let (a, small_raw, left_out) = if store.stalls {
        let split = |v: Vec<Duration>| -> (Vec<Duration>, Vec<Duration>) {
            v.into_iter().partition(|d| d.as_millis() >= STALL_MS)
        };
        let ((a_w, a_f), (r_w, r_f)) = (split(a), split(small_raw));
        let p50 = |v: &[Duration]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2}", ms(median(v.to_vec())))
            }
        };
        let note = format!(
            "; a GET waited >= {STALL_MS} ms for s3s-fs's delayed ACK in {} of {samples} attempts (p50 {} ms; the others {} ms) and {} of {} raw (p50 {} ms; the others {} ms)",
            a_w.len(),
            p50(&a_w),
            p50(&a_f),
            r_w.len(),
            r_w.len() + r_f.len(),
            p50(&r_w),
            p50(&r_f),
        );
        if a_f.len().min(r_f.len()) >= STALL_FREE_MIN {
            (a_f, r_f, format!("{note}: those without the wait compared"))
        } else {
            (a_w, r_w, format!("{note}: those with the wait compared"))
        }
    } else {
        (a, small_raw, String::new())
    };
    let (a50, b50, raw50) = (ms(median(a)), ms(median(b)), ms(median(small_raw)));
    let overhead = a50 - b50 - raw50;
    println!(
        "{label}: {SMALL_BYTES}-byte artifacts, a chain of {} ({} runs, {samples} attempts that fetch one and store one{left_out}): attempt (handed to a worker -> completion durable) p50 {a50:.2} ms, the same chain without artifacts {b50:.2} ms; raw get + put of {SMALL_BYTES} bytes p50 {raw50:.2} ms: overhead {overhead:.2} ms p50 (goal <= {GOAL_SMALL_OVERHEAD_MS})",
        plan.chain, plan.chain_reps
    );

    let (big_bytes, rss_big) = if plan.rss_big_bytes == FILE_BYTES {
        (FILE_BYTES, rss_file)
    } else {
        let name = fan_name(plan.rss_big_bytes, true);
        (plan.rss_big_bytes, runner.run(&name).await?.rss_growth)
    };
    let moved_mib = (fan_moved(big_bytes) - fan_moved(RSS_SMALL_BYTES)) as f64 / MIB;
    let per_mib = (rss_big - rss_small) as f64 / moved_mib;
    let files = if big_bytes == FILE_BYTES {
        String::new()
    } else {
        format!(
            ", {} MiB {:.1} MiB",
            FILE_BYTES >> 20,
            rss_file as f64 / MIB
        )
    };
    println!(
        "{label}: peak RSS growth over a run of the fan-out passing {} MiB files {:.1} MiB{files}, {} MiB files {:.1} MiB: {per_mib:.0} bytes per MiB moved (+{moved_mib:.0} MiB moved)",
        RSS_SMALL_BYTES >> 20,
        rss_small as f64 / MIB,
        big_bytes >> 20,
        rss_big as f64 / MIB,
    );
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed("shut the engine down"))?;
    Ok(Figures {
        graph_ms: ms(graph),
        base_ms: ms(base),
        handling_ms: ms(handling),
        raw_ms: ms(raw),
        raw_mem_ms: ms(raw_mem),
        raw_mem_mb_per_s,
        mem_ratio,
        art_mb_per_s,
        raw_mb_per_s,
        ratio,
        small_a_p50_ms: a50,
        small_b_p50_ms: b50,
        small_raw_p50_ms: raw50,
        small_overhead_p50_ms: overhead,
        rss_small,
        rss_file,
        rss_big,
        rss_bytes_per_mib_moved: per_mib,
    })
}

// ---- the scenario -------------------------------------------------------------

/// Runs `weir bench artifacts`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let plan = Plan {
        rounds: if quick { ROUNDS_QUICK } else { ROUNDS_FULL },
        chain: CHAIN_NODES,
        chain_reps: if quick {
            CHAIN_REPS_QUICK
        } else {
            CHAIN_REPS_FULL
        },
        rss_big_bytes: if quick {
            FILE_BYTES
        } else {
            RSS_BIG_BYTES_FULL
        },
    };
    // Checked before anything runs: a missing server fails at once.
    s3s_fs_binary()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed("runtime"))?;
    rt.block_on(async {
        let root = Root(tempfile_dir()?);
        let defs_dir = root.path().join("defs");
        std::fs::create_dir_all(&defs_dir).map_err(failed("definitions"))?;
        let mut files = vec![
            (fan_name(FILE_BYTES, true), fan_toml(&fan_name(FILE_BYTES, true), FILE_BYTES, true)),
            (fan_name(FILE_BYTES, false), fan_toml(&fan_name(FILE_BYTES, false), FILE_BYTES, false)),
            (fan_name(RSS_SMALL_BYTES, true), fan_toml(&fan_name(RSS_SMALL_BYTES, true), RSS_SMALL_BYTES, true)),
            (CHAIN_A.to_string(), chain_toml(CHAIN_A, plan.chain, true)),
            (CHAIN_B.to_string(), chain_toml(CHAIN_B, plan.chain, false)),
        ];
        if plan.rss_big_bytes != FILE_BYTES {
            let name = fan_name(plan.rss_big_bytes, true);
            files.push((name.clone(), fan_toml(&name, plan.rss_big_bytes, true)));
        }
        for (name, text) in &files {
            std::fs::write(defs_dir.join(format!("{name}.toml")), text)
                .map_err(failed("definitions"))?;
        }
        let defs = crate::definition::load(&defs_dir).map_err(failed("definitions"))?;

        let local_store = Objects::folder(&root.path().join("local/store")).map_err(failed("folder store"))?;
        let local = Store {
            label: "local folder",
            objects: local_store,
            stalls: false,
        };
        let local = measure(&local, &root.path().join("local/data"), &defs, &plan).await?;
        let (server, s3_store) = start_s3(&root.path().join("s3")).await?;
        let s3 = Store {
            label: "s3 (s3s-fs)",
            objects: s3_store,
            stalls: true,
        };
        let s3 = measure(&s3, &root.path().join("s3/data"), &defs, &plan).await?;
        drop(server);

        let small = local.small_overhead_p50_ms.max(s3.small_overhead_p50_ms);
        let rss = local.rss_bytes_per_mib_moved.max(s3.rss_bytes_per_mib_moved);
        let met = |ok: bool| if ok { "met" } else { "not met" };
        println!(
            "goals: local {:.2}, s3 {:.2} of raw (>= {GOAL_RATIO}: {}, {}); small overhead {small:.2} ms p50 (<= {GOAL_SMALL_OVERHEAD_MS}: {}); RSS {rss:.0} bytes per MiB moved",
            local.ratio,
            s3.ratio,
            met(local.ratio >= GOAL_RATIO),
            met(s3.ratio >= GOAL_RATIO),
            met(small <= GOAL_SMALL_OVERHEAD_MS),
        );
        let mut pairs: Vec<(String, String)> = [
            ("file_bytes", FILE_BYTES.to_string()),
            ("width", WIDTH.to_string()),
            ("moved_bytes", fan_moved(FILE_BYTES).to_string()),
            ("local_ratio", format!("{:.3}", local.ratio)),
            ("s3_ratio", format!("{:.3}", s3.ratio)),
            ("ratio_goal", GOAL_RATIO.to_string()),
            ("small_overhead_p50_ms", format!("{small:.2}")),
            ("small_overhead_goal_ms", GOAL_SMALL_OVERHEAD_MS.to_string()),
            ("rss_bytes_per_mib_moved", format!("{rss:.0}")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (p, f) in [("local", &local), ("s3", &s3)] {
            let fields = [
                ("graph_ms", format!("{:.0}", f.graph_ms)),
                ("baseline_ms", format!("{:.0}", f.base_ms)),
                ("handling_ms", format!("{:.0}", f.handling_ms)),
                ("raw_ms", format!("{:.0}", f.raw_ms)),
                ("mb_per_s", format!("{:.0}", f.art_mb_per_s)),
                ("raw_mb_per_s", format!("{:.0}", f.raw_mb_per_s)),
                ("raw_mem_ms", format!("{:.0}", f.raw_mem_ms)),
                ("raw_mem_mb_per_s", format!("{:.0}", f.raw_mem_mb_per_s)),
                ("mem_ratio", format!("{:.3}", f.mem_ratio)),
                ("small_p50_ms", format!("{:.2}", f.small_a_p50_ms)),
                ("small_baseline_p50_ms", format!("{:.2}", f.small_b_p50_ms)),
                ("small_raw_p50_ms", format!("{:.2}", f.small_raw_p50_ms)),
                ("small_overhead_p50_ms", format!("{:.2}", f.small_overhead_p50_ms)),
                ("rss_small_bytes", f.rss_small.to_string()),
                ("rss_file_bytes", f.rss_file.to_string()),
                ("rss_big_bytes", f.rss_big.to_string()),
                ("rss_bytes_per_mib_moved", format!("{:.0}", f.rss_bytes_per_mib_moved)),
            ];
            for (k, v) in fields {
                pairs.push((format!("{p}_{k}"), v));
            }
        }
        let pairs: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        println!("{}", result_line("artifacts", &pairs));
        Ok(())
    })
}
