//! Graph definition files: TOML, one graph a file, or a folder of them.
//!
//! A file is read into [`GraphFile`] (unknown fields are errors, so a typo
//! is never silently ignored), converted into weir-core's `GraphDef` and
//! validated. Every error names the file, the line and the field, and every
//! fault of a file is reported, not the first only ([`DefinitionErrors`]),
//! so one `weir validate` lists all there is to fix (a TOML syntax error is
//! one fault: nothing after it can be read). The checks include what the
//! engine that will run the graphs provides ([`Registered`]: the `weir`
//! command has the `command` task and the pools the files declare), so what
//! validates is also adopted. Nothing of a bad file is adopted, and a
//! folder with one bad file adopts nothing. The format, field by field, is
//! in `docs/definitions.md`.
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

mod checks;
mod graph_checks;
mod node_checks;
mod shapes;
mod spans;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

pub use checks::parse_duration_ms;
use checks::Known;
pub use shapes::{GraphFile, NodeFile};
use spans::Lines;
use weir_core::breaker::BreakerSettings;
use weir_core::graph::{Graph, GraphError, POOL_DEFAULT};

use crate::task::command::COMMAND_TASK;

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

/// Every fault found in definitions, one per line when shown, in file and
/// line order. Never empty.
#[derive(Debug)]
pub struct DefinitionErrors(pub Vec<DefinitionError>);

impl std::fmt::Display for DefinitionErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for DefinitionErrors {}

impl From<DefinitionError> for DefinitionErrors {
    fn from(e: DefinitionError) -> Self {
        DefinitionErrors(vec![e])
    }
}

/// What the engine that will run the definitions provides, so that a node
/// it would refuse is a definition error with its line, not a refusal at
/// adoption. `None` accepts any name.
#[derive(Debug, Clone, Default)]
pub struct Registered {
    /// The task names registered with the engine.
    pub tasks: Option<BTreeSet<String>>,
    /// The pools the engine has beyond those the files declare.
    pub pools: Option<BTreeSet<String>>,
}

impl Registered {
    /// Any task and any pool (an embedding program that registers its own).
    pub fn any() -> Registered {
        Registered::default()
    }

    /// What the `weir` command's engine has: the `command`, `http` and
    /// `sensor` tasks, the pool `default` and the pools the definition files declare.
    pub fn command_line() -> Registered {
        Registered {
            tasks: Some(BTreeSet::from([
                COMMAND_TASK.to_string(),
                crate::task::http::HTTP_TASK.to_string(),
                crate::task::sensor::SENSOR_TASK.to_string(),
            ])),
            pools: Some(BTreeSet::from([POOL_DEFAULT.to_string()])),
        }
    }
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

/// The folder of a definition file: where its commands run and its relative
/// paths start. The folder of a bare file name (`etl.toml`) is the current
/// directory.
pub fn folder_of(file: &Path) -> PathBuf {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

/// Loads one file, or every `*.toml` file of a folder (sorted by name), for
/// the `weir` command's engine ([`Registered::command_line`]): every fault
/// of every file.
pub fn load(path: &Path) -> Result<Definitions, DefinitionErrors> {
    load_for(path, &Registered::command_line())
}

/// Loads one file, or every `*.toml` file of a folder (sorted by name), for
/// an engine that provides `registered`; every fault of every file is
/// reported, and nothing is returned when there is one.
pub fn load_for(path: &Path, registered: &Registered) -> Result<Definitions, DefinitionErrors> {
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
            return Err(err("the folder holds no .toml definition".into()).into());
        }
        let root = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        (files, root)
    } else {
        (vec![path.to_path_buf()], folder_of(path))
    };
    let mut errors = Vec::new();
    // Read every file first: the pools a folder declares are known to
    // every file of it.
    let mut read = Vec::new();
    for f in files {
        match read_file(&f) {
            Ok((text, file)) => read.push((f, text, file)),
            Err(e) => errors.push(e),
        }
    }
    let pools: Option<BTreeSet<String>> = registered.pools.as_ref().map(|base| {
        let mut all = base.clone();
        for (_, _, file) in &read {
            all.extend(file.declared_pools().cloned());
        }
        all
    });
    let known = Known {
        pools: pools.as_ref(),
        tasks: registered.tasks.as_ref(),
    };
    let mut defs = Definitions {
        root,
        ..Definitions::default()
    };
    let mut names: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (f, text, file) in read {
        let dir = folder_of(&f);
        let (graph, pools, targets) = match convert(file, &text, &f, &dir, known) {
            Ok(parts) => parts,
            Err(e) => {
                errors.extend(e);
                continue;
            }
        };
        let name = graph.name().to_string();
        if let Some(other) = names.insert(name.clone(), f.clone()) {
            errors.push(DefinitionError {
                file: f,
                line: None,
                what: format!("graph {name:?} is also defined in {}", other.display()),
            });
            continue;
        }
        for (p, c) in pools {
            let e = defs.pools.entry(p).or_insert(c);
            *e = (*e).max(c);
        }
        defs.targets.extend(targets);
        defs.graphs.push(Loaded { file: f, graph });
    }
    if errors.is_empty() {
        Ok(defs)
    } else {
        Err(DefinitionErrors(errors))
    }
}

type FileParts = (
    Graph,
    BTreeMap<String, u32>,
    BTreeMap<String, BreakerSettings>,
);

/// Loads and validates one file (any task, any pool: the engine that adopts
/// it judges those).
pub fn load_file(path: &Path) -> Result<FileParts, DefinitionErrors> {
    let (text, file) = read_file(path)?;
    convert(file, &text, path, &folder_of(path), Known::default()).map_err(DefinitionErrors)
}

/// A file's text and its TOML shape; a syntax error is one error.
fn read_file(path: &Path) -> Result<(String, GraphFile), DefinitionError> {
    let err = |what: String| DefinitionError {
        file: path.to_path_buf(),
        line: None,
        what,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(format!("cannot read: {e}")))?;
    if meta.len() > FILE_BYTES_MAX {
        return Err(err(format!(
            "{} bytes is over the limit of {FILE_BYTES_MAX}",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let file = parse_toml(&text, path, &Lines::new(&text))?;
    Ok((text, file))
}

fn parse_toml(text: &str, path: &Path, lines: &Lines) -> Result<GraphFile, DefinitionError> {
    toml::from_str(text).map_err(|e| DefinitionError {
        file: path.to_path_buf(),
        line: e.span().map(|s| lines.line_of(s.start)),
        what: e.message().trim().to_string(),
    })
}

/// Parses and validates definition text (`path` names it in errors; `dir`
/// is where its commands run by default): the first fault, when there is
/// one. See [`parse_all`].
pub fn parse(text: &str, path: &Path, dir: &Path) -> Result<FileParts, DefinitionError> {
    parse_all(text, path, dir).map_err(|e| e.0.into_iter().next().expect("never empty"))
}

/// Parses and validates definition text, reporting every fault, in line
/// order (a TOML syntax error is one fault: nothing after it can be read).
///
/// Linear in the size of the text: line numbers come from a table of line
/// starts built once ([`Lines`]), and an error's node is found by the name
/// it quotes, not by trying every node's name against the message.
pub fn parse_all(text: &str, path: &Path, dir: &Path) -> Result<FileParts, DefinitionErrors> {
    let file = parse_toml(text, path, &Lines::new(text))?;
    convert(file, text, path, dir, Known::default()).map_err(DefinitionErrors)
}

/// Converts a file's TOML shape into a validated graph: every field and
/// node fault, or (when there are none) the graph's own validation.
fn convert(
    file: GraphFile,
    text: &str,
    path: &Path,
    dir: &Path,
    known: Known<'_>,
) -> Result<FileParts, Vec<DefinitionError>> {
    let lines = Lines::new(text);
    let at = |line: Option<usize>, what: String| DefinitionError {
        file: path.to_path_buf(),
        line,
        what,
    };
    let field_lines = file.field_lines(&lines);
    let (def, pools, targets) = file.into_def(dir, &lines, known).map_err(|faults| {
        let mut errors: Vec<DefinitionError> = faults
            .into_iter()
            .map(|(line, what)| at(line, what))
            .collect();
        errors.sort_by_key(|e| e.line.unwrap_or(0));
        errors
    })?;
    let graph = def.validate().map_err(|e| {
        let msg = e.to_string();
        // Every declaration's line, in file order: a name declared twice
        // keeps both, so the duplicate error can point at the second one.
        // Made only here, for an error, from the text read again (it read
        // before): a valid file of 100,000 nodes does not pay for it.
        let mut node_lines: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        if let Ok(file) = toml::from_str::<GraphFile>(text) {
            for n in &file.nodes {
                node_lines
                    .entry(n.get_ref().name.clone())
                    .or_default()
                    .push(lines.line_of(n.span().start));
            }
        }
        let line = match &e {
            GraphError::BadSetting { field, .. } => {
                let top = field.split('.').next().unwrap_or(field);
                field_lines.get(top).copied()
            }
            GraphError::ZeroMaxActiveRuns { .. } => field_lines.get("max_active_runs").copied(),
            GraphError::ZeroPoolCapacity { .. } => field_lines.get("pools").copied(),
            GraphError::EmptyGraph { .. }
            | GraphError::TooManyNodes { .. }
            | GraphError::TooManyEdges { .. } => field_lines.get("name").copied(),
            GraphError::Cycle { path, .. } => path
                .first()
                .and_then(|n| node_lines.get(n.as_str()))
                .and_then(|l| l.first().copied()),
            // Point at the node the error names, when it names one; at its
            // second declaration when it is declared twice.
            _ => quoted_node(&msg).and_then(|name| {
                let at = node_lines.get(name)?;
                if msg.contains("declared more than once") {
                    at.get(1).or(at.first()).copied()
                } else {
                    at.first().copied()
                }
            }),
        };
        vec![at(line, msg)]
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
