//! A settled run as spans: the run, each node instance that ran, each of
//! its attempts. Pure: it takes the run's view and its attempts' records
//! (as the engine read them) and returns what to export; the exporter
//! turns the plan into OTLP spans.
//!
//! Events: on a node span, `queued` (how long its first attempt waited
//! for a slot once it was ready: from its upstreams' end, or the run's
//! start, to the attempt's start), `deferred` (hand-outs a breaker put
//! off), and `retry` at each attempt after the first (with the error that
//! caused it). Attempt spans carry the exit code and outcome; a failed one
//! has an error status.

use std::collections::{BTreeMap, BTreeSet};

use super::ids::{self, SpanBytes, TraceBytes};
use crate::logs::AttemptRecord;
use crate::serve::views::RunDetail;

/// A span's attributes: (key, value).
pub type Attrs = Vec<(&'static str, String)>;
/// A span event: (name, at ms since the epoch, attributes).
pub type SpanEvent = (&'static str, u64, Attrs);

/// One span to export.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanPlan {
    /// Its trace.
    pub trace: TraceBytes,
    /// Its id.
    pub span: SpanBytes,
    /// Its parent; none for the run's span.
    pub parent: Option<SpanBytes>,
    /// `run etl 2026-11-01`, `node load`, `attempt 2`.
    pub name: String,
    /// When it started (ms since the epoch).
    pub start_ms: u64,
    /// When it ended.
    pub end_ms: u64,
    /// Its attributes.
    pub attrs: Attrs,
    /// Its events.
    pub events: Vec<SpanEvent>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// The spans of `run`; node instances whose run id is in `exported` (an
/// earlier settle of the same run sent them) are left out, and their
/// attempts with them.
pub fn spans_of(
    run: &RunDetail,
    attempts: &BTreeMap<String, Vec<AttemptRecord>>,
    exported: &BTreeSet<String>,
) -> Vec<SpanPlan> {
    let Some(settled_ms) = run.settled_at_ms else {
        return Vec::new();
    };
    let trace = ids::trace_id(&run.graph, run.partition.as_str());
    let root = ids::run_span(&run.graph, run.partition.as_str());
    let started_ms = run.started_at_ms;
    let state = run.state.to_string();
    let mut out = vec![SpanPlan {
        trace,
        span: root,
        parent: None,
        name: format!("run {} {}", run.graph, run.partition),
        start_ms: started_ms,
        end_ms: settled_ms.max(started_ms),
        attrs: vec![
            ("weir.graph", run.graph.clone()),
            ("weir.partition", run.partition.to_string()),
            ("weir.state", state.clone()),
            ("weir.definition", run.definition.clone()),
        ],
        events: Vec::new(),
        error: (state != "complete").then(|| {
            run.failure
                .clone()
                .unwrap_or_else(|| format!("the run {state}"))
        }),
    }];
    let finished: BTreeMap<&str, u64> = run
        .nodes
        .iter()
        .filter_map(|n| n.finished_ms.map(|f| (n.node.as_str(), f)))
        .collect();
    for n in &run.nodes {
        let Some(node_start) = n.started_ms else {
            continue; // never ran: skipped, or its upstreams failed
        };
        if exported.contains(&n.run_id) {
            continue;
        }
        let tries = attempts.get(&n.run_id).map_or(&[][..], Vec::as_slice);
        let first_ms = tries.first().map_or(node_start, |a| a.started_ms);
        let end_ms = n
            .finished_ms
            .or_else(|| tries.iter().filter_map(|a| a.finished_ms).max())
            .unwrap_or(settled_ms)
            .max(node_start);
        let node_span = ids::node_span(&n.run_id);
        let ready_ms = n
            .upstreams
            .iter()
            .filter_map(|u| finished.get(u.as_str()).copied())
            .max()
            .unwrap_or(started_ms)
            .max(started_ms);
        let mut events = vec![(
            "queued",
            first_ms,
            vec![(
                "weir.queue_wait_ms",
                first_ms.saturating_sub(ready_ms).to_string(),
            )],
        )];
        if n.deferrals > 0 {
            events.push((
                "deferred",
                first_ms,
                vec![("weir.deferrals", n.deferrals.to_string())],
            ));
        }
        for pair in tries.windows(2) {
            let (before, a) = (&pair[0], &pair[1]);
            events.push((
                "retry",
                a.started_ms,
                vec![
                    ("weir.attempt", a.attempt.to_string()),
                    (
                        "weir.previous_error",
                        before.error.clone().unwrap_or_else(|| "failed".into()),
                    ),
                ],
            ));
        }
        let mut attrs = vec![
            ("weir.node", n.node.clone()),
            ("weir.rerun", n.rerun.to_string()),
            ("weir.state", n.state.clone()),
            ("weir.attempts", n.attempts.to_string()),
            ("weir.run_id", n.run_id.clone()),
        ];
        if let Some(w) = &n.worker {
            attrs.push(("weir.worker", w.clone()));
        }
        out.push(SpanPlan {
            trace,
            span: node_span,
            parent: Some(root),
            name: format!("node {}", n.node),
            start_ms: node_start.min(first_ms),
            end_ms,
            attrs,
            events,
            error: (n.state != "succeeded").then(|| {
                n.error
                    .clone()
                    .unwrap_or_else(|| format!("the node {}", n.state))
            }),
        });
        for a in tries {
            let mut attrs = vec![("weir.attempt", a.attempt.to_string())];
            if let Some(o) = &a.outcome {
                attrs.push(("weir.outcome", o.to_string()));
            }
            if let Some(c) = a.exit_code {
                attrs.push(("process.exit.code", c.to_string()));
            }
            let failed = a
                .outcome
                .as_ref()
                .is_some_and(|o| *o != crate::logs::Outcome::Succeeded);
            out.push(SpanPlan {
                trace,
                span: ids::attempt_span(&n.run_id, a.attempt),
                parent: Some(node_span),
                name: format!("attempt {}", a.attempt),
                start_ms: a.started_ms,
                end_ms: a.finished_ms.unwrap_or(end_ms).max(a.started_ms),
                attrs,
                events: Vec::new(),
                error: failed.then(|| a.error.clone().unwrap_or_else(|| "failed".into())),
            });
        }
    }
    out
}
