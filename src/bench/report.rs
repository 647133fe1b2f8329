//! What every scenario shares: its error, the scenario names, and the
//! `RESULT scenario=NAME key=value …` line it ends with.

use std::fmt::Write as _;

use crate::exit::{EXIT_BAD_INPUT, EXIT_STORE};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// No scenario of that name.
    #[error("unknown scenario {0:?}; known: {known}", known = SCENARIOS.join(", "))]
    Unknown(String),
    /// The scenario failed.
    #[error("{0}")]
    Failed(String),
}

impl BenchError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            BenchError::Unknown(_) => EXIT_BAD_INPUT,
            BenchError::Failed(_) => EXIT_STORE,
        }
    }
}

/// The scenarios, by name.
pub const SCENARIOS: &[&str] = &[
    "core",
    "store",
    "drain",
    "chain",
    "fanout",
    "latency",
    "sweep",
    "recovery",
    "crash",
    "keys",
    "validate",
    "api",
    "cluster",
    "growth",
    "mapped",
    "torture",
    "soak",
    "failover",
    "backup",
    "artifacts",
    "client",
    "simulate",
    "replicated",
    "ceiling",
    "perf",
];

/// The value at fraction `p` (0..=1) of `sorted`, by the index
/// `(len - 1) * p` rounded; 0 when empty. `keys` and its tokio floor both
/// take their percentiles here, so the two figures compare.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// A `RESULT` line from key-value pairs.
pub fn result_line(scenario: &str, pairs: &[(&str, String)]) -> String {
    let mut line = format!("RESULT scenario={scenario}");
    for (k, v) in pairs {
        let _ = write!(line, " {k}={v}");
    }
    line
}
