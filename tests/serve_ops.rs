//! The operator's commands against a real `weir serve`: logs, clear, mark,
//! dead letters, pause, trigger, keys and signals, breakers.

mod serve_support;

use std::time::Duration;

use serde_json::Value;
use serve_support::*;

fn serve_chain(name: &str) -> (tempfile::TempDir, std::path::PathBuf, Served) {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, name, &chain_def(name));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    (dir, defs, s)
}

#[test]
fn logs_print_a_nodes_output_and_follow_a_running_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    write_def(
        &defs,
        "slow",
        r#"name = "slow"
[[nodes]]
name = "ticker"
command = ["sh", "-c", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done; echo oops >&2"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "complete");
    let out = s.ok(&["logs", "g", "2026-11-01", "a"]);
    assert!(out.contains("out  hello from a 2026-11-01"), "{out}");
    let lines: Vec<Value> = s
        .ok(&["logs", "g", "2026-11-01", "b", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["stream"], "out");
    assert_eq!(lines[0]["text"], "hello from b 2026-11-01");
    // The node route has its attempts, with the exit code.
    let node = s
        .http()
        .get("/api/v1/graphs/g/runs/2026-11-01/nodes/b")
        .json();
    assert_eq!(node["attempt_log"][0]["exit_code"], 0, "{node}");
    // Follow a running attempt: lines arrive while it runs, and the
    // command ends when the attempt does.
    s.ok(&["start", "slow", "none"]);
    wait_for(
        "the attempt to start logging",
        Duration::from_secs(20),
        || {
            let o = s.cli(&["logs", "slow", "none", "ticker"]);
            String::from_utf8_lossy(&o.stdout)
                .contains("tick 1")
                .then_some(())
        },
    );
    let t0 = std::time::Instant::now();
    let out = s.ok(&["logs", "slow", "none", "ticker", "--follow"]);
    assert!(
        t0.elapsed() > Duration::from_millis(300),
        "it waited for the attempt"
    );
    for i in 1..=6 {
        assert!(out.contains(&format!("tick {i}")), "{out}");
    }
    assert!(out.contains("err  oops"), "{out}");
}

#[test]
fn clear_reruns_the_failed_node_and_its_downstreams() {
    let (_dir, defs, s) = serve_chain("g");
    std::fs::write(defs.join("fail-b"), "").unwrap();
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "failed");
    let states = s.node_states("g", "2026-11-01");
    assert_eq!(states[1].1, "failed");
    assert_eq!(states[2].1, "upstream_failed");
    // The human status names the failure and its stderr.
    let text = s.ok(&["status", "g", "2026-11-01"]);
    assert!(
        text.contains("b failed:") && text.contains("b is failing"),
        "{text}"
    );
    std::fs::remove_file(defs.join("fail-b")).unwrap();
    let out = s.ok(&["clear", "g", "2026-11-01"]);
    assert!(out.contains("b: rerun submitted"), "{out}");
    s.wait_run("g", "2026-11-01", "complete");
    let states = s.node_states("g", "2026-11-01");
    assert_eq!(
        states,
        [
            ("a".to_string(), "succeeded".to_string(), 0),
            ("b".to_string(), "succeeded".to_string(), 1),
            ("c".to_string(), "succeeded".to_string(), 1)
        ]
    );
}

#[test]
fn mark_a_failed_node_succeeded_lets_its_downstream_run() {
    let (_dir, defs, s) = serve_chain("g");
    std::fs::write(defs.join("fail-b"), "").unwrap();
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "failed");
    let marked = s.json(&["mark", "g", "2026-11-01", "b", "success"]);
    assert_eq!(marked["state"], "succeeded", "{marked}");
    s.wait_run("g", "2026-11-01", "complete");
    let states = s.node_states("g", "2026-11-01");
    assert_eq!(states[1].1, "succeeded");
    assert_eq!(states[2].1, "succeeded");
    // c ran; b did not run again.
    let starts = starts(&defs);
    assert_eq!(starts.iter().filter(|(_, n)| n == "b").count(), 1);
    assert_eq!(starts.iter().filter(|(_, n)| n == "c").count(), 1);
    // A bad state is refused.
    let o = s.cli(&["mark", "g", "2026-11-01", "b", "maybe"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn dead_letters_are_listed_and_requeued() {
    let (_dir, defs, s) = serve_chain("g");
    std::fs::write(defs.join("fail-b"), "").unwrap();
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "failed");
    let page = s.json(&["dead"]);
    let letters = page["letters"].as_array().unwrap();
    assert_eq!(letters.len(), 1, "{page}");
    assert_eq!(letters[0]["key"], "g/2026-11-01/b/0");
    assert!(
        letters[0]["error"]
            .as_str()
            .unwrap()
            .contains("b is failing"),
        "{page}"
    );
    let table = s.ok(&["dead"]);
    assert!(table.contains("g/2026-11-01/b/0"), "{table}");
    std::fs::remove_file(defs.join("fail-b")).unwrap();
    s.ok(&["dead", "--requeue", "g/2026-11-01/b/0"]);
    s.wait_run("g", "2026-11-01", "complete");
    assert!(s.ok(&["dead"]).contains("no dead letters"));
    let o = s.cli(&["dead", "--requeue", "nosuchkey"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuchkey"));
}

#[test]
fn pause_stops_cron_firings_until_unpause() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "c",
        r#"name = "c"
partitioning = "hourly"
cron = "* * * * * *"
[[nodes]]
name = "n"
command = ["true"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let http = s.http();
    let last = || {
        http.get("/api/v1/graphs/c/backfills").json()["cron_last_firing_ms"]
            .as_u64()
            .unwrap_or(0)
    };
    let first = wait_for("a firing", Duration::from_secs(10), || {
        (last() > 0).then(last)
    });
    wait_for("the next firing", Duration::from_secs(10), || {
        (last() > first).then_some(())
    });
    let out = s.ok(&["pause", "c"]);
    assert!(out.contains("c: paused"), "{out}");
    let graphs = s.json(&["status"]);
    assert_eq!(graphs[0]["paused"], true);
    std::thread::sleep(Duration::from_millis(300));
    let paused_at = last();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(last(), paused_at, "no firing is handled while paused");
    s.ok(&["unpause", "c"]);
    wait_for("firings again", Duration::from_secs(10), || {
        (last() > paused_at).then_some(())
    });
    assert!(s.ok(&["unpause", "c"]).contains("already"));
}

#[test]
fn trigger_starts_the_newest_closed_window() {
    let (_dir, _defs, s) = serve_chain("g");
    let v = s.json(&["trigger", "g"]);
    let started = v["started"].as_array().unwrap();
    assert_eq!(started.len(), 1, "{v}");
    let p = started[0].as_str().unwrap().to_string();
    s.wait_run("g", &p, "complete");
    // Again: the run exists.
    let v = s.json(&["trigger", "g"]);
    assert_eq!(v["existing"][0].as_str(), Some(p.as_str()), "{v}");
}

#[test]
fn keys_and_signals_of_a_keyed_graph() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("hosts.txt"), "web-1\nweb-2\n").unwrap();
    write_def(
        &defs,
        "h",
        r#"name = "h"
partitioning = "keyed"
[keyed]
inventory = { file = "hosts.txt" }
refresh = "1h"
interval = "1h"
retry_interval = "1h"
jitter = "0s"
[[nodes]]
name = "check"
command = ["sh", "-c", "echo \"$WEIR_PARTITION\" >> checks.log"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let keys = s.json(&["keys", "h"]);
    let names: Vec<&str> = keys
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["key"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["web-1", "web-2"]);
    let table = s.ok(&["keys", "h"]);
    assert!(table.contains("web-2"), "{table}");
    // An unknown key is refused unless --add.
    let o = s.cli(&["signal", "h", "db-9", "--immediate"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("db-9") && err.contains("with --add"), "{o:?}");
    let out = s.ok(&["signal", "h", "db-9", "--immediate", "--add"]);
    assert!(out.contains("h key db-9: due"), "{out}");
    wait_for("db-9 to be checked", Duration::from_secs(20), || {
        std::fs::read_to_string(defs.join("checks.log"))
            .unwrap_or_default()
            .contains("db-9")
            .then_some(())
    });
    // A keyed run is named by its key: its newest run.
    let run = s.json(&["status", "h", "db-9"]);
    assert!(
        run["partition"].as_str().unwrap().starts_with("key=db-9@"),
        "{run}"
    );
    s.wait_run("h", "db-9", "complete");
    let table = s.ok(&["runs", "--graph", "h"]);
    let header = table.lines().next().unwrap();
    assert!(header.contains("DUE"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("db-9")),
        "the key, not key=db-9@…: {table}"
    );
    let o = s.cli(&["status", "h", "nosuchkey"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    // A key with markup in it is a literal name, kept and shown as written.
    s.ok(&["signal", "h", "<img src=x onerror=alert(1)>", "--add"]);
    let keys = s.json(&["keys", "h"]);
    assert!(
        keys.as_array()
            .unwrap()
            .iter()
            .any(|k| k["key"] == "<img src=x onerror=alert(1)>"),
        "{keys}"
    );
}

#[test]
fn breakers_are_listed_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "b",
        r#"name = "b"
[targets.api]
failures = 1
cooldown = "1h"
[[nodes]]
name = "call"
target = "api"
retry = { attempts = 1 }
command = ["false"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    s.ok(&["start", "b", "none"]);
    s.wait_run("b", "none", "failed");
    let rows = s.json(&["breakers"]);
    assert_eq!(rows[0]["target"], "api", "{rows}");
    assert_eq!(rows[0]["state"], "open", "{rows}");
    let out = s.ok(&["breakers", "--reset", "api"]);
    assert!(out.contains("api: closed"), "{out}");
    let rows = s.json(&["breakers"]);
    assert_eq!(rows[0]["state"], "closed", "{rows}");
    let o = s.cli(&["breakers", "--reset", "nosuch"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}
