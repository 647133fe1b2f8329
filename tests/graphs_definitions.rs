//! Definitions and run identity (DESIGN.md §2): a graph run keeps the
//! definition it started with when another is adopted; a new run uses the
//! adopted one; a run exists at most once per (graph, partition), so a
//! repeated start changes nothing, also after the engine restarts.

mod graphs_support;

use graphs_support::node;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use weir::core::codec;
use weir::{Durability, Engine, GraphDef, Partition, RunState, TaskError, TaskInput};
use weir_core::names::Name;

/// (partition, node) → the definitions each run of it saw.
type RunLog = BTreeMap<(String, String), Vec<String>>;

/// Task runs per partition and node, with the definition each saw.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<RunLog>>);

impl Runs {
    fn saw(&self, payload: &[u8]) -> Result<TaskInput, TaskError> {
        let input: TaskInput =
            codec::decode(payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
        self.0
            .lock()
            .unwrap()
            .entry((input.partition.clone(), input.node.clone()))
            .or_default()
            .push(input.definition.clone());
        Ok(input)
    }
    fn nodes_of(&self, partition: &str) -> BTreeMap<String, Vec<String>> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|((p, _), _)| p == partition)
            .map(|((_, n), d)| (n.clone(), d.clone()))
            .collect()
    }
}

async fn engine(dir: &std::path::Path, runs: &Runs, gate: &Arc<Semaphore>) -> Engine {
    let (r1, r2, g) = (runs.clone(), runs.clone(), gate.clone());
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 8)
        .task_fn("ok", move |ctx| {
            let runs = r1.clone();
            async move { Ok(runs.saw(&ctx.payload)?.node.into_bytes()) }
        })
        .task_fn("block", move |ctx| {
            let (runs, gate) = (r2.clone(), g.clone());
            async move {
                runs.saw(&ctx.payload)?;
                let _ = gate.acquire().await;
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readopted_definition_leaves_running_runs_alone() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    let v1 = GraphDef::new(
        Name::new("g").unwrap(),
        vec![
            node("a", &[], "block"),
            node("b", &["a"], "ok"),
            node("c", &["b"], "ok"),
        ],
    );
    let v2 = GraphDef::new(
        Name::new("g").unwrap(),
        vec![
            node("a", &[], "ok"),
            node("x", &["a"], "ok"),
            node("y", &["a"], "ok"),
        ],
    );
    let h1 = engine.adopt(v1).await.unwrap().hash;
    let p1: Partition = "2026-11-28".parse().unwrap();
    engine.start_run("g", p1.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while runs.nodes_of("2026-11-28").is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "a to start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let adopted = engine.adopt(v2).await.unwrap();
    assert!(adopted.changed);
    let h2 = adopted.hash;
    assert_ne!(h1, h2);
    gate.close();
    let states = engine
        .wait_settled("g", std::slice::from_ref(&p1), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let ran = runs.nodes_of("2026-11-28");
    assert_eq!(
        ran.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["a", "b", "c"],
        "run 1 ran v1's nodes"
    );
    assert!(ran.values().all(|d| d == &vec![h1.clone()]), "{ran:?}");
    let view = engine.graph_run("g", &p1).unwrap().unwrap();
    assert_eq!(view.definition, h1);
    assert_eq!(
        view.nodes
            .iter()
            .map(|n| n.node.as_str())
            .collect::<Vec<_>>(),
        vec!["a", "b", "c"]
    );

    let p2: Partition = "2026-11-29".parse().unwrap();
    engine.start_run("g", p2.clone()).await.unwrap();
    let states = engine
        .wait_settled("g", std::slice::from_ref(&p2), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let ran = runs.nodes_of("2026-11-29");
    assert_eq!(
        ran.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["a", "x", "y"],
        "a new run uses v2"
    );
    assert!(ran.values().all(|d| d == &vec![h2.clone()]));
    assert_eq!(engine.graph_run("g", &p2).unwrap().unwrap().definition, h2);
    // The old run still reads with its own definition.
    assert_eq!(engine.graph_run("g", &p1).unwrap().unwrap().definition, h1);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_is_idempotent_per_partition() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let def = GraphDef::new(
        Name::new("g").unwrap(),
        vec![node("a", &[], "ok"), node("b", &["a"], "ok")],
    );
    let p1: Partition = "2026-11-28".parse().unwrap();
    let p2: Partition = "2026-11-29".parse().unwrap();
    {
        let engine = engine(dir.path(), &runs, &gate).await;
        engine.adopt(def.clone()).await.unwrap();
        // One call with a repeated partition, then the same call again.
        let out = engine
            .start_runs("g", vec![p1.clone(), p1.clone(), p2.clone()])
            .await
            .unwrap();
        assert_eq!(
            out.iter().map(|o| o.started).collect::<Vec<_>>(),
            vec![true, false, true]
        );
        assert_eq!(out[0].submitted, vec!["g/2026-11-28/a/0".to_string()]);
        assert!(out[1].submitted.is_empty());
        let again = engine
            .start_runs("g", vec![p1.clone(), p2.clone()])
            .await
            .unwrap();
        assert!(again.iter().all(|o| !o.started && o.submitted.is_empty()));
        let states = engine
            .wait_settled("g", &[p1.clone(), p2.clone()], Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(states, vec![RunState::Complete, RunState::Complete]);
        // A start of a settled partition does not rerun it either.
        assert!(!engine.start_run("g", p1.clone()).await.unwrap().started);
        engine.shutdown(Duration::from_secs(5)).await.unwrap();
    }
    // Nor does one after a restart of the engine.
    let engine = engine(dir.path(), &runs, &gate).await;
    assert!(
        !engine.adopt(def).await.unwrap().changed,
        "the adopted definition survived"
    );
    assert!(!engine.start_run("g", p2.clone()).await.unwrap().started);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for p in ["2026-11-28", "2026-11-29"] {
        let ran = runs.nodes_of(p);
        assert_eq!(ran.len(), 2);
        assert!(ran.values().all(|d| d.len() == 1), "{p}: {ran:?}");
    }
    assert_eq!(engine.list_runs("g", None).unwrap().len(), 2);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
