//! The OpenAPI document, served at `/api/v1/openapi.json`. A test compares
//! its paths and methods with the routes the router serves, both ways;
//! another, its component schemas with those derived from the body types
//! ([`components`]); a third validates real responses of every route
//! against it.
//!
//! The document is written by hand but for its component schemas, which
//! `WEIR_WRITE_OPENAPI=1 cargo test --test serve_api openapi` rewrites from
//! the types (the test fails while they differ).

use schemars::generate::{Contract, SchemaSettings};

/// The document.
pub const DOCUMENT: &str = include_str!("openapi.json");

/// Its (method, path) pairs, lower-case methods.
pub fn operations() -> Vec<(String, String)> {
    let doc: serde_json::Value = serde_json::from_str(DOCUMENT).expect("the document is JSON");
    let mut out = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) {
        for (path, ops) in paths {
            if let Some(ops) = ops.as_object() {
                for method in ops.keys() {
                    out.push((method.clone(), path.clone()));
                }
            }
        }
    }
    out.sort();
    out
}

/// The JSON Schemas (2020-12, as OpenAPI 3.1 takes them) of every body
/// the API answers with, and of what they hold, by component name: as the
/// types serialize.
pub fn components() -> serde_json::Map<String, serde_json::Value> {
    let mut g = SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
            s.contract = Contract::Serialize;
        })
        .into_generator();
    macro_rules! bodies {
        ($($t:ty),* $(,)?) => { $( g.subschema_for::<$t>(); )* };
    }
    use super::handlers as h;
    bodies!(
        h::system::EngineFacts,
        super::ReloadReport,
        super::views::GraphSummary,
        super::views::GraphDetail,
        super::grid::Grid,
        crate::StartOutcome,
        crate::Backfill,
        crate::TriggerStatus,
        h::actions::Paused,
        crate::TriggerNowOutcome,
        crate::ReconcileReport,
        crate::KeyScheduleView,
        super::views::RunPage,
        h::runs::RunWithLive,
        h::actions::Cancelled,
        h::actions::ClearedNode,
        h::runs::NodeWithAttempts,
        crate::logs::LogChunk,
        h::actions::RerunAnswer,
        crate::MarkOutcome,
        weir_actors::queue::QueueStatus,
        weir_actors::queue::LiveTicket,
        weir_actors::queue::TicketView,
        crate::DeadLetterPage,
        h::queue::Requeued,
        crate::RequeueOutcome,
        crate::BreakerView,
        crate::WorkerView,
        crate::AssetView,
    );
    g.take_definitions(true)
}
