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
//!    fanout's. Among several that hold the graph (or among all, for a
//!    command that names none), the one whose engine runs is read when
//!    only one's does; otherwise the command is refused with the list
//!    rather than sent to a guess. Commands `weir run` prints carry
//!    `--data` whenever the same command typed here would read another.
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
/// `graph`; among several (holding it, or any when no graph is named), the
/// only one whose engine runs (`live`): a second data directory that once
/// ran the same graph must not make every plain command from the folder
/// refuse while one engine is up. Otherwise why not, listing them.
pub fn choose(
    used: &[Used],
    graph: Option<&str>,
    folder: &Path,
    live: &dyn Fn(&Path) -> bool,
) -> Result<PathBuf, String> {
    let listed = || {
        used.iter()
            .rev()
            .map(|u| {
                let mut item = u.data.display().to_string();
                if !u.graphs.is_empty() {
                    item.push_str(&format!(" (graphs {})", u.graphs.join(", ")));
                }
                if live(&u.data) {
                    item.push_str(" (its engine runs)");
                }
                item
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    // The one of `several` whose engine runs, if exactly one's does.
    let only_live = |several: &[&Used]| -> Option<PathBuf> {
        match several
            .iter()
            .filter(|u| live(&u.data))
            .collect::<Vec<_>>()
            .as_slice()
        {
            [one] => Some(one.data.clone()),
            _ => None,
        }
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
                _ => only_live(&holders).ok_or_else(|| {
                    format!(
                        "graph {g:?} is in {} of the data directories used from {}{}: {}; pass --data DIR",
                        holders.len(),
                        folder.display(),
                        live_count(&holders, live),
                        listed()
                    )
                }),
            }
        }
        (several, None) => {
            let all: Vec<&Used> = several.iter().collect();
            only_live(&all).ok_or_else(|| {
                format!(
                    "{} data directories were used from {}{}: {}; pass --data DIR (or name a graph)",
                    several.len(),
                    folder.display(),
                    live_count(&all, live),
                    listed()
                )
            })
        }
    }
}

/// How many of `several` have a running engine, said when it is not one
/// (the case [`choose`] decides by itself).
fn live_count(several: &[&Used], live: &dyn Fn(&Path) -> bool) -> String {
    match several.iter().filter(|u| live(&u.data)).count() {
        0 => ", and no engine runs on any of them".to_string(),
        n => format!(", and engines run on {n} of them"),
    }
}

/// Whether an engine runs on data directory `data`: its `engine.json`
/// names a live process.
pub fn engine_runs(data: &Path) -> bool {
    matches!(
        crate::serve::discovery::find_engine(data),
        Ok(Some(info)) if crate::serve::discovery::pid_alive(info.pid)
    )
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
    find_for_client(explicit, GRAPH_HINT.get().map(String::as_str)).map(|d| absolute(&d))
}

/// Whether a client command naming `graph` (or none), run from the
/// current folder without `--data`, reads `data`: when not, a command
/// printed for the user to type must carry `--data`.
pub fn client_finds(graph: Option<&str>, data: &Path) -> bool {
    let canonical = |p: &Path| p.canonicalize().ok();
    find_for_client(None, graph)
        .ok()
        .and_then(|d| canonical(&d))
        .is_some_and(|d| Some(d) == canonical(data))
}

/// `path` as a shell word: as it is when it needs no quoting, else in
/// single quotes, so that a printed command works when pasted.
pub fn shell_word(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn find_for_client(explicit: Option<&Path>, graph: Option<&str>) -> Result<PathBuf, Failure> {
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
        let (present, gone): (Vec<Used>, Vec<Used>) =
            all.into_iter().partition(|u| exists(&u.data));
        match choose(&present, graph, &cwd, &engine_runs) {
            Ok(d) => return Ok(d),
            Err(why) if !present.is_empty() => return Err(Failure::input(why)),
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

    /// `choose`, one row per case: (recorded, graph named, data
    /// directories whose engine runs) -> the one, or words of the refusal.
    /// The rule: the only one recorded; else the only one holding the
    /// graph; else, among the holders (all, with no graph named), the
    /// only one whose engine runs (issue #43 item 2).
    #[test]
    fn choose_table() {
        let here = Path::new("/repo");
        let etl = used("/repo/examples/etl/.weir", &["etl"]);
        let fan = used("/repo/examples/fanout/.weir", &["fanout"]);
        let etl2 = used("/tmp/other", &["etl"]);
        let both = [etl.clone(), fan.clone()];
        let twice = [etl.clone(), etl2.clone(), fan.clone()];
        type Case<'a> = (
            &'a [Used],
            Option<&'a str>,
            &'a [&'a str],
            Result<&'a str, &'a [&'a str]>,
        );
        let cases: &[Case] = &[
            (&[], None, &[], Err(&["none recorded"])),
            (
                std::slice::from_ref(&etl),
                Some("fanout"),
                &[],
                Ok("/repo/examples/etl/.weir"),
            ),
            (&both, Some("etl"), &[], Ok("/repo/examples/etl/.weir")),
            (
                &both,
                Some("fanout"),
                &[],
                Ok("/repo/examples/fanout/.weir"),
            ),
            (
                &both,
                None,
                &[],
                Err(&[
                    "2 data directories were used from /repo",
                    "no engine runs on any of them",
                    "(graphs etl)",
                    "(graphs fanout)",
                    "--data",
                ]),
            ),
            (
                &both,
                Some("orders"),
                &[],
                Err(&["graph \"orders\" is in none", "--data"]),
            ),
            // The same graph in two: refused while no engine runs, or
            // both run; the one whose engine runs otherwise.
            (
                &twice,
                Some("etl"),
                &[],
                Err(&[
                    "graph \"etl\" is in 2 of the data directories",
                    "no engine runs on any of them",
                    "--data",
                ]),
            ),
            (&twice, Some("etl"), &["/tmp/other"], Ok("/tmp/other")),
            (
                &twice,
                Some("etl"),
                &["/repo/examples/etl/.weir"],
                Ok("/repo/examples/etl/.weir"),
            ),
            // An engine on a data directory without the graph does not
            // count.
            (
                &twice,
                Some("etl"),
                &["/repo/examples/fanout/.weir"],
                Err(&["is in 2 of the data directories", "no engine runs"]),
            ),
            (
                &twice,
                Some("etl"),
                &["/tmp/other", "/repo/examples/etl/.weir"],
                Err(&[
                    "engines run on 2 of them",
                    "/tmp/other (graphs etl) (its engine runs)",
                    "--data",
                ]),
            ),
            // No graph named: the only engine running.
            (
                &twice,
                None,
                &["/repo/examples/fanout/.weir"],
                Ok("/repo/examples/fanout/.weir"),
            ),
            (
                &twice,
                None,
                &["/repo/examples/fanout/.weir", "/tmp/other"],
                Err(&["3 data directories were used", "engines run on 2 of them"]),
            ),
        ];
        for (i, (u, g, running, want)) in cases.iter().enumerate() {
            let live = |p: &Path| running.iter().any(|r| Path::new(r) == p);
            let got = choose(u, *g, here, &live);
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

    #[test]
    fn shell_words() {
        for (path, want) in [
            ("/tmp/weir-m1/.weir", "/tmp/weir-m1/.weir"),
            ("/home/a b/.weir", "'/home/a b/.weir'"),
            ("/x/it's", "'/x/it'\\''s'"),
        ] {
            assert_eq!(shell_word(Path::new(path)), want, "{path}");
        }
    }
}
