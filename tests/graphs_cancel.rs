//! Cancel in the middle of a run: the run record says cancelled at once,
//! every live task instance of the run is cancelled (a running one through
//! its cancellation token), and nothing after them runs — not later, not
//! after a reconciler pass, not after the scheduler restarts.

mod graphs_support;

use graphs_support::node;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use weir::core::codec;
use weir::{
    DoneStatus, Durability, Engine, GraphDef, Partition, RunState, TaskError, TaskInput, TicketView,
};
use weir_core::names::Name;

/// Task runs per node, as the tasks saw them.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<BTreeMap<String, u32>>>);

impl Runs {
    fn saw(&self, payload: &[u8]) -> Result<TaskInput, TaskError> {
        let input: TaskInput =
            codec::decode(payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
        *self
            .0
            .lock()
            .unwrap()
            .entry(input.node.clone())
            .or_default() += 1;
        Ok(input)
    }
    fn of(&self, node: &str) -> u32 {
        self.0.lock().unwrap().get(node).copied().unwrap_or(0)
    }
}

/// Adds one to its counter when dropped.
struct Ended(Arc<Mutex<u32>>);

impl Drop for Ended {
    fn drop(&mut self) {
        *self.0.lock().unwrap() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_mid_run_cancels_live_instances() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let attempts_ended = Arc::new(Mutex::new(0u32));
    let (r1, r2, g, seen) = (
        runs.clone(),
        runs.clone(),
        gate.clone(),
        attempts_ended.clone(),
    );
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("default", 8)
        .task_fn("ok", move |ctx| {
            let runs = r1.clone();
            async move { Ok(runs.saw(&ctx.payload)?.node.into_bytes()) }
        })
        .task_fn("block", move |ctx| {
            let (runs, gate, seen) = (r2.clone(), g.clone(), seen.clone());
            async move {
                runs.saw(&ctx.payload)?;
                // Counts the attempt's end however it ends: the pool drops
                // a cancelled attempt's future.
                let _ended = Ended(seen);
                tokio::select! {
                    _ = gate.acquire() => Ok(b"released".to_vec()),
                    () = ctx.cancel.cancelled() => Err(TaskError::Retryable("cancelled".into())),
                }
            }
        })
        .open()
        .await
        .unwrap();
    // a → {b, e} (both block); b → c → d; e → f.
    let def = GraphDef::new(
        Name::new("g").unwrap(),
        vec![
            node("a", &[], "ok"),
            node("b", &["a"], "block"),
            node("e", &["a"], "block"),
            node("c", &["b"], "ok"),
            node("d", &["c"], "ok"),
            node("f", &["e"], "ok"),
        ],
    );
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while runs.of("b") + runs.of("e") < 2 {
        assert!(tokio::time::Instant::now() < deadline, "b and e to start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(engine.cancel_run("g", p.clone()).await.unwrap());
    // The record says cancelled as soon as the call returns.
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    assert_eq!(view.state, RunState::Cancelled);
    assert!(view.settled_at_ms.is_some());
    assert_eq!(
        engine
            .list_runs("g", Some(RunState::Cancelled))
            .unwrap()
            .len(),
        1
    );
    assert!(
        !engine.cancel_run("g", p.clone()).await.unwrap(),
        "a second cancel finds no active run"
    );
    // Both running instances were cancelled and their records say so.
    for n in ["b", "e"] {
        match engine.ticket(&format!("g/none/{n}/0")).await.unwrap() {
            Some(TicketView::Done(d)) => assert_eq!(d.status, DoneStatus::Cancelled, "{n}"),
            other => panic!("{n}: {other:?}"),
        }
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while *attempts_ended.lock().unwrap() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the running attempts end on their cancellation"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Nothing downstream of them runs, even with the gate open, after a
    // reconciler pass and after a scheduler restart.
    gate.close();
    let report = engine.reconcile("g").await.unwrap();
    assert_eq!(report.active_runs, 0);
    assert_eq!(report.submitted, 0);
    let children = engine.children().await.unwrap();
    let (_, cell) = children
        .iter()
        .find(|(r, _)| matches!(r, weir::actors::supervisor::Role::Scheduler(_)))
        .expect("the scheduler runs");
    cell.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let report = engine.reconcile("g").await.unwrap();
    assert_eq!(report.submitted, 0);
    for n in ["c", "d", "f"] {
        assert_eq!(runs.of(n), 0, "{n} never ran");
        assert!(
            engine
                .ticket(&format!("g/none/{n}/0"))
                .await
                .unwrap()
                .is_none(),
            "{n} was never submitted"
        );
    }
    assert_eq!((runs.of("a"), runs.of("b"), runs.of("e")), (1, 1, 1));
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    assert_eq!(view.state, RunState::Cancelled);
    let by: BTreeMap<&str, &str> = view
        .nodes
        .iter()
        .map(|n| (n.node.as_str(), n.state.as_str()))
        .collect();
    assert_eq!(by["a"], "succeeded");
    assert_eq!(by["b"], "cancelled");
    assert_eq!(by["e"], "cancelled");
    // Nodes that never ran are cancelled too, not upstream-failed by the
    // nodes the cancel stopped (issue #31 item 16).
    for n in ["c", "d", "f"] {
        assert_eq!(by[n], "cancelled", "{n}: {by:?}");
    }
    // A cancelled partition is not started again.
    let again = engine.start_run("g", p.clone()).await.unwrap();
    assert!(!again.started);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
