//! The command line: `weir run|validate|status|inspect|bench`.
//!
//! Exit codes: 0 success, 1 a run failed, 2 bad input (definition,
//! arguments), 3 store or I/O error. Every error says what and where.

mod inspect;
mod run;
mod signal;
mod status;
mod validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Exit code: a run failed.
pub const EXIT_RUN_FAILED: u8 = 1;
/// Exit code: bad input (a definition, an argument).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit code: a store or I/O error.
pub const EXIT_STORE: u8 = 3;

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

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Plain,
    /// One JSON object a line.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs graph definitions: adopts them, starts triggers and the requested runs.
    Run(run::RunArgs),
    /// Checks definitions and prints each graph.
    Validate {
        /// A definition file, or a folder of them.
        path: PathBuf,
    },
    /// Shows runs and their nodes (read-only; needs no engine running).
    Status {
        /// The data directory.
        #[arg(long, default_value = ".weir")]
        data: PathBuf,
        /// A graph.
        graph: Option<String>,
        /// A partition of it.
        partition: Option<String>,
    },
    /// Signals a key of a keyed graph (applied by the running engine, or at the next start).
    Signal {
        /// The data directory.
        #[arg(long, default_value = ".weir")]
        data: PathBuf,
        /// The graph.
        graph: String,
        /// The key.
        key: String,
        /// Due now instead of after the debounce.
        #[arg(long)]
        immediate: bool,
        /// Where the signal comes from (kept as the due reason).
        #[arg(long, default_value = "cli")]
        source: String,
    },
    /// Shows store health: entries, snapshot, size, last sequence.
    Inspect {
        /// The data directory.
        #[arg(long, default_value = ".weir")]
        data: PathBuf,
    },
    /// Runs a benchmark scenario; the last line printed is `RESULT scenario=NAME key=value ...`.
    Bench {
        /// The scenario.
        scenario: String,
        /// A tenth of the full size.
        #[arg(long)]
        quick: bool,
    },
}

/// A command's failure: its message and exit code.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What went wrong, and where.
    pub message: String,
}

impl Failure {
    /// Bad input.
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            code: EXIT_BAD_INPUT,
            message: message.into(),
        }
    }
    /// A store or I/O error.
    pub fn store(message: impl Into<String>) -> Failure {
        Failure {
            code: EXIT_STORE,
            message: message.into(),
        }
    }
}

/// Sets up logging to stderr at `default_level` (RUST_LOG overrides).
pub fn init_logging(format: LogFormat, default_level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Runs the program; returns its exit code.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_BAD_INPUT } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Bench { scenario, quick } => {
            // Quiet unless RUST_LOG asks: log lines would skew the figures.
            init_logging(LogFormat::Plain, "error");
            crate::bench::run(&scenario, quick)
                .map(|()| 0)
                .map_err(|e| Failure {
                    code: e.exit_code(),
                    message: format!("weir bench {scenario}: {e}"),
                })
        }
        Command::Validate { path } => validate::run(&path),
        Command::Status {
            data,
            graph,
            partition,
        } => status::run(&data, graph.as_deref(), partition.as_deref()),
        Command::Inspect { data } => inspect::run(&data),
        Command::Signal {
            data,
            graph,
            key,
            immediate,
            source,
        } => signal::run(&data, &graph, &key, &source, immediate),
        Command::Run(args) => run::run(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(f) => {
            eprintln!("weir: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
