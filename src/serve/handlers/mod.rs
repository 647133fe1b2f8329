//! The API's routes, one file per resource. Each handler checks its input
//! (a 400 names the field), calls the engine or reads the store, and
//! answers JSON.

pub(crate) mod access;
pub(crate) mod actions;
pub(crate) mod extract;
mod graphs;
mod keys;
pub(crate) mod queue;
pub(crate) mod runs;
pub use runs::{NodeLive, RunWithLive};
mod stream;
pub(crate) mod system;

pub(crate) use system::{healthz, readyz};

use super::access::Role;
use super::routes::Routes;

/// Every route under `/api/v1` (and `/metrics`), all behind the token,
/// each with the role it needs: reads are a viewer's, actions on work an
/// operator's, changes to the engine (reload, breakers, tokens, the audit
/// log) an admin's.
pub fn routes() -> Routes {
    Routes::new()
        .get("/metrics", system::metrics)
        .get("/api/v1/openapi.json", system::openapi)
        .get("/api/v1/engine", system::engine)
        .post(Role::Admin, "/api/v1/reload", system::reload)
        .get("/api/v1/events", stream::events)
        .get("/api/v1/graphs", graphs::list)
        .get("/api/v1/graphs/{graph}", graphs::one)
        .get("/api/v1/graphs/{graph}/grid", graphs::grid)
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/runs",
            actions::start,
        )
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/backfills",
            actions::backfill,
        )
        .get("/api/v1/graphs/{graph}/backfills", actions::backfills)
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/pause",
            actions::pause,
        )
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/unpause",
            actions::unpause,
        )
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/trigger",
            actions::trigger,
        )
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/reconcile",
            actions::reconcile,
        )
        .get("/api/v1/graphs/{graph}/keys", keys::list)
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/keys/{key}/signal",
            keys::signal,
        )
        .get("/api/v1/runs", runs::list)
        .get("/api/v1/graphs/{graph}/runs/{partition}", runs::one)
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/runs/{partition}/cancel",
            actions::cancel,
        )
        .post(
            Role::Operator,
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
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/trace",
            crate::trace::route::trace,
        )
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/artifacts",
            crate::artifacts::routes::list,
        )
        .get(
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/artifacts/{*name}",
            crate::artifacts::routes::download,
        )
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/rerun",
            actions::rerun,
        )
        .post(
            Role::Operator,
            "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/mark",
            actions::mark,
        )
        .get("/api/v1/queue/pools", queue::pools)
        .get("/api/v1/queue/tickets", queue::tickets)
        .get("/api/v1/queue/tickets/{key}", queue::ticket)
        .get("/api/v1/queue/dead", queue::dead)
        .post(
            Role::Operator,
            "/api/v1/queue/dead/requeue",
            queue::requeue_all,
        )
        .post(
            Role::Operator,
            "/api/v1/queue/dead/{key}/requeue",
            queue::requeue,
        )
        .get("/api/v1/breakers", queue::breakers)
        .get("/api/v1/workers", queue::workers)
        .get("/api/v1/assets", graphs::assets)
        .get_as(Role::Admin, "/api/v1/tokens", access::list)
        .post(Role::Admin, "/api/v1/tokens", access::create)
        .post(Role::Admin, "/api/v1/tokens/{name}/revoke", access::revoke)
        .get_as(Role::Admin, "/api/v1/audit", access::audit)
        .post(
            Role::Viewer,
            "/api/v1/ui-codes",
            crate::ui::code_routes::issue,
        )
        .get_as(Role::Admin, "/api/v1/backup", system::backup)
        .post(
            Role::Admin,
            "/api/v1/breakers/{target}/reset",
            queue::reset_breaker,
        )
}
