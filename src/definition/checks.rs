//! What every check of a definition shares: a fault and its line, what
//! the engine provides (pools, tasks), durations, field messages and
//! template checks.

use std::collections::BTreeSet;

use weir_core::template::{Context, Place, Template};

/// Upstreams of one node checked for repeats by a scan of those before
/// them; a longer list is checked through a set.
pub(super) const UPSTREAMS_SCAN_MAX: usize = 16;

/// A fault of a file: the line it is on, when known, and what is wrong.
pub(crate) type Fault = (Option<usize>, String);

/// What the engine that will run a file provides: the pools it has and the
/// tasks registered with it; `None` accepts any.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Known<'a> {
    /// Every pool the engine will have.
    pub pools: Option<&'a BTreeSet<String>>,
    /// Every task registered with it.
    pub tasks: Option<&'a BTreeSet<String>>,
}

pub(super) fn dur(field: &str, v: &Option<String>) -> Result<Option<u64>, String> {
    match v {
        None => Ok(None),
        Some(s) => parse_duration_ms(s)
            .map(Some)
            .map_err(|e| format!("field {field}: {e}")),
    }
}

pub(super) fn field_msg(node: &str, field: &str, what: impl std::fmt::Display) -> String {
    format!("node {node:?}: field {field}: {what}")
}

/// The faults of one template: its syntax, then every reference the
/// graph around it cannot give.
pub(super) fn check_template(text: &str, place: Place, ctx: &Context<'_>) -> Vec<String> {
    match Template::parse(text, place) {
        Err(e) => vec![e.to_string()],
        Ok(t) => t
            .check(ctx)
            .into_iter()
            .map(|f| format!("template {text:?}: {f}"))
            .collect(),
    }
}

/// Parses a duration like `500ms`, `30s`, `5m`, `1h`, `7d`.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    humantime::parse_duration(s)
        .map(|d| d.as_millis() as u64)
        .map_err(|e| format!("duration {s:?}: {e} (write e.g. 500ms, 30s, 5m, 1h, 7d)"))
}
