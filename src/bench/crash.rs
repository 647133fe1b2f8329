//! `weir bench crash`: a 1 → 1,000 → 1 graph (1 → 100 → 1 with `--quick`)
//! of in-process no-op nodes, 10% of which fail their first attempt, run in
//! a child process (this binary again) that is killed with SIGKILL once
//! half of the nodes' completions are durable, then started again on the
//! same store until the run settles.
//!
//! The child prints `DONE key status` for every `EngineEvent::Completed`
//! (sent after the completion's batch is durable) and `EXEC key attempt`
//! when a task body returns success. A completion is lost when it was
//! printed before the kill and the node is not succeeded at the end, or
//! when a node is not succeeded at the end at all; it is duplicated when
//! one node's completion is printed twice (across both processes). Tasks
//! run at least once, so executions repeated across the kill are counted
//! apart: they are allowed, a second completion is not.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use weir_actors::events::EngineEvent;
use weir_actors::store::Durability;
use weir_actors::task::TaskError;
use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::names::Name;
use weir_core::partition::Partition;
use weir_core::retry::RetryPolicy;

use super::child::{self, Child, Next};
use super::drain::tempfile_dir;
use super::report::{result_line, BenchError};
use crate::Engine;

/// Set in the child process: the store, then `first` or `resume`.
const CHILD_ENV: &str = "WEIR_BENCH_CRASH";

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

fn name(s: &str) -> Result<Name, BenchError> {
    Name::new(s).map_err(failed)
}

/// Whether node `n` fails its first attempt: every tenth middle node.
fn flaky(node: &str) -> bool {
    node.strip_prefix('m')
        .and_then(|i| i.parse::<u32>().ok())
        .is_some_and(|i| i % 10 == 0)
}

fn graph(width: usize) -> Result<GraphDef, BenchError> {
    let policy = RetryPolicy {
        attempts_max: 5,
        initial_ms: 10,
        multiplier: 1.0,
        max_ms: 10,
        ..RetryPolicy::default()
    };
    let node = |n: &str, ups: Vec<Name>| -> Result<NodeDef, BenchError> {
        let mut d = NodeDef::new(
            name(n)?,
            ups,
            TaskSpec {
                task: name("flaky")?,
                config: serde_json::Value::Null,
            },
        );
        d.retry = policy.clone();
        Ok(d)
    };
    let mids: Vec<String> = (0..width).map(|i| format!("m{i:05}")).collect();
    let mut defs = vec![node("root", Vec::new())?];
    for m in &mids {
        defs.push(node(m, vec![name("root")?])?);
    }
    let ups = mids
        .iter()
        .map(|m| name(m))
        .collect::<Result<Vec<_>, _>>()?;
    defs.push(node("sink", ups)?);
    Ok(GraphDef::new(name("crash")?, defs))
}

/// The child: run (or resume) the graph, printing completions.
async fn child(dir: &std::path::Path, first: bool, width: usize) -> Result<(), BenchError> {
    let engine = Engine::builder(dir)
        .durability(Durability::Fsync)
        .pool("default", 8)
        .task_fn("flaky", |ctx| async move {
            let node = ctx.key.split('/').nth(2).unwrap_or_default().to_string();
            if ctx.attempt == 1 && flaky(&node) {
                return Err(TaskError::Retryable("fails its first attempt".into()));
            }
            println!("EXEC {} {}", ctx.key, ctx.attempt);
            Ok(Vec::new())
        })
        .open()
        .await
        .map_err(failed)?;
    let mut rx = engine.subscribe();
    let printer = tokio::spawn(async move {
        while let Ok(e) = rx.recv().await {
            if let EngineEvent::Completed { key, status, .. } = e {
                println!("DONE {key} {status:?}");
            }
        }
    });
    engine.adopt(graph(width)?).await.map_err(failed)?;
    if first {
        engine
            .start_run("crash", Partition::NONE)
            .await
            .map_err(failed)?;
    }
    let states = engine
        .wait_settled("crash", &[Partition::NONE], Duration::from_secs(600))
        .await
        .map_err(failed)?;
    let view = engine
        .graph_run("crash", &Partition::NONE)
        .map_err(failed)?
        .ok_or_else(|| BenchError::Failed("no run after settle".into()))?;
    // Let the printer catch up with the last completions.
    tokio::time::sleep(Duration::from_millis(200)).await;
    printer.abort();
    for n in &view.nodes {
        println!("NODE {} {} {}", n.node, n.state, n.attempts);
    }
    println!("SETTLED {:?}", states.first());
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)
}

/// What one child process printed.
#[derive(Default)]
struct Seen {
    done: Vec<(String, String)>,
    execs: usize,
    nodes: BTreeMap<String, String>,
}

fn spawn_child(dir: &std::path::Path, mode: &str, quick: bool) -> Result<Child, BenchError> {
    child::spawn(
        "crash",
        quick,
        CHILD_ENV,
        &format!("{}\n{mode}", dir.display()),
    )
}

/// Reads a child's lines; kills it after `kill_at` completions when set.
fn watch(child: &mut Child, kill_at: Option<usize>) -> Result<Seen, BenchError> {
    let mut seen = Seen::default();
    let mut killed = false;
    while let Next::Line(line, _) = child.next(None) {
        let mut parts = line.split_whitespace();
        match parts.next() {
            Some("DONE") => {
                let key = parts.next().unwrap_or_default().to_string();
                let status = parts.next().unwrap_or_default().to_string();
                seen.done.push((key, status));
                if !killed && kill_at.is_some_and(|k| seen.done.len() >= k) {
                    child.kill()?;
                    killed = true;
                    // What it printed before it died still counts; what it
                    // printed after the count was reached is read too.
                }
            }
            Some("EXEC") => seen.execs += 1,
            Some("NODE") => {
                let node = parts.next().unwrap_or_default().to_string();
                let state = parts.next().unwrap_or_default().to_string();
                seen.nodes.insert(node, state);
            }
            _ => {}
        }
    }
    if !killed {
        child.wait()?;
    }
    Ok(seen)
}

/// Runs `weir bench crash`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let width = if quick { 100 } else { 1_000 };
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        let (dir, mode) = spec
            .split_once('\n')
            .ok_or_else(|| BenchError::Failed("bad child spec".into()))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(failed)?;
        return rt.block_on(child(std::path::Path::new(dir), mode == "first", width));
    }
    let nodes = width + 2;
    let dir = tempfile_dir()?;
    let store = dir.join("crash");
    let began = Instant::now();
    let mut first = spawn_child(&store, "first", quick)?;
    let before = watch(&mut first, Some(nodes / 2))?;
    let killed_at = began.elapsed();
    let mut second = spawn_child(&store, "resume", quick)?;
    let after = watch(&mut second, None)?;
    let total = began.elapsed();
    let mut completions: HashMap<&str, usize> = HashMap::new();
    for (key, _) in before.done.iter().chain(after.done.iter()) {
        *completions.entry(key.as_str()).or_default() += 1;
    }
    let duplicated = completions.values().filter(|&&c| c > 1).count();
    let succeeded = after.nodes.values().filter(|s| *s == "succeeded").count();
    let lost_acknowledged = before
        .done
        .iter()
        .filter(|(key, _)| {
            let node = key.split('/').nth(2).unwrap_or_default();
            after.nodes.get(node).map(String::as_str) != Some("succeeded")
        })
        .count();
    let lost = (nodes - succeeded.min(nodes)).max(lost_acknowledged);
    let expected_execs = nodes;
    let reexecuted = (before.execs + after.execs).saturating_sub(expected_execs);
    println!(
        "crash: 1 -> {width} -> 1 in-process no-op nodes, 10% failing once, fsync, pool 8; SIGKILL after {} durable completions ({:.1} ms), restart: settled {:.1} ms after the first start",
        before.done.len(),
        killed_at.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3
    );
    println!(
        "completions: {succeeded} of {nodes} nodes succeeded; lost {lost}, duplicated {duplicated} (goal 0 and 0); task bodies run again after the kill (at least once): {reexecuted}"
    );
    println!(
        "{}",
        result_line(
            "crash",
            &[
                ("nodes", nodes.to_string()),
                ("total_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
                ("killed_after", before.done.len().to_string()),
                ("lost", lost.to_string()),
                ("duplicated", duplicated.to_string()),
                ("reexecuted", reexecuted.to_string()),
            ]
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
