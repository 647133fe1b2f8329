//! The command line: `weir run|serve|validate|bench`, and the clients of a
//! running engine's API (`status`, `runs`, `logs`, `artifacts`, `start`,
//! `backfill`, `rerun`, `clear`, `mark`, `cancel`, `pause`, `unpause`,
//! `trigger`, `keys`, `signal`, `dead`, `breakers`, `workers`, `reload`), plus
//! `inspect`; and `weir worker`, a process that serves an engine's pools.
//!
//! Exit codes: 0 success, 1 a run failed, 2 bad input (definition,
//! arguments, a refused request), 3 store or I/O error. Every error says
//! what and where.

mod access;
mod artifacts;
mod backup;
mod client;
mod connect_failure;
mod control;
pub(crate) mod datadir;
mod failure;
mod host;
mod inspect;
mod members;
mod output;
mod progress;
mod replicated;
mod run;
mod serve;
mod show;
mod table;
mod trace;
mod validate;
mod workers;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use crate::exit::{EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_STORE};
pub use failure::Failure;
pub use output::{init_logging, out, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version,
    about = "A durable workflow and job orchestrator"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs graph definitions: adopts them, starts triggers and the requested runs, serves the API while it runs.
    Run(run::RunArgs),
    /// Serves graph definitions until stopped: triggers, the API, reload on SIGHUP.
    Serve(Box<serve::ServeArgs>),
    /// Checks definitions and prints each graph.
    Validate {
        /// A definition file, or a folder of them.
        path: PathBuf,
    },
    /// Graphs, or one graph's runs, or one run's nodes (from the engine, or the store when none runs).
    Status(show::StatusArgs),
    /// Runs, newest first, with filters.
    Runs(show::RunsArgs),
    /// A node's log lines (stdout and stderr of each attempt).
    Logs(show::LogsArgs),
    /// A run's artifacts (node, rerun, name, size, hash); `get` fetches one, checking its hash.
    Artifacts(artifacts::ArtifactsArgs),
    /// A settled run's span tree (the spans the OTLP exporter sends), with
    /// no collector.
    Trace(trace::TraceArgs),
    /// Starts the runs of partitions.
    Start(control::StartArgs),
    /// Backfills a range of windows, paced by max_active_runs.
    Backfill(control::BackfillArgs),
    /// Reruns a node (and its downstreams).
    Rerun(control::RerunArgs),
    /// Reruns every failed node of a run (with downstreams).
    Clear(control::RunArgs),
    /// Marks a node succeeded or failed.
    Mark(control::MarkArgs),
    /// Cancels an active run.
    Cancel(control::RunArgs),
    /// Pauses a graph's triggers (cron, backfills, key schedules).
    Pause(control::GraphArgs),
    /// Unpauses a graph's triggers.
    Unpause(control::GraphArgs),
    /// Triggers a graph now.
    Trigger(control::GraphArgs),
    /// Runs a reconciler pass now (every active run of a graph, or one
    /// partition's) and prints its report.
    Reconcile(control::ReconcileArgs),
    /// A keyed graph's keys and their schedules.
    Keys(control::GraphArgs),
    /// Signals a key of a keyed graph.
    Signal(control::SignalArgs),
    /// Dead letters (tickets whose tries are spent); requeues them.
    Dead(control::DeadArgs),
    /// Breakers and their states; resets one.
    Breakers(control::BreakersArgs),
    /// Assets: who produces each, which graphs start on it, its last
    /// materialization.
    Assets(show::AssetsArgs),
    /// Re-reads the engine's definition files (as SIGHUP does).
    Reload(control::ReloadArgs),
    /// API tokens: create (with a role), list, revoke.
    Token(access::TokenArgs),
    /// The audit log: who changed what, when, from where, and how it ended.
    Audit(access::AuditArgs),
    /// A one-time login link for the UI (opened once, within a minute, it
    /// logs a browser in as this command's token: no pasted token).
    Ui(access::UiArgs),
    /// Runs a worker process: joins an engine's cluster and serves its pools.
    Worker(workers::WorkerArgs),
    /// The worker processes of the engine's cluster.
    Workers(workers::WorkersArgs),
    /// A replicated engine's members: leader, term, lag; add or remove one.
    Members(members::MembersArgs),
    /// A backup of the running engine (or of the member asked), checked.
    Backup(backup::BackupArgs),
    /// Makes a new data directory from a backup.
    Restore(backup::RestoreArgs),
    /// Shows store health: entries, snapshot, size, last sequence (while no engine runs).
    Inspect {
        /// The data directory.
        #[arg(long)]
        data: Option<PathBuf>,
    },
    /// What-if: runs definitions in virtual time against a scenario (durations, failures, inputs) and reports lateness, SLA misses, retries, breakers and utilisation.
    Simulate(crate::simulate::cli::SimulateArgs),
    /// Runs a benchmark scenario; the last line printed is `RESULT scenario=NAME key=value ...`.
    Bench {
        /// The scenario.
        scenario: String,
        /// A tenth of the full size.
        #[arg(long)]
        quick: bool,
        /// Ten times the full size, where a scenario has one (recovery:
        /// 10M pending tickets).
        #[arg(long, conflicts_with = "quick")]
        full: bool,
    },
}

/// Runs the program; returns its exit code.
pub fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(both) => both,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // The graph a client command names picks among the data directories
    // recorded for this folder.
    let mut m = &matches;
    while let Some((_, sub)) = m.subcommand() {
        m = sub;
    }
    if let Ok(Some(g)) = m.try_get_one::<String>("graph") {
        datadir::hint_graph(g);
    }
    // Client commands end quietly when their reader goes away (`| head`);
    // the engine-hosting ones keep SIGPIPE ignored (sockets), and `out`
    // ends them quietly too.
    if !matches!(
        cli.command,
        Command::Run(_)
            | Command::Serve(_)
            | Command::Bench { .. }
            | Command::Worker(_)
            | Command::Simulate(_)
    ) {
        // SAFETY: restoring the default disposition of SIGPIPE before any
        // thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
        init_logging(LogFormat::Plain, "warn");
    }
    let result = match cli.command {
        Command::Bench {
            scenario,
            quick,
            full,
        } => {
            // Quiet unless RUST_LOG asks: log lines would skew the figures.
            init_logging(LogFormat::Plain, "error");
            crate::bench::run_sized(&scenario, quick, full)
                .map(|()| 0)
                .map_err(|e| Failure {
                    code: e.exit_code(),
                    message: format!("weir bench {scenario}: {e}"),
                })
        }
        Command::Simulate(args) => {
            // Quiet unless RUST_LOG asks: simulated failures are expected.
            init_logging(LogFormat::Plain, "error");
            crate::simulate::cli::run(args)
                .map(|o| {
                    use std::io::Write;
                    let _ = std::io::stdout().lock().write_all(o.stdout.as_bytes());
                    let _ = std::io::stderr().lock().write_all(o.stderr.as_bytes());
                    o.code
                })
                .map_err(|e| Failure {
                    code: e.code,
                    message: e.message,
                })
        }
        Command::Validate { path } => validate::run(&path),
        Command::Status(a) => show::status(a),
        Command::Runs(a) => show::runs(a),
        Command::Logs(a) => show::logs_cmd(a),
        Command::Artifacts(a) => artifacts::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Start(a) => control::start(a),
        Command::Backfill(a) => control::backfill(a),
        Command::Rerun(a) => control::rerun(a),
        Command::Clear(a) => control::clear(a),
        Command::Mark(a) => control::mark(a),
        Command::Cancel(a) => control::cancel(a),
        Command::Pause(a) => control::pause(a, true),
        Command::Unpause(a) => control::pause(a, false),
        Command::Trigger(a) => control::trigger(a),
        Command::Reconcile(a) => control::reconcile(a),
        Command::Keys(a) => control::keys(a),
        Command::Signal(a) => control::signal(a),
        Command::Dead(a) => control::dead(a),
        Command::Breakers(a) => control::breakers(a),
        Command::Assets(a) => show::assets(a),
        Command::Reload(a) => control::reload(a),
        Command::Token(a) => access::token(a),
        Command::Audit(a) => access::audit(a),
        Command::Ui(a) => access::ui(a),
        Command::Worker(a) => workers::worker(a),
        Command::Workers(a) => workers::workers(a),
        Command::Members(a) => members::run(a),
        Command::Backup(a) => backup::run_backup(a),
        Command::Restore(a) => backup::run_restore(a),
        Command::Inspect { data } => {
            datadir::for_client(data.as_deref()).and_then(|d| inspect::run(&d))
        }
        Command::Run(args) => run::run(args),
        Command::Serve(args) if args.raft_id.is_some() => replicated::run(*args),
        Command::Serve(args) => serve::run(*args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("weir: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
