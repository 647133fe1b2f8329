//! What the logs hold and how reading them fails: an attempt's
//! [`AttemptRecord`], its lines ([`LogLine`], [`LogChunk`]) and streams,
//! the bounds an attempt's log keeps to ([`LogLimits`]), and [`LogError`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Bounds of one attempt's log. Sizes count file bytes (prefix, text and
/// newline of each line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LogLimits {
    /// The first bytes of an attempt's log, always kept.
    pub head_bytes_max: u64,
    /// The last bytes of an attempt's log, kept once it ends. While it
    /// runs, up to twice this is kept after the head before a cut.
    pub tail_bytes_max: u64,
    /// The longest line text; a longer line is split into pieces.
    pub line_bytes_max: usize,
    /// Lines of stderr kept in the attempt record.
    pub stderr_tail_lines_max: usize,
    /// Bytes of stderr kept in the attempt record.
    pub stderr_tail_bytes_max: usize,
    /// Chunks of output queued for the writer before the pipe readers wait
    /// (each at most 8 KiB).
    pub queue_chunks_max: usize,
    /// The largest log kept in its attempt's record instead of a file of
    /// its own (its lines as the file would hold them); 0 keeps every log
    /// in a file. Most attempts print a few lines: a file each would cost
    /// an inode and a directory entry apiece.
    pub inline_bytes_max: usize,
    /// How long an attempt's first lines wait in memory to be kept inline:
    /// past it they go to a file, which followers read as it grows.
    pub inline_hold_ms: u64,
}

impl Default for LogLimits {
    fn default() -> Self {
        LogLimits {
            head_bytes_max: 5 << 20,
            tail_bytes_max: 5 << 20,
            line_bytes_max: 64 << 10,
            stderr_tail_lines_max: 20,
            stderr_tail_bytes_max: 4 << 10,
            queue_chunks_max: 256,
            inline_bytes_max: 4 << 10,
            inline_hold_ms: 1_000,
        }
    }
}

/// Which output a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
    /// Not output: the marker where lines were dropped.
    Cut,
}

/// One line of an attempt's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogLine {
    /// Its number among the attempt's lines, from 0, counting dropped
    /// lines; a `cut` line carries the number of the first dropped one.
    pub line: u64,
    /// When it was read from the command's pipe, in ms since the epoch.
    pub ts_ms: u64,
    /// Where it came from.
    pub stream: Stream,
    /// Its text, without the newline.
    pub text: String,
}

/// Lines read from an attempt's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LogChunk {
    /// The lines, in order.
    pub lines: Vec<LogLine>,
    /// The line number to ask for next.
    pub next_line: u64,
    /// The attempt has ended and no line is left after these.
    pub finished: bool,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The command exited 0 and its output was taken.
    Succeeded,
    /// It could not start, exited non-zero or was killed by a signal.
    Failed,
    /// The node's timeout passed; its process group was killed.
    TimedOut,
    /// The ticket was cancelled or the engine stopped; its process group
    /// was killed.
    Cancelled,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
        })
    }
}

/// What is known of one attempt (`<attempt>.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AttemptRecord {
    /// The run id or job key.
    pub run_id: String,
    /// The attempt, from 1.
    pub attempt: u32,
    /// When it started, in ms since the epoch.
    pub started_ms: u64,
    /// When it ended; absent while it runs (or if the process died first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_ms: Option<u64>,
    /// How it ended; absent while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The command's exit code, when it exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The last lines of its stderr (bounded by [`LogLimits`]).
    #[serde(default)]
    pub stderr_tail: Vec<String>,
    /// Text bytes (each line's text and newline) the command wrote.
    #[serde(default)]
    pub bytes_logged: u64,
    /// Lines the command wrote (pieces of split lines count apart).
    #[serde(default)]
    pub lines_logged: u64,
    /// Text bytes dropped from the middle of the log.
    #[serde(default)]
    pub bytes_cut: u64,
    /// Lines dropped from the middle of the log.
    #[serde(default)]
    pub lines_cut: u64,
    /// Writing the log failed (the error was traced); the log stops there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_error: Option<String>,
    /// The whole log, in the log file's line format, when it was small and
    /// the attempt short (see [`LogLimits::inline_bytes_max`]): such an
    /// attempt has no log file. Read it with the log readers, which take
    /// it as they take a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_inline: Option<String>,
}

/// Why logs could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LogError {
    /// The run id cannot name a log folder.
    #[error("logs: run id {run_id:?} cannot name a log folder: {why}")]
    BadRunId {
        /// The run id (its first 200 characters).
        run_id: String,
        /// What is wrong with it.
        why: String,
    },
    /// No such attempt or log.
    #[error("logs: {path}: not found", path = .path.display())]
    NotFound {
        /// The file looked for.
        path: PathBuf,
    },
    /// A file could not be read or written.
    #[error("logs: {path}: {error}", path = .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        error: String,
    },
    /// A file does not hold what it should.
    #[error("logs: {path}: line {line}: {why}", path = .path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The line (from 1; 0 for a whole JSON file).
        line: u64,
        /// What is wrong.
        why: String,
    },
}

impl LogError {
    pub(crate) fn io(path: &Path, e: &std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            LogError::NotFound {
                path: path.to_path_buf(),
            }
        } else {
            LogError::Io {
                path: path.to_path_buf(),
                error: e.to_string(),
            }
        }
    }
}
