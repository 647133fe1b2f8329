//! The engine's control plane: a JSON API under `/api/v1/` (axum on tokio),
//! the event stream as Server-Sent Events, Prometheus metrics at `/metrics`
//! and `/healthz`.
//!
//! The HTTP layer is thin: each route checks its input, calls the
//! [`Engine`] facade (which sends the actors their messages) or reads the
//! store, and answers JSON. It holds no state of its own beyond the event
//! ring and the metrics registry. Every route but `/healthz` needs a
//! token, and the role its route names ([`access`]); every request that
//! may change something is in the audit log. The listener binds loopback
//! unless told otherwise; a non-loopback address needs a token file given
//! on purpose, and TLS or `--insecure-http` ([`listen`]). Connections are
//! served with a header-read timeout and limits on a request's head
//! ([`connections`]); a replicated member's front states the real client
//! of a request it passes on, which only it can ([`client`]).
//!
//! `weir serve` and `weir run` start it with [`start`]; it writes
//! `DATA/engine.json` once it listens so the CLI can find it, and removes
//! it at [`Server::stop`].

pub mod access;
pub mod client;
pub mod connections;
pub mod discovery;
pub mod error;
pub mod events;
pub mod grid;
pub(crate) mod handlers;
pub mod listen;
pub use handlers::{NodeLive, RunWithLive};
pub mod metrics;
pub mod openapi;
mod parse_errors;
mod routes;
pub mod schemas;
pub(crate) mod state;
pub mod views;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use tokio::sync::oneshot;

use crate::Engine;
use discovery::EngineInfo;
use error::ApiError;
use events::EventHub;
pub use state::{AppState, ReloadReport, Reloader, BODY_BYTES_MAX};

/// How long a stop waits for open requests (event streams are cut).
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How to serve.
#[derive(Clone)]
pub struct ServeOptions {
    /// Where to listen (port 0: any free port).
    pub listen: SocketAddr,
    /// The bearer token every route but /healthz needs.
    pub token: String,
    /// The data directory (for engine.json and logs).
    pub data_dir: PathBuf,
    /// The definitions' reloader, if the engine has definition files.
    pub reloader: Option<Reloader>,
    /// TLS, if the API is served over it.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// How long audit entries are kept.
    pub audit_retention: Duration,
    /// The file the admin's token was read from (the login page names it
    /// to a browser on this machine).
    pub token_file: Option<PathBuf>,
    /// The OTLP/HTTP collector run traces are sent to, if any.
    pub otlp_endpoint: Option<String>,
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    data_dir: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    cancel: tokio_util::sync::CancellationToken,
    join: tokio::task::JoinHandle<()>,
    pump: tokio::task::JoinHandle<()>,
    reloader: Option<Reloader>,
    engine: Arc<Engine>,
    tls: bool,
    trace: Option<tokio::task::JoinHandle<()>>,
}

/// A failure to start serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The engine file cannot be written.
    #[error("cannot write {path}: {source}")]
    EngineFile {
        /// Its path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A non-loopback address without a token file given on purpose.
    #[error("{0}")]
    Refused(String),
}

/// The router with every route.
pub fn router(state: AppState) -> axum::Router {
    let (api, _) = handlers::routes().finish();
    let protected = api
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            access::authorize,
        ))
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX));
    let open = axum::Router::new()
        .route("/healthz", axum::routing::get(handlers::healthz))
        .route("/readyz", axum::routing::get(handlers::readyz))
        .merge(crate::ui::routes());
    open.merge(protected)
        // An unknown route or a wrong method answers the documented error
        // body, not an empty one.
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        // Outermost: the client a member's front vouches for replaces the
        // front's own address before any route reads it.
        .layer(axum::middleware::from_fn(client::real_client))
        // Outside everything: every error in the one shape.
        .layer(axum::middleware::from_fn(error::in_one_shape))
        .with_state(state)
}

/// The access settings over every route under the token.
fn access_of(tls: bool, audit_retention: Duration) -> access::Access {
    let (_, listed) = handlers::routes().finish();
    access::Access {
        tls,
        audit_retention,
        ..access::Access::new(&listed)
    }
}

/// No route takes the request: 404, audited as a refusal when it would
/// have changed something and names a caller ([`access::unrouted`]).
async fn no_route(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
) -> axum::response::Response {
    let e = ApiError::not_found(format!("no route {}", req.uri().path()));
    access::unrouted(state, req, e).await
}

/// The route does not take the method: 405, audited as [`no_route`] is.
async fn wrong_method(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
) -> axum::response::Response {
    let e = ApiError::method_not_allowed(format!(
        "{} does not take {}",
        req.uri().path(),
        req.method()
    ));
    access::unrouted(state, req, e).await
}

/// The router over `engine` without a listener, for in-process callers
/// (the API fuzz target and the test replaying its corpus): the routes,
/// token check and body limit [`start`] serves, with no event pump (the
/// event stream answers, empty) and no reloader.
#[doc(hidden)]
pub fn app(engine: Arc<Engine>, token: &str, data_dir: PathBuf) -> axum::Router {
    let started_at_ms = engine.now_ms();
    let state = AppState {
        engine,
        token: Arc::from(token),
        hub: EventHub::new(started_at_ms),
        data_dir: Arc::new(data_dir),
        reloader: None,
        metrics: metrics::Metrics::install(),
        started_at_ms,
        stop: tokio_util::sync::CancellationToken::new(),
        access: access_of(false, access::audit::AUDIT_RETENTION_DEFAULT),
        artifacts: None,
    };
    router(state)
}

/// Every (method, path) the server answers, as the router is built.
pub fn routes_served() -> Vec<(&'static str, &'static str)> {
    let mut listed: Vec<_> = routes_with_roles()
        .into_iter()
        .map(|(m, p, _)| (m, p))
        .collect();
    listed.push(("get", "/healthz"));
    listed.push(("get", "/readyz"));
    listed.sort();
    listed
}

/// Every route under the token with the role it needs.
pub fn routes_with_roles() -> Vec<routes::RouteSpec> {
    let (_, mut listed) = handlers::routes().finish();
    listed.sort();
    listed
}

/// Starts serving `engine`: binds, writes `engine.json`, and serves until
/// [`Server::stop`]. Its artifact routes answer 503: see
/// [`start_with_artifacts`].
pub async fn start(engine: Arc<Engine>, opts: ServeOptions) -> Result<Server, ServeError> {
    start_with_artifacts(engine, opts, None).await
}

/// [`start`], with the store the engine keeps its artifacts in, which the
/// artifact routes list and stream from (apart from [`ServeOptions`], whose
/// callers name every field: a server without artifacts stays one call).
pub async fn start_with_artifacts(
    engine: Arc<Engine>,
    opts: ServeOptions,
    artifacts: Option<crate::artifacts::Shared>,
) -> Result<Server, ServeError> {
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: opts.listen,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind {
        addr: opts.listen,
        source,
    })?;
    let started_at_ms = engine.now_ms();
    // Checked before anything listens: a wrong endpoint is the caller's
    // mistake, not a silent loss of traces.
    let cancel = tokio_util::sync::CancellationToken::new();
    let trace = match &opts.otlp_endpoint {
        None => None,
        Some(endpoint) => Some(
            crate::trace::export::spawn(
                engine.clone(),
                opts.data_dir.clone(),
                endpoint,
                cancel.clone(),
            )
            .map_err(|e| ServeError::Refused(e.to_string()))?,
        ),
    };
    let hub = EventHub::new(started_at_ms);
    let metrics = metrics::Metrics::install();
    let pump = {
        let rx = engine.subscribe();
        let hub = hub.clone();
        let m = metrics.clone();
        let engine = engine.clone();
        let mut rx2 = engine.subscribe();
        let h = hub.pump(rx);
        tokio::spawn(async move {
            let mut watcher = metrics::EventMetrics::default();
            loop {
                match rx2.recv().await {
                    Ok(e) => watcher.see(&m, &engine, &e),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => break,
                }
            }
            h.abort();
        })
    };
    let state = AppState {
        engine: engine.clone(),
        token: Arc::from(opts.token.as_str()),
        hub,
        data_dir: Arc::new(opts.data_dir.clone()),
        reloader: opts.reloader.clone(),
        metrics,
        started_at_ms,
        stop: cancel.clone(),
        access: access::Access {
            token_file: opts.token_file.clone().map(Arc::new),
            ..access_of(opts.tls.is_some(), opts.audit_retention)
        },
        artifacts,
    };
    let app = router(state);
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let stopped = async {
        let _ = stop_rx.await;
    };
    let scheme = if opts.tls.is_some() { "https" } else { "http" };
    let join = match opts.tls.clone() {
        None => tokio::spawn(connections::serve(listener, app, stopped)),
        Some(acceptor) => {
            let listener = listen::TlsListener::new(listener, acceptor).map_err(|source| {
                ServeError::Bind {
                    addr: opts.listen,
                    source,
                }
            })?;
            tokio::spawn(connections::serve(listener, app, stopped))
        }
    };
    let info = EngineInfo {
        url: format!("{scheme}://{addr}"),
        pid: std::process::id(),
        started_at_ms,
        data_dir: std::path::absolute(&opts.data_dir).unwrap_or(opts.data_dir.clone()),
        version: env!("CARGO_PKG_VERSION").to_string(),
        members: vec![],
    };
    discovery::write_engine_file(&opts.data_dir, &info).map_err(|source| {
        ServeError::EngineFile {
            path: opts.data_dir.join(discovery::ENGINE_FILE),
            source,
        }
    })?;
    tracing::info!(url = %info.url, "api listening");
    Ok(Server {
        addr,
        data_dir: opts.data_dir,
        stop: Some(stop_tx),
        cancel,
        join,
        pump,
        reloader: opts.reloader,
        engine,
        tls: opts.tls.is_some(),
        trace,
    })
}

impl Server {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The API's base URL.
    pub fn url(&self) -> String {
        format!(
            "{}://{}",
            if self.tls { "https" } else { "http" },
            self.addr
        )
    }

    /// Reloads the definitions (SIGHUP), if it has a reloader.
    pub async fn reload(&self) -> Option<ReloadReport> {
        let r = self.reloader.as_ref()?;
        Some(r(self.engine.clone()).await)
    }

    /// Stops serving: removes `engine.json`, ends open requests within
    /// [`STOP_GRACE`], and lets go of the engine.
    pub async fn stop(mut self) {
        discovery::remove_engine_file(&self.data_dir);
        self.cancel.cancel();
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if tokio::time::timeout(STOP_GRACE, &mut self.join)
            .await
            .is_err()
        {
            self.join.abort();
            let _ = (&mut self.join).await;
        }
        self.pump.abort();
        let _ = (&mut self.pump).await;
        // The exporter sends what settled before the stop (it drains on
        // the cancel above), within its export timeout.
        if let Some(mut t) = self.trace.take() {
            let grace = crate::trace::export::EXPORT_TIMEOUT + Duration::from_secs(1);
            if tokio::time::timeout(grace, &mut t).await.is_err() {
                t.abort();
                let _ = t.await;
            }
        }
    }
}

/// Whether `addr` is a loopback address.
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().is_loopback()
}
