//! The API's routes, one file per resource. Each handler checks its input
//! (a 400 names the field), calls the engine or reads the store, and
//! answers JSON.

pub(crate) mod actions;
mod extract;
mod graphs;
mod keys;
pub(crate) mod queue;
pub(crate) mod runs;
pub use runs::{NodeLive, RunWithLive};
mod stream;
pub(crate) mod system;

pub(crate) use system::healthz;

use super::routes::Routes;

/// Every route under `/api/v1` (and `/metrics`), all behind the token.
pub fn routes() -> Routes {
    Routes::new()
        .get("/metrics", system::metrics)
        .get("/api/v1/openapi.json", system::openapi)
        .get("/api/v1/engine", system::engine)
        .post("/api/v1/reload", system::reload)
        .get("/api/v1/events", stream::events)
        .get("/api/v1/graphs", graphs::list)
        .get("/api/v1/graphs/{graph}", graphs::one)
        .get("/api/v1/graphs/{graph}/grid", graphs::grid)
        .post("/api/v1/graphs/{graph}/runs", actions::start)
        .post("/api/v1/graphs/{graph}/backfills", actions::backfill)
        .get("/api/v1/graphs/{graph}/backfills", actions::backfills)
        .post("/api/v1/graphs/{graph}/pause", actions::pause)
        .post("/api/v1/graphs/{graph}/unpause", actions::unpause)
        .post("/api/v1/graphs/{graph}/trigger", actions::trigger)
        .post("/api/v1/graphs/{graph}/reconcile", actions::reconcile)
        .get("/api/v1/graphs/{graph}/keys", keys::list)
        .post("/api/v1/graphs/{graph}/keys/{key}/signal", keys::signal)
        .get("/api/v1/runs", runs::list)
        .get("/api/v1/graphs/{graph}/runs/{partition}", runs::one)
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/cancel",
            actions::cancel,
        )
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/clear",
            actions::clear,
        )
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}",
            runs::node,
        )
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/logs",
            runs::logs,
        )
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/rerun",
            actions::rerun,
        )
        .post(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/mark",
            actions::mark,
        )
        .get("/api/v1/queue/pools", queue::pools)
        .get("/api/v1/queue/tickets", queue::tickets)
        .get("/api/v1/queue/tickets/{key}", queue::ticket)
        .get("/api/v1/queue/dead", queue::dead)
        .post("/api/v1/queue/dead/requeue", queue::requeue_all)
        .post("/api/v1/queue/dead/{key}/requeue", queue::requeue)
        .get("/api/v1/breakers", queue::breakers)
        .get("/api/v1/workers", queue::workers)
        .get("/api/v1/assets", graphs::assets)
        .post("/api/v1/breakers/{target}/reset", queue::reset_breaker)
}
