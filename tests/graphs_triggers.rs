//! Trigger rules inside graphs, end to end, against Airflow's semantics
//! (trigger_rule_dep.py, as summarised in REFERENCE.md "Trigger rules"):
//! one small graph per row, whose upstream outcomes come from tasks that
//! succeed or fail and from nodes the scheduler decides (skipped: an
//! `all_failed` node after a success; upstream_failed: an `all_success`
//! node after a failure). Each row checks the downstream's state, that it
//! ran only when ready, and that its own `all_success` downstream follows
//! it (a skip propagates as a skip, a failure as upstream_failed). Also:
//! early decisions while an upstream still runs, and a node failing after
//! its retries.

mod graphs_support;

use graphs_support::node;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use weir::core::codec;
use weir::{
    Durability, Engine, GraphDef, NodeDef, Partition, RunState, TaskError, TaskInput, TriggerRule,
};
use weir_core::names::Name;

fn ruled(name: &str, ups: &[&str], rule: TriggerRule) -> NodeDef {
    let mut n = node(name, ups, "ok");
    n.trigger_rule = rule;
    n
}

/// Task runs per graph and node, as the tasks saw them.
#[derive(Clone, Default)]
struct Runs(Arc<Mutex<RunLog>>);

/// (partition, node) → the rerun counts it ran at.
type RunLog = BTreeMap<(String, String), Vec<u32>>;

impl Runs {
    fn saw(&self, payload: &[u8]) -> Result<TaskInput, TaskError> {
        let input: TaskInput =
            codec::decode(payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
        self.0
            .lock()
            .unwrap()
            .entry((input.graph.clone(), input.node.clone()))
            .or_default()
            .push(input.rerun);
        Ok(input)
    }
    fn count(&self, graph: &str, node: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .get(&(graph.to_string(), node.to_string()))
            .map_or(0, Vec::len)
    }
}

/// Tasks: `ok` succeeds, `fail` fails permanently, `flaky` fails and may
/// be retried, `block` waits until `gate` is closed.
async fn engine(dir: &std::path::Path, runs: &Runs, gate: &Arc<Semaphore>) -> Engine {
    let (r1, r2, r3, r4) = (runs.clone(), runs.clone(), runs.clone(), runs.clone());
    let gate = gate.clone();
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 16)
        .task_fn("ok", move |ctx| {
            let runs = r1.clone();
            async move { Ok(runs.saw(&ctx.payload)?.node.into_bytes()) }
        })
        .task_fn("fail", move |ctx| {
            let runs = r2.clone();
            async move {
                runs.saw(&ctx.payload)?;
                Err(TaskError::Permanent("boom".into()))
            }
        })
        .task_fn("flaky", move |ctx| {
            let runs = r3.clone();
            async move {
                runs.saw(&ctx.payload)?;
                Err(TaskError::Retryable(format!(
                    "attempt {} failed",
                    ctx.attempt
                )))
            }
        })
        .task_fn("block", move |ctx| {
            let (runs, gate) = (r4.clone(), gate.clone());
            async move {
                let input = runs.saw(&ctx.payload)?;
                // A closed gate releases every waiter.
                let _ = gate.acquire().await;
                Ok(input.node.into_bytes())
            }
        })
        .open()
        .await
        .unwrap()
}

/// An upstream outcome, and how a row's graph produces it.
#[derive(Debug, Clone, Copy)]
enum Up {
    /// Succeeded: a root that succeeds.
    S,
    /// Failed: a root that fails.
    F,
    /// Skipped: an `all_failed` node after a root that succeeds.
    K,
    /// Upstream-failed: an `all_success` node after a root that fails.
    U,
}

impl Up {
    fn state(self) -> &'static str {
        match self {
            Up::S => "succeeded",
            Up::F => "failed",
            Up::K => "skipped",
            Up::U => "upstream_failed",
        }
    }
}

/// The nodes that produce `ups` (upstream j is node `u{j}`), then `d` with
/// `rule` over them and `e`, an `all_success` node after `d`.
fn row_graph(name: &str, rule: TriggerRule, ups: &[Up]) -> GraphDef {
    let mut nodes = Vec::new();
    let mut up_names = Vec::new();
    for (j, up) in ups.iter().enumerate() {
        let u = format!("u{j}");
        let r = format!("r{j}");
        match up {
            Up::S => nodes.push(node(&u, &[], "ok")),
            Up::F => nodes.push(node(&u, &[], "fail")),
            Up::K => {
                nodes.push(node(&r, &[], "ok"));
                nodes.push(ruled(&u, &[&r], TriggerRule::AllFailed));
            }
            Up::U => {
                nodes.push(node(&r, &[], "fail"));
                nodes.push(ruled(&u, &[&r], TriggerRule::AllSuccess));
            }
        }
        up_names.push(u);
    }
    let refs: Vec<&str> = up_names.iter().map(String::as_str).collect();
    nodes.push(ruled("d", &refs, rule));
    nodes.push(ruled("e", &["d"], TriggerRule::AllSuccess));
    GraphDef::new(Name::new(name).unwrap(), nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rule_decides_as_airflow() {
    use TriggerRule::*;
    use Up::*;
    // (rule, upstream outcomes, d's state). Rows avoid `all_success` over a
    // skip and a failure together: Airflow's answer depends on which
    // upstream finishes first.
    let table: &[(TriggerRule, &[Up], &str)] = &[
        (AllSuccess, &[S, S], "succeeded"),
        (AllSuccess, &[S, F], "upstream_failed"),
        (AllSuccess, &[S, U], "upstream_failed"),
        (AllSuccess, &[S, K], "skipped"),
        (AllFailed, &[F, U], "succeeded"),
        (AllFailed, &[F, S], "skipped"),
        (AllFailed, &[F, K], "skipped"),
        (AllDone, &[S, F, K, U], "succeeded"),
        (AllSkipped, &[K, K], "succeeded"),
        (AllSkipped, &[K, S], "skipped"),
        (AllSkipped, &[K, F], "skipped"),
        (AllSkipped, &[K, U], "skipped"),
        (OneSuccess, &[S, F], "succeeded"),
        (OneSuccess, &[F, K], "upstream_failed"),
        (OneSuccess, &[U, K], "upstream_failed"),
        (OneSuccess, &[K, K], "skipped"),
        (OneFailed, &[F, S], "succeeded"),
        (OneFailed, &[U, S], "succeeded"),
        (OneFailed, &[S, K], "skipped"),
        (OneDone, &[F, K], "succeeded"),
        (OneDone, &[S, U], "succeeded"),
        (OneDone, &[K, U], "skipped"),
        (NoneFailed, &[S, K], "succeeded"),
        (NoneFailed, &[S, F], "upstream_failed"),
        (NoneFailed, &[K, U], "upstream_failed"),
        (NoneFailedMinOneSuccess, &[S, K], "succeeded"),
        (NoneFailedMinOneSuccess, &[K, K], "skipped"),
        (NoneFailedMinOneSuccess, &[S, F], "upstream_failed"),
        (NoneSkipped, &[S, F], "succeeded"),
        (NoneSkipped, &[S, U], "succeeded"),
        (NoneSkipped, &[S, K], "skipped"),
        (Always, &[F, U], "succeeded"),
        (Always, &[K], "succeeded"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    let p = Partition::NONE;
    for (i, (rule, ups, _)) in table.iter().enumerate() {
        let g = format!("row{i}");
        engine.adopt(row_graph(&g, *rule, ups)).await.unwrap();
        engine.start_run(&g, p.clone()).await.unwrap();
    }
    for (i, (rule, ups, want)) in table.iter().enumerate() {
        let g = format!("row{i}");
        let states = match engine
            .wait_settled(&g, std::slice::from_ref(&p), Duration::from_secs(30))
            .await
        {
            Ok(s) => s,
            Err(e) => panic!(
                "#{i}: rule {rule:?}, upstream {ups:?}: {e}: {:?}",
                engine.graph_run(&g, &p)
            ),
        };
        let view = engine.graph_run(&g, &p).unwrap().unwrap();
        let by: BTreeMap<&str, &str> = view
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.state.as_str()))
            .collect();
        for (j, up) in ups.iter().enumerate() {
            assert_eq!(
                by[format!("u{j}").as_str()],
                up.state(),
                "#{i}: rule {rule:?}, upstream {ups:?}: upstream u{j} is not as built"
            );
        }
        let got = by["d"];
        assert_eq!(
            got, *want,
            "#{i}: rule {rule:?}, upstream {ups:?}: got {got:?}, want {want:?}"
        );
        let ran = runs.count(&g, "d");
        assert_eq!(
            ran,
            usize::from(*want == "succeeded"),
            "#{i}: rule {rule:?}, upstream {ups:?}: d ran {ran} times, state {got}"
        );
        // An all_success node after d: a skip stays a skip, a failure
        // becomes upstream_failed.
        assert_eq!(
            by["e"], *want,
            "#{i}: rule {rule:?}, upstream {ups:?}: e after d ({got}) is {}",
            by["e"]
        );
        let failing = by
            .values()
            .any(|s| *s == "failed" || *s == "upstream_failed");
        let want_run = if failing {
            RunState::Failed
        } else {
            RunState::Complete
        };
        assert_eq!(
            states,
            vec![want_run],
            "#{i}: rule {rule:?}, upstream {ups:?}: run state, nodes {by:?}"
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Airflow decides as soon as the outcome is certain: an `all_success`
/// node is upstream_failed, and its downstream too, on its first failed
/// upstream, while another upstream still runs; a `one_success` node runs
/// on its first success while another upstream still runs; an `always`
/// node runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_decisions_do_not_wait_for_running_upstreams() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    let def = GraphDef::new(
        Name::new("early").unwrap(),
        vec![
            node("slow", &[], "block"),
            node("f", &[], "fail"),
            node("a", &[], "ok"),
            ruled("d", &["slow", "f"], TriggerRule::AllSuccess),
            ruled("d2", &["d"], TriggerRule::AllSuccess),
            ruled("o", &["slow", "a"], TriggerRule::OneSuccess),
            ruled("al", &["slow"], TriggerRule::Always),
        ],
    );
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    let started = engine.start_run("early", p.clone()).await.unwrap();
    assert!(
        started.submitted.contains(&"early/none/al/0".to_string()),
        "an always node is submitted with the roots: {:?}",
        started.submitted
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let view = engine.graph_run("early", &p).unwrap().unwrap();
        let by: BTreeMap<String, String> = view
            .nodes
            .iter()
            .map(|n| (n.node.clone(), n.state.clone()))
            .collect();
        if by["d"] == "upstream_failed"
            && by["d2"] == "upstream_failed"
            && by["o"] == "succeeded"
            && by["al"] == "succeeded"
        {
            assert_eq!(by["slow"], "ready", "slow is still running: {by:?}");
            assert_eq!(view.state, RunState::Active);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no early decision: {by:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(runs.count("early", "slow"), 1);
    gate.close();
    let states = engine
        .wait_settled("early", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Failed]);
    assert_eq!(runs.count("early", "d"), 0, "a decided node never runs");
    assert_eq!(runs.count("early", "d2"), 0);
    assert_eq!(runs.count("early", "o"), 1);
    assert_eq!(runs.count("early", "al"), 1);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A node that fails every attempt is recorded failed after its last
/// retry (attempts counted, error kept), and only then are its downstreams
/// decided upstream_failed, transitively; an `all_done` one still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_after_retries_fails_downstreams() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = engine(dir.path(), &runs, &gate).await;
    let mut flaky = node("flaky", &["a"], "flaky");
    flaky.retry = weir::RetryPolicy {
        attempts_max: 3,
        initial_ms: 20,
        multiplier: 1.0,
        max_ms: 20,
        ..weir::RetryPolicy::default()
    };
    let def = GraphDef::new(
        Name::new("retry").unwrap(),
        vec![
            node("a", &[], "ok"),
            flaky,
            node("b", &["flaky"], "ok"),
            node("c", &["b"], "ok"),
            ruled("report", &["flaky"], TriggerRule::AllDone),
        ],
    );
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("retry", p.clone()).await.unwrap();
    let states = engine
        .wait_settled("retry", std::slice::from_ref(&p), Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Failed]);
    assert_eq!(runs.count("retry", "flaky"), 3, "every attempt ran");
    let view = engine.graph_run("retry", &p).unwrap().unwrap();
    let by: BTreeMap<&str, &weir::NodeView> =
        view.nodes.iter().map(|n| (n.node.as_str(), n)).collect();
    assert_eq!(by["a"].state, "succeeded");
    assert_eq!(by["flaky"].state, "failed");
    assert_eq!(by["flaky"].attempts, 3);
    assert_eq!(
        by["flaky"].error.as_deref(),
        Some("attempt 3 failed"),
        "the last attempt's error is kept"
    );
    assert_eq!(by["b"].state, "upstream_failed");
    assert_eq!(by["c"].state, "upstream_failed");
    assert_eq!(by["report"].state, "succeeded");
    assert_eq!(runs.count("retry", "b"), 0);
    assert_eq!(runs.count("retry", "c"), 0);
    // The decided nodes have records of their own, as Airflow writes them.
    for n in ["b", "c"] {
        match engine.ticket(&format!("retry/none/{n}/0")).await.unwrap() {
            Some(weir::TicketView::Done(d)) => {
                assert_eq!(d.status, weir::DoneStatus::UpstreamFailed, "{n}");
                assert_eq!(d.attempts, 0, "{n} never ran");
            }
            other => panic!("{n}: {other:?}"),
        }
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
