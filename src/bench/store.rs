//! `weir bench store` (being written).

use super::BenchError;

/// Runs the scenario.
pub fn run(_quick: bool) -> Result<(), BenchError> {
    Err(BenchError::Failed("not built yet".into()))
}
