//! weir: a durable workflow and job orchestrator, built as a tree of ractor
//! actors over an embedded sled journal.
//!
//! `weir-core` decides, `weir-actors` journals and applies, and this crate
//! assembles them: the command line and its benchmarks.

pub use weir_core as core;

pub mod bench;
pub mod cli;
