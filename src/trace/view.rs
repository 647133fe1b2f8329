//! A run's spans as the API and `weir trace --json` give them: the same
//! spans the OTLP exporter sends ([`super::plan`]), ids in hex.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::plan::SpanPlan;

/// A settled run's trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunTrace {
    pub graph: String,
    pub partition: String,
    /// The trace's id (32 hex digits): what a collector files it under.
    pub trace_id: String,
    /// The run's span first, then each span after its parent, siblings in
    /// start order.
    pub spans: Vec<TraceSpan>,
}

/// One span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceSpan {
    /// 16 hex digits.
    pub span_id: String,
    /// Its parent's id; none for the run's span.
    pub parent_span_id: Option<String>,
    /// How deep it is: 0 for the run, 1 for a node, 2 for an attempt or a
    /// mapped node's member, 3 for a member's attempt.
    pub depth: u32,
    /// `run etl 2026-11-01`, `node load`, `attempt 2`.
    pub name: String,
    /// When it started and ended (ms since the epoch).
    pub start_ms: u64,
    pub end_ms: u64,
    pub attributes: BTreeMap<String, String>,
    pub events: Vec<TraceEvent>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// An event of a span: `queued`, `deferred`, `retry`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TraceEvent {
    pub name: String,
    pub at_ms: u64,
    pub attributes: BTreeMap<String, String>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn attrs(a: &[(&'static str, String)]) -> BTreeMap<String, String> {
    a.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

impl RunTrace {
    /// The trace of `spans` (none when the run has not settled).
    pub fn of(graph: &str, partition: &str, spans: &[SpanPlan]) -> Option<RunTrace> {
        let first = spans.first()?;
        let mut children: BTreeMap<Option<[u8; 8]>, Vec<&SpanPlan>> = BTreeMap::new();
        for s in spans {
            children.entry(s.parent).or_default().push(s);
        }
        for v in children.values_mut() {
            v.sort_by_key(|s| (s.start_ms, s.name.clone()));
        }
        let mut out = Vec::with_capacity(spans.len());
        // Depth first, from the roots; a span whose parent is not in the
        // plan is not reached (the plan has none).
        let mut stack: Vec<(&SpanPlan, u32)> = children
            .get(&None)
            .into_iter()
            .flatten()
            .rev()
            .map(|s| (*s, 0))
            .collect();
        while let Some((s, depth)) = stack.pop() {
            out.push(TraceSpan {
                span_id: hex(&s.span),
                parent_span_id: s.parent.map(|p| hex(&p)),
                depth,
                name: s.name.clone(),
                start_ms: s.start_ms,
                end_ms: s.end_ms,
                attributes: attrs(&s.attrs),
                events: s
                    .events
                    .iter()
                    .map(|(name, at_ms, a)| TraceEvent {
                        name: name.to_string(),
                        at_ms: *at_ms,
                        attributes: attrs(a),
                    })
                    .collect(),
                error: s.error.clone(),
            });
            for c in children.get(&Some(s.span)).into_iter().flatten().rev() {
                stack.push((c, depth + 1));
            }
        }
        debug_assert_eq!(
            out.len(),
            spans.len(),
            "every span has its parent in the plan"
        );
        Some(RunTrace {
            graph: graph.to_string(),
            partition: partition.to_string(),
            trace_id: hex(&first.trace),
            spans: out,
        })
    }
}
