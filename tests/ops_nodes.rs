//! Operator changes to a run's nodes: a rerun with and without its
//! downstreams, clearing a run's failed nodes, and marking a node
//! succeeded or failed (Airflow's "clear" and "mark success/failed").

mod ops_support;

use std::time::Duration;

use ops_support::*;
use weir::{MarkAs, MarkOutcome, Partition, RerunOutcome, RunState};

/// a → b → c, all succeeding. A rerun of b alone runs b again and leaves
/// c's record (rerun 0); a rerun of b with its downstreams moves b and c.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_with_and_without_downstreams() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), &script, None).await;
    let g = graph(
        "chain",
        vec![
            node("a", &[], "ok"),
            node("b", &["a"], "ok"),
            node("c", &["b"], "ok"),
        ],
    );
    engine.adopt(g).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("chain", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "chain", &p).await, RunState::Complete);

    let out = engine
        .rerun_node("chain", p.clone(), "b", false)
        .await
        .unwrap();
    assert_eq!(out, RerunOutcome::Submitted("chain/none/b/1".into()));
    assert_eq!(settled(&engine, "chain", &p).await, RunState::Complete);
    let s = states(&engine, "chain", &p);
    assert_eq!(s["a"], st("succeeded", 0));
    assert_eq!(s["b"], st("succeeded", 1));
    assert_eq!(s["c"], st("succeeded", 0), "c keeps its record");
    assert_eq!(script.runs_of("c"), [0]);

    let out = engine
        .rerun_node("chain", p.clone(), "b", true)
        .await
        .unwrap();
    assert_eq!(out, RerunOutcome::Submitted("chain/none/b/2".into()));
    assert_eq!(settled(&engine, "chain", &p).await, RunState::Complete);
    let s = states(&engine, "chain", &p);
    assert_eq!(s["a"], st("succeeded", 0));
    assert_eq!(s["b"], st("succeeded", 2));
    assert_eq!(s["c"], st("succeeded", 1), "c moves with b");
    assert_eq!(script.runs_of("b"), [0, 1, 2]);
    assert_eq!(script.runs_of("c"), [0, 1]);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A rerun of a failed node alone brings back the downstream it decided
/// upstream-failed: that node ran never, so it runs once the node succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_alone_redecides_upstream_failed_downstreams() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, p) = failed_run(dir.path(), &script).await;
    assert_eq!(states(&engine, "g", &p)["b"], st("upstream_failed", 0));
    script.fail(false);
    let out = engine.rerun_node("g", p.clone(), "a", false).await.unwrap();
    assert_eq!(out, RerunOutcome::Submitted("g/none/a/1".into()));
    assert_eq!(settled(&engine, "g", &p).await, RunState::Complete);
    let s = states(&engine, "g", &p);
    assert_eq!(s["a"], st("succeeded", 1));
    assert_eq!(s["b"], st("succeeded", 1));
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Clear after an induced failure: the failed node and its downstreams
/// run again, and the run completes once the task succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_after_a_failure_completes_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    script.fail(true);
    let engine = open(dir.path(), &script, None).await;
    engine
        .adopt(graph(
            "etl",
            vec![
                node("extract", &[], "ok"),
                node("transform", &["extract"], "flaky"),
                node("load", &["transform"], "ok"),
            ],
        ))
        .await
        .unwrap();
    let p: Partition = "none".parse().unwrap();
    engine.start_run("etl", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "etl", &p).await, RunState::Failed);
    let s = states(&engine, "etl", &p);
    assert_eq!(s["transform"], st("failed", 0));
    assert_eq!(s["load"], st("upstream_failed", 0));

    script.fail(false);
    let out = engine.clear_failed("etl", p.clone()).await.unwrap();
    assert_eq!(
        out,
        [(
            "transform".to_string(),
            RerunOutcome::Submitted("etl/none/transform/1".into())
        )]
    );
    assert_eq!(settled(&engine, "etl", &p).await, RunState::Complete);
    let s = states(&engine, "etl", &p);
    assert_eq!(s["extract"], st("succeeded", 0));
    assert_eq!(s["transform"], st("succeeded", 1));
    assert_eq!(s["load"], st("succeeded", 1));
    // Nothing failed is left to clear.
    assert!(engine
        .clear_failed("etl", p.clone())
        .await
        .unwrap()
        .is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Marking a failed node succeeded lets its downstream run, and the run
/// completes; marking it again changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_failed_node_succeeded_lets_its_downstream_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, p) = failed_run(dir.path(), &script).await;

    let mut events = engine.subscribe();
    let out = engine
        .mark_node("g", p.clone(), "a", MarkAs::Succeeded)
        .await
        .unwrap();
    assert_eq!(
        out,
        MarkOutcome::Marked {
            run_id: "g/none/a/1".into(),
            state: "succeeded".into()
        }
    );
    assert_eq!(settled(&engine, "g", &p).await, RunState::Complete);
    let s = states(&engine, "g", &p);
    assert_eq!(s["a"], st("succeeded", 1));
    assert_eq!(s["b"], st("succeeded", 1));
    assert_eq!(script.runs_of("a"), [0], "a mark does not run the node");
    assert_eq!(script.runs_of("b"), [1]);
    // The UI hears of the mark.
    let mut saw_mark = false;
    while let Ok(e) = events.try_recv() {
        if let weir::EngineEvent::NodeChanged { node, state, .. } = e {
            saw_mark |= node == "a" && state == "succeeded";
        }
    }
    assert!(saw_mark, "a NodeChanged event for the mark");

    let again = engine
        .mark_node("g", p.clone(), "a", MarkAs::Succeeded)
        .await
        .unwrap();
    assert_eq!(
        again,
        MarkOutcome::Unchanged {
            run_id: "g/none/a/1".into(),
            state: "succeeded".into()
        }
    );
    // Unknown nodes are refused, naming them.
    let err = engine
        .mark_node("g", p.clone(), "zz", MarkAs::Failed)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("zz"), "{err}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Marking a succeeded run's last node failed settles the run failed
/// without making it active (nothing downstream can run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_on_a_settled_run_recomputes_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), &script, None).await;
    engine
        .adopt(graph(
            "g",
            vec![node("a", &[], "ok"), node("b", &["a"], "ok")],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "g", &p).await, RunState::Complete);
    let mut events = engine.subscribe();
    engine
        .mark_node("g", p.clone(), "b", MarkAs::Failed)
        .await
        .unwrap();
    let run = engine.graph_run("g", &p).unwrap().unwrap();
    assert_eq!(run.state, RunState::Failed);
    while let Ok(e) = events.try_recv() {
        assert!(
            !matches!(e, weir::EngineEvent::RunStarted { .. }),
            "the run was not reactivated: {e:?}"
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Marking a running node failed cancels its instance; the run settles
/// failed, its downstream upstream-failed, and the cancelled attempt's
/// late outcome changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mark_running_node_failed_cancels_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), &script, None).await;
    engine
        .adopt(graph(
            "g",
            vec![node("a", &[], "block"), node("b", &["a"], "ok")],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    wait_for("a to run", || script.runs_of("a") == [0]).await;

    let out = engine
        .mark_node("g", p.clone(), "a", MarkAs::Failed)
        .await
        .unwrap();
    assert_eq!(
        out,
        MarkOutcome::CancelledAndMarked {
            cancelled: "g/none/a/0".into(),
            run_id: "g/none/a/1".into(),
            state: "failed".into()
        }
    );
    assert_eq!(settled(&engine, "g", &p).await, RunState::Failed);
    // The cancelled instance is recorded cancelled; the mark is current.
    match engine.ticket("g/none/a/0").await.unwrap() {
        Some(weir::TicketView::Done(r)) => assert_eq!(r.status, weir::DoneStatus::Cancelled),
        other => panic!("a/0 not done: {other:?}"),
    }
    script.gate.add_permits(1);
    engine.reconcile("g").await.unwrap();
    let s = states(&engine, "g", &p);
    assert_eq!(s["a"], st("failed", 1));
    assert_eq!(s["b"], st("upstream_failed", 0));
    assert!(script.runs_of("b").is_empty());
    assert_eq!(
        engine.graph_run("g", &p).unwrap().unwrap().state,
        RunState::Failed
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
