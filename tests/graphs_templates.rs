//! Templates in command nodes, end to end through the engine (issue #18
//! item 1): the partition's window, params and values at JSON paths of an
//! upstream's output (read back from its blob) reach the command as
//! literal text, one argv element each, in argv and env alike; a path
//! missing from an output, or the output of an upstream that failed,
//! fails the attempt at once, naming the template.

mod graphs_support;

use graphs_support::{command_engine, from_toml, node_record, settled};
use serde_json::{json, Value};
use weir::{Partition, RunState};

/// A script that writes an output with shell syntax, quotes, a template
/// and more than 4 KiB (so it is kept in a blob and read back before the
/// downstream's attempt).
const EXTRACT: &str = r#"
import json, os
out = {"rows": 3, "files": ["a b.csv", "x\"; rm -rf y"], "name": "{partition} $(id)",
       "nested": {"k": [1, 2]}, "pad": "x" * 6000}
with open(os.environ["WEIR_OUTPUT"], "w") as f:
    json.dump(out, f)
"#;

/// A script whose output is its own argv and one variable, as it got them.
const ECHO: &str = r#"
import json, os, sys
with open(os.environ["WEIR_OUTPUT"], "w") as f:
    json.dump({"argv": sys.argv[1:], "env": os.environ.get("FROM_UP")}, f)
"#;

fn folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("extract.py"), EXTRACT).unwrap();
    std::fs::write(dir.path().join("echo.py"), ECHO).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_reach_the_command_literally_one_element_each() {
    let defs = folder();
    let def = from_toml(
        defs.path(),
        r#"
name = "tpl"
partitioning = "daily"

[params]
region = "eu west; rm -rf /"

[[nodes]]
name = "extract"
command = ["python3", "extract.py"]
retry = { attempts = 1 }

[[nodes]]
name = "load"
upstreams = ["extract"]
command = ["python3", "echo.py", "{upstream.extract.output.rows}", "{upstream.extract.output.files[1]}",
           "{upstream.extract.output.name}", "--from={partition.start}", "{partition.end}",
           "{params.region}", "{upstream.extract.output.nested}", "{node}/{attempt}", "{unknown} {"]
env = { FROM_UP = "{upstream.extract.output.files[0]}" }
retry = { attempts = 1 }
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p: Partition = "2026-11-29".parse().unwrap();
    engine.start_run("tpl", p.clone()).await.unwrap();
    let state = settled(&engine, "tpl", &p).await;
    let (st, _, err, out) = node_record(&engine, "tpl", &p, "load");
    assert_eq!(state, RunState::Complete, "load: {st} {err:?}");
    let (_, _, _, up) = node_record(&engine, "tpl", &p, "extract");
    assert!(up.len() > 4 << 10, "the upstream's output is a blob's");
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        got,
        json!({
            "argv": [
                "3",
                "x\"; rm -rf y",
                "{partition} $(id)",
                "--from=2026-11-29T00:00:00Z",
                "2026-11-30T00:00:00Z",
                "eu west; rm -rf /",
                "{\"k\":[1,2]}",
                "load/1",
                "{unknown} {",
            ],
            "env": "a b.csv",
        })
    );
    engine
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_that_cannot_render_fails_the_attempt_at_once() {
    let defs = folder();
    let def = from_toml(
        defs.path(),
        r#"
name = "bad"

[[nodes]]
name = "extract"
command = ["python3", "extract.py"]

[[nodes]]
name = "missing"
upstreams = ["extract"]
command = ["python3", "echo.py", "--file={upstream.extract.output.files[7]}"]
retry = { attempts = 3, initial = "10ms" }

[[nodes]]
name = "boom"
command = ["false"]
retry = { attempts = 1 }

[[nodes]]
name = "after"
upstreams = ["boom"]
trigger_rule = "all_done"
env = { WHAT = "{upstream.boom.output}" }
command = ["python3", "echo.py"]
retry = { attempts = 3, initial = "10ms" }
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("bad", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "bad", &p).await, RunState::Failed);
    let (state, attempts, err, _) = node_record(&engine, "bad", &p, "missing");
    let err = err.unwrap_or_default();
    assert_eq!((state.as_str(), attempts), ("failed", 1), "{err}");
    for want in [
        "node missing: command[2]",
        "template \"--file={upstream.extract.output.files[7]}\"",
        "path .files[7] is missing from upstream \"extract\"'s output: output.files has 2 elements, no [7]",
    ] {
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    let (state, attempts, err, _) = node_record(&engine, "bad", &p, "after");
    let err = err.unwrap_or_default();
    assert_eq!((state.as_str(), attempts), ("failed", 1), "{err}");
    assert!(
        err.contains("env.WHAT")
            && err.contains("upstream \"boom\" ended failed, so it has no output"),
        "{err}"
    );
    engine
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .unwrap();
}

/// Issue #29: a daily graph in Europe/Berlin backfilled over 2026-03-28..30
/// runs three windows of 24, 23 and 24 hours, and `{partition.start}` and
/// `{partition.end}` carry each end's own offset (`_utc` the same instants
/// in UTC).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_berlin_backfill_over_the_spring_forward_runs_local_days() {
    let defs = folder();
    let def = from_toml(
        defs.path(),
        r#"
name = "berlin"
partitioning = "daily"
timezone = "Europe/Berlin"

[[nodes]]
name = "load"
command = ["python3", "echo.py", "{partition.start}", "{partition.end}", "{partition.start_utc}", "{partition.end_utc}"]
retry = { attempts = 1 }
"#,
    );
    assert_eq!(def.zone().name(), "Europe/Berlin");
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    engine
        .backfill(
            "berlin",
            "2026-03-28..2026-03-30".parse().unwrap(),
            weir::BackfillOrder::Oldest,
        )
        .await
        .unwrap();
    let mut hours = Vec::new();
    for (day, want) in [
        (
            "2026-03-28",
            [
                "2026-03-28T00:00:00+01:00",
                "2026-03-29T00:00:00+01:00",
                "2026-03-27T23:00:00Z",
                "2026-03-28T23:00:00Z",
            ],
        ),
        (
            "2026-03-29",
            [
                "2026-03-29T00:00:00+01:00",
                "2026-03-30T00:00:00+02:00",
                "2026-03-28T23:00:00Z",
                "2026-03-29T22:00:00Z",
            ],
        ),
        (
            "2026-03-30",
            [
                "2026-03-30T00:00:00+02:00",
                "2026-03-31T00:00:00+02:00",
                "2026-03-29T22:00:00Z",
                "2026-03-30T22:00:00Z",
            ],
        ),
    ] {
        let p: Partition = day.parse().unwrap();
        assert_eq!(
            settled(&engine, "berlin", &p).await,
            RunState::Complete,
            "{day}"
        );
        let (_, _, _, out) = node_record(&engine, "berlin", &p, "load");
        let got: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(got["argv"], json!(want), "{day}");
        let ends: Vec<chrono::DateTime<chrono::FixedOffset>> = want[..2]
            .iter()
            .map(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap())
            .collect();
        hours.push((ends[1] - ends[0]).num_hours());
    }
    assert_eq!(hours, [24, 23, 24]);
    assert_eq!(engine.list_runs("berlin", None).unwrap().len(), 3);
    engine
        .shutdown(std::time::Duration::from_secs(5))
        .await
        .unwrap();
}
