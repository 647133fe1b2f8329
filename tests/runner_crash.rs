//! A process killed with SIGKILL in the middle of a workload, then reopened:
//! every job the engine acknowledged completes.
//!
//! The parent test re-executes this test binary, running only
//! `crash_child` with `WEIR_CRASH_CHILD_DIR` set. The child opens an engine
//! on that directory, enqueues jobs from several tasks and prints
//! `ack <key>` after each enqueue returns, `run <key>` when an attempt
//! starts and `done <key>` on each Completed event. The parent kills it
//! (`Child::kill` sends SIGKILL) once enough acks are out, reopens the
//! engine in-process with the same task, drains, and checks: each acked
//! key has a done record that says succeeded; no key the child saw
//! completed ran again after the restart; the child never ran a key after
//! it completed.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod runner_support;

use runner_support::{count_runs, Runs};
use weir::actors::done::done_key;
use weir::{DoneRecord, DoneStatus, Durability, Engine, EngineEvent, Job, RetryPolicy};

const DIR_VAR: &str = "WEIR_CRASH_CHILD_DIR";
const DURABILITY_VAR: &str = "WEIR_CRASH_CHILD_DURABILITY";
/// More than the child gets through before it is killed.
const JOBS: usize = 200_000;

fn job(i: usize) -> Job {
    let mut j = Job::new(format!("k{i:06}"), "work", "p");
    j.policy = RetryPolicy {
        attempts_max: 10,
        initial_ms: 1,
        multiplier: 2.0,
        max_ms: 10,
        jitter: 0.0,
        deadline_ms: None,
    };
    j
}

/// `mode`: `flush`, `fsync`, or `snapshots` (flush, with a snapshot every
/// 200 ops and a window of 32 tickets: the queue writes snapshots beside
/// its commits all the time, so the kill often lands in one, and the
/// reopen reads a backlog kept in the store).
fn builder(dir: &std::path::Path, mode: &str) -> weir::EngineBuilder {
    let durability = if mode == "fsync" {
        Durability::Fsync
    } else {
        Durability::Flush
    };
    let builder = Engine::builder(dir);
    let builder = if mode == "snapshots" {
        builder.store_settings(weir::StoreSettings {
            durability,
            snapshot_ops: 200,
            window_tickets: 32,
            ..weir::StoreSettings::default()
        })
    } else {
        builder.durability(durability)
    };
    builder.pool("p", 8)
}

/// The child: runs only when the parent sets `WEIR_CRASH_CHILD_DIR`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let mode = std::env::var(DURABILITY_VAR).unwrap_or_else(|_| "flush".into());
    let engine = builder(std::path::Path::new(&dir), &mode)
        .task_fn("work", |ctx| async move {
            println!("run {}", ctx.key);
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(Vec::new())
        })
        .open()
        .await
        .unwrap();
    let engine = Arc::new(engine);
    let mut events = engine.subscribe();
    tokio::spawn(async move {
        while let Ok(e) = events.recv().await {
            if let EngineEvent::Completed { key, .. } = e {
                println!("done {key}");
            }
        }
    });
    let producers = 8;
    let mut handles = Vec::new();
    for p in 0..producers {
        let engine = engine.clone();
        handles.push(tokio::spawn(async move {
            let mut i = p;
            while i < JOBS {
                let j = job(i);
                let key = j.key.clone();
                engine.enqueue(j).await.unwrap();
                println!("ack {key}");
                i += producers;
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    // Not reached in the test: the parent kills the child long before.
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

struct ChildLog {
    acked: BTreeSet<String>,
    done: BTreeSet<String>,
    /// Keys the child ran after it saw them completed.
    ran_after_done: Vec<String>,
}

fn run_child(dir: &std::path::Path, durability: &str, kill_after_acks: usize) -> ChildLog {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(DIR_VAR, dir)
        .env(DURABILITY_VAR, durability)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut log = ChildLog {
        acked: BTreeSet::new(),
        done: BTreeSet::new(),
        ran_after_done: Vec::new(),
    };
    let mut killed = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if let Some(k) = line.strip_prefix("ack ") {
            log.acked.insert(k.to_string());
        } else if let Some(k) = line.strip_prefix("done ") {
            log.done.insert(k.to_string());
        } else if let Some(k) = line.strip_prefix("run ") {
            if log.done.contains(k) {
                log.ran_after_done.push(k.to_string());
            }
        }
        if !killed && (log.acked.len() >= kill_after_acks || Instant::now() > deadline) {
            // SIGKILL: no destructor, no flush, nothing runs after it.
            child.kill().unwrap();
            killed = true;
        }
    }
    let status = child.wait().unwrap();
    assert!(killed, "the child ended by itself: {status:?}");
    assert!(!status.success(), "{status:?}");
    log
}

async fn kill_and_reopen(durability: &str, kill_after_acks: usize) {
    let dir = tempfile::tempdir().unwrap();
    let log = run_child(dir.path(), durability, kill_after_acks);
    assert!(
        log.acked.len() >= kill_after_acks,
        "{durability}: only {} acks before the kill",
        log.acked.len()
    );
    assert!(
        log.ran_after_done.is_empty(),
        "{durability}: the child ran keys after their completion: {:?}",
        log.ran_after_done
    );

    let runs = Runs::default();
    let engine = count_runs(builder(dir.path(), durability), "work", &runs)
        .open()
        .await
        .unwrap();
    engine
        .drain_until_idle(Duration::from_secs(60))
        .await
        .unwrap();

    for key in &log.acked {
        let record: Option<DoneRecord> = engine.store().get(&done_key(key)).unwrap();
        let record =
            record.unwrap_or_else(|| panic!("{durability}: acked {key} has no done record"));
        assert_eq!(
            record.status,
            DoneStatus::Succeeded,
            "{durability}: {record:?}"
        );
    }
    let runs = runs.lock().unwrap().clone();
    let rerun: Vec<&String> = log.done.iter().filter(|k| runs.contains_key(*k)).collect();
    assert!(
        rerun.is_empty(),
        "{durability}: keys completed before the crash ran again: {rerun:?}"
    );
    // Anything the reopened engine ran was enqueued (acked or not) and not
    // completed before the crash; every record is one per key by
    // construction, and a second enqueue of an acked key is a no-op.
    for key in log.acked.iter().take(50) {
        assert_eq!(
            engine
                .enqueue(job(key[1..].parse().unwrap()))
                .await
                .unwrap(),
            weir::Enqueued::Done,
            "{durability}: {key}"
        );
    }
    eprintln!(
        "{durability}: acked {}, completed before the kill {}, run after reopen {}",
        log.acked.len(),
        log.done.len(),
        runs.len()
    );
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_workload_then_reopen_flush() {
    let rounds = if std::env::var_os("WEIR_SOAK").is_some() {
        10
    } else {
        2
    };
    for round in 0..rounds {
        kill_and_reopen("flush", 300 + round * 700).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_snapshots_are_written_then_reopen() {
    kill_and_reopen("snapshots", 1_500).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_workload_then_reopen_fsync() {
    kill_and_reopen("fsync", 500).await;
}
