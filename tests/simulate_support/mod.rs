//! Shared helpers of the simulate tests: definitions and scenarios written
//! to a temporary folder, the simulation run in process, and the `weir`
//! binary run for its exit codes.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Output;

use weir::simulate::cli::{simulate_files, to_json};
use weir::simulate::report::Report;

pub const MIN: u64 = 60_000;
pub const H: u64 = 60 * MIN;

/// An hourly graph of one node `work` (pool of 2, 3 attempts 10 s apart,
/// exit code 7 permanent), plus `extra` lines at the graph's level and
/// `node` lines in the node (`target = "db"`: the breaker of `db` opens
/// after 2 failures, for 30 s).
pub fn hourly(extra: &str, node: &str) -> String {
    format!(
        r#"name = "hourly"
partitioning = "hourly"
cron = "0 * * * *"
{extra}

[pools]
default = 2

[targets.db]
failures = 2
cooldown = "30s"

[[nodes]]
name = "work"
{node}
command = ["sh", "-c", "exit 99"]
retry = {{ attempts = 3, initial = "10s", multiplier = 1.0 }}
permanent_exit_codes = [7]
"#
    )
}

/// A folder with `defs` as `g.toml` and `scenario` as `scenario.toml`.
pub struct Case {
    pub dir: tempfile::TempDir,
}

impl Case {
    pub fn new(defs: &str, scenario: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("defs")).unwrap();
        std::fs::write(dir.path().join("defs/g.toml"), defs).unwrap();
        std::fs::write(dir.path().join("scenario.toml"), scenario).unwrap();
        Case { dir }
    }

    pub fn defs(&self) -> PathBuf {
        self.dir.path().join("defs")
    }

    pub fn scenario(&self) -> PathBuf {
        self.dir.path().join("scenario.toml")
    }

    /// Simulates in process; panics on an error.
    pub fn report(&self, seed: u64) -> Report {
        simulate_files(&self.defs(), &self.scenario(), Some(seed))
            .unwrap_or_else(|e| panic!("simulate: {}", e.message))
    }

    /// The `weir simulate` process, with `args` after the scenario.
    pub fn weir(&self, args: &[&str]) -> Output {
        weir_simulate(&self.defs(), &self.scenario(), args)
    }
}

/// The report of `defs` and `scenario` with `seed`, as JSON.
pub fn json(defs: &Path, scenario: &Path, seed: u64) -> String {
    let r = simulate_files(defs, scenario, Some(seed))
        .unwrap_or_else(|e| panic!("simulate {}: {}", scenario.display(), e.message));
    to_json(&r)
}

/// Runs `weir simulate DEFS --scenario SCENARIO ARGS…`.
pub fn weir_simulate(defs: &Path, scenario: &Path, args: &[&str]) -> Output {
    weir_simulate_env(defs, scenario, args, &[])
}

/// [`weir_simulate`] with environment variables `env` set.
pub fn weir_simulate_env(
    defs: &Path,
    scenario: &Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("simulate")
        .arg(defs)
        .arg("--scenario")
        .arg(scenario)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The examples' folders and their scenarios.
pub fn example_scenarios() -> Vec<(PathBuf, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(d.join("scenarios")) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files {
            out.push((d.clone(), f));
        }
    }
    out
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Simulates `scenario` over the definitions in `defs` with `seed` in
/// process, every ticket's enqueue and completions kept (the invariant
/// mode's audit), on a store in a temporary folder: the resolved scenario
/// and what was observed.
pub fn simulate_audited(
    defs: &Path,
    scenario: &Path,
    seed: u64,
) -> Result<
    (
        std::sync::Arc<weir::simulate::scenario::Scenario>,
        weir::simulate::driver::Observed,
    ),
    String,
> {
    let defs = weir::definition::load(defs).map_err(|e| e.to_string())?;
    let sc = std::sync::Arc::new(
        weir::simulate::resolve::load(scenario, &defs).map_err(|e| e.to_string())?,
    );
    let store = tempfile::tempdir().map_err(|e| e.to_string())?;
    let rt = weir::simulate::cli::runtime().map_err(|e| e.to_string())?;
    let obs = rt
        .block_on(weir::simulate::driver::simulate_with(
            &defs,
            sc.clone(),
            seed,
            store.path(),
            true,
        ))
        .map_err(|e| format!("simulate: {e}"))?;
    Ok((sc, obs))
}
