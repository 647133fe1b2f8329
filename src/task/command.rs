//! The command task: a node that runs a program.
//!
//! The command is an argv array, never a shell string. Templates in its
//! elements and in its env values (`{partition}`, `{partition.start}`,
//! `{upstream.NODE.output.a.b}`, `{params.NAME}`, …: see
//! [`weir_core::template`]) are rendered at each attempt from the ticket's
//! payload as literal text, one argv element each, so a key, a partition
//! or an upstream's output can never inject a command; a reference that
//! cannot be rendered (a JSON path missing from an output) fails the
//! attempt without retry, naming the template. The environment carries WEIR_GRAPH, WEIR_PARTITION, WEIR_NODE,
//! WEIR_ATTEMPT, WEIR_RUN_ID (a mapped node's member also WEIR_MEMBER, its
//! index, and WEIR_ITEM, its item as JSON), WEIR_PARAMS (the run's params as a
//! JSON object), WEIR_PARTITION_START and WEIR_PARTITION_END (a time window's
//! ends), WEIR_UPSTREAMS (the path of a JSON file with
//! the upstream records and outputs), WEIR_OUTPUT (a path whose content,
//! at most `OUTPUT_BYTES_MAX`, becomes the node's output) and WEIR_DATA (a
//! folder under the data directory for the commands' own files). The process runs
//! in its own process group, killed whole on timeout or cancel. Exit 0
//! succeeds; an exit code listed in `permanent_exit_codes` fails without
//! retry; any other exit or a signal fails and may retry. The tail of stdout
//! and stderr goes, on failure, into the node record.
//!
//! Every line of stdout and stderr is also kept, per attempt, under
//! `DATA/logs/<run id>/` with the attempt's record (see [`crate::logs`]).
//! Keeping them never fails the attempt: a log error is traced and the
//! command goes on. WEIR_DATA exists before the command starts.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt};
use weir_actors::scheduler::records::TaskInput;
use weir_actors::task::{Task, TaskContext, TaskError, TaskResult};
use weir_core::template::{Escape, Place, Scope, Template, ARG_BYTES_MAX};

use crate::logs::{AttemptEnd, AttemptLog, LogLimits, LogPaths, LogSink, Outcome, Stream};

/// The registered name of the command task.
pub const COMMAND_TASK: &str = "command";
/// The largest output a command may leave in WEIR_OUTPUT.
pub const OUTPUT_BYTES_MAX: u64 = 1 << 20;
/// How much of the end of stdout and of stderr is kept.
pub const LOG_TAIL_BYTES: usize = 4 << 10;

/// A command node's config (its task spec's config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandConfig {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Exit codes that fail without retry.
    #[serde(default)]
    pub permanent_exit_codes: Vec<i32>,
    /// Extra environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: String,
    /// The artifacts' patterns (files under `$WEIR_ARTIFACTS_OUT`). Left
    /// out when none, so a definition without them hashes as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// The artifacts' limits, when the node sets them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_limits: Option<weir_core::artifact::Limits>,
}

/// The command task.
#[derive(Debug, Clone)]
pub struct CommandTask {
    /// Where attempts keep their WEIR_UPSTREAMS and WEIR_OUTPUT files.
    pub scratch: PathBuf,
    /// A folder under the data directory for the commands' own files,
    /// passed as WEIR_DATA; created before a command starts.
    pub work: PathBuf,
    /// Where attempts' logs and records are kept (`DATA/logs`); none: not
    /// kept.
    pub logs: Option<LogPaths>,
    /// Bounds of each attempt's log.
    pub log_limits: LogLimits,
    /// In a worker process: where logs go and where commands run.
    pub remote: Option<RemoteSide>,
    /// Where artifacts are stored and fetched from.
    pub artifacts: crate::artifacts::Shared,
}

/// Places a command's working directory (the engine's path of it) in a
/// worker process, or says why it cannot.
pub type PlaceCwd = Arc<dyn Fn(&str) -> Result<PathBuf, String> + Send + Sync>;

/// How a command task runs in a worker process: its attempts' logs stream
/// to the engine, and a node's working directory (the engine's path) is
/// placed under the worker's root.
#[derive(Clone)]
pub struct RemoteSide {
    /// Where log events go.
    pub logs: crate::logs::RemoteLog,
    /// The working directory of a command, from the engine's path of it.
    pub place: PlaceCwd,
    /// WEIR_DATA, when not the task's own `work` (the engine's, for a
    /// worker on its machine).
    pub work: Arc<dyn Fn() -> Option<PathBuf> + Send + Sync>,
    /// The worker's id, passed to commands as WEIR_WORKER.
    pub worker_id: String,
}

impl std::fmt::Debug for RemoteSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RemoteSide")
    }
}

/// Renders `texts` (argv elements, or env values) as templates in
/// `scope`: one string per text, each at most an argument's length and
/// without a NUL. A failure is permanent (the same payload renders the
/// same way), named by `who` (`node load`), `field` and the element's
/// place.
pub fn render_args<'t>(
    who: &str,
    field: &str,
    texts: impl IntoIterator<Item = (String, &'t String)>,
    scope: &Scope<'_>,
) -> Result<Vec<String>, TaskError> {
    let mut out = Vec::new();
    for (at, text) in texts {
        let fail = |e: String| TaskError::Permanent(format!("{who}: {field}{at}: {e}"));
        let t = Template::parse(text, Place::Command).map_err(|e| fail(e.to_string()))?;
        let v = t
            .render(scope, Escape::None, ARG_BYTES_MAX)
            .map_err(|e| fail(e.to_string()))?;
        if v.contains('\0') {
            return Err(fail(format!(
                "template {text:?} renders to text holding a NUL byte, which no argument or variable can hold"
            )));
        }
        out.push(v);
    }
    Ok(out)
}

/// Now, in ms since the epoch (artifacts' freshness against the
/// collector's grace).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Kills a process group when dropped (the attempt timed out and its
/// future was dropped), unless disarmed.
struct GroupKill(Option<i32>);

impl GroupKill {
    fn kill(&mut self) {
        if let Some(pgid) = self.0.take() {
            // SAFETY: a signal to a process group we created; no memory involved.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads a pipe to its end into the attempt's log; returns its last
/// `LOG_TAIL_BYTES`.
async fn pump<R: AsyncRead + Unpin>(mut r: R, mut sink: LogSink) -> Vec<u8> {
    let mut keep: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                sink.write(&buf[..n]).await;
                keep.extend_from_slice(&buf[..n]);
                if keep.len() > 2 * LOG_TAIL_BYTES {
                    keep.drain(..keep.len() - LOG_TAIL_BYTES);
                }
            }
        }
    }
    sink.close().await;
    if keep.len() > LOG_TAIL_BYTES {
        keep.drain(..keep.len() - LOG_TAIL_BYTES);
    }
    keep
}

/// The end of an attempt that did not run to an exit.
fn ended(outcome: Outcome, error: &TaskError) -> AttemptEnd {
    AttemptEnd {
        outcome,
        exit_code: None,
        signal: None,
        error: Some(error.to_string()),
    }
}

#[derive(Serialize)]
struct UpstreamJson<'a> {
    status: String,
    rerun: u32,
    output: String,
    output_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

impl Task for CommandTask {
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        let task = self.clone();
        Box::pin(async move { run(task, ctx).await })
    }
}

async fn run(task: CommandTask, ctx: TaskContext) -> TaskResult {
    let CommandTask {
        scratch,
        work,
        logs,
        log_limits,
        remote,
        artifacts,
    } = task;
    let input: TaskInput = weir_core::codec::decode(&ctx.payload).map_err(|e| {
        TaskError::Permanent(format!(
            "command task: the payload is not a graph task input: {e}"
        ))
    })?;
    let config: CommandConfig = serde_json::from_value(input.config.clone()).map_err(|e| {
        TaskError::Permanent(format!(
            "command task: node {}: bad config: {e}",
            input.node
        ))
    })?;
    if config.argv.is_empty() {
        return Err(TaskError::Permanent(format!(
            "node {}: the command's argv is empty",
            input.node
        )));
    }
    let dir = scratch.join(format!("t{}-a{}", ctx.ticket, ctx.attempt));
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| TaskError::Retryable(format!("cannot create {}: {e}", dir.display())))?;
    let upstreams_path = dir.join("upstreams.json");
    let output_path = dir.join("output");
    let ups: BTreeMap<&String, UpstreamJson> = input
        .upstreams
        .iter()
        .map(|(k, u)| {
            let (output, note) = match std::str::from_utf8(&u.output) {
                Ok(s) => (s.to_string(), None),
                Err(_) => (
                    String::from_utf8_lossy(&u.output).into_owned(),
                    Some("output is not UTF-8; shown lossily"),
                ),
            };
            (
                k,
                UpstreamJson {
                    status: u.status.to_string(),
                    rerun: u.rerun,
                    output,
                    output_bytes: u.output.len(),
                    note,
                },
            )
        })
        .collect();
    let json = serde_json::to_vec_pretty(&ups).map_err(|e| TaskError::Permanent(e.to_string()))?;
    tokio::fs::write(&upstreams_path, json).await.map_err(|e| {
        TaskError::Retryable(format!("cannot write {}: {e}", upstreams_path.display()))
    })?;

    // Upstream artifacts are fetched before anything renders: a template
    // naming one renders its local path.
    let arts_in = dir.join("in");
    let arts_out = dir.join("out");
    let fetched = tokio::select! {
        r = artifacts.fetch_inputs(&input, &arts_in) => r,
        () = ctx.cancel.cancelled() => Err(TaskError::Retryable("cancelled while fetching artifacts".into())),
    };
    let made_out = tokio::fs::create_dir_all(&arts_out)
        .await
        .map_err(|e| TaskError::Retryable(format!("cannot create {}: {e}", arts_out.display())));
    if let Err(e) = fetched.and(made_out) {
        let _ = tokio::fs::remove_dir_all(&dir).await;
        tracing::warn!(run_id = %ctx.key, attempt = ctx.attempt, error = %e, "artifacts not fetched");
        return Err(e);
    }
    let arts_in_text = arts_in.to_string_lossy().into_owned();
    let attempt = ctx.attempt.to_string();
    let (argv, env, window) = {
        let mut scope = input.scope(ctx.attempt, &ctx.key);
        scope.artifacts_in = Some(&arts_in_text);
        let who = format!("node {}", input.node);
        let argv = render_args(
            &who,
            "command",
            config
                .argv
                .iter()
                .enumerate()
                .map(|(i, a)| (format!("[{i}]"), a)),
            &scope,
        );
        let values = render_args(
            &who,
            "env",
            config.env.iter().map(|(k, v)| (format!(".{k}"), v)),
            &scope,
        );
        // The partition's window (time partitionings only; none for the
        // others), for helpers such as the Python `weir.task`.
        let window = ["{partition.start}", "{partition.end}"].map(|t| {
            Template::parse(t, Place::Command)
                .ok()
                .and_then(|t| t.render(&scope, Escape::None, ARG_BYTES_MAX).ok())
        });
        (argv, values, window)
    };
    let (argv, env) = match (argv, env) {
        (Ok(a), Ok(e)) => (a, e),
        (Err(e), _) | (_, Err(e)) => {
            let _ = tokio::fs::remove_dir_all(&dir).await;
            tracing::warn!(run_id = %ctx.key, attempt = ctx.attempt, error = %e, "command not rendered");
            return Err(e);
        }
    };
    let env: Vec<(&String, String)> = config.env.keys().zip(env).collect();
    let work = remote.as_ref().and_then(|r| (r.work)()).unwrap_or(work);
    tokio::fs::create_dir_all(&work).await.map_err(|e| {
        TaskError::Retryable(format!(
            "node {}: cannot create WEIR_DATA {}: {e}",
            input.node,
            work.display()
        ))
    })?;
    let cwd = match &remote {
        None => PathBuf::from(&config.cwd),
        Some(r) => (r.place)(&config.cwd)
            .map_err(|e| TaskError::Permanent(format!("node {}: {e}", input.node)))?,
    };
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&cwd)
        .envs(env)
        .env("WEIR_GRAPH", &input.graph)
        .env("WEIR_PARTITION", &input.partition)
        .env("WEIR_NODE", &input.node)
        .env("WEIR_ATTEMPT", &attempt)
        .env("WEIR_RUN_ID", ctx.key.as_ref())
        // The attempt's span in the run's trace: the command's own spans
        // join it (W3C trace context).
        .env(
            "TRACEPARENT",
            crate::trace::ids::traceparent(&input.graph, &input.partition, &ctx.key, ctx.attempt),
        )
        .env("WEIR_UPSTREAMS", &upstreams_path)
        .env("WEIR_OUTPUT", &output_path)
        .env("WEIR_DATA", &work)
        .env("WEIR_ARTIFACTS_IN", &arts_in)
        .env("WEIR_ARTIFACTS_OUT", &arts_out)
        // The run's params as one JSON object, and the partition's window
        // (RFC 3339 in the graph's zone) when it has one.
        .env(
            "WEIR_PARAMS",
            serde_json::to_string(&input.params).unwrap_or_else(|_| "{}".into()),
        )
        .envs(
            ["WEIR_PARTITION_START", "WEIR_PARTITION_END"]
                .into_iter()
                .zip(window)
                .filter_map(|(k, v)| Some((k, v?))),
        )
        .env(
            "WEIR_WORKER",
            remote.as_ref().map_or("engine", |r| r.worker_id.as_str()),
        )
        .envs(
            input
                .member
                .as_ref()
                .map(|m| {
                    [
                        ("WEIR_MEMBER", m.index.to_string()),
                        ("WEIR_ITEM", m.item.to_string()),
                    ]
                })
                .into_iter()
                .flatten(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let log = match &remote {
        Some(r) => AttemptLog::start_remote(
            r.logs.clone(),
            &ctx.key,
            ctx.attempt,
            &log_limits,
            ctx.cancel.clone(),
        ),
        None => AttemptLog::start(
            logs.as_ref(),
            &ctx.key,
            ctx.attempt,
            &log_limits,
            ctx.cancel.clone(),
        ),
    };
    let spawned = cmd.spawn().map_err(|e| {
        let what = format!(
            "node {}: cannot start {:?} in {}: {e}",
            input.node,
            argv[0],
            cwd.display()
        );
        // A missing program stays missing: do not retry it.
        if e.kind() == std::io::ErrorKind::NotFound
            || e.kind() == std::io::ErrorKind::PermissionDenied
        {
            TaskError::Permanent(what)
        } else {
            TaskError::Retryable(what)
        }
    });
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            log.finish(ended(Outcome::Failed, &e)).await;
            return Err(e);
        }
    };
    let mut guard = GroupKill(child.id().map(|p| p as i32));
    let out = tokio::spawn(pump(
        child.stdout.take().expect("piped"),
        log.sink(Stream::Out),
    ));
    let err = tokio::spawn(pump(
        child.stderr.take().expect("piped"),
        log.sink(Stream::Err),
    ));
    let status = tokio::select! {
        s = child.wait() => s,
        () = ctx.cancel.cancelled() => {
            guard.kill();
            let _ = child.wait().await;
            let _ = tokio::fs::remove_dir_all(&dir).await;
            let e = TaskError::Retryable("cancelled; the process group was killed".into());
            // Not waited for: a process that left the group may hold the
            // pipes open; the record is written when they close.
            log.end(ended(Outcome::Cancelled, &e));
            return Err(e);
        }
    };
    // The leader exited; stragglers of its group go with it.
    guard.kill();
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            let e = TaskError::Retryable(format!("wait failed: {e}"));
            log.end(ended(Outcome::Failed, &e));
            return Err(e);
        }
    };
    let stdout = out.await.unwrap_or_default();
    let stderr = err.await.unwrap_or_default();
    let logs = format!(
        "stdout (tail): {}\nstderr (tail): {}",
        String::from_utf8_lossy(&stdout).trim_end(),
        String::from_utf8_lossy(&stderr).trim_end()
    );
    let result = if status.success() {
        let output = match tokio::fs::metadata(&output_path).await {
            Err(_) => Ok(Vec::new()),
            Ok(m) if m.len() > OUTPUT_BYTES_MAX => Err(TaskError::Permanent(format!(
                "node {}: WEIR_OUTPUT holds {} bytes, over the limit of {OUTPUT_BYTES_MAX}",
                input.node,
                m.len()
            ))),
            Ok(_) => tokio::fs::read(&output_path)
                .await
                .map_err(|e| TaskError::Retryable(format!("cannot read WEIR_OUTPUT: {e}"))),
        };
        match output {
            // The artifacts are durable in the store before the success is
            // reported: its record never names an object that is not there.
            Ok(out) if !config.artifacts.is_empty() => {
                let limits = config.artifact_limits.unwrap_or_default();
                let stored = tokio::select! {
                    r = artifacts.store_outputs(&input.node, &arts_out, &config.artifacts, &limits, now_ms()) => r,
                    () = ctx.cancel.cancelled() => Err(TaskError::Retryable("cancelled while storing artifacts".into())),
                };
                stored.map(|refs| {
                    tracing::info!(run_id = %ctx.key, attempt = ctx.attempt, artifacts = refs.len(), bytes = refs.iter().map(|a| a.bytes).sum::<u64>(), "artifacts stored");
                    ctx.artifacts.set(refs);
                    out
                })
            }
            other => other,
        }
    } else {
        let how = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => "ended abnormally".to_string(),
        };
        let what = format!("node {}: {} {how}\n{logs}", input.node, argv[0]);
        match status.code() {
            Some(code) if config.permanent_exit_codes.contains(&code) => {
                Err(TaskError::Permanent(what))
            }
            _ => Err(TaskError::Retryable(what)),
        }
    };
    let end = AttemptEnd {
        outcome: if result.is_ok() {
            Outcome::Succeeded
        } else {
            Outcome::Failed
        },
        exit_code: status.code(),
        signal: status.signal(),
        error: result.as_ref().err().map(ToString::to_string),
    };
    log.finish(end).await;
    match &result {
        Ok(_) => {
            tracing::debug!(run_id = %ctx.key, attempt = ctx.attempt, stdout = %String::from_utf8_lossy(&stdout).trim_end(), "command succeeded")
        }
        Err(e) => {
            // The first line only: the queue's line about the attempt
            // carries the whole error, its output tails included, once.
            let e = e.to_string();
            // Info, not a warning: a failed attempt is expected (the
            // retry policy follows); the queue warns when tries are spent.
            tracing::info!(run_id = %ctx.key, attempt = ctx.attempt, error = %e.lines().next().unwrap_or(""), "command failed")
        }
    }
    let _ = tokio::fs::remove_dir_all(&dir).await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The five names templates always had render as they did: literal,
    /// in one pass, anything else left as written.
    #[test]
    fn substitution_is_literal_and_single_pass() {
        let params = BTreeMap::new();
        let scope = Scope::new("g", "key=a;rm -rf x {node}", "n", 1, "r", &params);
        let cases = [
            ("{graph}", "g"),
            ("--p={partition}", "--p=key=a;rm -rf x {node}"),
            ("{unknown}", "{unknown}"),
            ("{{node}}", "{n}"),
            ("{", "{"),
            ("a{node}b{node}", "anbn"),
            ("é{node}ü", "énü"),
        ];
        for (i, (arg, want)) in cases.iter().enumerate() {
            let arg = arg.to_string();
            let got =
                render_args("node n", "command", [("[0]".to_string(), &arg)], &scope).unwrap();
            assert_eq!(got, vec![want.to_string()], "#{i}: {arg}");
        }
        let bad = "{upstream.x.output}".to_string();
        let e = render_args("node n", "command", [("[2]".to_string(), &bad)], &scope).unwrap_err();
        assert!(
            matches!(&e, TaskError::Permanent(m) if m.contains("node n: command[2]: template \"{upstream.x.output}\"")),
            "{e}"
        );
    }
}
