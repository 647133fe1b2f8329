//! Expiry: a settled run, with its node records, is deleted once its
//! graph's retention has passed since it settled; an active run and its
//! records stay, however old, until it settles and its own retention
//! passes.

mod graphs_support;

use graphs_support::node;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use weir::{Durability, Engine, EngineEvent, GraphDef, Partition, RunState};
use weir_core::names::Name;

fn partitions(engine: &Engine) -> Vec<String> {
    engine
        .list_runs("g", None)
        .unwrap()
        .into_iter()
        .map(|r| r.partition)
        .collect()
}

fn keys(engine: &Engine, prefix: &str) -> Vec<String> {
    engine.store().scan_keys(prefix).unwrap()
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_removes_settled_runs_and_keeps_active_ones() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let g = gate.clone();
    let retention_ms = 300;
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("default", 4)
        .expiry_interval_ms(25)
        .task_fn("ok", |_ctx| async { Ok(b"out".to_vec()) })
        .task_fn("gated", move |ctx| {
            let gate = g.clone();
            async move {
                // Only partition "blocked" waits.
                if ctx.key.contains("/key=blocked/") {
                    let _ = gate.acquire().await;
                }
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap();
    let mut def = GraphDef::new(
        Name::new("g").unwrap(),
        vec![
            node("a", &[], "ok"),
            node("b", &["a"], "gated"),
            node("c", &["b"], "ok"),
        ],
    );
    def.retention_ms = retention_ms;
    engine.adopt(def).await.unwrap();
    let done: Partition = "key=done".parse().unwrap();
    let blocked: Partition = "key=blocked".parse().unwrap();
    let mut events = engine.subscribe();
    engine.start_run("g", done.clone()).await.unwrap();
    engine.start_run("g", blocked.clone()).await.unwrap();
    let states = engine
        .wait_settled("g", std::slice::from_ref(&done), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let settled_at = engine
        .graph_run("g", &done)
        .unwrap()
        .unwrap()
        .settled_at_ms
        .unwrap();
    let done_prefix = format!("done/g/{done}/");
    let blocked_prefix = format!("done/g/{blocked}/");
    assert_eq!(keys(&engine, &done_prefix).len(), 3, "a, b, c recorded");
    wait_for("a of the blocked run", || {
        keys(&engine, &blocked_prefix).len() == 1
    })
    .await;

    // The run record goes first, its node records right after (a second
    // store write): wait for both.
    wait_for("the settled run and its records to expire", || {
        partitions(&engine) == vec![blocked.to_string()] && keys(&engine, &done_prefix).is_empty()
    })
    .await;
    assert!(
        engine.now_ms() >= settled_at + retention_ms,
        "expired {} ms after settling, before its retention of {retention_ms} ms",
        engine.now_ms() - settled_at
    );
    assert!(engine.graph_run("g", &done).unwrap().is_none());
    assert!(engine
        .ticket(&format!("g/{done}/a/0"))
        .await
        .unwrap()
        .is_none());
    // The active run is older than the retention and stays, records too.
    tokio::time::sleep(Duration::from_millis(2 * retention_ms)).await;
    assert_eq!(partitions(&engine), vec![blocked.to_string()]);
    assert_eq!(
        keys(&engine, &blocked_prefix),
        vec![format!("{blocked_prefix}a/0")]
    );
    let mut expired = 0;
    while let Ok(e) = events.try_recv() {
        if let EngineEvent::Expired { records } = e {
            expired += records;
        }
    }
    assert_eq!(expired, 4, "the run record and its 3 node records");

    // Once it settles, it expires after its own retention.
    gate.close();
    let states = engine
        .wait_settled("g", std::slice::from_ref(&blocked), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    wait_for("the second run and its records to expire", || {
        partitions(&engine).is_empty() && keys(&engine, &blocked_prefix).is_empty()
    })
    .await;
    assert!(keys(&engine, "done/g/").is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
