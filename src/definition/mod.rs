//! Graph definition files: TOML, one graph a file, or a folder of them.
//!
//! A file is read into [`GraphFile`] (unknown fields are errors, so a typo
//! is never silently ignored), converted into weir-core's [`GraphDef`] and
//! validated. Every error names the file, the line and the field; nothing of
//! a bad file is adopted, and a folder with one bad file adopts nothing.
//!
//! ```toml
//! name = "etl"
//! partitioning = "daily"          # none | hourly | daily | weekly | monthly | keyed
//! cron = "0 2 * * *"              # optional: start the window each firing closes
//! catchup = false
//! retention = "7d"
//! max_active_runs = 4
//!
//! [pools]
//! default = 4
//!
//! [targets.warehouse]             # a breaker per target
//! failures = 3
//! cooldown = "30s"
//!
//! [[nodes]]
//! name = "extract"
//! command = ["python3", "extract.py", "{partition}"]
//! timeout = "5m"
//! retry = { attempts = 3, initial = "1s", multiplier = 2.0, max = "1m" }
//!
//! [[nodes]]
//! name = "load"
//! upstreams = ["extract"]
//! trigger_rule = "all_success"
//! target = "warehouse"
//! command = ["sh", "load.sh"]
//! permanent_exit_codes = [2]
//! ```

mod file;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use file::{GraphFile, NodeFile};
use weir_core::breaker::BreakerSettings;
use weir_core::graph::{Graph, GraphDef};

/// A definition error: what, and where.
#[derive(Debug, thiserror::Error)]
#[error("definition {}{}: {what}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct DefinitionError {
    /// The file.
    pub file: PathBuf,
    /// The line, when known.
    pub line: Option<usize>,
    /// What is wrong, naming the graph, node and field.
    pub what: String,
}

/// A loaded, validated graph with where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file.
    pub file: PathBuf,
    /// The validated graph.
    pub graph: Graph,
}

/// All graphs of a path, and the pools and targets they declare.
#[derive(Debug, Clone, Default)]
pub struct Definitions {
    /// The graphs, by file order.
    pub graphs: Vec<Loaded>,
    /// Pools and their capacities (the largest a file declares).
    pub pools: BTreeMap<String, u32>,
    /// Targets and their breaker settings.
    pub targets: BTreeMap<String, BreakerSettings>,
    /// The folder the definitions live in.
    pub root: PathBuf,
}

/// The largest definition file read, in bytes.
pub const FILE_BYTES_MAX: u64 = 4 << 20;

/// Loads one file, or every `*.toml` file of a folder (sorted by name).
pub fn load(path: &Path) -> Result<Definitions, DefinitionError> {
    let err = |what: String| DefinitionError {
        file: path.to_path_buf(),
        line: None,
        what,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let (files, root) = if meta.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| err(format!("cannot list: {e}")))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(err("the folder holds no .toml definition".into()));
        }
        (files, path.to_path_buf())
    } else {
        let root = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        (vec![path.to_path_buf()], root)
    };
    let root = std::fs::canonicalize(&root).unwrap_or(root);
    let mut defs = Definitions {
        root,
        ..Definitions::default()
    };
    let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
    for f in files {
        let (graph, pools, targets) = load_file(&f)?;
        let name = graph.name().to_string();
        if let Some(other) = names.insert(name.clone(), f.clone()) {
            return Err(DefinitionError {
                file: f,
                line: None,
                what: format!("graph {name:?} is also defined in {}", other.display()),
            });
        }
        for (p, c) in pools {
            let e = defs.pools.entry(p).or_insert(c);
            *e = (*e).max(c);
        }
        defs.targets.extend(targets);
        defs.graphs.push(Loaded { file: f, graph });
    }
    Ok(defs)
}

type FileParts = (
    Graph,
    BTreeMap<String, u32>,
    BTreeMap<String, BreakerSettings>,
);

/// Loads and validates one file.
pub fn load_file(path: &Path) -> Result<FileParts, DefinitionError> {
    let err = |line: Option<usize>, what: String| DefinitionError {
        file: path.to_path_buf(),
        line,
        what,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(None, format!("cannot read: {e}")))?;
    if meta.len() > FILE_BYTES_MAX {
        return Err(err(
            None,
            format!("{} bytes is over the limit of {FILE_BYTES_MAX}", meta.len()),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(None, format!("cannot read: {e}")))?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
    parse(&text, path, &dir)
}

/// Parses and validates definition text (`path` names it in errors; `dir`
/// is where its commands run by default).
///
/// Linear in the size of the text: line numbers come from a table of line
/// starts built once ([`Lines`]), and an error's node is found by the name
/// it quotes, not by trying every node's name against the message.
pub fn parse(text: &str, path: &Path, dir: &Path) -> Result<FileParts, DefinitionError> {
    let lines = Lines::new(text);
    let file: GraphFile = toml::from_str(text).map_err(|e| DefinitionError {
        file: path.to_path_buf(),
        line: e.span().map(|s| lines.line_of(s.start)),
        what: e.message().trim().to_string(),
    })?;
    // Every declaration's line, in file order: a name declared twice keeps
    // both, so the duplicate error can point at the second one.
    let mut node_lines: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for n in &file.nodes {
        node_lines
            .entry(n.get_ref().name.clone())
            .or_default()
            .push(lines.line_of(n.span().start));
    }
    let first_line = |name: &str| node_lines.get(name).and_then(|l| l.first().copied());
    let (def, pools, targets): (GraphDef, _, _) =
        file.into_def(dir)
            .map_err(|(line_node, what)| DefinitionError {
                file: path.to_path_buf(),
                line: line_node.as_deref().and_then(first_line),
                what,
            })?;
    let graph = def.validate().map_err(|e| {
        let msg = e.to_string();
        // Point at the node the error names, when it names one; at its
        // second declaration when it is declared twice.
        let line = quoted_node(&msg).and_then(|name| {
            let at = node_lines.get(name)?;
            if msg.contains("declared more than once") {
                at.get(1).or(at.first()).copied()
            } else {
                at.first().copied()
            }
        });
        DefinitionError {
            file: path.to_path_buf(),
            line,
            what: msg,
        }
    })?;
    Ok((graph, pools, targets))
}

/// The name in the first `node "NAME"` of a message. Node names are
/// `[A-Za-z0-9_.-]`, so their debug form has no escapes.
fn quoted_node(msg: &str) -> Option<&str> {
    let start = msg.find("node \"")? + "node \"".len();
    let len = msg[start..].find('"')?;
    Some(&msg[start..start + len])
}

/// Line numbers (from 1) of byte offsets in a text: the offsets where lines
/// start, found once, then a binary search per lookup.
pub(crate) struct Lines {
    /// Byte offset of the start of each line; the first is 0.
    starts: Vec<usize>,
}

impl Lines {
    /// The line table of `text`.
    pub(crate) fn new(text: &str) -> Lines {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { starts }
    }

    /// The line (from 1) that holds byte `offset`; an offset past the end
    /// is on the last line.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        // The starts at or before `offset` count the lines up to it.
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// Parses a duration like `500ms`, `30s`, `5m`, `1h`, `7d`.
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    humantime::parse_duration(s)
        .map(|d| d.as_millis() as u64)
        .map_err(|e| format!("duration {s:?}: {e} (write e.g. 500ms, 30s, 5m, 1h, 7d)"))
}
