//! One rule for where the data directory is, for every command:
//!
//! 1. `--data DIR`;
//! 2. else `$WEIR_DATA_DIR`;
//! 3. else, for commands given definitions (`run`, `serve`), `.weir` beside
//!    them — and that choice is recorded for the folder the command was
//!    run from, so later commands there find it;
//! 4. else (client commands) `./.weir` if it exists, else the directory
//!    recorded for the current folder by an earlier `run` or `serve`. Each
//!    `run` or `serve` from a folder is recorded with the graphs it adopted,
//!    so after `run examples/etl` and `run examples/fanout` from one folder,
//!    `weir status etl …` reads etl's store and `weir status fanout …`
//!    fanout's; a command that names no graph, or one several of them hold,
//!    is refused with the list rather than sent to a guess.
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

/// Data directories a folder used, at most, newest kept.
pub const PER_FOLDER_MAX: usize = 8;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Records {
    /// Folder → (data directory, when recorded in ms): the first form,
    /// one per folder, read and carried over into `used`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    dirs: BTreeMap<PathBuf, (PathBuf, u64)>,
    /// Folder → the data directories `run`/`serve` used from it.
    #[serde(default)]
    used: BTreeMap<PathBuf, Vec<Used>>,
}

/// A data directory used from a folder, with the graphs adopted into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Used {
    /// The data directory.
    pub data: PathBuf,
    /// The graphs the command adopted (empty: not known, an old record).
    #[serde(default)]
    pub graphs: Vec<String>,
    /// When, in ms since the epoch.
    pub at_ms: u64,
}

/// The graph a client command names, if any: it picks among several data
/// directories recorded for a folder.
static GRAPH_HINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Says which graph the command names (once, before any lookup).
pub fn hint_graph(graph: &str) {
    let _ = GRAPH_HINT.set(graph.to_string());
}

/// Of the data directories `used` from a folder (newest last), the one a
/// command naming `graph` means: the only one, or the only one holding
/// `graph`. Otherwise why not, listing them.
pub fn choose(used: &[Used], graph: Option<&str>, folder: &Path) -> Result<PathBuf, String> {
    let listed = || {
        used.iter()
            .rev()
            .map(|u| {
                if u.graphs.is_empty() {
                    u.data.display().to_string()
                } else {
                    format!("{} (graphs {})", u.data.display(), u.graphs.join(", "))
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    match (used, graph) {
        ([], _) => Err("none recorded".into()),
        ([one], _) => Ok(one.data.clone()),
        (several, Some(g)) => {
            let holders: Vec<&Used> = several
                .iter()
                .filter(|u| u.graphs.iter().any(|x| x == g))
                .collect();
            match holders.as_slice() {
                [one] => Ok(one.data.clone()),
                [] => Err(format!(
                    "graph {g:?} is in none of the {} data directories used from {}: {}; pass --data DIR",
                    several.len(),
                    folder.display(),
                    listed()
                )),
                _ => Err(format!(
                    "graph {g:?} is in {} of the data directories used from {}: {}; pass --data DIR",
                    holders.len(),
                    folder.display(),
                    listed()
                )),
            }
        }
        (several, None) => Err(format!(
            "{} data directories were used from {}: {}; pass --data DIR (or name a graph)",
            several.len(),
            folder.display(),
            listed()
        )),
    }
}

fn records_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("weir").join("data-dirs.json"))
}

fn load_records(path: &Path) -> Records {
    let mut r: Records = std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    // The first form, carried over.
    for (folder, (data, at_ms)) in std::mem::take(&mut r.dirs) {
        let list = r.used.entry(folder).or_default();
        if !list.iter().any(|u| u.data == data) {
            list.insert(
                0,
                Used {
                    data,
                    graphs: Vec::new(),
                    at_ms,
                },
            );
        }
    }
    r
}

/// Remembers `data` as a data directory used from the current folder,
/// holding `graphs` (best effort: a failure is logged, never fatal).
pub fn record(data: &Path, graphs: &[String]) {
    let (Some(path), Ok(cwd)) = (records_path(), std::env::current_dir()) else {
        return;
    };
    let abs = std::path::absolute(data).unwrap_or_else(|_| data.to_path_buf());
    let mut r = load_records(&path);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let list = r.used.entry(cwd).or_default();
    list.retain(|u| u.data != abs);
    list.push(Used {
        data: abs,
        graphs: graphs.to_vec(),
        at_ms: now,
    });
    if list.len() > PER_FOLDER_MAX {
        list.remove(0);
    }
    while r.used.len() > RECORDS_MAX {
        let oldest = r
            .used
            .iter()
            .min_by_key(|(_, l)| l.iter().map(|u| u.at_ms).max().unwrap_or(0))
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => r.used.remove(&k),
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
        let all = load_records(&path).used.remove(&cwd).unwrap_or_default();
        let (live, gone): (Vec<Used>, Vec<Used>) = all.into_iter().partition(|u| exists(&u.data));
        match choose(&live, GRAPH_HINT.get().map(String::as_str), &cwd) {
            Ok(d) => return Ok(d),
            Err(why) if !live.is_empty() => return Err(Failure::input(why)),
            Err(_) => {}
        }
        match gone.last() {
            Some(u) => tried.push(format!(
                "{} (recorded for {} in {}, but gone)",
                u.data.display(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn used(data: &str, graphs: &[&str]) -> Used {
        Used {
            data: PathBuf::from(data),
            graphs: graphs.iter().map(|g| g.to_string()).collect(),
            at_ms: 0,
        }
    }

    #[test]
    fn choose_table() {
        let here = Path::new("/repo");
        let etl = used("/repo/examples/etl/.weir", &["etl"]);
        let fan = used("/repo/examples/fanout/.weir", &["fanout"]);
        let both = [etl.clone(), fan.clone()];
        // (used, graph) -> the one, or words of the refusal
        type Case<'a> = (&'a [Used], Option<&'a str>, Result<&'a str, &'a [&'a str]>);
        let cases: &[Case] = &[
            (&[], None, Err(&["none recorded"])),
            (
                std::slice::from_ref(&etl),
                Some("fanout"),
                Ok("/repo/examples/etl/.weir"),
            ),
            (&both, Some("etl"), Ok("/repo/examples/etl/.weir")),
            (&both, Some("fanout"), Ok("/repo/examples/fanout/.weir")),
            (
                &both,
                None,
                Err(&[
                    "2 data directories were used from /repo",
                    "(graphs etl)",
                    "(graphs fanout)",
                    "--data",
                ]),
            ),
            (
                &both,
                Some("orders"),
                Err(&["graph \"orders\" is in none", "--data"]),
            ),
        ];
        for (i, (u, g, want)) in cases.iter().enumerate() {
            let got = choose(u, *g, here);
            match (want, &got) {
                (Ok(w), Ok(d)) => assert_eq!(d, Path::new(w), "#{i}"),
                (Err(words), Err(m)) => {
                    for w in words.iter() {
                        assert!(m.contains(w), "#{i}: {m:?} lacks {w:?}");
                    }
                }
                _ => panic!("#{i}: got {got:?}, want {want:?}"),
            }
        }
    }
}
