//! Reruns, with swale's semantics (REFERENCE.md "swale 0.3"): a rerun of a
//! succeeded middle node runs it and its `all_success` downstreams again at
//! the next rerun count, leaves its upstreams and its `all_done`
//! downstreams alone, turns the settled run active again until it settles;
//! a rerun answers Submitted, Active (its instance is live), NoRecord (the
//! node never had a record) or NotReady (its upstreams do not satisfy its
//! rule, also while it waits in the scope of an upstream's rerun). A rerun
//! of a failed node lets its upstream_failed downstreams run.

mod graphs_support;

use graphs_support::node;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use weir::core::codec;
use weir::{
    Durability, Engine, EngineEvent, GraphDef, Partition, RerunOutcome, RunState, TaskError,
    TaskInput, TriggerRule,
};
use weir_core::names::Name;

/// Task runs per node (rerun counts run), as the tasks saw them.
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
    fn of(&self, node: &str) -> Vec<u32> {
        self.0
            .lock()
            .unwrap()
            .get(node)
            .cloned()
            .unwrap_or_default()
    }
}

/// Tasks: `ok` outputs its node and rerun; `fail_first` fails at rerun 0
/// and succeeds after; `block` and `block_rerun` (at rerun ≥ 1 only) wait
/// until `gate` is closed.
async fn engine(dir: &std::path::Path, runs: &Runs, gate: &Arc<Semaphore>) -> Engine {
    let (r1, r2, r3, r4, r5) = (
        runs.clone(),
        runs.clone(),
        runs.clone(),
        runs.clone(),
        runs.clone(),
    );
    let (g1, g2, g3) = (gate.clone(), gate.clone(), gate.clone());
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 8)
        .task_fn("ok", move |ctx| {
            let runs = r1.clone();
            async move {
                let i = runs.saw(&ctx.payload)?;
                Ok(format!("{}@{}", i.node, i.rerun).into_bytes())
            }
        })
        .task_fn("fail_first", move |ctx| {
            let runs = r2.clone();
            async move {
                let i = runs.saw(&ctx.payload)?;
                if i.rerun == 0 {
                    return Err(TaskError::Permanent("first run fails".into()));
                }
                Ok(Vec::new())
            }
        })
        .task_fn("block", move |ctx| {
            let (runs, gate) = (r3.clone(), g1.clone());
            async move {
                runs.saw(&ctx.payload)?;
                let _ = gate.acquire().await;
                Ok(Vec::new())
            }
        })
        .task_fn("fail_then_block", move |ctx| {
            let (runs, gate) = (r5.clone(), g3.clone());
            async move {
                let i = runs.saw(&ctx.payload)?;
                if i.rerun == 0 {
                    return Err(TaskError::Permanent("first run fails".into()));
                }
                let _ = gate.acquire().await;
                Ok(Vec::new())
            }
        })
        .task_fn("block_rerun", move |ctx| {
            let (runs, gate) = (r4.clone(), g2.clone());
            async move {
                let i = runs.saw(&ctx.payload)?;
                if i.rerun >= 1 {
                    let _ = gate.acquire().await;
                }
                Ok(format!("{}@{}", i.node, i.rerun).into_bytes())
            }
        })
        .open()
        .await
        .unwrap()
}

async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn states(engine: &Engine, graph: &str, p: &Partition) -> BTreeMap<String, (String, u32)> {
    engine
        .graph_run(graph, p)
        .unwrap()
        .unwrap()
        .nodes
        .into_iter()
        .map(|n| (n.node, (n.state, n.rerun)))
        .collect()
}

fn st(s: &str, rerun: u32) -> (String, u32) {
    (s.to_string(), rerun)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_of_a_middle_node_reruns_downstreams_only() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    let mut report = node("report", &["b"], "ok");
    report.trigger_rule = TriggerRule::AllDone;
    // a → b → c → d, and b → report (all_done).
    let def = GraphDef::new(
        Name::new("g").unwrap(),
        vec![
            node("a", &[], "ok"),
            node("b", &["a"], "ok"),
            node("c", &["b"], "block_rerun"),
            node("d", &["c"], "ok"),
            report,
        ],
    );
    engine.adopt(def).await.unwrap();
    let p: Partition = "2026-11-29".parse().unwrap();
    // Subscribed before the first run: its settle event is sent after
    // its record is written, so it may still be on its way when the
    // store already says complete; it is drained below before the rerun.
    let mut events = engine.subscribe();
    engine.start_run("g", p.clone()).await.unwrap();
    let first = engine
        .wait_settled("g", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(first, vec![RunState::Complete]);
    let settled_at = engine.graph_run("g", &p).unwrap().unwrap().settled_at_ms;
    assert!(settled_at.is_some());
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the first settle event")
            .unwrap();
        if matches!(&e, EngineEvent::RunSettled { graph, .. } if graph == "g") {
            break;
        }
    }

    let outcome = engine.rerun("g", p.clone(), "b").await.unwrap();
    assert_eq!(
        outcome,
        RerunOutcome::Submitted("g/2026-11-29/b/1".into()),
        "a succeeded node reruns at the next count"
    );
    // c/1 blocks: the run is active again, b reran, c runs, d waits for it.
    wait_for("c to run again", || runs.of("c").len() == 2).await;
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    assert_eq!(view.state, RunState::Active, "a rerun reactivates the run");
    assert_eq!(view.settled_at_ms, None);
    let s = states(&engine, "g", &p);
    assert_eq!(s["a"], st("succeeded", 0), "upstreams are left alone");
    assert_eq!(s["b"], st("succeeded", 1));
    assert_eq!(s["c"], st("ready", 1));
    assert_eq!(s["d"], st("pending", 1), "d waits for c's new record");
    assert_eq!(s["report"], st("succeeded", 0), "all_done keeps its record");

    // Rerun outcomes while c/1 runs.
    assert_eq!(
        engine.rerun("g", p.clone(), "c").await.unwrap(),
        RerunOutcome::Active("g/2026-11-29/c/1".into()),
        "the instance at the next count is live"
    );
    assert_eq!(
        engine.rerun("g", p.clone(), "d").await.unwrap(),
        RerunOutcome::NotReady,
        "d has a record at count 0 and waits at count 1 for c: its upstreams \
         do not satisfy it (swale's NotReady, as the all_done node gets)"
    );

    gate.close();
    let second = engine
        .wait_settled("g", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(second, vec![RunState::Complete]);
    assert_eq!(runs.of("a"), vec![0]);
    assert_eq!(runs.of("b"), vec![0, 1]);
    assert_eq!(runs.of("c"), vec![0, 1]);
    assert_eq!(runs.of("d"), vec![0, 1]);
    assert_eq!(runs.of("report"), vec![0]);
    let s = states(&engine, "g", &p);
    assert_eq!(s["a"], st("succeeded", 0));
    assert_eq!(s["b"], st("succeeded", 1));
    assert_eq!(s["c"], st("succeeded", 1));
    assert_eq!(s["d"], st("succeeded", 1));
    assert_eq!(s["report"], st("succeeded", 0));
    // d/1 saw c's new output.
    match engine.ticket("g/2026-11-29/c/1").await.unwrap() {
        Some(weir::TicketView::Done(d)) => assert_eq!(d.output, b"c@1"),
        other => panic!("{other:?}"),
    }
    // The run went active and settled again, in that order.
    let mut seen = Vec::new();
    while seen.last() != Some(&"settled") {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("the settle event")
            .unwrap();
        match e {
            EngineEvent::RunStarted { graph, .. } if graph == "g" => seen.push("started"),
            EngineEvent::RunSettled { graph, state, .. } if graph == "g" => {
                assert_eq!(state, "complete");
                seen.push("settled");
            }
            _ => {}
        }
    }
    assert_eq!(seen, vec!["started", "settled"]);
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    assert!(view.settled_at_ms >= settled_at);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_outcomes_active_no_record_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    // Run 1 of "blocked": a blocks, b after it has not run.
    engine
        .adopt(GraphDef::new(
            Name::new("blocked").unwrap(),
            vec![node("a", &[], "block"), node("b", &["a"], "ok")],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("blocked", p.clone()).await.unwrap();
    wait_for("a to run", || runs.of("a").len() == 1).await;
    assert_eq!(
        engine.rerun("blocked", p.clone(), "a").await.unwrap(),
        RerunOutcome::Active("blocked/none/a/0".into()),
        "a rerun while the instance runs submits nothing"
    );
    assert_eq!(
        engine.rerun("blocked", p.clone(), "b").await.unwrap(),
        RerunOutcome::NoRecord,
        "b has not run"
    );
    // Unknown node and unknown run are errors, not outcomes.
    assert!(engine.rerun("blocked", p.clone(), "zz").await.is_err());
    assert!(engine
        .rerun("blocked", "2020-01-01".parse().unwrap(), "a")
        .await
        .is_err());
    gate.close();
    let done = engine
        .wait_settled("blocked", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done, vec![RunState::Complete]);
    assert_eq!(runs.of("a"), vec![0], "the Active answer submitted nothing");

    // "fails": x fails at rerun 0, so y is upstream_failed.
    engine
        .adopt(GraphDef::new(
            Name::new("fails").unwrap(),
            vec![node("x", &[], "fail_first"), node("y", &["x"], "ok")],
        ))
        .await
        .unwrap();
    engine.start_run("fails", p.clone()).await.unwrap();
    let failed = engine
        .wait_settled("fails", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(failed, vec![RunState::Failed]);
    assert_eq!(
        engine.rerun("fails", p.clone(), "y").await.unwrap(),
        RerunOutcome::NotReady,
        "y's upstream failed"
    );
    let view = engine.graph_run("fails", &p).unwrap().unwrap();
    assert_eq!(
        view.state,
        RunState::Failed,
        "a refused rerun changes nothing"
    );
    // A rerun of the failed node runs it again; y is decided again and runs.
    assert_eq!(
        engine.rerun("fails", p.clone(), "x").await.unwrap(),
        RerunOutcome::Submitted("fails/none/x/1".into())
    );
    let again = engine
        .wait_settled("fails", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(again, vec![RunState::Complete]);
    let s = states(&engine, "fails", &p);
    assert_eq!(s["x"], st("succeeded", 1));
    assert_eq!(s["y"], st("succeeded", 1));
    assert_eq!(runs.of("x"), vec![0, 1]);
    assert_eq!(runs.of("y"), vec![1], "y never ran at count 0");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// While a failed node reruns, the record it reruns stays in sight (faults
/// #10): its state, attempts and error beside the running rerun, until the
/// rerun ends and its own record takes the place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerunning_node_keeps_its_previous_record_in_sight() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    engine
        .adopt(GraphDef::new(
            Name::new("fb").unwrap(),
            vec![node("x", &[], "fail_then_block")],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("fb", p.clone()).await.unwrap();
    let done = engine
        .wait_settled("fb", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done, vec![RunState::Failed]);
    assert_eq!(
        engine.rerun("fb", p.clone(), "x").await.unwrap(),
        RerunOutcome::Submitted("fb/none/x/1".into())
    );
    wait_for("x/1 to run", || runs.of("x").len() == 2).await;
    let run = engine.graph_run("fb", &p).unwrap().unwrap();
    let x = run.nodes.iter().find(|n| n.node == "x").unwrap();
    assert_eq!((x.state.as_str(), x.rerun), ("ready", 1), "{x:?}");
    let prev = x
        .previous
        .as_ref()
        .expect("the failed record stays in sight");
    assert_eq!((prev.rerun, prev.state.as_str()), (0, "failed"), "{prev:?}");
    assert_eq!(prev.error.as_deref(), Some("first run fails"), "{prev:?}");
    gate.close();
    let done = engine
        .wait_settled("fb", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(done, vec![RunState::Complete]);
    let run = engine.graph_run("fb", &p).unwrap().unwrap();
    let x = run.nodes.iter().find(|n| n.node == "x").unwrap();
    assert_eq!(x.state, "succeeded");
    assert!(x.previous.is_none(), "the rerun's own record now: {x:?}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
