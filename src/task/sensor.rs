//! The sensor task: one check of a node that waits for a condition.
//!
//! `sensor = { file = "in/{partition}.csv" }` is met when the file exists
//! (relative to the definition's folder, or `cwd`); `{ command = [...] }`
//! when the command exits 0; `{ http = "url", status = 200 }` when a GET
//! answers that status. The path, the argv elements and the URL are
//! templates, rendered at each check as a command's are.
//!
//! A check that is met succeeds with what it saw as the node's output
//! (JSON): the file's path, size and modification time; the command's
//! exit code and stdout (its head); the response's status and the head of
//! its body. A check that is not met returns [`TaskError::NotMet`] with
//! what it saw, and the queue puts the ticket back, due `every` later,
//! with no attempt spent and no slot held (see `weir_core::sensor`). A
//! check that cannot be made (the command does not start, the connection
//! fails, the check runs past the node's `timeout`, by default
//! [`CHECK_TIMEOUT_MS_DEFAULT`] for a sensor) is a failed attempt, retried
//! by the node's policy. A command runs in its own process group, killed
//! whole when the check is cancelled or times out.

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;

use futures::future::BoxFuture;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;
use weir_actors::scheduler::records::TaskInput;
use weir_actors::task::{Task, TaskContext, TaskError, TaskResult};
use weir_core::template::{Escape, Place, Template};

use super::command::{render_args, PlaceCwd};

/// The registered name of the sensor task.
pub const SENSOR_TASK: &str = "sensor";
/// How long one check may run when the node gives no `timeout`.
pub const CHECK_TIMEOUT_MS_DEFAULT: u64 = 60_000;
/// The head of a command's stdout or of a response's body kept in what a
/// check saw.
pub const SEEN_BYTES_MAX: usize = 4 << 10;
/// How long connecting may take in an `http` check.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// What a sensor checks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SensorCheck {
    /// That a file exists (a path template).
    File {
        /// The path, relative to the working directory.
        path: String,
    },
    /// That a command exits 0.
    Command {
        /// Program and arguments (templates).
        argv: Vec<String>,
    },
    /// That a GET answers `status`.
    Http {
        /// The URL (a template).
        url: String,
        /// The status waited for.
        status: u16,
    },
}

/// A sensor node's config (its task spec's config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SensorConfig {
    /// The check.
    pub check: SensorCheck,
    /// The folder relative paths start in, and commands run in.
    pub cwd: String,
}

/// The faults of an `http` check's URL template (as an HTTP node's: see
/// [`super::http::check_url`]).
pub fn check_url(url: &str) -> Vec<String> {
    super::http::check_url(url)
}

/// The sensor task.
#[derive(Clone)]
pub struct SensorTask {
    client: reqwest::Client,
    /// In a worker process: the working directory from the engine's path.
    place: Option<PlaceCwd>,
}

impl std::fmt::Debug for SensorTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SensorTask")
    }
}

impl SensorTask {
    /// A sensor task of the engine's process.
    pub fn new() -> Result<SensorTask, String> {
        SensorTask::placed(None)
    }

    /// A sensor task whose working directories `place` moves (a worker's).
    pub fn placed(place: Option<PlaceCwd>) -> Result<SensorTask, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_millis(CONNECT_TIMEOUT_MS))
            .redirect(reqwest::redirect::Policy::limited(5))
            .build()
            .map_err(|e| format!("sensor task: cannot build an HTTP client: {e}"))?;
        Ok(SensorTask { client, place })
    }
}

impl Task for SensorTask {
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        let task = self.clone();
        Box::pin(async move { check(task, ctx).await })
    }
}

/// `bytes` cut to [`SEEN_BYTES_MAX`], as text.
fn head(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(SEEN_BYTES_MAX)];
    String::from_utf8_lossy(cut).into_owned()
}

fn rfc3339(t: std::time::SystemTime) -> Option<(String, u64)> {
    let ms = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as u64;
    let dt = chrono::DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)?;
    Some((dt.to_rfc3339_opts(chrono::SecondsFormat::Millis, true), ms))
}

fn json(v: serde_json::Value) -> TaskResult {
    serde_json::to_vec(&v).map_err(|e| TaskError::Permanent(e.to_string()))
}

async fn check(task: SensorTask, ctx: TaskContext) -> TaskResult {
    let input: TaskInput = weir_core::codec::decode(&ctx.payload).map_err(|e| {
        TaskError::Permanent(format!(
            "sensor task: the payload is not a graph task input: {e}"
        ))
    })?;
    let config: SensorConfig = serde_json::from_value(input.config.clone()).map_err(|e| {
        TaskError::Permanent(format!("sensor task: node {}: bad config: {e}", input.node))
    })?;
    let who = format!("node {}", input.node);
    let cwd = match &task.place {
        None => PathBuf::from(&config.cwd),
        Some(place) => {
            place(&config.cwd).map_err(|e| TaskError::Permanent(format!("{who}: {e}")))?
        }
    };
    match &config.check {
        SensorCheck::File { path } => {
            let rendered = {
                let scope = input.scope(ctx.attempt, &ctx.key);
                render_args(&who, "sensor.file", [(String::new(), path)], &scope)?
            };
            let file = cwd.join(&rendered[0]);
            match tokio::fs::metadata(&file).await {
                Ok(meta) => {
                    let modified = meta.modified().ok().and_then(rfc3339);
                    tracing::debug!(run_id = %ctx.key, file = %file.display(), bytes = meta.len(), "sensor met: the file exists");
                    json(serde_json::json!({
                        "file": rendered[0],
                        "path": file.display().to_string(),
                        "size_bytes": meta.len(),
                        "modified": modified.as_ref().map(|m| m.0.clone()),
                        "modified_ms": modified.map(|m| m.1),
                    }))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Err(TaskError::NotMet(format!("no file at {}", file.display())))
                }
                Err(e) => Err(TaskError::Retryable(format!(
                    "{who}: cannot look at {}: {e}",
                    file.display()
                ))),
            }
        }
        SensorCheck::Command { argv } => {
            let argv = {
                let scope = input.scope(ctx.attempt, &ctx.key);
                render_args(
                    &who,
                    "sensor.command",
                    argv.iter().enumerate().map(|(i, a)| (format!("[{i}]"), a)),
                    &scope,
                )?
            };
            command(&ctx, &input, &who, &argv, &cwd).await
        }
        SensorCheck::Http { url, status } => {
            let url = {
                let scope = input.scope(ctx.attempt, &ctx.key);
                let t = Template::parse(url, Place::Http)
                    .map_err(|e| TaskError::Permanent(format!("{who}: sensor.http: {e}")))?;
                t.render(&scope, Escape::Url, super::http::RENDERED_BYTES_MAX)
                    .map_err(|e| TaskError::Permanent(format!("{who}: sensor.http: {e}")))?
            };
            let sent = tokio::select! {
                r = task.client.get(&url).send() => r,
                () = ctx.cancel.cancelled() => return Err(TaskError::Retryable("cancelled".into())),
            };
            let resp = sent.map_err(|e| {
                TaskError::Retryable(format!(
                    "{who}: the check of {} failed: {}",
                    // The template, never the rendered URL: it may hold a
                    // secret.
                    match &config.check {
                        SensorCheck::Http { url, .. } => url.as_str(),
                        _ => "",
                    },
                    e.without_url()
                ))
            })?;
            let got = resp.status().as_u16();
            let mut body = Vec::new();
            let mut stream = resp.bytes_stream();
            while let Some(chunk) = stream.next().await {
                let Ok(chunk) = chunk else { break };
                body.extend_from_slice(&chunk);
                if body.len() >= SEEN_BYTES_MAX {
                    break;
                }
            }
            if got == *status {
                json(serde_json::json!({
                    "status": got,
                    "body_head": head(&body),
                }))
            } else {
                Err(TaskError::NotMet(format!(
                    "status {got}, waiting for {status}"
                )))
            }
        }
    }
}

/// Runs a command check: exit 0 is met, any other exit is not.
async fn command(
    ctx: &TaskContext,
    input: &TaskInput,
    who: &str,
    argv: &[String],
    cwd: &std::path::Path,
) -> TaskResult {
    let Some(program) = argv.first() else {
        return Err(TaskError::Permanent(format!(
            "{who}: sensor.command is empty"
        )));
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&argv[1..])
        .current_dir(cwd)
        .env("WEIR_GRAPH", &input.graph)
        .env("WEIR_PARTITION", &input.partition)
        .env("WEIR_NODE", &input.node)
        .env("WEIR_ATTEMPT", ctx.attempt.to_string())
        .env("WEIR_RUN_ID", ctx.key.as_ref())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        let what = format!("{who}: cannot start {program:?} in {}: {e}", cwd.display());
        if matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
        ) {
            TaskError::Permanent(what)
        } else {
            TaskError::Retryable(what)
        }
    })?;
    let pgid = child.id().map(|p| p as i32);
    // Killed whole when the check is dropped (its timeout) or cancelled.
    let _guard = GroupKill(pgid);
    let mut out = child.stdout.take().expect("piped");
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            match out.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if buf.len() < SEEN_BYTES_MAX {
                        buf.extend_from_slice(&chunk[..n]);
                    }
                }
            }
        }
        buf
    };
    let (stdout, status) = tokio::select! {
        r = async { tokio::join!(read, child.wait()) } => r,
        () = ctx.cancel.cancelled() => {
            return Err(TaskError::Retryable("cancelled; the process group was killed".into()));
        }
    };
    let status = status.map_err(|e| TaskError::Retryable(format!("{who}: wait failed: {e}")))?;
    match (status.code(), status.signal()) {
        (Some(0), _) => json(serde_json::json!({
            "exit_code": 0,
            "stdout": head(&stdout),
        })),
        (Some(code), _) => Err(TaskError::NotMet(format!(
            "exit {code}: {}",
            head(&stdout).trim_end()
        ))),
        (None, sig) => Err(TaskError::Retryable(format!(
            "{who}: the check was killed by signal {}",
            sig.unwrap_or(0)
        ))),
    }
}

/// Kills a process group when dropped.
struct GroupKill(Option<i32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: a signal to a process group this task created; no
            // memory is involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}
