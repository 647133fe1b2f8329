//! A worker process: pools that serve an engine from another process or
//! machine, over ractor_cluster. What `weir worker` runs, and what an
//! application embeds as it embeds an [`crate::Engine`]:
//!
//! ```no_run
//! # async fn f() -> Result<(), weir::worker::WorkerError> {
//! let worker = weir::worker::Worker::builder("10.0.0.5:7451")
//!     .cookie("the cluster's secret")
//!     .pool("default", 8)
//!     .task_fn("resize", |ctx| async move { Ok(ctx.payload.to_vec()) })
//!     .start()
//!     .await?;
//! worker.wait().await?; // until refused, or stopped
//! # Ok(()) }
//! ```
//!
//! The worker needs no definition files: a ticket carries its task's name
//! and config (a command's argv, environment, timeout and working
//! directory). A command's working directory is the engine's path of it;
//! with a `root`, the part under the engine's definitions folder is placed
//! under the worker's root instead (the same checkout on another machine).
//! Its logs stream to the engine, which keeps them with the local ones.
//! Scratch files (WEIR_UPSTREAMS, WEIR_OUTPUT) and WEIR_DATA live in the
//! worker's own data folder.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorRef};
use ractor_cluster::NodeServerMessage;
use tokio::sync::watch;
use weir_actors::clock::Clock;
use weir_actors::cluster::link::{
    hostname, start_token, DrainReport, LinkActor, LinkArgs, LinkEnd, LinkMsg, LinkView,
};
use weir_actors::cluster::node::{self, Connector};
use weir_actors::protocol::{link_name, PoolOffer, Welcome, PROTOCOL_VERSION};
use weir_actors::task::{Task, TaskContext, TaskRegistry, TaskResult};
use weir_core::names::Name;

use crate::task::command::{CommandTask, RemoteSide, COMMAND_TASK, OUTPUT_BYTES_MAX};

/// A worker's failure.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Its settings are not valid.
    #[error("worker settings: {0}")]
    Settings(String),
    /// Its cluster node could not start.
    #[error(transparent)]
    Node(#[from] node::NodeError),
    /// The engine refused it (another protocol version, an unknown pool,
    /// a wrong cookie).
    #[error("{0}")]
    Refused(String),
    /// An actor of the worker did not answer.
    #[error("worker: {0}")]
    Actor(String),
}

/// Builds a worker.
pub struct WorkerBuilder {
    join: String,
    cookie: Option<String>,
    name: Option<String>,
    pools: Vec<PoolOffer>,
    tasks: TaskRegistry,
    tls_ca: Option<PathBuf>,
    root: Option<PathBuf>,
    data: Option<PathBuf>,
    artifacts: Option<crate::artifacts::Shared>,
    commands: bool,
    version: u32,
}

impl WorkerBuilder {
    /// The cluster's cookie (the engine's `--cookie-file`).
    pub fn cookie(mut self, cookie: impl Into<String>) -> Self {
        self.cookie = Some(cookie.into());
        self
    }

    /// Its name in `weir workers` (default: host and pid). Unique per worker.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Serves `pool` with `slots` slots.
    pub fn pool(mut self, pool: &str, slots: u32) -> Self {
        self.pools.push(PoolOffer {
            pool: pool.to_string(),
            slots,
        });
        self
    }

    /// Registers a task.
    pub fn task(mut self, name: &str, task: Arc<dyn Task>) -> Self {
        self.tasks.register(name, task);
        self
    }

    /// Registers an async closure as a task.
    pub fn task_fn<F, Fut>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(TaskContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = TaskResult> + Send + 'static,
    {
        self.tasks.register_fn(name, f);
        self
    }

    /// Where its commands' artifacts are kept (the engine's store, reached
    /// with the worker's own credentials). Default: the engine's folder
    /// when the engine keeps them in one and the worker runs on its
    /// machine; else nodes with artifacts fail, saying so.
    pub fn artifacts(mut self, store: crate::artifacts::Shared) -> Self {
        self.artifacts = Some(store);
        self
    }

    /// Connects over TLS, trusting the CA certificates of this PEM file.
    pub fn tls_ca(mut self, ca: impl AsRef<Path>) -> Self {
        self.tls_ca = Some(ca.as_ref().to_path_buf());
        self
    }

    /// Where command working directories are placed: the part of a node's
    /// working directory under the engine's definitions folder goes under
    /// `root` (default: the engine's path, for a worker on its machine).
    pub fn root(mut self, root: impl AsRef<Path>) -> Self {
        self.root = Some(root.as_ref().to_path_buf());
        self
    }

    /// The worker's own folder: scratch files and WEIR_DATA (default: a
    /// folder under the system's temporary folder).
    pub fn data_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.data = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Runs command nodes (the `command` task) and HTTP nodes (`http`), as
    /// `weir worker` does.
    pub fn command_tasks(mut self) -> Self {
        self.commands = true;
        self
    }

    /// The protocol version it claims: for tests of the engine's check.
    #[doc(hidden)]
    pub fn protocol_version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Starts the worker: its node, its link (which connects, joins and
    /// reconnects) and its pools.
    pub async fn start(mut self) -> Result<Worker, WorkerError> {
        let cookie = self
            .cookie
            .take()
            .filter(|c| !c.trim().is_empty())
            .ok_or_else(|| {
                WorkerError::Settings("no cookie: a worker needs the engine's cookie".into())
            })?;
        if self.pools.is_empty() {
            return Err(WorkerError::Settings(
                "no pool: serve at least one (--pool NAME=SLOTS)".into(),
            ));
        }
        for p in &self.pools {
            Name::new(p.pool.clone())
                .map_err(|e| WorkerError::Settings(format!("pool {:?}: {e}", p.pool)))?;
            if p.slots == 0 {
                return Err(WorkerError::Settings(format!(
                    "pool {:?}: at least 1 slot",
                    p.pool
                )));
            }
        }
        let clock = Clock::system();
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{}", hostname(), std::process::id()));
        Name::new(name.clone())
            .map_err(|e| WorkerError::Settings(format!("name {name:?}: {e}")))?;
        let worker_id = format!("{name}.{}", start_token(clock.now_ms()));
        let tls = match &self.tls_ca {
            Some(ca) => Some(node::tls_connector(ca)?),
            None => None,
        };
        let (welcome_tx, welcome_rx) = watch::channel::<Option<Welcome>>(None);
        let (end_tx, end_rx) = watch::channel(LinkEnd::Running);
        if self.commands {
            let data = self.data.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!("weir-worker-{}", std::process::id()))
            });
            let link_id = worker_id.clone();
            let forward: crate::logs::RemoteLog = Arc::new(move |frame| {
                if let Some(link) = ActorRef::<LinkMsg>::where_is(link_name(&link_id)) {
                    let _ = link.cast(LinkMsg::Log(vec![frame]));
                }
            });
            let root = self.root.clone();
            let welcome = welcome_rx.clone();
            let place = Arc::new(move |cwd: &str| {
                let engine_root = welcome.borrow().as_ref().and_then(|w| w.root.clone());
                place_cwd(cwd, engine_root.as_deref(), root.as_deref())
            });
            // On the engine's machine (no root of its own), commands share
            // the engine's WEIR_DATA, as its local ones do.
            let welcome = welcome_rx.clone();
            let own_root = self.root.is_some() || self.data.is_some();
            let work = Arc::new(move || {
                if own_root {
                    return None;
                }
                welcome
                    .borrow()
                    .as_ref()
                    .and_then(|w| w.work.clone())
                    .map(PathBuf::from)
            });
            let sensor_place: crate::task::command::PlaceCwd = place.clone();
            let sensor = crate::task::sensor::SensorTask::placed(Some(sensor_place))
                .map_err(WorkerError::Settings)?;
            self.tasks
                .register(crate::task::sensor::SENSOR_TASK, Arc::new(sensor));
            let forward_http = forward.clone();
            let artifacts = match self.artifacts.take() {
                Some(a) => a,
                None => {
                    let welcome = welcome_rx.clone();
                    let own_root = self.root.is_some();
                    Arc::new(crate::artifacts::ArtifactStore::Lazy(Arc::new(move || {
                        let folder = welcome.borrow().as_ref().and_then(|w| w.artifacts.clone());
                        match folder {
                            Some(dir) if !own_root && Path::new(&dir).is_dir() => {
                                crate::objects::Objects::folder(Path::new(&dir))
                            }
                            Some(_) => Err("this worker was given no --artifacts URL and the engine keeps its artifacts in a folder of its own machine: give the engine and this worker the URL of a store both reach".to_string()),
                            None => Err("this worker was given no --artifacts URL (give it the engine's)".to_string()),
                        }
                    })))
                }
            };
            let command = CommandTask {
                scratch: data.join("scratch"),
                work: data.join("work"),
                logs: None,
                log_limits: Default::default(),
                remote: Some(RemoteSide {
                    logs: forward,
                    place,
                    work,
                    worker_id: worker_id.clone(),
                }),
                artifacts,
            };
            self.tasks.register(COMMAND_TASK, Arc::new(command));
            let http = crate::task::http::HttpTask::new()
                .map_err(WorkerError::Settings)?
                .with_remote_logs(forward_http);
            self.tasks
                .register(crate::task::http::HTTP_TASK, Arc::new(http));
        }
        let server = node::start_server(
            "127.0.0.1:0".parse().expect("an address"),
            cookie,
            format!("weir-worker-{worker_id}"),
            None,
        )
        .await?;
        let connector = Connector::new(server.clone(), self.join.clone(), tls)?;
        let args = LinkArgs {
            worker_id: worker_id.clone(),
            name,
            pools: self.pools,
            tasks: self.tasks,
            connector,
            clock,
            output_bytes_max: OUTPUT_BYTES_MAX as usize,
            welcome: welcome_tx,
            end: end_tx,
            version: self.version,
        };
        let (link, _) = Actor::spawn(Some(link_name(&worker_id)), LinkActor, args)
            .await
            .map_err(|e| WorkerError::Actor(format!("the link failed to start: {e}")))?;
        Ok(Worker {
            worker_id,
            link,
            server,
            end: end_rx,
            welcome: welcome_rx,
        })
    }
}

/// Where a command whose engine-side working directory is `cwd` runs.
fn place_cwd(cwd: &str, engine_root: Option<&str>, root: Option<&Path>) -> Result<PathBuf, String> {
    let Some(root) = root else {
        return Ok(PathBuf::from(cwd));
    };
    let cwd_path = Path::new(cwd);
    if cwd_path.is_relative() {
        return Ok(root.join(cwd_path));
    }
    match engine_root {
        Some(er) => match cwd_path.strip_prefix(er) {
            Ok(rel) => Ok(root.join(rel)),
            Err(_) => Err(format!(
                "its working directory {cwd} is outside the engine's definitions folder {er}, \
                 so this worker (--root {}) cannot place it",
                root.display()
            )),
        },
        None => Err(format!(
            "the engine has no definitions folder to place {cwd} under this worker's root {}",
            root.display()
        )),
    }
}

/// A running worker.
pub struct Worker {
    worker_id: String,
    link: ActorRef<LinkMsg>,
    server: ActorRef<NodeServerMessage>,
    end: watch::Receiver<LinkEnd>,
    welcome: watch::Receiver<Option<Welcome>>,
}

impl Worker {
    /// A builder of a worker that joins the engine's cluster node at
    /// `join` (`host:port`, the engine's `--cluster`).
    pub fn builder(join: impl Into<String>) -> WorkerBuilder {
        WorkerBuilder {
            join: join.into(),
            cookie: None,
            name: None,
            pools: Vec::new(),
            tasks: TaskRegistry::new(),
            tls_ca: None,
            root: None,
            data: None,
            artifacts: None,
            commands: false,
            version: PROTOCOL_VERSION,
        }
    }

    /// Its id: its name and a token of this start.
    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// Waits until it has joined the engine (at most `timeout`); a refusal
    /// is the error.
    pub async fn joined(&self, timeout: Duration) -> Result<(), WorkerError> {
        let mut welcome = self.welcome.clone();
        let mut end = self.end.clone();
        let wait = async {
            loop {
                if welcome.borrow_and_update().is_some() {
                    return Ok(());
                }
                if let LinkEnd::Refused(r) = &*end.borrow_and_update() {
                    return Err(WorkerError::Refused(r.clone()));
                }
                tokio::select! {
                    r = welcome.changed() => if r.is_err() { return Err(WorkerError::Actor("the link stopped".into())) },
                    r = end.changed() => if r.is_err() { return Err(WorkerError::Actor("the link stopped".into())) },
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| WorkerError::Actor(format!("not joined within {timeout:?}")))?
    }

    /// Runs until the engine refuses the worker (the error) or it leaves.
    pub async fn wait(&self) -> Result<(), WorkerError> {
        let mut end = self.end.clone();
        loop {
            match &*end.borrow_and_update() {
                LinkEnd::Running => {}
                LinkEnd::Left => return Ok(()),
                LinkEnd::Refused(r) => return Err(WorkerError::Refused(r.clone())),
            }
            if end.changed().await.is_err() {
                return Err(WorkerError::Actor("the link stopped".into()));
            }
        }
    }

    /// Its link's state.
    pub async fn status(&self) -> Result<LinkView, WorkerError> {
        ractor::call_t!(self.link, LinkMsg::Status, 5_000)
            .map_err(|e| WorkerError::Actor(e.to_string()))
    }

    /// Stops gracefully: takes no new tickets, lets running attempts end
    /// and their reports be acknowledged (at most `drain`; what still runs
    /// then is cancelled and requeued by the engine), leaves, stops.
    pub async fn stop(self, drain: Duration) -> Result<DrainReport, WorkerError> {
        let report = ractor::call_t!(
            self.link,
            LinkMsg::Drain,
            drain.as_millis() as u64 + 10_000,
            drain
        )
        .map_err(|e| WorkerError::Actor(e.to_string()))?;
        self.shutdown().await;
        Ok(report)
    }

    /// Stops at once (the engine requeues what ran here once its lease
    /// runs out).
    pub async fn shutdown(self) {
        let _ = self
            .link
            .stop_and_wait(Some("worker stopping".into()), Some(Duration::from_secs(5)))
            .await;
        let _ = self
            .server
            .stop_and_wait(Some("worker stopping".into()), Some(Duration::from_secs(5)))
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn working_directories_are_placed_under_the_root() {
        type Case<'a> = (
            &'a str,
            Option<&'a str>,
            Option<&'a str>,
            Result<&'a str, &'a str>,
        );
        let cases: &[Case] = &[
            ("/e/defs/etl", Some("/e/defs"), None, Ok("/e/defs/etl")),
            ("/e/defs/etl", Some("/e/defs"), Some("/w"), Ok("/w/etl")),
            ("/e/defs", Some("/e/defs"), Some("/w"), Ok("/w")),
            ("etl", None, Some("/w"), Ok("/w/etl")),
            ("/elsewhere", Some("/e/defs"), Some("/w"), Err("outside")),
            ("/e/defs2/x", Some("/e/defs"), Some("/w"), Err("outside")),
            ("/e/x", None, Some("/w"), Err("no definitions folder")),
        ];
        for (i, (cwd, er, root, want)) in cases.iter().enumerate() {
            let got = place_cwd(cwd, *er, root.map(Path::new));
            match (want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(g, Path::new(w), "#{i}"),
                (Err(w), Err(g)) => assert!(g.contains(w), "#{i}: {g}"),
                _ => panic!("#{i}: {cwd}: got {got:?}, want {want:?}"),
            }
        }
    }
}
