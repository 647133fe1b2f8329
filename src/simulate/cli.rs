//! The `weir simulate` command: loads the definitions and the scenario,
//! parses the checks (a malformed one is bad input, exit 2, before any
//! simulation), runs the span on a paused current-thread runtime, prints
//! the table or the JSON, writes the HTML page, and evaluates the checks
//! (exit 1 when one fails).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_core::simulate::check::{self, Check};

use super::driver::{self, SimError};
use super::history::{self, HistoryError};
use super::report::{self, Report};
use super::resolve;
use super::scratch::Scratch;
use crate::exit::{EXIT_BAD_INPUT, EXIT_RUN_FAILED, EXIT_STORE};

/// The seed when neither `--seed` nor the scenario gives one.
pub const SEED_DEFAULT: u64 = 1;

/// `weir simulate` arguments.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// A definition file, or a folder of them.
    pub defs: PathBuf,
    /// The scenario (TOML): span, durations, failures, inputs.
    #[arg(long)]
    pub scenario: PathBuf,
    /// The seed of every random draw (default: the scenario's, else 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The data directory whose recorded durations `from_history` models
    /// read (default: $WEIR_DATA_DIR, else `.weir` beside the definitions,
    /// as `weir run`); opened only when the scenario has one.
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Write report.html and report.json into this folder.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// A check, e.g. `sla_misses == 0`, `etl.lateness_p99 < 10m`; exit 1
    /// when one fails (repeatable).
    #[arg(long = "check", num_args = 1.., action = clap::ArgAction::Append)]
    pub checks: Vec<String>,
}

/// Why the command stopped, with its exit code.
#[derive(Debug)]
pub struct SimFailure {
    /// The exit code.
    pub code: u8,
    /// What went wrong.
    pub message: String,
}

fn bad(message: String) -> SimFailure {
    SimFailure {
        code: EXIT_BAD_INPUT,
        message,
    }
}

/// Parses every check and verifies its graph and figure; the first bad
/// one is the error, naming it.
pub fn parse_checks(texts: &[String], graphs: &[String]) -> Result<Vec<Check>, String> {
    texts
        .iter()
        .map(|t| {
            let c = check::parse(t)?;
            if !report::FIGURES.contains(&c.metric.as_str()) {
                return Err(format!(
                    "check {t:?}: {:?} is not a figure (figures: {})",
                    c.metric,
                    report::FIGURES.join(", ")
                ));
            }
            if let Some(g) = &c.graph {
                if !graphs.contains(g) {
                    return Err(format!(
                        "check {t:?}: {g:?} is not a graph of the definitions"
                    ));
                }
            }
            Ok(c)
        })
        .collect()
}

/// Each check with its figure and whether it held.
pub fn evaluate(report: &Report, checks: &[Check]) -> Vec<(Check, Option<f64>, bool)> {
    checks
        .iter()
        .map(|c| {
            let v = report::figure(report, c.graph.as_deref(), &c.metric);
            let ok = v.is_some_and(|v| c.holds(v));
            (c.clone(), v, ok)
        })
        .collect()
}

/// The runtime a simulation runs on: one thread, its clock paused (time
/// jumps to the next timer whenever every task is idle and no blocking
/// task is under way). The actors' store work runs inline on that thread
/// (see [`SimRuntime::block_on`]); what still goes to a blocking thread
/// (the engine's open, its adoptions) has one, so it runs one at a time, in
/// the order handed off.
pub fn runtime() -> std::io::Result<SimRuntime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .max_blocking_threads(1)
        .build()
        .map(SimRuntime)
}

/// A simulation's runtime ([`runtime`]).
pub struct SimRuntime(tokio::runtime::Runtime);

impl SimRuntime {
    /// Runs `future` to its end on this thread, with the actors' store
    /// work inline on it (`weir_actors::blocking`): the store is a
    /// throw-away one and every task runs on this thread, so handing a
    /// write to a blocking thread would only cost two thread switches.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        let _inline = weir_actors::blocking::inline_here();
        self.0.block_on(future)
    }
}

/// Loads, simulates and reports: the report, or why not.
pub fn simulate_files(
    defs_path: &Path,
    scenario_path: &Path,
    seed: Option<u64>,
) -> Result<Report, SimFailure> {
    simulate_files_probed(defs_path, scenario_path, seed, None, None)
}

/// [`simulate_files`], with `from_history` models read from the data
/// directory `data` (default: the definitions' own, as `weir run`), and
/// calling `probe` during the span (see [`driver::Probe`]).
pub fn simulate_files_probed(
    defs_path: &Path,
    scenario_path: &Path,
    seed: Option<u64>,
    data: Option<&Path>,
    probe: Option<driver::Probe<'_>>,
) -> Result<Report, SimFailure> {
    let defs = crate::definition::load(defs_path).map_err(|e| bad(e.to_string()))?;
    let mut scenario = resolve::load(scenario_path, &defs).map_err(|e| bad(e.to_string()))?;
    let data = crate::cli::datadir::for_definitions(data, &defs.root);
    let graphs: Vec<_> = defs.graphs.iter().map(|l| l.graph.def()).collect();
    history::fill(&mut scenario, &graphs, &data).map_err(|e| SimFailure {
        code: match e {
            HistoryError::InUse(_) | HistoryError::Store { .. } => EXIT_STORE,
            HistoryError::Missing(_) | HistoryError::NotData(_) => EXIT_BAD_INPUT,
        },
        message: e.to_string(),
    })?;
    let seed = seed.or(scenario.seed).unwrap_or(SEED_DEFAULT);
    let scenario = Arc::new(scenario);
    let dir = Scratch::new().map_err(|e| SimFailure {
        code: EXIT_STORE,
        message: format!("a temporary folder: {e}"),
    })?;
    let rt = runtime().map_err(|e| SimFailure {
        code: EXIT_STORE,
        message: format!("runtime: {e}"),
    })?;
    let observed = rt
        .block_on(driver::simulate_probed(
            &defs,
            scenario.clone(),
            seed,
            dir.path(),
            false,
            probe,
        ))
        .map_err(|e| match e {
            SimError::Input(m) => bad(format!("scenario {}: {m}", scenario_path.display())),
            SimError::Engine(m) | SimError::Invariant(m) => SimFailure {
                code: EXIT_STORE,
                message: m,
            },
        })?;
    drop(rt);
    Ok(report::build(&observed, &scenario, seed))
}

/// What the command prints, and its exit code (the CLI's output layer
/// prints it).
#[derive(Debug, Default)]
pub struct Outcome {
    /// The exit code: 0, or 1 when a check failed.
    pub code: u8,
    /// For stdout: the table or the JSON.
    pub stdout: String,
    /// For stderr: the checks' results under `--json`.
    pub stderr: String,
}

/// Runs the command.
pub fn run(args: SimulateArgs) -> Result<Outcome, SimFailure> {
    // The checks first: a malformed one should not cost a simulation.
    let defs = crate::definition::load(&args.defs).map_err(|e| bad(e.to_string()))?;
    let graphs: Vec<String> = defs
        .graphs
        .iter()
        .map(|g| g.graph.def().name.to_string())
        .collect();
    let checks = parse_checks(&args.checks, &graphs).map_err(bad)?;
    let report = simulate_files_probed(
        &args.defs,
        &args.scenario,
        args.seed,
        args.data.as_deref(),
        None,
    )?;
    let json = to_json(&report);
    if let Some(dir) = &args.report {
        let io = |e: std::io::Error| SimFailure {
            code: EXIT_STORE,
            message: format!("report {}: {e}", dir.display()),
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        std::fs::write(dir.join("report.html"), report::html::render(&report)).map_err(io)?;
        std::fs::write(dir.join("report.json"), &json).map_err(io)?;
    }
    let mut outcome = Outcome::default();
    if args.json {
        outcome.stdout = json;
    } else {
        outcome.stdout = report::table::render(&report);
    }
    let mut failed = 0;
    for (c, v, ok) in evaluate(&report, &checks) {
        // A lateness reads as the duration it is, not its milliseconds.
        let v = match v {
            None => "-".to_string(),
            Some(v) if c.metric.starts_with("lateness") && v >= 0.0 => {
                report::table::words(v as u64)
            }
            Some(v) => v.to_string(),
        };
        let line = format!(
            "check {}: {} (is {v})",
            c.text,
            if ok { "ok" } else { "FAILED" }
        );
        if args.json {
            outcome.stderr.push_str(&line);
            outcome.stderr.push('\n');
        } else {
            outcome.stdout.push_str(&line);
            outcome.stdout.push('\n');
        }
        failed += usize::from(!ok);
    }
    outcome.code = if failed > 0 { EXIT_RUN_FAILED } else { 0 };
    Ok(outcome)
}

/// The report as JSON, pretty, with a final newline.
pub fn to_json(report: &Report) -> String {
    let mut s = serde_json::to_string_pretty(report).expect("a report serialises");
    s.push('\n');
    s
}
