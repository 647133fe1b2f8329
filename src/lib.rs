//! weir: a durable workflow and job orchestrator.
pub use weir_core as core;
