//! Measurements the actors report through the `metrics` facade. Without a
//! recorder installed (an engine embedded with no `/metrics`), each call is
//! a load of an atomic and nothing else.

use std::time::Duration;

/// A commit batch of `ops` journal ops became durable in `elapsed`.
pub fn commit(ops: usize, elapsed: Duration) {
    tracing::trace!(
        ops,
        elapsed_us = elapsed.as_micros() as u64,
        "batch committed"
    );
    metrics::histogram!("weir_commit_batch_ops").record(ops as f64);
    metrics::histogram!("weir_commit_flush_seconds").record(elapsed.as_secs_f64());
}
