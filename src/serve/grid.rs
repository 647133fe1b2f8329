//! A graph's grid (Airflow's grid view): its runs as columns, newest
//! partition first, its nodes as rows, each cell a node's state in that
//! run. One request draws the grid; it reads a page of runs and their node
//! records, not every run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_core::graph::GraphDef;
use weir_core::partition::Partition;

use weir_actors::scheduler::records::RunState;
use weir_actors::scheduler::view;
use weir_actors::store::Store;

use super::views::{self, QueryError, RunQuery};

/// Runs a grid page holds by default.
pub const GRID_PAGE_DEFAULT: usize = 25;
/// Runs a grid page holds at most.
pub const GRID_PAGE_MAX: usize = 200;

/// A node's state in one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GridCell {
    /// pending, ready, succeeded, failed, skipped, upstream_failed, cancelled.
    pub state: String,
    /// Its current instance's rerun count.
    pub rerun: u32,
    /// Attempts of its current record.
    pub attempts: u32,
}

/// One run: a column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GridColumn {
    /// The partition.
    pub partition: String,
    /// The run's state.
    pub state: RunState,
    /// When it started.
    pub requested_at_ms: u64,
    /// When it settled.
    pub settled_at_ms: Option<u64>,
    /// Whether it, or a node of it, missed an SLA.
    #[serde(default)]
    pub sla_missed: bool,
    /// One cell per row of [`Grid::nodes`]; `None` where the run's
    /// definition has no such node.
    pub cells: Vec<Option<GridCell>>,
}

/// A page of a graph's grid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Grid {
    /// The graph.
    pub graph: String,
    /// The rows: the adopted definition's nodes in topological order, then
    /// nodes only older definitions of the shown runs have.
    pub nodes: Vec<String>,
    /// The columns, newest partition first.
    pub runs: Vec<GridColumn>,
    /// Pass as `cursor` for the next (older) page; absent on the last.
    pub next_cursor: Option<String>,
}

/// The grid of `graph` (adopted as `def`): `limit` runs after `cursor`.
pub fn grid(
    store: &Store,
    graph: &str,
    def: &GraphDef,
    limit: Option<usize>,
    cursor: Option<String>,
) -> Result<Grid, QueryError> {
    let limit = limit.unwrap_or(GRID_PAGE_DEFAULT);
    if limit == 0 || limit > GRID_PAGE_MAX {
        return Err(QueryError::Bad(format!(
            "limit: {limit} is not within 1..={GRID_PAGE_MAX}"
        )));
    }
    let page = views::list_runs(
        store,
        &RunQuery {
            graph: Some(graph.to_string()),
            limit: Some(limit),
            cursor,
            ..RunQuery::default()
        },
    )?;
    let mut nodes: Vec<String> = match def.clone().validate() {
        Ok(g) => g
            .topological_order()
            .iter()
            .map(|&i| g.node_at(i).name.to_string())
            .collect(),
        Err(_) => def.nodes.iter().map(|n| n.name.to_string()).collect(),
    };
    let mut columns: Vec<(GridColumn, BTreeMap<String, GridCell>)> = Vec::new();
    for r in &page.runs {
        let Ok(p) = r.partition.parse::<Partition>() else {
            continue;
        };
        let Some(v) = view::graph_run(store, graph, &p)? else {
            // Expired between the listing and this read.
            continue;
        };
        let mut cells = BTreeMap::new();
        for n in v.nodes {
            if !nodes.contains(&n.node) {
                nodes.push(n.node.clone());
            }
            cells.insert(
                n.node,
                GridCell {
                    state: n.state,
                    rerun: n.rerun,
                    attempts: n.attempts,
                },
            );
        }
        columns.push((
            GridColumn {
                partition: v.partition,
                state: v.state,
                requested_at_ms: v.requested_at_ms,
                settled_at_ms: v.settled_at_ms,
                sla_missed: r.sla_missed,
                cells: Vec::new(),
            },
            cells,
        ));
    }
    let runs = columns
        .into_iter()
        .map(|(mut c, mut cells)| {
            c.cells = nodes.iter().map(|n| cells.remove(n)).collect();
            c
        })
        .collect();
    Ok(Grid {
        graph: graph.to_string(),
        nodes,
        runs,
        next_cursor: page.next_cursor,
    })
}
