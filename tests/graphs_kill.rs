//! SIGKILL in the middle of the new durable state of issue #18, then a
//! reopen: a mapped node killed while its members run finishes, no member
//! whose record was durable runs again, and the output holds every member
//! in item order; a process killed after a producer's success and before
//! its consumer's start (deliveries held) starts the consumer after the
//! reopen.
//!
//! The parent re-executes this test binary, running only `kill_child`
//! with `WEIR_KILL_CHILD_DIR` set; the child prints `done <key>` for each
//! Completed event and `produced` once the producer's record is durable.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use weir::core::mapped::{MapSource, MapSpec};
use weir::core::names::Name;
use weir::{Durability, Engine, EngineEvent, GraphDef, NodeDef, Partition, RunState, TaskSpec};

const DIR_VAR: &str = "WEIR_KILL_CHILD_DIR";
const MODE_VAR: &str = "WEIR_KILL_CHILD_MODE";
const MEMBERS: usize = 40;

fn node(name: &str, ups: &[&str], task: &str) -> NodeDef {
    NodeDef::new(
        Name::new(name).unwrap(),
        ups.iter().map(|u| Name::new(*u).unwrap()).collect(),
        TaskSpec {
            task: Name::new(task).unwrap(),
            config: Value::Null,
        },
    )
}

/// `p`: a mapped node over 40 items (3 live at once), then a node that
/// produces the asset `x`; `c` starts on `x`.
fn graphs() -> (GraphDef, GraphDef) {
    let mut each = node("each", &[], "slow");
    let mut spec = MapSpec::new(MapSource::Items((0..MEMBERS).map(|i| json!(i)).collect()));
    spec.max_active_members = 3;
    each.map = Some(spec);
    let mut load = node("load", &["each"], "ok");
    load.produces = vec![Name::new("x").unwrap()];
    let p = GraphDef::new(Name::new("p").unwrap(), vec![each, load]);
    let mut c = GraphDef::new(Name::new("c").unwrap(), vec![node("use", &[], "ok")]);
    c.trigger_assets = vec![Name::new("x").unwrap()];
    (p, c)
}

fn builder(
    dir: &std::path::Path,
    ran: Arc<Mutex<Vec<String>>>,
    slow_ms: u64,
) -> weir::EngineBuilder {
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", 4)
        .task_fn("slow", move |ctx| {
            let ran = ran.clone();
            async move {
                ran.lock().unwrap().push(ctx.key.to_string());
                tokio::time::sleep(Duration::from_millis(slow_ms)).await;
                let input: weir::TaskInput = weir::core::codec::decode(&ctx.payload).unwrap();
                Ok(serde_json::to_vec(&input.member.unwrap().item).unwrap())
            }
        })
        .task_fn("ok", |_ctx| async { Ok(Vec::new()) })
}

/// The child: runs only when the parent sets `WEIR_KILL_CHILD_DIR`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_child() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let mode = std::env::var(MODE_VAR).unwrap();
    let slow_ms = if mode == "members" { 30 } else { 1 };
    let engine = builder(std::path::Path::new(&dir), Arc::default(), slow_ms)
        .open()
        .await
        .unwrap();
    let (p, c) = graphs();
    engine.adopt(p).await.unwrap();
    engine.adopt(c).await.unwrap();
    if mode == "asset" {
        engine.hold_assets(true).unwrap();
    }
    let mut events = engine.subscribe();
    engine.start_run("p", Partition::NONE).await.unwrap();
    while let Ok(e) = events.recv().await {
        if let EngineEvent::Completed { key, .. } = e {
            println!("done {key}");
            if &*key == "p/none/load/0" {
                println!("produced");
            }
        }
    }
}

/// Runs the child in `mode` and kills it (SIGKILL) when `kill_when`
/// says so of the lines so far; returns the keys it saw done.
fn run_child(
    dir: &std::path::Path,
    mode: &str,
    kill_when: impl Fn(&BTreeSet<String>, bool) -> bool,
) -> BTreeSet<String> {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "kill_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_VAR, dir)
        .env(MODE_VAR, mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut done = BTreeSet::new();
    let mut produced = false;
    let mut killed = false;
    let deadline = Instant::now() + Duration::from_secs(120);
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(k) = line.strip_prefix("done ") {
            done.insert(k.to_string());
        }
        produced |= line == "produced";
        if !killed && (kill_when(&done, produced) || Instant::now() > deadline) {
            child.kill().unwrap();
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(killed, "the child ended by itself: {status:?}");
    done
}

async fn settled(engine: &Engine, graph: &str) -> RunState {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while engine.graph_run(graph, &Partition::NONE).unwrap().is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no run of {graph}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    match engine
        .wait_settled(graph, &[Partition::NONE], Duration::from_secs(60))
        .await
    {
        Ok(s) => s[0],
        Err(e) => {
            let run = engine.graph_run(graph, &Partition::NONE).unwrap();
            let tickets = engine.tickets(Default::default()).await.unwrap();
            panic!("{graph} did not settle: {e}\n{run:#?}\n{tickets:#?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_node_killed_mid_members_finishes_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let is_member = |k: &String| k.starts_with("p/none/each/0/");
    let done = run_child(dir.path(), "members", |d, _| {
        d.iter().filter(|k| is_member(k)).count() >= 8
    });
    let done_members: BTreeSet<String> = done.into_iter().filter(is_member).collect();
    assert!(
        done_members.len() >= 8 && done_members.len() < MEMBERS,
        "{done_members:?}"
    );
    let ran: Arc<Mutex<Vec<String>>> = Arc::default();
    let engine = builder(dir.path(), ran.clone(), 1).open().await.unwrap();
    assert_eq!(settled(&engine, "p").await, RunState::Complete);
    let ran = ran.lock().unwrap().clone();
    let again: Vec<&String> = ran.iter().filter(|k| done_members.contains(*k)).collect();
    assert!(
        again.is_empty(),
        "members with a durable record ran again: {again:?}"
    );
    let mut counts: BTreeMap<&String, u32> = BTreeMap::new();
    for k in &ran {
        *counts.entry(k).or_default() += 1;
    }
    assert!(
        counts.values().all(|&n| n == 1),
        "a member ran twice after the reopen: {counts:?}"
    );
    // No member ran after the reopen that had ended before it (a member
    // may have ended durably just before the kill without the child
    // printing it: it does not run again either).
    assert!(
        ran.len() + done_members.len() <= MEMBERS,
        "{} after, {} before",
        ran.len(),
        done_members.len()
    );
    let id = weir::actors::scheduler::records::run_id("p", &Partition::NONE, "each", 0);
    let rec = engine
        .store()
        .get::<weir::DoneRecord>(&weir::actors::done::done_key(&id))
        .unwrap()
        .unwrap();
    let out: Value = serde_json::from_slice(&rec.load_output(engine.store()).unwrap()).unwrap();
    assert_eq!(out, Value::Array((0..MEMBERS).map(|i| json!(i)).collect()));
    // The consumer started on the materialization too.
    assert_eq!(settled(&engine, "c").await, RunState::Complete);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_between_a_producer_and_its_consumer_loses_no_start() {
    let dir = tempfile::tempdir().unwrap();
    let done = run_child(dir.path(), "asset", |_, produced| produced);
    assert!(done.contains("p/none/load/0"));
    let engine = builder(dir.path(), Arc::default(), 1).open().await.unwrap();
    assert_eq!(settled(&engine, "c").await, RunState::Complete);
    assert_eq!(engine.list_runs("c", None).unwrap().len(), 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while engine.assets().unwrap().iter().any(|a| a.pending > 0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the delivery stayed pending"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
