//! Where logs live (`DATA/logs/<run id or job key>/<attempt>.log`, the
//! records in one file a run),
//! with every component of an id checked, and the removals the expiry pass
//! makes (the same removals for tools).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::record::LogError;

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
    /// empty, `.` or `..`, or the id is too long. A component too long for
    /// a file name, or holding a `\\`, is named by
    /// [`weir_core::names::path_component`] (its head and a hash), so every
    /// valid key keeps its logs.
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
                _ => dir.push(weir_core::names::path_component(part).as_ref()),
            }
        }
        Ok(dir)
    }

    /// The log file of an attempt.
    pub fn log_file(&self, run_id: &str, attempt: u32) -> Result<PathBuf, LogError> {
        Ok(self.run_dir(run_id)?.join(format!("{attempt}.log")))
    }

    /// The record of an attempt in the layout before records were kept
    /// in one file a run (still read, never written).
    pub fn record_file(&self, run_id: &str, attempt: u32) -> Result<PathBuf, LogError> {
        Ok(self.run_dir(run_id)?.join(format!("{attempt}.json")))
    }

    /// The file every attempt record of a run id is appended to: in the
    /// folder of its graph run (`logs/<graph>/<partition>/`) for a task
    /// instance (`graph/partition/node/rerun`) or a mapped member (one
    /// component more), in the job's folder for a plain job's key.
    pub fn records_file(&self, run_id: &str) -> Result<PathBuf, LogError> {
        let run_dir = self.run_dir(run_id)?;
        let below_run = run_id.split('/').count().saturating_sub(2);
        let dir = run_dir
            .ancestors()
            .nth(below_run)
            .unwrap_or(&run_dir)
            .to_path_buf();
        Ok(dir.join(weir_core::names::ATTEMPT_RECORDS_FILE))
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

/// Removes the attempt files of a plain job (`logs/<key>/<n>.log` and its
/// records),
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
        if entry.file_type()?.is_file() && is_job_file(&entry.file_name()) {
            std::fs::remove_file(entry.path())?;
        }
    }
    // Not empty: a graph's folders or a file someone else put there.
    let _ = std::fs::remove_dir(&dir);
    Ok(())
}

/// Whether a file in a job's folder is one of its attempts' files: a log,
/// a record (either layout) or a temporary file of one.
fn is_job_file(name: &std::ffi::OsStr) -> bool {
    name == weir_core::names::ATTEMPT_RECORDS_FILE || attempt_file(name).is_some()
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
