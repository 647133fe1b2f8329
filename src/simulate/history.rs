//! `from_history` duration models: the durations a data directory
//! recorded, read from its store once the scenario is resolved.
//!
//! A ticket's done record keeps when its last attempt started and when it
//! ended; a node's recorded durations are those of its tickets that
//! succeeded (a mapped node's members included), the newest
//! [`EMPIRICAL_SAMPLES_MAX`] of them. A sensor's is the time from its
//! ticket's first due instant to its end: how long until its condition
//! held, which is what a sensor's model draws. Failed attempts are left
//! out: failures stay the scenario's to say.
//!
//! Matching is the other models' ([`Scope`]): a `from_history` model of a
//! graph and node with nothing recorded is an error naming them; a broader
//! one (a graph, a pool, every node) gives each of its nodes its own
//! recorded durations, and a node with none falls to the next model (or
//! the default) — unless none of its nodes has any, which is an error.
//!
//! The store is read only while no engine has it open (sled locks its
//! directory); a held one is refused, naming it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weir_actors::records::done::{DoneRecord, DoneStatus, DONE_PREFIX};
use weir_actors::records::keys::parse_node_key;
use weir_actors::store::{Store, StoreError};
use weir_core::graph::GraphDef;
use weir_core::simulate::model::{Empirical, EMPIRICAL_SAMPLES_MAX};

use super::scenario::{Durations, Scenario, ScenarioError, Scope};

/// Why recorded durations could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The scenario asks for durations the data directory did not record.
    #[error("{0}")]
    Missing(ScenarioError),
    /// The folder is not a data directory.
    #[error("data directory {0}: not a weir data directory (no store in it): from_history reads the durations `weir run` or `weir serve` recorded there; pass --data DIR")]
    NotData(PathBuf),
    /// An engine holds the store.
    #[error("data directory {0} is in use by a running engine: from_history reads its store only while no engine has it open; stop the engine, or read a copy: `weir backup FILE`, `weir restore FILE --data COPY`, then --data COPY")]
    InUse(PathBuf),
    /// The store could not be read.
    #[error("data directory {dir}: {what}")]
    Store {
        /// The data directory.
        dir: PathBuf,
        /// What failed.
        what: String,
    },
}

/// Each node's recorded durations, by (graph, node): (finished, ms) pairs.
type Recorded = BTreeMap<(String, String), Vec<(u64, u64)>>;

/// Reads the recorded durations of every node in the store at `data`;
/// `sensors` are the (graph, node) pairs that are sensors.
pub fn read(
    data: &Path,
    sensors: &std::collections::BTreeSet<(String, String)>,
) -> Result<BTreeMap<(String, String), Empirical>, HistoryError> {
    if !data.join("sled").exists() && !data.join("weir.lock").exists() {
        return Err(HistoryError::NotData(data.to_path_buf()));
    }
    let (store, _) = weir_actors::store::open_for_inspection(data).map_err(|e| match e {
        StoreError::InUse(dir) => HistoryError::InUse(dir),
        other => HistoryError::Store {
            dir: data.to_path_buf(),
            what: other.to_string(),
        },
    })?;
    let recorded = scan(&store, sensors).map_err(|e| HistoryError::Store {
        dir: data.to_path_buf(),
        what: e.to_string(),
    })?;
    Ok(recorded
        .into_iter()
        .filter_map(|(node, mut seen)| {
            // The newest first, so a model keeps the newest.
            seen.sort_unstable_by(|a, b| b.cmp(a));
            Empirical::new(seen.into_iter().map(|(_, ms)| ms)).map(|e| (node, e))
        })
        .collect())
}

/// The succeeded tickets' durations in `store`, per node.
fn scan(
    store: &Store,
    sensors: &std::collections::BTreeSet<(String, String)>,
) -> Result<Recorded, StoreError> {
    let mut out = Recorded::new();
    store.scan_each::<DoneRecord>(DONE_PREFIX, |_, record| {
        if record.status != DoneStatus::Succeeded {
            return;
        }
        let Some((id, _member)) = parse_node_key(&record.key) else {
            return;
        };
        let node = (id.graph, id.node);
        let from = if sensors.contains(&node) {
            Some(record.first_due_ms)
        } else {
            record.started_ms
        };
        let Some(from) = from else { return };
        let list = out.entry(node).or_default();
        list.push((record.finished_ms, record.finished_ms.saturating_sub(from)));
        // Bounded while scanning: the newest are kept.
        if list.len() > 2 * EMPIRICAL_SAMPLES_MAX {
            list.sort_unstable_by(|a, b| b.cmp(a));
            list.truncate(EMPIRICAL_SAMPLES_MAX);
        }
    })?;
    Ok(out)
}

/// Fills the `from_history` models of `scenario` from the data directory
/// `data`, for the graphs `graphs`; the store is not opened when the
/// scenario has none.
pub fn fill(
    scenario: &mut Scenario,
    graphs: &[&GraphDef],
    data: &Path,
) -> Result<(), HistoryError> {
    if scenario.history_lines.is_empty() {
        return Ok(());
    }
    let sensors = graphs
        .iter()
        .flat_map(|g| {
            g.nodes
                .iter()
                .filter(|n| n.sensor.is_some())
                .map(|n| (g.name.to_string(), n.name.to_string()))
        })
        .collect();
    let recorded = read(data, &sensors)?;
    let file = scenario.file.clone();
    let missing = |line: Option<usize>, what: String| {
        HistoryError::Missing(ScenarioError {
            file: file.clone(),
            line,
            what: format!(
                "durations: from_history: {what} in data directory {}",
                data.display()
            ),
        })
    };
    for (scope, line) in scenario.history_lines.clone() {
        let in_scope = |graph: &GraphDef, node: &weir_core::graph::NodeDef| match &scope {
            Scope::All => true,
            Scope::Pool(p) => node.pool.as_str() == p,
            Scope::Graph(g) => graph.name.as_str() == g,
            Scope::Node(g, n) => graph.name.as_str() == g && node.name.as_str() == n,
        };
        let mut models = BTreeMap::new();
        for g in graphs {
            for n in &g.nodes {
                let key = (g.name.to_string(), n.name.to_string());
                if in_scope(g, n) {
                    if let Some(e) = recorded.get(&key) {
                        models.insert(key, e.clone());
                    }
                }
            }
        }
        if models.is_empty() {
            let what = match &scope {
                Scope::Node(g, n) => {
                    format!("node {n:?} of graph {g:?} has no recorded durations (no attempt of it succeeded)")
                }
                Scope::Graph(g) => format!("no node of graph {g:?} has recorded durations"),
                Scope::Pool(p) => format!("no node of pool {p:?} has recorded durations"),
                Scope::All => "no node has recorded durations".to_string(),
            };
            return Err(missing(line, what));
        }
        scenario.durations.insert(scope, Durations::History(models));
    }
    Ok(())
}
