//! The README's walkthroughs, run in order as a reader would: every `sh`
//! block (but `cargo test`) line by line, in a copy of the repository's
//! examples, `cargo run --release --` standing for this build's `weir`.
//! Long-running commands (`serve`, `worker`) run in the background, as in
//! their own terminals; the fixed ports and `/tmp` folder the text names
//! are swapped for free ones so tests can run side by side. Each command
//! must succeed and do what the text says: the main job settles its week,
//! the served engine backfills the next week, the rerun is submitted, and
//! the workers' run has every node run on the worker.

mod serve_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use serve_support::{free_port, wait_for};

const README: &str = include_str!("../README.md");
const WAIT: Duration = Duration::from_secs(120);

/// The README's `sh` blocks, each as its lines (comments kept).
fn blocks() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for line in README.lines() {
        match (&mut cur, line.trim_start()) {
            (None, l) if l.starts_with("```sh") => cur = Some(Vec::new()),
            (Some(_), l) if l.starts_with("```") => out.push(cur.take().unwrap()),
            (Some(b), l) if !l.is_empty() => b.push(l.to_string()),
            _ => {}
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            if p.file_name().is_some_and(|n| n == ".weir") {
                continue;
            }
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

struct Walk {
    root: PathBuf,
    background: Vec<Child>,
    /// The background process of each replicated member, by raft id.
    members: std::collections::BTreeMap<String, usize>,
    swaps: Vec<(String, String)>,
    /// Each background command and the file its log goes to.
    logs: Vec<(String, PathBuf)>,
}

impl Drop for Walk {
    fn drop(&mut self) {
        for c in &mut self.background {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Walk {
    /// `sh -c LINE` from the root; `exec` for a background command, so
    /// killing the child kills weir.
    fn shell(&self, line: &str, exec: bool) -> Command {
        let mut l = line.replace(
            "cargo run --release --",
            &format!("'{}'", env!("CARGO_BIN_EXE_weir")),
        );
        for (a, b) in &self.swaps {
            l = l.replace(a, b);
        }
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(if exec { format!("exec {l}") } else { l })
            .current_dir(&self.root)
            .env("RUST_LOG", "warn")
            .env_remove("WEIR_DATA_DIR")
            .env_remove("WEIR_ENGINE")
            .env_remove("WEIR_TOKEN");
        c
    }

    /// `weir ARGS --json` from the root, parsed (None when it fails).
    fn json(&self, args: &[&str]) -> Option<Value> {
        let o = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args(args)
            .arg("--json")
            .current_dir(&self.root)
            .env("RUST_LOG", "warn")
            .env_remove("WEIR_DATA_DIR")
            .output()
            .unwrap();
        o.status
            .success()
            .then(|| serde_json::from_slice(&o.stdout).ok())
            .flatten()
    }

    /// The members view a `weir members` line asks for, once a leader
    /// answers it.
    fn members_view(&self, words: &[&str]) -> Value {
        let i = words.iter().position(|w| *w == "members").unwrap();
        let mut args: Vec<String> = words[i..]
            .iter()
            .take_while(|w| !w.starts_with('#'))
            .map(|w| w.to_string())
            .collect();
        for a in &mut args {
            for (from, to) in &self.swaps {
                *a = a.replace(from, to);
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        wait_for("a leader among the members", WAIT, || {
            self.json(&args).filter(|v| {
                v["members"]
                    .as_array()
                    .is_some_and(|m| m.iter().any(|m| m["role"] == "leader"))
            })
        })
    }

    fn wait_settled(&self, graph: &str, partition: &str, data: &[&str]) -> Value {
        wait_for(&format!("{graph} {partition} settled"), WAIT, || {
            let mut args = vec!["status", graph, partition];
            args.extend(data);
            self.json(&args).filter(|v| v["state"] != "active")
        })
    }
}

#[test]
fn the_readmes_walkthroughs_run_in_order_on_a_fresh_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("examples"),
        &root.join("examples"),
    );
    let workers_data = root.join("weir-workers");
    let mut w = Walk {
        root: root.clone(),
        background: Vec::new(),
        members: Default::default(),
        logs: Vec::new(),
        swaps: vec![
            (
                "127.0.0.1:7451".into(),
                format!("127.0.0.1:{}", free_port()),
            ),
            (
                "/tmp/weir-workers".into(),
                workers_data.display().to_string(),
            ),
        ],
    };
    // The replicated engine's members: their API and Raft ports, and
    // their data directories.
    for port in [
        "7461", "7462", "7463", "7471", "7472", "7473", "7501", "7502", "7503",
    ] {
        w.swaps.push((
            format!("127.0.0.1:{port}"),
            format!("127.0.0.1:{}", free_port()),
        ));
    }
    for m in ["m1", "m2", "m3"] {
        w.swaps
            .push((format!("/tmp/weir-{m}"), root.join(m).display().to_string()));
    }
    // The folder the members and workers share for artifacts.
    w.swaps.push((
        "/tmp/weir-artifacts".into(),
        root.join("artifacts").display().to_string(),
    ));
    let blocks = blocks();
    assert_eq!(
        blocks.len(),
        5,
        "the README's sh blocks changed: {blocks:#?}"
    );
    let mut ran = 0;
    for block in blocks.iter().filter(|b| b[0] != "cargo test") {
        for line in block {
            let words: Vec<&str> = line.split_whitespace().collect();
            let cmd = words
                .iter()
                .position(|w| *w == "--")
                .and_then(|i| words.get(i + 1))
                .copied()
                .unwrap_or("");
            match cmd {
                "serve" | "worker" => {
                    let mut c = w.shell(
                        &if cmd == "serve" && !line.contains("--listen") {
                            // The text's default port, 7450, may be taken here.
                            format!("{} --listen 127.0.0.1:0", line.split(" #").next().unwrap())
                        } else {
                            line.clone()
                        },
                        true,
                    );
                    // Its log is kept, and shown if a wait for it fails.
                    let log = w
                        .root
                        .join(format!("background-{}.log", w.background.len()));
                    w.logs.push((line.clone(), log.clone()));
                    let child = c
                        .stdout(Stdio::null())
                        .stderr(std::fs::File::create(&log).unwrap())
                        .spawn()
                        .unwrap();
                    w.background.push(child);
                    if let Some(i) = words.iter().position(|w| *w == "--raft-id") {
                        w.members
                            .insert(words[i + 1].to_string(), w.background.len() - 1);
                    }
                    if cmd == "serve" {
                        let data = match words.iter().position(|w| *w == "--data") {
                            Some(i) => {
                                let mut d = words[i + 1].to_string();
                                for (a, b) in &w.swaps {
                                    d = d.replace(a, b);
                                }
                                PathBuf::from(d)
                            }
                            None => root.join("examples/etl/.weir"),
                        };
                        wait_for("the engine to serve", WAIT, || {
                            data.join("engine.json").exists().then_some(())
                        });
                    }
                }
                _ if words[0] == "pkill" => {
                    // The reader kills the member `weir members` names as
                    // the leader (the line's 1 stands for it), mid-backfill.
                    let v = w.members_view(&[
                        "members",
                        "--data",
                        "/tmp/weir-m2",
                        "--token-file",
                        "token",
                    ]);
                    let leader = v["members"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|m| m["role"] == "leader")
                        .map(|m| m["id"].to_string())
                        .unwrap();
                    let runs = w
                        .json(&replicated_runs(&w))
                        .map(|v| complete(&v))
                        .unwrap_or(0);
                    assert!(runs < 30, "the backfill ended before the kill");
                    let child = &mut w.background[w.members[&leader]];
                    child.kill().unwrap();
                    child.wait().unwrap();
                }
                _ => {
                    // A reader looks at a run once it settled, and reruns a
                    // node of a settled run.
                    if matches!(cmd, "status" | "rerun") {
                        w.wait_settled(words[5], words[6], &[]);
                    }
                    // A reader asks who leads once the members elected.
                    if cmd == "members" {
                        w.members_view(&words);
                    }
                    if cmd == "runs" && line.contains("weir-m2") {
                        w.wait_for_replicated_runs(30);
                    }
                    let o = w.shell(line, false).output().unwrap();
                    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
                    assert!(
                        o.status.success(),
                        "README: {line}\nexit {:?}\nstdout {stdout}\nstderr {}",
                        o.status.code(),
                        String::from_utf8_lossy(&o.stderr)
                    );
                    check(&w, cmd, line, &stdout, &workers_data);
                }
            }
            ran += 1;
        }
    }
    assert_eq!(ran, 20, "every line of the walkthroughs ran");
}

/// `weir runs` of the replicated walkthrough's etl runs, as JSON args.
fn replicated_runs(w: &Walk) -> Vec<&'static str> {
    let _ = w;
    vec![
        "runs",
        "--graph",
        "etl",
        "--limit",
        "100",
        "--data",
        "m2",
        "--token-file",
        "token",
    ]
}

impl Walk {
    /// Waits for `n` runs of the replicated engine to complete; on a
    /// timeout, fails showing the runs' states and the end of each
    /// background process's log.
    fn wait_for_replicated_runs(&self, n: usize) {
        let t0 = std::time::Instant::now();
        let mut last = None;
        while t0.elapsed() < WAIT {
            last = self.json(&replicated_runs(self));
            if last.as_ref().is_some_and(|v| complete(v) == n) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let states: Vec<String> = last
            .as_ref()
            .and_then(|v| v["runs"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .map(|r| format!("{} {}", r["partition"], r["state"]))
            .collect();
        let mut logs = String::new();
        for (line, path) in &self.logs {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            logs.push_str(&format!("\n--- {line}\n{tail}\n"));
        }
        panic!(
            "timed out after {WAIT:?} waiting for {n} replicated runs to complete; runs: {states:?}{logs}"
        );
    }
}

/// Lines of each background log shown when a wait fails.
const LOG_TAIL_LINES: usize = 40;

/// How many runs of a `weir runs --json` answer are complete.
fn complete(v: &Value) -> usize {
    v["runs"]
        .as_array()
        .map_or(0, |r| r.iter().filter(|r| r["state"] == "complete").count())
}

/// What the text says each command does.
fn check(w: &Walk, cmd: &str, line: &str, stdout: &str, workers_data: &Path) {
    match cmd {
        "run" => assert!(
            stdout.contains("7 run(s): 7 settled, 0 failed"),
            "{line}: {stdout}"
        ),
        // The replicated walkthrough's backfill: the kill comes next.
        "backfill" if line.contains("weir-m2") => {}
        "runs" if line.contains("weir-m2") => {
            // Every run completed across the failover (the line ran once
            // they had: see the wait before it).
            assert_eq!(stdout.matches("complete").count(), 30, "{line}: {stdout}");
        }
        "backfill" => {
            for day in 8..=14 {
                let p = format!("2026-11-{day:02}");
                let run = w.wait_settled("etl", &p, &[]);
                assert_eq!(run["state"], "complete", "{p}: {run}");
            }
        }
        "runs" => {
            for day in 1..=14 {
                let p = format!("2026-11-{day:02}");
                assert!(stdout.contains(&p), "{line}: {p} missing:\n{stdout}");
            }
        }
        "status" => assert!(
            stdout.contains("report") && stdout.contains("complete"),
            "{stdout}"
        ),
        "rerun" => {
            assert!(stdout.contains("submitted"), "{line}: {stdout}");
            let run = w.wait_settled("etl", "2026-11-10", &[]);
            let clean = run["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|n| n["node"] == "clean")
                .unwrap();
            assert_eq!(clean["rerun"], 1, "{run}");
        }
        "members" => {
            // Three members, one of them the leader, in a term.
            assert!(stdout.contains("term "), "{line}: {stdout}");
            let words: Vec<&str> = line.split_whitespace().collect();
            let v = w.members_view(&words);
            let roles: Vec<&str> = v["members"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap())
                .collect();
            assert_eq!(roles.len(), 3, "{v}");
            assert_eq!(roles.iter().filter(|r| **r == "leader").count(), 1, "{v}");
            // Every member answers, and the leader's engine runs the
            // example's graph.
            assert!(
                v["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|m| m["api_url"].is_string()),
                "{v}"
            );
        }
        "start" => {
            let data = workers_data.display().to_string();
            let run = w.wait_settled("fanout", "none", &["--data", &data]);
            assert_eq!(run["state"], "complete", "{run}");
            for n in run["nodes"].as_array().unwrap() {
                assert_ne!(
                    n["worker"], "local",
                    "{}: ran in the engine, not on the worker",
                    n["node"]
                );
                assert!(n["worker"].is_string(), "{n}");
            }
        }
        _ => {}
    }
}
