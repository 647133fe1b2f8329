//! Pool capacity: attempts of a pool never run more at once than its slots
//! (workers × capacity), under load and across resizes; a shrink lets the
//! attempts above the new capacity finish but starts no new one until the
//! pool is under it; a grow is used at once.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::Semaphore;
use weir::actors::pool::{PoolMsg, PoolView};
use weir::actors::supervisor::Role;
use weir::{DoneStatus, Durability, Engine, Job, TicketView};

/// Concurrent entries into the task, and the most seen at once.
#[derive(Default)]
struct Gauge {
    now: AtomicU32,
    max: AtomicU32,
    started: AtomicU32,
}

impl Gauge {
    fn enter(&self) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        self.started.fetch_add(1, Ordering::SeqCst);
    }
    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }
    /// The most seen since the last reset; starts a new period.
    fn take_max(&self) -> u32 {
        self.max
            .swap(self.now.load(Ordering::SeqCst), Ordering::SeqCst)
    }
}

async fn views(engine: &Engine) -> Vec<PoolView> {
    let mut out = Vec::new();
    for (role, cell) in engine.children().await.unwrap() {
        if let Role::Pool(..) = role {
            let pool = ActorRef::<PoolMsg>::from(cell);
            out.push(ractor::call_t!(pool, PoolMsg::Status, 5_000).unwrap());
        }
    }
    out
}

async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !f().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_is_never_exceeded_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let gauge = Arc::new(Gauge::default());
    let g = gauge.clone();
    // Two workers of 3 slots: 6 at once at most.
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool_workers("p", 3, 2)
        .pool("other", 50)
        .task_fn("work", move |ctx| {
            let g = g.clone();
            async move {
                g.enter();
                if ctx.ticket % 2 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                g.leave();
                Ok(Vec::new())
            }
        })
        .task_fn("elsewhere", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .unwrap();
    let mut jobs: Vec<Job> = (0..1_000)
        .map(|i| Job::new(format!("j{i}"), "work", "p"))
        .collect();
    // Another pool's jobs take none of this pool's slots.
    jobs.extend((0..200).map(|i| Job::new(format!("o{i}"), "elsewhere", "other")));
    engine.enqueue_many(jobs).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(60))
        .await
        .unwrap();
    let max = gauge.max.load(Ordering::SeqCst);
    assert!(max <= 6, "{max} attempts ran at once in a pool of 6 slots");
    assert!(max >= 2, "the pool never ran attempts side by side ({max})");
    assert_eq!(gauge.started.load(Ordering::SeqCst), 1_000);
    for v in views(&engine).await.into_iter().filter(|v| v.pool == "p") {
        assert!(v.peak_in_use <= 3, "{v:?}");
        assert_eq!(v.in_use, 0, "{v:?}");
        assert_eq!(v.capacity, 3, "{v:?}");
    }
    match engine.ticket("j999").await.unwrap() {
        Some(TicketView::Done(r)) => assert_eq!(r.status, DoneStatus::Succeeded),
        other => panic!("{other:?}"),
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Attempts wait on a semaphore the test feeds, so the test decides when
/// each ends and can count exactly how many run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_shrinks_and_grows() {
    let dir = tempfile::tempdir().unwrap();
    let gauge = Arc::new(Gauge::default());
    let gate = Arc::new(Semaphore::new(0));
    let (g, s) = (gauge.clone(), gate.clone());
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("p", 4)
        .task_fn("gated", move |_ctx| {
            let (g, s) = (g.clone(), s.clone());
            async move {
                g.enter();
                s.acquire().await.expect("gate open").forget();
                g.leave();
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap();
    let jobs: Vec<Job> = (0..40)
        .map(|i| Job::new(format!("g{i:02}"), "gated", "p"))
        .collect();
    engine.enqueue_many(jobs).await.unwrap();
    let started = || gauge.started.load(Ordering::SeqCst);

    // Capacity 4: four run, no fifth starts.
    eventually("4 attempts running", || async { started() == 4 }).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(started(), 4, "a fifth attempt started in 4 slots");
    assert_eq!(gauge.take_max(), 4);

    // Shrink to 1 while 4 run: they finish, then one at a time.
    engine.resize_pool("p", 1).unwrap();
    eventually("capacity 1", || async {
        views(&engine).await.iter().all(|v| v.capacity == 1)
    })
    .await;
    gate.add_permits(4);
    eventually("the 4 ended and one more started", || async {
        started() == 5 && gauge.now.load(Ordering::SeqCst) == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(started(), 5, "over capacity after the shrink");
    gauge.take_max();
    for n in 6..=10 {
        gate.add_permits(1);
        eventually("the next single attempt", || async { started() == n }).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(started(), n, "more than one started in 1 slot");
    }
    assert_eq!(gauge.take_max(), 1, "over 1 at once after the shrink");

    // Grow to 3: three run at once.
    engine.resize_pool("p", 3).unwrap();
    eventually("3 running", || async {
        gauge.now.load(Ordering::SeqCst) == 3
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gauge.now.load(Ordering::SeqCst), 3);
    gauge.take_max();

    // Let the rest through.
    gate.add_permits(1_000);
    engine
        .drain_until_idle(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(gauge.take_max() <= 3, "over 3 at once after the grow");
    assert_eq!(started(), 40, "each attempt ran once");
    let v = views(&engine).await;
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].capacity, v[0].in_use), (3, 0), "{v:?}");
    assert!(v[0].peak_in_use <= 4, "{v:?}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
