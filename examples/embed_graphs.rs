//! Graphs in an embedded engine: `cargo run --release --example embed_graphs`.
//!
//! A graph built in code — `extract` → (`clean`, `count`) → `report` —
//! whose nodes are the application's own tasks (Rust closures, no
//! processes). The engine adopts it, starts one run per day with a param,
//! and waits for them to settle; each task reads its upstreams' outputs
//! from its input and returns its own. A node retried after a failure
//! shows the retry policy at work. Run it twice: the second start of the
//! same days is a no-op (a run starts at most once per partition).

use std::collections::BTreeMap;
use std::time::Duration;

use weir::core::codec;
use weir::core::names::Name;
use weir::core::partition::Partitioning;
use weir::{
    Durability, Engine, GraphDef, NodeDef, Partition, RetryPolicy, TaskError, TaskInput, TaskSpec,
};

/// Node `name` after `ups`, running the registered task `task`.
fn node(name: &str, ups: &[&str], task: &str) -> NodeDef {
    NodeDef::new(
        Name::new(name).expect("a valid name"),
        ups.iter()
            .map(|u| Name::new(*u).expect("a valid name"))
            .collect(),
        TaskSpec {
            task: Name::new(task).expect("a valid name"),
            config: serde_json::Value::Null,
        },
    )
}

/// A task's input: its graph, partition, params and upstream outputs.
fn input(payload: &[u8]) -> Result<TaskInput, TaskError> {
    codec::decode(payload).map_err(|e| TaskError::Permanent(e.to_string()))
}

/// An upstream's output as JSON.
fn upstream(i: &TaskInput, name: &str) -> Result<serde_json::Value, TaskError> {
    let up = i
        .upstreams
        .get(name)
        .ok_or_else(|| TaskError::Permanent(format!("no upstream {name}")))?;
    serde_json::from_slice(&up.output).map_err(|e| TaskError::Permanent(e.to_string()))
}

fn json(v: serde_json::Value) -> Vec<u8> {
    v.to_string().into_bytes()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let data = std::env::temp_dir().join("weir-embed-graphs");
    let engine = Engine::builder(&data)
        .durability(Durability::Flush)
        .pool("default", 4)
        .task_fn("extract", |ctx| async move {
            let i = input(&ctx.payload)?;
            // A flaky source: the first try of each day fails.
            if ctx.attempt == 1 {
                return Err(TaskError::Retryable("the source timed out".into()));
            }
            let rows: Vec<i64> = (1..=10).collect();
            Ok(json(
                serde_json::json!({ "day": i.partition, "rows": rows }),
            ))
        })
        .task_fn("clean", |ctx| async move {
            let i = input(&ctx.payload)?;
            let min: i64 = i
                .params
                .get("min")
                .map_or(Ok(0), |m| m.parse())
                .map_err(|e| TaskError::Permanent(format!("param min: {e}")))?;
            let rows = upstream(&i, "extract")?["rows"].clone();
            let kept: Vec<i64> = rows
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_i64())
                .filter(|r| *r >= min)
                .collect();
            Ok(json(serde_json::json!({ "kept": kept })))
        })
        .task_fn("count", |ctx| async move {
            let i = input(&ctx.payload)?;
            let rows = upstream(&i, "extract")?["rows"]
                .as_array()
                .map_or(0, Vec::len);
            Ok(json(serde_json::json!({ "rows": rows })))
        })
        .task_fn("report", |ctx| async move {
            let i = input(&ctx.payload)?;
            let kept = upstream(&i, "clean")?["kept"]
                .as_array()
                .map_or(0, Vec::len);
            let rows = upstream(&i, "count")?["rows"].as_u64().unwrap_or(0);
            Ok(format!("{}: kept {kept} of {rows} rows", i.partition).into_bytes())
        })
        .open()
        .await?;

    let mut extract = node("extract", &[], "extract");
    extract.retry = RetryPolicy {
        initial_ms: 50,
        ..RetryPolicy::default()
    };
    let mut def = GraphDef::new(
        Name::new("daily")?,
        vec![
            extract,
            node("clean", &["extract"], "clean"),
            node("count", &["extract"], "count"),
            node("report", &["clean", "count"], "report"),
        ],
    );
    def.partitioning = Partitioning::Daily;
    // Declared with its default; a start may set it.
    def.params = BTreeMap::from([("min".to_string(), "0".to_string())]);
    engine.adopt(def).await?;

    let days: Vec<Partition> = ["2026-11-01", "2026-11-02", "2026-11-03"]
        .iter()
        .map(|d| d.parse())
        .collect::<Result<_, _>>()?;
    let params = BTreeMap::from([("min".to_string(), "4".to_string())]);
    let started = engine
        .start_runs_with("daily", days.clone(), params)
        .await?;
    println!("started: {started:?}");
    let states = engine
        .wait_settled("daily", &days, Duration::from_secs(30))
        .await?;
    for (day, state) in days.iter().zip(&states) {
        let run = engine.graph_run("daily", day)?.ok_or("the run is gone")?;
        println!("{day}: {state}");
        for n in &run.nodes {
            println!("  {:<8} {:<10} attempts {}", n.node, n.state, n.attempts);
        }
        // The report's output, from its record.
        let id = weir::actors::scheduler::records::run_id("daily", day, "report", 0);
        if let Some(d) = engine
            .store()
            .get::<weir::DoneRecord>(&weir::actors::done::done_key(&id))?
        {
            println!(
                "  => {}",
                String::from_utf8_lossy(&d.load_output(engine.store())?)
            );
        }
    }
    engine.shutdown(Duration::from_secs(5)).await?;
    println!("data in {}", data.display());
    Ok(())
}
