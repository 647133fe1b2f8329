//! Why a graph definition is not valid: one variant per fault, each
//! message naming the graph, the node and the field.

use crate::names::Name;
use crate::retry::RetryPolicyError;

/// Why a graph definition is not valid. Each message names the graph, the
/// node and the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GraphError {
    /// The graph has no nodes.
    #[error("graph {graph:?}: nodes: the graph has no nodes")]
    EmptyGraph {
        /// The graph.
        graph: Name,
    },
    /// The graph has more nodes than [`NODES_MAX`].
    #[error("graph {graph:?}: nodes: {count} nodes, over the limit of {max}")]
    TooManyNodes {
        /// The graph.
        graph: Name,
        /// Its node count.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// The graph has more edges than [`EDGES_MAX`].
    #[error("graph {graph:?}: upstreams: {count} edges, over the limit of {max}")]
    TooManyEdges {
        /// The graph.
        graph: Name,
        /// Its edge count.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Two nodes have the same name.
    #[error("graph {graph:?}: node {node:?}: name is declared more than once")]
    DuplicateNode {
        /// The graph.
        graph: Name,
        /// The name declared twice.
        node: Name,
    },
    /// An upstream names no node of the graph.
    #[error("graph {graph:?}: node {node:?}: upstream {upstream:?} is not a node of the graph")]
    UnknownUpstream {
        /// The graph.
        graph: Name,
        /// The node that lists the upstream.
        node: Name,
        /// The unknown name.
        upstream: Name,
    },
    /// A node lists itself as an upstream.
    #[error("graph {graph:?}: node {node:?}: upstreams: the node lists itself")]
    SelfDependency {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
    },
    /// A node lists the same upstream twice.
    #[error("graph {graph:?}: node {node:?}: upstream {upstream:?} is listed more than once")]
    DuplicateUpstream {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
        /// The upstream listed twice.
        upstream: Name,
    },
    /// The upstreams form a cycle; `path` runs downstream and ends where it
    /// starts.
    #[error("graph {graph:?}: upstreams: cycle {}", join_path(.path))]
    Cycle {
        /// The graph.
        graph: Name,
        /// The nodes of the cycle, each an upstream of the next, the first
        /// repeated at the end.
        path: Vec<Name>,
    },
    /// A node's pool is not among the graph's pools (checked only when the
    /// graph lists pools; [`POOL_DEFAULT`] is always known).
    #[error("graph {graph:?}: node {node:?}: pool {pool:?} is not one of the graph's pools")]
    UnknownPool {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
        /// The unknown pool.
        pool: Name,
    },
    /// A node's target is not among the graph's targets (checked only when
    /// the graph lists targets).
    #[error("graph {graph:?}: node {node:?}: target {target:?} is not one of the graph's targets")]
    UnknownTarget {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
        /// The unknown target.
        target: Name,
    },
    /// A node's retry policy is not valid.
    #[error("graph {graph:?}: node {node:?}: retry: {source}")]
    BadRetry {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
        /// What is wrong with the policy.
        source: RetryPolicyError,
    },
    /// A node's timeout is zero: no attempt could ever finish.
    #[error("graph {graph:?}: node {node:?}: timeout_ms: must be above 0")]
    ZeroTimeout {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
    },
    /// A pool has no slots: nothing in it could ever run.
    #[error("graph {graph:?}: pool {pool:?}: capacity must be above 0")]
    ZeroPoolCapacity {
        /// The graph.
        graph: Name,
        /// The pool.
        pool: Name,
    },
    /// `run_timeout` is zero: every run would fail as it starts.
    #[error("graph {graph:?}: run_timeout: must be above 0")]
    ZeroRunTimeout {
        /// The graph.
        graph: Name,
    },
    /// `max_active_runs` is zero: no run could ever start.
    #[error("graph {graph:?}: max_active_runs: must be above 0")]
    ZeroMaxActiveRuns {
        /// The graph.
        graph: Name,
    },
    /// A node's field is not valid (its mapping, its sensor, its assets).
    #[error("graph {graph:?}: node {node:?}: {field}: {what}")]
    BadNodeField {
        /// The graph.
        graph: Name,
        /// The node.
        node: Name,
        /// The field.
        field: &'static str,
        /// What is wrong.
        what: String,
    },
    /// A graph-level setting is not valid.
    #[error("graph {graph:?}: {field}: {what}")]
    BadSetting {
        /// The graph.
        graph: Name,
        /// The setting.
        field: &'static str,
        /// What is wrong.
        what: String,
    },
}

fn join_path(path: &[Name]) -> String {
    let names: Vec<&str> = path.iter().map(Name::as_str).collect();
    names.join(" -> ")
}
