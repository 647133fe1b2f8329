//! What every handler sees ([`AppState`]: the engine, the token, the event
//! hub, metrics, the reloader, the artifact store) and the request limits
//! they share; the handlers, the route table and the UI import it, so none
//! of them imports the server's wiring.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use super::events::EventHub;
use super::metrics;
use crate::Engine;

/// Request bodies larger than this are refused with 413.
pub const BODY_BYTES_MAX: usize = 64 * 1024;

/// What a reload did: graphs adopted, unchanged, refused.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ReloadReport {
    /// Graphs whose definition changed: (graph, new hash).
    pub adopted: Vec<(String, String)>,
    /// Graphs whose definition is the same.
    pub unchanged: Vec<String>,
    /// Files or graphs refused, with the error; their old definition stays.
    pub refused: Vec<String>,
}

/// Re-reads the definitions and adopts what changed.
pub type Reloader =
    Arc<dyn Fn(Arc<Engine>) -> Pin<Box<dyn Future<Output = ReloadReport> + Send>> + Send + Sync>;

/// What every handler sees.
#[derive(Clone)]
pub struct AppState {
    pub(crate) engine: Arc<Engine>,
    pub(crate) token: Arc<str>,
    pub(crate) hub: EventHub,
    pub(crate) data_dir: Arc<PathBuf>,
    pub(crate) reloader: Option<Reloader>,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) started_at_ms: u64,
    /// Cancelled at stop: ends the open event and log streams, so the
    /// graceful shutdown does not wait on them.
    pub(crate) stop: tokio_util::sync::CancellationToken,
    /// Roles of routes, the audit log's settings, TLS.
    pub(crate) access: super::access::settings::Access,
    /// Where the engine's artifacts are kept, for the routes that list and
    /// stream them; `None` when the server was started without one (an
    /// embedded server, the fuzz target): those routes then answer 503.
    pub(crate) artifacts: Option<crate::artifacts::Shared>,
}
