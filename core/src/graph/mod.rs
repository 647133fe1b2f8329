//! Graph definitions: the model a user writes, its validation, and the
//! indexed form every other decision reads.
//!
//! A [`GraphDef`] is what a definition file (or an embedding program)
//! declares: a name, nodes with their upstreams, trigger rules, pools,
//! targets, retry policies and tasks, and the graph-level settings
//! (partitioning, pools, targets, retention, run limit, cron). It is plain
//! data and may be wrong. [`GraphDef::validate`] checks it once and builds a
//! [`Graph`]: the same definition plus a name index, upstream and downstream
//! index lists, a topological order and the roots, so that readiness can
//! walk edges by index without a lookup per step. A `Graph` cannot be built
//! any other way, so code that holds one never re-checks it.
//!
//! Validation is O(nodes + edges) with no recursion: Kahn's algorithm finds
//! the order, and a walk over the nodes it could not order finds a cycle to
//! report. A 100,000-node chain validates without growing the stack.
//!
//! The content hash ([`Graph::hash`]) identifies a definition: a graph run
//! keeps the hash of the definition it started with, and adopting a
//! definition compares hashes. It is computed over a canonical encoding —
//! nodes sorted by name, upstreams sorted, object keys sorted — so the order
//! in which nodes and upstreams are written does not change it, and any
//! change of content does.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::mapped::{MapSource, MapSpec};
use crate::names::Name;
use crate::partition::Partitioning;
use crate::retry::RetryPolicy;
use crate::sensor::SensorPolicy;
use crate::trigger::TriggerRule;

mod error;
pub use error::GraphError;

/// The most nodes a graph may have.
pub const NODES_MAX: usize = 100_000;
/// The most edges (upstream links) a graph may have, over all its nodes.
pub const EDGES_MAX: usize = 1_000_000;
/// How long settled runs and their records are kept when the definition
/// does not say: 7 days, in ms.
pub const RETENTION_MS_DEFAULT: u64 = 7 * 24 * 60 * 60 * 1_000;
/// Active runs of one graph at once when the definition does not say
/// (Airflow's `max_active_runs_per_dag`).
pub const MAX_ACTIVE_RUNS_DEFAULT: u32 = 16;
/// The pool of a node that names none. It is always a known pool, also when
/// the graph lists its pools.
pub const POOL_DEFAULT: &str = "default";
/// The task name of a command task.
pub const TASK_COMMAND: &str = "command";

/// Prefixed to the canonical encoding before hashing, so that a change of
/// the encoding changes every hash rather than colliding with old ones.
const HASH_DOMAIN: &str = "weir.graph.v1\n";

fn retention_ms_default() -> u64 {
    RETENTION_MS_DEFAULT
}

fn max_active_runs_default() -> u32 {
    MAX_ACTIVE_RUNS_DEFAULT
}

fn pool_default() -> Name {
    Name::new(POOL_DEFAULT).expect("the default pool name is valid")
}

/// A graph as declared: plain data, not yet validated.
///
/// The settings beyond `name` and `nodes` take their defaults when absent;
/// their own modules give them meaning (`partition`, `pool`, `breaker`,
/// `cron`, `schedule`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphDef {
    /// The graph's name.
    pub name: Name,
    /// The nodes, in declaration order.
    pub nodes: Vec<NodeDef>,
    /// How runs are partitioned.
    #[serde(default)]
    pub partitioning: Partitioning,
    /// Pools the graph's nodes use, by name, with their capacity in slots.
    /// Empty means "not given": any pool name is accepted.
    #[serde(default)]
    pub pools: BTreeMap<Name, u32>,
    /// Targets (guarded by a breaker each) by name, with their breaker
    /// settings. Empty means "not given": any target name is accepted.
    #[serde(default)]
    pub targets: BTreeMap<Name, crate::breaker::BreakerSettings>,
    /// How long settled runs and their records are kept, in ms.
    #[serde(default = "retention_ms_default")]
    pub retention_ms: u64,
    /// The most runs of this graph active at once.
    #[serde(default = "max_active_runs_default")]
    pub max_active_runs: u32,
    /// The cron expression that starts runs, if any.
    #[serde(default)]
    pub cron: Option<String>,
    /// Whether a cron graph starts every window missed while down (`true`)
    /// or only the newest (`false`).
    #[serde(default)]
    pub catchup: bool,
    /// The inventory and schedule of a keyed graph, if any.
    #[serde(default)]
    pub keyed: Option<crate::keyed::KeyedSpec>,
    /// The start of the first window the triggers start (ms since the
    /// epoch): cron never starts a window before it, and with `catchup`
    /// every window from it to the newest closed one is started once the
    /// graph is first adopted (swale's initial catch-up). Absent from the
    /// encoding when unset, so older definitions keep their hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_ms: Option<u64>,
    /// The params a run takes, with their defaults (see `params`): a start
    /// may set them, cron firings and backfills take the defaults. Absent
    /// from the encoding when empty, so older definitions keep their hash.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
    /// A task run when a run settles failed (a notification): it gets the
    /// run's summary, never changes the run, and has its own small retry.
    /// Absent from the encoding when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<TaskSpec>,
    /// A task run when a run settles complete. Absent from the encoding
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<TaskSpec>,
    /// Assets whose materializations start runs of this graph (see
    /// `asset`): `[trigger] assets = [...]`. Absent from the encoding
    /// when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trigger_assets: Vec<Name>,
    /// A run still active this long after it started (its instant, for a
    /// run prepared ahead) fails: its live attempts are cancelled and its
    /// record names the timeout. Absent from the encoding when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<u64>,
    /// The zone of its windows and cron expression; `None` is UTC. Absent
    /// from the encoding when unset, so definitions without one keep their
    /// hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<crate::zone::Zone>,
    /// A run not complete this long after its window ends (its key fell
    /// due; it started, unpartitioned) has missed its SLA (see `sla`).
    /// Absent from the encoding when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_ms: Option<u64>,
    /// The notification run once per SLA miss, the miss as JSON on its
    /// stdin. Absent from the encoding when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_sla_miss: Option<TaskSpec>,
}

impl GraphDef {
    /// The zone of its windows and cron expression (UTC by default).
    pub fn zone(&self) -> crate::zone::Zone {
        self.timezone.unwrap_or_default()
    }

    /// Its cron expression, parsed and read in its zone; `None` without one
    /// (or with one that does not parse, which validation refuses).
    pub fn schedule(&self) -> Option<crate::cron::Schedule> {
        let expr = self.cron.as_deref()?;
        Some(
            crate::cron::Schedule::parse(expr)
                .ok()?
                .in_zone(self.zone()),
        )
    }

    /// A definition of `nodes` with every setting at its default.
    pub fn new(name: Name, nodes: Vec<NodeDef>) -> Self {
        GraphDef {
            name,
            nodes,
            partitioning: Partitioning::default(),
            pools: BTreeMap::new(),
            targets: BTreeMap::new(),
            retention_ms: RETENTION_MS_DEFAULT,
            max_active_runs: MAX_ACTIVE_RUNS_DEFAULT,
            cron: None,
            catchup: false,
            keyed: None,
            start_ms: None,
            params: BTreeMap::new(),
            on_failure: None,
            on_success: None,
            trigger_assets: Vec::new(),
            run_timeout_ms: None,
            timezone: None,
            sla_ms: None,
            on_sla_miss: None,
        }
    }

    /// Checks the definition and builds its indexed form.
    pub fn validate(self) -> Result<Graph, GraphError> {
        Graph::new(self)
    }
}

/// A node as declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeDef {
    /// The node's name, unique in its graph.
    pub name: Name,
    /// The nodes whose states decide when this one runs.
    #[serde(default)]
    pub upstreams: Vec<Name>,
    /// How the upstreams' states decide (default `all_success`).
    #[serde(default)]
    pub trigger_rule: TriggerRule,
    /// The pool whose slots run the node (default `default`).
    #[serde(default = "pool_default")]
    pub pool: Name,
    /// The target whose breaker guards the node's attempts, if any.
    #[serde(default)]
    pub target: Option<Name>,
    /// How failed attempts are retried.
    #[serde(default)]
    pub retry: RetryPolicy,
    /// How long one attempt may run, in ms; `None` = no limit.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// What the node runs.
    pub task: TaskSpec,
    /// Its place in its pool's queue: among the due tickets of a pool, a
    /// higher priority is handed out first (Airflow's priority_weight);
    /// equal priorities go by due instant, then submit order. Default 0;
    /// absent from the encoding at 0, so older definitions keep their hash.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// A mapped node's items (see `mapped`): the node runs its task once
    /// per item. Absent from the encoding when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapSpec>,
    /// A sensor's waiting (see `sensor`): a check that is not met waits
    /// `every` without an attempt spent. Absent from the encoding when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensor: Option<SensorPolicy>,
    /// The assets a success of this node materializes (see `asset`).
    /// Absent from the encoding when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub produces: Vec<Name>,
    /// Airflow's `depends_on_past`: the node waits until the same node of
    /// the previous partition succeeded or was skipped (see `past`).
    /// Absent from the encoding when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub depends_on_past: bool,
    /// With `depends_on_past`: also wait for that node's direct downstreams
    /// in the previous partition. Absent from the encoding when false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub wait_for_downstream: bool,
    /// The node not succeeded or skipped this long after its run's window
    /// ends has missed its SLA (see `sla`). Absent from the encoding when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sla_ms: Option<u64>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl NodeDef {
    /// A node that runs `task` after `upstreams`, every other field at its
    /// default.
    pub fn new(name: Name, upstreams: Vec<Name>, task: TaskSpec) -> Self {
        NodeDef {
            name,
            upstreams,
            trigger_rule: TriggerRule::default(),
            pool: pool_default(),
            target: None,
            retry: RetryPolicy::default(),
            timeout_ms: None,
            task,
            priority: 0,
            map: None,
            sensor: None,
            produces: Vec::new(),
            depends_on_past: false,
            wait_for_downstream: false,
            sla_ms: None,
        }
    }
}

/// What a node runs: a registered task by name, or `command`, with its
/// configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TaskSpec {
    /// A registered task's name, or [`TASK_COMMAND`].
    pub task: Name,
    /// The task's configuration, read by the task.
    #[serde(default)]
    pub config: serde_json::Value,
}

/// A validated graph with its indexes.
///
/// A node's index is its position in the definition's `nodes` (declaration
/// order); [`Graph::topological_order`] lists the indexes upstreams first,
/// ties in declaration order.
#[derive(Debug, Clone)]
pub struct Graph {
    def: GraphDef,
    index: HashMap<Name, usize>,
    upstreams: Vec<Vec<usize>>,
    downstreams: Vec<Vec<usize>>,
    order: Vec<usize>,
    position: Vec<usize>,
    roots: Vec<usize>,
    hash: String,
}

impl Graph {
    /// Checks `def` and builds its indexes, in O(nodes + edges). The first
    /// problem found is returned, in the order: graph settings, duplicate
    /// names, then each node in declaration order, then cycles.
    pub fn new(def: GraphDef) -> Result<Graph, GraphError> {
        let graph = || def.name.clone();
        let n = def.nodes.len();
        if n == 0 {
            return Err(GraphError::EmptyGraph { graph: graph() });
        }
        if n > NODES_MAX {
            return Err(GraphError::TooManyNodes {
                graph: graph(),
                count: n,
                max: NODES_MAX,
            });
        }
        let edges: usize = def.nodes.iter().map(|node| node.upstreams.len()).sum();
        if edges > EDGES_MAX {
            return Err(GraphError::TooManyEdges {
                graph: graph(),
                count: edges,
                max: EDGES_MAX,
            });
        }
        if def.max_active_runs == 0 {
            return Err(GraphError::ZeroMaxActiveRuns { graph: graph() });
        }
        if def.run_timeout_ms == Some(0) {
            return Err(GraphError::ZeroRunTimeout { graph: graph() });
        }
        let bad = |field: &'static str, what: String| GraphError::BadSetting {
            graph: def.name.clone(),
            field,
            what,
        };
        use crate::partition::Partitioning;
        if let Some(cron) = &def.cron {
            crate::cron::Schedule::parse(cron).map_err(|e| bad("cron", e.to_string()))?;
            if matches!(def.partitioning, Partitioning::None | Partitioning::Keyed) {
                return Err(bad(
                    "cron",
                    format!(
                        "a cron graph needs a time partitioning (hourly, daily, weekly, monthly), not {:?}",
                        def.partitioning
                    ),
                ));
            }
        }
        crate::params::check_declared(&def.params).map_err(|e| bad("params", e.to_string()))?;
        if def.start_ms.is_some() && def.cron.is_none() {
            return Err(bad(
                "start",
                "a start date needs a cron: it says which windows the cron starts".into(),
            ));
        }
        match (&def.keyed, def.partitioning) {
            (Some(_), p) if p != Partitioning::Keyed => {
                return Err(bad(
                    "keyed",
                    "a keyed graph needs partitioning = \"keyed\"".into(),
                ));
            }
            (None, Partitioning::Keyed) => {
                return Err(bad(
                    "partitioning",
                    "keyed partitioning needs a [keyed] inventory".into(),
                ));
            }
            (Some(k), _) => {
                if k.batch_size == 0 {
                    return Err(bad("keyed.batch_size", "must be at least 1".into()));
                }
                if k.refresh_ms == 0 {
                    return Err(bad("keyed.refresh", "must be more than 0".into()));
                }
                match &k.inventory {
                    crate::keyed::InventorySource::File(f) if f.is_empty() => {
                        return Err(bad("keyed.inventory", "the file name is empty".into()));
                    }
                    crate::keyed::InventorySource::Command(argv) if argv.is_empty() => {
                        return Err(bad("keyed.inventory", "the command's argv is empty".into()));
                    }
                    _ => {}
                }
            }
            (None, _) => {}
        }
        for (target, settings) in &def.targets {
            settings
                .validate()
                .map_err(|e| bad("targets", format!("target {:?}: {e}", target.as_str())))?;
        }
        if let Some((pool, _)) = def.pools.iter().find(|(_, capacity)| **capacity == 0) {
            return Err(GraphError::ZeroPoolCapacity {
                graph: graph(),
                pool: pool.clone(),
            });
        }

        let mut index = HashMap::with_capacity(n);
        for (i, node) in def.nodes.iter().enumerate() {
            if index.insert(node.name.clone(), i).is_some() {
                return Err(GraphError::DuplicateNode {
                    graph: graph(),
                    node: node.name.clone(),
                });
            }
        }

        let mut upstreams: Vec<Vec<usize>> = Vec::with_capacity(n);
        let mut downstreams: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node) in def.nodes.iter().enumerate() {
            check_node(&def, node)?;
            let mut ups = Vec::with_capacity(node.upstreams.len());
            for upstream in &node.upstreams {
                if *upstream == node.name {
                    return Err(GraphError::SelfDependency {
                        graph: graph(),
                        node: node.name.clone(),
                    });
                }
                let Some(&j) = index.get(upstream) else {
                    return Err(GraphError::UnknownUpstream {
                        graph: graph(),
                        node: node.name.clone(),
                        upstream: upstream.clone(),
                    });
                };
                ups.push(j);
            }
            if ups.len() > 1 {
                let mut sorted = ups.clone();
                sorted.sort_unstable();
                if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
                    return Err(GraphError::DuplicateUpstream {
                        graph: graph(),
                        node: node.name.clone(),
                        upstream: def.nodes[pair[0]].name.clone(),
                    });
                }
            }
            for &j in &ups {
                downstreams[j].push(i);
            }
            upstreams.push(ups);
        }

        // Kahn's algorithm, FIFO, seeded in declaration order: deterministic.
        check_assets(&def)?;

        let mut pending: Vec<usize> = upstreams.iter().map(Vec::len).collect();
        let roots: Vec<usize> = (0..n).filter(|&i| pending[i] == 0).collect();
        let mut queue: VecDeque<usize> = roots.iter().copied().collect();
        let mut order = Vec::with_capacity(n);
        while let Some(u) = queue.pop_front() {
            order.push(u);
            for &d in &downstreams[u] {
                pending[d] -= 1;
                if pending[d] == 0 {
                    queue.push_back(d);
                }
            }
        }
        if order.len() < n {
            return Err(GraphError::Cycle {
                graph: graph(),
                path: find_cycle(&def, &upstreams, &pending),
            });
        }
        let mut position = vec![0; n];
        for (p, &i) in order.iter().enumerate() {
            position[i] = p;
        }

        let hash = content_hash(&def);
        let graph = Graph {
            def,
            index,
            upstreams,
            downstreams,
            order,
            position,
            roots,
            hash,
        };
        graph.assert_invariants();
        Ok(graph)
    }

    fn assert_invariants(&self) {
        if cfg!(debug_assertions) {
            let n = self.def.nodes.len();
            assert_eq!(self.order.len(), n, "the order holds every node");
            assert_eq!(self.upstreams.len(), n, "every node has an upstream list");
            assert_eq!(
                self.downstreams.len(),
                n,
                "every node has a downstream list"
            );
            for (i, ups) in self.upstreams.iter().enumerate() {
                for &u in ups {
                    assert!(self.position[u] < self.position[i], "upstreams come first");
                }
            }
        }
    }

    /// The graph's name.
    pub fn name(&self) -> &Name {
        &self.def.name
    }

    /// The definition, as declared.
    pub fn def(&self) -> &GraphDef {
        &self.def
    }

    /// The definition, as declared, giving up the indexes.
    pub fn into_def(self) -> GraphDef {
        self.def
    }

    /// The hex blake3 hash of the definition's canonical encoding: the same
    /// for the same content in any node or upstream order.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.def.nodes.len()
    }

    /// Always `false`: a valid graph has nodes.
    pub fn is_empty(&self) -> bool {
        self.def.nodes.is_empty()
    }

    /// The nodes in declaration order; a node's index is its position here.
    pub fn nodes(&self) -> &[NodeDef] {
        &self.def.nodes
    }

    /// The node named `name`.
    pub fn node(&self, name: &str) -> Option<&NodeDef> {
        self.index_of(name).map(|i| &self.def.nodes[i])
    }

    /// The node at index `idx`. Panics when `idx` is not an index of the
    /// graph.
    pub fn node_at(&self, idx: usize) -> &NodeDef {
        &self.def.nodes[idx]
    }

    /// The index of the node named `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The trigger rule of the node at `idx`.
    pub fn rule(&self, idx: usize) -> TriggerRule {
        self.def.nodes[idx].trigger_rule
    }

    /// The nodes without upstreams, in declaration order.
    pub fn roots(&self) -> &[usize] {
        &self.roots
    }

    /// Every node index, each after all its upstreams; ties in declaration
    /// order.
    pub fn topological_order(&self) -> &[usize] {
        &self.order
    }

    /// The place of node `idx` in [`Self::topological_order`].
    pub fn position(&self, idx: usize) -> usize {
        self.position[idx]
    }

    /// The upstreams of node `idx`, in the order the node lists them.
    pub fn upstreams(&self, idx: usize) -> &[usize] {
        &self.upstreams[idx]
    }

    /// The downstreams of node `idx`, in declaration order.
    pub fn downstreams(&self, idx: usize) -> &[usize] {
        &self.downstreams[idx]
    }

    /// Every node reachable downstream of `idx` (not `idx` itself), in
    /// topological order. O(n) for the visited set, plus the edges walked.
    pub fn downstream_closure(&self, idx: usize) -> Vec<usize> {
        let mut seen = vec![false; self.len()];
        let mut stack = vec![idx];
        let mut closure = Vec::new();
        while let Some(u) = stack.pop() {
            for &d in &self.downstreams[u] {
                if !seen[d] {
                    seen[d] = true;
                    closure.push(d);
                    stack.push(d);
                }
            }
        }
        closure.sort_unstable_by_key(|&i| self.position[i]);
        closure
    }
}

/// Checks the fields of one node that do not involve other nodes.
fn check_node(def: &GraphDef, node: &NodeDef) -> Result<(), GraphError> {
    let graph = || def.name.clone();
    if !def.pools.is_empty()
        && node.pool.as_str() != POOL_DEFAULT
        && !def.pools.contains_key(&node.pool)
    {
        return Err(GraphError::UnknownPool {
            graph: graph(),
            node: node.name.clone(),
            pool: node.pool.clone(),
        });
    }
    if let Some(target) = &node.target {
        if !def.targets.is_empty() && !def.targets.contains_key(target) {
            return Err(GraphError::UnknownTarget {
                graph: graph(),
                node: node.name.clone(),
                target: target.clone(),
            });
        }
    }
    node.retry
        .validate()
        .map_err(|source| GraphError::BadRetry {
            graph: graph(),
            node: node.name.clone(),
            source,
        })?;
    if node.timeout_ms == Some(0) {
        return Err(GraphError::ZeroTimeout {
            graph: graph(),
            node: node.name.clone(),
        });
    }
    let bad = |field: &'static str, what: String| GraphError::BadNodeField {
        graph: graph(),
        node: node.name.clone(),
        field,
        what,
    };
    if let Some(map) = &node.map {
        if map.max_active_members == 0 {
            return Err(bad("max_active_members", "must be at least 1".into()));
        }
        match &map.over {
            MapSource::Upstream(u) if !node.upstreams.contains(u) => {
                return Err(bad(
                    "map_over",
                    format!(
                        "{:?} is not an upstream of the node: a node maps over the output of one of its upstreams",
                        u.as_str()
                    ),
                ));
            }
            MapSource::Upstream(_) => {}
            MapSource::Items(items) => {
                crate::mapped::check_items(items).map_err(|e| bad("items", e.to_string()))?;
            }
        }
    }
    if let Some(sensor) = &node.sensor {
        sensor.validate().map_err(|e| bad("sensor", e))?;
    }
    if node.produces.len() > crate::asset::ASSETS_MAX {
        return Err(bad(
            "produces",
            format!(
                "{} assets, over the limit of {}",
                node.produces.len(),
                crate::asset::ASSETS_MAX
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in &node.produces {
        if !seen.insert(a) {
            return Err(bad(
                "produces",
                format!("asset {:?} is listed more than once", a.as_str()),
            ));
        }
    }
    Ok(())
}

/// Assets across the graph: each produced by one node, and none both
/// produced and triggered on (a run would start itself).
fn check_assets(def: &GraphDef) -> Result<(), GraphError> {
    let bad = |what: String| GraphError::BadSetting {
        graph: def.name.clone(),
        field: "produces",
        what,
    };
    let mut producer: BTreeMap<&Name, &Name> = BTreeMap::new();
    for node in &def.nodes {
        for a in &node.produces {
            if let Some(other) = producer.insert(a, &node.name) {
                return Err(bad(format!(
                    "asset {:?} is produced by nodes {:?} and {:?}: an asset has one producer",
                    a.as_str(),
                    other.as_str(),
                    node.name.as_str()
                )));
            }
        }
    }
    let trigger = |what: String| GraphError::BadSetting {
        graph: def.name.clone(),
        field: "trigger.assets",
        what,
    };
    if def.trigger_assets.len() > crate::asset::ASSETS_MAX {
        return Err(trigger(format!(
            "{} assets, over the limit of {}",
            def.trigger_assets.len(),
            crate::asset::ASSETS_MAX
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in &def.trigger_assets {
        if !seen.insert(a) {
            return Err(trigger(format!(
                "asset {:?} is listed more than once",
                a.as_str()
            )));
        }
        if let Some(node) = producer.get(a) {
            return Err(trigger(format!(
                "asset {:?} is produced by this graph's node {:?}: a graph does not start on its own assets",
                a.as_str(),
                node.as_str()
            )));
        }
    }
    Ok(())
}

/// A cycle among the nodes Kahn's algorithm could not order (`pending[i] >
/// 0`). Each such node has an upstream that is also unordered, so walking
/// from one to an unordered upstream, again and again, must revisit a node;
/// the walk from that node on is a cycle. The path runs downstream, starts
/// at the cycle's first node in declaration order and ends where it starts.
fn find_cycle(def: &GraphDef, upstreams: &[Vec<usize>], pending: &[usize]) -> Vec<Name> {
    const UNSEEN: usize = usize::MAX;
    let start = (0..pending.len())
        .find(|&i| pending[i] > 0)
        .expect("an unordered node exists when there is a cycle");
    let mut step_of = vec![UNSEEN; pending.len()];
    let mut walk = Vec::new();
    let mut current = start;
    while step_of[current] == UNSEEN {
        step_of[current] = walk.len();
        walk.push(current);
        current = *upstreams[current]
            .iter()
            .find(|&&u| pending[u] > 0)
            .expect("an unordered node has an unordered upstream");
    }
    // The walk ran upstream; the cycle read downstream is its reverse.
    let mut cycle: Vec<usize> = walk[step_of[current]..].to_vec();
    cycle.reverse();
    let first = (0..cycle.len())
        .min_by_key(|&k| cycle[k])
        .expect("a cycle has nodes");
    cycle.rotate_left(first);
    cycle.push(cycle[0]);
    cycle
        .into_iter()
        .map(|i| def.nodes[i].name.clone())
        .collect()
}

/// The hex blake3 hash of `def`'s canonical encoding: JSON of the
/// definition with nodes sorted by name, upstreams sorted and every object's
/// keys sorted (not left to serde_json's map type, whose order a feature
/// elsewhere in the build could change), after a domain prefix.
///
/// The JSON is written straight from the definition by the `canonical`
/// module; the `Value`-based writer it replaced (kept as
/// [`content_hash_via_value`]) is the reference it must equal byte for
/// byte, and the fallback for what `canonical` does not write alike.
fn content_hash(def: &GraphDef) -> String {
    let view = CanonicalDef::of(def);
    let mut text = Vec::with_capacity(HASH_DOMAIN.len() + 256 * def.nodes.len());
    text.extend_from_slice(HASH_DOMAIN.as_bytes());
    match crate::canonical::write(&view, &mut text) {
        Ok(()) => blake3::hash(&text).to_hex().to_string(),
        Err(_) => {
            let mut canonical = def.clone();
            canonical.nodes.sort_by(|a, b| a.name.cmp(&b.name));
            for node in &mut canonical.nodes {
                node.upstreams.sort();
            }
            content_hash_via_value(&canonical)
        }
    }
}

// The canonical view of a definition: what `GraphDef` serializes, field for
// field and attribute for attribute, borrowed, with nodes in name order and
// upstreams sorted (a copy only of a node's upstreams out of order), and
// fields declared in key order so the canonical writer copies nothing.
// `of` destructures every struct without `..`: a field added to
// `GraphDef`, `NodeDef`, `TaskSpec` or `RetryPolicy` does not compile
// until it is added here with the same serde attributes (and a test holds
// the view's JSON equal to the definition's).

#[derive(Serialize)]
struct CanonicalDef<'a> {
    catchup: &'a bool,
    cron: &'a Option<String>,
    keyed: &'a Option<crate::keyed::KeyedSpec>,
    max_active_runs: &'a u32,
    name: &'a Name,
    nodes: Vec<CanonicalNode<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_failure: Option<CanonicalTask<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_sla_miss: Option<CanonicalTask<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_success: Option<CanonicalTask<'a>>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    params: &'a BTreeMap<String, String>,
    partitioning: &'a Partitioning,
    pools: &'a BTreeMap<Name, u32>,
    retention_ms: &'a u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_timeout_ms: &'a Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sla_ms: &'a Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_ms: &'a Option<u64>,
    targets: &'a BTreeMap<Name, crate::breaker::BreakerSettings>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: &'a Option<crate::zone::Zone>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trigger_assets: &'a Vec<Name>,
}

#[derive(Serialize)]
struct CanonicalNode<'a> {
    #[serde(skip_serializing_if = "is_false")]
    depends_on_past: &'a bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    map: &'a Option<MapSpec>,
    name: &'a Name,
    pool: &'a Name,
    #[serde(skip_serializing_if = "is_zero")]
    priority: &'a i32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    produces: &'a Vec<Name>,
    retry: CanonicalRetry<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sensor: &'a Option<SensorPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sla_ms: &'a Option<u64>,
    target: &'a Option<Name>,
    task: CanonicalTask<'a>,
    timeout_ms: &'a Option<u64>,
    trigger_rule: &'a TriggerRule,
    upstreams: std::borrow::Cow<'a, [Name]>,
    #[serde(skip_serializing_if = "is_false")]
    wait_for_downstream: &'a bool,
}

#[derive(Serialize)]
struct CanonicalTask<'a> {
    config: &'a serde_json::Value,
    task: &'a Name,
}

#[derive(Serialize)]
struct CanonicalRetry<'a> {
    attempts_max: &'a u32,
    deadline_ms: &'a Option<u64>,
    initial_ms: &'a u64,
    jitter: &'a f64,
    max_ms: &'a u64,
    multiplier: &'a f64,
}

impl<'a> CanonicalTask<'a> {
    fn of(spec: &'a TaskSpec) -> CanonicalTask<'a> {
        let TaskSpec { task, config } = spec;
        CanonicalTask { config, task }
    }
}

impl<'a> CanonicalDef<'a> {
    fn of(def: &'a GraphDef) -> CanonicalDef<'a> {
        let GraphDef {
            name,
            nodes,
            partitioning,
            pools,
            targets,
            retention_ms,
            max_active_runs,
            cron,
            catchup,
            keyed,
            start_ms,
            params,
            on_failure,
            on_success,
            trigger_assets,
            run_timeout_ms,
            timezone,
            sla_ms,
            on_sla_miss,
        } = def;
        let mut order: Vec<&NodeDef> = nodes.iter().collect();
        order.sort_by(|a, b| a.name.cmp(&b.name));
        CanonicalDef {
            catchup,
            cron,
            keyed,
            max_active_runs,
            name,
            nodes: order.into_iter().map(CanonicalNode::of).collect(),
            on_failure: on_failure.as_ref().map(CanonicalTask::of),
            on_sla_miss: on_sla_miss.as_ref().map(CanonicalTask::of),
            on_success: on_success.as_ref().map(CanonicalTask::of),
            params,
            partitioning,
            pools,
            retention_ms,
            run_timeout_ms,
            sla_ms,
            start_ms,
            targets,
            timezone,
            trigger_assets,
        }
    }
}

impl<'a> CanonicalNode<'a> {
    fn of(node: &'a NodeDef) -> CanonicalNode<'a> {
        let NodeDef {
            name,
            upstreams,
            trigger_rule,
            pool,
            target,
            retry,
            timeout_ms,
            task,
            priority,
            map,
            sensor,
            produces,
            depends_on_past,
            wait_for_downstream,
            sla_ms,
        } = node;
        let RetryPolicy {
            attempts_max,
            initial_ms,
            multiplier,
            max_ms,
            jitter,
            deadline_ms,
        } = retry;
        let upstreams = if upstreams.windows(2).all(|w| w[0] <= w[1]) {
            std::borrow::Cow::Borrowed(upstreams.as_slice())
        } else {
            let mut sorted = upstreams.clone();
            sorted.sort();
            std::borrow::Cow::Owned(sorted)
        };
        CanonicalNode {
            depends_on_past,
            map,
            name,
            pool,
            priority,
            produces,
            retry: CanonicalRetry {
                attempts_max,
                deadline_ms,
                initial_ms,
                jitter,
                max_ms,
                multiplier,
            },
            sensor,
            sla_ms,
            target,
            task: CanonicalTask::of(task),
            timeout_ms,
            trigger_rule,
            upstreams,
            wait_for_downstream,
        }
    }
}

/// The first form of the hash: `def` (already in canonical order) through
/// `serde_json::Value`, written with sorted keys.
fn content_hash_via_value(def: &GraphDef) -> String {
    let value = serde_json::to_value(def).expect("a graph definition encodes as JSON");
    let mut text = String::from(HASH_DOMAIN);
    write_canonical(&value, &mut text);
    blake3::hash(text.as_bytes()).to_hex().to_string()
}

/// Writes `value` as JSON with sorted object keys and no spaces.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Array(items) => {
            out.push('[');
            for (k, item) in items.iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (k, (key, item)) in entries.into_iter().enumerate() {
                if k > 0 {
                    out.push(',');
                }
                write!(out, "{}:", Value::String(key.clone())).expect("writing to a String");
                write_canonical(item, out);
            }
            out.push('}');
        }
        scalar => write!(out, "{scalar}").expect("writing to a String"),
    }
}
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn name(s: &str) -> Name {
        Name::new(s).unwrap()
    }

    /// A command node after `ups`.
    pub(crate) fn node(n: &str, ups: &[&str]) -> NodeDef {
        NodeDef::new(
            name(n),
            ups.iter().map(|u| name(u)).collect(),
            TaskSpec {
                task: name(TASK_COMMAND),
                config: serde_json::json!({"argv": ["true"]}),
            },
        )
    }

    pub(crate) fn def(nodes: Vec<NodeDef>) -> GraphDef {
        GraphDef::new(name("etl"), nodes)
    }

    fn with<F: FnOnce(&mut GraphDef)>(nodes: Vec<NodeDef>, f: F) -> GraphDef {
        let mut d = def(nodes);
        f(&mut d);
        d
    }

    #[test]
    fn errors_table() {
        let cases: Vec<(GraphDef, &str)> = vec![
            (def(vec![]), r#"graph "etl": nodes: the graph has no nodes"#),
            (
                def(vec![node("a", &[]), node("b", &[]), node("a", &[])]),
                r#"graph "etl": node "a": name is declared more than once"#,
            ),
            (
                def(vec![node("extract", &[]), node("load", &["transfrom"])]),
                r#"graph "etl": node "load": upstream "transfrom" is not a node of the graph"#,
            ),
            (
                def(vec![node("a", &["a"])]),
                r#"graph "etl": node "a": upstreams: the node lists itself"#,
            ),
            (
                def(vec![node("a", &[]), node("b", &["a", "a"])]),
                r#"graph "etl": node "b": upstream "a" is listed more than once"#,
            ),
            (
                def(vec![
                    node("a", &["c"]),
                    node("b", &["a"]),
                    node("c", &["b"]),
                    node("d", &["a"]),
                ]),
                r#"graph "etl": upstreams: cycle a -> b -> c -> a"#,
            ),
            (
                with(
                    vec![node("a", &[]), {
                        let mut n = node("b", &[]);
                        n.pool = name("gpu");
                        n
                    }],
                    |d| {
                        d.pools.insert(name("cpu"), 4);
                    },
                ),
                r#"graph "etl": node "b": pool "gpu" is not one of the graph's pools"#,
            ),
            (
                with(
                    vec![{
                        let mut n = node("a", &[]);
                        n.target = Some(name("db2"));
                        n
                    }],
                    |d| {
                        d.targets
                            .insert(name("db1"), crate::breaker::BreakerSettings::default());
                    },
                ),
                r#"graph "etl": node "a": target "db2" is not one of the graph's targets"#,
            ),
            (
                def(vec![{
                    let mut n = node("a", &[]);
                    n.retry.multiplier = 0.5;
                    n
                }]),
                r#"graph "etl": node "a": retry: multiplier 0.5 is not a number ≥ 1"#,
            ),
            (
                def(vec![{
                    let mut n = node("a", &[]);
                    n.timeout_ms = Some(0);
                    n
                }]),
                r#"graph "etl": node "a": timeout_ms: must be above 0"#,
            ),
            (
                with(vec![node("a", &[])], |d| {
                    d.pools.insert(name("gpu"), 0);
                }),
                r#"graph "etl": pool "gpu": capacity must be above 0"#,
            ),
            (
                with(vec![node("a", &[])], |d| d.max_active_runs = 0),
                r#"graph "etl": max_active_runs: must be above 0"#,
            ),
            (
                def(vec![node("a", &[]), node("x", &[]), {
                    let mut n = node("b", &["a"]);
                    n.map = Some(MapSpec::new(MapSource::Upstream(name("x"))));
                    n
                }]),
                r#"graph "etl": node "b": map_over: "x" is not an upstream of the node: a node maps over the output of one of its upstreams"#,
            ),
            (
                def(vec![{
                    let mut n = node("a", &[]);
                    let mut m = MapSpec::new(MapSource::Items(vec![]));
                    m.max_active_members = 0;
                    n.map = Some(m);
                    n
                }]),
                r#"graph "etl": node "a": max_active_members: must be at least 1"#,
            ),
            (
                def(vec![{
                    let mut n = node("a", &[]);
                    n.sensor = Some(SensorPolicy {
                        every_ms: 0,
                        ..SensorPolicy::default()
                    });
                    n
                }]),
                r#"graph "etl": node "a": sensor: every: must be above 0"#,
            ),
            (
                def(vec![{
                    let mut n = node("a", &[]);
                    n.produces = vec![name("s"), name("s")];
                    n
                }]),
                r#"graph "etl": node "a": produces: asset "s" is listed more than once"#,
            ),
            (
                def(vec![
                    {
                        let mut n = node("a", &[]);
                        n.produces = vec![name("s")];
                        n
                    },
                    {
                        let mut n = node("b", &[]);
                        n.produces = vec![name("s")];
                        n
                    },
                ]),
                r#"graph "etl": produces: asset "s" is produced by nodes "a" and "b": an asset has one producer"#,
            ),
            (
                with(
                    vec![{
                        let mut n = node("a", &[]);
                        n.produces = vec![name("s")];
                        n
                    }],
                    |d| d.trigger_assets = vec![name("s")],
                ),
                r#"graph "etl": trigger.assets: asset "s" is produced by this graph's node "a": a graph does not start on its own assets"#,
            ),
        ];
        for (i, (d, want)) in cases.into_iter().enumerate() {
            let got = d
                .validate()
                .map(|g| g.hash().to_string())
                .map_err(|e| e.to_string());
            assert_eq!(
                got,
                Err(want.to_string()),
                "#{i}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn accepted_table() {
        let cases: Vec<GraphDef> = vec![
            def(vec![node("a", &[])]),
            // Pools given: the default pool is still known.
            with(
                vec![node("a", &[]), {
                    let mut n = node("b", &["a"]);
                    n.pool = name("gpu");
                    n
                }],
                |d| {
                    d.pools.insert(name("gpu"), 1);
                },
            ),
            // No targets given: any target is accepted.
            def(vec![{
                let mut n = node("a", &[]);
                n.target = Some(name("db"));
                n
            }]),
            // A node may be declared after its downstreams.
            def(vec![node("load", &["extract"]), node("extract", &[])]),
        ];
        for (i, d) in cases.into_iter().enumerate() {
            let got = d.clone().validate();
            assert!(got.is_ok(), "#{i}: {d:?}: got {:?}", got.err());
        }
    }

    #[test]
    fn cycle_path_starts_at_the_first_declared_member() {
        // x is downstream of the cycle y -> z -> y and is not part of it.
        let e = def(vec![
            node("x", &["y"]),
            node("y", &["z"]),
            node("z", &["y"]),
        ])
        .validate()
        .unwrap_err();
        assert_eq!(
            e,
            GraphError::Cycle {
                graph: name("etl"),
                path: vec![name("y"), name("z"), name("y")]
            }
        );
    }

    #[test]
    fn indexes_of_a_diamond() {
        // Declared out of order: d after b and c, which follow a.
        let g = def(vec![
            node("d", &["b", "c"]),
            node("c", &["a"]),
            node("b", &["a"]),
            node("a", &[]),
        ])
        .validate()
        .unwrap();
        let ix = |n: &str| g.index_of(n).unwrap();
        assert_eq!(g.roots(), &[ix("a")]);
        assert_eq!(g.topological_order(), &[ix("a"), ix("c"), ix("b"), ix("d")]);
        assert_eq!(g.upstreams(ix("d")), &[ix("b"), ix("c")]);
        assert_eq!(g.downstreams(ix("a")), &[ix("c"), ix("b")]);
        assert_eq!(
            g.downstream_closure(ix("a")),
            vec![ix("c"), ix("b"), ix("d")]
        );
        assert_eq!(g.downstream_closure(ix("d")), Vec::<usize>::new());
        assert_eq!(g.node("b").unwrap().name.as_str(), "b");
        assert!(g.node("nope").is_none());
        assert_eq!(g.def().nodes.len(), 4);
    }

    #[test]
    fn serde_defaults() {
        let d: GraphDef = serde_json::from_str(
            r#"{"name":"g","nodes":[{"name":"a","task":{"task":"command"}},
                {"name":"b","upstreams":["a"],"trigger_rule":"one_failed","task":{"task":"command"}}]}"#,
        )
        .unwrap();
        assert_eq!(d.retention_ms, RETENTION_MS_DEFAULT);
        assert_eq!(d.max_active_runs, MAX_ACTIVE_RUNS_DEFAULT);
        assert_eq!(d.nodes[0].pool.as_str(), POOL_DEFAULT);
        assert_eq!(d.nodes[0].trigger_rule, TriggerRule::AllSuccess);
        assert_eq!(d.nodes[1].trigger_rule, TriggerRule::OneFailed);
        assert_eq!(d.nodes[0].retry, RetryPolicy::default());
        let g = d.clone().validate().unwrap();
        // Round trips through rmp-serde's named encoding, as stored.
        let bytes = rmp_serde::to_vec_named(g.def()).unwrap();
        let back: GraphDef = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, d);
        assert_eq!(back.validate().unwrap().hash(), g.hash());
    }

    #[test]
    fn any_content_change_changes_the_hash() {
        let base = || {
            def(vec![
                node("a", &[]),
                node("b", &["a"]),
                node("c", &["a", "b"]),
            ])
        };
        let hash = |d: GraphDef| d.validate().unwrap().hash().to_string();
        let h0 = hash(base());
        assert_eq!(h0.len(), 64);
        type Change = Box<dyn Fn(&mut GraphDef)>;
        let changes: Vec<(&str, Change)> = vec![
            ("graph name", Box::new(|d| d.name = name("etl2"))),
            (
                "node name",
                Box::new(|d| {
                    d.nodes[2].name = name("c2");
                }),
            ),
            (
                "drop an upstream",
                Box::new(|d| {
                    d.nodes[2].upstreams.pop();
                }),
            ),
            (
                "rule",
                Box::new(|d| d.nodes[1].trigger_rule = TriggerRule::AllDone),
            ),
            ("pool", Box::new(|d| d.nodes[1].pool = name("gpu"))),
            ("target", Box::new(|d| d.nodes[1].target = Some(name("db")))),
            ("retry", Box::new(|d| d.nodes[1].retry.attempts_max = 9)),
            ("retry jitter", Box::new(|d| d.nodes[1].retry.jitter = 0.25)),
            ("timeout", Box::new(|d| d.nodes[1].timeout_ms = Some(5))),
            ("task", Box::new(|d| d.nodes[1].task.task = name("http"))),
            (
                "config",
                Box::new(|d| d.nodes[1].task.config = serde_json::json!({"argv": ["false"]})),
            ),
            (
                "partitioning",
                Box::new(|d| d.partitioning = Partitioning::Daily),
            ),
            (
                "pools",
                Box::new(|d| {
                    d.pools.insert(name("cpu"), 2);
                }),
            ),
            (
                "targets",
                Box::new(|d| {
                    d.targets
                        .insert(name("db"), crate::breaker::BreakerSettings::default());
                }),
            ),
            ("retention", Box::new(|d| d.retention_ms = 1)),
            ("max active runs", Box::new(|d| d.max_active_runs = 1)),
            (
                "cron",
                Box::new(|d| {
                    d.cron = Some("0 * * * *".into());
                    d.partitioning = crate::partition::Partitioning::Hourly;
                }),
            ),
            ("catchup", Box::new(|d| d.catchup = true)),
            (
                "map_over",
                Box::new(|d| {
                    d.nodes[1].map = Some(MapSpec::new(MapSource::Upstream(name("a"))));
                }),
            ),
            (
                "items",
                Box::new(|d| {
                    d.nodes[1].map =
                        Some(MapSpec::new(MapSource::Items(vec![serde_json::json!(1)])));
                }),
            ),
            (
                "max active members",
                Box::new(|d| {
                    let mut m = MapSpec::new(MapSource::Upstream(name("a")));
                    m.max_active_members = 3;
                    d.nodes[1].map = Some(m);
                }),
            ),
            (
                "sensor",
                Box::new(|d| d.nodes[1].sensor = Some(SensorPolicy::default())),
            ),
            (
                "produces",
                Box::new(|d| d.nodes[1].produces = vec![name("sales.daily")]),
            ),
            (
                "trigger assets",
                Box::new(|d| d.trigger_assets = vec![name("sales.daily")]),
            ),
            (
                "start",
                Box::new(|d| {
                    d.cron = Some("0 * * * *".into());
                    d.partitioning = crate::partition::Partitioning::Hourly;
                    d.start_ms = Some(0);
                }),
            ),
            (
                "params",
                Box::new(|d| {
                    d.params.insert("region".into(), "eu".into());
                }),
            ),
            ("priority", Box::new(|d| d.nodes[1].priority = 5)),
            (
                "on_failure",
                Box::new(|d| {
                    d.on_failure = Some(TaskSpec {
                        task: name("notify"),
                        config: serde_json::json!({"argv": ["true"]}),
                    })
                }),
            ),
            (
                "on_success",
                Box::new(|d| {
                    d.on_success = Some(TaskSpec {
                        task: name("notify"),
                        config: serde_json::json!({"argv": ["true"]}),
                    })
                }),
            ),
            (
                "keyed",
                Box::new(|d| {
                    d.keyed = Some(crate::keyed::KeyedSpec::new(
                        crate::keyed::InventorySource::File("x".into()),
                    ));
                    d.partitioning = crate::partition::Partitioning::Keyed;
                }),
            ),
        ];
        let mut seen = BTreeMap::new();
        seen.insert(h0, "base");
        for (i, (what, change)) in changes.iter().enumerate() {
            let mut d = base();
            change(&mut d);
            let h = hash(d);
            if let Some(other) = seen.insert(h, what) {
                panic!("#{i}: change of {what} gives the hash of {other}");
            }
        }
    }

    /// The hash weir gave this definition before params, priorities and
    /// notifications existed (computed with that code): fields added since
    /// stay out of the encoding at their defaults, so adopted definitions
    /// keep their identity and their runs find them.
    #[test]
    fn hashes_of_older_definitions_hold() {
        let mut d = def(vec![node("a", &[]), node("b", &["a"])]);
        for n in &mut d.nodes {
            n.task.config = serde_json::json!({"argv": ["true", "{partition}"]});
        }
        d.cron = Some("0 2 * * *".into());
        d.partitioning = Partitioning::Daily;
        assert_eq!(
            d.validate().unwrap().hash(),
            "48f0253c05808e50bb70a851a66d0110ba7f9e23d6685f01a2da44b5d6323b4c"
        );
    }

    #[test]
    fn object_keys_are_sorted_in_the_encoding() {
        let mut out = String::new();
        write_canonical(
            &serde_json::json!({"b": 1, "a": [true, null, "x\"y"], "c": {"z": 1.5, "y": {}}}),
            &mut out,
        );
        assert_eq!(
            out,
            r#"{"a":[true,null,"x\"y"],"b":1,"c":{"y":{},"z":1.5}}"#
        );
    }

    #[test]
    fn deep_chain_validates_without_recursion() {
        let n = NODES_MAX;
        let names: Vec<Name> = (0..n).map(|i| name(&format!("n{i}"))).collect();
        let nodes: Vec<NodeDef> = (0..n)
            .map(|i| {
                let mut nd = node("x", &[]);
                nd.name = names[i].clone();
                if i > 0 {
                    nd.upstreams = vec![names[i - 1].clone()];
                }
                nd
            })
            .collect();
        let g = def(nodes.clone()).validate().unwrap();
        assert_eq!(g.roots(), &[0]);
        assert_eq!(g.topological_order()[n - 1], n - 1);
        assert_eq!(g.downstream_closure(0).len(), n - 1);
        // Closing the chain into a ring is found and reported, also without
        // recursion.
        let mut ring = nodes;
        ring[0].upstreams = vec![names[n - 1].clone()];
        match def(ring).validate().unwrap_err() {
            GraphError::Cycle { path, .. } => assert_eq!(path.len(), n + 1),
            e => panic!("want a cycle, got {e}"),
        }
        let mut too_many = vec![node("x", &[]); NODES_MAX + 1];
        for (i, nd) in too_many.iter_mut().enumerate() {
            nd.name = name(&format!("n{i}"));
        }
        assert!(matches!(
            def(too_many).validate(),
            Err(GraphError::TooManyNodes { .. })
        ));
    }

    /// The canonical view serializes as the definition does (in canonical
    /// order), with every setting away from its default, and with the
    /// fields left out at their defaults (`start_ms`, `params`,
    /// `on_failure`, `on_success`, `trigger_assets`, a node's `priority`,
    /// `map`, `sensor` and `produces`) at them; the hash written from it
    /// equals the `Value` path's.
    #[test]
    fn the_canonical_view_is_the_definition() {
        let mut a = node("b", &["a"]);
        a.trigger_rule = TriggerRule::OneFailed;
        a.pool = name("io");
        a.target = Some(name("t"));
        a.timeout_ms = Some(5);
        a.retry.deadline_ms = Some(9);
        a.retry.jitter = 0.5;
        a.priority = -3;
        let mut d = def(vec![a, node("a", &[])]);
        d.nodes[0].upstreams = vec![name("z"), name("a")];
        d.partitioning = Partitioning::Daily;
        d.pools.insert(name("io"), 3);
        d.targets
            .insert(name("t"), crate::breaker::BreakerSettings::default());
        d.retention_ms = 5;
        d.max_active_runs = 2;
        d.cron = Some("0 * * * *".into());
        d.catchup = true;
        d.keyed = Some(crate::keyed::KeyedSpec::new(
            crate::keyed::InventorySource::Command(vec!["ls".into()]),
        ));
        let notify = |argv: &str| TaskSpec {
            task: name(TASK_COMMAND),
            config: serde_json::json!({"argv": [argv], "env": {"Z": "1", "A": "2"}}),
        };
        for start in [Some(77), None] {
            d.start_ms = start;
            if start.is_some() {
                d.params.insert("region".into(), "eu".into());
                d.params.insert("mode".into(), "full".into());
                d.on_failure = Some(notify("page"));
                d.on_success = Some(notify("log"));
                d.trigger_assets = vec![name("raw.daily")];
                d.nodes[0].map = Some(crate::mapped::MapSpec::new(
                    crate::mapped::MapSource::Items(vec![
                        serde_json::json!({"z": 1, "a": 2}),
                        serde_json::json!("x"),
                    ]),
                ));
                d.nodes[0].sensor = Some(crate::sensor::SensorPolicy {
                    every_ms: 7,
                    timeout_ms: 70,
                    on_timeout: crate::sensor::OnTimeout::Skip,
                });
                d.nodes[1].produces = vec![name("out.b"), name("out.a")];
            } else {
                d.params.clear();
                d.on_failure = None;
                d.on_success = None;
                d.trigger_assets.clear();
                d.nodes[0].map = None;
                d.nodes[0].sensor = None;
                d.nodes[1].produces.clear();
                d.nodes[0].priority = 0;
            }
            let mut sorted = d.clone();
            sorted.nodes.sort_by(|a, b| a.name.cmp(&b.name));
            for n in &mut sorted.nodes {
                n.upstreams.sort();
            }
            assert_eq!(
                serde_json::to_value(CanonicalDef::of(&d)).unwrap(),
                serde_json::to_value(&sorted).unwrap(),
                "start_ms {start:?}"
            );
            assert_eq!(
                content_hash(&sorted),
                reference_hash(&d),
                "start_ms {start:?}"
            );
        }
    }

    /// The hash as the `Value` path computes it: the reference.
    fn reference_hash(def: &GraphDef) -> String {
        let mut canonical = def.clone();
        canonical.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        for node in &mut canonical.nodes {
            node.upstreams.sort();
        }
        content_hash_via_value(&canonical)
    }

    fn json_config() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("\\PC{0,5}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The hash written straight from the definition equals the
        /// `Value` path's, whatever the settings and task configs hold.
        #[test]
        fn hash_equals_the_value_path(
            configs in prop::collection::vec(json_config(), 1..6),
            multiplier in 1.0f64..10.0,
            jitter in 0.0f64..1.0,
            timeout in prop::option::of(1u64..1_000_000),
            rate in 0.0f64..1.0,
            probes in 1u32..4,
            retention in any::<u64>(),
            priority in prop_oneof![Just(0i32), any::<i32>()],
            params in prop::collection::btree_map("[a-z]{1,4}", "\\PC{0,5}", 0..3),
            notify in prop::option::of(json_config()),
        ) {
            let nodes: Vec<NodeDef> = configs
                .into_iter()
                .enumerate()
                .map(|(i, config)| {
                    let mut nd = node(&format!("n{}", 9 - i), &[]);
                    nd.task.config = config;
                    nd.retry.multiplier = multiplier;
                    nd.retry.jitter = jitter;
                    nd.timeout_ms = timeout;
                    nd.priority = if i % 2 == 0 { priority } else { 0 };
                    if i > 0 {
                        nd.upstreams = vec![name("n9")];
                        nd.target = Some(name("t"));
                    }
                    nd
                })
                .collect();
            let mut d = def(nodes);
            d.retention_ms = retention;
            d.params = params;
            d.on_failure = notify.map(|config| TaskSpec {
                task: name("notify"),
                config,
            });
            d.targets.insert(
                name("t"),
                crate::breaker::BreakerSettings {
                    failure_rate: rate,
                    probes,
                    probe_failures_max: probes,
                    ..crate::breaker::BreakerSettings::default()
                },
            );
            d.pools.insert(name("default"), 2);
            let g = d.validate().unwrap();
            prop_assert_eq!(g.hash(), reference_hash(g.def()));
        }
    }

    /// A random DAG: node i may depend on any node before it.
    pub(crate) fn dag(max_nodes: usize) -> impl Strategy<Value = Vec<Vec<usize>>> {
        (1..=max_nodes).prop_flat_map(|n| {
            (0..n)
                .map(|i| prop::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i.min(4)))
                .collect::<Vec<_>>()
        })
    }

    proptest! {
        /// The same content in any node or upstream order hashes the same.
        #[test]
        fn hash_ignores_order(
            (edges, perm, seed) in dag(20).prop_flat_map(|e| {
                let n = e.len();
                (Just(e), Just((0..n).collect::<Vec<_>>()).prop_shuffle(), any::<u64>())
            })
        ) {
            let nodes: Vec<NodeDef> = edges
                .iter()
                .enumerate()
                .map(|(i, ups)| {
                    let ups: Vec<String> = ups.iter().map(|u| format!("n{u}")).collect();
                    let ups: Vec<&str> = ups.iter().map(String::as_str).collect();
                    let mut nd = node(&format!("n{i}"), &ups);
                    nd.trigger_rule = TriggerRule::ALL[i % TriggerRule::ALL.len()];
                    nd
                })
                .collect();
            let mut shuffled: Vec<NodeDef> = perm.iter().map(|&i| nodes[i].clone()).collect();
            for (k, nd) in shuffled.iter_mut().enumerate() {
                let len = nd.upstreams.len();
                if len > 1 {
                    nd.upstreams.rotate_left((seed as usize + k) % len);
                }
            }
            let a = def(nodes).validate().unwrap();
            let b = def(shuffled).validate().unwrap();
            prop_assert_eq!(a.hash(), b.hash());
            prop_assert_eq!(a.hash(), reference_hash(b.def()));
            for &i in b.topological_order() {
                for &u in b.upstreams(i) {
                    prop_assert!(b.position(u) < b.position(i));
                }
            }
        }
    }
}
