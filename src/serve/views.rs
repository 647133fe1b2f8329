//! What the API and the CLI show, read from the store alone: graphs, runs
//! and nodes. The same functions serve `GET /api/v1/...` while an engine
//! runs and `weir status`/`weir runs` when none does, so both say the same.

use serde::{Deserialize, Serialize};
use weir_core::graph::GraphDef;
use weir_core::partition::Partition;

use weir_actors::done::{done_key, DoneRecord, DoneStatus};
use weir_actors::scheduler::records::{
    def_key, graph_key, run_id, runs_prefix, GraphRecord, GraphRunRecord, RunState, GRAPH_PREFIX,
};
use weir_actors::scheduler::view;
use weir_actors::store::{Store, StoreError};

/// Runs a page holds by default.
pub const RUNS_PAGE_DEFAULT: usize = 50;
/// Runs a page holds at most.
pub const RUNS_PAGE_MAX: usize = 1_000;
/// Output bytes shown inline in a run's nodes; the node route shows all.
pub const OUTPUT_INLINE_BYTES_MAX: usize = 64 * 1024;
/// Definitions kept in a graph's hash history.
pub const HISTORY_MAX: usize = 100;

/// The prefix of a graph's adopt history: `graphhist/<graph>/<ms>`.
pub fn history_prefix(graph: &str) -> String {
    format!("graphhist/{graph}/")
}

/// The key of one adopt in a graph's history.
pub fn history_key(graph: &str, adopted_at_ms: u64) -> String {
    format!("graphhist/{graph}/{adopted_at_ms:020}")
}

/// A run, briefly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunBrief {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// Its state.
    pub state: RunState,
    /// When it started.
    pub requested_at_ms: u64,
    /// When it settled.
    pub settled_at_ms: Option<u64>,
    /// Its definition's hash.
    pub definition: String,
    /// Whether it, or a node of it, missed an SLA.
    #[serde(default)]
    pub sla_missed: bool,
    /// When it started: its instant, for a run prepared ahead.
    #[serde(default)]
    pub started_at_ms: u64,
    /// When a run prepared ahead was prepared (its record written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared_at_ms: Option<u64>,
    /// The IANA zone of its graph's adopted definition, which its instants
    /// are shown in (`UTC` by default).
    #[serde(default = "utc_name")]
    pub timezone: String,
}

/// A graph in the list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphSummary {
    /// Its name.
    pub name: String,
    /// none, hourly, daily, weekly, monthly or keyed.
    pub partitioning: String,
    /// Its cron expression.
    pub cron: Option<String>,
    /// The next cron firing after now (ms since the epoch).
    pub next_firing_ms: Option<u64>,
    /// The next cron firing, RFC 3339 with the zone's offset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_firing: Option<String>,
    /// The IANA zone of its windows and cron expression (`UTC` by default).
    #[serde(default = "utc_name")]
    pub timezone: String,
    /// Whether its triggers are paused.
    pub paused: bool,
    /// The adopted definition's content hash.
    pub definition: String,
    /// When it was adopted.
    pub adopted_at_ms: u64,
    /// Its node count.
    pub nodes: usize,
    /// Its newest run (by partition).
    pub last_run: Option<RunBrief>,
}

/// One adopt of a graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HashEntry {
    /// The definition's hash.
    pub hash: String,
    /// When it was adopted.
    pub adopted_at_ms: u64,
}

/// A graph with its definition and history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GraphDetail {
    /// The summary.
    pub summary: GraphSummary,
    /// The adopted definition.
    pub definition: GraphDef,
    /// Adopts, newest first.
    pub history: Vec<HashEntry>,
}

/// A page of runs, newest partition first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunPage {
    /// The runs.
    pub runs: Vec<RunBrief>,
    /// Pass as `cursor` for the next page; absent on the last.
    pub next_cursor: Option<String>,
}

/// A run-list query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunQuery {
    /// Only this graph.
    pub graph: Option<String>,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Partitions from this one (included).
    pub from: Option<String>,
    /// Partitions up to this one (included).
    pub to: Option<String>,
    /// At most this many (default [`RUNS_PAGE_DEFAULT`]).
    pub limit: Option<usize>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// Only runs that missed an SLA (theirs or a node's).
    #[serde(default)]
    pub sla_missed: bool,
}

/// A node of a run, with its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NodeDetail {
    /// The node.
    pub node: String,
    /// The partition whose run it waits for (`depends_on_past`): the same
    /// node there has not succeeded or been skipped yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// Where its record's last attempt ran: `local` or a worker's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// pending, ready, succeeded, failed, skipped, upstream_failed, cancelled.
    pub state: String,
    /// The rerun count of its current instance.
    pub rerun: u32,
    /// Its run id (queue key).
    pub run_id: String,
    /// Attempts of its current record (that started its task).
    pub attempts: u32,
    /// Hand-outs of its current record that a breaker deferred before the
    /// task started (not attempts).
    #[serde(default)]
    pub deferrals: u32,
    /// Its last error.
    pub error: Option<String>,
    /// When its last attempt started.
    pub started_ms: Option<u64>,
    /// When it ended.
    pub finished_ms: Option<u64>,
    /// finished - started.
    pub duration_ms: Option<u64>,
    /// Its upstreams.
    pub upstreams: Vec<String>,
    /// Its trigger rule.
    pub trigger_rule: String,
    /// Its output as JSON, when it is JSON.
    pub output: Option<serde_json::Value>,
    /// Its output as text, when it is not JSON.
    pub output_text: Option<String>,
    /// Its output's size.
    pub output_bytes: usize,
    /// Whether the output shown was cut at [`OUTPUT_INLINE_BYTES_MAX`].
    pub output_truncated: bool,
    /// What it is: `task`, `mapped` (one member per item) or `sensor`.
    #[serde(default)]
    pub kind: String,
    /// A sensor's checks that found its condition not met (no attempts).
    #[serde(default)]
    pub pokes: u32,
    /// The assets its success materializes.
    #[serde(default)]
    pub produces: Vec<String>,
    /// A mapped node's members, with their states.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<weir_actors::scheduler::view::MembersView>,
    /// While its rerun has no record yet, the record the rerun supersedes:
    /// its state, attempts and error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<weir_actors::views::run::PreviousRecord>,
    /// The artifacts of its current record (a mapped node's: its members',
    /// named `<index>/<name>`), fetched through the artifact route.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<weir_core::artifact::ArtifactRef>,
}

impl NodeDetail {
    /// The run id of member `member` of this mapped node: of the
    /// generation whose record holds it, else of the node's current one.
    pub fn member_run_id(&self, graph: &str, partition: &Partition, member: u32) -> Option<String> {
        let members = self.members.as_ref()?;
        if member as usize >= members.total {
            return None;
        }
        let rerun = members
            .list
            .get(member as usize)
            .map_or(members.rerun, |m| m.rerun);
        Some(weir_actors::scheduler::records::member_id(
            graph, partition, &self.node, rerun, member,
        ))
    }
}

/// A run with its nodes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunDetail {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// Its state.
    pub state: RunState,
    /// Its definition's hash.
    pub definition: String,
    /// When it started.
    pub requested_at_ms: u64,
    /// When it settled.
    pub settled_at_ms: Option<u64>,
    /// Its params, as it started with them (the definition's defaults with
    /// the start's values over them).
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
    /// Why it failed, when no node's failure says it (its run_timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The IANA zone of its definition, which its window is a window of
    /// and its instants are shown in (`UTC` by default).
    #[serde(default = "utc_name")]
    pub timezone: String,
    /// Its time window, for a time-partitioned graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowView>,
    /// When it started: its instant, for a run prepared ahead.
    #[serde(default)]
    pub started_at_ms: u64,
    /// When a run prepared ahead was prepared (its record written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepared_at_ms: Option<u64>,
    /// Its SLA misses (the run's own and its nodes'), each recorded once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sla_misses: Vec<weir_actors::records::sla::SlaMiss>,
    /// Nodes in topological order.
    pub nodes: Vec<NodeDetail>,
}

/// A time window: its ends as RFC 3339 instants with the zone's offset
/// (`2026-03-29T00:00:00+01:00`) and in ms since the epoch. Half-open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WindowView {
    /// Its first instant.
    pub start: String,
    /// The first instant after it.
    pub end: String,
    /// `start` in ms since the epoch.
    pub start_ms: u64,
    /// `end` in ms since the epoch.
    pub end_ms: u64,
}

impl WindowView {
    /// The window of `partition` in `zone`; `None` for a key or `none`.
    pub fn of(partition: &str, zone: weir_core::zone::Zone) -> Option<WindowView> {
        let p: Partition = partition.parse().ok()?;
        let (start_ms, end_ms) = (p.start_ms(zone)?, p.end_ms(zone)?);
        Some(WindowView {
            start: zone.rfc3339(start_ms),
            end: zone.rfc3339(end_ms),
            start_ms,
            end_ms,
        })
    }
}

fn utc_name() -> String {
    "UTC".into()
}

/// A partitioning's name, as definitions write it.
pub fn partitioning_name(p: weir_core::partition::Partitioning) -> &'static str {
    use weir_core::partition::Partitioning as P;
    match p {
        P::None => "none",
        P::Hourly => "hourly",
        P::Daily => "daily",
        P::Weekly => "weekly",
        P::Monthly => "monthly",
        P::Keyed => "keyed",
    }
}

/// The names of adopted graphs.
pub fn graph_names(store: &Store) -> Result<Vec<String>, StoreError> {
    Ok(store
        .scan_keys(GRAPH_PREFIX)?
        .into_iter()
        .map(|k| k[GRAPH_PREFIX.len()..].to_string())
        .collect())
}

fn brief(graph: &str, partition: &str, r: &GraphRunRecord) -> RunBrief {
    RunBrief {
        graph: graph.to_string(),
        partition: partition.to_string(),
        state: r.state,
        requested_at_ms: r.requested_at_ms,
        settled_at_ms: r.settled_at_ms,
        definition: r.definition.clone(),
        sla_missed: false,
        started_at_ms: r.started_ms(),
        prepared_at_ms: r.prepared_ms(),
        timezone: utc_name(),
    }
}

/// Whether the run of `graph` at `partition` has a recorded SLA miss (a
/// failed read counts as none: a listing does not fail for a badge).
pub fn sla_missed(store: &Store, graph: &str, partition: &str) -> bool {
    store
        .scan_keys(&weir_actors::records::sla::sla_run_prefix(graph, partition))
        .is_ok_and(|k| !k.is_empty())
}

/// One graph's summary, or `None` if it is not adopted. `paused` says
/// whether its triggers are paused.
pub fn graph_summary(
    store: &Store,
    graph: &str,
    now_ms: u64,
    paused: bool,
) -> Result<Option<(GraphSummary, GraphDef)>, StoreError> {
    let Some(rec) = store.get::<GraphRecord>(&graph_key(graph))? else {
        return Ok(None);
    };
    let Some(def) = store.get::<GraphDef>(&def_key(&rec.definition))? else {
        return Err(StoreError::Inconsistent {
            dir: store.dir().to_path_buf(),
            tree: "records",
            what: format!(
                "graph {graph} names definition {} which is not stored",
                rec.definition
            ),
        });
    };
    let prefix = runs_prefix(graph);
    let (last, _) = store.scan_rev::<GraphRunRecord>(&prefix, None, None, 1, |_, _| true)?;
    let last_run = last
        .first()
        .map(|(k, r)| brief(graph, &k[prefix.len()..], r));
    let next_firing_ms = def.schedule().and_then(|s| s.next_after(now_ms));
    Ok(Some((
        GraphSummary {
            name: graph.to_string(),
            partitioning: partitioning_name(def.partitioning).to_string(),
            cron: def.cron.clone(),
            next_firing_ms,
            next_firing: next_firing_ms.map(|ms| def.zone().rfc3339(ms)),
            timezone: def.zone().name().to_string(),
            paused,
            definition: rec.definition,
            adopted_at_ms: rec.adopted_at_ms,
            nodes: def.nodes.len(),
            last_run,
        },
        def,
    )))
}

/// A graph's adopt history, newest first.
pub fn graph_history(store: &Store, graph: &str) -> Result<Vec<HashEntry>, StoreError> {
    let prefix = history_prefix(graph);
    let (rows, _) = store.scan_rev::<String>(&prefix, None, None, HISTORY_MAX, |_, _| true)?;
    Ok(rows
        .into_iter()
        .map(|(k, hash)| HashEntry {
            hash,
            adopted_at_ms: k[prefix.len()..].parse().unwrap_or(0),
        })
        .collect())
}

/// Why a run query is refused.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// A parameter is not valid.
    #[error("{0}")]
    Bad(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The zone of `graph`'s adopted definition (UTC when it has none).
pub fn graph_zone(store: &Store, graph: &str) -> Result<weir_core::zone::Zone, StoreError> {
    let Some(rec) = store.get::<GraphRecord>(&graph_key(graph))? else {
        return Ok(weir_core::zone::Zone::UTC);
    };
    Ok(store
        .get::<GraphDef>(&def_key(&rec.definition))?
        .map(|d| d.zone())
        .unwrap_or_default())
}

/// A partition as people write it: a partition (`2026-11-01`,
/// `key=web-2@2026-12-01T04:08:47.486Z`), or a bare key (`web-2`), which
/// names that key's newest run. `Ok(None)`: a key with no run.
pub fn resolve_partition(
    store: &Store,
    graph: &str,
    text: &str,
) -> Result<Option<Partition>, QueryError> {
    if let Ok(p) = text.parse::<Partition>() {
        if p.partitioning() != weir_core::partition::Partitioning::Hourly {
            return Ok(Some(p));
        }
        // An hour is named with its offset outside UTC: `2026-10-25T01`
        // in Berlin is the run `2026-10-25T01:00+02:00`.
        let zone = graph_zone(store, graph)?;
        return p
            .in_zone(zone)
            .map(Some)
            .map_err(|e| QueryError::Bad(e.to_string()));
    }
    let key = weir_core::names::Key::new(text).map_err(|e| {
        QueryError::Bad(format!(
            "partition {text:?}: neither a partition nor a key ({e})"
        ))
    })?;
    let prefix = format!("{}key={}@", runs_prefix(graph), key.as_str());
    let (rows, _) = store.scan_rev::<GraphRunRecord>(&prefix, None, None, 1, |k, _| {
        // A key holding `@` could share the prefix: keep exact matches.
        k[runs_prefix(graph).len()..]
            .parse::<Partition>()
            .is_ok_and(|p| p.key().is_some_and(|k| k.as_str() == key.as_str()))
    })?;
    Ok(rows
        .first()
        .and_then(|(k, _)| k[runs_prefix(graph).len()..].parse().ok()))
}

/// How a partition is shown: a keyed run's key, and its instant apart.
pub fn partition_parts(partition: &str) -> (String, Option<u64>) {
    match partition.parse::<Partition>() {
        Ok(p) => match (p.key(), p.at_ms()) {
            (Some(k), at) => (k.as_str().to_string(), at),
            _ => (partition.to_string(), None),
        },
        Err(_) => (partition.to_string(), None),
    }
}

/// A page of runs, newest partition first: within a graph by partition
/// (time windows sort by time), across graphs merged by partition, then
/// graph name. Reads about `limit` records per graph, not every run.
pub fn list_runs(store: &Store, q: &RunQuery) -> Result<RunPage, QueryError> {
    let limit = q.limit.unwrap_or(RUNS_PAGE_DEFAULT);
    if limit == 0 || limit > RUNS_PAGE_MAX {
        return Err(QueryError::Bad(format!(
            "limit: {limit} is not within 1..={RUNS_PAGE_MAX}"
        )));
    }
    for (field, v) in [("from", &q.from), ("to", &q.to)] {
        if let Some(p) = v {
            p.parse::<Partition>()
                .map_err(|e| QueryError::Bad(format!("{field}: {e}")))?;
        }
    }
    let graphs = match &q.graph {
        Some(g) => {
            weir_core::names::Name::new(g.as_str())
                .map_err(|e| QueryError::Bad(format!("graph: {e}")))?;
            vec![g.clone()]
        }
        None => graph_names(store)?,
    };
    let cursor: Option<(String, String)> = match &q.cursor {
        None => None,
        Some(c) => Some(
            decode_cursor(c)
                .ok_or_else(|| QueryError::Bad(format!("cursor {c:?} is not one this API made")))?,
        ),
    };
    let mut candidates: Vec<RunBrief> = Vec::new();
    let mut more_any = false;
    for g in &graphs {
        let prefix = runs_prefix(g);
        let lower = q.from.as_ref().map(|f| format!("{prefix}{f}"));
        // `to` is inclusive: the bound is just past it.
        let mut upper = q.to.as_ref().map(|t| format!("{prefix}{t}\u{0}"));
        if let Some((cp, cg)) = &cursor {
            // Runs of this graph after the cursor in the merged order:
            // partition < cp, or partition == cp and graph > cg.
            let bound = if g.as_str() > cg.as_str() {
                format!("{prefix}{cp}\u{0}")
            } else {
                format!("{prefix}{cp}")
            };
            upper = Some(match upper {
                Some(u) if u < bound => u,
                _ => bound,
            });
        }
        let state = q.state;
        let sla_only = q.sla_missed;
        let (rows, more) = store.scan_rev::<GraphRunRecord>(
            &prefix,
            lower.as_deref(),
            upper.as_deref(),
            limit,
            |k, r| {
                state.is_none_or(|s| r.state == s)
                    && (!sla_only || sla_missed(store, g, &k[prefix.len()..]))
            },
        )?;
        more_any |= more && rows.len() == limit;
        candidates.extend(rows.iter().map(|(k, r)| brief(g, &k[prefix.len()..], r)));
    }
    candidates.sort_by(|a, b| {
        b.partition
            .cmp(&a.partition)
            .then_with(|| a.graph.cmp(&b.graph))
    });
    let more = candidates.len() > limit || more_any;
    candidates.truncate(limit);
    let mut zones: std::collections::BTreeMap<String, String> = Default::default();
    for c in &mut candidates {
        c.sla_missed = sla_missed(store, &c.graph, &c.partition);
        if !zones.contains_key(&c.graph) {
            let z = graph_zone(store, &c.graph)?;
            zones.insert(c.graph.clone(), z.name().to_string());
        }
        c.timezone = zones[&c.graph].clone();
    }
    let next_cursor = if more && candidates.len() == limit {
        candidates
            .last()
            .map(|r| encode_cursor(&r.partition, &r.graph))
    } else {
        None
    };
    Ok(RunPage {
        runs: candidates,
        next_cursor,
    })
}

/// A runs page's cursor: the last run shown, `<partition>\u{1f}<graph>`,
/// as unpadded base64url, so that it is opaque and pasteable (the
/// separator is a control character no name holds).
fn encode_cursor(partition: &str, graph: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{partition}\u{1f}{graph}"))
}

/// The (partition, graph) of a cursor [`encode_cursor`] made, or of the
/// raw form earlier versions gave out (`<partition>\u{1f}<graph>`).
fn decode_cursor(c: &str) -> Option<(String, String)> {
    use base64::Engine as _;
    let text = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_else(|| c.to_string());
    let (p, g) = text.split_once('\u{1f}').or_else(|| text.split_once('|'))?;
    Some((p.to_string(), g.to_string()))
}

/// A node's output fields; an output in a blob is read back (and checked
/// against its hash: a missing or damaged blob is an error naming its
/// file).
type OutputFields = (Option<serde_json::Value>, Option<String>, usize, bool);

fn output_fields(
    store: &Store,
    done: Option<&DoneRecord>,
    inline_max: usize,
) -> Result<OutputFields, StoreError> {
    let Some(d) = done.filter(|d| d.status == DoneStatus::Succeeded && d.output_len() > 0) else {
        return Ok((None, None, 0, false));
    };
    if inline_max == 0 {
        // Nothing of it is shown: no blob read.
        return Ok((None, Some(String::new()), d.output_len() as usize, true));
    }
    let bytes = d.load_output(store)?;
    if bytes.len() > inline_max {
        let cut = String::from_utf8_lossy(&bytes[..inline_max]).into_owned();
        return Ok((None, Some(cut), bytes.len(), true));
    }
    Ok(match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) => (Some(v), None, bytes.len(), false),
        Err(_) => (
            None,
            Some(String::from_utf8_lossy(&bytes).into_owned()),
            bytes.len(),
            false,
        ),
    })
}

/// A run with its nodes' records, outputs shown up to `inline_max` bytes.
pub fn run_detail(
    store: &Store,
    graph: &str,
    partition: &Partition,
    inline_max: usize,
) -> Result<Option<RunDetail>, StoreError> {
    let Some(v) = view::graph_run(store, graph, partition)? else {
        return Ok(None);
    };
    let def = store.get::<GraphDef>(&def_key(&v.definition))?;
    // The run's own definition's zone: a run keeps the window it was made
    // with when a later definition changes the zone.
    let zone = def.as_ref().map(|d| d.zone()).unwrap_or_default();
    // Indexed once, and only when a ready node depends on its past.
    let mut indexed: Option<std::sync::Arc<weir_core::graph::Graph>> = None;
    let mut nodes = Vec::with_capacity(v.nodes.len());
    for n in v.nodes {
        let id = run_id(graph, partition, &n.node, n.rerun);
        let done = if n.finished_ms.is_some() {
            store.get::<DoneRecord>(&done_key(&id))?
        } else {
            None
        };
        let decl = def
            .as_ref()
            .and_then(|d| d.nodes.iter().find(|d| d.name.as_str() == n.node));
        let (output, output_text, output_bytes, output_truncated) =
            output_fields(store, done.as_ref(), inline_max)?;
        let waiting_for = match decl {
            Some(d) if d.depends_on_past && n.state == "ready" && v.state == RunState::Active => {
                if indexed.is_none() {
                    indexed = weir_actors::views::past::load_def(store)(&v.definition)?;
                }
                match indexed.clone() {
                    Some(g) => {
                        // The previous run's definition is usually this one.
                        let mut load = |hash: &str| {
                            if hash == v.definition {
                                return Ok(Some(g.clone()));
                            }
                            weir_actors::views::past::load_def(store)(hash)
                        };
                        weir_actors::views::past::waiting_for(store, &g, partition, d, &mut load)?
                            .map(|p| p.to_string())
                    }
                    None => None,
                }
            }
            _ => None,
        };
        nodes.push(NodeDetail {
            worker: done.as_ref().and_then(|d| d.worker.clone()),
            waiting_for,
            duration_ms: match (n.started_ms, n.finished_ms) {
                (Some(s), Some(f)) => Some(f.saturating_sub(s)),
                _ => None,
            },
            node: n.node,
            state: n.state,
            rerun: n.rerun,
            run_id: id,
            attempts: n.attempts,
            deferrals: done.as_ref().map_or(0, |d| d.deferrals),
            error: n.error,
            started_ms: n.started_ms,
            finished_ms: n.finished_ms,
            upstreams: decl.map_or_else(Vec::new, |d| {
                d.upstreams.iter().map(|u| u.to_string()).collect()
            }),
            trigger_rule: decl.map_or_else(String::new, |d| d.trigger_rule.to_string()),
            output,
            output_text,
            output_bytes,
            output_truncated,
            kind: match decl {
                Some(d) if d.map.is_some() => "mapped",
                Some(d) if d.sensor.is_some() => "sensor",
                _ => "task",
            }
            .to_string(),
            pokes: n.pokes,
            produces: decl.map_or_else(Vec::new, |d| {
                d.produces.iter().map(|a| a.to_string()).collect()
            }),
            members: n.members,
            previous: n.previous,
            artifacts: n.artifacts,
        });
    }
    let window = WindowView::of(&v.partition, zone);
    let started_at_ms = weir_actors::records::graph::started_ms(v.requested_at_ms, v.not_before_ms);
    Ok(Some(RunDetail {
        started_at_ms,
        prepared_at_ms: (started_at_ms > v.requested_at_ms).then_some(v.requested_at_ms),
        graph: v.graph,
        partition: v.partition,
        state: v.state,
        definition: v.definition,
        requested_at_ms: v.requested_at_ms,
        settled_at_ms: v.settled_at_ms,
        params: v.params,
        failure: v.failure,
        window,
        timezone: zone.name().to_string(),
        sla_misses: weir_actors::records::sla::run_misses(store, graph, &partition.to_string())?,
        nodes,
    }))
}
