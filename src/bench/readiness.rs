//! The cost of one terminal event in a large graph run (filled in with the
//! readiness tracker).

use super::BenchError;

/// Mean microseconds per terminal event on a graph of `nodes` nodes.
pub fn event_cost_us(_nodes: usize) -> Result<f64, BenchError> {
    Err(BenchError::Failed("readiness bench not built yet".into()))
}
