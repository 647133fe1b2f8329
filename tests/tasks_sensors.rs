//! Sensors end to end (issue #18): a check that is not met puts its
//! ticket back, due `every` later, with no attempt spent and no pool slot
//! held (a one-slot pool runs another node meanwhile); a check that is
//! met succeeds with what it saw; at the timeout the node fails, or is
//! skipped with `on_timeout = "skip"`; command and HTTP checks.

mod graphs_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use graphs_support::{command_engine, from_toml, node_record, settled};
use serde_json::Value;
use weir::{EngineEvent, Partition, RunState, TicketView};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_sensor_waits_without_a_slot_and_sees_the_file() {
    let defs = tempfile::tempdir().unwrap();
    // One slot. The sensor goes first (priority) and misses; only because
    // it holds no slot while it waits can `make` run and create the file
    // its next check sees.
    let def = from_toml(
        defs.path(),
        r#"
name = "s"

[[nodes]]
name = "wait"
priority = 10
sensor = { file = "in/{graph}.ready", every = "1s", timeout = "1m" }

[[nodes]]
name = "make"
command = ["sh", "-c", "mkdir -p in && printf 12345 > in/s.ready"]

[[nodes]]
name = "after"
upstreams = ["wait"]
command = ["sh", "-c", "printf '%s' \"$1\" > \"$WEIR_OUTPUT\"", "sh", "{upstream.wait.output.size_bytes}"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 1).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    let mut events = engine.subscribe();
    engine.start_run("s", p.clone()).await.unwrap();
    let key = weir::actors::scheduler::records::run_id("s", &p, "wait", 0);
    // The first check misses; right after its poke the ticket waits,
    // pending, with no attempt spent.
    let poked = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match events.recv().await {
                Ok(EngineEvent::Poked {
                    key: k,
                    due_ms,
                    seen,
                    ..
                }) if *k == *key => return (due_ms, seen),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("events ended: {e}"),
            }
        }
    })
    .await
    .expect("the sensor poked");
    assert!(poked.1.starts_with("no file at "), "{}", poked.1);
    match engine.ticket(&key).await.unwrap() {
        Some(TicketView::Live {
            running,
            attempts,
            pokes,
            last_check,
            ..
        }) => {
            assert!(!running, "between checks the sensor holds no slot");
            assert_eq!(attempts, 0, "a check that is not met spends no attempt");
            // Counted while it waits, not only once it ends (faults #7).
            assert!(pokes >= 1, "the checks not met so far: {pokes}");
            // And its last check: when, and what it saw (faults #7).
            let last = last_check.expect("the last check while it waits");
            assert!(last.seen.starts_with("no file at "), "{last:?}");
            assert!(
                last.at_ms.abs_diff(poked.0) <= 60_000,
                "the check ended about when its next was due: {last:?}, due {}",
                poked.0
            );
        }
        other => panic!("the sensor's ticket is pending: {other:?}"),
    }
    assert_eq!(settled(&engine, "s", &p).await, RunState::Complete);
    let (st, attempts, _, out) = node_record(&engine, "s", &p, "wait");
    assert_eq!((st.as_str(), attempts), ("succeeded", 1));
    let seen: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(seen["size_bytes"], 5);
    assert_eq!(seen["file"], "in/s.ready");
    assert!(seen["modified"].as_str().unwrap().ends_with('Z'), "{seen}");
    let run = engine.graph_run("s", &p).unwrap().unwrap();
    let wait = run.nodes.iter().find(|n| n.node == "wait").unwrap();
    assert!(wait.pokes >= 1, "{wait:?}");
    // The check that saw the file ran no earlier than `every` after the
    // one that missed.
    let rec = engine
        .store()
        .get::<weir::DoneRecord>(&weir::actors::done::done_key(&key))
        .unwrap()
        .unwrap();
    assert!(
        rec.started_ms.unwrap() >= poked.0,
        "checked at {:?}, due {}",
        rec.started_ms,
        poked.0
    );
    assert!(poked.0 >= rec.first_due_ms + 1_000);
    let (_, _, _, after) = node_record(&engine, "s", &p, "after");
    assert_eq!(after, b"5");
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sensor_times_out_failed_or_skipped() {
    let defs = tempfile::tempdir().unwrap();
    let def = from_toml(
        defs.path(),
        r#"
name = "t"

[[nodes]]
name = "fails"
sensor = { file = "never", every = "100ms", timeout = "500ms" }

[[nodes]]
name = "skips"
sensor = { file = "never", every = "100ms", timeout = "500ms", on_timeout = "skip" }

[[nodes]]
name = "broken"
sensor = { http = "http://127.0.0.1:1/never", every = "100ms", timeout = "1m" }
retry = { attempts = 2, initial = "10ms" }

[[nodes]]
name = "after_fail"
upstreams = ["fails"]
command = ["true"]

[[nodes]]
name = "after_skip"
upstreams = ["skips"]
command = ["true"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("t", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "t", &p).await, RunState::Failed);
    let (st, attempts, err, _) = node_record(&engine, "t", &p, "fails");
    assert_eq!((st.as_str(), attempts), ("failed", 1));
    let err = err.unwrap();
    assert!(
        err.starts_with("sensor not met within 500ms: no file at "),
        "{err}"
    );
    // A check that cannot be made is a failed attempt, retried by the
    // node's policy, not a poke.
    let (st, attempts, err, _) = node_record(&engine, "t", &p, "broken");
    assert_eq!((st.as_str(), attempts), ("failed", 2));
    assert!(
        err.unwrap().contains("the check of"),
        "an error of the check"
    );
    let (st, _, err, _) = node_record(&engine, "t", &p, "skips");
    assert_eq!(st, "skipped");
    assert!(err.unwrap().contains("skipped"));
    assert_eq!(
        node_record(&engine, "t", &p, "after_fail").0,
        "upstream_failed"
    );
    assert_eq!(node_record(&engine, "t", &p, "after_skip").0, "skipped");
    let run = engine.graph_run("t", &p).unwrap().unwrap();
    let fails = run.nodes.iter().find(|n| n.node == "fails").unwrap();
    assert!(fails.pokes >= 3, "checks every 100ms over 500ms: {fails:?}");
    let broken = run.nodes.iter().find(|n| n.node == "broken").unwrap();
    assert_eq!(broken.pokes, 0);
    // A failed sensor is a dead letter like any failure; a skipped one is
    // not.
    let dead = engine.dead_letters(10, None).unwrap();
    assert_eq!(dead.letters.len(), 2, "{:?}", dead.letters);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_and_http_sensors_wait_for_their_condition() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/ready",
        get(move || {
            let h = h.clone();
            async move {
                if h.fetch_add(1, Ordering::SeqCst) < 2 {
                    (StatusCode::SERVICE_UNAVAILABLE, "not yet").into_response()
                } else {
                    "ready now".into_response()
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let defs = tempfile::tempdir().unwrap();
    let def = from_toml(
        defs.path(),
        &format!(
            r#"
name = "c"

[[nodes]]
name = "cmd"
sensor = {{ command = ["sh", "-c", "n=$(cat n 2>/dev/null || echo 0); echo $((n+1)) > n; echo seen $n; test $n -ge 2"], every = "50ms", timeout = "1m" }}

[[nodes]]
name = "web"
sensor = {{ http = "http://{addr}/ready", status = 200, every = "50ms", timeout = "1m" }}
"#
        ),
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 2).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("c", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "c", &p).await, RunState::Complete);
    let (_, attempts, _, out) = node_record(&engine, "c", &p, "cmd");
    assert_eq!(attempts, 1);
    let seen: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(seen["exit_code"], 0);
    assert_eq!(seen["stdout"], "seen 2\n");
    let (_, attempts, _, out) = node_record(&engine, "c", &p, "web");
    assert_eq!(attempts, 1);
    let seen: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(seen["status"], 200);
    assert_eq!(seen["body_head"], "ready now");
    assert_eq!(hits.load(Ordering::SeqCst), 3, "two 503s, then the 200");
    let run = engine.graph_run("c", &p).unwrap().unwrap();
    for n in &run.nodes {
        assert_eq!(n.pokes, 2, "{n:?}");
    }
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
