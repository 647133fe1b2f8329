//! The JSON Schemas of the API's bodies, derived from the types the
//! handlers serialize: the OpenAPI document's components (see
//! [`super::openapi`]). Apart from the document so that the handlers, which
//! serve the document, are not imported by what they import.

use schemars::generate::{Contract, SchemaSettings};

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
        crate::trace::view::RunTrace,
        crate::ui::code_routes::UiCode,
        h::actions::Cancelled,
        h::actions::ClearedNode,
        h::runs::NodeWithAttempts,
        crate::logs::LogChunk,
        crate::artifacts::routes::RunArtifacts,
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
        h::access::TokenView,
        h::access::TokenMade,
        h::access::Revoked,
        h::access::AuditView,
    );
    g.take_definitions(true)
}
