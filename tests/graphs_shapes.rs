//! Graph shapes end to end: a fan-out 1 → 1,000 → 1 and a 400-node chain
//! run every node exactly once, in order, each with its upstreams' records,
//! and settle complete; an edge of a chain costs one durable batch.

mod graphs_support;

use graphs_support::node;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir::core::codec;
use weir::{
    Durability, Engine, GraphDef, NodeDef, Partition, QueueSettings, RunState, TaskError, TaskInput,
};
use weir_core::names::Name;

/// Task runs per node, as the tasks saw them (node → rerun counts run).
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<BTreeMap<String, Vec<u32>>>>);

impl Runs {
    fn saw(&self, payload: &[u8]) -> Result<TaskInput, TaskError> {
        let input: TaskInput =
            codec::decode(payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
        self.0
            .lock()
            .unwrap()
            .entry(input.node.clone())
            .or_default()
            .push(input.rerun);
        Ok(input)
    }
    fn snapshot(&self) -> BTreeMap<String, Vec<u32>> {
        self.0.lock().unwrap().clone()
    }
}

/// An engine whose `count` task outputs the number of its upstreams and
/// whose `plus1` task outputs its single upstream's number plus one.
async fn engine(dir: &std::path::Path, runs: &Runs) -> Engine {
    engine_with(dir, runs, QueueSettings::default()).await
}

async fn engine_with(dir: &std::path::Path, runs: &Runs, queue: QueueSettings) -> Engine {
    let (r1, r2) = (runs.clone(), runs.clone());
    Engine::builder(dir)
        .durability(Durability::Flush)
        .queue_settings(queue)
        .pool("default", 16)
        .task_fn("count", move |ctx| {
            let runs = r1.clone();
            async move {
                let input = runs.saw(&ctx.payload)?;
                Ok(input.upstreams.len().to_string().into_bytes())
            }
        })
        .task_fn("plus1", move |ctx| {
            let runs = r2.clone();
            async move {
                let input = runs.saw(&ctx.payload)?;
                let up: u64 = match input.upstreams.values().next() {
                    None => 0,
                    Some(u) => String::from_utf8_lossy(&u.output)
                        .parse()
                        .map_err(|e| TaskError::Permanent(format!("upstream output: {e}")))?,
                };
                Ok((up + 1).to_string().into_bytes())
            }
        })
        .open()
        .await
        .unwrap()
}

async fn output(engine: &Engine, key: &str) -> String {
    match engine.ticket(key).await.unwrap() {
        Some(weir::TicketView::Done(d)) => String::from_utf8_lossy(&d.output).into_owned(),
        other => panic!("{key}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_1_1000_1_runs_each_node_once() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let engine = engine(dir.path(), &runs).await;
    let width = 1_000;
    let mids: Vec<String> = (0..width).map(|i| format!("m{i:04}")).collect();
    let mid_refs: Vec<&str> = mids.iter().map(String::as_str).collect();
    let mut nodes = vec![node("root", &[], "count")];
    nodes.extend(mids.iter().map(|m| node(m, &["root"], "count")));
    nodes.push(node("sink", &mid_refs, "count"));
    engine
        .adopt(GraphDef::new(Name::new("fan").unwrap(), nodes))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("fan", p.clone()).await.unwrap();
    let states = engine
        .wait_settled("fan", std::slice::from_ref(&p), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let seen = runs.snapshot();
    assert_eq!(seen.len(), width + 2, "every node ran");
    for (n, reruns) in &seen {
        assert_eq!(reruns, &vec![0], "node {n} ran once, at rerun 0");
    }
    // The sink saw every mid's record; each mid saw the root's.
    assert_eq!(output(&engine, "fan/none/sink/0").await, width.to_string());
    assert_eq!(output(&engine, "fan/none/m0000/0").await, "1");
    let view = engine.graph_run("fan", &p).unwrap().unwrap();
    assert_eq!(view.nodes.len(), width + 2);
    assert!(view
        .nodes
        .iter()
        .all(|n| n.state == "succeeded" && n.rerun == 0));
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chain_of_400_runs_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let engine = engine(dir.path(), &runs).await;
    let len = 400;
    let names: Vec<String> = (0..len).map(|i| format!("n{i:03}")).collect();
    let nodes: Vec<NodeDef> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i == 0 {
                node(n, &[], "plus1")
            } else {
                node(n, &[names[i - 1].as_str()], "plus1")
            }
        })
        .collect();
    engine
        .adopt(GraphDef::new(Name::new("chain").unwrap(), nodes))
        .await
        .unwrap();
    let p: Partition = "2026-11-29".parse().unwrap();
    let started = engine.start_run("chain", p.clone()).await.unwrap();
    assert_eq!(
        started.submitted,
        vec!["chain/2026-11-29/n000/0".to_string()]
    );
    let states = engine
        .wait_settled("chain", std::slice::from_ref(&p), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let seen = runs.snapshot();
    assert_eq!(seen.len(), len);
    assert!(seen.values().all(|r| r == &vec![0]), "each node ran once");
    // Each node added one to its upstream's output: the order held.
    assert_eq!(
        output(&engine, "chain/2026-11-29/n399/0").await,
        len.to_string()
    );
    let view = engine.graph_run("chain", &p).unwrap().unwrap();
    let order: Vec<&str> = view.nodes.iter().map(|n| n.node.as_str()).collect();
    let want: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(order, want, "the view lists nodes in topological order");
    // Node i started no earlier than node i-1 finished.
    for w in view.nodes.windows(2) {
        let (up, down) = (&w[0], &w[1]);
        assert!(
            down.started_ms.unwrap() >= up.finished_ms.unwrap(),
            "{} started before {} finished",
            down.node,
            up.node
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Runs a chain of `len` plus1 nodes with `successors_wait_us`; returns
/// the durable batches the queue wrote from the start to the settle, and
/// checks that each node took its upstream's output.
async fn chain_batches(len: usize, successors_wait_us: u64) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let engine = engine_with(
        dir.path(),
        &runs,
        QueueSettings {
            successors_wait_us,
            ..QueueSettings::default()
        },
    )
    .await;
    let names: Vec<String> = (0..len).map(|i| format!("n{i:03}")).collect();
    let nodes: Vec<NodeDef> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let ups: Vec<&str> = if i == 0 {
                vec![]
            } else {
                vec![names[i - 1].as_str()]
            };
            node(n, &ups, "plus1")
        })
        .collect();
    engine
        .adopt(GraphDef::new(Name::new("chain").unwrap(), nodes))
        .await
        .unwrap();
    let p = Partition::NONE;
    let before = engine.counts().borrow().batches;
    engine.start_run("chain", p.clone()).await.unwrap();
    let states = engine
        .wait_settled("chain", std::slice::from_ref(&p), Duration::from_secs(60))
        .await
        .unwrap();
    let batches = engine.counts().borrow().batches - before;
    assert_eq!(states, vec![RunState::Complete]);
    assert!(
        runs.snapshot().values().all(|r| r == &vec![0]),
        "each node ran once"
    );
    // The output each node was given, ahead of its upstream's record or
    // not, was that record's.
    assert_eq!(
        output(&engine, &format!("chain/none/n{:03}/0", len - 1)).await,
        len.to_string()
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    batches
}

/// A node's success and its downstream's enqueue and selection share one
/// durable batch: a chain of 60 writes about 60 batches. Without the early
/// notice (wait 0), the downstream's enqueue is a batch of its own: about
/// 120. The wait here is long (a second) so that a loaded machine's slow
/// scheduler cannot split an edge; the answer always comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_costs_one_durable_batch_per_edge() {
    let len = 60;
    let one = chain_batches(len, 1_000_000).await;
    assert!(
        one <= len as u64 + 3,
        "{one} batches for a chain of {len}: one per edge expected"
    );
    let two = chain_batches(len, 0).await;
    assert!(
        two >= 2 * len as u64 - 3,
        "{two} batches for a chain of {len} without the early notice"
    );
}
