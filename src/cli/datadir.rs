//! One rule for where the data directory is, for every command:
//!
//! 1. `--data DIR`;
//! 2. else `$WEIR_DATA_DIR`;
//! 3. else, for commands given definitions (`run`, `serve`), `.weir` beside
//!    them — and that choice is recorded for the folder the command was
//!    run from, so later commands there find it;
//! 4. else (client commands) `./.weir` if it exists, else the directory
//!    recorded for the current folder by an earlier `run` or `serve`.
//!
//! The record lives outside the project: `$XDG_STATE_HOME/weir/data-dirs.json`
//! (default `~/.local/state/weir/`), a map from folder to data directory,
//! bounded to the newest [`RECORDS_MAX`] folders. An error that finds no
//! data directory lists every place it looked and what to pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::failure::Failure;

/// The environment variable naming the data directory.
pub const ENV_DATA_DIR: &str = "WEIR_DATA_DIR";
/// Folders whose data directory is remembered, at most.
pub const RECORDS_MAX: usize = 64;
/// The data directory's name beside the definitions or in `.`.
pub const DEFAULT_NAME: &str = ".weir";

#[derive(Debug, Default, Serialize, Deserialize)]
struct Records {
    /// Folder → (data directory, when recorded in ms).
    dirs: BTreeMap<PathBuf, (PathBuf, u64)>,
}

fn records_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("weir").join("data-dirs.json"))
}

fn load_records(path: &Path) -> Records {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Remembers `data` as the data directory of the current folder (best
/// effort: a failure is logged, never fatal).
pub fn record(data: &Path) {
    let (Some(path), Ok(cwd)) = (records_path(), std::env::current_dir()) else {
        return;
    };
    let abs = std::path::absolute(data).unwrap_or_else(|_| data.to_path_buf());
    let mut r = load_records(&path);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    r.dirs.insert(cwd, (abs, now));
    while r.dirs.len() > RECORDS_MAX {
        let oldest = r
            .dirs
            .iter()
            .min_by_key(|(_, (_, t))| *t)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => r.dirs.remove(&k),
            None => break,
        };
    }
    let write = || -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let bytes = serde_json::to_vec_pretty(&r).map_err(std::io::Error::other)?;
        crate::serve::discovery::write_private(&path, &bytes)
    };
    if let Err(e) = write() {
        tracing::debug!(file = %path.display(), error = %e, "cannot record the data directory");
    }
}

/// `dir` made absolute against the current directory: tasks run in their
/// definitions' folder (or a worker's root), so every path the engine hands
/// them (`WEIR_OUTPUT`, `WEIR_DATA`, logs) must not depend on where the
/// command was started.
pub fn absolute(dir: &Path) -> PathBuf {
    std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// The data directory of a command given definitions at `defs_root`,
/// absolute.
pub fn for_definitions(explicit: Option<&Path>, defs_root: &Path) -> PathBuf {
    if let Some(d) = explicit {
        return absolute(d);
    }
    if let Some(d) = std::env::var_os(ENV_DATA_DIR).filter(|d| !d.is_empty()) {
        return absolute(Path::new(&d));
    }
    absolute(&defs_root.join(DEFAULT_NAME))
}

/// The data directory of a client command, absolute; it must exist.
pub fn for_client(explicit: Option<&Path>) -> Result<PathBuf, Failure> {
    find_for_client(explicit).map(|d| absolute(&d))
}

fn find_for_client(explicit: Option<&Path>) -> Result<PathBuf, Failure> {
    let mut tried = Vec::new();
    let exists = |p: &Path| p.join("sled").is_dir() || p.join("engine.json").is_file();
    if let Some(d) = explicit {
        if exists(d) {
            return Ok(d.to_path_buf());
        }
        return Err(Failure::input(format!(
            "--data {}: not a weir data directory (no store in it); run `weir run` or `weir serve` with it first",
            d.display()
        )));
    }
    tried.push("--data (not given)".to_string());
    match std::env::var_os(ENV_DATA_DIR).filter(|d| !d.is_empty()) {
        Some(d) => {
            let d = PathBuf::from(d);
            if exists(&d) {
                return Ok(d);
            }
            return Err(Failure::input(format!(
                "${ENV_DATA_DIR}={}: not a weir data directory (no store in it)",
                d.display()
            )));
        }
        None => tried.push(format!("${ENV_DATA_DIR} (not set)")),
    }
    let local = PathBuf::from(DEFAULT_NAME);
    if exists(&local) {
        return Ok(local);
    }
    tried.push(format!("./{DEFAULT_NAME} (absent)"));
    if let (Some(path), Ok(cwd)) = (records_path(), std::env::current_dir()) {
        match load_records(&path).dirs.get(&cwd) {
            Some((d, _)) if exists(d) => return Ok(d.clone()),
            Some((d, _)) => tried.push(format!(
                "{} (recorded for {} in {}, but gone)",
                d.display(),
                cwd.display(),
                path.display()
            )),
            None => tried.push(format!(
                "the directory `weir run`/`weir serve` recorded for {} in {} (none)",
                cwd.display(),
                path.display()
            )),
        }
    }
    Err(Failure::input(format!(
        "no data directory found; tried {}. Pass --data DIR or set {ENV_DATA_DIR} (a `weir run PATH` keeps its data in PATH/{DEFAULT_NAME})",
        tried.join(", ")
    )))
}
