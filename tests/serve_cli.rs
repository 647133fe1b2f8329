//! The CLI as the API's client, against real `weir serve` and `weir run`
//! processes: backfill, runs, rerun, cancel, status during a run, and a
//! kill -9 of the engine mid-backfill.

mod serve_support;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use serve_support::*;

fn runs_by_partition(s: &Served, graph: &str) -> BTreeMap<String, String> {
    let page = s.json(&["runs", "--graph", graph, "--limit", "100"]);
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["partition"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn backfill_then_rerun_a_middle_node_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let out = s.ok(&["backfill", "g", "2026-11-01..2026-11-03"]);
    assert!(out.contains("3 windows"), "{out}");
    let days = ["2026-11-01", "2026-11-02", "2026-11-03"];
    wait_for("three complete runs", Duration::from_secs(60), || {
        let runs = runs_by_partition(&s, "g");
        (runs.len() == 3 && runs.values().all(|st| st == "complete")).then_some(())
    });
    // Paging: the hint's cursor is printable and pasteable (it held a
    // control character), and it gives the next page.
    let page = s.ok(&["runs", "--graph", "g", "--limit", "1"]);
    let cursor = page
        .split("--cursor '")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap_or_else(|| panic!("a paging hint in:\n{page}"))
        .to_string();
    assert!(
        !cursor.is_empty()
            && cursor
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "an opaque, pasteable cursor: {cursor:?}"
    );
    assert!(page.contains("2026-11-03"), "{page}");
    let next = s.ok(&["runs", "--graph", "g", "--limit", "1", "--cursor", &cursor]);
    assert!(
        next.contains("2026-11-02") && !next.contains("2026-11-03"),
        "{next}"
    );
    // Newest first, and the human table says the same.
    let page = s.json(&["runs"]);
    let parts: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partition"].as_str().unwrap())
        .collect();
    assert_eq!(parts, ["2026-11-03", "2026-11-02", "2026-11-01"]);
    let table = s.ok(&["runs", "--graph", "g"]);
    assert!(
        table.lines().nth(1).unwrap().contains("2026-11-03"),
        "{table}"
    );
    // Rerun the middle node of one day: it and its downstream move to rerun 1.
    let out = s.ok(&["rerun", "g", "2026-11-02", "b"]);
    assert!(out.contains("rerun submitted as g/2026-11-02/b/1"), "{out}");
    wait_for("the rerun to finish", Duration::from_secs(30), || {
        let st = s.node_states("g", "2026-11-02");
        (st.iter().all(|(_, state, _)| state == "succeeded") && st[2].2 == 1).then_some(())
    });
    let st = s.node_states("g", "2026-11-02");
    assert_eq!(
        st,
        [
            ("a".to_string(), "succeeded".to_string(), 0),
            ("b".to_string(), "succeeded".to_string(), 1),
            ("c".to_string(), "succeeded".to_string(), 1)
        ]
    );
    s.wait_run("g", "2026-11-02", "complete");
    let starts = starts(&defs);
    for d in days {
        let n = |node: &str| starts.iter().filter(|(p, n)| p == d && n == node).count();
        let want_bc = if d == "2026-11-02" { 2 } else { 1 };
        assert_eq!(
            (n("a"), n("b"), n("c")),
            (1, want_bc, want_bc),
            "{d}: {starts:?}"
        );
    }
    // A rerun of a node that has not finished answers with its outcome.
    let o = s.cli(&["rerun", "g", "2026-11-09", "b"]);
    assert_eq!(o.status.code(), Some(2), "no such run: {o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("2026-11-09"),
        "{o:?}"
    );
}

#[test]
fn cancel_an_active_run_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "slow",
        r#"name = "slow"
partitioning = "daily"
[[nodes]]
name = "wait"
command = ["sleep", "30"]
[[nodes]]
name = "after"
upstreams = ["wait"]
command = ["true"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    s.ok(&["start", "slow", "2026-11-01"]);
    wait_for("the node to run", Duration::from_secs(30), || {
        let st = s.node_states("slow", "2026-11-01");
        (st[0].1 == "ready").then_some(())
    });
    let out = s.ok(&["cancel", "slow", "2026-11-01"]);
    assert!(out.contains("cancelled"), "{out}");
    s.wait_run("slow", "2026-11-01", "cancelled");
    let o = s.cli(&["cancel", "slow", "2026-11-01"]);
    assert_eq!(o.status.code(), Some(2), "not active any more: {o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("not active"));
    // A start of an existing run says so.
    let out = s.ok(&["start", "slow", "2026-11-01"]);
    assert!(out.contains("exists already"), "{out}");
}

#[test]
fn status_and_runs_work_during_a_weir_run() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "r",
        r#"name = "r"
partitioning = "daily"
[[nodes]]
name = "slow"
command = ["sleep", "3"]
"#,
    );
    let s = start(
        &["run", "--partition", "2026-11-01", "--until-idle"],
        &defs,
        &dir.path().join("data"),
    );
    let status = s.json(&["status", "r", "2026-11-01"]);
    assert_eq!(status["state"], "active", "{status}");
    let graphs = s.json(&["status"]);
    assert_eq!(graphs[0]["name"], "r");
    let text = s.ok(&["status", "r"]);
    assert!(
        text.contains("2026-11-01") && text.contains("active"),
        "{text}"
    );
    let mut child = s;
    let code = wait_for("weir run to end", Duration::from_secs(60), || {
        child.child.try_wait().unwrap()
    });
    assert_eq!(code.code(), Some(0), "{}", child.stderr());
    assert!(
        !child.data.join("engine.json").exists(),
        "removed at a clean stop"
    );
    // With no engine running, read-only commands read the store; mutating ones say how to start one.
    let status = child.json(&["status", "r", "2026-11-01"]);
    assert_eq!(status["state"], "complete");
    // A graph that is not adopted is an error, not an empty table.
    for args in [
        &["status", "nosuch"][..],
        &["status", "nosuch", "2026-11-01"],
        &["runs", "--graph", "nosuch"],
    ] {
        let o = child.cli(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("graph \"nosuch\" is not adopted") && err.contains("adopted: r"),
            "{args:?}: {err}"
        );
    }
    let o = child.cli(&["start", "r", "2026-11-02"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("no engine is running") && err.contains("weir serve"),
        "{err}"
    );
}

#[test]
fn kill_9_mid_backfill_then_restart_resumes_and_records_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    // A crash counts as an attempt (so a task that kills the engine
    // cannot loop): three attempts let the nodes cut by the kill finish.
    let def = chain_def("k")
        .replace("true\"]", "sleep 0.2\"]")
        .replace("attempts = 1", "attempts = 3");
    write_def(&defs, "k", &def);
    let data = dir.path().join("data");
    let s = start(&["serve"], &defs, &data);
    s.ok(&["backfill", "k", "2026-11-01..2026-11-10"]);
    wait_for("some nodes to run", Duration::from_secs(30), || {
        (starts(&defs).len() >= 5).then_some(())
    });
    let mut s = s;
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    let before = starts(&defs).len();
    assert!(
        data.join("engine.json").exists(),
        "a killed engine leaves its file"
    );
    drop(s);
    // The stale engine file is ignored: a client reads the store.
    let o = weir()
        .args(["runs", "--json", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let s = start(&["serve"], &defs, &data);
    wait_for("ten complete runs", Duration::from_secs(120), || {
        let runs = runs_by_partition(&s, "k");
        (runs.len() == 10 && runs.values().all(|st| st == "complete")).then_some(())
    });
    let starts = starts(&defs);
    assert!(starts.len() > before, "the backfill resumed");
    let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
    for st in &starts {
        *counts.entry(st.clone()).or_default() += 1;
    }
    assert_eq!(counts.len(), 30, "every node of every day ran: {counts:?}");
    // At least once: only attempts in flight at the kill (at most the 4
    // slots) ran again.
    let again: usize = counts.values().map(|c| c - 1).sum();
    assert!(again <= 4, "{again} nodes ran twice: {counts:?}");
    // One record per node, each at rerun 0: nothing recorded twice.
    for d in 1..=10 {
        let p = format!("2026-11-{d:02}");
        for (node, state, rerun) in s.node_states("k", &p) {
            assert_eq!((state.as_str(), rerun), ("succeeded", 0), "{p} {node}");
        }
    }
    let v: Value = s.json(&["runs", "--graph", "k", "--limit", "100"]);
    assert_eq!(v["runs"].as_array().unwrap().len(), 10);
}

/// A key that is a dot segment (`.`) reaches the engine as itself (faults
/// #20): the client escapes it, where the URL would drop it, and the answer
/// is the engine's error with its message, not a bare `HTTP 404:`.
#[test]
fn a_dot_key_reaches_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let key = ".";
    let o = s.cli(&["signal", "--add", "g", key]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "signal {key:?}: {stderr}");
    assert!(
        stderr.contains("keyed") || stderr.contains("key"),
        "signal {key:?}: the engine's own message: {stderr}"
    );
    assert!(
        !stderr.trim_end().ends_with("HTTP 404:"),
        "signal {key:?}: {stderr}"
    );
}

/// `weir reconcile GRAPH [PARTITION]` (faults #11): a pass now, its report
/// printed; over every active run of the graph, or one partition's.
#[test]
fn reconcile_runs_a_pass_now_and_prints_its_report() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    // a blocks until the file `go` exists in the definitions folder.
    write_def(
        &defs,
        "r",
        "name = \"r\"\npartitioning = \"daily\"\n[[nodes]]\nname = \"a\"\n\
         command = [\"sh\", \"-c\", \"while [ ! -e go ]; do sleep 0.05; done\"]\n\
         [[nodes]]\nname = \"b\"\nupstreams = [\"a\"]\ncommand = [\"true\"]\n",
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    s.ok(&["start", "r", "2026-11-01"]);
    let all = s.json(&["reconcile", "r"]);
    assert_eq!(all["active_runs"], 1, "{all}");
    assert_eq!(
        all["submitted"], 0,
        "a is live: nothing new to submit: {all}"
    );
    let other = s.json(&["reconcile", "r", "2026-11-02"]);
    assert_eq!(other["active_runs"], 0, "no run of that partition: {other}");
    let text = s.ok(&["reconcile", "r", "2026-11-01"]);
    assert!(
        text.contains("reconciled r 2026-11-01: 1 active run(s) visited, 0 node(s) submitted"),
        "{text}"
    );
    std::fs::write(defs.join("go"), "").unwrap();
    s.wait_run("r", "2026-11-01", "complete");
    let after = s.json(&["reconcile", "r"]);
    assert_eq!(after["active_runs"], 0, "{after}");
}

/// Every accepted key keeps its logs (faults #16, #17): a key of 300
/// characters (its log folder `key=<key>@<instant>` would pass the 255-byte
/// file name limit) and a key with a backslash both run, and `weir logs`
/// reads their attempt's lines.
#[test]
fn long_and_backslash_keys_keep_their_logs() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("keys.txt"), "").unwrap();
    write_def(
        &defs,
        "k",
        "name = \"k\"\npartitioning = \"keyed\"\n[keyed]\ninventory = { file = \"keys.txt\" }\n\
         interval = \"1h\"\n[[nodes]]\nname = \"a\"\n\
         command = [\"sh\", \"-c\", \"echo ran for $WEIR_PARTITION | cut -c1-20\"]\n",
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let long = "k".repeat(300);
    for key in [long.as_str(), "back\\slash"] {
        s.ok(&["signal", "--add", "--immediate", "k", key]);
    }
    let runs = wait_for("both keys' runs", Duration::from_secs(60), || {
        let v = s.json(&["runs", "--graph", "k"]);
        let done: Vec<String> = v["runs"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|r| r["state"] == "complete")
            .map(|r| r["partition"].as_str().unwrap_or("").to_string())
            .collect();
        (done.len() == 2).then_some(done)
    });
    for p in runs {
        let o = s.cli(&["logs", "k", &p, "a"]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(o.status.code(), Some(0), "logs of {p:?}: {stderr}");
        assert!(stdout.contains("ran for key="), "logs of {p:?}: {stdout}");
    }
}

/// A mapped node's member that runs shows as running with its attempt,
/// in the API and `weir status` (faults #6): the store has no record of a
/// member before it ends, and it showed as pending with 0 attempts. Then
/// cancel settles the node and every member as cancelled.
#[test]
fn a_running_member_shows_as_running_and_cancel_settles_it() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "m",
        r#"name = "m"
[[nodes]]
name = "each"
items = [0, 1, 2]
max_active_members = 1
command = ["sleep", "30"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    s.ok(&["start", "m", "none"]);
    let member0 = || {
        let run = s.http().get("/api/v1/graphs/m/runs/none").json();
        let each = run["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == "each")
            .cloned()
            .unwrap();
        each["members"]["list"][0].clone()
    };
    let m0 = wait_for("member 0 to run", Duration::from_secs(30), || {
        let m = member0();
        (m["state"] == "running").then_some(m)
    });
    assert_eq!(m0["attempts"], 1, "{m0}");
    let text = s.ok(&["status", "m", "none"]);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("0 ") && l.contains("running"))
        .unwrap_or_else(|| panic!("member 0 running in the member table:\n{text}"));
    assert!(row.contains(" 1 "), "attempt 1: {row}");
    s.ok(&["cancel", "m", "none"]);
    s.wait_run("m", "none", "cancelled");
    let m0 = member0();
    assert_eq!(m0["state"], "cancelled", "{m0}");
}
