//! The cost of one terminal event in a large graph run: a layered graph
//! (layers of 100 nodes, each node with 3 upstreams in the layer before),
//! every node recorded succeeded in topological order through the
//! incremental tracker, which must cost in proportion to the node's degree,
//! not to the graph's size.

use std::collections::BTreeMap;
use std::time::Instant;

use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
use weir_core::names::Name;
use weir_core::readiness::{NodeStatus, Record, RunTracker};

use super::report::BenchError;

/// A layered graph of `nodes` nodes.
pub fn layered(nodes: usize, width: usize) -> Result<weir_core::graph::Graph, BenchError> {
    let name = |i: usize| Name::new(format!("n{i}")).expect("generated names are valid");
    let task = TaskSpec {
        task: Name::new("noop").expect("valid"),
        config: serde_json::Value::Null,
    };
    let defs = (0..nodes)
        .map(|i| {
            let layer = i / width;
            let ups = if layer == 0 {
                Vec::new()
            } else {
                let base = (layer - 1) * width;
                let mut ups: Vec<Name> = (0..3).map(|k| name(base + (i + k * 7) % width)).collect();
                ups.sort();
                ups.dedup();
                ups
            };
            NodeDef::new(name(i), ups, task.clone())
        })
        .collect();
    GraphDef::new(Name::new("bench").expect("valid"), defs)
        .validate()
        .map_err(|e| BenchError::Failed(e.to_string()))
}

/// Mean microseconds per terminal event on a graph of `nodes` nodes.
pub fn event_cost_us(nodes: usize) -> Result<f64, BenchError> {
    let graph = layered(nodes, 100)?;
    let order: Vec<usize> = graph.topological_order().to_vec();
    let rounds = 5;
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let mut tracker = RunTracker::new(&graph, &BTreeMap::<Name, Record>::new());
        let started = Instant::now();
        for &idx in &order {
            let _ = tracker.record(&graph, idx, NodeStatus::Succeeded);
        }
        let us = started.elapsed().as_secs_f64() * 1e6 / order.len() as f64;
        if !tracker.is_settled() {
            return Err(BenchError::Failed("the run did not settle".into()));
        }
        best = best.min(us);
    }
    Ok(best)
}
