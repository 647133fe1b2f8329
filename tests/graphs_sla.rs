//! SLAs with real processes (issue #29 item 3): a node sleeping past its
//! SLA gives exactly one miss (record, `sla_missed` event, notification,
//! metric), also when the engine is killed (-9) between the miss and its
//! notification; `weir runs --sla-missed` lists the run and `weir status`
//! names the miss.

mod serve_support;

use std::path::Path;
use std::time::Duration;

use serve_support::{start, wait_for, write_def};

fn count(path: &Path, needle: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .matches(needle)
        .count()
}

fn log_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn a_node_past_its_sla_is_one_miss_across_a_kill_between_miss_and_notification() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let data = tmp.path().join("data");
    // One slot: the notification (pool default) waits for the slow node's
    // slot, so the kill falls between the miss and its notification.
    let def = r#"name = "sla"
on_sla_miss = ["sh", "-c", "cat >> misses.log; echo >> misses.log"]
[pools]
default = 1

[[nodes]]
name = "slow"
sla = "1s"
retry = { attempts = 3, initial = "100ms" }
command = ["sh", "-c", "while [ -e hold ]; do sleep 0.05; done"]

[[nodes]]
name = "quick"
upstreams = ["slow"]
sla = "1h"
command = ["true"]
"#;
    write_def(&defs, "sla", def);
    // `slow` runs while `hold` exists: until after the kill.
    std::fs::write(defs.join("hold"), "").unwrap();
    let engine = start(&["serve"], &defs, &data);
    engine.ok(&["start", "sla", "none"]);
    let run = wait_for("the miss", Duration::from_secs(30), || {
        let run = engine.json(&["status", "sla", "none"]);
        (!run["sla_misses"].as_array()?.is_empty()).then_some(run)
    });
    let misses = run["sla_misses"].as_array().unwrap();
    assert_eq!(misses.len(), 1, "{run}");
    assert_eq!(misses[0]["node"], "slow");
    assert_eq!(misses[0]["sla"], "1s");
    assert_eq!(misses[0]["anchor"], "start");
    assert_eq!(misses[0]["state"], "ready", "{run}");
    assert_eq!(
        count(&defs.join("misses.log"), "\"slow\""),
        0,
        "not notified yet"
    );
    // While it runs, status gives its start (from the queue) and where.
    let shown = engine.ok(&["status", "sla", "none"]);
    let row = shown
        .lines()
        .find(|l| l.trim_start().starts_with("slow "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        row.contains("running") && row.contains("local") && row.contains(" 20"),
        "{row}"
    );
    // kill -9 before the notification ran.
    let stderr = engine.stderr.clone();
    drop(engine);
    let first_log = log_of(&stderr);
    let engine = start(&["serve"], &defs, &data);
    std::fs::remove_file(defs.join("hold")).unwrap();
    engine.wait_run("sla", "none", "complete");
    wait_for("the notification", Duration::from_secs(30), || {
        (count(&defs.join("misses.log"), "\"node\": \"slow\"") >= 1).then_some(())
    });
    // A moment for a second one to show, if there were one.
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        count(&defs.join("misses.log"), "\"node\": \"slow\""),
        1,
        "one notification: {}",
        std::fs::read_to_string(defs.join("misses.log")).unwrap_or_default()
    );
    let notified = std::fs::read_to_string(defs.join("misses.log")).unwrap();
    assert!(notified.contains("\"deadline\""), "{notified}");
    // One miss event (it goes with its log line) over both engines.
    let events = first_log.matches("SLA missed").count()
        + log_of(&engine.stderr).matches("SLA missed").count();
    assert_eq!(events, 1, "one sla_missed event across the kill");
    let run = engine.json(&["status", "sla", "none"]);
    assert_eq!(run["sla_misses"].as_array().unwrap().len(), 1, "{run}");
    let metrics = engine.http().get("/metrics").body;
    assert!(
        metrics.contains("weir_sla_misses_total{graph=\"sla\"} 1"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("sla"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let listed = engine.ok(&["runs", "--sla-missed"]);
    assert!(listed.contains("complete (SLA missed)"), "{listed}");
    let shown = engine.ok(&["status", "sla", "none"]);
    assert!(
        shown.contains("SLA missed: node slow not succeeded by"),
        "{shown}"
    );
}

/// A graph's own SLA counts from the end of the window, in its zone; a
/// run that completes in time misses nothing, and `--sla-missed` leaves it
/// out.
#[test]
fn a_run_in_time_misses_nothing_and_is_not_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let data = tmp.path().join("data");
    let def = r#"name = "ontime"
partitioning = "daily"
sla = "1h"

[[nodes]]
name = "a"
command = ["true"]
"#;
    write_def(&defs, "ontime", def);
    let engine = start(&["serve"], &defs, &data);
    // A far-future window's deadline has not passed.
    engine.ok(&["start", "ontime", "2999-01-01"]);
    engine.wait_run("ontime", "2999-01-01", "complete");
    let listed = engine.ok(&["runs", "--sla-missed", "--graph", "ontime"]);
    assert!(!listed.contains("2999-01-01"), "{listed}");
    let run = engine.json(&["status", "ontime", "2999-01-01"]);
    assert!(run.get("sla_misses").is_none(), "{run}");
}
