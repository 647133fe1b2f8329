//! `weir trace GRAPH PARTITION`: a settled run's span tree, without a
//! collector — the spans the OTLP exporter sends (the run, each node
//! instance, each attempt, with their events and errors), printed as a
//! tree with each span's offset from the run's start and its duration.

use std::collections::BTreeSet;

use clap::Args;

use super::client::{self, Conn, Source};
use super::failure::Failure;
use super::output::out;
use crate::trace::view::RunTrace;

/// `weir trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    /// The graph.
    pub graph: String,
    /// The run's partition.
    pub partition: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir trace`.
pub fn run(a: TraceArgs) -> Result<u8, Failure> {
    let none = || {
        Failure::input(format!(
            "graph {:?} has no settled run for {:?}: a trace is made when a run settles",
            a.graph, a.partition
        ))
    };
    let trace = match client::source(&a.conn)? {
        Source::Store(dir) => {
            let (store, _) = super::inspect::open(&dir)?;
            let spans = crate::trace::export::run_spans(
                &store,
                &dir,
                &a.graph,
                &a.partition,
                &BTreeSet::new(),
            )
            .map_err(Failure::store)?;
            RunTrace::of(&a.graph, &a.partition, &spans).ok_or_else(none)?
        }
        // The engine's own view, as the run page draws it.
        Source::Engine(c) => client::block_on(async {
            c.get::<RunTrace>(
                &[
                    "api",
                    "v1",
                    "graphs",
                    &a.graph,
                    "runs",
                    &a.partition,
                    "trace",
                ],
                &[],
            )
            .await
        })???,
    };
    if a.conn.json {
        out(&serde_json::to_string_pretty(&trace).unwrap_or_default());
    } else {
        for line in tree(&trace) {
            out(&line);
        }
    }
    Ok(0)
}

/// The spans as indented lines, children under their parent in start
/// order: `name  +offset  duration  [events] [error]`.
pub fn tree(t: &RunTrace) -> Vec<String> {
    let root_start = t.spans.iter().map(|s| s.start_ms).min().unwrap_or(0);
    let mut lines = vec![format!("trace {}", t.trace_id)];
    for s in &t.spans {
        let mut line = format!(
            "{:indent$}{}  +{} ms  {} ms",
            "",
            s.name,
            s.start_ms.saturating_sub(root_start),
            s.end_ms.saturating_sub(s.start_ms),
            indent = (s.depth as usize + 1) * 2
        );
        for e in &s.events {
            // One line per span: a value's first line (an error's output
            // tails are in `weir logs`).
            let what: Vec<String> = e
                .attributes
                .iter()
                .map(|(k, v)| format!("{k}={}", v.lines().next().unwrap_or("")))
                .collect();
            line.push_str(&format!(
                "  [{}{}{}]",
                e.name,
                if what.is_empty() { "" } else { " " },
                what.join(" ")
            ));
        }
        if let Some(e) = &s.error {
            line.push_str(&format!("  error: {}", e.lines().next().unwrap_or("")));
        }
        lines.push(line);
    }
    lines
}
