//! Priorities (issue #18 item 3): a backlog of mixed priorities in a pool
//! of one slot is handed out highest first, FIFO within a priority — for
//! plain jobs (`Job::priority`) and for graph nodes (`priority` on a
//! node).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use weir::{
    Durability, Engine, GraphDef, Job, NodeDef, Partition, RetryPolicy, RunState, TaskInput,
    TaskSpec,
};
use weir_core::names::Name;

/// An engine whose pool `default` has one slot, with `gate` (holds the
/// slot until released) and `rec` (records what ran, in order).
async fn engine(
    dir: &std::path::Path,
) -> (Engine, Arc<Semaphore>, Arc<Notify>, Arc<Mutex<Vec<String>>>) {
    let release = Arc::new(Semaphore::new(0));
    let started = Arc::new(Notify::new());
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (r, s, log) = (release.clone(), started.clone(), ran.clone());
    let engine = Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 1)
        .task_fn("gate", move |_ctx| {
            let (r, s) = (r.clone(), s.clone());
            async move {
                s.notify_one();
                let _ = r.acquire().await.map(|p| p.forget());
                Ok(Vec::new())
            }
        })
        .task_fn("rec", move |ctx| {
            let log = log.clone();
            async move {
                // A graph node records its node's name, a job its key.
                let name = match weir::core::codec::decode::<TaskInput>(&ctx.payload) {
                    Ok(input) => input.node,
                    Err(_) => ctx.key.to_string(),
                };
                log.lock().unwrap().push(name);
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap();
    (engine, release, started, ran)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_handed_out_highest_priority_first_fifo_within() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, release, started, ran) = engine(dir.path()).await;
    engine
        .enqueue(Job::new("gate", "gate", "default"))
        .await
        .unwrap();
    started.notified().await;
    // The slot is taken: everything below waits in the backlog.
    let backlog = [
        ("j0", 0),
        ("j1", 5),
        ("j2", -2),
        ("j3", 5),
        ("j4", 0),
        ("j5", 9),
        ("j6", -2),
        ("j7", 0),
    ];
    let jobs = backlog
        .iter()
        .map(|(k, p)| Job::new(*k, "rec", "default").with_priority(*p))
        .collect();
    for answer in engine.enqueue_many(jobs).await.unwrap() {
        answer.unwrap();
    }
    release.add_permits(1);
    engine
        .drain_until_idle(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(
        *ran.lock().unwrap(),
        ["j5", "j1", "j3", "j0", "j4", "j7", "j2", "j6"]
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

fn node(name: &str, ups: &[&str], task: &str, priority: i32) -> NodeDef {
    let mut n = NodeDef::new(
        Name::new(name).unwrap(),
        ups.iter().map(|u| Name::new(*u).unwrap()).collect(),
        TaskSpec {
            task: Name::new(task).unwrap(),
            config: serde_json::Value::Null,
        },
    );
    n.retry = RetryPolicy::once();
    n.priority = priority;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_nodes_ready_together_run_by_their_priority() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, release, _started, ran) = engine(dir.path()).await;
    release.add_permits(1);
    // The root holds the slot while its downstreams become ready at once.
    let def = GraphDef::new(
        Name::new("prio").unwrap(),
        vec![
            node("root", &[], "gate", 0),
            node("low", &["root"], "rec", -1),
            node("mid", &["root"], "rec", 0),
            node("high", &["root"], "rec", 7),
            node("mid2", &["root"], "rec", 0),
            node("high2", &["root"], "rec", 7),
        ],
    );
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("prio", p.clone()).await.unwrap();
    let states = engine
        .wait_settled("prio", std::slice::from_ref(&p), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(states, [RunState::Complete]);
    assert_eq!(
        *ran.lock().unwrap(),
        ["high", "high2", "mid", "mid2", "low"],
        "by priority, then submit order"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
