//! Notifications of settled runs (issue #18 item 4): `on_failure` reads
//! the summary of a failed run on its stdin, `on_success` that of a
//! complete one, each once per settle (a rerun that settles the run again
//! notifies again); a notifier that keeps failing is retried, logged and
//! dead-lettered, and the run keeps its state.

mod graphs_support;

use std::path::Path;
use std::time::{Duration, Instant};

use graphs_support::{command_engine, from_toml, settled};
use serde_json::Value;
use weir::{DoneStatus, Partition, RerunOutcome, RunState, TicketView};

/// The summaries a notifier wrote to `file` (one JSON document a line),
/// once there are `n` of them (at most 30 s).
fn summaries(file: &Path, n: usize) -> Vec<Value> {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        // A line is whole once its newline is written.
        let docs: Vec<Value> = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n') && !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        if docs.len() >= n {
            return docs;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{} holds {} summaries, want {n}: {text}",
            file.display(),
            docs.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn node<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("no node {name} in {summary}"))
}

/// Appends its stdin (the summary, pretty JSON) as one line to `argv[1]`.
const WRITE: &str = "import json, sys\nd = json.load(sys.stdin)\nopen(sys.argv[1], 'a').write(json.dumps(d) + '\\n')\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_and_on_success_read_the_summary_once_per_settle() {
    let defs = tempfile::tempdir().unwrap();
    std::fs::write(defs.path().join("write.py"), WRITE).unwrap();
    let fail_b = defs.path().join("fail-b");
    std::fs::write(&fail_b, "").unwrap();
    let def = from_toml(
        defs.path(),
        r#"
name = "n"
partitioning = "daily"
on_failure = ["python3", "write.py", "failed-{partition}-{params.who}.jsonl"]
on_success = ["python3", "write.py", "complete-{partition}.jsonl"]

[params]
who = "ops"

[[nodes]]
name = "a"
command = ["sh", "-c", "echo '{\"rows\": 2}' > \"$WEIR_OUTPUT\""]

[[nodes]]
name = "b"
upstreams = ["a"]
command = ["sh", "-c", "if [ -e fail-b ]; then echo broken >&2; exit 3; fi"]
retry = { attempts = 2, initial = "10ms" }

[[nodes]]
name = "c"
upstreams = ["b"]
command = ["true"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p: Partition = "2026-11-03".parse().unwrap();
    let params = [("who".to_string(), "dev".to_string())].into();
    engine
        .start_runs_with("n", vec![p.clone()], params)
        .await
        .unwrap();
    assert_eq!(settled(&engine, "n", &p).await, RunState::Failed);

    let failed_file = defs.path().join("failed-2026-11-03-dev.jsonl");
    let s = &summaries(&failed_file, 1)[0];
    assert_eq!(s["graph"], "n");
    assert_eq!(s["partition"], "2026-11-03");
    assert_eq!(s["state"], "failed");
    assert_eq!(s["params"], serde_json::json!({"who": "dev"}));
    assert_eq!(
        s["counts"],
        serde_json::json!({"succeeded": 1, "failed": 1, "upstream_failed": 1})
    );
    assert_eq!(s["nodes_omitted"], 0);
    let settled_ms = s["settled_at_ms"].as_u64().unwrap();
    let requested_ms = s["requested_at_ms"].as_u64().unwrap();
    assert_eq!(
        s["duration_ms"].as_u64().unwrap(),
        settled_ms - requested_ms
    );
    let a = node(s, "a");
    assert_eq!(
        (a["state"].as_str(), a["attempts"].as_u64()),
        (Some("succeeded"), Some(1))
    );
    assert!(a["started_ms"].as_u64().unwrap() <= a["finished_ms"].as_u64().unwrap());
    let b = node(s, "b");
    assert_eq!(
        (b["state"].as_str(), b["attempts"].as_u64()),
        (Some("failed"), Some(2))
    );
    let err = b["error"].as_str().unwrap();
    assert!(
        err.contains("exit code 3") && err.contains("broken"),
        "{err}"
    );
    assert_eq!(node(s, "c")["state"], "upstream_failed");

    // b fixed and rerun: the run settles again, complete, and notifies
    // that; the failure was notified once.
    std::fs::remove_file(&fail_b).unwrap();
    let r = engine.rerun("n", p.clone(), "b").await.unwrap();
    assert!(matches!(r, RerunOutcome::Submitted(_)), "{r:?}");
    assert_eq!(settled(&engine, "n", &p).await, RunState::Complete);
    let s = &summaries(&defs.path().join("complete-2026-11-03.jsonl"), 1)[0];
    assert_eq!(s["state"], "complete");
    assert_eq!(node(s, "b")["rerun"], 1);
    assert_eq!(node(s, "c")["state"], "succeeded");
    // Nothing else is on its way: no notification ticket is live, and a
    // reconcile adds none.
    engine.reconcile("n").await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(summaries(&failed_file, 1).len(), 1);
    assert_eq!(
        summaries(&defs.path().join("complete-2026-11-03.jsonl"), 1).len(),
        1
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_notifier_is_retried_and_dead_lettered_and_the_run_keeps_its_state() {
    let defs = tempfile::tempdir().unwrap();
    let def = from_toml(
        defs.path(),
        r#"
name = "m"
on_success = ["sh", "-c", "echo try >> tries; echo 'no pager today' >&2; exit 7"]

[[nodes]]
name = "only"
command = ["true"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "m", &p).await, RunState::Complete);
    // Three attempts, 1 s and 2 s apart, then a dead letter.
    let key = "notify:m:none:complete:0";
    let t0 = Instant::now();
    let done = loop {
        match engine.ticket(key).await.unwrap() {
            Some(TicketView::Done(d)) => break d,
            other => {
                assert!(t0.elapsed() < Duration::from_secs(30), "{other:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!((done.status, done.attempts), (DoneStatus::Failed, 3));
    let err = done.error.unwrap_or_default();
    assert!(
        err.contains("exit code 7") && err.contains("no pager today"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(defs.path().join("tries")).unwrap(),
        "try\ntry\ntry\n"
    );
    let letters = engine.dead_letters(100, None).unwrap().letters;
    assert!(letters.iter().any(|l| l.key == key), "{letters:?}");
    let run = engine.graph_run("m", &p).unwrap().unwrap();
    assert_eq!(run.state, RunState::Complete);
    assert_eq!(run.nodes[0].state, "succeeded");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
