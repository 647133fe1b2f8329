//! Workers embedded in applications (`weir::worker::Worker::builder`),
//! serving an engine embedded in another process: the test binary runs
//! the engine and starts itself twice as worker processes.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

mod serve_support;

use serve_support::free_port;
use weir::worker::Worker;
use weir::{ClusterConfig, Durability, Engine, EngineEvent, Job, TicketView};

const JOIN_VAR: &str = "WEIR_TEST_CLUSTER_JOIN";
const NAME_VAR: &str = "WEIR_TEST_CLUSTER_NAME";
const COOKIE: &str = "embedded-cluster-cookie";

/// The clustered engines of this binary run one at a time: ractor's
/// process groups (which an engine's gateway and its workers' links find
/// each other by) are global to a process, so two clustered engines in
/// one process would see each other's workers.
static ONE_CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The worker: runs only when the parent sets `WEIR_TEST_CLUSTER_JOIN`.
/// Its task `whoami` answers with the worker's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_worker_child() {
    let (Ok(join), Ok(name)) = (std::env::var(JOIN_VAR), std::env::var(NAME_VAR)) else {
        return;
    };
    let me = name.clone();
    let worker = Worker::builder(join)
        .cookie(COOKIE)
        .name(name)
        .pool("default", 16)
        .task_fn("whoami", move |_ctx| {
            let me = me.clone();
            async move { Ok(me.into_bytes()) }
        })
        // A sensor's check: not met twice, then met.
        .task_fn("notyet", |_ctx| async {
            static CHECKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            if CHECKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
                Err(weir::TaskError::NotMet("not yet".into()))
            } else {
                Ok(b"{\"seen\": true}".to_vec())
            }
        })
        .start()
        .await
        .unwrap();
    worker.wait().await.unwrap();
}

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_worker(join: &str, name: &str) -> Kill {
    Kill(
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "cluster_worker_child", "--nocapture"])
            .env(JOIN_VAR, join)
            .env(NAME_VAR, name)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_embedded_workers_drain_ten_thousand_jobs_with_no_local_slots() {
    let _one = ONE_CLUSTER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let engine = Arc::new(
        Engine::builder(dir.path())
            .durability(Durability::Flush)
            .pool_workers("default", 8, 0)
            .cluster(ClusterConfig::new(addr, COOKIE))
            .open()
            .await
            .unwrap(),
    );
    let join = addr.to_string();
    let _w1 = spawn_worker(&join, "w1");
    let _w2 = spawn_worker(&join, "w2");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let joined = engine.workers().await.unwrap();
        if joined
            .iter()
            .filter(|w| w.state == weir::WorkerState::Joined)
            .count()
            == 2
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "workers did not join: {joined:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut events = engine.subscribe();
    let counter = tokio::spawn(async move {
        let mut completed: BTreeMap<String, u32> = BTreeMap::new();
        while let Ok(e) = events.recv().await {
            if let EngineEvent::Completed { key, .. } = e {
                *completed.entry(key.to_string()).or_default() += 1;
                if completed.len() == 10_000 {
                    break;
                }
            }
        }
        completed
    });
    let jobs: Vec<Job> = (0..10_000)
        .map(|i| Job::new(format!("job-{i:05}"), "whoami", "default"))
        .collect();
    for chunk in jobs.chunks(2_500) {
        engine.enqueue_many(chunk.to_vec()).await.unwrap();
    }
    engine
        .drain_until_idle(Duration::from_secs(300))
        .await
        .unwrap();
    let completed = tokio::time::timeout(Duration::from_secs(30), counter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(completed.len(), 10_000);
    assert!(
        completed.values().all(|&n| n == 1),
        "each job completed once"
    );
    let mut by_worker: BTreeMap<String, usize> = BTreeMap::new();
    for i in (0..10_000).step_by(7) {
        match engine.ticket(&format!("job-{i:05}")).await.unwrap() {
            Some(TicketView::Done(d)) => {
                *by_worker
                    .entry(String::from_utf8_lossy(&d.output).into_owned())
                    .or_default() += 1;
            }
            other => panic!("job-{i:05}: {other:?}"),
        }
    }
    assert_eq!(
        by_worker.keys().cloned().collect::<Vec<_>>(),
        vec!["w1".to_string(), "w2".to_string()],
        "every job ran on a worker, and both took a share: {by_worker:?}"
    );
    let engine = Arc::try_unwrap(engine).ok().unwrap();
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// A mapped node's members and a sensor's checks are tickets like any:
/// with no local slot, a worker in another process runs every member
/// (its item in its payload) and every check, and a check that is not
/// met crosses the wire as such (no attempt spent).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_and_sensor_checks_run_on_a_worker() {
    let _one = ONE_CLUSTER.lock().await;
    use weir::core::mapped::{MapSource, MapSpec};
    use weir::core::names::Name;
    use weir::core::sensor::SensorPolicy;
    use weir::{GraphDef, NodeDef, Partition, RunState, TaskSpec};
    let dir = tempfile::tempdir().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool_workers("default", 8, 0)
        .cluster(ClusterConfig::new(addr, COOKIE))
        // Tasks the engine itself never runs (no local slots): adopting a
        // graph needs them registered.
        .task_fn("whoami", |_ctx| async { Ok(b"engine".to_vec()) })
        .task_fn("notyet", |_ctx| async { Ok(Vec::new()) })
        .open()
        .await
        .unwrap();
    let _w1 = spawn_worker(&addr.to_string(), "w1");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !engine
        .workers()
        .await
        .unwrap()
        .iter()
        .any(|w| w.state == weir::WorkerState::Joined)
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the worker did not join"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let task = |t: &str| TaskSpec {
        task: Name::new(t).unwrap(),
        config: serde_json::Value::Null,
    };
    let mut each = NodeDef::new(Name::new("each").unwrap(), vec![], task("whoami"));
    let mut spec = MapSpec::new(MapSource::Items(
        (0..20).map(|i| serde_json::json!(i)).collect(),
    ));
    spec.max_active_members = 4;
    each.map = Some(spec);
    let mut wait = NodeDef::new(Name::new("wait").unwrap(), vec![], task("notyet"));
    wait.sensor = Some(SensorPolicy {
        every_ms: 100,
        timeout_ms: 60_000,
        ..SensorPolicy::default()
    });
    engine
        .adopt(GraphDef::new(
            Name::new("remote").unwrap(),
            vec![each, wait],
        ))
        .await
        .unwrap();
    engine.start_run("remote", Partition::NONE).await.unwrap();
    let state = engine
        .wait_settled("remote", &[Partition::NONE], Duration::from_secs(120))
        .await
        .unwrap()[0];
    assert_eq!(state, RunState::Complete);
    let rec = |n: &str| {
        let id = weir::actors::scheduler::records::run_id("remote", &Partition::NONE, n, 0);
        engine
            .store()
            .get::<weir::DoneRecord>(&weir::actors::done::done_key(&id))
            .unwrap()
            .unwrap()
    };
    let out: serde_json::Value =
        serde_json::from_slice(&rec("each").load_output(engine.store()).unwrap()).unwrap();
    assert_eq!(
        out,
        serde_json::json!(vec!["w1"; 20]),
        "every member ran on the worker"
    );
    let wait = rec("wait");
    assert_eq!((wait.attempts, wait.pokes), (1, 2), "{wait:?}");
    assert_eq!(wait.output, b"{\"seen\": true}");
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// An engine of term `term` (a replicated engine's leader) on `addr`.
async fn engine_of_term(dir: &std::path::Path, addr: std::net::SocketAddr, term: u64) -> Engine {
    let mut config = ClusterConfig::new(addr, COOKIE);
    config.settings.term = term;
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool_workers("default", 8, 0)
        .cluster(config)
        .open()
        .await
        .unwrap()
}

async fn joined(engine: &Engine) -> usize {
    engine
        .workers()
        .await
        .unwrap()
        .iter()
        .filter(|w| w.state == weir::WorkerState::Joined)
        .count()
}

/// Fencing of a replicated engine's leaders: a worker that joined the
/// engine of term 5 refuses one of term 3 (a deposed leader whose engine
/// still runs), and joins one of term 7.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_joined_a_newer_term_refuses_an_older_one() {
    let _one = ONE_CLUSTER.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let wait_joined = |engine: Arc<Engine>| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while joined(&engine).await == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the worker did not join"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let five = Arc::new(engine_of_term(&dir.path().join("t5"), addr, 5).await);
    let _w = spawn_worker(&addr.to_string(), "w1");
    wait_joined(five.clone()).await;
    Arc::into_inner(five)
        .unwrap()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
    let three = engine_of_term(&dir.path().join("t3"), addr, 3).await;
    // The worker reconnects, is welcomed by term 3, and leaves again: it
    // is never a joined worker of the older term for long, and runs
    // nothing of it.
    let t0 = tokio::time::Instant::now();
    let mut ran = 0;
    three
        .enqueue(Job::new("old-term", "whoami", "default"))
        .await
        .unwrap();
    while t0.elapsed() < Duration::from_secs(4) {
        if let Some(TicketView::Done(_)) = three.ticket("old-term").await.unwrap() {
            ran += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ran, 0, "a job of the older term ran on the worker");
    three.shutdown(Duration::from_secs(5)).await.unwrap();
    let seven = Arc::new(engine_of_term(&dir.path().join("t7"), addr, 7).await);
    wait_joined(seven.clone()).await;
    Arc::into_inner(seven)
        .unwrap()
        .shutdown(Duration::from_secs(5))
        .await
        .unwrap();
}
