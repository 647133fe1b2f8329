//! `weir run PATH`: opens the engine on the data directory, adopts the
//! definitions, starts the requested runs (and the graphs' triggers), shows
//! progress, and with `--until-idle` exits when everything it started has
//! settled: 0 when every run completed, 1 when any failed.
//!
//! Ctrl-C or SIGTERM shuts down gracefully (no new attempts; running ones
//! finish within the grace period; everything durable); a second one exits
//! at once. The next `weir run` on the same data directory resumes: runs
//! already started are not started again, and their schedulers reconcile.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use weir_actors::events::EngineEvent;
use weir_actors::scheduler::records::RunState;
use weir_actors::store::{Durability, StoreSettings};
use weir_actors::trigger::backfill::BackfillOrder;
use weir_core::partition::{Partition, PartitionRange, Partitioning};

use super::{init_logging, Failure, LogFormat};
use crate::definition::{self, Definitions};
use crate::task::command::{CommandTask, COMMAND_TASK};
use crate::{Engine, EngineError};

/// Arguments of `weir run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A definition file, or a folder of them.
    pub path: PathBuf,
    /// The data directory (default: `.weir` beside the definitions).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Start the run of this partition (repeatable), e.g. 2026-11-29.
    #[arg(long = "partition")]
    pub partitions: Vec<String>,
    /// Start the runs of every partition in a range, e.g. 2026-11-01..2026-11-07.
    #[arg(long)]
    pub backfill: Option<String>,
    /// Exit when every run started has settled.
    #[arg(long)]
    pub until_idle: bool,
    /// Log format.
    #[arg(long, value_enum, default_value = "plain")]
    pub log_format: LogFormat,
    /// fsync (default), flush or none.
    #[arg(long, default_value = "fsync")]
    pub durability: String,
    /// Slots of the `default` pool when the definitions do not size it.
    #[arg(long)]
    pub default_capacity: Option<u32>,
    /// Seconds running attempts get to finish at shutdown.
    #[arg(long, default_value_t = 30)]
    pub grace_secs: u64,
    /// Run for this long (e.g. 30s), then shut down gracefully.
    #[arg(long = "for")]
    pub run_for: Option<String>,
}

/// Runs the command.
pub fn run(args: RunArgs) -> Result<u8, Failure> {
    let progress = std::io::stderr().is_terminal() && args.log_format == LogFormat::Plain;
    init_logging(args.log_format, if progress { "warn" } else { "info" });
    let durability: Durability = args.durability.parse().map_err(Failure::input)?;
    if let Some(d) = &args.run_for {
        definition::parse_duration_ms(d).map_err(|e| Failure::input(format!("--for: {e}")))?;
    }
    let defs = definition::load(&args.path).map_err(|e| Failure::input(e.to_string()))?;
    let requested = requested_partitions(&args, &defs)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::store(format!("cannot start the runtime: {e}")))?;
    rt.block_on(run_async(args, defs, durability, requested, progress))
}

/// What to start in one graph: explicit partitions, and a backfill (its
/// range and windows) that the graph's trigger paces by max_active_runs.
#[derive(Debug, Default)]
struct Requested {
    partitions: Vec<Partition>,
    backfill: Option<(PartitionRange, Vec<Partition>)>,
}

/// The partitions to start, per graph.
fn requested_partitions(
    args: &RunArgs,
    defs: &Definitions,
) -> Result<BTreeMap<String, Requested>, Failure> {
    let mut out: BTreeMap<String, Requested> = BTreeMap::new();
    for loaded in &defs.graphs {
        let g = &loaded.graph;
        let d = g.def();
        let mut ps = Vec::new();
        let mut backfill = None;
        for p in &args.partitions {
            let part: Partition = p
                .parse()
                .map_err(|e| Failure::input(format!("--partition {p:?}: {e}")))?;
            if part.partitioning() == d.partitioning {
                ps.push(part);
            }
        }
        if let Some(range) = &args.backfill {
            let r: PartitionRange = range
                .parse()
                .map_err(|e| Failure::input(format!("--backfill {range:?}: {e}")))?;
            if r.from.partitioning() == d.partitioning {
                let windows = r
                    .windows(d.partitioning, weir_core::partition::WINDOWS_MAX_DEFAULT)
                    .map_err(|e| Failure::input(format!("--backfill {range:?}: {e}")))?;
                backfill = Some((r, windows));
            }
        }
        if ps.is_empty()
            && backfill.is_none()
            && args.partitions.is_empty()
            && args.backfill.is_none()
            && d.partitioning == Partitioning::None
            && d.cron.is_none()
        {
            ps.push(Partition::NONE);
        }
        if !ps.is_empty() || backfill.is_some() {
            out.insert(
                g.name().to_string(),
                Requested {
                    partitions: ps,
                    backfill,
                },
            );
        }
    }
    if (!args.partitions.is_empty() || args.backfill.is_some()) && out.is_empty() {
        return Err(Failure::input(
            "no graph has the partitioning of the requested partitions (e.g. a daily graph takes 2026-11-29)",
        ));
    }
    Ok(out)
}

async fn run_async(
    args: RunArgs,
    defs: Definitions,
    durability: Durability,
    requested: BTreeMap<String, Requested>,
    progress: bool,
) -> Result<u8, Failure> {
    let data = args.data.clone().unwrap_or_else(|| defs.root.join(".weir"));
    let default_capacity = args.default_capacity.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get() as u32 * 2)
            .max(4)
    });
    // WEIR_DISK_RESERVE_BYTES and friends size the disk reserve (a small
    // filesystem, the disk-full test).
    let store_settings = StoreSettings {
        durability,
        ..StoreSettings::default()
    }
    .with_env_overrides()
    .map_err(Failure::input)?;
    let mut builder = Engine::builder(&data).store_settings(store_settings);
    if !defs.pools.contains_key("default") {
        builder = builder.pool("default", default_capacity);
    }
    for (p, c) in &defs.pools {
        builder = builder.pool(p, *c);
    }
    for (t, s) in &defs.targets {
        builder = builder.target(t, s.clone());
    }
    let scratch = data.join("scratch");
    let work = std::path::absolute(&data)
        .unwrap_or_else(|_| data.clone())
        .join("work");
    builder = builder.task(COMMAND_TASK, Arc::new(CommandTask { scratch, work }));
    let engine = builder.open().await.map_err(|e| match e {
        EngineError::Settings(s) => Failure::input(s),
        other => Failure::store(other.to_string()),
    })?;
    let engine = Arc::new(engine);
    let mut events = engine.subscribe();

    for loaded in &defs.graphs {
        engine
            .adopt(loaded.graph.def().clone())
            .await
            .map_err(|e| Failure::input(format!("definition {}: {e}", loaded.file.display())))?;
    }
    let mut watched: Vec<(String, Partition)> = Vec::new();
    for (graph, req) in &requested {
        if !req.partitions.is_empty() {
            let outcomes = engine
                .start_runs(graph, req.partitions.clone())
                .await
                .map_err(|e| Failure::store(format!("graph {graph}: {e}")))?;
            for (o, p) in outcomes.iter().zip(&req.partitions) {
                if !o.started {
                    tracing::info!(graph, partition = %p, "run exists already; resuming it");
                }
                watched.push((graph.clone(), p.clone()));
            }
        }
        if let Some((range, windows)) = &req.backfill {
            engine
                .backfill(graph, range.clone(), BackfillOrder::Oldest)
                .await
                .map_err(|e| Failure::store(format!("graph {graph}: backfill {range}: {e}")))?;
            for p in windows {
                if !watched.iter().any(|(g, q)| g == graph && q == p) {
                    watched.push((graph.clone(), p.clone()));
                }
            }
        }
    }
    let started_at = Instant::now();
    let run_for = args
        .run_for
        .as_deref()
        .map(|d| Duration::from_millis(definition::parse_duration_ms(d).unwrap_or(0)));
    let inbox = data.join("inbox");
    let mut counters = Counters::default();
    let mut interrupts =
        Interrupts::new().map_err(|e| Failure::store(format!("cannot watch signals: {e}")))?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut interrupted = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                super::signal::apply_inbox(&engine, &inbox).await;
                if run_for.is_some_and(|d| started_at.elapsed() >= d) {
                    break;
                }
                let snap = snapshot(&engine, &watched);
                if progress {
                    draw(&snap, &counters, started_at);
                }
                if args.until_idle && snap.runs_done == snap.runs_total {
                    break;
                }
                if let Some(e) = engine.error() {
                    if progress { eprintln!(); }
                    return Err(Failure::store(format!("engine stopped: {e}")));
                }
            }
            ev = events.recv() => {
                if let Ok(ev) = ev {
                    counters.see(&ev, progress);
                    // Runs the triggers start are watched too.
                    if let EngineEvent::RunStarted { graph, partition } = &ev {
                        if let Ok(p) = partition.parse::<Partition>() {
                            if !watched.iter().any(|(g, q)| g == graph && *q == p) {
                                watched.push((graph.clone(), p));
                            }
                        }
                    }
                }
            }
            () = interrupts.next() => {
                interrupted = true;
                if progress { eprintln!(); }
                eprintln!("weir: interrupted; shutting down (again to exit at once)");
                tokio::spawn(async move {
                    let mut again = match Interrupts::new() { Ok(i) => i, Err(_) => return };
                    again.next().await;
                    eprintln!("weir: exiting now");
                    std::process::exit(130);
                });
                break;
            }
        }
    }
    if progress {
        eprintln!();
    }
    let snap = snapshot(&engine, &watched);
    let engine =
        Arc::try_unwrap(engine).map_err(|_| Failure::store("engine still in use at shutdown"))?;
    engine
        .shutdown(Duration::from_secs(args.grace_secs))
        .await
        .map_err(|e| Failure::store(format!("shutdown: {e}")))?;
    print_summary(&snap, started_at.elapsed());
    println!(
        "retries {}, failed tickets {}, deferred by breakers {}, breaker openings {}",
        counters.retries, counters.failures, counters.deferred, counters.breaker_opened
    );
    if interrupted {
        return Ok(130);
    }
    Ok(if snap.failed > 0 {
        super::EXIT_RUN_FAILED
    } else {
        0
    })
}

/// Retries and failures seen in events.
#[derive(Default)]
struct Counters {
    retries: u64,
    failures: u64,
    deferred: u64,
    breaker_opened: u64,
}

impl Counters {
    fn see(&mut self, ev: &EngineEvent, progress: bool) {
        match ev {
            EngineEvent::Retrying {
                key,
                attempt,
                error,
                ..
            } => {
                self.retries += 1;
                if !progress {
                    tracing::info!(run_id = %key, attempt, error = %error.lines().next().unwrap_or(""), "retrying");
                }
            }
            EngineEvent::Completed { status, .. } if *status == crate::DoneStatus::Failed => {
                self.failures += 1
            }
            EngineEvent::Deferred { .. } => self.deferred += 1,
            EngineEvent::Breaker { target, state } => {
                if state == "open" {
                    self.breaker_opened += 1;
                }
                if !progress {
                    tracing::warn!(target = %target, state = %state, "breaker changed state");
                }
            }
            _ => {}
        }
    }
}

struct RunRow {
    graph: String,
    partition: String,
    state: Option<RunState>,
    nodes_done: usize,
    nodes_total: usize,
    running: usize,
    duration_ms: Option<u64>,
}

struct Snapshot {
    rows: Vec<RunRow>,
    runs_done: usize,
    runs_total: usize,
    failed: usize,
    nodes_done: usize,
    nodes_total: usize,
    running: usize,
}

fn snapshot(engine: &Engine, watched: &[(String, Partition)]) -> Snapshot {
    let mut s = Snapshot {
        rows: Vec::new(),
        runs_done: 0,
        runs_total: watched.len(),
        failed: 0,
        nodes_done: 0,
        nodes_total: 0,
        running: 0,
    };
    for (g, p) in watched {
        let view = engine.graph_run(g, p).ok().flatten();
        let mut row = RunRow {
            graph: g.clone(),
            partition: p.to_string(),
            state: None,
            nodes_done: 0,
            nodes_total: 0,
            running: 0,
            duration_ms: None,
        };
        if let Some(v) = view {
            row.state = Some(v.state);
            row.nodes_total = v.nodes.len();
            row.nodes_done = v
                .nodes
                .iter()
                .filter(|n| !matches!(n.state.as_str(), "pending" | "ready"))
                .count();
            row.running = v.nodes.iter().filter(|n| n.state == "ready").count();
            row.duration_ms = v.settled_at_ms.map(|t| t.saturating_sub(v.requested_at_ms));
            if v.state != RunState::Active {
                s.runs_done += 1;
            }
            if matches!(v.state, RunState::Failed | RunState::Cancelled) {
                s.failed += 1;
            }
        }
        s.nodes_done += row.nodes_done;
        s.nodes_total += row.nodes_total;
        s.running += row.running;
        s.rows.push(row);
    }
    s
}

fn draw(s: &Snapshot, c: &Counters, started: Instant) {
    let line = format!(
        "\r\x1b[2K[{:>6.1}s] runs {}/{} done ({} failed) | nodes {}/{} | active {} | retries {} | failures {} | deferred {}",
        started.elapsed().as_secs_f64(),
        s.runs_done,
        s.runs_total,
        s.failed,
        s.nodes_done,
        s.nodes_total,
        s.running,
        c.retries,
        c.failures,
        c.deferred
    );
    use std::io::Write;
    let mut err = std::io::stderr();
    let _ = err.write_all(line.as_bytes());
    let _ = err.flush();
}

fn print_summary(s: &Snapshot, elapsed: Duration) {
    println!(
        "{:<20} {:<40} {:<10} {:>11} {:>10}",
        "graph", "partition", "state", "nodes", "time"
    );
    for r in &s.rows {
        println!(
            "{:<20} {:<40} {:<10} {:>11} {:>10}",
            r.graph,
            r.partition,
            r.state.map_or("unknown".to_string(), |s| s.to_string()),
            format!("{}/{}", r.nodes_done, r.nodes_total),
            r.duration_ms
                .map_or("-".to_string(), |ms| format!("{:.2}s", ms as f64 / 1000.0))
        );
    }
    println!(
        "{} run(s): {} settled, {} failed or cancelled, {} still active; {:.2}s",
        s.runs_total,
        s.runs_done,
        s.failed,
        s.runs_total - s.runs_done,
        elapsed.as_secs_f64()
    );
}

/// Ctrl-C and SIGTERM.
struct Interrupts {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Interrupts {
    fn new() -> std::io::Result<Interrupts> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Interrupts {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
