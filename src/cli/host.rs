//! Hosting an engine for definition files: what `weir run` and `weir serve`
//! share. Opens the engine on the data directory with the definitions'
//! pools and targets and the command task, adopts the definitions, serves
//! the API (with the definitions' reloader), and maps SIGHUP to a reload.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use weir_actors::store::{Durability, StoreSettings};

use super::failure::Failure;
use crate::definition::{self, Definitions};
use crate::serve::{self, ReloadReport, Reloader, ServeOptions, Server};
use crate::task::command::{CommandTask, COMMAND_TASK};
use crate::{ClusterConfig, Engine, EngineError};

/// Where `weir serve` listens by default.
pub const SERVE_LISTEN_DEFAULT: &str = "127.0.0.1:7450";
/// Where `weir run` listens by default: any free loopback port.
pub const RUN_LISTEN_DEFAULT: &str = "127.0.0.1:0";

/// Opens the engine for `defs` on `data`.
pub async fn open_engine(
    defs: &Definitions,
    data: &Path,
    durability: Durability,
    default_capacity: Option<u32>,
    artifacts: crate::artifacts::Shared,
) -> Result<Arc<Engine>, Failure> {
    open_engine_with(
        defs,
        data,
        durability,
        default_capacity,
        None,
        None,
        artifacts,
    )
    .await
}

/// Opens the engine for `defs` on `data`, with a cluster when asked (and
/// then, with `no_local`, no pool actors of its own).
pub async fn open_engine_with(
    defs: &Definitions,
    data: &Path,
    durability: Durability,
    default_capacity: Option<u32>,
    cluster: Option<(ClusterConfig, bool)>,
    opened: Option<weir_actors::store::Store>,
    artifacts: crate::artifacts::Shared,
) -> Result<Arc<Engine>, Failure> {
    let default_capacity = default_capacity.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map_or(4, |n| n.get() as u32 * 2)
            .max(4)
    });
    // WEIR_DISK_RESERVE_BYTES and friends size the disk reserve (a small
    // filesystem, the disk-full test).
    let store_settings = StoreSettings {
        durability,
        ..StoreSettings::default()
    }
    .with_env_overrides()
    .map_err(Failure::input)?;
    // Triggers wait for adopt_all: a definition file changed while the
    // engine was stopped is adopted before anything fires (faults #8).
    let mut builder = Engine::builder(data)
        .store_settings(store_settings)
        .hold_triggers();
    if let Some(store) = opened {
        builder = builder.opened_store(store);
    }
    let local_workers = match &cluster {
        Some((_, true)) => 0,
        _ => 1,
    };
    if !defs.pools.contains_key("default") {
        builder = builder.pool_workers("default", default_capacity, local_workers);
    }
    for (p, c) in &defs.pools {
        builder = builder.pool_workers(p, *c, local_workers);
    }
    let work = std::path::absolute(data)
        .unwrap_or_else(|_| data.to_path_buf())
        .join("work");
    if let Some((mut config, _)) = cluster {
        config.work_dir = Some(work.display().to_string());
        config.artifacts_dir = artifacts
            .store()
            .and_then(|o| o.local_folder().map(|p| p.display().to_string()));
        builder = builder.cluster(config);
    }
    for (t, s) in &defs.targets {
        builder = builder.target(t, s.clone());
    }
    let scratch = data.join("scratch");
    builder = builder.task(
        COMMAND_TASK,
        Arc::new(CommandTask {
            scratch,
            work,
            logs: Some(crate::logs::LogPaths::new(data)),
            log_limits: Default::default(),
            remote: None,
            artifacts: artifacts.clone(),
        }),
    );
    let http = crate::task::http::HttpTask::new()
        .map_err(Failure::store)?
        .with_logs(crate::logs::LogPaths::new(data));
    builder = builder.task(crate::task::http::HTTP_TASK, Arc::new(http));
    let sensor = crate::task::sensor::SensorTask::new().map_err(Failure::store)?;
    builder = builder.task(crate::task::sensor::SENSOR_TASK, Arc::new(sensor));
    builder = builder.task(
        crate::task::notify::NOTIFY_TASK,
        Arc::new(crate::task::notify::NotifyTask),
    );
    let engine = builder.open().await.map_err(|e| match e {
        EngineError::Settings(s) => Failure::input(s),
        other => Failure::store(other.to_string()),
    })?;
    let engine = Arc::new(engine);
    crate::artifacts::collect::spawn(&engine, artifacts);
    Ok(engine)
}

/// Adopts every graph of `defs`, then starts the triggers held at open
/// (those of stored graphs no file names); the first refusal is the error.
pub async fn adopt_all(engine: &Engine, defs: &Definitions) -> Result<(), Failure> {
    for loaded in &defs.graphs {
        engine
            .adopt(loaded.graph.def().clone())
            .await
            .map_err(|e| match e {
                // The store refused the adopt's write (a full disk, a
                // failed write): not the definition's fault.
                EngineError::Store(_) | EngineError::Stopped(_) => Failure::store(e.to_string()),
                other => Failure::input(format!("definition {}: {other}", loaded.file.display())),
            })?;
    }
    engine
        .start_triggers()
        .await
        .map_err(|e| Failure::store(e.to_string()))?;
    Ok(())
}

/// The definition files of `path`: itself, or a folder's `*.toml`.
fn files(path: &Path) -> Result<Vec<PathBuf>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("{}: {e}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    Ok(files)
}

/// Re-reads the definitions at `path` file by file and adopts each graph
/// whose content changed; a file that does not load or adopt is refused
/// with its error and its graph keeps its old definition.
pub async fn reload(engine: &Engine, path: &Path) -> ReloadReport {
    let mut report = ReloadReport::default();
    let files = match files(path) {
        Ok(f) => f,
        Err(e) => {
            report.refused.push(e);
            return report;
        }
    };
    for f in files {
        let graph = match definition::load_file(&f) {
            Ok((graph, _, _)) => graph,
            Err(e) => {
                report.refused.push(e.to_string());
                continue;
            }
        };
        let name = graph.name().to_string();
        match engine.adopt(graph.def().clone()).await {
            Ok(o) if o.changed => report.adopted.push((o.graph, o.hash)),
            Ok(_) => report.unchanged.push(name),
            Err(e) => report
                .refused
                .push(format!("definition {}: {e}", f.display())),
        }
    }
    tracing::info!(
        adopted = report.adopted.len(),
        unchanged = report.unchanged.len(),
        refused = report.refused.len(),
        "definitions reloaded"
    );
    for r in &report.refused {
        tracing::warn!(error = %r, "definition refused at reload; the graph keeps its old definition");
    }
    report
}

/// A reloader of `path`.
pub fn reloader(path: PathBuf) -> Reloader {
    Arc::new(move |engine: Arc<Engine>| {
        let path = path.clone();
        Box::pin(async move { reload(&engine, &path).await })
    })
}

/// How the API is served beyond its address and token: TLS, plain-HTTP
/// consent, the audit log's retention, where traces go.
#[derive(Debug, Clone, Default)]
pub struct ApiSettings {
    /// TLS: the certificate chain and the private key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Plain HTTP on a non-loopback address, asked for on purpose.
    pub insecure_http: bool,
    /// How long audit entries are kept (default 90 days).
    pub audit_retention: Option<std::time::Duration>,
    /// The OTLP/HTTP collector run traces go to, if any.
    pub otlp_endpoint: Option<String>,
}

/// The address to listen on. A non-loopback one needs a token file given
/// on purpose, and TLS or `--insecure-http`: tokens sent in the clear over
/// a network are tokens given away. Checked before the engine opens, so a
/// refusal costs nothing.
pub fn listen_addr(
    listen: &str,
    token_file: Option<&Path>,
    security: &ApiSettings,
) -> Result<SocketAddr, Failure> {
    let addr: SocketAddr = listen.parse().map_err(|e| {
        Failure::input(format!(
            "--listen {listen:?}: {e} (write e.g. 127.0.0.1:7450)"
        ))
    })?;
    if !serve::is_loopback(&addr) && token_file.is_none() {
        return Err(Failure::input(format!(
            "--listen {addr}: a non-loopback address needs --token-file F (a token you chose and keep secret)"
        )));
    }
    if !serve::is_loopback(&addr) && security.tls.is_none() && !security.insecure_http {
        return Err(Failure::input(format!(
            "--listen {addr}: a non-loopback address needs TLS (--tls-cert F --tls-key F), or --insecure-http to send tokens in the clear on purpose"
        )));
    }
    Ok(addr)
}

/// Starts the API for `engine`: the token from `token_file` or
/// `DATA/token` (made if absent). A non-loopback address needs a token
/// file given on purpose, and TLS or `--insecure-http`. The artifact
/// routes stream from `artifacts`, the store the engine's nodes write to.
pub async fn serve_api(
    engine: Arc<Engine>,
    data: &Path,
    listen: &str,
    token_file: Option<&Path>,
    reloader: Option<Reloader>,
    security: &ApiSettings,
    artifacts: crate::artifacts::Shared,
) -> Result<Server, Failure> {
    let listen = listen_addr(listen, token_file, security)?;
    let token = match token_file {
        Some(f) => serve::discovery::read_token_file(f).map_err(Failure::input)?,
        None => serve::discovery::ensure_token(data).map_err(Failure::store)?,
    };
    let tls = match &security.tls {
        None => None,
        Some((cert, key)) => Some(
            weir_actors::cluster::node::tls_acceptor(cert, key)
                .map_err(|e| Failure::input(format!("--tls-cert/--tls-key: {e}")))?,
        ),
    };
    let token_path = token_file.map_or_else(
        || data.join(serve::discovery::TOKEN_FILE),
        Path::to_path_buf,
    );
    let opts = ServeOptions {
        listen,
        token,
        token_file: Some(std::path::absolute(&token_path).unwrap_or(token_path)),
        data_dir: data.to_path_buf(),
        reloader,
        tls,
        audit_retention: security
            .audit_retention
            .unwrap_or(serve::access::audit::AUDIT_RETENTION_DEFAULT),
        otlp_endpoint: security.otlp_endpoint.clone().or_else(|| {
            std::env::var(crate::trace::export::ENV_OTLP_ENDPOINT)
                .ok()
                .filter(|e| !e.is_empty())
        }),
    };
    serve::start_with_artifacts(engine, opts, Some(artifacts))
        .await
        .map_err(|e| match e {
            serve::ServeError::Refused(m) => Failure::input(m),
            serve::ServeError::Bind { .. } => {
                Failure::input(format!("{e} (pick another with --listen)"))
            }
            other => Failure::store(other.to_string()),
        })
}

/// Takes the engine back from the API's handlers once they let go of it
/// (they do when the server stops; a straggling request gets a moment).
pub async fn unwrap_engine(mut engine: Arc<Engine>) -> Result<Engine, Failure> {
    let deadline = tokio::time::Instant::now() + serve::STOP_GRACE;
    loop {
        match Arc::try_unwrap(engine) {
            Ok(e) => return Ok(e),
            Err(back) if tokio::time::Instant::now() < deadline => {
                engine = back;
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            Err(_) => {
                return Err(Failure::store(
                    "the engine is still in use by the API at shutdown; everything acknowledged is durable",
                ))
            }
        }
    }
}
