//! The supervisor's intensity limit (OTP's intensity and period): more than
//! `restarts_max` failures of one role within the window stop the engine
//! with an error that names the role and its last failure; after that every
//! call says the engine stopped.

use std::time::Duration;

use ractor::{ActorCell, ActorRef};
use weir::actors::pool::PoolMsg;
use weir::actors::queue::QueueMsg;
use weir::actors::supervisor::Role;
use weir::{Durability, Engine, EngineError, EngineEvent, Job, SupervisorSettings};

async fn open(dir: &std::path::Path) -> Engine {
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("p", 2)
        .supervisor_settings(SupervisorSettings {
            restarts_max: 2,
            restart_window_ms: 60_000,
            backoff_initial_ms: 1,
            backoff_max_ms: 10,
        })
        .task_fn("ok", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .unwrap()
}

/// The running cell of `role`, once it is a different one from `not`.
async fn running(engine: &Engine, role: &Role, not: Option<&ActorCell>) -> Option<ActorCell> {
    for _ in 0..2_000 {
        let Ok(children) = engine.children().await else {
            return None;
        };
        if let Some((_, cell)) = children.into_iter().find(|(r, _)| r == role) {
            if not.is_none_or(|n| n.get_id() != cell.get_id()) {
                return Some(cell);
            }
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    None
}

async fn hit_until_stopped(engine: &Engine, role: Role, panic: bool) -> Vec<EngineEvent> {
    let mut events = engine.subscribe();
    let mut last: Option<ActorCell> = None;
    let mut hits = 0;
    while engine.error().is_none() {
        let Some(cell) = running(engine, &role, last.as_ref()).await else {
            break;
        };
        if panic {
            let _ = match &role {
                Role::Queue => ActorRef::<QueueMsg>::from(cell.clone())
                    .cast(QueueMsg::Panic)
                    .is_ok(),
                _ => ActorRef::<PoolMsg>::from(cell.clone())
                    .cast(PoolMsg::Panic)
                    .is_ok(),
            };
        } else {
            cell.kill();
        }
        hits += 1;
        last = Some(cell);
        assert!(hits <= 3, "still running after {hits} failures of {role}");
    }
    let error = tokio::time::timeout(Duration::from_secs(10), engine.stopped())
        .await
        .expect("the engine stops")
        .expect("with an error");
    assert_eq!(hits, 3, "{role}: stopped after {hits} failures: {error}");
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_killed_three_times_stops_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    engine.enqueue(Job::new("a", "ok", "p")).await.unwrap();
    let events = hit_until_stopped(&engine, Role::Queue, false).await;
    let error = engine.error().unwrap();
    assert!(
        error.contains("queue failed 3 times") && error.contains("limit 2"),
        "{error}"
    );
    assert!(error.contains("last failure"), "{error}");
    let restarts = events
        .iter()
        .filter(|e| matches!(e, EngineEvent::Restarted { role, .. } if role == "queue"))
        .count();
    assert_eq!(restarts, 2, "{events:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::Stopped { error: e } if *e == error)),
        "{events:?}"
    );
    match engine.enqueue(Job::new("b", "ok", "p")).await {
        Err(EngineError::Stopped(e)) => assert_eq!(e, error),
        other => panic!("enqueue after stop: {other:?}"),
    }
    assert!(matches!(
        engine.cancel("a").await,
        Err(EngineError::Stopped(_))
    ));
    assert!(matches!(
        engine.drain_until_idle(Duration::from_secs(1)).await,
        Err(EngineError::Stopped(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_panicking_three_times_stops_the_engine_naming_the_panic() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    hit_until_stopped(&engine, Role::Queue, true).await;
    let error = engine.error().unwrap();
    assert!(error.starts_with("queue failed 3 times"), "{error}");
    assert!(error.contains("fault injected by a test"), "{error}");
    assert!(matches!(
        engine.enqueue(Job::new("b", "ok", "p")).await,
        Err(EngineError::Stopped(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_worker_panicking_three_times_stops_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let role = Role::Pool("p".into(), 0);
    hit_until_stopped(&engine, role, true).await;
    let error = engine.error().unwrap();
    assert!(
        error.starts_with("pool p worker 0 failed 3 times"),
        "{error}"
    );
    assert!(
        error.contains("pool p: fault injected by a test"),
        "{error}"
    );
}

/// A restart within the limit is invisible to callers: the engine keeps
/// going and a job enqueued after it completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_within_the_limit_are_absorbed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path()).await;
    let mut last = None;
    for _ in 0..2 {
        let cell = running(&engine, &Role::Queue, last.as_ref()).await.unwrap();
        cell.kill();
        last = Some(cell);
    }
    running(&engine, &Role::Queue, last.as_ref()).await.unwrap();
    let mut enqueued = false;
    for _ in 0..100 {
        if engine.enqueue(Job::new("after", "ok", "p")).await.is_ok() {
            enqueued = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(enqueued);
    engine
        .drain_until_idle(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(engine.error(), None);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
