//! Logs and attempt history of command tasks, kept as plain files in the
//! data directory so they can be read with or without a running engine.
//!
//! Layout: `DATA/logs/<run id or job key>/<attempt>.log` holds an attempt's
//! stdout and stderr, one line per line of output (see [`mod@format`] for the
//! line format, readable with `cat`), and `<attempt>.json` beside it its
//! [`AttemptRecord`]. A run id `graph/partition/node/rerun` is a path of
//! four folders; a plain job's key (which never holds `/`) is one folder.
//! Every component is checked ([`LogPaths::run_dir`]): no empty, `.` or
//! `..` component, so no id can name a file outside `DATA/logs`.
//!
//! Bounds ([`LogLimits`]): an attempt keeps its first `head_bytes_max`
//! bytes of log and its last `tail_bytes_max`; what is dropped between them
//! is replaced by one `cut` line saying how many bytes and lines went. A
//! line longer than `line_bytes_max` is split into pieces. Invalid UTF-8 is
//! kept lossily.
//!
//! Writing ([`writer`]) never fails or stalls an attempt on a log error: an
//! error is traced at WARN and that attempt's log stops. The record is
//! written when the attempt starts (without its end) and again when it
//! ends, each time to a temporary file renamed over the old one, so a reader
//! never sees half a record. A crash in between leaves a record without an
//! end; the next attempt's record shows it was superseded.
//!
//! Line numbers: every line the command produced has a number from 0,
//! counting the dropped ones, so a follower's position stays valid when the
//! writer cuts the middle of a running attempt's log. A `cut` line stands
//! for the dropped lines (`line` is the first of them).
//!
//! Expiry: the supervisor's expiry pass removes `logs/<graph>/<partition>/`
//! with the run's records and a plain job's attempt files with its done
//! record (weir-actors holds that copy of the layout; [`remove_run`] and
//! [`remove_job`] are the same removals for tools).

pub mod format;
pub mod intake;
pub mod reader;
pub mod writer;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use reader::{attempts, follow, read};
pub use writer::{AttemptEnd, AttemptLog, LogSink, RemoteLog};

/// The folder of logs under a data directory.
pub const LOGS_DIR: &str = "logs";
/// The longest run id or job key accepted as a log folder, in bytes.
pub const RUN_ID_BYTES_MAX: usize = 2048;

/// Where logs live: `DATA/logs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogPaths {
    root: PathBuf,
}

impl LogPaths {
    /// The logs of the data directory `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        LogPaths {
            root: data_dir.join(LOGS_DIR),
        }
    }

    /// Logs kept in `root` itself (an engine's `logs_dir`).
    pub fn from_root(root: &Path) -> Self {
        LogPaths {
            root: root.to_path_buf(),
        }
    }

    /// `DATA/logs`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of a run id or job key, refused when a component is
    /// empty, `.` or `..` or holds a NUL or `\`, or the id is too long.
    pub fn run_dir(&self, run_id: &str) -> Result<PathBuf, LogError> {
        let bad = |why: String| LogError::BadRunId {
            run_id: run_id.chars().take(200).collect(),
            why,
        };
        if run_id.is_empty() {
            return Err(bad("it is empty".into()));
        }
        if run_id.len() > RUN_ID_BYTES_MAX {
            return Err(bad(format!(
                "it is {} bytes, over the limit of {RUN_ID_BYTES_MAX}",
                run_id.len()
            )));
        }
        let mut dir = self.root.clone();
        for (i, part) in run_id.split('/').enumerate() {
            match part {
                "" if i == 0 => return Err(bad("it is an absolute path".into())),
                "" => return Err(bad(format!("component {} is empty", i + 1))),
                "." | ".." => return Err(bad(format!("component {} is {part:?}", i + 1))),
                _ if part.contains(['\0', '\\']) => {
                    return Err(bad(format!(
                        "component {} holds a NUL or a backslash",
                        i + 1
                    )))
                }
                _ => dir.push(part),
            }
        }
        Ok(dir)
    }

    /// The log file of an attempt.
    pub fn log_file(&self, run_id: &str, attempt: u32) -> Result<PathBuf, LogError> {
        Ok(self.run_dir(run_id)?.join(format!("{attempt}.log")))
    }

    /// The record of an attempt.
    pub fn record_file(&self, run_id: &str, attempt: u32) -> Result<PathBuf, LogError> {
        Ok(self.run_dir(run_id)?.join(format!("{attempt}.json")))
    }
}

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
        }
    }
}

/// Which output a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogChunk {
    /// The lines, in order.
    pub lines: Vec<LogLine>,
    /// The line number to ask for next.
    pub next_line: u64,
    /// The attempt has ended and no line is left after these.
    pub finished: bool,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

fn invalid(e: LogError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
}

/// Removes the logs of a graph run (`logs/<graph>/<partition>/`); a run
/// without logs is no error.
pub fn remove_run(paths: &LogPaths, graph: &str, partition: &str) -> std::io::Result<()> {
    let dir = paths
        .run_dir(&format!("{graph}/{partition}"))
        .map_err(invalid)?;
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Removes the attempt files of a plain job (`logs/<key>/<n>.log|json`),
/// then its folder if nothing else is in it: a graph with the same name as
/// the key keeps its runs' folders there.
pub fn remove_job(paths: &LogPaths, key: &str) -> std::io::Result<()> {
    if key.contains('/') {
        return Err(invalid(LogError::BadRunId {
            run_id: key.to_string(),
            why: "a job key holds no /".into(),
        }));
    }
    let dir = paths.run_dir(key).map_err(invalid)?;
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        other => other?,
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_file() && attempt_file(&entry.file_name()).is_some() {
            std::fs::remove_file(entry.path())?;
        }
    }
    // Not empty: a graph's folders or a file someone else put there.
    let _ = std::fs::remove_dir(&dir);
    Ok(())
}

/// The attempt of a file name `<n>.log`, `<n>.json` or a temporary file
/// of one (`<n>.json.tmp`, `<n>.log.tmp`).
pub(crate) fn attempt_file(name: &std::ffi::OsStr) -> Option<u32> {
    let name = name.to_str()?;
    let name = name.strip_suffix(".tmp").unwrap_or(name);
    let stem = name
        .strip_suffix(".log")
        .or_else(|| name.strip_suffix(".json"))?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_map_to_folders_under_the_root() {
        let paths = LogPaths::new(Path::new("/data"));
        let ok = [
            ("g/2026-11-01/n/0", "/data/logs/g/2026-11-01/n/0"),
            ("job-7", "/data/logs/job-7"),
            (
                "g/key=web-2@2026-12-01T04:08:47.486Z/n/3",
                "/data/logs/g/key=web-2@2026-12-01T04:08:47.486Z/n/3",
            ),
            ("a..b/..c/c../n/0", "/data/logs/a..b/..c/c../n/0"),
        ];
        for (i, (id, want)) in ok.iter().enumerate() {
            assert_eq!(paths.run_dir(id).unwrap(), Path::new(want), "#{i}: {id}");
        }
        let refused = [
            "",
            "/etc/passwd",
            "..",
            "../x",
            "g/../../etc",
            "g/./n/0",
            "g//n/0",
            "g/p/n/",
            "g/p\0/n/0",
            "g/..\\..\\x/n/0",
        ];
        for (i, id) in refused.iter().enumerate() {
            let got = paths.run_dir(id);
            assert!(
                matches!(got, Err(LogError::BadRunId { .. })),
                "#{i}: {id:?} gave {got:?}"
            );
        }
        let long = "x".repeat(RUN_ID_BYTES_MAX + 1);
        assert!(paths.run_dir(&long).is_err());
        assert!(remove_run(&paths, "..", "x").is_err());
        assert!(remove_run(&paths, "g", "../..").is_err());
        assert!(remove_job(&paths, "../x").is_err());
    }

    #[test]
    fn attempt_file_names() {
        let cases = [
            ("1.log", Some(1)),
            ("12.json", Some(12)),
            ("3.json.tmp", Some(3)),
            ("x.log", None),
            (".log", None),
            ("+1.log", None),
            ("1.txt", None),
            ("none", None),
        ];
        for (i, (name, want)) in cases.iter().enumerate() {
            assert_eq!(
                attempt_file(std::ffi::OsStr::new(name)),
                *want,
                "#{i}: {name}"
            );
        }
    }

    #[test]
    fn job_removal_keeps_a_graphs_folders() {
        let dir = tempfile::tempdir().unwrap();
        let paths = LogPaths::new(dir.path());
        let job = paths.run_dir("g").unwrap();
        std::fs::create_dir_all(job.join("none/n/0")).unwrap();
        std::fs::write(job.join("1.log"), "x").unwrap();
        std::fs::write(job.join("1.json"), "{}").unwrap();
        std::fs::write(job.join("none/n/0/1.log"), "x").unwrap();
        remove_job(&paths, "g").unwrap();
        assert!(!job.join("1.log").exists());
        assert!(!job.join("1.json").exists());
        assert!(job.join("none/n/0/1.log").exists());
        remove_run(&paths, "g", "none").unwrap();
        assert!(!job.join("none").exists());
        remove_job(&paths, "g").unwrap();
        assert!(!job.exists());
        remove_job(&paths, "g").unwrap();
        remove_run(&paths, "g", "none").unwrap();
    }
}
