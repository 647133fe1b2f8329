//! `weir run PATH`: opens the engine on the data directory, adopts the
//! definitions, starts the requested runs (and the graphs' triggers), shows
//! progress (a progress line on a terminal), and with `--until-idle` exits
//! when everything it started has settled: 0 when every run completed, 1
//! when any failed; 2 when nothing was started (with the reason). The exit
//! code goes by the latest run of each key or window: a key whose early run
//! failed and whose latest run completed is no failure.
//!
//! Graphs given no run say what they wait for (the next cron firing, the
//! next due key). The summary names the data directory, each failed node
//! with its exit code and the last lines of its stderr, and the commands
//! that show more (`weir logs`, `weir status`).
//!
//! Ctrl-C or SIGTERM shuts down gracefully (no new attempts; running ones
//! finish within the grace period; everything durable); a second one exits
//! at once. The next `weir run` on the same data directory resumes: runs
//! already started are not started again, and their schedulers reconcile.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use weir_actors::events::EngineEvent;
use weir_actors::scheduler::records::RunState;
use weir_actors::store::Durability;
use weir_actors::trigger::backfill::BackfillOrder;
use weir_core::partition::{Partition, PartitionRange, Partitioning};

use weir_actors::scheduler::records::run_id;
use weir_actors::scheduler::view::GraphRunView;

use super::failure::Failure;
use super::output::out;
use super::output::LogFormat;
use super::progress::{self, Progress};
use crate::definition::{self, Definitions};
use crate::Engine;

/// Arguments of `weir run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// A definition file, or a folder of them.
    pub path: PathBuf,
    /// The data directory (default: $WEIR_DATA_DIR, else `.weir` beside the definitions).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Start the run of this partition (repeatable), e.g. 2026-11-29.
    #[arg(long = "partition")]
    pub partitions: Vec<String>,
    /// Start the runs of every partition in a range, e.g.
    /// 2026-11-01..2026-11-07 (repeatable: each range is its own backfill).
    #[arg(long = "backfill", value_name = "RANGE")]
    pub backfills: Vec<String>,
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
    /// Where the API listens while it runs (default: any free loopback port).
    #[arg(long, default_value = super::host::RUN_LISTEN_DEFAULT)]
    pub listen: String,
    /// A file holding the API token (default: DATA/token, made at first start).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Export each run's trace to this OTLP/HTTP collector, e.g.
    /// http://127.0.0.1:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Where artifacts are kept.
    #[command(flatten)]
    pub artifacts: crate::artifacts::options::ArtifactArgs,
    /// More log lines: -v each state change, -vv debug (RUST_LOG
    /// overrides).
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Sets up logging to stderr at `default_level` (RUST_LOG overrides),
/// through the progress line's writer so log lines print above it.
fn init_logging(format: LogFormat, default_level: &str) {
    super::output::init_logging_to(format, default_level, progress::Writer);
}

/// Runs the command.
pub fn run(args: RunArgs) -> Result<u8, Failure> {
    let progress = std::io::stderr().is_terminal() && args.log_format == LogFormat::Plain;
    // Quiet by default (warnings and errors); -v is each state change,
    // -vv debug; RUST_LOG overrides.
    init_logging(
        args.log_format,
        match args.verbose {
            0 => "warn",
            1 => "info",
            _ => "debug,sled=info,hyper=info,reqwest=info",
        },
    );
    let durability: Durability = args.durability.parse().map_err(Failure::input)?;
    super::host::listen_addr(
        &args.listen,
        args.token_file.as_deref(),
        &super::host::ApiSettings::default(),
    )?;
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

/// What to start in one graph: explicit partitions, and backfills (each a
/// range and its windows) that the graph's trigger paces by
/// max_active_runs.
#[derive(Debug, Default)]
struct Requested {
    partitions: Vec<Partition>,
    /// Each `--backfill` of the graph's partitioning, in the order given.
    backfills: Vec<(PartitionRange, Vec<Partition>)>,
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
        let mut backfills = Vec::new();
        for p in &args.partitions {
            let part: Partition = p
                .parse()
                .map_err(|e| Failure::input(format!("--partition {p:?}: {e}")))?;
            if part.partitioning() == d.partitioning {
                let part = part.in_zone(d.zone()).map_err(|e| {
                    Failure::input(format!("--partition {p:?} of graph {}: {e}", d.name))
                })?;
                ps.push(part);
            }
        }
        for range in &args.backfills {
            let r: PartitionRange = range
                .parse()
                .map_err(|e| Failure::input(format!("--backfill {range:?}: {e}")))?;
            if r.from.partitioning() == d.partitioning {
                let windows = r
                    .windows(
                        d.partitioning,
                        weir_core::partition::WINDOWS_MAX_DEFAULT,
                        d.zone(),
                    )
                    .map_err(|e| Failure::input(format!("--backfill {range:?}: {e}")))?;
                backfills.push((r, windows));
            }
        }
        if ps.is_empty()
            && backfills.is_empty()
            && args.partitions.is_empty()
            && args.backfills.is_empty()
            && d.partitioning == Partitioning::None
            && d.cron.is_none()
        {
            ps.push(Partition::NONE);
        }
        if !ps.is_empty() || !backfills.is_empty() {
            out.insert(
                g.name().to_string(),
                Requested {
                    partitions: ps,
                    backfills,
                },
            );
        }
    }
    if (!args.partitions.is_empty() || !args.backfills.is_empty()) && out.is_empty() {
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
    let data = super::datadir::for_definitions(args.data.as_deref(), &defs.root);
    let artifacts = args
        .artifacts
        .open(
            crate::artifacts::options::Default::Folder(&data.join("artifacts")),
            "run",
        )
        .await?;
    let engine = super::host::open_engine(
        &defs,
        &data,
        durability,
        args.default_capacity,
        artifacts.clone(),
    )
    .await?;
    let graphs: Vec<String> = defs
        .graphs
        .iter()
        .map(|l| l.graph.name().to_string())
        .collect();
    super::datadir::record(&data, &graphs);
    let mut events = engine.subscribe();
    super::host::adopt_all(&engine, &defs).await?;
    let server = super::host::serve_api(
        engine.clone(),
        &data,
        &args.listen,
        args.token_file.as_deref(),
        Some(super::host::reloader(args.path.clone())),
        &super::host::ApiSettings {
            otlp_endpoint: args.otlp_endpoint.clone(),
            ..Default::default()
        },
        artifacts,
    )
    .await?;
    // The commands named work as typed, or say the `--data` they need:
    // one that names a graph of this run and would read another data
    // directory (another that ran the graph, whose engine runs too).
    let needs_data = graphs
        .iter()
        .any(|g| !data_arg(&data, args.data.as_deref(), Some(g)).is_empty());
    eprintln!(
        "weir: data in {}; UI and API at {}/ (`weir status`, `weir logs` and the other commands work while this runs{})",
        data.display(),
        server.url(),
        if needs_data {
            format!(", given --data {}", super::datadir::shell_word(&data))
        } else {
            String::new()
        }
    );

    let mut watched: Vec<(String, Partition)> = Vec::new();
    for (graph, req) in &requested {
        if !req.partitions.is_empty() {
            let outcomes = engine
                .start_runs(graph, req.partitions.clone())
                .await
                .map_err(|e| Failure::store(format!("graph {graph}: {e}")))?;
            for (o, p) in outcomes.iter().zip(&req.partitions) {
                if !o.started {
                    eprintln!("weir: the run of {graph} for {p} exists already; resuming it");
                }
                watched.push((graph.clone(), p.clone()));
            }
        }
        for (range, windows) in &req.backfills {
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
    // What the graphs given no run wait for; with --until-idle, nothing
    // started and nothing to wait for is bad input, said with the reason.
    let idle = idle_reasons(&engine, &defs, &requested).await;
    let mut nothing_started = None;
    if watched.is_empty() && args.until_idle {
        nothing_started = Some(format!(
            "nothing was started, so --until-idle has nothing to wait for: {}",
            idle.iter()
                .map(|r| r.why.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    } else {
        for r in &idle {
            eprintln!("weir: {}", r.waiting);
        }
    }

    let started_at = Instant::now();
    let run_for = args
        .run_for
        .as_deref()
        .map(|d| Duration::from_millis(definition::parse_duration_ms(d).unwrap_or(0)));
    let nodes_of: BTreeMap<String, usize> = defs
        .graphs
        .iter()
        .map(|l| (l.graph.name().to_string(), l.graph.def().nodes.len()))
        .collect();
    let bar = Progress::new(progress && nothing_started.is_none());
    let mut counters = Counters::default();
    let mut interrupts =
        Interrupts::new().map_err(|e| Failure::store(format!("cannot watch signals: {e}")))?;
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut interrupted = false;
    while nothing_started.is_none() {
        tokio::select! {
            _ = tick.tick() => {
                if run_for.is_some_and(|d| started_at.elapsed() >= d) {
                    break;
                }
                let snap = snapshot(&engine, &watched);
                if bar.shown() {
                    let (running, queued) = match engine.status().await {
                        Ok(st) => st.pools.values().fold((0, 0), |(r, q), p| (r + p.running, q + p.pending)),
                        Err(_) => (0, 0),
                    };
                    bar.update(&snap.line(&counters, &nodes_of, running, queued));
                }
                if args.until_idle && snap.runs_done == snap.rows.len() {
                    // A materialization not yet delivered starts runs still:
                    // wait for it, then take the runs it started (their
                    // RunStarted is sent before the event is deleted).
                    if assets_pending(&engine) {
                        continue;
                    }
                    let mut more = false;
                    while let Ok(ev) = events.try_recv() {
                        counters.see(&ev, bar.shown());
                        more |= watch_started(&ev, &mut watched);
                    }
                    if !more {
                        break;
                    }
                }
                if let Some(e) = engine.error() {
                    bar.finish();
                    return Err(Failure::store(format!("engine stopped: {e}")));
                }
            }
            ev = events.recv() => {
                if let Ok(ev) = ev {
                    counters.see(&ev, bar.shown());
                    // Runs the triggers start are watched too.
                    watch_started(&ev, &mut watched);
                    // A run settled: look again now, not at the next tick
                    // (a one-node run ended 0.25 s after its work did).
                    if args.until_idle && matches!(ev, EngineEvent::RunSettled { .. }) {
                        tick.reset_immediately();
                    }
                }
            }
            () = interrupts.next() => {
                interrupted = true;
                bar.println("weir: interrupted; shutting down (again to exit at once)");
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
    if args.until_idle && !interrupted && nothing_started.is_none() {
        // Notifications of the runs just settled run before the exit (they
        // would run at the next start otherwise).
        wait_for_notifications(&engine, &bar).await;
    }
    bar.finish();
    let snap = snapshot(&engine, &watched);
    server.stop().await;
    let engine = super::host::unwrap_engine(engine).await?;
    engine
        .shutdown(Duration::from_secs(args.grace_secs))
        .await
        .map_err(|e| Failure::store(format!("shutdown: {e}")))?;
    if let Some(why) = nothing_started {
        return Err(Failure::input(why));
    }
    let verdict = Verdict::of(&snap);
    print_summary(&snap, &verdict, started_at.elapsed());
    out(&format!(
        "retries {}, failed tickets {}, deferred by breakers {}, breaker openings {}",
        counters.retries, counters.failures, counters.deferred, counters.breaker_opened
    ));
    print_where(&snap, &verdict, &data, args.data.as_deref());
    if interrupted {
        return Ok(130);
    }
    Ok(if verdict.failed.is_empty() {
        0
    } else {
        crate::exit::EXIT_RUN_FAILED
    })
}

/// The longest `--until-idle` waits for notifications after the runs
/// settled: every attempt of one, with its backoff.
const NOTIFY_WAIT_MS: u64 = weir_actors::scheduler::notice::NOTIFY_TIMEOUT_MS
    * weir_actors::scheduler::notice::NOTIFY_ATTEMPTS_MAX as u64
    + 2 * weir_actors::scheduler::notice::NOTIFY_BACKOFF_MAX_MS;
/// Tickets listed at most when looking for notifications.
const NOTIFY_LIST_MAX: usize = 10_000;

/// Waits until no notification ticket is live (or [`NOTIFY_WAIT_MS`]).
async fn wait_for_notifications(engine: &Engine, bar: &Progress) {
    use weir_actors::scheduler::notice::NOTIFY_KEY_PREFIX;
    let t0 = Instant::now();
    let mut said = false;
    loop {
        let filter = weir_actors::queue::TicketFilter {
            running: None,
            pool: Some(weir_core::graph::POOL_DEFAULT.to_string()),
            limit: NOTIFY_LIST_MAX,
        };
        let live = match engine.tickets(filter).await {
            Ok(t) => t
                .iter()
                .filter(|t| t.key.starts_with(NOTIFY_KEY_PREFIX))
                .count(),
            Err(_) => 0,
        };
        if live == 0 {
            return;
        }
        if t0.elapsed() >= Duration::from_millis(NOTIFY_WAIT_MS) {
            bar.println(&format!(
                "weir: {live} notification(s) still waiting; they run at the next start"
            ));
            return;
        }
        if !said && t0.elapsed() >= Duration::from_secs(2) {
            bar.println(&format!("weir: waiting for {live} notification(s) to run"));
            said = true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Adds the run a `RunStarted` names to `watched`; `true` when it is new.
fn watch_started(ev: &EngineEvent, watched: &mut Vec<(String, Partition)>) -> bool {
    if let EngineEvent::RunStarted { graph, partition } = ev {
        if let Ok(p) = partition.parse::<Partition>() {
            if !watched.iter().any(|(g, q)| g == graph && *q == p) {
                watched.push((graph.clone(), p));
                return true;
            }
        }
    }
    false
}

/// Whether a materialization waits to be delivered (it may start runs).
fn assets_pending(engine: &Engine) -> bool {
    engine
        .store()
        .scan_keys(weir_actors::assets::records::ASSET_EVENT_PREFIX)
        .is_ok_and(|k| !k.is_empty())
}

/// Why a graph was given no run, and what it waits for.
struct Idle {
    /// Why nothing of it started (for `--until-idle`).
    why: String,
    /// What the engine waits for (printed when it keeps running).
    waiting: String,
}

/// The name of a partitioning, as definitions write it.
fn partitioning_name(p: Partitioning) -> &'static str {
    match p {
        Partitioning::None => "none",
        Partitioning::Hourly => "hourly",
        Partitioning::Daily => "daily",
        Partitioning::Weekly => "weekly",
        Partitioning::Monthly => "monthly",
        Partitioning::Keyed => "keyed",
    }
}

/// For each graph given no run: why, and what it waits for (the next cron
/// firing with its instant, the next due key).
async fn idle_reasons(
    engine: &Engine,
    defs: &Definitions,
    requested: &BTreeMap<String, Requested>,
) -> Vec<Idle> {
    let now_ms = engine.now_ms();
    let mut out = Vec::new();
    for loaded in &defs.graphs {
        let name = loaded.graph.name().to_string();
        if requested.contains_key(&name) {
            continue;
        }
        let d = loaded.graph.def();
        let cron = d.cron.as_deref().map(|expr| {
            let next = d
                .schedule()
                .and_then(|s| s.next_after(now_ms).map(|at| (s, at)));
            match next {
                Some((s, at)) => {
                    let window = s
                        .window_closed_by(d.partitioning, at)
                        .map_or_else(String::new, |w| format!(", for the window {w}"));
                    format!(
                        "its cron {expr:?} fires next at {}{window}",
                        d.zone().rfc3339(at)
                    )
                }
                None => format!("its cron {expr:?} fires no more"),
            }
        });
        if d.partitioning == Partitioning::Keyed {
            let next = match engine.schedules(&name).await {
                Ok(keys) => match keys.iter().min_by_key(|k| (k.due_at_ms, k.key.clone())) {
                    Some(k) => format!(
                        "next due: key {} at {} UTC ({} key(s))",
                        k.key,
                        super::table::fmt_time(k.due_at_ms),
                        keys.len()
                    ),
                    None => "no key yet (its inventory has not loaded)".to_string(),
                },
                Err(e) => format!("its keys are unknown: {e}"),
            };
            out.push(Idle {
                why: format!(
                    "graph {name} is keyed: its runs start when its keys are due ({next}); use --for DURATION or `weir serve`"
                ),
                waiting: format!("waiting for graph {name}'s keys: {next}"),
            });
            continue;
        }
        let why = format!(
            "graph {name} is partitioned {}: pass --partition or --backfill",
            partitioning_name(d.partitioning)
        );
        if !d.trigger_assets.is_empty() {
            let assets: Vec<&str> = d.trigger_assets.iter().map(|a| a.as_str()).collect();
            out.push(Idle {
                why: format!(
                    "{why} (it also starts when {} is materialized)",
                    assets.join(" or ")
                ),
                waiting: format!(
                    "graph {name} starts when {} is materialized",
                    assets.join(" or ")
                ),
            });
            continue;
        }
        match cron {
            Some(c) => out.push(Idle {
                why: format!("{why} ({c})"),
                waiting: format!("waiting for graph {name}'s cron: {c}"),
            }),
            None => out.push(Idle {
                waiting: format!("graph {name} has no run and no trigger: {why}"),
                why,
            }),
        }
    }
    out
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
            EngineEvent::Deferred {
                cause: weir_actors::msg::work::DeferCause::Breaker,
                ..
            } => self.deferred += 1,
            EngineEvent::Breaker { target, state } => {
                if state == "open" {
                    self.breaker_opened += 1;
                }
                tracing::warn!(target = %target, state = %state, "breaker changed state");
            }
            _ => {}
        }
    }
}

/// One watched run: its view, or none when it never started.
struct RunRow {
    graph: String,
    partition: Partition,
    view: Option<GraphRunView>,
}

impl RunRow {
    fn settled(&self) -> bool {
        self.view
            .as_ref()
            .is_some_and(|v| v.state != RunState::Active)
    }

    fn nodes_done(&self) -> usize {
        self.view.as_ref().map_or(0, |v| {
            v.nodes
                .iter()
                .filter(|n| !matches!(n.state.as_str(), "pending" | "ready"))
                .count()
        })
    }

    fn state(&self) -> String {
        self.view
            .as_ref()
            .map_or_else(|| "not started".to_string(), |v| v.state.to_string())
    }
}

struct Snapshot {
    rows: Vec<RunRow>,
    runs_done: usize,
}

fn snapshot(engine: &Engine, watched: &[(String, Partition)]) -> Snapshot {
    let rows: Vec<RunRow> = watched
        .iter()
        .map(|(g, p)| RunRow {
            graph: g.clone(),
            partition: p.clone(),
            view: engine.graph_run(g, p).ok().flatten(),
        })
        .collect();
    Snapshot {
        runs_done: rows.iter().filter(|r| r.settled()).count(),
        rows,
    }
}

impl Snapshot {
    fn line(
        &self,
        c: &Counters,
        nodes_of: &BTreeMap<String, usize>,
        running: usize,
        queued: usize,
    ) -> progress::Line {
        let mut l = progress::Line {
            runs_done: self.runs_done,
            runs_total: self.rows.len(),
            running,
            queued,
            retries: c.retries,
            deferred: c.deferred,
            ..progress::Line::default()
        };
        for r in &self.rows {
            match &r.view {
                Some(v) => {
                    l.nodes_total += v.nodes.len() as u64;
                    l.nodes_done += r.nodes_done() as u64;
                    if matches!(v.state, RunState::Failed | RunState::Cancelled) {
                        l.runs_failed += 1;
                    }
                }
                None => {
                    l.windows_to_come += 1;
                    l.nodes_total += nodes_of.get(&r.graph).copied().unwrap_or(0) as u64;
                }
            }
        }
        l
    }
}

/// The exit verdict: by the latest run of each key (keyed graphs) or
/// window, so a key whose early run failed but whose latest succeeded is
/// no failure.
struct Verdict {
    /// (graph, key or window) whose latest settled run failed or was
    /// cancelled.
    failed: Vec<(String, String)>,
    /// (graph, key or window, failed runs before) whose latest run completed
    /// after earlier ones failed.
    recovered: Vec<(String, String, usize)>,
}

impl Verdict {
    fn of(s: &Snapshot) -> Verdict {
        // (graph, key or window) -> (requested_at_ms, state) of each run.
        let mut groups: BTreeMap<(String, String), Vec<(u64, RunState)>> = BTreeMap::new();
        for r in &s.rows {
            let Some(v) = &r.view else { continue };
            let group = r
                .partition
                .key()
                .map_or_else(|| r.partition.to_string(), |k| k.to_string());
            groups
                .entry((r.graph.clone(), group))
                .or_default()
                .push((v.requested_at_ms, v.state));
        }
        let bad = |s: &RunState| matches!(s, RunState::Failed | RunState::Cancelled);
        let mut verdict = Verdict {
            failed: Vec::new(),
            recovered: Vec::new(),
        };
        for ((graph, group), mut runs) in groups {
            runs.sort_by_key(|(at, _)| *at);
            // A run still active at the end decides nothing: the latest
            // settled one does.
            runs.retain(|(_, s)| *s != RunState::Active);
            let Some((_, latest)) = runs.last() else {
                continue;
            };
            let failed_before = runs[..runs.len() - 1]
                .iter()
                .filter(|(_, s)| bad(s))
                .count();
            if bad(latest) {
                verdict.failed.push((graph, group));
            } else if failed_before > 0 && *latest == RunState::Complete {
                verdict.recovered.push((graph, group, failed_before));
            }
        }
        verdict
    }
}

/// The last lines of stderr shown for a failed node.
const STDERR_TAIL_LINES_MAX: usize = 5;

fn print_summary(s: &Snapshot, v: &Verdict, elapsed: Duration) {
    let mut t = super::table::new(&["graph", "partition", "state", "nodes", "time"]);
    for r in &s.rows {
        t.add_row(vec![
            r.graph.clone(),
            r.partition.to_string(),
            r.state(),
            r.view.as_ref().map_or_else(
                || "-".to_string(),
                |view| format!("{}/{}", r.nodes_done(), view.nodes.len()),
            ),
            super::table::duration(r.view.as_ref().and_then(|view| {
                view.settled_at_ms
                    .map(|t| t.saturating_sub(view.requested_at_ms))
            })),
        ]);
    }
    if !s.rows.is_empty() {
        super::table::print(&t);
    }
    let not_started = s.rows.iter().filter(|r| r.view.is_none()).count();
    let failed = s
        .rows
        .iter()
        .filter(|r| {
            r.view
                .as_ref()
                .is_some_and(|v| matches!(v.state, RunState::Failed | RunState::Cancelled))
        })
        .count();
    out(&format!(
        "{} run(s): {} settled, {} failed or cancelled, {} still active, {} not started; {}",
        s.rows.len(),
        s.runs_done,
        failed,
        s.rows.len() - s.runs_done - not_started,
        not_started,
        super::table::duration(Some(elapsed.as_millis() as u64))
    ));
    for (graph, group, before) in &v.recovered {
        out(&format!(
            "recovered: {graph} {group}: {before} failed run(s), then its latest run completed"
        ));
    }
    for (graph, group) in &v.failed {
        out(&format!("failed: {graph} {group}: its latest run failed"));
    }
}

/// Where the data went, each failed node with its exit code and the last
/// lines of its stderr, and the commands that show more.
fn print_where(
    s: &Snapshot,
    v: &Verdict,
    data: &std::path::Path,
    explicit: Option<&std::path::Path>,
) {
    let paths = crate::logs::LogPaths::new(data);
    let data_arg = |graph: Option<&str>| data_arg(data, explicit, graph);
    let latest_failed = |r: &RunRow| {
        let group = r
            .partition
            .key()
            .map_or_else(|| r.partition.to_string(), |k| k.to_string());
        v.failed.iter().any(|(g, k)| *g == r.graph && *k == group)
    };
    let mut shown_failures = 0;
    for r in &s.rows {
        let Some(view) = &r.view else { continue };
        for n in view.nodes.iter().filter(|n| n.state == "failed") {
            if shown_failures == 0 {
                out("");
                out("failed nodes:");
            }
            shown_failures += 1;
            if shown_failures > FAILURES_SHOWN_MAX {
                continue;
            }
            let run_id = run_id(&r.graph, &r.partition, &n.node, n.rerun);
            let last = crate::logs::attempts(&paths, &run_id)
                .ok()
                .and_then(|a| a.into_iter().max_by_key(|a| a.attempt));
            let exit = last
                .as_ref()
                .and_then(|a| a.exit_code)
                .map_or_else(String::new, |c| format!("exit {c}, "));
            let superseded = if latest_failed(r) {
                ""
            } else {
                " (a later run recovered)"
            };
            out(&format!(
                "  {} {} {}: {exit}{} attempt(s){superseded}",
                r.graph, r.partition, n.node, n.attempts
            ));
            let tail: Vec<String> = match &last {
                Some(a) if !a.stderr_tail.is_empty() => a.stderr_tail.clone(),
                Some(a) => a.error.iter().cloned().collect(),
                None => Vec::new(),
            };
            let tail = if tail.is_empty() {
                n.error
                    .iter()
                    .flat_map(|e| e.lines().map(str::to_string))
                    .collect()
            } else {
                tail
            };
            let skip = tail.len().saturating_sub(STDERR_TAIL_LINES_MAX);
            for line in &tail[skip..] {
                out(&format!("    | {line}"));
            }
            // A mapped node's logs are its members': name the first that
            // failed.
            let member = n
                .members
                .as_ref()
                .and_then(|m| m.list.iter().find(|x| x.state == "failed"))
                .map_or_else(String::new, |x| format!(" --member {}", x.index));
            out(&format!(
                "    more: weir logs {} {} {}{member}{}",
                r.graph,
                r.partition,
                n.node,
                data_arg(Some(&r.graph))
            ));
        }
    }
    if shown_failures > FAILURES_SHOWN_MAX {
        out(&format!(
            "  … and {} more failed node(s): weir runs --state failed{}",
            shown_failures - FAILURES_SHOWN_MAX,
            data_arg(None)
        ));
    }
    out("");
    out(&format!("data in {}", data.display()));
    // The results of the newest completed run of each graph: its last
    // nodes' logs (the ETL's `report` prints its report there).
    let mut seen = std::collections::BTreeSet::new();
    for r in s.rows.iter().rev() {
        let Some(view) = &r.view else { continue };
        if view.state != RunState::Complete || !seen.insert(r.graph.clone()) {
            continue;
        }
        if let Some(sink) = last_node(view) {
            out(&format!(
                "results of {} {}: weir logs {} {} {sink}{}",
                r.graph,
                r.partition,
                r.graph,
                r.partition,
                data_arg(Some(&r.graph))
            ));
        }
    }
    let mut graphs = std::collections::BTreeSet::new();
    for r in &s.rows {
        if graphs.insert(r.graph.clone()) {
            out(&format!(
                "see more: weir status {} {}{}",
                r.graph,
                r.partition,
                data_arg(Some(&r.graph))
            ));
        }
    }
}

/// ` --data DIR` for a command this run prints that names `graph` (or
/// none), unless the same command typed in this folder without it reads
/// `data` (the hints must work as printed: another data directory that
/// ran the same graph, or one whose engine runs, would take it there).
fn data_arg(
    data: &std::path::Path,
    explicit: Option<&std::path::Path>,
    graph: Option<&str>,
) -> String {
    if explicit.is_none() && super::datadir::client_finds(graph, data) {
        String::new()
    } else {
        format!(" --data {}", super::datadir::shell_word(data))
    }
}

/// Failed nodes listed with their stderr, at most.
const FAILURES_SHOWN_MAX: usize = 10;

/// The node whose log holds a run's results: the last in topological
/// order (the ETL's `report`).
fn last_node(view: &GraphRunView) -> Option<String> {
    view.nodes.last().map(|n| n.node.clone())
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
