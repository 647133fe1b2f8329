//! Workers embedded in applications (`weir::worker::Worker::builder`),
//! serving an engine embedded in another process: the test binary runs
//! the engine and starts itself twice as worker processes.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use weir::worker::Worker;
use weir::{ClusterConfig, Durability, Engine, EngineEvent, Job, TicketView};

const JOIN_VAR: &str = "WEIR_TEST_CLUSTER_JOIN";
const NAME_VAR: &str = "WEIR_TEST_CLUSTER_NAME";
const COOKIE: &str = "embedded-cluster-cookie";

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
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
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
