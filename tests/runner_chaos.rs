//! Actor faults in the middle of a 10,000-job workload: the queue, a pool
//! worker or a breaker is killed (`ActorCell::kill`) or made to panic (the
//! test-only `Panic` message), many times, while jobs are enqueued and run.
//!
//! What must hold afterwards (at-least-once execution, exactly-once
//! recording): every job finished with a done record that says succeeded;
//! the engine reported each key `Completed` exactly once; every job ran at
//! least once (a job may run more than once: an attempt on a worker that
//! died, or whose report died with a queue, is run again); the supervisor
//! restarted what was hit and the engine never stopped.
//!
//! `WEIR_SOAK=1` runs more jobs and more faults.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::ActorRef;
use rand::{Rng, SeedableRng};
use tokio::sync::{broadcast, oneshot};
use weir::actors::breaker::BreakerMsg;
use weir::actors::done::done_key;
use weir::actors::event_channel::EventReceiver;
use weir::actors::pool::PoolMsg;
use weir::actors::queue::QueueMsg;
use weir::actors::supervisor::Role;
use weir::{
    BreakerSettings, DoneRecord, DoneStatus, Durability, Engine, EngineEvent, Job, QueueSettings,
    RetryPolicy, SupervisorSettings,
};

fn soak() -> bool {
    std::env::var_os("WEIR_SOAK").is_some_and(|v| v == "1")
}

/// Which actors a run hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hit {
    Queue,
    Pool,
    Breaker,
    All,
}

impl Hit {
    fn matches(self, role: &Role) -> bool {
        matches!(
            (self, role),
            (Hit::All, Role::Queue | Role::Pool(..) | Role::Breaker(..))
                | (Hit::Queue, Role::Queue)
                | (Hit::Pool, Role::Pool(..))
                | (Hit::Breaker, Role::Breaker(..))
        )
    }
}

fn job(i: usize) -> Job {
    let mut j = Job::new(format!("job-{i:05}"), "work", "p");
    // Two of three jobs go through a breaker, so breakers are in the path.
    if matches!(i % 3, 1 | 2) {
        j.target = Some(Arc::from(format!("t{}", i % 2)));
    }
    // A worker that dies counts a failed attempt: never run out of them.
    j.policy = RetryPolicy {
        attempts_max: 0,
        initial_ms: 1,
        multiplier: 2.0,
        max_ms: 20,
        jitter: 0.0,
        deadline_ms: None,
    };
    j
}

/// Completed events per key, collected until `stop` fires.
/// Completed events per key, Restarted events, and whether it lagged.
type Collected = (HashMap<String, u32>, usize, bool);

fn collect_completions(
    mut rx: EventReceiver,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Collected>) {
    let (stop_tx, mut stop_rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        let mut completed: HashMap<String, u32> = HashMap::new();
        let mut restarts = 0usize;
        let mut lagged = false;
        let mut note = |e: EngineEvent| match e {
            EngineEvent::Completed { key, .. } => {
                *completed.entry(key.to_string()).or_default() += 1
            }
            EngineEvent::Restarted { .. } => restarts += 1,
            _ => {}
        };
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                r = rx.recv() => match r {
                    Ok(e) => note(e),
                    Err(broadcast::error::RecvError::Lagged(_)) => lagged = true,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
        loop {
            match rx.try_recv() {
                Ok(e) => note(e),
                Err(broadcast::error::TryRecvError::Lagged(_)) => lagged = true,
                Err(_) => break,
            }
        }
        (completed, restarts, lagged)
    });
    (stop_tx, handle)
}

/// Keeps the injected panics out of the test output; other panics print.
fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let injected = info
                .payload()
                .downcast_ref::<String>()
                .is_some_and(|m| m.contains("fault injected by a test"))
                || info
                    .payload()
                    .downcast_ref::<&str>()
                    .is_some_and(|m| m.contains("fault injected by a test"));
            if !injected {
                default(info);
            }
        }));
    });
}

async fn chaos(hit: Hit, seed: u64) {
    quiet_injected_panics();
    let jobs = if soak() { 50_000 } else { 10_000 };
    let faults_max = if soak() { 400 } else { 40 };
    let dir = tempfile::tempdir().unwrap();
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let r = runs.clone();
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool_workers("p", 16, 2)
        .breaker_default(BreakerSettings {
            // The tasks never fail: the breakers stay closed, but every
            // targeted attempt asks one.
            failures_max: 1_000_000,
            ..BreakerSettings::default()
        })
        .supervisor_settings(SupervisorSettings {
            restarts_max: 1_000_000,
            restart_window_ms: 60_000,
            backoff_initial_ms: 1,
            backoff_max_ms: 20,
        })
        .queue_settings(QueueSettings::default())
        .task_fn("work", move |ctx| {
            let r = r.clone();
            async move {
                *r.lock().unwrap().entry(ctx.key.to_string()).or_default() += 1;
                // Some attempts take a moment, so faults find work running.
                if ctx.ticket % 7 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                Ok(ctx.key.as_bytes().to_vec())
            }
        })
        .open()
        .await
        .unwrap();
    let engine = Arc::new(engine);
    let (stop, collector) = collect_completions(engine.subscribe());

    // The producer: batches of jobs, each batch retried until the engine
    // acknowledges it (a queue that dies mid-call answers nobody).
    let producing = Arc::new(AtomicBool::new(true));
    let producer = {
        let engine = engine.clone();
        let producing = producing.clone();
        tokio::spawn(async move {
            let mut retries = 0u32;
            for chunk in (0..jobs).collect::<Vec<_>>().chunks(250) {
                loop {
                    let batch: Vec<Job> = chunk.iter().map(|&i| job(i)).collect();
                    match engine.enqueue_many(batch).await {
                        Ok(answers) if answers.iter().all(|a| a.is_ok()) => break,
                        Ok(answers) => panic!("enqueue refused a job: {answers:?}"),
                        Err(_) => {
                            retries += 1;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
            }
            producing.store(false, Ordering::SeqCst);
            retries
        })
    };

    // The faulter: while there is work, hit an actor of the chosen kind,
    // alternating kill and panic.
    let faults = Arc::new(AtomicU32::new(0));
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut injected: BTreeMap<String, u32> = BTreeMap::new();
    // Let some work start first.
    tokio::time::sleep(Duration::from_millis(20)).await;
    for round in 0..faults_max {
        let live = engine.counts().borrow().live;
        if !producing.load(Ordering::SeqCst) && live == 0 {
            break;
        }
        let children = engine.children().await.unwrap();
        let targets: Vec<_> = children.iter().filter(|(r, _)| hit.matches(r)).collect();
        if let Some((role, cell)) =
            (!targets.is_empty()).then(|| targets[rng.gen_range(0..targets.len())])
        {
            let how = if round % 2 == 0 { "kill" } else { "panic" };
            if how == "kill" {
                cell.kill();
            } else {
                // A cast to an actor that is already dying fails: fine.
                let sent = match role {
                    Role::Queue => ActorRef::<QueueMsg>::from(cell.clone())
                        .cast(QueueMsg::Panic)
                        .is_ok(),
                    Role::Pool(..) => ActorRef::<PoolMsg>::from(cell.clone())
                        .cast(PoolMsg::Panic)
                        .is_ok(),
                    Role::Breaker(..) => ActorRef::<BreakerMsg>::from(cell.clone())
                        .cast(BreakerMsg::Panic)
                        .is_ok(),
                    _ => unreachable!("only queue, pool and breaker are hit"),
                };
                let _ = sent;
            }
            faults.fetch_add(1, Ordering::SeqCst);
            let kind = match role {
                Role::Queue => "queue",
                Role::Pool(..) => "pool",
                Role::Breaker(..) => "breaker",
                _ => unreachable!("only queue, pool and breaker are hit"),
            };
            *injected.entry(format!("{kind} {how}")).or_default() += 1;
        }
        tokio::time::sleep(Duration::from_millis(rng.gen_range(5..30))).await;
    }

    let retries = producer.await.unwrap();
    if let Err(e) = engine
        .drain_until_idle(Duration::from_secs(if soak() { 600 } else { 60 }))
        .await
    {
        let status = engine.status().await;
        let mut stuck = Vec::new();
        for i in 0..jobs {
            let key = job(i).key.to_string();
            if let Ok(Some(v @ weir::TicketView::Live { .. })) = engine.ticket(&key).await {
                stuck.push((key, v));
                if stuck.len() == 5 {
                    break;
                }
            }
        }
        let children: Vec<Role> = engine
            .children()
            .await
            .unwrap()
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        panic!("{hit:?}: queue did not drain after {injected:?}: {e}\nstatus {status:?}\nchildren {children:?}\nstuck {stuck:?}");
    }
    assert_eq!(engine.error(), None, "{hit:?}: the engine stopped");
    let _ = stop.send(());
    let (completed, restarts, lagged) = collector.await.unwrap();
    assert!(
        !lagged,
        "{hit:?}: the event subscriber lagged; counts unknown"
    );

    let runs = runs.lock().unwrap().clone();
    let mut reran = 0usize;
    for i in 0..jobs {
        let key = job(i).key.to_string();
        let record: Option<DoneRecord> = engine.store().get(&done_key(&key)).unwrap();
        let record = record.unwrap_or_else(|| panic!("{hit:?}: {key}: no done record"));
        assert_eq!(
            record.status,
            DoneStatus::Succeeded,
            "{hit:?}: {key}: {record:?}"
        );
        assert_eq!(
            completed.get(&key).copied().unwrap_or(0),
            1,
            "{hit:?}: {key}: Completed events (done record {record:?}, runs {:?})",
            runs.get(&key)
        );
        let n = runs.get(&key).copied().unwrap_or(0);
        assert!(n >= 1, "{hit:?}: {key}: never ran");
        if n > 1 {
            reran += 1;
        }
    }
    assert_eq!(
        completed.len(),
        jobs,
        "{hit:?}: Completed events for keys that were never enqueued"
    );
    let injected_total = faults.load(Ordering::SeqCst);
    assert!(injected_total > 0, "{hit:?}: no fault was injected");
    assert!(restarts > 0, "{hit:?}: no restart was reported");
    // The roles hit are running again.
    let children = engine.children().await.unwrap();
    match hit {
        Hit::Queue | Hit::All => assert!(children.iter().any(|(r, _)| *r == Role::Queue)),
        Hit::Pool => assert_eq!(
            children
                .iter()
                .filter(|(r, _)| matches!(r, Role::Pool(..)))
                .count(),
            2
        ),
        Hit::Breaker => {}
    }
    eprintln!(
        "{hit:?}: {jobs} jobs, faults {injected:?}, restarts {restarts}, enqueue retries {retries}, jobs run more than once {reran}"
    );
    let engine = Arc::into_inner(engine).expect("no other engine handle");
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_killed_and_panicking_mid_workload() {
    chaos(Hit::Queue, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_killed_and_panicking_mid_workload() {
    chaos(Hit::Pool, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_killed_and_panicking_mid_workload() {
    chaos(Hit::Breaker, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_actor_killed_and_panicking_mid_workload() {
    chaos(Hit::All, 4).await;
}
