//! `from_history` duration models end to end: `weir run` records real
//! attempts (a node that sleeps 0.3 s) in the definitions' data directory,
//! then `weir simulate` over the same definitions draws each simulated
//! attempt from those durations. Also its errors: a node with nothing
//! recorded, a folder that is no data directory, a store an engine holds.

mod simulate_support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use simulate_support::*;
use weir_actors::records::done::{DoneRecord, DoneStatus, DONE_PREFIX};

/// `work` sleeps; `other` fails its only attempt, so nothing of it is
/// recorded as succeeded.
const DEFS: &str = r#"name = "hist"
partitioning = "hourly"
cron = "0 * * * *"

[[nodes]]
name = "work"
command = ["sleep", "0.3"]

[[nodes]]
name = "other"
command = ["sh", "-c", "exit 3"]
retry = { attempts = 1 }
"#;

const SPAN6H: &str = "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T06:00:00Z\"\n";

/// How much later than its node's attempt a one-attempt run may settle in
/// virtual time (the engine's own bookkeeping).
const SETTLE_SLACK_MS: u64 = 50;

/// The `weir` program, its state (the data directories it remembers) kept
/// in `state`, and no data directory from the environment.
fn weir(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "warn")
        .env("XDG_STATE_HOME", state)
        .env_remove("WEIR_DATA_DIR");
    c
}

/// Definitions with history: four runs of `hist` recorded by `weir run`
/// in `DEFS/.weir`.
struct Recorded {
    dir: tempfile::TempDir,
}

impl Recorded {
    fn new() -> Recorded {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("defs")).unwrap();
        std::fs::write(dir.path().join("defs/hist.toml"), DEFS).unwrap();
        let r = Recorded { dir };
        let o = weir(&r.state())
            .arg("run")
            .arg(r.defs())
            .args(["--backfill", "2026-11-01T00..2026-11-01T03", "--until-idle"])
            .output()
            .unwrap();
        // `other` fails: exit 1, with every run settled.
        assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
        r
    }

    fn defs(&self) -> PathBuf {
        self.dir.path().join("defs")
    }

    fn data(&self) -> PathBuf {
        self.defs().join(".weir")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `weir simulate` of `scenario` with `args`.
    fn simulate(&self, scenario: &str, args: &[&str]) -> Output {
        let path = self.dir.path().join("scenario.toml");
        std::fs::write(&path, scenario).unwrap();
        weir(&self.state())
            .arg("simulate")
            .arg(self.defs())
            .arg("--scenario")
            .arg(&path)
            .args(args)
            .output()
            .unwrap()
    }

    /// The durations the store recorded for `work`, read here as the test's
    /// own oracle.
    fn work_durations(&self) -> Vec<u64> {
        let (store, _) = weir_actors::store::open_for_inspection(self.data()).unwrap();
        let mut out: Vec<u64> = store
            .scan::<DoneRecord>(DONE_PREFIX)
            .unwrap()
            .into_iter()
            .filter(|(_, r)| r.key.contains("/work/") && r.status == DoneStatus::Succeeded)
            .map(|(_, r)| r.finished_ms - r.started_ms.unwrap())
            .collect();
        out.sort_unstable();
        out
    }
}

/// Each simulated run's duration (settled - started), from the JSON.
fn run_durations(json: &str) -> Vec<u64> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["graphs"]["hist"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["settled_ms"].as_u64().unwrap() - r["started_ms"].as_u64().unwrap())
        .collect()
}

#[test]
fn from_history_draws_the_recorded_durations() {
    let rec = Recorded::new();
    let recorded = rec.work_durations();
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    let (lo, hi) = (recorded[0], recorded[recorded.len() - 1]);
    assert!(lo >= 300, "sleep 0.3 took {lo} ms");

    // A node's own history (the other node short), and a graph's history
    // whose node without any (`other`) falls to the next model (all: 10ms).
    let scenarios = [
        format!(
            "{SPAN6H}[[durations]]\ngraph = \"hist\"\nnode = \"work\"\nfrom_history = true\n\
             [[durations]]\ngraph = \"hist\"\nnode = \"other\"\nfixed = \"10ms\"\n"
        ),
        format!(
            "{SPAN6H}[[durations]]\ngraph = \"hist\"\nfrom_history = true\n\
             [[durations]]\nfixed = \"10ms\"\n"
        ),
    ];
    for (i, scenario) in scenarios.iter().enumerate() {
        let o = rec.simulate(scenario, &["--json", "--seed", "7"]);
        assert_eq!(code(&o), 0, "#{i}: {}", stderr(&o));
        let got = run_durations(&stdout(&o));
        assert_eq!(got.len(), 5, "#{i}: the firings of 01:00 … 05:00: {got:?}");
        for d in &got {
            assert!(
                (lo..=hi + SETTLE_SLACK_MS).contains(d),
                "#{i}: a run of {d} ms, outside the recorded {recorded:?}"
            );
        }
        // Same seed, same draws.
        let again = rec.simulate(scenario, &["--json", "--seed", "7"]);
        assert_eq!(stdout(&o), stdout(&again), "#{i}: the replay differs");
    }

    // The data directory can be named: the same store as --data.
    let data = rec.data();
    let o = rec.simulate(
        &scenarios[0],
        &["--json", "--seed", "7", "--data", data.to_str().unwrap()],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let first = rec.simulate(&scenarios[0], &["--json", "--seed", "7"]);
    assert_eq!(stdout(&o), stdout(&first));
}

#[test]
fn from_history_errors_name_what_is_missing() {
    let rec = Recorded::new();
    // A node with no succeeded attempt: exit 2, naming the node, the
    // graph, the scenario's line and the data directory.
    let o = rec.simulate(
        &format!(
            "{SPAN6H}[[durations]]\ngraph = \"hist\"\nnode = \"other\"\nfrom_history = true\n"
        ),
        &[],
    );
    let e = stderr(&o);
    assert_eq!(code(&o), 2, "{e}");
    for w in [
        "scenario.toml:3",
        "node \"other\" of graph \"hist\"",
        "no recorded durations",
        rec.data().to_str().unwrap(),
    ] {
        assert!(e.contains(w), "want {w:?}: {e}");
    }

    // from_history with another model in the same entry.
    let o = rec.simulate(
        &format!("{SPAN6H}[[durations]]\nfixed = \"1s\"\nfrom_history = true\n"),
        &[],
    );
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("from_history"), "{}", stderr(&o));

    // A folder that is no data directory.
    let empty = rec.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let history = format!("{SPAN6H}[[durations]]\nfrom_history = true\n");
    let o = rec.simulate(&history, &["--data", empty.to_str().unwrap()]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(empty.to_str().unwrap()) && stderr(&o).contains("not a weir data"),
        "{}",
        stderr(&o)
    );

    // A store held (as by a running engine): refused, naming the directory
    // and what to do.
    let held = weir_actors::store::open_for_inspection(rec.data()).unwrap();
    let o = rec.simulate(&history, &[]);
    drop(held);
    let e = stderr(&o);
    assert_eq!(code(&o), 3, "{e}");
    for w in [
        rec.data().to_str().unwrap(),
        "in use",
        "stop the engine",
        "--data",
    ] {
        assert!(e.contains(w), "want {w:?}: {e}");
    }

    // A scenario without from_history never opens the store: it runs while
    // the store is held.
    let held = weir_actors::store::open_for_inspection(rec.data()).unwrap();
    let o = rec.simulate(&format!("{SPAN6H}[[durations]]\nfixed = \"1s\"\n"), &[]);
    drop(held);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}
