//! The notification task: a graph's `on_failure` / `on_success` command,
//! run once when a run settles, with the run's summary as JSON on stdin.
//!
//! The scheduler enqueues it (see `weir_actors::scheduler::notice`, which
//! says when, how often and what a crash can cost); this task runs one
//! attempt. The command is an argv array, never a shell string; its
//! elements are templates with the run's names only (`{graph}`,
//! `{partition}`, `{partition.start}`, `{params.NAME}`, …), rendered as
//! literal text. It runs in the definition's folder (or its `cwd`), in its
//! own process group (killed whole on timeout or cancel), and sees
//! WEIR_GRAPH, WEIR_PARTITION and WEIR_RUN_STATE. Exit 0 succeeds; any
//! other end fails the attempt, and the notification's own small retry
//! decides what follows. A failure is traced as a warning with the graph,
//! partition and error; it never touches the run.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir_actors::scheduler::notice::NotifyInput;
use weir_actors::task::{Task, TaskContext, TaskError, TaskResult};
use weir_core::template::Scope;

use super::command::render_args;

/// The registered name of the notification task.
pub const NOTIFY_TASK: &str = "notify";
/// How much of the end of the command's stderr an error keeps.
pub const STDERR_TAIL_BYTES: usize = 2 << 10;

/// A notification's config (its task spec's config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotifyConfig {
    /// Program and arguments (templates of the run's names).
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: String,
}

/// The notification task.
#[derive(Debug, Clone, Default)]
pub struct NotifyTask;

impl Task for NotifyTask {
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        Box::pin(async move {
            let r = run(&ctx).await;
            if let Err(e) = &r {
                tracing::warn!(key = %ctx.key, attempt = ctx.attempt, error = %e, "notification failed");
            }
            r
        })
    }
}

/// The last `max` bytes of `bytes`, as text.
fn tail(bytes: &[u8], max: usize) -> String {
    let from = bytes.len().saturating_sub(max);
    String::from_utf8_lossy(&bytes[from..])
        .trim_end()
        .to_string()
}

async fn run(ctx: &TaskContext) -> TaskResult {
    let input: NotifyInput = weir_core::codec::decode(&ctx.payload).map_err(|e| {
        TaskError::Permanent(format!(
            "notify task: the payload is not a notification: {e}"
        ))
    })?;
    let report = &input.report;
    let config: NotifyConfig = serde_json::from_value(input.config.clone()).map_err(|e| {
        TaskError::Permanent(format!(
            "notify task: graph {}: bad config: {e}",
            report.graph
        ))
    })?;
    if config.argv.is_empty() {
        return Err(TaskError::Permanent(format!(
            "graph {}: the notification's argv is empty",
            report.graph
        )));
    }
    let field = match (&input.sla_miss, report.state) {
        (Some(_), _) => "on_sla_miss",
        (None, weir_actors::scheduler::records::RunState::Complete) => "on_success",
        (None, _) => "on_failure",
    };
    let argv = {
        let mut scope = Scope::new(&report.graph, &report.partition, "", 0, "", &report.params);
        scope.zone = report.zone.unwrap_or_default();
        render_args(
            &format!("graph {}", report.graph),
            field,
            config
                .argv
                .iter()
                .enumerate()
                .map(|(i, a)| (format!("[{i}]"), a)),
            &scope,
        )?
    };
    // An SLA miss's notification reads the miss; a settle's, the summary.
    let stdin = match &input.sla_miss {
        Some(miss) => serde_json::to_vec_pretty(miss),
        None => serde_json::to_vec_pretty(report),
    }
    .map_err(|e| TaskError::Permanent(format!("graph {}: the summary: {e}", report.graph)))?;
    let state = match &input.sla_miss {
        Some(_) => "sla_missed".to_string(),
        None => report.state.to_string(),
    };
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&config.cwd)
        .env("WEIR_GRAPH", &report.graph)
        .env("WEIR_PARTITION", &report.partition)
        .env("WEIR_RUN_STATE", state)
        .env(
            "WEIR_SLA_NODE",
            input
                .sla_miss
                .as_ref()
                .and_then(|m| m.node.clone())
                .unwrap_or_default(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        let what = format!(
            "graph {}: {field}: cannot start {:?} in {}: {e}",
            report.graph, argv[0], config.cwd
        );
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
    let kill_group = || {
        if let Some(pgid) = pgid {
            // SAFETY: a signal to the process group this attempt created.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    };
    // The summary goes in whole, then stdin closes; a command that does not
    // read it (exits first) is no failure of the notification.
    let mut pipe = child.stdin.take().expect("piped");
    let writer = tokio::spawn(async move {
        let _ = pipe.write_all(&stdin).await;
        let _ = pipe.shutdown().await;
    });
    let mut stderr = child.stderr.take().expect("piped");
    let reader = tokio::spawn(async move {
        let mut keep = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stderr.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    keep.extend_from_slice(&buf[..n]);
                    if keep.len() > 2 * STDERR_TAIL_BYTES {
                        keep.drain(..keep.len() - STDERR_TAIL_BYTES);
                    }
                }
            }
        }
        keep
    });
    let status = tokio::select! {
        s = child.wait() => s,
        () = ctx.cancel.cancelled() => {
            kill_group();
            let _ = child.wait().await;
            return Err(TaskError::Retryable(format!("graph {}: {field}: cancelled; the process group was killed", report.graph)));
        }
    };
    // The leader exited; what is left of its group goes with it.
    kill_group();
    let _ = writer.await;
    let err_tail = reader.await.unwrap_or_default();
    let status = status.map_err(|e| TaskError::Retryable(format!("wait failed: {e}")))?;
    if status.success() {
        tracing::info!(graph = %report.graph, partition = %report.partition, state = %report.state, program = %argv[0], "notification ran");
        return Ok(Vec::new());
    }
    let how = match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended abnormally".to_string(),
    };
    Err(TaskError::Retryable(format!(
        "graph {} partition {}: {field}: {} {how}\nstderr (tail): {}",
        report.graph,
        report.partition,
        argv[0],
        tail(&err_tail, STDERR_TAIL_BYTES)
    )))
}
