//! Graph runs end to end: a diamond runs every node once, in order, with
//! its upstreams' outputs; a failing node makes its downstreams
//! upstream_failed; idempotent start.

mod graphs_support;

use graphs_support::node;
use std::time::Duration;

use weir::core::codec;
use weir::{Durability, Engine, GraphDef, Partition, RunState, TaskError, TaskInput};
use weir_core::names::Name;

async fn engine(dir: &std::path::Path) -> Engine {
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 8)
        .task_fn("concat", |ctx| async move {
            let input: TaskInput =
                codec::decode(&ctx.payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
            let mut out = String::new();
            for (name, up) in &input.upstreams {
                out.push_str(&format!(
                    "{name}=[{}] ",
                    String::from_utf8_lossy(&up.output)
                ));
            }
            out.push_str(&input.node);
            Ok(out.into_bytes())
        })
        .task_fn("fail", |_ctx| async {
            Err(TaskError::Permanent("boom".into()))
        })
        .open()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diamond_runs_in_order_with_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path()).await;
    let def = GraphDef::new(
        Name::new("diamond").unwrap(),
        vec![
            node("a", &[], "concat"),
            node("b", &["a"], "concat"),
            node("c", &["a"], "concat"),
            node("d", &["b", "c"], "concat"),
        ],
    );
    let adopted = engine.adopt(def.clone()).await.unwrap();
    assert!(adopted.changed);
    assert!(
        !engine.adopt(def).await.unwrap().changed,
        "same content adopts as no change"
    );
    let p: Partition = "2026-11-29".parse().unwrap();
    let started = engine.start_run("diamond", p.clone()).await.unwrap();
    assert!(started.started);
    assert_eq!(
        started.submitted,
        vec!["diamond/2026-11-29/a/0".to_string()]
    );
    let again = engine.start_run("diamond", p.clone()).await.unwrap();
    assert!(
        !again.started,
        "a second start of the same partition changes nothing"
    );
    let states = engine
        .wait_settled("diamond", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let view = engine.graph_run("diamond", &p).unwrap().unwrap();
    assert!(
        view.nodes.iter().all(|n| n.state == "succeeded"),
        "{view:?}"
    );
    let d = engine.ticket("diamond/2026-11-29/d/0").await.unwrap();
    let Some(weir::TicketView::Done(d)) = d else {
        panic!("{d:?}")
    };
    assert_eq!(
        String::from_utf8_lossy(&d.output),
        "b=[a=[a] b] c=[a=[a] c] d"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_propagates_as_upstream_failed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path()).await;
    let mut cleanup = node("cleanup", &["b"], "concat");
    cleanup.trigger_rule = weir::TriggerRule::AllDone;
    let def = GraphDef::new(
        Name::new("g").unwrap(),
        vec![
            node("a", &[], "concat"),
            node("b", &["a"], "fail"),
            node("c", &["b"], "concat"),
            node("d", &["c"], "concat"),
            cleanup,
        ],
    );
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    let states = engine
        .wait_settled("g", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Failed]);
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    let by: std::collections::BTreeMap<_, _> = view
        .nodes
        .iter()
        .map(|n| (n.node.as_str(), n.state.as_str()))
        .collect();
    assert_eq!(by["a"], "succeeded");
    assert_eq!(by["b"], "failed");
    assert_eq!(by["c"], "upstream_failed");
    assert_eq!(by["d"], "upstream_failed");
    assert_eq!(by["cleanup"], "succeeded", "all_done runs after a failure");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
