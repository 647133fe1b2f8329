//! `weir bench store`: the store's append throughput beside raw sled, its
//! replay rate, and the time and memory to open a store of 1M pending
//! tickets.
//!
//! Append: commits of 1, 16, 256 and 4,096 Enqueue ops (100-byte payloads)
//! in each durability mode, each beside raw sled in the same run: a fresh
//! sled database (a fresh store's tree, since weir reaches sled only through
//! weir-actors) given, per commit, the same number of values of the same
//! size as weir's commit wrote, then `flush` (and an fsync of sled's `db`
//! file in the fsync mode). That is the limit: what sled costs for those
//! bytes and that flush, without encoding, batching or bookkeeping. Each
//! weir measurement runs for a fixed time; raw runs the same commit count.
//!
//! Replay: a store with a long journal and no snapshot (enqueue, select and
//! complete of each ticket, as a busy queue journals), reopened:
//! `Recovered::ops_replayed` over `Recovered::elapsed`.
//!
//! Open: a store of 1M pending tickets (100k with `--quick`) with 100-byte
//! payloads, snapshotted as `snapshot_due` says, then reopened in a child
//! process (this program re-run with `WEIR_BENCH_STORE_OPEN_DIR` set), so
//! the figure is the open's own memory, not the builder's: the time of
//! `Store::open`, the growth of VmRSS across it, and the child's VmHWM
//! (its peak RSS, the program's start included). That open finds a mark
//! holding only the journal's sequence, as after a crash; the open after
//! a clean close also checks that sled's files are the bytes the close
//! left (a digest of the files, not a scan of every entry: see
//! `docs/operations.md`), and is timed too, with the close before it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_actors::store::{Commit, Durability, Store, StoreSettings};
use weir_core::queue::{Applied, Job, Op, QueueState, Terminal, TicketId};

use super::report::{result_line, BenchError};

/// Set in the child that measures an open: the store's directory.
const OPEN_CHILD_ENV: &str = "WEIR_BENCH_STORE_OPEN_DIR";

const GROUPS: [usize; 4] = [1, 16, 256, 4_096];
const PAYLOAD_BYTES: usize = 100;

/// Goals, from the issue.
const GOAL_RATIO_MIN: f64 = 0.70;
const GOAL_REPLAY_PER_S: f64 = 1_000_000.0;
const GOAL_OPEN_MS: f64 = 2_000.0;
const GOAL_OPEN_RSS_BYTES: u64 = 1 << 30;

fn failed(what: &str) -> impl Fn(weir_actors::store::StoreError) -> BenchError + '_ {
    move |e| BenchError::Failed(format!("{what}: {e}"))
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    if let Some(dir) = std::env::var_os(OPEN_CHILD_ENV) {
        return open_child(Path::new(&dir));
    }
    let root = TempDir::new()?;
    let run_for = Duration::from_millis(if quick { 300 } else { 1_500 });

    println!(
        "append: Enqueue ops with {PAYLOAD_BYTES}-byte payloads, weir commits vs raw sled (same values, same flush), {} ms per figure",
        run_for.as_millis()
    );
    let mut ratio_min_fsync = f64::INFINITY;
    let mut n = 0;
    for durability in [Durability::Fsync, Durability::Flush, Durability::None] {
        for group in GROUPS {
            n += 1;
            let a = append(
                &root.path.join(format!("append-{n}")),
                durability,
                group,
                run_for,
            )?;
            let ratio = a.weir_ops_per_s / a.raw_ops_per_s;
            if durability == Durability::Fsync {
                ratio_min_fsync = ratio_min_fsync.min(ratio);
            }
            println!(
                "  {:<5} group {group:>4}: weir {:>10.0} ops/s ({:>8.0} commits/s), raw sled {:>10.0} ops/s, ratio {ratio:.2}{}  [{} commits, {} values of {} bytes]",
                mode_name(durability),
                a.weir_ops_per_s,
                a.weir_ops_per_s / group as f64,
                a.raw_ops_per_s,
                if durability == Durability::Fsync {
                    format!(" (goal >= {GOAL_RATIO_MIN:.2})")
                } else {
                    String::new()
                },
                a.commits,
                a.values_per_commit,
                a.value_bytes,
            );
        }
    }
    println!("  worst fsync ratio: {ratio_min_fsync:.2}; goal >= {GOAL_RATIO_MIN:.2} at every group size");

    let replay_ops = if quick { 300_000 } else { 1_500_000 };
    let replay = replay_rate(&root.path.join("replay"), replay_ops)?;
    println!(
        "replay: {} ops in {} journal entries, no snapshot: {:.0} ms, {:.0} ops/s ({:.0} entries/s); goal >= {GOAL_REPLAY_PER_S:.0} ops/s",
        replay.ops,
        replay.entries,
        replay.elapsed.as_secs_f64() * 1e3,
        replay.ops_per_s,
        replay.entries as f64 / replay.elapsed.as_secs_f64(),
    );

    let tickets = if quick { 100_000 } else { 1_000_000 };
    let open = open_pending(&root.path.join("open"), tickets)?;
    println!(
        "open: {tickets} pending tickets ({PAYLOAD_BYTES}-byte payloads; {} from the snapshot, {} ops replayed; built in {:.1} s, {} MiB on disk): {:.0} ms, RSS +{} MiB across the open, peak RSS (VmHWM) {} MiB; goal <= {GOAL_OPEN_MS:.0} ms and <= {} MiB for 1M ({})",
        open.snapshot_tickets,
        open.ops_replayed,
        open.build.as_secs_f64(),
        open.disk_bytes >> 20,
        open.ms,
        open.rss_growth_bytes >> 20,
        open.hwm_bytes >> 20,
        GOAL_OPEN_RSS_BYTES >> 20,
        open.method,
    );

    println!(
        "open after a clean close: {:.0} ms, {:.2}x the open above (sled's files checked as the close left them; goal <= {GOAL_OPEN_MS:.0} ms for 1M); the close before it {:.0} ms",
        open.checked_ms,
        open.checked_ms / open.ms,
        open.close_ms,
    );

    println!(
        "{}",
        result_line(
            "store",
            &[
                ("ratio_min", format!("{ratio_min_fsync:.3}")),
                ("replay_per_s", format!("{:.0}", replay.ops_per_s)),
                ("open_tickets", tickets.to_string()),
                ("open_1m_ms", format!("{:.0}", open.ms)),
                ("open_1m_clean_ms", format!("{:.0}", open.checked_ms)),
                ("close_1m_ms", format!("{:.0}", open.close_ms)),
                ("open_1m_rss_bytes", open.hwm_bytes.to_string()),
                (
                    "open_1m_rss_growth_bytes",
                    open.rss_growth_bytes.to_string()
                ),
            ]
        )
    );
    Ok(())
}

fn mode_name(d: Durability) -> &'static str {
    match d {
        Durability::Fsync => "fsync",
        Durability::Flush => "flush",
        Durability::None => "none",
    }
}

/// A directory removed on drop (the root package has no tempfile).
pub(super) struct TempDir {
    pub(super) path: PathBuf,
}

impl TempDir {
    fn new() -> Result<TempDir, BenchError> {
        TempDir::named("store")
    }

    /// `weir-bench-NAME-PID` in the temporary folder, empty.
    pub(super) fn named(name: &str) -> Result<TempDir, BenchError> {
        let path = std::env::temp_dir().join(format!("weir-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)
            .map_err(|e| BenchError::Failed(format!("temp dir {}: {e}", path.display())))?;
        Ok(TempDir { path })
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn bench_settings(durability: Durability) -> StoreSettings {
    StoreSettings {
        durability,
        // The benchmark appends without snapshots: no refusal for size.
        journal_bytes_max: u64::MAX,
        snapshot_ops: u64::MAX,
        snapshot_bytes: u64::MAX,
        ..StoreSettings::default()
    }
}

pub(super) fn enqueue(i: u64, pool: &Arc<str>, task: &Arc<str>) -> Op {
    Op::Enqueue(Job {
        payload: vec![(i % 251) as u8; PAYLOAD_BYTES],
        due_ms: i,
        ..Job::new(
            Arc::<str>::from(format!("job-{i:010}")),
            task.clone(),
            pool.clone(),
        )
    })
}

struct Append {
    weir_ops_per_s: f64,
    raw_ops_per_s: f64,
    commits: u64,
    values_per_commit: u64,
    value_bytes: u64,
}

fn append(
    dir: &Path,
    durability: Durability,
    group: usize,
    run_for: Duration,
) -> Result<Append, BenchError> {
    let pool: Arc<str> = "pool".into();
    let task: Arc<str> = "noop".into();
    let commit = Commit {
        ops: (0..group as u64)
            .map(|i| enqueue(i, &pool, &task))
            .collect(),
        ..Commit::default()
    };

    let (store, _) =
        Store::open(dir.join("weir"), bench_settings(durability)).map_err(failed("open"))?;
    let first = store.commit(&commit).map_err(failed("commit"))?;
    let values_per_commit = first.entries;
    let value_bytes = first.bytes / first.entries;

    // Raw sled: per commit, the same count of values of the same size, and
    // the same flush.
    let raw_dir = dir.join("raw");
    // Opened in the same mode: in `fsync`, sled's flush ends in its
    // fdatasync (`sync_to_device`), the store's durable step.
    let (raw_store, _) =
        Store::open(&raw_dir, bench_settings(durability)).map_err(failed("open raw"))?;
    let tree = raw_store
        .raw_tree("journal")
        .ok_or_else(|| BenchError::Failed("no journal tree".into()))?;
    let value = vec![0x42u8; value_bytes as usize];
    let mut seq = 0u64;
    let mut raw_commit = || -> Result<(), BenchError> {
        for _ in 0..values_per_commit {
            seq += 1;
            tree.insert(seq.to_be_bytes(), value.as_slice())
                .map_err(sled_failed)?;
        }
        if durability != Durability::None {
            tree.flush().map_err(sled_failed)?;
        }
        Ok(())
    };
    raw_commit()?;

    // Alternate blocks of weir and of raw, the same commit count each, so
    // that both see the same device (fsync latency on a shared disk drifts
    // by 2x over seconds).
    const BLOCKS: u32 = 6;
    let mut commits = 0u64;
    let mut weir_time = Duration::ZERO;
    let mut raw_time = Duration::ZERO;
    for _ in 0..BLOCKS {
        let started = Instant::now();
        let mut n = 0u64;
        while started.elapsed() < run_for / BLOCKS || n < 3 {
            store.commit(&commit).map_err(failed("commit"))?;
            n += 1;
        }
        weir_time += started.elapsed();
        let started = Instant::now();
        for _ in 0..n {
            raw_commit()?;
        }
        raw_time += started.elapsed();
        commits += n;
    }
    drop(store);
    drop(raw_store);
    let _ = std::fs::remove_dir_all(dir);
    let ops = (commits * group as u64) as f64;
    Ok(Append {
        weir_ops_per_s: ops / weir_time.as_secs_f64(),
        raw_ops_per_s: ops / raw_time.as_secs_f64(),
        commits,
        values_per_commit,
        value_bytes,
    })
}

/// A raw sled failure (sled's error type is reached only through
/// weir-actors, so it is not named here).
fn sled_failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(format!("raw sled: {e}"))
}

struct Replay {
    ops: u64,
    entries: u64,
    elapsed: Duration,
    ops_per_s: f64,
}

/// Builds a journal of `ops` ops (a third each enqueue, select, complete)
/// without a snapshot, then times its replay.
fn replay_rate(dir: &Path, ops: u64) -> Result<Replay, BenchError> {
    let pool: Arc<str> = "pool".into();
    let task: Arc<str> = "noop".into();
    let worker: Arc<str> = "bench".into();
    {
        let (store, _) =
            Store::open(dir, bench_settings(Durability::None)).map_err(failed("open"))?;
        let mut state = QueueState::new();
        let group = 1_024u64;
        let mut i = 0u64;
        let mut written = 0u64;
        while written < ops {
            let mut batch = Vec::with_capacity(3 * group as usize);
            for _ in 0..group {
                batch.push(enqueue(i, &pool, &task));
                i += 1;
            }
            let mut selected: Vec<TicketId> = Vec::with_capacity(group as usize);
            for _ in 0..group {
                let op = Op::Select {
                    pool: pool.clone(),
                    now_ms: u64::MAX / 2,
                    worker: worker.clone(),
                    lease_until_ms: u64::MAX / 2,
                };
                batch.push(op);
            }
            // Apply in order, as the actor does, to learn the ids selected.
            let mut applied = Vec::with_capacity(batch.len());
            for op in &batch {
                applied.push(state.step(op));
            }
            for a in applied {
                if let Applied::Selected(id) = a {
                    selected.push(id);
                }
            }
            for id in selected {
                let op = Op::Complete {
                    id,
                    terminal: Terminal::Succeeded,
                };
                let _ = state.step(&op);
                batch.push(op);
            }
            written += batch.len() as u64;
            store
                .commit(&Commit {
                    ops: batch,
                    ..Commit::default()
                })
                .map_err(failed("commit"))?;
        }
        store.sync().map_err(failed("sync"))?;
    }
    let (_, recovered) =
        Store::open(dir, bench_settings(Durability::None)).map_err(failed("reopen"))?;
    let elapsed = recovered.elapsed;
    Ok(Replay {
        ops: recovered.ops_replayed,
        entries: recovered.entries_replayed,
        elapsed,
        ops_per_s: recovered.ops_replayed as f64 / elapsed.as_secs_f64(),
    })
}

struct Open {
    /// The open after a crash: the mark holds only the sequence.
    ms: f64,
    /// The open after a clean close: the files' digest checked too.
    checked_ms: f64,
    /// The clean close before it, its content read and its files digested.
    close_ms: f64,
    rss_growth_bytes: u64,
    hwm_bytes: u64,
    snapshot_tickets: u64,
    ops_replayed: u64,
    build: Duration,
    disk_bytes: u64,
    method: &'static str,
}

/// Builds a store of `tickets` pending tickets, snapshotted as
/// `snapshot_due` says, then measures its open in a child process.
/// Fills a new store in `dir` with `tickets` pending tickets (100-byte
/// payloads), snapshotted as `snapshot_due` says, synced.
pub(super) fn build_pending(dir: &Path, tickets: u64) -> Result<(), BenchError> {
    let settings = StoreSettings {
        durability: Durability::None,
        ..StoreSettings::default()
    };
    let (store, _) = Store::open(dir, settings).map_err(failed("open"))?;
    let pool: Arc<str> = "pool".into();
    let task: Arc<str> = "noop".into();
    let mut state = QueueState::new();
    let mut dirty: Vec<TicketId> = Vec::new();
    let group = 4_096u64;
    let mut i = 0u64;
    while i < tickets {
        let n = group.min(tickets - i);
        let ops: Vec<Op> = (i..i + n).map(|k| enqueue(k, &pool, &task)).collect();
        for op in &ops {
            match state.step(op) {
                Applied::Enqueued(id) => dirty.push(id),
                other => return Err(BenchError::Failed(format!("enqueue gave {other:?}"))),
            }
        }
        i += n;
        store
            .commit(&Commit {
                ops,
                ..Commit::default()
            })
            .map_err(failed("commit"))?;
        if store.snapshot_due() {
            let changed = std::mem::take(&mut dirty);
            store
                .write_snapshot(
                    store.last_seq(),
                    state.next_id(),
                    state.len() as u64,
                    changed.into_iter().map(|id| (id, state.ticket(id))),
                )
                .map_err(failed("snapshot"))?;
        }
    }
    store.sync().map_err(failed("sync"))?;
    Ok(())
}

fn open_pending(dir: &Path, tickets: u64) -> Result<Open, BenchError> {
    let started = Instant::now();
    build_pending(dir, tickets)?;
    let build = started.elapsed();
    let disk_bytes = dir_bytes(dir);

    // A clean close in a durable mode leaves the store's content in its
    // mark and the digest of sled's files beside it, and the next open
    // checks them (the files' digest; the full scan only when they
    // changed): time that close, then the open with the check and without
    // it (the mark cut back to its sequence, as after a crash).
    let (store, _) = Store::open(dir, StoreSettings::default()).map_err(failed("open"))?;
    let closing = Instant::now();
    drop(store);
    let close_ms = closing.elapsed().as_secs_f64() * 1e3;
    if !dir.join("store.files").exists() {
        return Err(BenchError::Failed(
            "a clean close left no digest of sled's files (store.files)".into(),
        ));
    }
    let (checked, _) = open_in_child(dir)?;
    let mark = dir.join("store.mark");
    let text = std::fs::read_to_string(&mark)
        .map_err(|e| BenchError::Failed(format!("{}: {e}", mark.display())))?;
    if !text.contains("\ncontent ") {
        return Err(BenchError::Failed(format!(
            "a clean close left no content in the mark: {text:?}"
        )));
    }
    let first = text.lines().next().unwrap_or_default();
    std::fs::write(&mark, format!("{first}\n"))
        .map_err(|e| BenchError::Failed(format!("{}: {e}", mark.display())))?;
    let (line, method) = open_in_child(dir)?;
    let field = |line: &str, name: &str| -> Result<u64, BenchError> {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| BenchError::Failed(format!("open child: no {name} in {line:?}")))
    };
    Ok(Open {
        ms: field(&line, "us")? as f64 / 1e3,
        checked_ms: field(&checked, "us")? as f64 / 1e3,
        close_ms,
        rss_growth_bytes: field(&line, "rss_growth_bytes")?,
        hwm_bytes: field(&line, "hwm_bytes")?,
        snapshot_tickets: field(&line, "snapshot_tickets")?,
        ops_replayed: field(&line, "ops_replayed")?,
        build,
        disk_bytes,
        method,
    })
}

/// Opens the store in `dir` in a child process (this program re-run), or
/// here when that fails: its `OPEN` line, and how it was measured.
fn open_in_child(dir: &Path) -> Result<(String, &'static str), BenchError> {
    let child = std::env::current_exe()
        .ok()
        .and_then(|exe| {
            std::process::Command::new(exe)
                .args(["bench", "store"])
                .env(OPEN_CHILD_ENV, dir)
                .output()
                .ok()
        })
        .filter(|out| out.status.success())
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("OPEN ").map(str::to_string))
        });
    Ok(match child {
        Some(line) => (line, "measured in a child process"),
        None => {
            // Not run as the weir program: measure here. The builder's
            // freed memory may be reused, so the growth can understate.
            let mut out = Vec::new();
            open_measure(dir, &mut out)?;
            (
                String::from_utf8_lossy(&out)
                    .trim()
                    .trim_start_matches("OPEN ")
                    .to_string(),
                "measured in-process: VmHWM includes the builder",
            )
        }
    })
}

/// The child's side of [`open_pending`].
fn open_child(dir: &Path) -> Result<(), BenchError> {
    let mut out = std::io::stdout().lock();
    open_measure(dir, &mut out)
}

fn open_measure(dir: &Path, out: &mut impl std::io::Write) -> Result<(), BenchError> {
    let before = proc_status_bytes("VmRSS:")?;
    let started = Instant::now();
    let (store, recovered) = Store::open(dir, StoreSettings::default()).map_err(failed("open"))?;
    let us = started.elapsed().as_micros();
    let after = proc_status_bytes("VmRSS:")?;
    let hwm = proc_status_bytes("VmHWM:")?;
    writeln!(
        out,
        "OPEN us={us} rss_growth_bytes={} hwm_bytes={hwm} snapshot_tickets={} ops_replayed={} tickets={}",
        after.saturating_sub(before),
        recovered.snapshot_tickets,
        recovered.ops_replayed,
        recovered.state.len(),
    )
    .map_err(|e| BenchError::Failed(format!("stdout: {e}")))?;
    drop(recovered);
    drop(store);
    Ok(())
}

/// A `kB` figure of /proc/self/status, in bytes.
pub(super) fn proc_status_bytes(field: &str) -> Result<u64, BenchError> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| BenchError::Failed(format!("/proc/self/status: {e}")))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| BenchError::Failed(format!("/proc/self/status has no {field}")))
}

pub(super) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        // The reserve file is preallocated room, not data.
        .filter(|e| e.file_name() != "reserve")
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
