//! The `weir` program end to end: the ETL example to completion, bad
//! definitions, literal arguments, kill -9 and Ctrl-C with resume, a log
//! pipe closed under the run.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn weir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "warn");
    c
}

fn etl() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/etl")
}

fn starts(data: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(data.join("work/starts.log")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .collect()
}

/// Node states of every run, from `weir status --json` (no engine running).
fn node_states(data: &Path, partitions: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for p in partitions {
        let o = weir()
            .args(["status", "--json", "--data"])
            .arg(data)
            .args(["etl", p])
            .output()
            .unwrap();
        let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        for n in run["nodes"].as_array().cloned().unwrap_or_default() {
            out.insert(
                format!("etl/{p}/{}", n["node"].as_str().unwrap_or("")),
                n["state"].as_str().unwrap_or("").to_string(),
            );
        }
    }
    out
}

#[test]
fn etl_example_runs_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let o = weir()
        .args(["run"])
        .arg(etl())
        .arg("--data")
        .arg(&data)
        .args([
            "--backfill",
            "2026-11-01..2026-11-03",
            "--until-idle",
            "--durability",
            "flush",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("3 run(s): 3 settled, 0 failed"), "{stdout}");
    // The steps passed their files as artifacts, kept by content in the
    // data directory's artifact folder.
    let stored: Vec<String> = std::fs::read_dir(data.join("artifacts/artifacts/blake3"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    let find = |what: &str, p: &str, f: &dyn Fn(&str) -> bool| -> String {
        let found: Vec<&String> = stored.iter().filter(|t| f(t)).collect();
        assert_eq!(found.len(), 1, "{what} of {p}: {} stored", found.len());
        found[0].clone()
    };
    for p in ["2026-11-01", "2026-11-02", "2026-11-03"] {
        let report = find("report.txt", p, &|t| {
            t.starts_with(&format!("report for {p} "))
        });
        assert!(
            report.contains("loaded") && report.contains("clean orders"),
            "{report}"
        );
        // raw.csv, and clean.csv with its bad rows dropped, share a
        // header: raw is the longer.
        let raw = stored
            .iter()
            .filter(|t| t.starts_with("id,region,amount\r\n") && t.contains(&format!("\n{p}-")))
            .max_by_key(|t| t.len())
            .unwrap_or_else(|| panic!("no raw.csv of {p} stored"))
            .clone();
        let extracted = raw.lines().count() - 1;
        assert!(
            report.contains(&format!("extracted {extracted} rows")),
            "{report}"
        );
    }
    // Every node ran once, but extract, whose first try fails by design
    // (the example's flaky source), twice: the retry.
    let s = starts(&data);
    let unique: BTreeSet<&String> = s.iter().map(|(_, id)| id).collect();
    assert_eq!(unique.len(), 18);
    assert_eq!(s.len(), 21);
    for (_, id) in &s {
        let times = s.iter().filter(|(_, x)| x == id).count();
        assert_eq!(times, if id.contains("/extract/") { 2 } else { 1 }, "{id}");
    }
    // A second run over the same data dir starts nothing again.
    let o = weir()
        .args(["run"])
        .arg(etl())
        .arg("--data")
        .arg(&data)
        .args([
            "--backfill",
            "2026-11-01..2026-11-03",
            "--until-idle",
            "--durability",
            "flush",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(starts(&data).len(), 21, "completed runs are not run again");
}

#[test]
fn bad_definitions_name_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    // (file content, a fragment the error must hold)
    let cases: &[(&str, &str)] = &[
        ("name = \"x\"\n[[nodes]\nname = \"a\"\n", "x.toml:2"),
        (
            "name = \"x\"\n[[nodes]]\nname = \"a\"\nupstreams = [\"b\"]\ncommand = [\"true\"]\n[[nodes]]\nname = \"b\"\nupstreams = [\"a\"]\ncommand = [\"true\"]\n",
            "cycle a -> b -> a",
        ),
        (
            "name = \"etl\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n[[nodes]]\nname = \"load\"\nupstreams = [\"transfrom\"]\ncommand = [\"true\"]\n",
            "node \"load\": upstream \"transfrom\" is not a node",
        ),
        (
            "name = \"x\"\n[pools]\ncpu = 2\n[[nodes]]\nname = \"a\"\npool = \"gpu\"\ncommand = [\"true\"]\n",
            "pool \"gpu\"",
        ),
        (
            "name = \"x\"\npartitioning = \"daily\"\ncron = \"61 * * * *\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
            "cron expression \"61 * * * *\"",
        ),
        ("name = \"x\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\ntimeout = \"5 parsecs\"\n", "field timeout"),
        ("name = \"a/b\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n", "'/'"),
        ("name = \"x\"\n[[nodes]]\nname = \"a\"\ncommand = []\n", "argv is empty"),
        (
            "name = \"x\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\ntrigger_rule = \"most_success\"\n",
            "trigger rule \"most_success\" is unknown",
        ),
        ("name = \"x\"\n[[nodes]]\nname = \"a\"\ncomand = [\"true\"]\n", "unknown field `comand`"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = dir.path().join("x.toml");
        std::fs::write(&f, text).unwrap();
        for cmd in ["validate", "run"] {
            let mut c = weir();
            c.arg(cmd).arg(&f);
            if cmd == "run" {
                c.arg("--data")
                    .arg(dir.path().join("data"))
                    .arg("--until-idle");
            }
            let o = c.output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "#{i} {cmd}: {err}");
            assert!(
                err.contains("x.toml") && err.contains(want),
                "#{i} {cmd}: error {err:?} lacks {want:?}"
            );
        }
        // Nothing of a bad file is adopted: no store was even created.
        assert!(
            !dir.path().join("data/weir.lock").exists(),
            "#{i}: a bad definition opened the store"
        );
    }
}

#[test]
fn arguments_reach_commands_literally() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("args.txt");
    let def = format!(
        "name = \"lit\"\npartitioning = \"daily\"\n[[nodes]]\nname = \"echo\"\ncommand = [\"python3\", \"-c\", \"import sys; open(sys.argv[1], 'a').write(repr(sys.argv[2:]) + '\\\\n')\", \"{}\", \"{{partition}}\", \"--node={{node}};$(id)\", \"{{run_id}}\"]\n",
        out.display()
    );
    let f = dir.path().join("lit.toml");
    std::fs::write(&f, def).unwrap();
    let o = weir()
        .arg("run")
        .arg(&f)
        .args(["--data"])
        .arg(dir.path().join("data"))
        .args([
            "--partition",
            "2026-11-29",
            "--until-idle",
            "--durability",
            "none",
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let got = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        got.trim(),
        "['2026-11-29', '--node=echo;$(id)', 'lit/2026-11-29/echo/0']"
    );
}

/// kill -9 in the middle of the ETL, then a second `weir run`: every run
/// finishes, and no node whose completion was recorded starts again.
#[test]
fn kill_9_then_resume() {
    let rounds: usize = std::env::var("WEIR_SOAK").map_or(2, |_| 10);
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let partitions = ["2026-11-01", "2026-11-02", "2026-11-03"];
        let mut child = weir()
            .arg("run")
            .arg(etl())
            .arg("--data")
            .arg(&data)
            .args(["--backfill", "2026-11-01..2026-11-03", "--until-idle"])
            .env("ETL_ROUND", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Kill once some steps have started (a varying point each round).
        let want = 3 + round % 6;
        let t0 = Instant::now();
        while starts(&data).len() < want && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let recorded: BTreeSet<String> = node_states(&data, &partitions)
            .into_iter()
            .filter(|(_, s)| s == "succeeded")
            .map(|(id, _)| id)
            .collect();
        let o = weir()
            .arg("run")
            .arg(etl())
            .arg("--data")
            .arg(&data)
            .args(["--backfill", "2026-11-01..2026-11-03", "--until-idle"])
            .env("ETL_ROUND", "2")
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "round {round}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let states = node_states(&data, &partitions);
        assert_eq!(states.len(), 18, "round {round}: {states:?}");
        assert!(
            states.values().all(|s| s == "succeeded"),
            "round {round}: {states:?}"
        );
        for (r, id) in starts(&data) {
            if r == "2" {
                let node_id = id.rsplit_once('/').unwrap().0.to_string();
                assert!(
                    !recorded.contains(&node_id),
                    "round {round}: {id} started again after it was recorded complete"
                );
            }
        }
    }
}

#[test]
fn interrupt_then_resume() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let child = weir()
        .arg("run")
        .arg(etl())
        .arg("--data")
        .arg(&data)
        .args([
            "--backfill",
            "2026-11-01..2026-11-03",
            "--until-idle",
            "--grace-secs",
            "10",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while starts(&data).len() < 2 && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "a graceful interrupt exits 130: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let o = weir()
        .arg("run")
        .arg(etl())
        .arg("--data")
        .arg(&data)
        .args(["--backfill", "2026-11-01..2026-11-03", "--until-idle"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let states = node_states(&data, &["2026-11-01", "2026-11-02", "2026-11-03"]);
    assert_eq!(states.len(), 18);
    assert!(states.values().all(|s| s == "succeeded"), "{states:?}");
}

#[test]
fn fanout_example_runs_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/fanout");
    let o = weir()
        .arg("run")
        .arg(example)
        .arg("--data")
        .arg(dir.path().join("data"))
        .args(["--until-idle", "--durability", "flush"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout.contains("fanout") && stdout.contains("complete") && stdout.contains("10/10"),
        "{stdout}"
    );
}

/// The keyed example: every host of the inventory is checked, the flaky
/// one trips the ssh breaker (work deferred, no attempts spent), and a
/// signal sent (through the API) while the engine runs makes a key due at once.
#[test]
fn hosts_example_checks_keys_trips_the_breaker_and_takes_signals() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/hosts");
    let child = weir()
        .arg("run")
        .arg(&example)
        .arg("--data")
        .arg(&data)
        .args(["--for", "12s", "--durability", "flush"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Once the first checks ran, signal web-2 to run again at once.
    let history = data.join("work/hosts/history.jsonl");
    let t0 = Instant::now();
    while std::fs::read_to_string(&history)
        .unwrap_or_default()
        .lines()
        .count()
        < 3
        && t0.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = weir()
        .args(["signal", "--data"])
        .arg(&data)
        .args(["hosts", "web-2", "--immediate"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let text = std::fs::read_to_string(&history).unwrap();
    for host in ["web-1", "web-2", "db-1"] {
        assert!(
            text.contains(&format!("\"host\": \"{host}\"")),
            "{host} never checked: {text}"
        );
    }
    let web2 = text
        .lines()
        .filter(|l| l.contains("\"host\": \"web-2\""))
        .count();
    assert!(
        web2 >= 2,
        "the signal made web-2 run again: {text}\n{stdout}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("hosts key web-2: due"),
        "the running engine took the signal through its API: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("retries "))
        .unwrap_or("");
    let openings: u64 = summary
        .rsplit(' ')
        .next()
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    assert!(openings >= 1, "the flaky host opened the breaker: {stdout}");
}

/// A relative `--data` (faults #22): tasks run in the definitions' folder,
/// so a relative `WEIR_OUTPUT` or `WEIR_DATA` would point nowhere. The data
/// directory is made absolute once, at the start of every command.
#[test]
fn a_relative_data_directory_works_for_every_task() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("d");
    std::fs::create_dir(&d).unwrap();
    for f in ["etl.toml", "etl.py"] {
        std::fs::copy(etl().join(f), d.join(f)).unwrap();
    }
    let out = weir()
        .current_dir(tmp.path())
        .args([
            "run",
            "d",
            "--data",
            "data",
            "--partition",
            "2026-11-01",
            "--until-idle",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "weir run d --data data: stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        tmp.path().join("data/sled").is_dir(),
        "the store is in ./data"
    );
    // A client command with the same relative --data reads it.
    let status = weir()
        .current_dir(tmp.path())
        .args(["status", "--json", "--data", "data", "etl", "2026-11-01"])
        .output()
        .unwrap();
    assert_eq!(status.status.code(), Some(0));
    let run: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(run["state"], "complete", "{run}");
}

/// A node whose command kills the engine at once (`kill -9 $PPID`), with
/// three attempts: each crash costs one attempt, so across restarts the
/// command runs three times, sees attempts 1, 2 and 3, and the node fails
/// — it never runs a fourth time nor sees an attempt number twice.
#[test]
fn a_task_that_kills_its_engine_runs_at_most_its_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    let seen = dir.path().join("attempts.log");
    std::fs::write(
        defs.join("boom.toml"),
        format!(
            r#"name = "boom"
[[nodes]]
name = "boom"
retry = {{ attempts = 3, initial = "10ms", max = "10ms" }}
command = ["sh", "-c", "echo $WEIR_ATTEMPT >> {}; kill -9 $PPID; sleep 5"]
"#,
            seen.display()
        ),
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut last = None;
    for round in 0..8 {
        let o = weir()
            .arg("run")
            .arg(&defs)
            .arg("--data")
            .arg(&data)
            .arg("--until-idle")
            .output()
            .unwrap();
        last = Some(o.status.code());
        if o.status.code().is_some() {
            // The engine ended by itself: the run settled.
            assert_eq!(
                o.status.code(),
                Some(1),
                "round {round}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            break;
        }
    }
    assert_eq!(last, Some(Some(1)), "the run settles as failed");
    let attempts: Vec<String> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(attempts, ["1", "2", "3"], "WEIR_ATTEMPT of each run");
}

/// Debug logs into a pipe whose reader goes away (`weir run … 2>&1 | head`):
/// the run still ends. A log line that could not be written used to be
/// reported with `eprintln!`, which panics on a closed pipe; in one of
/// sled's I/O threads, between its write and its mark, that left every
/// later flush waiting forever (9 hangs in 10 runs of the release build).
#[test]
fn a_closed_log_pipe_does_not_hang_the_run() {
    use std::io::Read;
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let mut child = weir()
            .arg("run")
            .arg(etl())
            .arg("--data")
            .arg(dir.path().join("data"))
            .arg("--until-idle")
            .env("RUST_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let mut head = [0u8; 4096];
        stderr.read_exact(&mut head).unwrap();
        drop(stderr);
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("round {round}: weir run still runs 120 s after its log pipe closed");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.code().is_some(),
            "round {round}: weir run ended by a signal: {status}"
        );
    }
}
