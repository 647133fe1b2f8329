//! Crashes around the scheduler (DESIGN.md §6 "Restarts"): a scheduler
//! killed between a node's completion and its downstream's submit is
//! respawned, rebuilds its runs from the store and reconciles at once, so
//! the run finishes and no node runs twice; a completion whose notice is
//! lost while the scheduler runs (the queue died between making the
//! record durable and telling the scheduler) is repaired by the periodic
//! reconciler.

mod graphs_support;

use graphs_support::node;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::ActorRef;
use tokio::sync::{Notify, Semaphore};
use weir::actors::queue::QueueMsg;
use weir::actors::scheduler::SchedulerMsg;
use weir::actors::supervisor::Role;
use weir::core::codec;
use weir::{
    Durability, Engine, EngineBuilder, EngineEvent, GraphDef, Partition, RunState,
    SchedulerSettings, SupervisorSettings, TaskError, TaskInput,
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
    fn snapshot(&self) -> BTreeMap<String, u32> {
        self.0.lock().unwrap().clone()
    }
}

/// Tasks: `ok` succeeds after `sleep_ms`; `block` waits until `gate` is
/// closed. Restarts are allowed without limit, with a short backoff.
fn builder(
    dir: &std::path::Path,
    runs: &Runs,
    gate: &Arc<Semaphore>,
    sleep_ms: u64,
    out_bytes: usize,
) -> EngineBuilder {
    let (r1, r2, g) = (runs.clone(), runs.clone(), gate.clone());
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 8)
        .supervisor_settings(SupervisorSettings {
            restarts_max: 1_000_000,
            restart_window_ms: 1_000,
            backoff_initial_ms: 1,
            backoff_max_ms: 5,
        })
        .task_fn("ok", move |ctx| {
            let runs = r1.clone();
            async move {
                let input = runs.saw(&ctx.payload)?;
                if sleep_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
                }
                let mut out = input.node.into_bytes();
                out.resize(out_bytes.max(out.len()), b'.');
                Ok(out)
            }
        })
        .task_fn("block", move |ctx| {
            let (runs, gate) = (r2.clone(), g.clone());
            async move {
                runs.saw(&ctx.payload)?;
                let _ = gate.acquire().await;
                Ok(Vec::new())
            }
        })
}

fn chain(graph: &str, len: usize) -> GraphDef {
    let names: Vec<String> = (0..len).map(|i| format!("n{i:02}")).collect();
    let nodes = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            if i == 0 {
                node(n, &[], "ok")
            } else {
                node(n, &[names[i - 1].as_str()], "ok")
            }
        })
        .collect();
    GraphDef::new(Name::new(graph).unwrap(), nodes)
}

/// Kills the scheduler of "chain" the moment each node's completion is
/// durable (the `Completed` event goes out with the scheduler's notice), so
/// most kills land between a completion and its downstream's submit. The
/// default reconcile interval (60 s) is far beyond the test: only the
/// restart's own reconcile can finish the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_killed_between_completion_and_submit() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = Arc::new(
        builder(dir.path(), &runs, &gate, 0, 0)
            .open()
            .await
            .unwrap(),
    );
    let len = 40;
    engine.adopt(chain("chain", len)).await.unwrap();
    let mut events = engine.subscribe();
    let p = Partition::NONE;
    engine.start_run("chain", p.clone()).await.unwrap();
    let name = engine.names().scheduler("chain");
    // The killer stops at the settle event, or when told the run settled:
    // under load its event stream can lag past the settle event.
    let settled = Arc::new(Notify::new());
    let killer = {
        let engine = engine.clone();
        let settled = settled.clone();
        tokio::spawn(async move {
            let (mut kills, mut restarts) = (0u32, 0u32);
            let mut via_children = true;
            loop {
                let event = tokio::select! {
                    e = events.recv() => e,
                    () = settled.notified() => return (kills, restarts),
                };
                match event {
                    Ok(EngineEvent::Completed { key, .. }) if key.starts_with("chain/") => {
                        // Alternate: the cell from the supervisor's
                        // children, or (faster, so nearer the notice) the
                        // registered name.
                        let cell = if via_children {
                            engine
                                .children()
                                .await
                                .ok()
                                .and_then(|c| {
                                    c.into_iter()
                                        .find(|(r, _)| matches!(r, Role::Scheduler(g) if g.as_str() == "chain"))
                                })
                                .map(|(_, c)| c)
                        } else {
                            ActorRef::<SchedulerMsg>::where_is(name.clone()).map(|a| a.get_cell())
                        };
                        via_children = !via_children;
                        if let Some(cell) = cell {
                            cell.kill();
                            kills += 1;
                        }
                    }
                    Ok(EngineEvent::Restarted { role, .. }) if role.starts_with("scheduler") => {
                        restarts += 1
                    }
                    Ok(EngineEvent::RunSettled { graph, .. }) if graph == "chain" => {
                        return (kills, restarts)
                    }
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("events: {e}"),
                }
            }
        })
    };
    let states = engine
        .wait_settled("chain", std::slice::from_ref(&p), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    settled.notify_one();
    let (kills, restarts) = tokio::time::timeout(Duration::from_secs(30), killer)
        .await
        .unwrap()
        .unwrap();
    assert!(kills >= (len as u32) / 2, "only {kills} kills landed");
    assert!(
        restarts >= kills / 2,
        "{restarts} restarts for {kills} kills"
    );
    let seen = runs.snapshot();
    assert_eq!(seen.len(), len, "every node ran: {seen:?}");
    for (n, count) in &seen {
        assert_eq!(*count, 1, "node {n} ran {count} times");
    }
    let engine = Arc::try_unwrap(engine).map_err(|_| "shared").unwrap();
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Deterministic: the scheduler is dead (a long restart backoff) when a's
/// completion is durable, so its notice goes to nobody. The respawned
/// scheduler reads a's record and its start-up reconcile submits b.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_reconcile_submits_what_a_dropped_notice_left() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = builder(dir.path(), &runs, &gate, 0, 0)
        .supervisor_settings(SupervisorSettings {
            restarts_max: 100,
            restart_window_ms: 10_000,
            backoff_initial_ms: 500,
            backoff_max_ms: 500,
        })
        .open()
        .await
        .unwrap();
    engine
        .adopt(GraphDef::new(
            Name::new("g").unwrap(),
            vec![node("a", &[], "block"), node("b", &["a"], "ok")],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !runs.snapshot().contains_key("a") {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut events = engine.subscribe();
    let scheduler = engine
        .children()
        .await
        .unwrap()
        .into_iter()
        .find(|(r, _)| matches!(r, Role::Scheduler(_)))
        .unwrap()
        .1;
    scheduler.kill();
    // a completes while no scheduler is registered.
    gate.close();
    let mut completed_while_dead = false;
    let reconciled = loop {
        match tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .unwrap()
            .unwrap()
        {
            EngineEvent::Completed { key, .. } if &*key == "g/none/a/0" => {
                completed_while_dead =
                    ActorRef::<SchedulerMsg>::where_is(engine.names().scheduler("g")).is_none();
            }
            EngineEvent::Reconciled {
                graph, submitted, ..
            } if graph == "g" => break submitted,
            _ => {}
        }
    };
    assert!(completed_while_dead, "a completed after the restart");
    assert_eq!(reconciled, 1, "the start-up reconcile submitted b");
    let states = engine
        .wait_settled("g", std::slice::from_ref(&p), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    assert_eq!(runs.snapshot().get("b"), Some(&1));
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Kills the queue at varying moments after each node starts (during the
/// attempt, or while its completion is being made durable). The restarted
/// queue replays its journal and sends the notices its predecessor made
/// durable but did not send; the scheduler, whose calls to the dead queue
/// fail, restarts too. The run finishes, each node once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_killed_repeatedly_during_a_chain() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = Arc::new(
        builder(dir.path(), &runs, &gate, 2, 256 << 10)
            .durability(Durability::Fsync)
            .scheduler_settings(SchedulerSettings {
                reconcile_interval_ms: 50,
                ..SchedulerSettings::default()
            })
            .open()
            .await
            .unwrap(),
    );
    let len = 30;
    engine.adopt(chain("chain", len)).await.unwrap();
    let mut events = engine.subscribe();
    let p = Partition::NONE;
    engine.start_run("chain", p.clone()).await.unwrap();
    let queue = engine.names().queue();
    let killer = tokio::spawn(async move {
        let mut kills = 0u32;
        let mut i = 0u64;
        loop {
            match events.recv().await {
                Ok(EngineEvent::Started { key, .. }) if key.starts_with("chain/") => {
                    // 2 ms of task, then the flush of its completion: sweep
                    // the kill across that window.
                    i += 1;
                    tokio::time::sleep(Duration::from_micros(2_000 + (i % 12) * 400)).await;
                    if let Some(q) = ActorRef::<QueueMsg>::where_is(queue.clone()) {
                        q.get_cell().kill();
                        kills += 1;
                    }
                }
                Ok(EngineEvent::RunSettled { graph, .. }) if graph == "chain" => return kills,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(e) => panic!("events: {e}"),
            }
        }
    });
    let states = engine
        .wait_settled("chain", std::slice::from_ref(&p), Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let kills = tokio::time::timeout(Duration::from_secs(5), killer)
        .await
        .unwrap()
        .unwrap();
    assert!(kills >= 5, "only {kills} kills");
    let seen = runs.snapshot();
    assert_eq!(seen.len(), len, "every node ran: {seen:?}");
    for (n, count) in &seen {
        assert_eq!(*count, 1, "node {n} ran {count} times");
    }
    let engine = Arc::try_unwrap(engine).map_err(|_| "shared").unwrap();
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Drops the next `n` completion notices at the scheduler of `graph`.
fn drop_notices(engine: &Engine, graph: &str, n: u32) {
    ActorRef::<SchedulerMsg>::where_is(engine.names().scheduler(graph))
        .expect("the scheduler runs")
        .cast(SchedulerMsg::DropNotices(n))
        .unwrap();
}

/// A notice lost while the scheduler runs (injected: the scheduler drops
/// it on arrival) leaves the run waiting: nothing else moves it, since the
/// tracker still holds the node as submitted. One reconciler pass reads the
/// durable record and submits the downstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_repairs_a_lost_notice() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = builder(dir.path(), &runs, &gate, 0, 0)
        .open()
        .await
        .unwrap();
    engine
        .adopt(GraphDef::new(
            Name::new("g").unwrap(),
            vec![
                node("a", &[], "block"),
                node("b", &["a"], "ok"),
                node("c", &["b"], "ok"),
            ],
        ))
        .await
        .unwrap();
    let p = Partition::NONE;
    engine.start_run("g", p.clone()).await.unwrap();
    drop_notices(&engine, "g", 1);
    let mut events = engine.subscribe();
    gate.close();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .unwrap()
            .unwrap();
        if matches!(e, EngineEvent::Completed { key, .. } if &*key == "g/none/a/0") {
            break;
        }
    }
    // The default reconcile interval is 60 s: the run waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.snapshot().get("b"), None, "b waits for a lost notice");
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    assert_eq!(view.state, RunState::Active);
    assert_eq!(view.nodes[0].state, "succeeded", "a's record is durable");
    let report = engine.reconcile("g").await.unwrap();
    assert_eq!(report.active_runs, 1);
    assert_eq!(report.submitted, 1, "the pass submitted b");
    let states = engine
        .wait_settled("g", std::slice::from_ref(&p), Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let seen = runs.snapshot();
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    assert_eq!(seen.len(), 3);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Every notice lost: the periodic reconciler (50 ms) alone drives a chain
/// to the end, each node once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_reconcile_drives_a_run_without_notices() {
    let dir = tempfile::tempdir().unwrap();
    let runs = Runs::default();
    let gate = Arc::new(Semaphore::new(0));
    let engine = builder(dir.path(), &runs, &gate, 0, 0)
        .scheduler_settings(SchedulerSettings {
            reconcile_interval_ms: 50,
            ..SchedulerSettings::default()
        })
        .open()
        .await
        .unwrap();
    let len = 10;
    engine.adopt(chain("chain", len)).await.unwrap();
    drop_notices(&engine, "chain", u32::MAX);
    let mut events = engine.subscribe();
    let p = Partition::NONE;
    engine.start_run("chain", p.clone()).await.unwrap();
    let states = engine
        .wait_settled("chain", std::slice::from_ref(&p), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Complete]);
    let seen = runs.snapshot();
    assert_eq!(seen.len(), len);
    assert!(seen.values().all(|n| *n == 1), "{seen:?}");
    // Each node after the first was submitted by a reconciler pass.
    let mut submitted = 0;
    while let Ok(e) = events.try_recv() {
        if let EngineEvent::Reconciled {
            graph,
            submitted: n,
            ..
        } = e
        {
            if graph == "chain" {
                submitted += n;
            }
        }
    }
    assert_eq!(submitted, len - 1);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
