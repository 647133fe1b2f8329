//! `weir bench drain|chain|api|validate|replicated --quick` run and end
//! with their `RESULT` lines (benches/compare.sh reads them). The peers
//! comparison itself is not run here: it is slow and installs packages.

use std::process::Command;

fn last_line(scenario: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["bench", scenario, "--quick"])
        .output()
        .expect("run weir bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "weir bench {scenario} --quick failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().unwrap_or_default().to_string()
}

fn assert_keys(line: &str, scenario: &str, keys: &[&str]) {
    let prefix = format!("RESULT scenario={scenario}");
    assert!(
        line.starts_with(&prefix),
        "last line {line:?} does not start with {prefix:?}"
    );
    for k in keys {
        let found = line.split_whitespace().any(|kv| {
            kv.split_once('=')
                .is_some_and(|(key, v)| key == *k && !v.is_empty())
        });
        assert!(found, "RESULT line {line:?} has no {k}=");
    }
}

#[test]
fn drain_quick_prints_its_result_line() {
    let line = last_line("drain");
    assert_keys(
        &line,
        "drain",
        &["jobs", "jobs_per_s", "raw_jobs_per_s", "ratio_to_limit"],
    );
}

#[test]
fn chain_quick_prints_its_result_line() {
    let line = last_line("chain");
    assert_keys(
        &line,
        "chain",
        &["nodes", "edge_p50_us", "edge_p99_us", "settle_ms"],
    );
}

#[test]
fn api_quick_prints_its_result_line() {
    let line = last_line("api");
    assert_keys(
        &line,
        "api",
        &[
            "runs",
            "list_p99_ms",
            "run_p99_ms",
            "list_per_s",
            "http_overhead",
        ],
    );
}

/// The validation bench ran its file through `weir validate`'s checks after
/// they began refusing unregistered tasks, and failed on every node without
/// a test noticing: its quick form runs here.
#[test]
fn validate_quick_prints_its_result_line() {
    let line = last_line("validate");
    assert_keys(
        &line,
        "validate",
        &["nodes", "validate_ms", "goal_ms", "bytes"],
    );
}

/// `weir bench torture --quick`: 20 SIGKILL cycles of the mixed workload,
/// then a final run; nothing acknowledged is lost, nothing completes twice,
/// no attempt starts after its completion was recorded, no backfill leaks
/// and every open succeeds.
#[test]
fn torture_quick_loses_nothing_and_duplicates_nothing() {
    let line = last_line("torture");
    assert_keys(
        &line,
        "torture",
        &[
            "cycles",
            "restart_p50_ms",
            "restart_p99_ms",
            "restart_goal_ms",
        ],
    );
    let value = |k: &str| {
        line.split_whitespace()
            .find_map(|kv| kv.split_once('=').filter(|(key, _)| *key == k))
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| panic!("RESULT line {line:?} has no {k}="))
    };
    for (k, want) in [
        ("cycles", "20"),
        ("lost", "0"),
        ("duplicated", "0"),
        ("started_after_recorded", "0"),
        ("backfills_leaked", "0"),
        ("open_failures", "0"),
        ("exited", "0"),
        ("finished", "true"),
    ] {
        assert_eq!(value(k), want, "{k} in {line}");
    }
    let jobs: u64 = value("jobs").parse().unwrap();
    assert!(jobs > 0, "the workload enqueued jobs: {line}");
}

#[test]
fn mapped_quick_prints_its_result_line() {
    let line = last_line("mapped");
    assert_keys(
        &line,
        "mapped",
        &["items", "mapped_ms", "fanout_ms", "ratio"],
    );
}

#[test]
fn cluster_quick_prints_its_result_line() {
    let line = last_line("cluster");
    assert_keys(
        &line,
        "cluster",
        &["eff_1", "eff_2", "eff_4", "remote_ratio", "requeue_ms"],
    );
}

/// `weir bench replicated --quick`: a single `weir serve` and a group of
/// three, three alternating rounds (10–20 s); the leader's commit figure
/// is read from its `/metrics` (not `unavailable`).
#[test]
fn replicated_quick_prints_its_result_line() {
    let line = last_line("replicated");
    assert_keys(
        &line,
        "replicated",
        &[
            "single_chain_ms_per_node",
            "replicated_chain_ms_per_node",
            "replicated_chain_ratio",
            "replication_added_ms_per_node",
            "replicated_drain_ratio",
            "replicated_commit_p50_ms",
            "raft_floor_ms",
            "rounds",
        ],
    );
    let p50 = line
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("replicated_commit_p50_ms="))
        .unwrap_or_default();
    assert!(
        p50.parse::<f64>().is_ok_and(|ms| ms > 0.0),
        "the leader's commit p50 is a figure: {line}"
    );
}
