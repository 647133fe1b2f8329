//! `weir bench perf`: every row of issue #45 in one `RESULT` line, each
//! figure beside the limit or goal it is held to, measured in the same run.
//!
//! The scenarios that measure a row already run as child processes of
//! this binary (`weir bench NAME [--quick]`), one after the other, each
//! alone on the machine; their last `RESULT` line is read and the keys of
//! the issue picked or derived from it:
//!
//! | key | from |
//! |---|---|
//! | `chain_ms`, `fsync_ms`, `chain_over_fsync`, `file_fsync_us`, `thread_rtt_us` | `chain`: per node, its floor (a sled commit), and the machine's parts of it: a plain file's append into allocated blocks and its fdatasync, a round trip between two threads |
//! | `burst_p99_ms`, `burst_floor_p99_ms`, `burst_over_floor` | `keys`: the prepared burst of 10,000 keys; 10,000 bare tokio tasks due at one instant |
//! | `recovery_100k_ms`, `recovery_100k_rss_bytes`, `recovery_100k_rss_anon_bytes`, `recovery_100k_raw_sled_open_ms` | `recovery --quick` (100k tickets; sled's own open of the same files) |
//! | `one_worker_per_s`, `one_worker_over_commit` | `sweep`: pool of 1 against one raw commit per job |
//! | `drain_over_raw` | `drain`: against raw sled at weir's batch size |
//! | `replicated_*`, `raft_floor_ms` | `replicated` |
//! | `leader_ceiling_runs_per_s` | `ceiling` |
//!
//! Measured here: `until_idle_overhead_ms`, the wall time of `weir run
//! DEFS --until-idle` on a one-node graph whose command is `true`, minus
//! the run's own duration as `weir run` recorded and printed it (requested
//! to settled), the median of several runs, each on a fresh data folder.
//!
//! A scenario that fails leaves its keys as `failed` (its error and the
//! end of its stderr on stderr); the others are still printed.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::floor::RaftFloor;
use super::report::{result_line, BenchError};

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// A scenario's `RESULT` pairs, or why there are none.
type Outcome = Result<BTreeMap<String, String>, String>;

/// Goal: a chain node costs at most this many fsyncs.
pub const CHAIN_GOAL_OVER_FSYNC: f64 = 1.4;
/// Goal: p99 lateness of a prepared burst of 10,000 keys, ms.
pub const BURST_GOAL_P99_MS: f64 = 10.0;
/// The goal of recovery at 100k tickets is apalis's figure (issue #45,
/// `benches/compare.sh`, 2026-12-04: 7.3–7.5 ms, 12 MiB), not measured
/// here: the peers' rows stay in `benches/compare.sh`.
pub const RECOVERY_100K_APALIS_MS: f64 = 7.5;
/// See [`RECOVERY_100K_APALIS_MS`].
pub const RECOVERY_100K_APALIS_RSS_BYTES: u64 = 12 << 20;
/// Goal: one worker does at least this share of one durable commit per
/// job.
pub const ONE_WORKER_GOAL_OVER_COMMIT: f64 = 0.9;
/// Goal: the drain reaches at least this share of raw sled at weir's
/// batch size.
pub const DRAIN_GOAL_OVER_RAW: f64 = 0.8;

/// The child scenarios, in the order they run, with whether they take
/// `--quick` in a quick run (`recovery --quick` is the 100k-ticket size
/// the issue's row names, in both).
fn children(quick: bool) -> Vec<(&'static str, bool)> {
    vec![
        ("chain", quick),
        ("keys", quick),
        ("recovery", true),
        ("sweep", quick),
        ("drain", quick),
        ("replicated", quick),
        ("ceiling", quick),
    ]
}

/// The pairs of the last `RESULT scenario=NAME …` line of `stdout`.
pub fn parse_result(stdout: &str, scenario: &str) -> Option<BTreeMap<String, String>> {
    let prefix = format!("RESULT scenario={scenario}");
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.split_whitespace().next() == Some("RESULT"))?;
    let rest = line.strip_prefix(&prefix)?;
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    Some(
        rest.split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// Runs `weir bench NAME [--quick]`, its stdout echoed line by line under
/// its name, killed after `timeout`; its `RESULT` pairs.
fn child(scenario: &str, quick: bool, timeout: Duration) -> Outcome {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut args = vec!["bench", scenario];
    if quick {
        args.push("--quick");
    }
    println!("weir {}", args.join(" "));
    let mut proc = Command::new(exe)
        .args(&args)
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    let out = proc.stdout.take().ok_or("no stdout")?;
    let mut err = proc.stderr.take().ok_or("no stderr")?;
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + timeout;
    let mut stdout = String::new();
    let mut timed_out = false;
    loop {
        match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => {
                println!("  {scenario} | {line}");
                stdout.push_str(&line);
                stdout.push('\n');
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                timed_out = true;
                let _ = proc.kill();
                break;
            }
        }
    }
    let status = proc.wait().map_err(|e| e.to_string())?;
    let stderr = stderr.join().unwrap_or_default();
    let tail = || {
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    };
    if timed_out {
        return Err(format!("killed after {timeout:?}\n{}", tail()));
    }
    if !status.success() {
        return Err(format!("exited with {status}\n{}", tail()));
    }
    parse_result(&stdout, scenario).ok_or_else(|| format!("printed no RESULT line\n{}", tail()))
}

/// A duration cell of `weir run`'s summary (`12ms`, `1.5s`), in ms.
pub fn duration_cell_ms(cell: &str) -> Option<f64> {
    if let Some(ms) = cell.strip_suffix("ms") {
        return ms.parse().ok();
    }
    cell.strip_suffix('s')?.parse::<f64>().ok().map(|s| s * 1e3)
}

/// The recorded duration of the run of `graph` in `weir run`'s summary.
pub fn run_time_ms(stdout: &str, graph: &str) -> Option<f64> {
    stdout.lines().find_map(|line| {
        let cells: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == '|' || c == '│')
            .filter(|c| !c.is_empty())
            .collect();
        if cells.first() != Some(&graph) || !cells.contains(&"complete") {
            return None;
        }
        cells.last().and_then(|c| duration_cell_ms(c))
    })
}

/// The median of `v` (the upper middle of an even count).
fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// What `weir run --until-idle` costs beyond its run, ms: (wall, run,
/// wall − run), each the median of `times` runs.
fn until_idle(root: &Path, times: usize) -> Result<(f64, f64, f64), BenchError> {
    let exe = std::env::current_exe().map_err(failed)?;
    let defs = root.join("idle-defs");
    std::fs::create_dir_all(&defs).map_err(failed)?;
    std::fs::write(
        defs.join("idle.toml"),
        "name = \"idle\"\n[[nodes]]\nname = \"one\"\ncommand = [\"true\"]\n",
    )
    .map_err(failed)?;
    let (mut walls, mut runs, mut overs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..times {
        let data = root.join(format!("idle-data-{i}"));
        let t0 = Instant::now();
        let out = Command::new(&exe)
            .arg("run")
            .arg(&defs)
            .arg("--data")
            .arg(&data)
            .arg("--until-idle")
            .env("RUST_LOG", "error")
            .stdin(Stdio::null())
            .output()
            .map_err(failed)?;
        let wall = t0.elapsed().as_secs_f64() * 1e3;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(failed(format!(
                "weir run --until-idle exited with {}: {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let run = run_time_ms(&stdout, "idle").ok_or_else(|| {
            failed(format!(
                "weir run --until-idle printed no time for its run: {stdout}"
            ))
        })?;
        println!(
            "weir run --until-idle #{}: {wall:.0} ms, its run {run:.0} ms",
            i + 1
        );
        walls.push(wall);
        runs.push(run);
        overs.push(wall - run);
        let _ = std::fs::remove_dir_all(&data);
    }
    let m = |v: &mut Vec<f64>| median(v).ok_or_else(|| failed("no run of weir run"));
    Ok((m(&mut walls)?, m(&mut runs)?, m(&mut overs)?))
}

/// What was measured here rather than in a child.
#[derive(Debug, Clone, Default)]
pub struct Direct {
    /// (wall, run, overhead) of `weir run --until-idle`, ms; or why not.
    pub until_idle: Option<Result<(f64, f64, f64), String>>,
    /// The Raft floor, measured here when `replicated` gave none.
    pub floor: Option<Result<RaftFloor, String>>,
}

/// The issue's keys from the children's pairs and the direct figures:
/// every key present, `failed` where its figure could not be had (the
/// reasons, once per scenario, in the second list).
pub fn assemble(
    results: &BTreeMap<&str, Outcome>,
    direct: &Direct,
) -> (Vec<(String, String)>, Vec<String>) {
    let why: RefCell<Vec<String>> = RefCell::new(
        results
            .iter()
            .filter_map(|(scenario, r)| r.as_ref().err().map(|e| format!("{scenario}: {e}")))
            .collect(),
    );
    // A figure of a scenario's pairs; a scenario that ran and lacks it is
    // said (one that failed was said above).
    let get = |scenario: &str, key: &str| -> Option<f64> {
        let Some(Ok(pairs)) = results.get(scenario) else {
            return None;
        };
        let v = pairs
            .get(key)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite());
        if v.is_none() {
            why.borrow_mut()
                .push(format!("{scenario}: its RESULT line has no usable {key}="));
        }
        v
    };
    let fmt = |v: Option<f64>, places: usize| match v {
        Some(v) if v.is_finite() => format!("{v:.places$}"),
        _ => "failed".to_string(),
    };
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut out: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| out.push((k.to_string(), v));

    let chain_ms = get("chain", "per_node_ms");
    let fsync_ms = get("chain", "fsync_floor_us").map(|us| us / 1e3);
    put("chain_ms", fmt(chain_ms, 3));
    put("fsync_ms", fmt(fsync_ms, 3));
    put("chain_over_fsync", fmt(ratio(chain_ms, fsync_ms), 2));
    put("file_fsync_us", fmt(get("chain", "file_fsync_us"), 0));
    put("thread_rtt_us", fmt(get("chain", "thread_rtt_us"), 0));
    put("chain_goal_over_fsync", CHAIN_GOAL_OVER_FSYNC.to_string());

    put("burst_p99_ms", fmt(get("keys", "lateness_p99_ms"), 0));
    put("burst_goal_p99_ms", BURST_GOAL_P99_MS.to_string());
    // The same burst of bare tokio tasks, measured in the same run.
    put("burst_floor_p99_ms", fmt(get("keys", "floor_p99_ms"), 1));
    put(
        "burst_over_floor",
        fmt(get("keys", "lateness_over_floor"), 2),
    );
    put(
        "burst_unprepared_p99_ms",
        fmt(get("keys", "unprepared_p99_ms"), 0),
    );

    put(
        "recovery_100k_ms",
        fmt(get("recovery", "first_dispatch_ms"), 1),
    );
    put(
        "recovery_100k_rss_bytes",
        fmt(get("recovery", "rss_bytes"), 0),
    );
    put(
        "recovery_100k_rss_anon_bytes",
        fmt(get("recovery", "rss_anon_bytes"), 0),
    );
    put(
        "recovery_100k_raw_sled_open_ms",
        fmt(get("recovery", "raw_sled_open_ms"), 1),
    );
    put(
        "recovery_100k_apalis_ms",
        RECOVERY_100K_APALIS_MS.to_string(),
    );
    put(
        "recovery_100k_apalis_rss_bytes",
        RECOVERY_100K_APALIS_RSS_BYTES.to_string(),
    );

    put("one_worker_per_s", fmt(get("sweep", "w1_jobs_per_s"), 0));
    put(
        "one_commit_per_s",
        fmt(get("sweep", "raw_one_commit_jobs_per_s"), 0),
    );
    put(
        "one_worker_over_commit",
        fmt(get("sweep", "one_worker_ratio"), 3),
    );
    put(
        "one_worker_goal_over_commit",
        ONE_WORKER_GOAL_OVER_COMMIT.to_string(),
    );

    put("drain_per_s", fmt(get("drain", "jobs_per_s"), 0));
    put("drain_raw_per_s", fmt(get("drain", "raw_jobs_per_s"), 0));
    put("drain_over_raw", fmt(get("drain", "ratio_to_limit"), 3));
    put("drain_w32_over_raw", fmt(get("sweep", "w32_ratio"), 3));
    put("drain_goal_over_raw", DRAIN_GOAL_OVER_RAW.to_string());

    let idle = match &direct.until_idle {
        Some(Ok(t)) => Some(*t),
        Some(Err(e)) => {
            why.borrow_mut().push(format!("until-idle: {e}"));
            None
        }
        None => None,
    };
    put("until_idle_overhead_ms", fmt(idle.map(|t| t.2), 0));
    put("until_idle_wall_ms", fmt(idle.map(|t| t.0), 0));
    put("until_idle_run_ms", fmt(idle.map(|t| t.1), 0));

    for (key, places) in [
        ("single_chain_ms_per_node", 3),
        ("replicated_chain_ms_per_node", 3),
        ("replicated_chain_ratio", 3),
        ("replicated_chain_ratio_goal", 1),
        ("replication_added_ms_per_node", 3),
        ("replication_added_goal_ms", 1),
        ("single_drain_per_s", 0),
        ("replicated_drain_per_s", 0),
        ("replicated_drain_ratio", 3),
        ("replicated_drain_ratio_goal", 1),
        ("replicated_commit_p50_ms", 3),
        ("replicated_commit_mean_ms", 3),
    ] {
        put(key, fmt(get("replicated", key), places));
    }
    let floor = get("replicated", "raft_floor_ms").or(match &direct.floor {
        Some(Ok(f)) => Some(f.ms()),
        _ => None,
    });
    put("raft_floor_ms", fmt(floor, 3));

    put(
        "leader_ceiling_runs_per_s",
        fmt(get("ceiling", "leader_ceiling_runs_per_s"), 0),
    );
    put(
        "leader_ceiling_nodes_per_s",
        fmt(get("ceiling", "leader_ceiling_nodes_per_s"), 0),
    );
    put(
        "replicated_ceiling_runs_per_s",
        fmt(get("ceiling", "replicated_ceiling_runs_per_s"), 0),
    );
    let mut why = why.into_inner();
    why.dedup();
    (out, why)
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let root = super::procs::Root(super::drain::tempfile_dir()?);
    let timeout = Duration::from_secs(if quick { 600 } else { 3_600 });
    let began = Instant::now();
    let mut results: BTreeMap<&str, Outcome> = BTreeMap::new();
    for (scenario, child_quick) in children(quick) {
        let t0 = Instant::now();
        let r = child(scenario, child_quick, timeout);
        println!(
            "{scenario}: {} in {:.1} s",
            if r.is_ok() { "done" } else { "FAILED" },
            t0.elapsed().as_secs_f64()
        );
        results.insert(scenario, r);
    }
    let times = if quick { 5 } else { 11 };
    let mut direct = Direct {
        until_idle: Some(until_idle(root.path(), times).map_err(|e| e.to_string())),
        floor: None,
    };
    if !matches!(results.get("replicated"), Some(Ok(p)) if p.contains_key("raft_floor_ms")) {
        direct.floor = Some(RaftFloor::measure(root.path()).map_err(|e| e.to_string()));
    }
    let (mut pairs, why) = assemble(&results, &direct);
    for w in &why {
        eprintln!("weir bench perf: {w}");
    }
    pairs.push((
        "secs".to_string(),
        format!("{:.0}", began.elapsed().as_secs_f64()),
    ));
    let borrowed: Vec<(&str, String)> =
        pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    println!("{}", result_line("perf", &borrowed));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_last_result_line_of_the_scenario_is_read() {
        let out = "chain: 100 nodes\nRESULT scenario=chain nodes=100 per_node_ms=0.530\n";
        assert_eq!(
            parse_result(out, "chain"),
            Some(pairs(&[("nodes", "100"), ("per_node_ms", "0.530")]))
        );
        assert_eq!(parse_result(out, "drain"), None, "another scenario's line");
        assert_eq!(
            parse_result("RESULT scenario=chainx a=1\n", "chain"),
            None,
            "a longer name"
        );
        assert_eq!(parse_result("no result\n", "chain"), None);
        let two = "RESULT scenario=chain a=1\nmore\nRESULT scenario=chain a=2\n";
        assert_eq!(parse_result(two, "chain"), Some(pairs(&[("a", "2")])));
    }

    /// `weir run`'s summary table, as comfy-table prints it.
    #[test]
    fn the_run_time_is_read_from_the_summary() {
        let table = "\
+-------+-----------+----------+-------+------+
| graph | partition | state    | nodes | time |
+=============================================+
| idle  | -         | complete | 1/1   | 12ms |
+-------+-----------+----------+-------+------+
1 run(s): 1 settled, 0 failed or cancelled, 0 still active, 0 not started; 290ms
";
        assert_eq!(run_time_ms(table, "idle"), Some(12.0));
        let utf8 = "│ idle  │ -  │ complete │ 1/1 │ 1.5s │";
        assert_eq!(run_time_ms(utf8, "idle"), Some(1_500.0));
        assert_eq!(
            run_time_ms("| idle | - | failed | 0/1 | 3ms |", "idle"),
            None
        );
        assert_eq!(run_time_ms(table, "other"), None);
        for (i, (cell, want)) in [
            ("0ms", Some(0.0)),
            ("999ms", Some(999.0)),
            ("2.0s", Some(2_000.0)),
            ("-", None),
            ("1m05s", None),
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(duration_cell_ms(cell), want, "#{i}: {cell}");
        }
    }

    fn all_ok() -> BTreeMap<&'static str, Outcome> {
        let mut r: BTreeMap<&str, Outcome> = BTreeMap::new();
        r.insert(
            "chain",
            Ok(pairs(&[
                ("per_node_ms", "0.530"),
                ("fsync_floor_us", "250"),
            ])),
        );
        r.insert(
            "keys",
            Ok(pairs(&[
                ("lateness_p99_ms", "48"),
                ("floor_p99_ms", "9.6"),
                ("lateness_over_floor", "5.00"),
                ("unprepared_p99_ms", "2100"),
            ])),
        );
        r.insert(
            "recovery",
            Ok(pairs(&[
                ("first_dispatch_ms", "31.5"),
                ("rss_bytes", "28311552"),
                ("rss_anon_bytes", "9437184"),
                ("raw_sled_open_ms", "12.34"),
            ])),
        );
        r.insert(
            "sweep",
            Ok(pairs(&[
                ("w1_jobs_per_s", "3000"),
                ("raw_one_commit_jobs_per_s", "4000"),
                ("one_worker_ratio", "0.750"),
                ("w32_ratio", "0.550"),
            ])),
        );
        r.insert(
            "drain",
            Ok(pairs(&[
                ("jobs_per_s", "36000"),
                ("raw_jobs_per_s", "57000"),
                ("ratio_to_limit", "0.632"),
            ])),
        );
        r.insert(
            "replicated",
            Ok(pairs(&[
                ("replicated_chain_ratio", "1.700"),
                ("replicated_drain_ratio", "0.650"),
                ("replicated_commit_p50_ms", "1.900"),
                ("raft_floor_ms", "0.550"),
            ])),
        );
        r.insert(
            "ceiling",
            Ok(pairs(&[("leader_ceiling_runs_per_s", "900")])),
        );
        r
    }

    fn value<'a>(out: &'a [(String, String)], k: &str) -> &'a str {
        out.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {k} in {out:?}"))
    }

    /// Every key the issue names is in the line.
    const ISSUE_KEYS: &[&str] = &[
        "chain_ms",
        "chain_over_fsync",
        "burst_p99_ms",
        "recovery_100k_ms",
        "recovery_100k_rss_bytes",
        "one_worker_per_s",
        "one_worker_over_commit",
        "drain_over_raw",
        "until_idle_overhead_ms",
        "replicated_chain_ratio",
        "replicated_drain_ratio",
        "replicated_commit_p50_ms",
        "raft_floor_ms",
        "leader_ceiling_runs_per_s",
    ];

    #[test]
    fn the_issue_keys_are_picked_and_derived() {
        let direct = Direct {
            until_idle: Some(Ok((300.0, 12.0, 288.0))),
            floor: None,
        };
        let (out, why) = assemble(&all_ok(), &direct);
        for k in ISSUE_KEYS {
            assert_ne!(value(&out, k), "failed", "{k}");
        }
        for (i, (k, want)) in [
            ("chain_ms", "0.530"),
            ("fsync_ms", "0.250"),
            ("chain_over_fsync", "2.12"),
            ("burst_p99_ms", "48"),
            ("burst_floor_p99_ms", "9.6"),
            ("burst_over_floor", "5.00"),
            ("recovery_100k_ms", "31.5"),
            ("recovery_100k_rss_bytes", "28311552"),
            ("recovery_100k_rss_anon_bytes", "9437184"),
            ("recovery_100k_raw_sled_open_ms", "12.3"),
            ("one_worker_over_commit", "0.750"),
            ("drain_over_raw", "0.632"),
            ("drain_w32_over_raw", "0.550"),
            ("until_idle_overhead_ms", "288"),
            ("replicated_chain_ratio", "1.700"),
            ("raft_floor_ms", "0.550"),
            ("leader_ceiling_runs_per_s", "900"),
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(value(&out, k), want, "#{i}: {k}");
        }
        // Keys the children did not give (in this table) say so.
        assert_eq!(value(&out, "replicated_ceiling_runs_per_s"), "failed");
        assert!(
            why.iter()
                .any(|w| w.contains("replicated_ceiling_runs_per_s")),
            "{why:?}"
        );
    }

    #[test]
    fn a_failed_scenario_fails_only_its_keys_and_says_why() {
        let mut r = all_ok();
        r.insert("chain", Err("exited with 1".into()));
        r.insert("replicated", Err("no leader".into()));
        let direct = Direct {
            until_idle: Some(Err("no time printed".into())),
            floor: Some(Ok(RaftFloor {
                fsync_ms: 0.25,
                rtt_ms: 0.05,
            })),
        };
        let (out, why) = assemble(&r, &direct);
        for k in [
            "chain_ms",
            "fsync_ms",
            "chain_over_fsync",
            "until_idle_overhead_ms",
            "replicated_chain_ratio",
        ] {
            assert_eq!(value(&out, k), "failed", "{k}");
        }
        // The floor measured here stands in for replicated's.
        assert_eq!(value(&out, "raft_floor_ms"), "0.550");
        assert_eq!(value(&out, "burst_p99_ms"), "48");
        assert!(
            out.iter()
                .all(|(_, v)| !v.contains("NaN") && !v.contains("inf")),
            "{out:?}"
        );
        assert!(why.iter().any(|w| w == "chain: exited with 1"), "{why:?}");
        assert!(why.iter().any(|w| w == "replicated: no leader"), "{why:?}");
        assert!(why.iter().any(|w| w.contains("no time printed")), "{why:?}");
        // A failed scenario is reported once, not once per key.
        assert!(
            !why.iter().any(|w| w.contains("chain: its RESULT")),
            "{why:?}"
        );
    }

    #[test]
    fn a_quick_run_runs_the_children_quick_but_recovery_at_100k() {
        assert!(children(true).iter().all(|(_, q)| *q));
        let full = children(false);
        assert_eq!(
            full.iter()
                .filter(|(_, q)| *q)
                .map(|(s, _)| *s)
                .collect::<Vec<_>>(),
            ["recovery"]
        );
    }
}
