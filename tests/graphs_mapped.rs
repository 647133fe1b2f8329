//! Mapped nodes end to end (issue #18): one member per item, each a
//! ticket with its own attempts and output; the node's output is the
//! members' outputs in item order, which a downstream reads by index
//! through a template; a failed member fails the node once all have
//! settled, naming the first and counting; a rerun runs only the members
//! that did not succeed, while changed items run every member; the bound
//! on live members holds; cancel and expiry take members with their run.

mod graphs_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graphs_support::{command_engine, from_toml, node_record, settled};
use serde_json::{json, Value};
use weir::core::codec;
use weir::{Durability, Engine, Partition, RerunOutcome, RunState, TaskError, TaskInput};

/// A folder whose `runs.txt` collects one line per member attempt.
fn folder() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn lines(dir: &std::path::Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_run_per_item_and_a_downstream_reads_one_by_index() {
    let defs = folder();
    let def = from_toml(
        defs.path(),
        r#"
name = "m"

[[nodes]]
name = "list"
command = ["sh", "-c", "printf '[{\"n\": \"a\"}, {\"n\": \"b b\"}, {\"n\": \"c;$(id)\"}]' > \"$WEIR_OUTPUT\""]

[[nodes]]
name = "each"
upstreams = ["list"]
map_over = "list"
retry = { attempts = 1 }
command = ["sh", "-c", "echo \"$1\" >> runs.txt; printf '{\"up\": \"%s\", \"run\": \"%s\"}' \"$1\" \"$2\" > \"$WEIR_OUTPUT\"", "sh", "{item.n}", "{run_id}"]

[[nodes]]
name = "last"
upstreams = ["each"]
command = ["sh", "-c", "printf '%s' \"$1\" > \"$WEIR_OUTPUT\"", "sh", "{upstream.each.output[2].up}"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 4).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    let state = settled(&engine, "m", &p).await;
    let (st, _, err, out) = node_record(&engine, "m", &p, "each");
    assert_eq!(state, RunState::Complete, "each: {st} {err:?}");
    // The run id renders per member: the members are tickets of their own.
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(got.as_array().unwrap().len(), 3);
    for (i, want) in ["a", "b b", "c;$(id)"].iter().enumerate() {
        assert_eq!(got[i]["up"], json!(want), "member {i} in item order: {got}");
    }
    assert_eq!(got[2]["run"], json!("m/none/each/0/2"), "a member's run id");
    let (_, _, _, last) = node_record(&engine, "m", &p, "last");
    assert_eq!(String::from_utf8(last).unwrap(), "c;$(id)");
    let mut ran = lines(defs.path(), "runs.txt");
    ran.sort();
    assert_eq!(ran, vec!["a", "b b", "c;$(id)"], "each member ran once");
    // The status view lists the members with their states.
    let run = engine.graph_run("m", &p).unwrap().unwrap();
    let each = run.nodes.iter().find(|n| n.node == "each").unwrap();
    let members = each.members.as_ref().expect("a mapped node shows members");
    assert_eq!(
        (members.total, members.succeeded, members.pending),
        (3, 3, 0)
    );
    assert_eq!(members.list[1].item.as_deref(), Some(r#"{"n":"b b"}"#));
    assert_eq!(members.list[1].state, "succeeded");
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_member_fails_the_node_and_a_rerun_runs_only_it() {
    let defs = folder();
    let def = from_toml(
        defs.path(),
        r#"
name = "m"

[[nodes]]
name = "each"
items = ["one", "bad", "three", "bad2"]
retry = { attempts = 2, initial = "10ms" }
command = ["sh", "-c", "echo \"$1\" >> runs.txt; case \"$1\" in bad*) test -e fixed || { echo \"no fix for $1\" >&2; exit 3; } ;; esac; printf '\"%s!\"' \"$1\" > \"$WEIR_OUTPUT\"", "sh", "{item}"]

[[nodes]]
name = "after"
upstreams = ["each"]
command = ["true"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 4).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "m", &p).await, RunState::Failed);
    let (st, _, err, _) = node_record(&engine, "m", &p, "each");
    assert_eq!(st, "failed");
    let err = err.unwrap();
    assert!(
        err.starts_with("2 of 4 members did not succeed; member 1 is the first: ")
            && err.contains("no fix for bad"),
        "{err}"
    );
    let id = weir::actors::scheduler::records::run_id("m", &p, "each", 0);
    let record = engine
        .store()
        .get::<weir::DoneRecord>(&weir::actors::done::done_key(&id))
        .unwrap()
        .unwrap();
    let counts = record.members.unwrap();
    assert_eq!(
        (counts.total, counts.succeeded, counts.failed),
        (4, 2, 2),
        "counts of the node's record"
    );
    // Each member had its own retries: the bad ones ran twice.
    let mut ran = lines(defs.path(), "runs.txt");
    ran.sort();
    assert_eq!(ran, vec!["bad", "bad", "bad2", "bad2", "one", "three"]);
    let (after, ..) = node_record(&engine, "m", &p, "after");
    assert_eq!(after, "upstream_failed");

    // The failed members are dead letters; requeuing one reruns the node.
    let mut dead: Vec<String> = engine
        .dead_letters(100, None)
        .unwrap()
        .letters
        .into_iter()
        .map(|l| l.key)
        .collect();
    dead.sort();
    assert_eq!(dead, vec!["m/none/each/0/1", "m/none/each/0/3"]);
    std::fs::write(defs.path().join("fixed"), "").unwrap();
    std::fs::remove_file(defs.path().join("runs.txt")).unwrap();
    let r = engine.requeue_dead("m/none/each/0/1").await.unwrap();
    assert!(
        matches!(&r, weir::RequeueOutcome::Rerun { rerun: RerunOutcome::Submitted(id), .. } if id == "m/none/each/1"),
        "{r:?}"
    );
    assert_eq!(settled(&engine, "m", &p).await, RunState::Complete);
    let mut ran = lines(defs.path(), "runs.txt");
    ran.sort();
    assert_eq!(ran, vec!["bad", "bad2"], "only the members that failed ran");
    let (st, _, _, out) = node_record(&engine, "m", &p, "each");
    assert_eq!(st, "succeeded");
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(got, json!(["one!", "bad!", "three!", "bad2!"]));
    let run = engine.graph_run("m", &p).unwrap().unwrap();
    let each = run.nodes.iter().find(|n| n.node == "each").unwrap();
    let m = each.members.as_ref().unwrap();
    assert_eq!((m.rerun, m.kept, m.succeeded), (1, 2, 4));
    assert_eq!(
        m.list.iter().map(|x| x.rerun).collect::<Vec<_>>(),
        vec![0, 1, 0, 1],
        "kept members keep the record of the generation they succeeded in"
    );
    // The failed members' dead letters went with the rerun.
    let dead = engine.dead_letters(100, None).unwrap();
    assert!(dead.letters.is_empty(), "{:?}", dead.letters);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_items_run_every_member() {
    let defs = folder();
    std::fs::write(defs.path().join("items.json"), r#"["x", "y"]"#).unwrap();
    let def = from_toml(
        defs.path(),
        r#"
name = "m"

[[nodes]]
name = "list"
command = ["sh", "-c", "cat items.json > \"$WEIR_OUTPUT\""]

[[nodes]]
name = "each"
upstreams = ["list"]
map_over = "list"
command = ["sh", "-c", "echo \"$1\" >> runs.txt", "sh", "{item}"]
"#,
    );
    let data = tempfile::tempdir().unwrap();
    let engine = command_engine(data.path(), 4).open().await.unwrap();
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "m", &p).await, RunState::Complete);
    // The same items again (list reruns with an equal output): nothing of
    // each runs again.
    std::fs::remove_file(defs.path().join("runs.txt")).unwrap();
    engine.rerun("m", p.clone(), "list").await.unwrap();
    assert_eq!(settled(&engine, "m", &p).await, RunState::Complete);
    assert!(
        lines(defs.path(), "runs.txt").is_empty(),
        "same inputs: members kept"
    );
    // Other items: every member runs.
    std::fs::write(defs.path().join("items.json"), r#"["x", "y", "z"]"#).unwrap();
    engine.rerun("m", p.clone(), "list").await.unwrap();
    assert_eq!(settled(&engine, "m", &p).await, RunState::Complete);
    let mut ran = lines(defs.path(), "runs.txt");
    ran.sort();
    assert_eq!(ran, vec!["x", "y", "z"]);
    let (_, _, _, out) = node_record(&engine, "m", &p, "each");
    assert_eq!(
        serde_json::from_slice::<Value>(&out).unwrap(),
        json!([null, null, null])
    );
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// A task that counts the attempts running at once, and waits for the
/// gate when its item says so.
#[derive(Clone, Default)]
struct Probe {
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    started: Arc<Mutex<Vec<u32>>>,
}

fn engine_with_probe(
    dir: &std::path::Path,
    slots: u32,
    probe: &Probe,
    gate: Arc<tokio::sync::Semaphore>,
) -> weir::EngineBuilder {
    let p = probe.clone();
    Engine::builder(dir)
        .durability(Durability::Flush)
        .pool("default", slots)
        .expiry_interval_ms(25)
        .task_fn("probe", move |ctx| {
            let (p, gate) = (p.clone(), gate.clone());
            async move {
                let input: TaskInput =
                    codec::decode(&ctx.payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
                let m = input.member.as_ref().expect("a member's payload");
                p.started.lock().unwrap().push(m.index);
                let now = p.running.fetch_add(1, Ordering::SeqCst) + 1;
                p.peak.fetch_max(now, Ordering::SeqCst);
                if m.item == json!("block") {
                    let _ = gate.acquire().await;
                } else {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                p.running.fetch_sub(1, Ordering::SeqCst);
                Ok(serde_json::to_vec(&json!({"i": m.index})).unwrap())
            }
        })
}

fn mapped_def(items: Vec<Value>, max_active: u32, retention_ms: u64) -> weir::GraphDef {
    let mut n = graphs_support::node("each", &[], "probe");
    let mut spec = weir::core::mapped::MapSpec::new(weir::core::mapped::MapSource::Items(items));
    spec.max_active_members = max_active;
    n.map = Some(spec);
    let mut def = weir::GraphDef::new(weir::core::names::Name::new("m").unwrap(), vec![n]);
    def.retention_ms = retention_ms;
    def
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_members_stay_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Probe::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let engine = engine_with_probe(dir.path(), 8, &probe, gate)
        .open()
        .await
        .unwrap();
    let items: Vec<Value> = (0..30).map(|i| json!(i)).collect();
    engine.adopt(mapped_def(items, 3, 60_000)).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    assert_eq!(settled(&engine, "m", &p).await, RunState::Complete);
    assert_eq!(
        probe.peak.load(Ordering::SeqCst),
        3,
        "the pool has 8 slots; the node lets 3 run"
    );
    let started = probe.started.lock().unwrap().clone();
    assert_eq!(started.len(), 30, "each member ran once: {started:?}");
    let (_, _, _, out) = node_record(&engine, "m", &p, "each");
    let got: Value = serde_json::from_slice(&out).unwrap();
    let want: Vec<Value> = (0..30).map(|i| json!({"i": i})).collect();
    assert_eq!(got, Value::Array(want));
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_cancels_members_and_expiry_removes_them() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Probe::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let engine = engine_with_probe(dir.path(), 8, &probe, gate.clone())
        .open()
        .await
        .unwrap();
    let items = vec![json!("block"), json!("block"), json!(2), json!(3), json!(4)];
    engine.adopt(mapped_def(items, 2, 200)).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    // Both places are taken by blocked members; the other three wait.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while probe.running.load(Ordering::SeqCst) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "members did not start"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(engine.cancel_run("m", p.clone()).await.unwrap());
    assert_eq!(settled(&engine, "m", &p).await, RunState::Cancelled);
    // The running members were cancelled through their tokens; nothing
    // else starts, and no member ticket is live.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while engine.status().await.unwrap().live > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "member tickets stayed live"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gate.add_permits(10);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut started = probe.started.lock().unwrap().clone();
    started.sort();
    assert_eq!(started, vec![0, 1], "waiting members never started");
    let m0 = weir::actors::scheduler::records::member_id("m", &p, "each", 0, 0);
    let rec = engine
        .store()
        .get::<weir::DoneRecord>(&weir::actors::done::done_key(&m0))
        .unwrap()
        .unwrap();
    assert_eq!(rec.status, weir::DoneStatus::Cancelled);
    // Expiry takes the members' records and the ledger with the run.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let left = engine.store().scan_keys("done/m/").unwrap().len()
            + engine.store().scan_keys("map/m/").unwrap().len()
            + engine.store().scan_keys("run/m/").unwrap().len();
        if left == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{left} records of the run stayed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// Cancel settles a mapped node and its members (faults #6): the run is
/// cancelled while member 0 runs; the node, its members (the running one
/// and those that never started) and its waiting downstream all show as
/// cancelled, counted as such and not as failed, and the stored view
/// keeps this after the engine stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_settles_its_mapped_node_and_members() {
    let dir = tempfile::tempdir().unwrap();
    let probe = Probe::default();
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let engine = engine_with_probe(dir.path(), 8, &probe, gate.clone())
        .open()
        .await
        .unwrap();
    let items = vec![json!("block"), json!(1), json!(2)];
    let mut def = mapped_def(items, 1, 60_000);
    def.nodes
        .push(graphs_support::node("after", &["each"], "probe"));
    engine.adopt(def).await.unwrap();
    let p = Partition::NONE;
    engine.start_run("m", p.clone()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while probe.running.load(Ordering::SeqCst) < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "member 0 did not start"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(engine.cancel_run("m", p.clone()).await.unwrap());
    assert_eq!(settled(&engine, "m", &p).await, RunState::Cancelled);
    let check = |engine: &Engine| {
        let run = engine.graph_run("m", &p).unwrap().unwrap();
        assert_eq!(run.state, RunState::Cancelled);
        let each = run.nodes.iter().find(|n| n.node == "each").unwrap();
        assert_eq!(each.state, "cancelled", "the mapped node: {each:?}");
        let m = each.members.as_ref().expect("its members");
        assert_eq!(
            (m.cancelled, m.failed, m.pending, m.succeeded),
            (3, 0, 0, 0),
            "every member cancelled, none failed or pending: {m:?}"
        );
        assert!(
            m.list.iter().all(|x| x.state == "cancelled"),
            "{:?}",
            m.list
        );
        let after = run.nodes.iter().find(|n| n.node == "after").unwrap();
        assert_eq!(after.state, "cancelled", "its downstream: {after:?}");
    };
    check(&engine);
    gate.add_permits(10);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
    // The stored view, with the engine stopped and opened again.
    let engine = engine_with_probe(dir.path(), 8, &probe, gate)
        .open()
        .await
        .unwrap();
    check(&engine);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
