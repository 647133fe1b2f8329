//! Read views over the store: a graph run with its nodes and members, the
//! runs of a graph, the assets and their lineage. Readable with no engine
//! running (the CLI reads them from a stopped engine's store); the actors
//! and the API answer with them.

pub mod asset;
pub mod past;
pub mod run;
