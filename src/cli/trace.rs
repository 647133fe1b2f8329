//! `weir trace GRAPH PARTITION`: a settled run's span tree, without a
//! collector — the spans the OTLP exporter sends (the run, each node
//! instance, each attempt, with their events and errors), printed as a
//! tree with each span's offset from the run's start and its duration.

use std::collections::{BTreeMap, BTreeSet};

use clap::Args;

use super::client::{self, Conn, Source};
use super::failure::Failure;
use super::output::out;
use crate::trace::plan::{spans_of, SpanPlan};

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
    let spans = match client::source(&a.conn)? {
        Source::Store(dir) => {
            let (store, _) = super::inspect::open(&dir)?;
            crate::trace::export::run_spans(&store, &dir, &a.graph, &a.partition, &BTreeSet::new())
                .map_err(Failure::store)?
        }
        Source::Engine(c) => client::block_on(async {
            let run: crate::serve::views::RunDetail = c
                .get(
                    &["api", "v1", "graphs", &a.graph, "runs", &a.partition],
                    &[],
                )
                .await??;
            // Each node instance's attempts, as the run page reads them
            // (a mapped node's members show without their attempts).
            let mut attempts = BTreeMap::new();
            for n in &run.nodes {
                let v: serde_json::Value = c
                    .get(
                        &[
                            "api",
                            "v1",
                            "graphs",
                            &a.graph,
                            "runs",
                            &a.partition,
                            "nodes",
                            &n.node,
                        ],
                        &[],
                    )
                    .await??;
                let log: Vec<crate::logs::AttemptRecord> =
                    serde_json::from_value(v["attempt_log"].clone()).unwrap_or_default();
                attempts.insert(n.run_id.clone(), log);
            }
            Ok::<_, Failure>(spans_of(&run, &attempts, &BTreeSet::new()))
        })??,
    };
    if spans.is_empty() {
        return Err(Failure::input(format!(
            "graph {:?} has no settled run for {:?}: a trace is made when a run settles",
            a.graph, a.partition
        )));
    }
    if a.conn.json {
        let v: Vec<serde_json::Value> = spans.iter().map(span_json).collect();
        out(&serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        for line in tree(&spans) {
            out(&line);
        }
    }
    Ok(0)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn span_json(s: &SpanPlan) -> serde_json::Value {
    serde_json::json!({
        "trace_id": hex(&s.trace),
        "span_id": hex(&s.span),
        "parent_span_id": s.parent.map(|p| hex(&p)),
        "name": s.name,
        "start_ms": s.start_ms,
        "end_ms": s.end_ms,
        "attributes": s.attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<BTreeMap<_, _>>(),
        "events": s.events.iter().map(|(n, at, attrs)| serde_json::json!({
            "name": n,
            "at_ms": at,
            "attributes": attrs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<BTreeMap<_, _>>(),
        })).collect::<Vec<_>>(),
        "error": s.error,
    })
}

/// The spans as indented lines, children under their parent in start
/// order: `name  +offset  duration  [events] [error]`.
pub fn tree(spans: &[SpanPlan]) -> Vec<String> {
    let root_start = spans.iter().map(|s| s.start_ms).min().unwrap_or(0);
    let mut children: BTreeMap<Option<[u8; 8]>, Vec<&SpanPlan>> = BTreeMap::new();
    for s in spans {
        children.entry(s.parent).or_default().push(s);
    }
    for v in children.values_mut() {
        v.sort_by_key(|s| (s.start_ms, s.name.clone()));
    }
    let mut lines = vec![format!(
        "trace {}",
        spans.first().map(|s| hex(&s.trace)).unwrap_or_default()
    )];
    fn walk(
        at: Option<[u8; 8]>,
        depth: usize,
        root_start: u64,
        children: &BTreeMap<Option<[u8; 8]>, Vec<&SpanPlan>>,
        lines: &mut Vec<String>,
    ) {
        for s in children.get(&at).into_iter().flatten() {
            let mut line = format!(
                "{:indent$}{}  +{} ms  {} ms",
                "",
                s.name,
                s.start_ms.saturating_sub(root_start),
                s.end_ms.saturating_sub(s.start_ms),
                indent = depth * 2
            );
            for (name, _, attrs) in &s.events {
                // One line per span: a value's first line (an error's output
                // tails are in `weir logs`).
                let what: Vec<String> = attrs
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.lines().next().unwrap_or("")))
                    .collect();
                line.push_str(&format!(
                    "  [{name}{}{}]",
                    if what.is_empty() { "" } else { " " },
                    what.join(" ")
                ));
            }
            if let Some(e) = &s.error {
                line.push_str(&format!("  error: {}", e.lines().next().unwrap_or("")));
            }
            lines.push(line);
            walk(Some(s.span), depth + 1, root_start, children, lines);
        }
    }
    walk(None, 1, root_start, &children, &mut lines);
    lines
}
