//! The cost of validating a large definition file: 100k nodes (10k with
//! `--quick`) read from disk, parsed, converted and validated, as `weir
//! validate` does. Line numbers once cost a scan of the file per node, so
//! 100k nodes took minutes; the goal is linear time, at most 1 s.
//!
//! The file keeps under the 4 MiB file limit by writing nodes as inline
//! tables, one a line; every odd node lists the node before it as its
//! upstream, so the graph has edges to check. The nodes run the task `t`,
//! which the validation is told is registered (as an embedding program
//! registers its tasks): `command` nodes would not fit 100k nodes in the
//! file limit, and an unregistered task is refused, node by node.

use std::fmt::Write as _;
use std::time::Instant;

use super::drain::tempfile_dir;
use super::report::{result_line, BenchError};
use crate::definition;

/// Nodes of the full size.
pub const NODES_FULL: usize = 100_000;
/// The task every node runs, registered for the validation.
pub const BENCH_TASK: &str = "t";
/// The goal for the full size, in ms.
pub const VALIDATE_GOAL_MS: u64 = 1_000;

/// A definition of `nodes` nodes, one inline table a line; odd nodes
/// depend on the node before them.
pub fn definition_text(nodes: usize) -> String {
    let mut text = String::with_capacity(nodes * 40 + 64);
    text.push_str("name = \"bench\"\nnodes = [\n");
    for i in 0..nodes {
        if i % 2 == 1 {
            let _ = writeln!(
                text,
                "{{name=\"n{i}\",task=\"{BENCH_TASK}\",upstreams=[\"n{}\"]}},",
                i - 1
            );
        } else {
            let _ = writeln!(text, "{{name=\"n{i}\",task=\"{BENCH_TASK}\"}},");
        }
    }
    text.push_str("]\n");
    text
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let nodes = if quick { NODES_FULL / 10 } else { NODES_FULL };
    let dir = tempfile_dir()?;
    let path = dir.join("bench.toml");
    let text = definition_text(nodes);
    let bytes = text.len();
    std::fs::write(&path, &text)
        .map_err(|e| BenchError::Failed(format!("write {}: {e}", path.display())))?;
    let mut registered = definition::Registered::command_line();
    if let Some(tasks) = registered.tasks.as_mut() {
        tasks.insert(BENCH_TASK.to_string());
    }
    let rounds = 3;
    let mut best_ms = f64::MAX;
    for _ in 0..rounds {
        let started = Instant::now();
        let defs = definition::load_for(&path, &registered).map_err(|e| {
            // One line: a refused file holds a fault per node.
            let first = e.0.first().map(|f| f.to_string()).unwrap_or_default();
            BenchError::Failed(format!("{} faults; the first: {first}", e.0.len()))
        })?;
        let ms = started.elapsed().as_secs_f64() * 1e3;
        let got = defs.graphs.first().map_or(0, |g| g.graph.def().nodes.len());
        if got != nodes {
            return Err(BenchError::Failed(format!(
                "validated {got} nodes, want {nodes}"
            )));
        }
        best_ms = best_ms.min(ms);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "validate: {nodes} nodes, {bytes} bytes: best of {rounds} {best_ms:.0} ms (goal at {NODES_FULL} nodes: <= {VALIDATE_GOAL_MS} ms)"
    );
    println!(
        "{}",
        result_line(
            "validate",
            &[
                ("nodes", nodes.to_string()),
                ("validate_ms", format!("{best_ms:.0}")),
                ("goal_ms", VALIDATE_GOAL_MS.to_string()),
                ("bytes", bytes.to_string()),
            ],
        )
    );
    Ok(())
}
