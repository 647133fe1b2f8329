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
//! has an error status. A mapped node's members are spans under the node
//! (the first [`weir_actors::views::run::MEMBER_VIEWS_MAX`] the view lists),
//! each with its attempts.

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
    let member_ids = member_ids(run);
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
        out.extend(attempt_spans(trace, node_span, &n.run_id, tries, end_ms));
        for m in n.members.iter().flat_map(|ms| ms.list.iter()) {
            let Some(id) = member_ids.get(&(n.node.clone(), m.index)) else {
                continue;
            };
            let tries = attempts.get(id).map_or(&[][..], Vec::as_slice);
            let (Some(first), Some(last)) = (tries.first(), tries.last()) else {
                continue; // never started
            };
            let member_end = last.finished_ms.unwrap_or(end_ms).max(first.started_ms);
            let span = ids::node_span(id);
            let mut attrs = vec![
                ("weir.member", m.index.to_string()),
                ("weir.state", m.state.clone()),
                ("weir.run_id", id.clone()),
            ];
            if let Some(item) = &m.item {
                attrs.push(("weir.item", item.chars().take(ITEM_CHARS_MAX).collect()));
            }
            out.push(SpanPlan {
                trace,
                span,
                parent: Some(node_span),
                name: format!("member {}", m.index),
                start_ms: first.started_ms,
                end_ms: member_end,
                attrs,
                events: Vec::new(),
                error: (m.state != "succeeded").then(|| {
                    m.error
                        .clone()
                        .unwrap_or_else(|| format!("the member {}", m.state))
                }),
            });
            out.extend(attempt_spans(trace, span, id, tries, member_end));
        }
    }
    out
}

/// A member's item is cut to this many characters in its span.
pub const ITEM_CHARS_MAX: usize = 200;

/// The run ids of the members of `run`'s mapped nodes (those the view
/// lists), by node and index: their attempts are read under these.
pub fn member_ids(run: &RunDetail) -> BTreeMap<(String, usize), String> {
    let Ok(p) = run.partition.parse::<weir_core::partition::Partition>() else {
        return BTreeMap::new();
    };
    run.nodes
        .iter()
        .flat_map(|n| {
            let p = &p;
            n.members.iter().flat_map(move |ms| {
                ms.list.iter().map(move |m| {
                    (
                        (n.node.clone(), m.index),
                        weir_actors::records::keys::member_id(
                            &run.graph,
                            p,
                            &n.node,
                            m.rerun,
                            m.index as u32,
                        ),
                    )
                })
            })
        })
        .collect()
}

/// The spans of a node instance's (or member's) attempts, under `parent`.
fn attempt_spans(
    trace: TraceBytes,
    parent: SpanBytes,
    run_id: &str,
    tries: &[AttemptRecord],
    end_ms: u64,
) -> Vec<SpanPlan> {
    tries
        .iter()
        .map(|a| {
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
            SpanPlan {
                trace,
                span: ids::attempt_span(run_id, a.attempt),
                parent: Some(parent),
                name: format!("attempt {}", a.attempt),
                start_ms: a.started_ms,
                end_ms: a.finished_ms.unwrap_or(end_ms).max(a.started_ms),
                attrs,
                events: Vec::new(),
                error: failed.then(|| a.error.clone().unwrap_or_else(|| "failed".into())),
            }
        })
        .collect()
}
