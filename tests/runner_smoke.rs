//! The runner end to end: jobs run once, retries, permanent errors, cancel.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir::{DoneStatus, Durability, Engine, Enqueued, Job, RetryPolicy, TaskError, TicketView};

fn job(key: &str, task: &str) -> Job {
    let mut j = Job::new(key, task, "default");
    j.policy = RetryPolicy {
        attempts_max: 3,
        initial_ms: 10,
        multiplier: 2.0,
        max_ms: 100,
        jitter: 0.0,
        deadline_ms: None,
    };
    j
}

async fn done(engine: &Engine, key: &str) -> weir::DoneRecord {
    match engine.ticket(key).await.unwrap() {
        Some(TicketView::Done(r)) => r,
        other => panic!("{key}: not done: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_once_retry_and_stop() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let flaky = Arc::new(AtomicU32::new(0));
    let (r, f) = (runs.clone(), flaky.clone());
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("default", 8)
        .task_fn("ok", move |ctx| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(ctx.key.as_bytes().to_vec())
            }
        })
        .task_fn("flaky", move |_ctx| {
            let f = f.clone();
            async move {
                if f.fetch_add(1, Ordering::SeqCst) < 2 {
                    Err(TaskError::Retryable("not yet".into()))
                } else {
                    Ok(b"third time".to_vec())
                }
            }
        })
        .task_fn("always_fails", |_ctx| async {
            Err(TaskError::Retryable("down".into()))
        })
        .task_fn("permanent", |_ctx| async {
            Err(TaskError::Permanent("bad input".into()))
        })
        .open()
        .await
        .unwrap();

    for i in 0..100 {
        let e = engine.enqueue(job(&format!("ok-{i}"), "ok")).await.unwrap();
        assert!(matches!(e, Enqueued::New(_)), "{e:?}");
    }
    // A live key is a no-op.
    assert!(matches!(
        engine.enqueue(job("ok-0", "ok")).await.unwrap(),
        Enqueued::Live(_) | Enqueued::Done
    ));
    engine.enqueue(job("flaky", "flaky")).await.unwrap();
    engine.enqueue(job("fails", "always_fails")).await.unwrap();
    engine.enqueue(job("perm", "permanent")).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(30))
        .await
        .unwrap();

    assert_eq!(
        runs.load(Ordering::SeqCst),
        100,
        "each ok job ran exactly once"
    );
    let r = done(&engine, "ok-7").await;
    assert_eq!(
        (r.status, r.attempts, r.output.as_slice()),
        (DoneStatus::Succeeded, 1, b"ok-7".as_slice())
    );
    let r = done(&engine, "flaky").await;
    assert_eq!(
        (r.status, r.attempts, r.failures),
        (DoneStatus::Succeeded, 3, 2)
    );
    let r = done(&engine, "fails").await;
    assert_eq!((r.status, r.attempts), (DoneStatus::Failed, 3));
    assert_eq!(r.error.as_deref(), Some("down"));
    let r = done(&engine, "perm").await;
    assert_eq!((r.status, r.attempts), (DoneStatus::Failed, 1));
    // An ended key is a no-op too.
    assert_eq!(
        engine.enqueue(job("ok-0", "ok")).await.unwrap(),
        Enqueued::Done
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A key is never unknown between its enqueue's acknowledgement and its
/// done record: while its completion is on its way to disk (the ticket gone
/// from memory, the record not yet in the store) a query waits for the
/// commit instead of answering "no such key".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completing_key_is_never_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let engine = Arc::new(
        Engine::builder(dir.path())
            .durability(Durability::Fsync)
            .pool("default", 4)
            .task_fn("ok", |_ctx| async { Ok(Vec::new()) })
            .open()
            .await
            .unwrap(),
    );
    // Held until the pollers run, so that every completion happens while
    // its key is being asked about.
    engine.pause(true).unwrap();
    let keys: Vec<String> = (0..200).map(|i| format!("k{i:03}")).collect();
    engine
        .enqueue_many(keys.iter().map(|k| job(k, "ok")).collect())
        .await
        .unwrap();
    // Poll every key until it is done, as fast as the queue answers.
    let mut pollers = tokio::task::JoinSet::new();
    for chunk in keys.chunks(50) {
        let engine = engine.clone();
        let chunk = chunk.to_vec();
        pollers.spawn(async move {
            let mut queries = 0u64;
            for key in chunk {
                loop {
                    queries += 1;
                    match engine.ticket(&key).await.unwrap() {
                        Some(TicketView::Done(r)) => {
                            assert_eq!(r.status, DoneStatus::Succeeded, "{key}");
                            break;
                        }
                        Some(TicketView::Live { .. }) => tokio::task::yield_now().await,
                        None => panic!("{key}: unknown after its enqueue was acknowledged"),
                    }
                }
            }
            queries
        });
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    engine.pause(false).unwrap();
    let mut queries = 0;
    while let Some(q) = pollers.join_next().await {
        queries += q.unwrap();
    }
    assert!(queries >= keys.len() as u64);
    let engine = Arc::into_inner(engine).unwrap();
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
