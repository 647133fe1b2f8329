//! Dead letters: tickets whose tries are spent are listed with their last
//! error, survive a restart, and a requeue runs them again (a plain job as
//! a fresh ticket, a graph node as a rerun with its downstreams).

mod ops_support;

use std::time::Duration;

use ops_support::*;
use weir::{
    DoneStatus, EngineError, Job, Partition, RequeueOutcome, RerunOutcome, RetryPolicy, RunState,
    TicketView,
};

/// A plain job of task `plain` with two attempts and a short backoff.
fn job(key: &str) -> Job {
    let mut j = Job::new(key, "plain", "default");
    j.payload = b"input".to_vec();
    j.policy = RetryPolicy {
        attempts_max: 2,
        initial_ms: 10,
        max_ms: 10,
        ..RetryPolicy::default()
    };
    j
}

async fn done_status(engine: &weir::Engine, key: &str) -> DoneStatus {
    match engine.ticket(key).await.unwrap() {
        Some(TicketView::Done(r)) => r.status,
        other => panic!("{key} is not done: {other:?}"),
    }
}

/// A job whose tries are spent is a dead letter with its error; requeue
/// runs it again (tries starting over) to success, and it is no longer
/// listed. An unknown key is refused, naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spent_job_is_listed_and_requeue_runs_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    script.fail(true);
    let engine = open(dir.path(), &script, None).await;
    engine.enqueue(job("report")).await.unwrap();
    engine.enqueue(job("fine")).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done_status(&engine, "report").await, DoneStatus::Failed);

    let page = engine.dead_letters(10, None).unwrap();
    let keys: Vec<&str> = page.letters.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    let letter = page.letters.iter().find(|l| l.key == "report").unwrap();
    assert_eq!(letter.task, "plain");
    assert_eq!(letter.pool, "default");
    assert_eq!(letter.attempts, 2);
    assert_eq!(letter.failures, 2);
    assert!(
        letter
            .error
            .as_deref()
            .unwrap_or("")
            .contains("scripted failure"),
        "{letter:?}"
    );
    assert_eq!(letter.graph, None);
    assert_eq!(page.next_cursor, None);
    // Pages of one, newest first, cover both.
    let first = engine.dead_letters(1, None).unwrap();
    let second = engine
        .dead_letters(1, first.next_cursor.as_deref())
        .unwrap();
    assert_eq!(second.next_cursor, None);
    assert_ne!(first.letters[0].key, second.letters[0].key);
    assert!(first.letters[0].finished_ms >= second.letters[0].finished_ms);

    script.fail(false);
    let runs_before = script.plain_runs().len();
    let out = engine.requeue_dead("report").await.unwrap();
    assert!(
        matches!(out, RequeueOutcome::Requeued { ref key, .. } if key == "report"),
        "{out:?}"
    );
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    match engine.ticket("report").await.unwrap() {
        Some(TicketView::Done(r)) => {
            assert_eq!(r.status, DoneStatus::Succeeded);
            assert_eq!(r.attempts, 1, "its tries started over");
            assert_eq!(r.output, b"done");
        }
        other => panic!("report is not done: {other:?}"),
    }
    assert_eq!(script.plain_runs().len(), runs_before + 1);
    let keys: Vec<String> = engine
        .dead_letters(10, None)
        .unwrap()
        .letters
        .into_iter()
        .map(|l| l.key)
        .collect();
    assert_eq!(keys, ["fine"]);

    let err = engine.requeue_dead("nope").await.unwrap_err();
    assert!(matches!(err, EngineError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("\"nope\""), "{err}");
    // Requeue of all: the one left runs again.
    let all = engine.requeue_all_dead().await.unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].0, "fine");
    assert!(all[0].1.is_ok(), "{all:?}");
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done_status(&engine, "fine").await, DoneStatus::Succeeded);
    assert!(engine.dead_letters(10, None).unwrap().letters.is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A dead letter survives an engine restart (and reads with no engine
/// running), and is requeued after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    script.fail(true);
    let engine = open(dir.path(), &script, None).await;
    engine.enqueue(job("nightly")).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    engine.shutdown(Duration::from_secs(5)).await.unwrap();

    {
        let (store, _) = weir::actors::store::open_for_inspection(dir.path()).unwrap();
        let page = weir::actors::done::dead_letters(&store, 10, None).unwrap();
        assert_eq!(page.letters.len(), 1);
        assert_eq!(page.letters[0].key, "nightly");
    }

    script.fail(false);
    let engine = open(dir.path(), &script, None).await;
    let page = engine.dead_letters(10, None).unwrap();
    assert_eq!(page.letters.len(), 1);
    assert_eq!(page.letters[0].key, "nightly");
    engine.requeue_dead("nightly").await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done_status(&engine, "nightly").await, DoneStatus::Succeeded);
    assert!(engine.dead_letters(10, None).unwrap().letters.is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    // The requeue, too, is durable.
    let engine = open(dir.path(), &script, None).await;
    assert!(engine.dead_letters(10, None).unwrap().letters.is_empty());
    assert_eq!(done_status(&engine, "nightly").await, DoneStatus::Succeeded);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A graph node whose tries are spent is a dead letter naming its graph,
/// partition, node and rerun; its requeue reruns it with its downstreams.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_of_a_graph_node_reruns_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, p) = failed_run(dir.path(), &script).await;
    let page = engine.dead_letters(10, None).unwrap();
    assert_eq!(page.letters.len(), 1, "{page:?}");
    let l = &page.letters[0];
    assert_eq!(l.key, "g/none/a/0");
    assert_eq!(l.graph.as_deref(), Some("g"));
    assert_eq!(l.partition.as_deref(), Some("none"));
    assert_eq!(l.node.as_deref(), Some("a"));
    assert_eq!(l.rerun, Some(0));

    script.fail(false);
    let out = engine.requeue_dead("g/none/a/0").await.unwrap();
    assert_eq!(
        out,
        RequeueOutcome::Rerun {
            key: "g/none/a/0".into(),
            rerun: RerunOutcome::Submitted("g/none/a/1".into())
        }
    );
    assert_eq!(settled(&engine, "g", &p).await, RunState::Complete);
    let s = states(&engine, "g", &p);
    assert_eq!(s["a"], st("succeeded", 1));
    assert_eq!(s["b"], st("succeeded", 1));
    assert!(engine.dead_letters(10, None).unwrap().letters.is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A rerun (here a clear) of a dead-lettered node drops its letter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_drops_the_dead_letter_of_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    script.fail(true);
    let engine = open(dir.path(), &script, None).await;
    engine
        .adopt(graph("g", vec![node("a", &[], "flaky")]))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "g", &p).await, RunState::Failed);
    assert_eq!(engine.dead_letters(10, None).unwrap().letters.len(), 1);
    script.fail(false);
    engine.clear_failed("g", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "g", &p).await, RunState::Complete);
    assert!(engine.dead_letters(10, None).unwrap().letters.is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
