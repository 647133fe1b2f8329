//! A storage fault under a running engine (issue 13): the N-th write, flush
//! or fsync of the store fails (EIO or ENOSPC, through the store's fault
//! hook) while plain jobs are enqueued and a fan-out graph runs over many
//! partitions. The engine must stop by itself with an error naming what
//! failed; reopened without the fault it must hold every acknowledged
//! enqueue and every acknowledged completion, complete the rest, and never
//! complete a ticket twice nor start an attempt of a ticket whose
//! completion was acknowledged. And `weir run` under a fault
//! (`WEIR_FAULT_INJECT`) exits 3 naming it; the next run finishes the work
//! without running again what was recorded.
//!
//! N sweeps a few values per point; `WEIR_SOAK=1` sweeps more.

mod graphs_support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use graphs_support::node;
use weir::actors::done::done_key;
use weir::actors::store::{FaultErrno, FaultInjector, FaultPoint};
use weir::{
    DoneRecord, DoneStatus, Durability, Engine, EngineEvent, GraphDef, Job, Partition,
    StoreSettings,
};
use weir_core::names::Name;

fn soak() -> bool {
    std::env::var_os("WEIR_SOAK").is_some_and(|v| v == "1")
}

/// Fan-out width of the graph: root, this many middles, a sink.
const WIDTH: usize = 6;
/// The fault must stop the engine within this.
const STOP_WITHIN: Duration = Duration::from_secs(60);
/// The reopened engine must finish everything within this.
const FINISH_WITHIN: Duration = Duration::from_secs(120);

/// What the tasks and the events saw, across both lives of the engine.
#[derive(Default)]
struct Ledger {
    /// Enqueues whose call returned Ok (acknowledged, durable).
    acked: BTreeSet<String>,
    /// Runs whose start returned Ok.
    runs: BTreeSet<String>,
    /// Completions the engine reported (each after it was durable), by key.
    completed: BTreeMap<String, u32>,
    /// Attempts that started for a key whose completion was reported
    /// before (by either life).
    started_after_completed: Vec<String>,
}

type Shared = Arc<Mutex<Ledger>>;

fn graph() -> GraphDef {
    let mut nodes = vec![node("root", &[], "work")];
    let mids: Vec<String> = (0..WIDTH).map(|i| format!("m{i}")).collect();
    for m in &mids {
        nodes.push(node(m, &["root"], "work"));
    }
    let ups: Vec<&str> = mids.iter().map(String::as_str).collect();
    nodes.push(node("sink", &ups, "work"));
    let mut g = GraphDef::new(Name::new("fan").unwrap(), nodes);
    g.partitioning = weir::Partitioning::Daily;
    g.max_active_runs = 4;
    g
}

fn partition(i: usize) -> Partition {
    let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap() + chrono::Days::new(i as u64);
    day.format("%Y-%m-%d").to_string().parse().unwrap()
}

async fn open(dir: &Path, faults: Option<FaultInjector>, ledger: &Shared) -> Engine {
    let l = ledger.clone();
    let engine = Engine::builder(dir)
        .store_settings(StoreSettings {
            durability: Durability::Fsync,
            reserve_file_bytes: 0,
            faults,
            ..StoreSettings::default()
        })
        .pool("default", 4)
        .task_fn("work", move |ctx| {
            let l = l.clone();
            async move {
                {
                    let mut l = l.lock().unwrap();
                    if l.completed.contains_key(&*ctx.key) {
                        l.started_after_completed.push(ctx.key.to_string());
                    }
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .expect("the engine opens");
    let mut events = engine.subscribe();
    let l = ledger.clone();
    tokio::spawn(async move {
        while let Ok(e) = events.recv().await {
            if let EngineEvent::Completed { key, .. } = e {
                *l.lock()
                    .unwrap()
                    .completed
                    .entry(key.to_string())
                    .or_default() += 1;
            }
        }
    });
    engine
}

/// Enqueues plain jobs and starts runs until the engine stops.
async fn drive(engine: Arc<Engine>, ledger: Shared) {
    let mut i = 0;
    while engine.error().is_none() {
        let key = format!("job-{i:05}");
        if engine
            .enqueue(Job::new(key.clone(), "work", "default"))
            .await
            .is_ok()
        {
            ledger.lock().unwrap().acked.insert(key);
        }
        if i % 5 == 0 {
            let p = partition(i / 5);
            if engine.start_run("fan", p.clone()).await.is_ok() {
                ledger.lock().unwrap().runs.insert(p.to_string());
            }
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// One case: the `n`-th call at `point` fails with `errno`.
async fn case(point: FaultPoint, n: u64, errno: FaultErrno) {
    let what = format!("{point} #{n} {errno:?}");
    let tmp = tempfile::tempdir().unwrap();
    let ledger = Shared::default();
    let engine = open(
        tmp.path(),
        Some(FaultInjector::nth(point, n, errno)),
        &ledger,
    )
    .await;
    // The graph is adopted before the fault can hit: a failed adoption
    // leaves nothing to check.
    let adopted = engine.adopt(graph()).await;
    let engine = Arc::new(engine);
    let driver = tokio::spawn(drive(engine.clone(), ledger.clone()));
    let started = Instant::now();
    let error = loop {
        if let Some(e) = engine.error() {
            break e;
        }
        assert!(
            started.elapsed() < STOP_WITHIN,
            "{what}: the engine did not stop within {STOP_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    driver.await.unwrap();
    assert!(
        error.contains("the store failed") && error.contains(&errno.text()),
        "{what}: the engine's error names the store and the OS error: {error}"
    );
    let named = match point {
        FaultPoint::Write => error.contains(" failed: ") || error.contains("blob"),
        FaultPoint::Flush => error.contains("flush of"),
        FaultPoint::Fsync => error.contains("fsync of") || error.contains("blob"),
        FaultPoint::Snapshot => error.contains("snapshot"),
    };
    assert!(named, "{what}: the error names what failed: {error}");
    let engine = Arc::into_inner(engine).expect("the driver let go of the engine");
    let _ = engine.shutdown(Duration::from_secs(10)).await;

    // Reopened without the fault: everything acknowledged is there, the
    // rest completes, nothing completes twice.
    let before = {
        let l = ledger.lock().unwrap();
        (l.acked.clone(), l.completed.clone(), l.runs.clone())
    };
    let (acked, completed_before, runs) = before;
    eprintln!(
        "{what}: stopped after {} acknowledged enqueues, {} completions, {} runs: {error}",
        acked.len(),
        completed_before.len(),
        runs.len()
    );
    let engine = open(tmp.path(), None, &ledger).await;
    if adopted.is_err() {
        engine.adopt(graph()).await.unwrap();
    }
    for key in &acked {
        let live = engine.ticket(key).await.unwrap().is_some();
        let done = engine.store().contains(&done_key(key)).unwrap();
        assert!(live || done, "{what}: acknowledged enqueue {key} was lost");
    }
    for key in completed_before.keys() {
        let record: Option<DoneRecord> = engine.store().get(&done_key(key)).unwrap();
        assert!(
            record.is_some_and(|r| r.status == DoneStatus::Succeeded),
            "{what}: acknowledged completion of {key} was lost"
        );
    }
    let parts: Vec<Partition> = runs.iter().map(|p| p.parse().unwrap()).collect();
    engine
        .wait_settled("fan", &parts, FINISH_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("{what}: the runs settle after the reopen: {e}"));
    engine
        .drain_until_idle(FINISH_WITHIN)
        .await
        .unwrap_or_else(|e| panic!("{what}: the jobs drain after the reopen: {e}"));
    for key in &acked {
        let record: Option<DoneRecord> = engine.store().get(&done_key(key)).unwrap();
        assert!(
            record.is_some_and(|r| r.status == DoneStatus::Succeeded),
            "{what}: acknowledged job {key} did not complete"
        );
    }
    // Let the last events arrive.
    tokio::time::sleep(Duration::from_millis(100)).await;
    {
        let l = ledger.lock().unwrap();
        let twice: Vec<(&String, &u32)> = l.completed.iter().filter(|(_, &c)| c > 1).collect();
        assert!(
            twice.is_empty(),
            "{what}: completed more than once: {twice:?}"
        );
        assert!(
            l.started_after_completed.is_empty(),
            "{what}: attempts started after their completion was acknowledged: {:?}",
            l.started_after_completed
        );
    }
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// The N swept per point.
fn ns() -> Vec<u64> {
    if soak() {
        (1..=12).map(|k| k * k * 3).collect()
    } else {
        vec![4, 30, 120]
    }
}

async fn sweep(point: FaultPoint) {
    for (k, n) in ns().into_iter().enumerate() {
        let errno = if k % 2 == 0 {
            FaultErrno::Eio
        } else {
            FaultErrno::Enospc
        };
        case(point, n, errno).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_stops_the_engine_and_loses_nothing_acknowledged() {
    sweep(FaultPoint::Write).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_flush_stops_the_engine_and_loses_nothing_acknowledged() {
    sweep(FaultPoint::Flush).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_stops_the_engine_and_loses_nothing_acknowledged() {
    sweep(FaultPoint::Fsync).await;
}

/// Node states of the run, from `weir status` (no engine running).
fn node_states(data: &Path) -> BTreeMap<String, (String, u32)> {
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "error")
        .args(["status", "--data"])
        .arg(data)
        .args(["chain", "none"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "weir status: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let mut out = BTreeMap::new();
    for line in text.lines().skip(3) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() >= 4 {
            out.insert(
                cols[0].to_string(),
                (cols[1].to_string(), cols[3].parse().unwrap_or(0)),
            );
        }
    }
    out
}

fn run(def: &Path, data: &Path, fault: Option<&str>) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "error")
        .env_remove("WEIR_FAULT_INJECT")
        .arg("run")
        .arg(def)
        .arg("--data")
        .arg(data)
        .arg("--until-idle");
    if let Some(f) = fault {
        c.env("WEIR_FAULT_INJECT", f);
    }
    c.output().expect("weir runs")
}

/// `weir run` under a failing fsync (then a failing write) exits 3 naming
/// the failure; the next run completes the graph, and no node recorded
/// before the fault starts again.
#[test]
fn weir_run_exits_3_naming_the_fault_and_the_next_run_finishes() {
    // Long enough that the 30th fsync or write falls mid-run: an edge costs
    // one commit.
    let nodes = 48;
    for (fault, says) in [
        ("fsync:30:eio", ["fsync of", "Input/output error"]),
        ("write:30:enospc", ["failed:", "No space left on device"]),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let def = tmp.path().join("chain.toml");
        let log = tmp.path().join("starts.log");
        let mut text = String::from("name = \"chain\"\n[pools]\ndefault = 2\n");
        for i in 0..nodes {
            let ups = if i == 0 {
                String::new()
            } else {
                format!("upstreams = [\"n{:02}\"]\n", i - 1)
            };
            text.push_str(&format!(
                "[[nodes]]\nname = \"n{i:02}\"\n{ups}command = [\"sh\", \"-c\", \"echo $WEIR_NODE >> {}\"]\n",
                log.display()
            ));
        }
        std::fs::write(&def, text).unwrap();

        let out = run(&def, &data, Some(fault));
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{fault}: {}", stderr.trim());
        assert_eq!(
            out.status.code(),
            Some(3),
            "{fault}: exit 3 for a store failure; stderr: {stderr}"
        );
        for s in says {
            assert!(stderr.contains(s), "{fault}: stderr names {s:?}: {stderr}");
        }
        let before = node_states(&data);
        let done_before: BTreeSet<String> = before
            .iter()
            .filter(|(_, (s, _))| s == "succeeded")
            .map(|(n, _)| n.clone())
            .collect();
        assert!(
            done_before.len() < nodes,
            "{fault}: the fault hit before the end: {before:?}"
        );
        let starts_before = std::fs::read_to_string(&log).unwrap_or_default();

        let out = run(&def, &data, None);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{fault}: the next run completes; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let after = node_states(&data);
        assert_eq!(after.len(), nodes, "{fault}: {after:?}");
        for (n, (state, attempts)) in &after {
            assert_eq!(state, "succeeded", "{fault}: node {n}: {after:?}");
            if done_before.contains(n) {
                assert_eq!(
                    Some(attempts),
                    before.get(n).map(|(_, a)| a),
                    "{fault}: node {n} keeps its record"
                );
            }
        }
        let starts_after = std::fs::read_to_string(&log).unwrap();
        assert!(starts_after.starts_with(&starts_before), "{fault}");
        for started in starts_after[starts_before.len()..].lines() {
            assert!(
                !done_before.contains(started),
                "{fault}: node {started} was recorded before the fault, yet ran again"
            );
        }
    }
}
