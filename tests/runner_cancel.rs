//! Cancel: of a pending ticket (it never runs), of a running one (its task
//! sees `ctx.cancel`, its outcome is dropped, the done record says
//! cancelled), and of keys that ended or never existed.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::Notify;
use weir::actors::pool::PoolMsg;
use weir::actors::supervisor::Role;
use weir::{Cancelled, DoneRecord, DoneStatus, Durability, Engine, EngineEvent, Job, TicketView};

/// Slots in use over every worker.
async fn pool_in_use(engine: &Engine) -> u32 {
    let mut in_use = 0;
    for (role, cell) in engine.children().await.unwrap() {
        if let Role::Pool(..) = role {
            let pool = ActorRef::<PoolMsg>::from(cell);
            let view = ractor::call_t!(pool, PoolMsg::Status, 5_000).unwrap();
            in_use += view.in_use;
        }
    }
    in_use
}

async fn done(engine: &Engine, key: &str) -> DoneRecord {
    match engine.ticket(key).await.unwrap() {
        Some(TicketView::Done(r)) => r,
        other => panic!("{key}: not done: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_pending_running_done_and_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let saw_cancel = Arc::new(AtomicU32::new(0));
    let started = Arc::new(Notify::new());
    let (r, c, s) = (runs.clone(), saw_cancel.clone(), started.clone());
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("default", 4)
        .task_fn("quick", |_ctx| async { Ok(b"done".to_vec()) })
        .task_fn("never", move |_ctx| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(Vec::new())
            }
        })
        .task_fn("long", move |ctx| {
            let (c, s) = (c.clone(), s.clone());
            async move {
                s.notify_one();
                // A well-behaved long task watches its token; if it were
                // ignored, the pool would drop the future anyway.
                ctx.cancel.cancelled().await;
                c.fetch_add(1, Ordering::SeqCst);
                // Claims success: the queue must drop this outcome.
                Ok(b"too late".to_vec())
            }
        })
        .open()
        .await
        .unwrap();
    let mut events = engine.subscribe();

    // Pending: due in an hour, cancelled before it runs.
    let mut later = Job::new("later", "never", "default");
    later.due_ms = engine.now_ms() + 3_600_000;
    engine.enqueue(later).await.unwrap();
    assert!(matches!(
        engine.ticket("later").await.unwrap(),
        Some(TicketView::Live { running: false, .. })
    ));
    assert!(matches!(
        engine.cancel("later").await.unwrap(),
        Cancelled::Cancelled(_)
    ));
    let r = done(&engine, "later").await;
    assert_eq!((r.status, r.attempts), (DoneStatus::Cancelled, 0));
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "a cancelled pending job ran"
    );

    // Running: cancelled while its task waits on its token.
    engine
        .enqueue(Job::new("long", "long", "default"))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), started.notified())
        .await
        .expect("the long task started");
    assert!(matches!(
        engine.ticket("long").await.unwrap(),
        Some(TicketView::Live { running: true, .. })
    ));
    assert!(matches!(
        engine.cancel("long").await.unwrap(),
        Cancelled::Cancelled(_)
    ));
    // The task hears of it (it may not get to finish: the pool drops it).
    // The worker frees the slot once the attempt stopped.
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if pool_in_use(&engine).await == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the cancelled attempt stopped");
    let r = done(&engine, "long").await;
    assert_eq!(r.status, DoneStatus::Cancelled, "{r:?}");
    assert_eq!(r.attempts, 1);
    assert!(r.output.is_empty(), "the dropped outcome leaked: {r:?}");
    // The slot came back: another job runs.
    engine
        .enqueue(Job::new("after", "quick", "default"))
        .await
        .unwrap();
    engine
        .drain_until_idle(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(done(&engine, "after").await.status, DoneStatus::Succeeded);
    // Still cancelled after the attempt's report had time to arrive.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(done(&engine, "long").await.status, DoneStatus::Cancelled);

    // Ended and unknown keys.
    assert_eq!(
        engine.cancel("after").await.unwrap(),
        Cancelled::AlreadyDone
    );
    assert_eq!(
        engine.cancel("later").await.unwrap(),
        Cancelled::AlreadyDone
    );
    assert_eq!(engine.cancel("nobody").await.unwrap(), Cancelled::Unknown);

    // One Completed event per key, each with its status.
    let mut completed = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let EngineEvent::Completed { key, status, .. } = e {
            completed.push((key.to_string(), status));
        }
    }
    completed.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        completed,
        vec![
            ("after".to_string(), DoneStatus::Succeeded),
            ("later".to_string(), DoneStatus::Cancelled),
            ("long".to_string(), DoneStatus::Cancelled),
        ]
    );
    assert!(saw_cancel.load(Ordering::SeqCst) <= 1);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
