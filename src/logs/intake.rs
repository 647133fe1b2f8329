//! Keeping the logs of attempts that ran on worker processes: their log
//! events arrive through the cluster gateway and are written exactly as a
//! local attempt's are (same files, limits and records), so `weir logs`,
//! `--follow` and the UI read remote attempts like local ones.
//!
//! One task owns the open logs, keyed by (run id, attempt): a `Start`
//! opens one (a chunk without it opens one too: its start was cut off with
//! a connection), chunks are written with the worker's timestamps, `End`
//! records the outcome. A log whose end never comes — its worker was lost —
//! is ended as cancelled when the gateway says the worker is gone, or when
//! more than [`OPEN_LOGS_MAX`] are open (the one idle longest goes).

use std::collections::HashMap;
use std::path::Path;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use weir_actors::cluster::gateway::LogIntake;
use weir_actors::protocol::{LogEvent, LogFrame};

use super::paths::LogPaths;
use super::record::{LogLimits, Outcome, Stream};
use super::writer::{now_ms, outcome_of, stream_of};
use super::writer::{AttemptEnd, AttemptLog, LogSink};

/// Remote attempts' logs open at once, at most.
pub const OPEN_LOGS_MAX: usize = 4_096;

enum Input {
    Frames(String, Vec<LogFrame>),
    WorkerGone(String),
}

/// The engine's intake of remote attempts' logs.
pub struct RemoteLogs {
    tx: mpsc::UnboundedSender<Input>,
}

impl RemoteLogs {
    /// Logs kept under `logs_dir` (`DATA/logs`). Needs a tokio runtime.
    pub fn new(logs_dir: &Path) -> RemoteLogs {
        let paths = LogPaths::from_root(logs_dir);
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(paths, LogLimits::default(), rx));
        RemoteLogs { tx }
    }
}

impl LogIntake for RemoteLogs {
    fn frames(&self, worker_id: &str, frames: Vec<LogFrame>) {
        let _ = self.tx.send(Input::Frames(worker_id.to_string(), frames));
    }

    fn worker_gone(&self, worker_id: &str) {
        let _ = self.tx.send(Input::WorkerGone(worker_id.to_string()));
    }
}

struct Open {
    worker: String,
    log: AttemptLog,
    sinks: [Option<LogSink>; 2],
    last_ms: u64,
}

impl Open {
    fn start(paths: &LogPaths, limits: &LogLimits, worker: &str, key: &str, attempt: u32) -> Open {
        let log = AttemptLog::start(Some(paths), key, attempt, limits, CancellationToken::new());
        Open {
            worker: worker.to_string(),
            sinks: [Some(log.sink(Stream::Out)), Some(log.sink(Stream::Err))],
            log,
            last_ms: now_ms(),
        }
    }

    fn end(self, end: AttemptEnd) {
        drop(self.sinks);
        self.log.end(end);
    }
}

fn cut_off(why: &str) -> AttemptEnd {
    AttemptEnd {
        outcome: Outcome::Cancelled,
        exit_code: None,
        signal: None,
        error: Some(why.to_string()),
    }
}

async fn run(paths: LogPaths, limits: LogLimits, mut rx: mpsc::UnboundedReceiver<Input>) {
    let mut open: HashMap<(String, u32), Open> = HashMap::new();
    while let Some(input) = rx.recv().await {
        let (worker, frames) = match input {
            Input::Frames(w, f) => (w, f),
            Input::WorkerGone(w) => {
                let gone: Vec<(String, u32)> = open
                    .iter()
                    .filter(|(_, o)| o.worker == w)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in gone {
                    if let Some(o) = open.remove(&k) {
                        o.end(cut_off("the worker running the attempt was lost"));
                    }
                }
                continue;
            }
        };
        for f in frames {
            let k = (f.key.clone(), f.attempt);
            if let LogEvent::End {
                outcome,
                exit_code,
                signal,
                error,
            } = f.event
            {
                let o = match open.remove(&k) {
                    Some(o) => o,
                    None => Open::start(&paths, &limits, &worker, &f.key, f.attempt),
                };
                o.end(AttemptEnd {
                    outcome: outcome_of(&outcome),
                    exit_code,
                    signal,
                    error,
                });
                continue;
            }
            if matches!(f.event, LogEvent::Start) && open.contains_key(&k) {
                continue;
            }
            if !open.contains_key(&k) && open.len() >= OPEN_LOGS_MAX {
                let idle = open
                    .iter()
                    .min_by_key(|(_, o)| o.last_ms)
                    .map(|(k, _)| k.clone());
                if let Some(idle) = idle {
                    if let Some(o) = open.remove(&idle) {
                        tracing::warn!(key = %idle.0, attempt = idle.1, "remote attempt log closed: too many open");
                        o.end(cut_off("its log was closed: too many remote logs open"));
                    }
                }
            }
            let o = open
                .entry(k)
                .or_insert_with(|| Open::start(&paths, &limits, &worker, &f.key, f.attempt));
            o.last_ms = now_ms();
            match f.event {
                LogEvent::Chunk {
                    stream,
                    at_ms,
                    bytes,
                } => {
                    let i = usize::from(stream_of(stream) == Stream::Err);
                    if let Some(s) = o.sinks[i].as_mut() {
                        s.write_at(&bytes, at_ms).await;
                    }
                }
                LogEvent::Eof { stream, .. } => {
                    let i = usize::from(stream_of(stream) == Stream::Err);
                    if let Some(s) = o.sinks[i].take() {
                        s.close().await;
                    }
                }
                LogEvent::Start | LogEvent::End { .. } => {}
            }
        }
    }
}
