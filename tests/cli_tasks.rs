//! The `weir` program with params, templates and notifications (issue
//! #18), as real processes: `weir start --param` sets a run's params,
//! refuses undeclared ones (exit 2, naming them, over HTTP 400 too), and
//! `weir status`, `--json` and the API show them, also after the engine
//! restarts; `weir run --until-idle` runs a failed run's `on_failure`
//! before it exits, with the summary on stdin; `weir validate` names
//! every bad reference with its file, line, graph and node.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{start, weir, write_def};

const DEF: &str = r#"
name = "pg"
partitioning = "daily"

[params]
region = "eu"
limit = "10"

[[nodes]]
name = "show"
command = ["sh", "-c", "printf '%s' \"$1\" > \"$WEIR_OUTPUT\"", "sh", "{params.region}/{params.limit}/{partition.start}"]
"#;

#[test]
fn start_with_params_status_shows_them_and_undeclared_ones_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(&defs, "pg", DEF);
    let data = tmp.path().join("data");
    let served = start(&["serve"], &defs, &data);

    let out = served.ok(&[
        "start",
        "pg",
        "2026-11-01",
        "--param",
        "region=us west",
        "--param",
        "limit=3",
    ]);
    assert!(out.contains("pg 2026-11-01: started"), "{out}");
    served.wait_run("pg", "2026-11-01", "complete");
    let run = served.json(&["status", "pg", "2026-11-01"]);
    assert_eq!(run["params"], json!({"limit": "3", "region": "us west"}));
    assert_eq!(
        run["nodes"][0]["output_text"],
        "us west/3/2026-11-01T00:00:00Z"
    );
    let shown = served.ok(&["status", "pg", "2026-11-01"]);
    assert!(
        shown.contains("params limit=3  region=\"us west\""),
        "{shown}"
    );
    // The API's run view has them; an undeclared name is a 400 naming it.
    let api = served.http().get("/api/v1/graphs/pg/runs/2026-11-01");
    assert_eq!(api.status, 200, "{}", api.body);
    assert_eq!(api.json()["params"]["region"], "us west");
    let refused = served.http().post(
        "/api/v1/graphs/pg/runs",
        &json!({"partitions": ["2026-11-02"], "params": {"zone": "a"}}),
    );
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("param \"zone\" is not a param of graph \"pg\" (its params: limit, region)"),
        "{}",
        refused.body
    );
    // The CLI: exit 2, naming it; nothing started.
    for (args, want) in [
        (
            vec!["start", "pg", "2026-11-02", "--param", "zone=a"],
            "param \"zone\" is not a param of graph \"pg\"",
        ),
        (
            vec!["start", "pg", "2026-11-02", "--param", "region"],
            "--param \"region\": write NAME=VALUE",
        ),
        (
            vec![
                "start",
                "pg",
                "2026-11-02",
                "--param",
                "limit=1",
                "--param",
                "limit=2",
            ],
            "--param limit: given twice",
        ),
    ] {
        let o = served.cli(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    assert_eq!(
        served.cli(&["status", "pg", "2026-11-02"]).status.code(),
        Some(2),
        "no run of 2026-11-02 was started"
    );
    // A run started without --param has the defaults.
    served.ok(&["start", "pg", "2026-11-03"]);
    served.wait_run("pg", "2026-11-03", "complete");
    let run = served.json(&["status", "pg", "2026-11-03"]);
    assert_eq!(run["params"], json!({"limit": "10", "region": "eu"}));

    // After the engine stops, the store still says so.
    drop(served);
    let o = weir()
        .args(["status", "pg", "2026-11-01", "--json", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(run["params"], json!({"limit": "3", "region": "us west"}));
}

#[test]
fn run_until_idle_runs_on_failure_with_the_summary_before_it_exits() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let file = write_def(
        &defs,
        "nf",
        r#"
name = "nf"
on_failure = ["sh", "-c", "cat > \"summary-$WEIR_RUN_STATE-$1.json\"", "sh", "{graph}"]

[[nodes]]
name = "fine"
command = ["true"]

[[nodes]]
name = "broken"
upstreams = ["fine"]
command = ["sh", "-c", "echo 'disk on fire' >&2; exit 4"]
retry = { attempts = 1 }
"#,
    );
    let data = tmp.path().join("data");
    let o = weir()
        .args(["run", "--until-idle", "--durability", "flush", "--data"])
        .arg(&data)
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(defs.join("summary-failed-nf.json"))
        .expect("on_failure ran before weir run exited");
    let s: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(s["graph"], "nf");
    assert_eq!(s["partition"], "none");
    assert_eq!(s["state"], "failed");
    let broken = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "broken")
        .unwrap();
    assert_eq!(broken["state"], "failed");
    assert!(
        broken["error"].as_str().unwrap().contains("disk on fire"),
        "{broken}"
    );
}

#[test]
fn validate_names_every_bad_reference_with_its_place() {
    let tmp = tempfile::tempdir().unwrap();
    let file = write_def(
        tmp.path(),
        "refs",
        r#"name = "refs"

[params]
region = "eu"

[[nodes]]
name = "a"
command = ["true"]

[[nodes]]
name = "b"
command = ["echo", "{upstream.a.output}"]

[[nodes]]
name = "c"
upstreams = ["a"]
command = ["echo", "{upstream.nope.output}", "{params.zone}", "{partition.start}"]
env = { X = "{upstream.a.output.rows[x]}" }

[[nodes]]
name = "d"
upstreams = ["a"]
http = { url = "https://h/{upstream.a.output.id}", body = "{upstream.a.outptu}" }
"#,
    );
    let o = weir().arg("validate").arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    let place = |line: usize, node: &str| {
        format!("refs.toml:{line}: graph \"refs\": node \"{node}\": field ")
    };
    for (line, node, want) in [
        (10, "b", "command[1]: template \"{upstream.a.output}\": {upstream.a.output}: node \"a\" is not an upstream of \"b\" (its upstreams: none); add it to upstreams"),
        (14, "c", "command[1]: template \"{upstream.nope.output}\": {upstream.nope.output}: node \"nope\" is not a node of the graph"),
        (14, "c", "command[2]: template \"{params.zone}\": {params.zone}: param \"zone\" is not declared under [params] (declared: region)"),
        (14, "c", "command[3]: template \"{partition.start}\": {partition.start}: the graph's partitioning is none, which has no time windows"),
        (14, "c", "env.X: template \"{upstream.a.output.rows[x]}\", at byte 0: […] holds an index"),
        (20, "d", "http.body: template \"{upstream.a.outptu}\", at byte 0: after {upstream.a, write .output"),
    ] {
        let want = format!("{}{want}", place(line, node));
        assert!(err.contains(&want), "missing\n{want}\nin\n{err}");
    }
    assert_eq!(err.lines().count(), 6, "one line a fault:\n{err}");
}

/// Copies `examples/NAME` into `dir` (its commands write beside their
/// definitions, which must not be the source tree's folder).
fn example_copy(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    let to = dir.join(name);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
    to
}

/// The output of `weir ARGS --data DATA`, which must exit 0.
fn stored(args: &[&str], data: &std::path::Path) -> String {
    let o = weir().args(args).arg("--data").arg(data).output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// Runs a copy of examples/orders under `tmp` with `weir run --until-idle`
/// and `args`, which must exit 0; its data directory.
fn run_orders(tmp: &std::path::Path, args: &[&str]) -> std::path::PathBuf {
    let defs = example_copy("orders", tmp);
    let data = tmp.join("data");
    let o = weir()
        .args(["run", "--until-idle", "--durability", "flush"])
        .args(args)
        .arg("--data")
        .arg(&data)
        .arg(&defs)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    data
}

/// examples/orders as the README runs it: `weir run --until-idle` waits
/// for the sensor, the mapped node and the asset's summary, then `weir
/// status` lists the mapped node's members, `weir logs --member` shows a
/// member's lines and `weir assets` the lineage with its materialization.
#[test]
fn the_orders_example_runs_and_status_logs_and_assets_show_it() {
    let tmp = tempfile::tempdir().unwrap();
    let data = run_orders(tmp.path(), &["--partition", "2026-11-02"]);

    let run: Value = serde_json::from_str(&stored(
        &["status", "orders", "2026-11-02", "--json"],
        &data,
    ))
    .unwrap();
    assert_eq!(run["state"], "complete");
    let count = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "count")
        .unwrap();
    assert_eq!(count["kind"], "mapped");
    assert_eq!(count["members"]["total"], 3);
    assert_eq!(count["members"]["succeeded"], 3);
    let landed = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "landed")
        .unwrap();
    assert_eq!(landed["kind"], "sensor");
    assert!(
        landed["pokes"].as_u64().unwrap() >= 1,
        "the export lands 1.5 s after the first check: {landed}"
    );

    let text = stored(&["status", "orders", "2026-11-02"], &data);
    assert!(
        text.contains("count (mapped, rerun 0): 3 members: 3 succeeded, 0 failed"),
        "{text}"
    );
    assert!(text.contains("landed (sensor): "), "{text}");

    let log = stored(
        &["logs", "orders", "2026-11-02", "count", "--member", "1"],
        &data,
    );
    assert!(log.contains("eu: "), "member 1 counts eu: {log}");
    assert!(!log.contains("us: "), "only member 1's lines: {log}");

    let assets: Value = serde_json::from_str(&stored(&["assets", "--json"], &data)).unwrap();
    let daily = assets
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["asset"] == "orders.daily")
        .unwrap_or_else(|| panic!("{assets}"));
    assert_eq!(daily["consumers"], json!(["summary"]), "{daily}");
    let text = stored(&["assets"], &data);
    assert!(text.contains("orders.daily"), "{text}");
    assert!(text.contains("orders/publish"), "{text}");

    let week: Value =
        serde_json::from_str(&stored(&["status", "summary", "2026-W45", "--json"], &data)).unwrap();
    assert_eq!(
        week["state"], "complete",
        "the asset started the week's summary"
    );
}

/// examples/orders backfilled over three days (#31 item 11): the weekly
/// summary, started by the first day's materialization, is refreshed as
/// the later days materialize, so it ends up counting the whole week.
#[test]
fn the_orders_week_counts_every_day_of_a_backfill() {
    let tmp = tempfile::tempdir().unwrap();
    let data = run_orders(tmp.path(), &["--backfill", "2026-11-02..2026-11-04"]);
    let log = stored(&["logs", "summary", "2026-W45", "week"], &data);
    assert!(
        log.contains("over ['2026-11-02', '2026-11-03', '2026-11-04']"),
        "{log}"
    );
}
