//! OpenTelemetry traces of graph runs: a span for the run, one per node
//! instance, one per attempt, exported over OTLP when the run settles
//! ([`export`]), with ids every process of the run derives alike
//! ([`ids`]), so a command's own spans join its attempt's through
//! `TRACEPARENT`.

pub mod export;
pub mod ids;
pub mod plan;
pub mod route;
pub mod view;
