//! What the `graphs_*` tests share.

// Each test file uses the part it needs.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weir::task::command::{CommandTask, COMMAND_TASK};
use weir::task::notify::{NotifyTask, NOTIFY_TASK};
use weir::{Durability, Engine, EngineBuilder, GraphDef, NodeDef, Partition, RunState, TaskSpec};
use weir_core::names::Name;

/// Node `name` after `ups`, running `task`, with a single attempt: a
/// failure is final, so the tests see it at once.
pub fn node(name: &str, ups: &[&str], task: &str) -> NodeDef {
    let mut n = NodeDef::new(
        Name::new(name).unwrap(),
        ups.iter().map(|u| Name::new(*u).unwrap()).collect(),
        TaskSpec {
            task: Name::new(task).unwrap(),
            config: serde_json::Value::Null,
        },
    );
    n.retry = weir::RetryPolicy::once();
    n
}

/// An engine on `data` with `weir`'s command and notification tasks and a
/// pool `default` of `slots`, as `weir run` has them (flush durability:
/// the tests do not need fsync).
pub fn command_engine(data: &Path, slots: u32) -> EngineBuilder {
    Engine::builder(data)
        .durability(Durability::Flush)
        .pool("default", slots)
        .task(
            COMMAND_TASK,
            Arc::new(CommandTask {
                scratch: data.join("scratch"),
                work: data.join("work"),
                logs: None,
                log_limits: Default::default(),
                remote: None,
                artifacts: weir::artifacts::ArtifactStore::in_folder(&data.join("artifacts"))
                    .unwrap(),
            }),
        )
        .task(NOTIFY_TASK, Arc::new(NotifyTask))
        .task(
            weir::task::sensor::SENSOR_TASK,
            Arc::new(weir::task::sensor::SensorTask::new().unwrap()),
        )
}

/// The graph of definition `text`, as `weir run` reads it from a file in
/// `dir` (where its commands run).
pub fn from_toml(dir: &Path, text: &str) -> GraphDef {
    let file = dir.join("graph.toml");
    std::fs::write(&file, text).unwrap();
    match weir::definition::parse_all(text, &file, dir) {
        Ok((graph, _, _)) => graph.into_def(),
        Err(e) => panic!("the test's definition does not validate:\n{e}\n{text}"),
    }
}

/// Waits (up to a minute) until the run of `graph` for `p` settles.
pub async fn settled(engine: &Engine, graph: &str, p: &Partition) -> RunState {
    engine
        .wait_settled(graph, std::slice::from_ref(p), Duration::from_secs(60))
        .await
        .unwrap()[0]
}

/// The current record of `node` in the run of `graph` for `p`, read from
/// the store: (state, attempts, error, output).
pub fn node_record(
    engine: &Engine,
    graph: &str,
    p: &Partition,
    node: &str,
) -> (String, u32, Option<String>, Vec<u8>) {
    let run = engine.graph_run(graph, p).unwrap().expect("the run exists");
    let n = run
        .nodes
        .iter()
        .find(|n| n.node == node)
        .unwrap_or_else(|| panic!("no node {node} in {run:?}"));
    let id = weir::actors::scheduler::records::run_id(graph, p, node, n.rerun);
    let output = match engine
        .store()
        .get::<weir::DoneRecord>(&weir::actors::done::done_key(&id))
    {
        Ok(Some(d)) => d.load_output(engine.store()).unwrap(),
        _ => Vec::new(),
    };
    (n.state.clone(), n.attempts, n.error.clone(), output)
}
