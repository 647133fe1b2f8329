//! `weir serve PATH`: a long-running engine for the definitions at PATH.
//! It adopts them, runs their triggers (cron, keyed schedules, backfills)
//! until stopped, and serves the API; SIGHUP (or `weir reload`) re-adopts
//! changed definition files. SIGINT/SIGTERM stop it gracefully (exit 0); a
//! second one exits at once. An engine that stops on an error exits 3.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{signal, SignalKind};
use weir_actors::store::Durability;

use super::failure::Failure;
use super::output::{init_logging, LogFormat};
use super::{datadir, host};
use crate::definition;
use crate::ClusterConfig;

/// Arguments of `weir serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// A definition file, or a folder of them.
    pub path: PathBuf,
    /// The data directory (default: $WEIR_DATA_DIR, else `.weir` beside the definitions).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Where the API listens (loopback by default; another address needs --token-file).
    #[arg(long, default_value = host::SERVE_LISTEN_DEFAULT)]
    pub listen: String,
    /// A file holding the API token (default: DATA/token, made at first start).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// fsync (default), flush or none.
    #[arg(long, default_value = "fsync")]
    pub durability: String,
    /// Slots of the `default` pool when the definitions do not size it.
    #[arg(long)]
    pub default_capacity: Option<u32>,
    /// Seconds running attempts get to finish at shutdown.
    #[arg(long, default_value_t = 30)]
    pub grace_secs: u64,
    /// Log format.
    #[arg(long, value_enum, default_value = "plain")]
    pub log_format: LogFormat,
    /// Let worker processes join: the cluster node's address (HOST:PORT;
    /// loopback unless you say otherwise). Needs --cookie-file.
    #[arg(long, value_name = "ADDR")]
    pub cluster: Option<String>,
    /// A file holding the cluster's cookie, a secret every worker shares.
    #[arg(long)]
    pub cookie_file: Option<PathBuf>,
    /// TLS for the API and UI (and cluster sessions): the engine's
    /// certificate chain (PEM).
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS for the API and UI (and cluster sessions): the engine's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback --listen address (tokens then
    /// cross the network in the clear). Refused beside --tls-cert: the two
    /// say opposite things.
    #[arg(long, conflicts_with = "tls_cert")]
    pub insecure_http: bool,
    /// How long the audit log keeps an entry, e.g. 90d (the default) or 1y.
    #[arg(long, default_value = "90d")]
    pub audit_retention: String,
    /// Export each run's trace to this OTLP/HTTP collector, e.g.
    /// http://127.0.0.1:4318 (default: $OTEL_EXPORTER_OTLP_ENDPOINT).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// With --cluster: no pool actors in this process; workers serve every
    /// pool.
    #[arg(long, requires = "cluster")]
    pub no_local_workers: bool,
    /// With --cluster: a worker silent this many ms is lost and its
    /// attempts requeued.
    #[arg(long, requires = "cluster")]
    pub lease_ms: Option<u64>,
    /// A replicated engine: this member's id among --raft-peers.
    #[arg(long, requires = "raft_peers")]
    pub raft_id: Option<u64>,
    /// A replicated engine's members: ID=HOST:PORT of each one's Raft
    /// listener, e.g. 1=127.0.0.1:7501,2=127.0.0.1:7502,3=127.0.0.1:7503.
    /// Needs --cookie-file (the members' shared secret) and a shared
    /// --token-file.
    #[arg(long, requires = "raft_id")]
    pub raft_peers: Option<String>,
    /// A replicated engine's election timeout (ms): a follower that hears
    /// no leader this long (up to 1.5 times it) stands for election; a
    /// leader that hears no majority this long stops its engine.
    #[arg(long, requires = "raft_id", default_value_t = crate::replica::ELECTION_MIN_MS_DEFAULT)]
    pub election_timeout_ms: u64,
    /// Mutual TLS between members: the CA (PEM) that signed every
    /// member's certificate. Members present their certificate
    /// (--peer-cert, else --tls-cert) to each other and accept only peers
    /// whose certificate this CA signed.
    #[arg(long, value_name = "FILE", requires = "raft_id")]
    pub peer_ca: Option<PathBuf>,
    /// With --peer-ca: this member's certificate chain (PEM) between
    /// members, when it is not the API's --tls-cert.
    #[arg(long, value_name = "FILE", requires = "peer_ca", requires = "peer_key")]
    pub peer_cert: Option<PathBuf>,
    /// With --peer-cert: its private key (PEM).
    #[arg(long, value_name = "FILE", requires = "peer_cert")]
    pub peer_key: Option<PathBuf>,
    /// Scheduled backups into this folder or object store URL
    /// (s3://BUCKET/PREFIX, gs://…, az://…; keys from the AWS_*, GOOGLE_*,
    /// AZURE_* variables; see --backup-every): each a file
    /// weir-backup-STAMP-SEQ.wbk that `weir restore` takes. A replicated
    /// member backs up its own store.
    #[arg(long, value_name = "DIR")]
    pub backup_dir: Option<PathBuf>,
    /// With --backup-dir: between two backups, e.g. 6h.
    #[arg(long, requires = "backup_dir", default_value = "6h")]
    pub backup_every: String,
    /// With --backup-dir: backups older than this are removed (the newest
    /// one never), e.g. 7d.
    #[arg(long, requires = "backup_dir", default_value = "7d")]
    pub backup_keep: String,
    /// Let members talk plain HTTP over addresses that are not loopback
    /// (the cookie and every write then cross the network in the clear).
    #[arg(long, requires = "raft_id", conflicts_with = "peer_ca")]
    pub insecure_raft_http: bool,
    /// Where artifacts are kept.
    #[command(flatten)]
    pub artifacts: crate::artifacts::options::ArtifactArgs,
}

/// A lease shorter than this draws a warning: TCP's retransmissions on a
/// lossy network can keep a healthy worker's heartbeats away longer.
const LEASE_ADVISED_MIN_MS: u64 = 5_000;

/// Runs the command.
pub fn run(a: ServeArgs) -> Result<u8, Failure> {
    init_logging(a.log_format, "info");
    let durability: Durability = a.durability.parse().map_err(Failure::input)?;
    let security = api_security(&a)?;
    super::host::listen_addr(&a.listen, a.token_file.as_deref(), &security)?;
    let defs = definition::load(&a.path).map_err(|e| Failure::input(e.to_string()))?;
    let data = datadir::for_definitions(a.data.as_deref(), &defs.root);
    let cluster = cluster_config(&a, &defs.root)?;
    let backups = backup_schedule(&a, &data)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::store(format!("cannot start the runtime: {e}")))?;
    rt.block_on(async move {
        let artifacts = a
            .artifacts
            .open(
                crate::artifacts::options::Default::Folder(&data.join("artifacts")),
                "serve",
            )
            .await?;
        let engine = host::open_engine_with(
            &defs,
            &data,
            durability,
            a.default_capacity,
            cluster,
            None,
            artifacts.clone(),
        )
        .await?;
        let graphs: Vec<String> = defs
            .graphs
            .iter()
            .map(|l| l.graph.name().to_string())
            .collect();
        datadir::record(&data, &graphs);
        host::adopt_all(&engine, &defs).await?;
        let server = host::serve_api(
            engine.clone(),
            &data,
            &a.listen,
            a.token_file.as_deref(),
            Some(host::reloader(a.path.clone())),
            &security,
            artifacts,
        )
        .await?;
        eprintln!(
            "weir: serving {} graph(s) from {}; UI and API at {}/ (token in {}); data in {}",
            defs.graphs.len(),
            a.path.display(),
            server.url(),
            a.token_file
                .clone()
                .unwrap_or_else(|| data.join(crate::serve::discovery::TOKEN_FILE))
                .display(),
            data.display()
        );
        let _backups = backups.map(|s| {
            eprintln!(
                "weir: a backup every {} into {} (kept {})",
                a.backup_every,
                s.place,
                a.backup_keep
            );
            AbortOnDrop(crate::backup::spawn_schedule(engine.store().clone(), s))
        });
        if let Some(addr) = engine.cluster_address() {
            eprintln!(
                "weir: workers join at {addr} (weir worker --join {addr} --cookie-file F --pool NAME=SLOTS)"
            );
        }
        let io = |e: std::io::Error| Failure::store(format!("cannot watch signals: {e}"));
        let mut hup = signal(SignalKind::hangup()).map_err(io)?;
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        let mut int = signal(SignalKind::interrupt()).map_err(io)?;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        let failed = loop {
            tokio::select! {
                _ = hup.recv() => {
                    if let Some(r) = server.reload().await {
                        eprintln!(
                            "weir: reloaded: {} adopted, {} unchanged, {} refused",
                            r.adopted.len(), r.unchanged.len(), r.refused.len()
                        );
                        for e in &r.refused {
                            eprintln!("weir: refused: {e}");
                        }
                    }
                }
                _ = term.recv() => break None,
                _ = int.recv() => break None,
                _ = tick.tick() => {
                    if let Some(e) = engine.error() {
                        break Some(e);
                    }
                }
            }
        };
        if failed.is_none() {
            eprintln!(
                "weir: stopping; running attempts get {}s (again to exit at once)",
                a.grace_secs
            );
            tokio::spawn(async move {
                let (Ok(mut t), Ok(mut i)) = (
                    signal(SignalKind::terminate()),
                    signal(SignalKind::interrupt()),
                ) else {
                    return;
                };
                tokio::select! { _ = t.recv() => {}, _ = i.recv() => {} }
                eprintln!("weir: exiting now");
                std::process::exit(130);
            });
        }
        server.stop().await;
        let engine = host::unwrap_engine(engine).await?;
        let stopped = engine
            .shutdown(Duration::from_secs(a.grace_secs))
            .await
            .map_err(|e| Failure::store(format!("shutdown: {e}")));
        match failed {
            Some(e) => Err(Failure::store(format!("engine stopped: {e}"))),
            None => stopped.map(|()| 0),
        }
    })
}

/// The API's TLS, plain-HTTP consent and audit retention from the flags.
pub(super) fn api_security(a: &ServeArgs) -> Result<host::ApiSettings, Failure> {
    let retention = humantime::parse_duration(&a.audit_retention).map_err(|e| {
        Failure::input(format!(
            "--audit-retention {:?}: {e} (write e.g. 90d)",
            a.audit_retention
        ))
    })?;
    Ok(host::ApiSettings {
        tls: a.tls_cert.clone().zip(a.tls_key.clone()),
        insecure_http: a.insecure_http,
        audit_retention: Some(retention),
        otlp_endpoint: a.otlp_endpoint.clone(),
    })
}

/// The cluster of `weir serve`, from its flags: `--cluster` needs a cookie
/// file; TLS needs both a certificate and a key. Checked before the engine
/// opens.
pub fn cluster_config(
    a: &ServeArgs,
    root: &Path,
) -> Result<Option<(ClusterConfig, bool)>, Failure> {
    let Some(listen) = &a.cluster else {
        if a.cookie_file.is_some() && a.raft_id.is_none() {
            return Err(Failure::input("--cookie-file goes with --cluster ADDR"));
        }
        return Ok(None);
    };
    let addr: SocketAddr = listen.parse().map_err(|e| {
        Failure::input(format!(
            "--cluster {listen:?}: {e} (write e.g. 127.0.0.1:7451)"
        ))
    })?;
    let Some(cookie_file) = &a.cookie_file else {
        return Err(Failure::input(format!(
            "--cluster {addr}: needs --cookie-file F, a secret every worker shares (no cookie, no cluster)"
        )));
    };
    let cookie = weir_actors::cluster::node::read_cookie(cookie_file)
        .map_err(|e| Failure::input(e.to_string()))?;
    let mut config = ClusterConfig::new(addr, cookie);
    if let (Some(cert), Some(key)) = (&a.tls_cert, &a.tls_key) {
        config.tls = Some(
            weir_actors::cluster::node::tls_acceptor(cert, key)
                .map_err(|e| Failure::input(e.to_string()))?,
        );
    }
    if let Some(lease) = a.lease_ms {
        if lease < LEASE_ADVISED_MIN_MS {
            tracing::warn!(
                lease_ms = lease,
                advised_min_ms = LEASE_ADVISED_MIN_MS,
                "--lease-ms {lease} is short: on a lossy network a healthy worker may be declared lost \
                 and its attempts run twice (at 30% loss a 2 s lease did, a 5 s one did not); choose \
                 a lease well above the retransmission delays the network may have"
            );
        }
        config.settings.lease_ms = lease;
        config.settings.heartbeat_ms = (lease / 5).clamp(1, 1_000);
    }
    config.root = Some(
        std::path::absolute(root)
            .unwrap_or_else(|_| root.to_path_buf())
            .display()
            .to_string(),
    );
    Ok(Some((config, a.no_local_workers)))
}

/// The backup schedule of `--backup-dir`, if any.
pub fn backup_schedule(
    a: &ServeArgs,
    data: &std::path::Path,
) -> Result<Option<crate::backup::Schedule>, Failure> {
    let Some(dir) = &a.backup_dir else {
        return Ok(None);
    };
    let text = dir.to_string_lossy();
    let place = if crate::backup::remote::is_url(&text) {
        // Credentials from the store's variables (AWS_*, GOOGLE_*, AZURE_*).
        let objects = crate::objects::Objects::open(&text, None)
            .map_err(|e| Failure::input(format!("--backup-dir: {e}")))?;
        crate::backup::Place::Store {
            objects,
            spool: data.join("backup-spool"),
        }
    } else {
        crate::backup::Place::Folder(dir.clone())
    };
    let every = humantime::parse_duration(&a.backup_every).map_err(|e| {
        Failure::input(format!(
            "--backup-every {:?}: {e} (write e.g. 6h)",
            a.backup_every
        ))
    })?;
    let keep = humantime::parse_duration(&a.backup_keep).map_err(|e| {
        Failure::input(format!(
            "--backup-keep {:?}: {e} (write e.g. 7d)",
            a.backup_keep
        ))
    })?;
    if every < Duration::from_secs(1) {
        return Err(Failure::input(format!(
            "--backup-every {:?}: at least 1s",
            a.backup_every
        )));
    }
    Ok(Some(crate::backup::Schedule { place, every, keep }))
}

/// Aborts a task when dropped (a scheduled backup at shutdown).
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
