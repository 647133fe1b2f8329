//! `depends_on_past` with real processes (issue #29 item 2): a 5-day
//! backfill of a graph that depends on its past, where day 3 fails. Days 4
//! and 5 wait ("waiting for 2026-11-03"), also across a kill -9 of the
//! engine; after a rerun of day 3 they run, in order. With
//! `wait_for_downstream`, a node also waits for its downstreams of the day
//! before.

mod serve_support;

use std::path::Path;
use std::time::Duration;

use serve_support::{start, wait_for, write_def};

/// Each node appends `<partition> <node>` to `order.log` in the
/// definitions folder after a short sleep (so two that ran at once would
/// interleave), and fails while `fail-<partition>-<node>` exists there.
fn node(name: &str, ups: &[&str]) -> String {
    let ups: Vec<String> = ups.iter().map(|u| format!("\"{u}\"")).collect();
    format!(
        "\n[[nodes]]\nname = \"{name}\"\nupstreams = [{}]\nretry = {{ attempts = 1 }}\ncommand = [\"sh\", \"-c\", \"if [ -e fail-{{partition}}-{{node}} ]; then exit 1; fi; sleep 0.2; echo {{partition}} {{node}} >> order.log\"]\n",
        ups.join(", ")
    )
}

fn order(defs: &Path) -> Vec<String> {
    std::fs::read_to_string(defs.join("order.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_failed_day_holds_the_days_after_it_across_a_kill_until_it_is_rerun() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let data = tmp.path().join("data");
    let mut def = String::from(
        "name = \"past\"\npartitioning = \"daily\"\ndepends_on_past = true\nmax_active_runs = 5\n[pools]\ndefault = 4\n",
    );
    def += &node("load", &[]);
    write_def(&defs, "past", &def);
    std::fs::write(defs.join("fail-2026-11-03-load"), "").unwrap();

    let engine = start(&["serve"], &defs, &data);
    engine.ok(&["backfill", "past", "2026-11-01..2026-11-05"]);
    engine.wait_run("past", "2026-11-03", "failed");
    for day in ["2026-11-04", "2026-11-05"] {
        let status = wait_for(&format!("{day} waiting"), Duration::from_secs(30), || {
            let s = engine.ok(&["status", "past", day]);
            s.contains("waiting for").then_some(s)
        });
        let before = if day == "2026-11-04" {
            "2026-11-03"
        } else {
            "2026-11-04"
        };
        assert!(
            status.contains(&format!("waiting for {before}")),
            "{day}: {status}"
        );
        assert!(status.contains("state active"), "{status}");
        let run = engine.json(&["status", "past", day]);
        assert_eq!(run["nodes"][0]["waiting_for"], before, "{run}");
    }
    assert_eq!(order(&defs), ["2026-11-01 load", "2026-11-02 load"]);
    // The engine's own pool ran them: `local`.
    let run = engine.json(&["status", "past", "2026-11-01"]);
    assert_eq!(run["nodes"][0]["worker"], "local", "{run}");

    // kill -9 while they wait: the restarted engine holds them again.
    drop(engine);
    let engine = start(&["serve"], &defs, &data);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        order(&defs),
        ["2026-11-01 load", "2026-11-02 load"],
        "nothing ran out of order after the restart"
    );
    let status = engine.ok(&["status", "past", "2026-11-05"]);
    assert!(status.contains("waiting for 2026-11-04"), "{status}");

    // Day 3 rerun: it, then 4, then 5 run, in order.
    std::fs::remove_file(defs.join("fail-2026-11-03-load")).unwrap();
    engine.ok(&["rerun", "past", "2026-11-03", "load"]);
    engine.wait_run("past", "2026-11-05", "complete");
    assert_eq!(
        order(&defs),
        [
            "2026-11-01 load",
            "2026-11-02 load",
            "2026-11-03 load",
            "2026-11-04 load",
            "2026-11-05 load",
        ]
    );
}

/// With `wait_for_downstream`, `extract` of a day waits for `extract` and
/// its downstream `load` of the day before; the first day waits for
/// nothing; a node that does not depend on its past runs at once.
#[test]
fn wait_for_downstream_waits_for_the_day_befores_downstreams() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let data = tmp.path().join("data");
    let mut def = String::from(
        "name = \"wfd\"\npartitioning = \"daily\"\nmax_active_runs = 5\n[pools]\ndefault = 4\n",
    );
    def += &node("extract", &[]);
    def += "wait_for_downstream = true\n";
    def += &node("load", &["extract"]);
    def += &node("side", &[]);
    write_def(&defs, "wfd", &def);
    std::fs::write(defs.join("fail-2026-11-01-load"), "").unwrap();
    let engine = start(&["serve"], &defs, &data);
    engine.ok(&["backfill", "wfd", "2026-11-01..2026-11-02"]);
    engine.wait_run("wfd", "2026-11-01", "failed");
    let run = wait_for("day 2 waiting", Duration::from_secs(30), || {
        let run = engine.json(&["status", "wfd", "2026-11-02"]);
        let side_done = run["nodes"]
            .as_array()?
            .iter()
            .any(|n| n["node"] == "side" && n["state"] == "succeeded");
        side_done.then_some(run)
    });
    let extract = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "extract")
        .unwrap()
        .clone();
    assert_eq!(extract["waiting_for"], "2026-11-01", "{run}");
    let mut got = order(&defs);
    got.sort();
    assert_eq!(
        got,
        ["2026-11-01 extract", "2026-11-01 side", "2026-11-02 side"],
        "day 2's extract waits for day 1's load, though day 1's extract succeeded"
    );
    std::fs::remove_file(defs.join("fail-2026-11-01-load")).unwrap();
    engine.ok(&["rerun", "wfd", "2026-11-01", "load"]);
    engine.wait_run("wfd", "2026-11-02", "complete");
    let got = order(&defs);
    let at = |l: &str| got.iter().position(|x| x == l).unwrap();
    assert!(at("2026-11-01 load") < at("2026-11-02 extract"), "{got:?}");
}
