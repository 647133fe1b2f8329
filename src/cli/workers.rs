//! `weir worker`: a worker process that joins an engine's cluster and adds
//! its slots to the engine's pools; `weir workers`: the engine's list of
//! them.
//!
//! `weir worker` runs until SIGTERM or SIGINT, then drains: it takes no new
//! tickets, lets running attempts end (at most `--drain-secs`; what still
//! runs then is cancelled and requeued by the engine), leaves, and exits 0.
//! A second signal exits at once. Refused by the engine (another protocol
//! version, a pool it lacks, a wrong cookie): exit 2 with the reason.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use serde_json::Value;
use tokio::signal::unix::{signal, SignalKind};

use super::client::Conn;
use super::control::{call, get, s};
use super::{init_logging, out, table, Failure, LogFormat};
use crate::worker::{Worker, WorkerError};

/// Arguments of `weir worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The engine's cluster address (its `weir serve --cluster`).
    #[arg(long)]
    pub join: String,
    /// A file holding the cluster's cookie (the engine's --cookie-file).
    #[arg(long)]
    pub cookie_file: PathBuf,
    /// A pool to serve and its slots, NAME=SLOTS; repeat for more pools.
    #[arg(long = "pool", value_name = "NAME=SLOTS", required = true)]
    pub pools: Vec<String>,
    /// Where command working directories are placed: the part of a node's
    /// folder under the engine's definitions folder goes under this one
    /// (default: the engine's own path, for a worker on its machine).
    #[arg(long)]
    pub root: Option<PathBuf>,
    /// Its name in `weir workers` (default: host and pid).
    #[arg(long)]
    pub name: Option<String>,
    /// Connect over TLS, trusting the CA certificates of this PEM file.
    #[arg(long)]
    pub tls_ca: Option<PathBuf>,
    /// The worker's own folder: scratch files and WEIR_DATA (default: a
    /// folder under the system's temporary folder).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Seconds running attempts get to finish when the worker stops.
    #[arg(long, default_value_t = 30)]
    pub drain_secs: u64,
    /// Log format.
    #[arg(long, value_enum, default_value = "plain")]
    pub log_format: LogFormat,
    /// The protocol version to claim (tests of the engine's check).
    #[arg(long, hide = true)]
    pub protocol_version: Option<u32>,
    /// Serve the tasks of `weir bench cluster` too.
    #[arg(long, hide = true)]
    pub bench_tasks: bool,
    /// Where artifacts are kept: the engine's --artifacts URL (default:
    /// the engine's own folder, for a worker on its machine).
    #[command(flatten)]
    pub artifacts: crate::artifacts::options::ArtifactArgs,
}

fn pool_arg(p: &str) -> Result<(String, u32), Failure> {
    let (name, slots) = p
        .split_once('=')
        .ok_or_else(|| Failure::input(format!("--pool {p:?}: write NAME=SLOTS, e.g. default=8")))?;
    let slots: u32 = slots.parse().map_err(|e| {
        Failure::input(format!(
            "--pool {p:?}: slots {slots:?} are not a number: {e}"
        ))
    })?;
    Ok((name.to_string(), slots))
}

/// Runs `weir worker`.
pub fn worker(a: WorkerArgs) -> Result<u8, Failure> {
    init_logging(a.log_format, "info");
    let cookie = weir_actors::cluster::node::read_cookie(&a.cookie_file)
        .map_err(|e| Failure::input(e.to_string()))?;
    let mut b = Worker::builder(a.join.clone())
        .cookie(cookie)
        .command_tasks();
    for p in &a.pools {
        let (name, slots) = pool_arg(p)?;
        b = b.pool(&name, slots);
    }
    if let Some(n) = &a.name {
        b = b.name(n.clone());
    }
    if let Some(r) = &a.root {
        let root = std::path::absolute(r)
            .map_err(|e| Failure::input(format!("--root {}: {e}", r.display())))?;
        if !root.is_dir() {
            return Err(Failure::input(format!(
                "--root {}: not a folder",
                root.display()
            )));
        }
        b = b.root(root);
    }
    if let Some(ca) = &a.tls_ca {
        b = b.tls_ca(ca);
    }
    if let Some(d) = &a.data {
        b = b.data_dir(super::datadir::absolute(d));
    }
    if let Some(v) = a.protocol_version {
        b = b.protocol_version(v);
    }
    if a.bench_tasks {
        b = crate::cluster_tasks::register_tasks(b);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::store(format!("cannot start the runtime: {e}")))?;
    let refused = |e: WorkerError| match e {
        WorkerError::Refused(r) => Failure::input(r),
        WorkerError::Settings(s) => Failure::input(s),
        WorkerError::Node(n) => Failure::input(n.to_string()),
        other => Failure::store(other.to_string()),
    };
    rt.block_on(async move {
        if a.artifacts.artifacts.is_some() {
            let who = a.name.clone().unwrap_or_else(|| "worker".into());
            let store = a
                .artifacts
                .open(crate::artifacts::options::Default::Missing(""), &who)
                .await?;
            b = b.artifacts(store);
        }
        let worker = b.start().await.map_err(refused)?;
        eprintln!(
            "weir: worker {} joining {} with pool(s) {}",
            worker.worker_id(),
            a.join,
            a.pools.join(", ")
        );
        let io = |e: std::io::Error| Failure::store(format!("cannot watch signals: {e}"));
        let mut term = signal(SignalKind::terminate()).map_err(io)?;
        let mut int = signal(SignalKind::interrupt()).map_err(io)?;
        let ended = tokio::select! {
            r = worker.wait() => Some(r),
            _ = term.recv() => None,
            _ = int.recv() => None,
        };
        if let Some(r) = ended {
            worker.shutdown().await;
            return r.map(|()| 0).map_err(refused);
        }
        eprintln!(
            "weir: worker stopping: no new tickets; running attempts get {}s (again to exit at once)",
            a.drain_secs
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
        let report = worker
            .stop(Duration::from_secs(a.drain_secs))
            .await
            .map_err(refused)?;
        eprintln!(
            "weir: worker left: {} attempt(s) cancelled, {} report(s) unacknowledged",
            report.cancelled, report.unacked
        );
        Ok(0)
    })
}

/// `weir workers`.
#[derive(Debug, Args)]
pub struct WorkersArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir workers`.
pub fn workers(a: WorkersArgs) -> Result<u8, Failure> {
    call(
        &a.conn,
        get(&["api", "v1", "workers"], vec![]),
        |rows: &Vec<Value>| {
            if rows.is_empty() {
                out("no worker has joined (workers join an engine started with --cluster)");
                return Ok(0);
            }
            let mut t = table::new(&[
                "worker",
                "state",
                "since",
                "address",
                "pools",
                "running",
                "heartbeat",
                "refused",
            ]);
            for w in rows {
                let pools = w
                    .get("pools")
                    .and_then(Value::as_array)
                    .map(|ps| {
                        ps.iter()
                            .map(|p| format!("{}={}", s(p, "pool"), s(p, "slots")))
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let mut state = s(w, "state");
                if let Some(r) = w.get("lost_reason").and_then(Value::as_str) {
                    state = format!("{state}: {r}");
                }
                t.add_row(vec![
                    s(w, "name"),
                    state,
                    table::time(w.get("since_ms").and_then(Value::as_u64)),
                    s(w, "address"),
                    pools,
                    s(w, "running"),
                    table::time(w.get("last_heartbeat_ms").and_then(Value::as_u64)),
                    s(w, "reports_refused"),
                ]);
            }
            table::print(&t);
            Ok(0)
        },
    )
}
