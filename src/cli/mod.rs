//! The command line: `weir run|validate|status|inspect|bench`.
//!
//! Exit codes: 0 success, 1 a run failed, 2 bad input (definition,
//! arguments), 3 store or I/O error. Every error says what and where.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs a benchmark scenario; the last line printed is `RESULT scenario=NAME key=value ...`.
    Bench {
        /// The scenario: core, store, drain.
        scenario: String,
        /// A tenth of the full size.
        #[arg(long)]
        quick: bool,
    },
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
    match cli.command {
        Command::Bench { scenario, quick } => match crate::bench::run(&scenario, quick) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("weir bench {scenario}: {e}");
                ExitCode::from(e.exit_code())
            }
        },
    }
}
