//! Run timeouts (schedules #29, item 4), under paused time on an anchored
//! clock: a run still active `run_timeout` after it started fails, its
//! live attempt cancelled and its record naming the timeout; a run that
//! outlived its timeout while the engine was down fails at the next start,
//! and one that did not fails at its deadline after the restart.

mod triggers_support;

use std::time::Duration;

use triggers_support::*;
use weir::{Partition, RunState};

/// How long the node works: past the run timeout, within the queue's
/// lease of an hour (so the run timeout, not the lease, ends it).
const WORK_MS: u64 = 50 * MIN;
/// The run timeout.
const TIMEOUT_MS: u64 = 30 * MIN;

/// A graph whose one node works for [`WORK_MS`], with a run timeout of
/// [`TIMEOUT_MS`].
/// Retried (3 attempts): an attempt cut by a restart runs again, and only
/// the timeout ends the run.
fn slow(name: &str) -> weir::GraphDef {
    let mut g = graph(name);
    g.run_timeout_ms = Some(TIMEOUT_MS);
    g.nodes[0].retry = weir::RetryPolicy::default();
    g
}

fn run_of(engine: &weir::Engine) -> weir::GraphRunView {
    engine
        .graph_run("slow", &Partition::NONE)
        .unwrap()
        .expect("the run")
}

#[tokio::test(start_paused = true)]
async fn a_run_past_its_timeout_fails_and_its_attempt_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, WORK_MS, &script).await;
    engine.adopt(slow("slow")).await.unwrap();
    engine.start_run("slow", Partition::NONE).await.unwrap();
    advance(TIMEOUT_MS - MIN).await;
    assert_eq!(
        run_of(&engine).state,
        RunState::Active,
        "before its deadline"
    );
    until(2 * MIN, "the run to time out", || {
        run_of(&engine).state == RunState::Failed
    })
    .await;
    let run = run_of(&engine);
    assert_eq!(
        run.failure.as_deref(),
        Some("run_timeout: still active 30m after it started"),
        "{run:?}"
    );
    assert!(
        (T0 + TIMEOUT_MS..T0 + TIMEOUT_MS + MIN).contains(&run.settled_at_ms.unwrap()),
        "settled at its deadline: {run:?}"
    );
    assert_eq!(run.nodes[0].state, "cancelled", "{run:?}");
    assert_eq!(script.ran().len(), 1, "the attempt started once");
    // Not retried: the run is over.
    advance(H).await;
    assert_eq!(script.ran().len(), 1, "no attempt after the timeout");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_restart_keeps_the_deadline() {
    // Down past the deadline: the run fails as the engine starts.
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, WORK_MS, &script).await;
    engine.adopt(slow("slow")).await.unwrap();
    engine.start_run("slow", Partition::NONE).await.unwrap();
    advance(10 * MIN).await;
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    let engine = open(dir.path(), T0 + 45 * MIN, 4, WORK_MS, &script).await;
    until(MIN, "the run to time out at the start", || {
        run_of(&engine).state == RunState::Failed
    })
    .await;
    let run = run_of(&engine);
    assert!(run.failure.is_some(), "{run:?}");
    assert!(
        run.settled_at_ms.unwrap() < T0 + 46 * MIN,
        "failed as the engine started: {run:?}"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();

    // Down before it: the run fails at its deadline, not at the start.
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), T0, 4, WORK_MS, &script).await;
    engine.adopt(slow("slow")).await.unwrap();
    engine.start_run("slow", Partition::NONE).await.unwrap();
    advance(10 * MIN).await;
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    let engine = open(dir.path(), T0 + 15 * MIN, 4, WORK_MS, &script).await;
    advance(14 * MIN).await;
    assert_eq!(
        run_of(&engine).state,
        RunState::Active,
        "before its deadline"
    );
    until(2 * MIN, "the run to time out at its deadline", || {
        run_of(&engine).state == RunState::Failed
    })
    .await;
    let settled = run_of(&engine).settled_at_ms.unwrap();
    assert!(
        (T0 + TIMEOUT_MS..T0 + TIMEOUT_MS + MIN).contains(&settled),
        "settled at {settled}, the deadline {}",
        T0 + TIMEOUT_MS
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A graph without a run_timeout keeps its hash: the field is absent from
/// the encoding when unset; one with it gets another.
#[test]
fn run_timeout_is_part_of_the_definition_hash() {
    let plain = graph("slow").validate().unwrap();
    let timed = slow("slow").validate().unwrap();
    assert_ne!(plain.hash(), timed.hash());
    let mut zero = graph("slow");
    zero.run_timeout_ms = Some(0);
    assert!(zero
        .validate()
        .unwrap_err()
        .to_string()
        .contains("run_timeout"));
}
