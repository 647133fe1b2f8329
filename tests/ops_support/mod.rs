//! What the `ops_*` tests share: an engine whose tasks are scripted by
//! switches (fail, block), graph builders, and waits with deadlines.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use weir::actors::clock::Clock;
use weir::core::codec;
use weir::{
    BreakerSettings, Durability, Engine, GraphDef, NodeDef, Partition, RetryPolicy, TaskError,
    TaskInput, TaskSpec,
};
use weir_core::names::Name;

/// Switches the tasks read, and what they saw.
#[derive(Clone)]
pub struct Script {
    /// While set, `flaky` and `plain` fail (permanently).
    pub failing: Arc<AtomicBool>,
    /// `block` waits for a permit of this (none at first).
    pub gate: Arc<Semaphore>,
    /// Graph task runs: node → rerun counts, in order.
    pub runs: Arc<Mutex<BTreeMap<String, Vec<u32>>>>,
    /// Plain job runs: key, in order.
    pub plain: Arc<Mutex<Vec<String>>>,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            failing: Arc::new(AtomicBool::new(false)),
            gate: Arc::new(Semaphore::new(0)),
            runs: Arc::default(),
            plain: Arc::default(),
        }
    }
}

impl Script {
    pub fn fail(&self, on: bool) {
        self.failing.store(on, Ordering::SeqCst);
    }
    pub fn runs_of(&self, node: &str) -> Vec<u32> {
        self.runs
            .lock()
            .unwrap()
            .get(node)
            .cloned()
            .unwrap_or_default()
    }
    pub fn plain_runs(&self) -> Vec<String> {
        self.plain.lock().unwrap().clone()
    }
    fn saw(&self, payload: &[u8]) -> Result<TaskInput, TaskError> {
        let input: TaskInput =
            codec::decode(payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
        self.runs
            .lock()
            .unwrap()
            .entry(input.node.clone())
            .or_default()
            .push(input.rerun);
        Ok(input)
    }
}

/// An engine in `dir` with pool `default` (8 slots), target `db` (a
/// breaker that opens on the first failure and stays open an hour), and
/// tasks: `ok`; `flaky` (fails while the script says); `block` (waits for
/// the gate); `plain` (a plain job's task, fails while the script says).
/// `clock`: anchored there, else the system clock.
pub async fn open(dir: &Path, script: &Script, clock: Option<u64>) -> Engine {
    let (s1, s2, s3, s4) = (
        script.clone(),
        script.clone(),
        script.clone(),
        script.clone(),
    );
    let mut b = Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 8)
        .target(
            "db",
            BreakerSettings {
                failures_max: 1,
                cooldown_ms: 3_600_000,
                ..BreakerSettings::default()
            },
        )
        .task_fn("ok", move |ctx| {
            let s = s1.clone();
            async move {
                let i = s.saw(&ctx.payload)?;
                Ok(format!("{}@{}", i.node, i.rerun).into_bytes())
            }
        })
        .task_fn("flaky", move |ctx| {
            let s = s2.clone();
            async move {
                s.saw(&ctx.payload)?;
                if s.failing.load(Ordering::SeqCst) {
                    return Err(TaskError::Permanent("scripted failure".into()));
                }
                Ok(Vec::new())
            }
        })
        .task_fn("block", move |ctx| {
            let s = s3.clone();
            async move {
                s.saw(&ctx.payload)?;
                let _permit = s.gate.acquire().await;
                Ok(Vec::new())
            }
        })
        .task_fn("plain", move |ctx| {
            let s = s4.clone();
            async move {
                s.plain.lock().unwrap().push(ctx.key.to_string());
                if s.failing.load(Ordering::SeqCst) {
                    return Err(TaskError::Retryable("scripted failure".into()));
                }
                Ok(b"done".to_vec())
            }
        });
    if let Some(epoch_ms) = clock {
        b = b.clock(Clock::anchored(epoch_ms));
    }
    b.open().await.unwrap()
}

/// Node `name` after `ups`, running `task`, with a single attempt.
pub fn node(name: &str, ups: &[&str], task: &str) -> NodeDef {
    let mut n = NodeDef::new(
        Name::new(name).unwrap(),
        ups.iter().map(|u| Name::new(*u).unwrap()).collect(),
        TaskSpec {
            task: Name::new(task).unwrap(),
            config: serde_json::Value::Null,
        },
    );
    n.retry = RetryPolicy::once();
    n
}

/// A graph of `nodes` (unpartitioned unless changed).
pub fn graph(name: &str, nodes: Vec<NodeDef>) -> GraphDef {
    GraphDef::new(Name::new(name).unwrap(), nodes)
}

/// Waits (real time) until `cond` holds, up to 20 s.
pub async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Each node's (state, rerun) in run `p` of `graph`.
pub fn states(engine: &Engine, graph: &str, p: &Partition) -> BTreeMap<String, (String, u32)> {
    engine
        .graph_run(graph, p)
        .unwrap()
        .unwrap()
        .nodes
        .into_iter()
        .map(|n| (n.node, (n.state, n.rerun)))
        .collect()
}

/// (state, rerun) as [`states`] gives them.
pub fn st(s: &str, rerun: u32) -> (String, u32) {
    (s.to_string(), rerun)
}

/// Waits until run `p` of `graph` has settled; returns its state.
pub async fn settled(engine: &Engine, graph: &str, p: &Partition) -> weir::RunState {
    engine
        .wait_settled(graph, std::slice::from_ref(p), Duration::from_secs(20))
        .await
        .unwrap()[0]
}

/// A run of graph `g` (`a` flaky → `b`) whose `a` failed: the engine, with
/// `script` failing `a` until told otherwise, and the run's partition.
pub async fn failed_run(dir: &Path, script: &Script) -> (Engine, Partition) {
    script.fail(true);
    let engine = open(dir, script, None).await;
    engine
        .adopt(graph(
            "g",
            vec![node("a", &[], "flaky"), node("b", &["a"], "ok")],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "g", &p).await, weir::RunState::Failed);
    (engine, p)
}
