//! Read-only commands: `weir status`, `weir runs`, `weir logs`, `weir
//! assets`. They ask the running engine's API, or read the store (and the
//! log files) when no engine runs; both paths give the same views.

use std::path::PathBuf;

use clap::Args;
use futures::StreamExt;
use weir_actors::scheduler::records::RunState;
use weir_core::partition::Partition;

use super::client::{self, ApiFailure, Client, Conn, Source};
use super::failure::Failure;
use super::output::out;
use super::table;
use crate::logs::{self, LogChunk, LogLine, LogPaths};
use crate::serve::views::{self, GraphSummary, RunPage, RunQuery};
use crate::serve::{NodeLive, RunWithLive};

/// Where the views come from.
enum Reader {
    Api(Client),
    Store(weir_actors::store::Store, PathBuf),
}

impl Reader {
    fn open(conn: &Conn) -> Result<Reader, Failure> {
        Ok(match client::source(conn)? {
            Source::Engine(c) => Reader::Api(c),
            Source::Store(dir) => {
                let (store, _) = super::inspect::open(&dir)?;
                Reader::Store(store, dir)
            }
        })
    }

    async fn graphs(&self) -> Result<Vec<GraphSummary>, Failure> {
        match self {
            Reader::Api(c) => Ok(c.get(&["api", "v1", "graphs"], &[]).await??),
            Reader::Store(store, _) => {
                let now = now_ms();
                let mut out = Vec::new();
                for g in views::graph_names(store).map_err(store_err)? {
                    let paused = weir_actors::trigger::paused(store, &g).map_err(store_err)?;
                    if let Some((s, _)) =
                        views::graph_summary(store, &g, now, paused).map_err(store_err)?
                    {
                        out.push(s);
                    }
                }
                Ok(out)
            }
        }
    }

    async fn runs(&self, q: &RunQuery) -> Result<RunPage, Failure> {
        match self {
            Reader::Api(c) => {
                let mut query: Vec<(&str, String)> = Vec::new();
                if let Some(g) = &q.graph {
                    query.push(("graph", g.clone()));
                }
                if let Some(s) = q.state {
                    query.push(("state", s.to_string()));
                }
                if let Some(f) = &q.from {
                    query.push(("from", f.clone()));
                }
                if let Some(t) = &q.to {
                    query.push(("to", t.clone()));
                }
                if let Some(l) = q.limit {
                    query.push(("limit", l.to_string()));
                }
                if let Some(c) = &q.cursor {
                    query.push(("cursor", c.clone()));
                }
                if q.sla_missed {
                    query.push(("sla_missed", "true".into()));
                }
                Ok(c.get(&["api", "v1", "runs"], &query).await??)
            }
            Reader::Store(store, _) => views::list_runs(store, q).map_err(|e| match e {
                views::QueryError::Bad(m) => Failure::input(m),
                views::QueryError::Store(e) => store_err(e),
            }),
        }
    }

    /// A run by partition, or (keyed graphs) by key for its newest run.
    /// A run, with the queue's tickets of its ready nodes when an engine
    /// answers (none when the store is read directly: nothing runs).
    async fn run(&self, graph: &str, text: &str) -> Result<Option<RunWithLive>, Failure> {
        match self {
            Reader::Api(c) => {
                match c
                    .get::<RunWithLive>(&["api", "v1", "graphs", graph, "runs", text], &[])
                    .await?
                {
                    Ok(r) => Ok(Some(r)),
                    Err(ApiFailure { status: 404, .. }) => Ok(None),
                    Err(e) => Err(e.into()),
                }
            }
            Reader::Store(store, _) => {
                let Some(p) = resolve(store, graph, text)? else {
                    return Ok(None);
                };
                Ok(
                    views::run_detail(store, graph, &p, views::OUTPUT_INLINE_BYTES_MAX)
                        .map_err(store_err)?
                        .map(|run| RunWithLive {
                            run,
                            live: Default::default(),
                        }),
                )
            }
        }
    }
}

/// A node's state and attempts as `weir status` shows them: the store
/// says "ready" for a node whose ticket is live; the queue says whether it
/// runs, waits, or waits to retry after failed attempts (a crash among
/// them), and how many attempts it made.
fn node_state(n: &views::NodeDetail, live: Option<&NodeLive>) -> (String, u32) {
    if n.state != "ready" {
        return (n.state.clone(), n.attempts);
    }
    // A mapped node has no ticket of its own: its members do.
    if let Some(m) = &n.members {
        let ended = m.succeeded + m.failed + m.cancelled + m.skipped;
        return (
            format!("running ({ended} of {} members ended)", m.total),
            n.attempts,
        );
    }
    // A sensor between checks waits in the queue, holding no slot.
    if n.kind == "sensor" && !live.is_some_and(|l| l.running) {
        let attempts = live.map_or(n.attempts, |l| l.attempts);
        let checks = live.map_or(n.pokes, |l| l.pokes.max(n.pokes));
        return (
            format!("waiting (sensor, {checks} checks not met)"),
            attempts,
        );
    }
    match live {
        Some(l) if l.running => ("running".into(), l.attempts),
        Some(l) if l.failures > 0 => (format!("retrying ({} failed)", l.failures), l.attempts),
        Some(l) => ("queued".into(), l.attempts),
        None => ("queued".into(), n.attempts),
    }
}

/// A partition or a keyed graph's bare key, as the store resolves it.
fn resolve(
    store: &weir_actors::store::Store,
    graph: &str,
    text: &str,
) -> Result<Option<Partition>, Failure> {
    views::resolve_partition(store, graph, text).map_err(|e| match e {
        views::QueryError::Bad(m) => Failure::input(m),
        views::QueryError::Store(e) => store_err(e),
    })
}

fn store_err(e: impl std::fmt::Display) -> Failure {
    Failure::store(e.to_string())
}

/// The wall clock, in ms since the epoch.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<u8, Failure> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Failure::store(e.to_string()))?;
    out(&s);
    Ok(0)
}

/// `weir status [GRAPH [PARTITION]]`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// A graph.
    pub graph: Option<String>,
    /// A partition of it.
    pub partition: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir status`.
pub fn status(a: StatusArgs) -> Result<u8, Failure> {
    let reader = Reader::open(&a.conn)?;
    client::block_on(async move {
        match (&a.graph, &a.partition) {
            (Some(g), Some(p)) => {
                let Some(run) = reader.run(g, p).await? else {
                    known_graph(&reader, g).await?;
                    return Err(Failure::input(format!(
                        "graph {g:?} has no run for partition {p}"
                    )));
                };
                if a.conn.json {
                    return print_json(&run);
                }
                print_run(&run);
                Ok(0)
            }
            (Some(g), None) => {
                let page = reader
                    .runs(&RunQuery {
                        graph: Some(g.clone()),
                        limit: Some(views::RUNS_PAGE_MAX),
                        ..RunQuery::default()
                    })
                    .await?;
                if page.runs.is_empty() {
                    known_graph(&reader, g).await?;
                }
                if a.conn.json {
                    return print_json(&page);
                }
                print_runs(&page);
                Ok(0)
            }
            _ => {
                let graphs = reader.graphs().await?;
                if a.conn.json {
                    return print_json(&graphs);
                }
                if graphs.is_empty() {
                    out("no graph adopted");
                    return Ok(0);
                }
                let mut t = table::new(&[
                    "graph",
                    "partitioning",
                    "cron",
                    "next firing",
                    "paused",
                    "last run",
                    "state",
                    "definition",
                ]);
                for g in &graphs {
                    t.add_row(vec![
                        g.name.clone(),
                        g.partitioning.clone(),
                        g.cron.clone().unwrap_or_else(|| "-".into()),
                        table::time(g.next_firing_ms),
                        if g.paused {
                            "paused".into()
                        } else {
                            "-".into()
                        },
                        g.last_run
                            .as_ref()
                            .map_or("-".into(), |r| views::partition_parts(&r.partition).0),
                        g.last_run
                            .as_ref()
                            .map_or("-".into(), |r| r.state.to_string()),
                        g.definition.chars().take(12).collect(),
                    ]);
                }
                table::print(&t);
                Ok(0)
            }
        }
    })?
}

/// An error (exit 2) when no graph `g` is adopted, naming the nearest one
/// and the adopted ones: a mistyped name is not an empty table. Asked only
/// when `g` showed nothing (a graph with runs is adopted), so a status
/// costs no second request.
async fn known_graph(reader: &Reader, g: &str) -> Result<(), Failure> {
    let graphs = reader.graphs().await?;
    if graphs.iter().any(|x| x.name == g) {
        return Ok(());
    }
    Err(Failure::input(unknown_graph(
        g,
        graphs.iter().map(|x| x.name.as_str()),
    )))
}

/// The message for an unknown graph `g` among `adopted`.
fn unknown_graph<'a>(g: &str, adopted: impl Iterator<Item = &'a str>) -> String {
    let adopted: Vec<&str> = adopted.collect();
    if adopted.is_empty() {
        return format!("graph {g:?} is not adopted: no graph is");
    }
    // Close enough to be a typo: most of the name in common.
    let nearest = adopted
        .iter()
        .map(|a| (strsim::normalized_damerau_levenshtein(g, a), *a))
        .filter(|(score, _)| *score >= 0.6)
        .max_by(|x, y| x.0.total_cmp(&y.0))
        .map(|(_, a)| format!(" (did you mean {a:?}?)"))
        .unwrap_or_default();
    const LISTED_MAX: usize = 10;
    let mut list = adopted
        .iter()
        .take(LISTED_MAX)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if adopted.len() > LISTED_MAX {
        list.push_str(&format!(" and {} more", adopted.len() - LISTED_MAX));
    }
    format!("graph {g:?} is not adopted{nearest}; adopted: {list}")
}

/// Members a status lists one by one: all of a small node, else those
/// that did not succeed (up to this many).
const MEMBER_ROWS_SHOWN: usize = 20;

fn print_run(with_live: &RunWithLive) {
    let run = &with_live.run;
    let (shown, at) = views::partition_parts(&run.partition);
    let shown = match at {
        Some(at) => format!("{shown} (due {})", table::time(Some(at))),
        None => shown,
    };
    out(&format!(
        "graph {}  partition {}  state {}  definition {}",
        run.graph,
        shown,
        run.state,
        run.definition.chars().take(12).collect::<String>()
    ));
    if let Some(w) = &run.window {
        out(&format!(
            "window {} .. {} ({}, {})",
            w.start,
            w.end,
            table::duration(Some(w.end_ms.saturating_sub(w.start_ms))),
            run.timezone
        ));
    }
    let prepared = run
        .prepared_at_ms
        .map(|p| format!(" (prepared at {})", table::time_in(Some(p), &run.timezone)))
        .unwrap_or_default();
    out(&format!(
        "started {}{prepared}  settled {}",
        table::time_in(Some(run.started_at_ms), &run.timezone),
        table::time_in(run.settled_at_ms, &run.timezone)
    ));
    if let Some(f) = &run.failure {
        out(&format!("failed: {f}"));
    }
    if !run.params.is_empty() {
        let shown: Vec<String> = run
            .params
            .iter()
            .map(|(k, v)| {
                let v = table::first_line(Some(v), 60);
                if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '"') {
                    format!("{k}={v:?}")
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        out(&format!("params {}", shown.join("  ")));
    }
    // Hand-outs a breaker deferred are not attempts: shown apart, in their
    // own column, when any node has some.
    let deferred = run.nodes.iter().any(|n| n.deferrals > 0);
    // Where each node's attempt ran (or runs): `local` or a worker.
    let worker_of = |n: &views::NodeDetail| -> Option<String> {
        with_live
            .live
            .get(&n.node)
            .and_then(|l| l.worker.clone())
            .or_else(|| n.worker.clone())
    };
    let workers = run.nodes.iter().any(|n| worker_of(n).is_some());
    let mut head = vec!["node", "state", "rerun", "attempts"];
    if deferred {
        head.push("deferred");
    }
    if workers {
        head.push("worker");
    }
    head.extend(["started", "duration", "error"]);
    let mut t = table::new(&head);
    for n in &run.nodes {
        let (state, attempts) = node_state(n, with_live.live.get(&n.node));
        let state = match &n.waiting_for {
            Some(p) => format!("waiting for {p}"),
            None => state,
        };
        let mut row = vec![
            n.node.clone(),
            state,
            n.rerun.to_string(),
            attempts.to_string(),
        ];
        if deferred {
            row.push(n.deferrals.to_string());
        }
        if workers {
            row.push(worker_of(n).unwrap_or_else(|| "-".into()));
        }
        // A running attempt's start is the queue's (its record has none yet).
        let started = n
            .started_ms
            .or_else(|| with_live.live.get(&n.node).and_then(|l| l.started_ms));
        // While a rerun runs, the record it reruns stays in sight.
        let error = match (&n.error, &n.previous) {
            (None, Some(p)) => Some(format!(
                "rerun {} {}{}",
                p.rerun,
                p.state,
                p.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )),
            (e, _) => e.clone(),
        };
        row.extend([
            table::time_in(started, &run.timezone),
            table::duration(n.duration_ms),
            table::first_line(error.as_deref(), 80),
        ]);
        t.add_row(row);
    }
    table::print(&t);
    for m in &run.sla_misses {
        let what = match &m.node {
            Some(n) => format!("node {n} not succeeded"),
            None => "the run not complete".to_string(),
        };
        out(&format!(
            "\nSLA missed: {what} by {} ({} after its {}; it was {})",
            m.deadline,
            m.sla,
            m.anchor.replace('_', " "),
            m.state
        ));
    }
    for n in run.nodes.iter().filter(|n| n.waiting_for.is_some()) {
        let p = n.waiting_for.as_deref().unwrap_or_default();
        out(&format!(
            "\n{} depends on its past: it starts once {} of {p} has succeeded or been skipped (weir status {} {p})",
            n.node, n.node, run.graph
        ));
    }
    for n in &run.nodes {
        if n.pokes > 0 {
            // While it waits, its last check: when, and what it saw.
            let last = with_live
                .live
                .get(&n.node)
                .and_then(|l| l.last_check.as_ref())
                .map(|c| {
                    format!(
                        "; the last at {}: {}",
                        table::fmt_time(c.at_ms),
                        table::first_line(Some(&c.seen), 120)
                    )
                })
                .unwrap_or_default();
            out(&format!(
                "\n{} (sensor): {} checks found its condition not met{last}",
                n.node, n.pokes
            ));
        }
        let Some(m) = &n.members else { continue };
        let kept = if m.kept > 0 {
            format!(", {} kept from an earlier rerun", m.kept)
        } else {
            String::new()
        };
        out(&format!(
            "\n{} (mapped, rerun {}): {} members: {} succeeded, {} failed, {} cancelled, {} skipped, {} pending{kept}",
            n.node, m.rerun, m.total, m.succeeded, m.failed, m.cancelled, m.skipped, m.pending
        ));
        let mut mt = table::new(&["member", "state", "rerun", "attempts", "item", "error"]);
        let shown = MEMBER_ROWS_SHOWN;
        let interesting: Vec<_> = m.list.iter().filter(|x| x.state != "succeeded").collect();
        let rows: Vec<_> = if m.list.len() <= shown {
            m.list.iter().collect()
        } else {
            interesting.into_iter().take(shown).collect()
        };
        for x in &rows {
            mt.add_row(vec![
                x.index.to_string(),
                x.state.clone(),
                x.rerun.to_string(),
                x.attempts.to_string(),
                table::first_line(x.item.as_deref(), 40),
                table::first_line(x.error.as_deref(), 60),
            ]);
        }
        if !rows.is_empty() {
            table::print(&mt);
        }
        if m.total > rows.len() {
            out(&format!(
                "  ({} more; all of them: --json; a member's logs: weir logs {} {} {} --member N)",
                m.total - rows.len(),
                run.graph,
                run.partition,
                n.node
            ));
        }
    }
    let failed: Vec<_> = run
        .nodes
        .iter()
        .filter(|n| n.state == "failed" && n.error.is_some())
        .collect();
    for n in failed {
        out(&format!("\n{} failed:", n.node));
        for line in n.error.as_deref().unwrap_or("").lines().take(20) {
            out(&format!("  {line}"));
        }
        out(&format!(
            "  (all of it: weir logs {} {} {})",
            run.graph, run.partition, n.node
        ));
    }
}

fn print_runs(page: &RunPage) {
    // A keyed run shows its key, and the instant it was due apart.
    let keyed = page
        .runs
        .iter()
        .any(|r| views::partition_parts(&r.partition).1.is_some());
    let mut headers = vec!["graph", "partition"];
    if keyed {
        headers.push("due");
    }
    headers.extend(["state", "started", "settled", "duration"]);
    let mut t = table::new(&headers);
    for r in &page.runs {
        let (shown, at) = views::partition_parts(&r.partition);
        let mut row = vec![r.graph.clone(), shown];
        if keyed {
            row.push(table::time(at));
        }
        let state = if r.sla_missed {
            format!("{} (SLA missed)", r.state)
        } else {
            r.state.to_string()
        };
        row.extend([
            state,
            table::time_in(Some(r.started_at_ms), &r.timezone),
            table::time_in(r.settled_at_ms, &r.timezone),
            table::duration(r.settled_at_ms.map(|s| s.saturating_sub(r.started_at_ms))),
        ]);
        t.add_row(row);
    }
    table::print(&t);
    if let Some(c) = &page.next_cursor {
        out(&format!("(more: --cursor '{c}')"));
    }
}

/// `weir runs [--graph G] [--state S] [--limit N]`.
#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only this graph.
    #[arg(long)]
    pub graph: Option<String>,
    /// Only runs in this state: active, complete, failed, cancelled.
    #[arg(long)]
    pub state: Option<String>,
    /// Partitions from this one.
    #[arg(long)]
    pub from: Option<String>,
    /// Partitions up to this one.
    #[arg(long)]
    pub to: Option<String>,
    /// At most this many.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    /// From a previous page.
    #[arg(long)]
    pub cursor: Option<String>,
    /// Only runs that missed an SLA (theirs or a node's).
    #[arg(long)]
    pub sla_missed: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir runs`.
pub fn runs(a: RunsArgs) -> Result<u8, Failure> {
    let state = a
        .state
        .as_deref()
        .map(|s| {
            s.parse::<RunState>()
                .map_err(|e| Failure::input(format!("--state {e}")))
        })
        .transpose()?;
    let reader = Reader::open(&a.conn)?;
    let q = RunQuery {
        graph: a.graph,
        state,
        from: a.from,
        to: a.to,
        limit: Some(a.limit),
        cursor: a.cursor,
        sla_missed: a.sla_missed,
    };
    client::block_on(async move {
        let page = reader.runs(&q).await?;
        if let (Some(g), true) = (&q.graph, page.runs.is_empty()) {
            known_graph(&reader, g).await?;
        }
        if a.conn.json {
            return print_json(&page);
        }
        print_runs(&page);
        Ok(0)
    })?
}

/// `weir logs GRAPH PARTITION NODE [--attempt N] [--follow]`.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// The node.
    pub node: String,
    /// The attempt (default: the newest).
    #[arg(long)]
    pub attempt: Option<u32>,
    /// The rerun (default: the node's current instance).
    #[arg(long)]
    pub rerun: Option<u32>,
    /// A mapped node's member (its index, from 0): its logs.
    #[arg(long)]
    pub member: Option<u32>,
    /// Keep printing a running attempt's lines until it ends.
    #[arg(long, short = 'f')]
    pub follow: bool,
    #[command(flatten)]
    pub conn: Conn,
}

fn print_line(l: &LogLine, json: bool) {
    if json {
        out(&serde_json::to_string(l).unwrap_or_default());
    } else {
        out(&render_line(l));
    }
}

/// A log line as people read it: `2026-12-01T05:20:01.123Z out  text`.
pub fn render_line(l: &LogLine) -> String {
    let t = table::fmt_time(l.ts_ms).replace(' ', "T");
    format!(
        "{t}.{:03}Z {:<4} {}",
        l.ts_ms % 1000,
        format!("{:?}", l.stream).to_lowercase(),
        l.text
    )
}

/// What `weir logs` says of a mapped node asked for without `--member`:
/// its logs are its members', and how to read them.
fn mapped_logs_hint(
    graph: &str,
    partition: &str,
    node: &str,
    m: &weir_actors::views::run::MembersView,
) -> String {
    const NAMED_MAX: usize = 10;
    let failed: Vec<String> = m
        .list
        .iter()
        .filter(|x| x.state == "failed")
        .take(NAMED_MAX)
        .map(|x| x.index.to_string())
        .collect();
    let failed = if failed.is_empty() {
        String::new()
    } else {
        format!("; failed: {}", failed.join(", "))
    };
    format!(
        "node {node:?} is mapped: its logs are its {} members', each read with `weir logs {graph} {partition} {node} --member N` (N from 0 to {}){failed}",
        m.total,
        m.total.saturating_sub(1)
    )
}

/// Runs `weir logs`.
pub fn logs_cmd(a: LogsArgs) -> Result<u8, Failure> {
    let reader = Reader::open(&a.conn)?;
    client::block_on(async move {
        match reader {
            Reader::Api(c) => {
                if a.member.is_none() {
                    // A mapped node's logs are its members'.
                    if let Ok(Ok(run)) = c
                        .get::<RunWithLive>(
                            &["api", "v1", "graphs", &a.graph, "runs", &a.partition],
                            &[],
                        )
                        .await
                    {
                        if let Some(m) = run
                            .run
                            .nodes
                            .iter()
                            .find(|n| n.node == a.node)
                            .and_then(|n| n.members.as_ref())
                        {
                            return Err(Failure::input(mapped_logs_hint(
                                &a.graph,
                                &a.partition,
                                &a.node,
                                m,
                            )));
                        }
                    }
                }
                let ps = a.partition.clone();
                let mut q: Vec<(&str, String)> = Vec::new();
                if let Some(at) = a.attempt {
                    q.push(("attempt", at.to_string()));
                }
                if let Some(r) = a.rerun {
                    q.push(("rerun", r.to_string()));
                }
                if let Some(m) = a.member {
                    q.push(("member", m.to_string()));
                }
                let segs = [
                    "api", "v1", "graphs", &a.graph, "runs", &ps, "nodes", &a.node, "logs",
                ];
                if a.follow {
                    q.push(("follow", "true".into()));
                    let resp = c.stream(&segs, &q).await?;
                    let printed = follow_sse(resp, a.conn.json).await?;
                    if printed == 0 {
                        say_nothing_printed(&a, a.attempt, true);
                    }
                    Ok(0)
                } else {
                    let mut from = 0u64;
                    loop {
                        let mut qq = q.clone();
                        qq.push(("from_line", from.to_string()));
                        let chunk: LogChunk = c.get(&segs, &qq).await??;
                        for l in &chunk.lines {
                            print_line(l, a.conn.json);
                        }
                        if chunk.lines.is_empty() || chunk.next_line == from {
                            if from == 0 {
                                say_nothing_printed(&a, a.attempt, chunk.finished);
                            }
                            return Ok(0);
                        }
                        from = chunk.next_line;
                    }
                }
            }
            Reader::Store(store, dir) => {
                let part = resolve(&store, &a.graph, &a.partition)?.ok_or_else(|| {
                    Failure::input(format!(
                        "graph {:?} has no run for key {:?}",
                        a.graph, a.partition
                    ))
                })?;
                let run = views::run_detail(&store, &a.graph, &part, 0)
                    .map_err(store_err)?
                    .ok_or_else(|| {
                        Failure::input(format!(
                            "graph {:?} has no run for partition {part}",
                            a.graph
                        ))
                    })?;
                let node = run.nodes.iter().find(|n| n.node == a.node).ok_or_else(|| {
                    Failure::input(format!("graph {:?} has no node {:?}", a.graph, a.node))
                })?;
                if let (None, Some(m)) = (a.member, node.members.as_ref()) {
                    return Err(Failure::input(mapped_logs_hint(
                        &a.graph,
                        &a.partition,
                        &a.node,
                        m,
                    )));
                }
                let run_id = match (a.member, a.rerun) {
                    (Some(m), Some(r)) => {
                        weir_actors::scheduler::records::member_id(&a.graph, &part, &a.node, r, m)
                    }
                    (Some(m), None) => node.member_run_id(&a.graph, &part, m).ok_or_else(|| {
                        Failure::input(format!(
                            "node {:?} of graph {:?} has no member {m} (it is not mapped, or its items are fewer)",
                            a.node, a.graph
                        ))
                    })?,
                    (None, Some(r)) => {
                        weir_actors::scheduler::records::run_id(&a.graph, &part, &a.node, r)
                    }
                    (None, None) => node.run_id.clone(),
                };
                drop(store);
                let paths = LogPaths::new(&dir);
                let attempt = match a.attempt {
                    Some(at) => at,
                    None => logs::attempts(&paths, &run_id)
                        .map_err(store_err)?
                        .last()
                        .map(|r| r.attempt)
                        .ok_or_else(|| {
                            Failure::input(format!(
                                "{run_id}: no attempt has logs (not started yet, or not a command)"
                            ))
                        })?,
                };
                let mut from = 0u64;
                loop {
                    let chunk = logs::read(&paths, &run_id, attempt, from, 10_000)
                        .map_err(|e| Failure::input(e.to_string()))?;
                    for l in &chunk.lines {
                        print_line(l, a.conn.json);
                    }
                    if chunk.lines.is_empty() || chunk.next_line == from {
                        if from == 0 {
                            say_nothing_printed(&a, Some(attempt), chunk.finished);
                        }
                        return Ok(0);
                    }
                    from = chunk.next_line;
                }
            }
        }
    })?
}

/// Says, on stderr, that the attempt asked for printed no line, rather
/// than printing nothing (which reads as a broken command). `attempt` is
/// the one asked for or read (`None`: the engine's newest); `finished`
/// whether it has ended (else more may come).
fn say_nothing_printed(a: &LogsArgs, attempt: Option<u32>, finished: bool) {
    let which = attempt.map_or_else(
        || "its newest attempt".to_string(),
        |n| format!("attempt {n}"),
    );
    let member = a
        .member
        .map_or_else(String::new, |m| format!(" member {m}"));
    if finished {
        eprintln!(
            "weir: {} {} {}{member}: {which} printed nothing (no line on stdout or stderr)",
            a.graph, a.partition, a.node
        );
    } else {
        eprintln!(
            "weir: {} {} {}{member}: {which} has printed nothing yet (it is still running; --follow waits for its lines)",
            a.graph, a.partition, a.node
        );
    }
}

/// Prints a log follow's `line` events until `end`; how many it printed.
async fn follow_sse(resp: reqwest::Response, json: bool) -> Result<u64, Failure> {
    let mut printed = 0u64;
    let mut bytes = resp.bytes_stream();
    let mut buf = String::new();
    let mut event = String::new();
    let mut data = String::new();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|e| Failure::store(format!("the log stream broke: {e}")))?;
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(nl) = buf.find('\n') {
            let line = buf[..nl].trim_end_matches('\r').to_string();
            buf.drain(..=nl);
            if line.is_empty() {
                match event.as_str() {
                    "line" => {
                        if let Ok(l) = serde_json::from_str::<LogLine>(&data) {
                            print_line(&l, json);
                            printed += 1;
                        }
                    }
                    "error" => return Err(Failure::store(data.clone())),
                    "end" => return Ok(printed),
                    _ => {}
                }
                event.clear();
                data.clear();
            } else if let Some(v) = line.strip_prefix("event:") {
                event = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
    }
    Ok(printed)
}

/// `weir assets`.
#[derive(Debug, Args)]
pub struct AssetsArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir assets`: every asset with its producers, the graphs that
/// start on it, its last materialization and what waits to be delivered.
pub fn assets(a: AssetsArgs) -> Result<u8, Failure> {
    let reader = Reader::open(&a.conn)?;
    let json = a.conn.json;
    client::block_on(async move {
        let list: Vec<crate::AssetView> = match reader {
            Reader::Api(c) => c.get(&["api", "v1", "assets"], &[]).await??,
            Reader::Store(store, _) => {
                weir_actors::assets::view::assets(&store).map_err(store_err)?
            }
        };
        if json {
            return print_json(&list);
        }
        if list.is_empty() {
            out("no asset: no adopted definition produces or starts on one");
            return Ok(0);
        }
        let mut t = table::new(&[
            "asset",
            "produced by",
            "starts",
            "last materialization",
            "at",
            "count",
            "pending",
        ]);
        for a in &list {
            let producers: Vec<String> = a
                .producers
                .iter()
                .map(|p| format!("{}/{}", p.graph, p.node))
                .collect();
            let (last, at, count) = match &a.last {
                Some(l) => (
                    format!("{} {}", l.graph, l.partition),
                    table::time(Some(l.at_ms)),
                    l.count.to_string(),
                ),
                None => ("-".into(), "-".into(), "0".into()),
            };
            t.add_row(vec![
                a.asset.clone(),
                if producers.is_empty() {
                    "-".into()
                } else {
                    producers.join(", ")
                },
                if a.consumers.is_empty() {
                    "-".into()
                } else {
                    a.consumers.join(", ")
                },
                last,
                at,
                count,
                a.pending.to_string(),
            ]);
        }
        table::print(&t);
        Ok(0)
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(kind: &str, pokes: u32, members: Option<serde_json::Value>) -> views::NodeDetail {
        let mut v = serde_json::json!({
            "node": "n", "state": "ready", "rerun": 0, "run_id": "g/none/n/0",
            "attempts": 0, "upstreams": [], "trigger_rule": "all_success",
            "output_bytes": 0, "output_truncated": false, "kind": kind, "pokes": pokes,
        });
        if let Some(m) = members {
            v["members"] = m;
        }
        serde_json::from_value(v).unwrap()
    }

    fn live(running: bool, attempts: u32, failures: u32) -> NodeLive {
        NodeLive {
            running,
            attempts,
            failures,
            deferrals: 0,
            at_ms: 0,
            pokes: 0,
            last_check: None,
            worker: None,
            started_ms: None,
        }
    }

    #[test]
    fn an_unknown_graph_names_the_nearest_and_the_adopted() {
        assert_eq!(
            unknown_graph("etll", ["etl", "fanout"].into_iter()),
            "graph \"etll\" is not adopted (did you mean \"etl\"?); adopted: etl, fanout"
        );
        assert_eq!(
            unknown_graph("zzz", ["etl", "fanout"].into_iter()),
            "graph \"zzz\" is not adopted; adopted: etl, fanout"
        );
        assert_eq!(
            unknown_graph("x", std::iter::empty()),
            "graph \"x\" is not adopted: no graph is"
        );
    }

    #[test]
    fn a_ready_node_shows_what_its_ticket_or_members_do() {
        let task = node("task", 0, None);
        assert_eq!(node_state(&task, None), ("queued".into(), 0));
        assert_eq!(
            node_state(&task, Some(&live(true, 2, 1))),
            ("running".into(), 2)
        );
        assert_eq!(
            node_state(&task, Some(&live(false, 1, 1))),
            ("retrying (1 failed)".into(), 1)
        );
        // A mapped node has no ticket: its members say how far it is.
        let members = serde_json::json!({
            "rerun": 0, "total": 5, "succeeded": 2, "failed": 1, "skipped": 0,
            "pending": 2, "kept": 0, "list": [],
        });
        assert_eq!(
            node_state(&node("mapped", 0, Some(members)), None),
            ("running (3 of 5 members ended)".into(), 0)
        );
        // A sensor between checks waits; during one it runs.
        let sensor = node("sensor", 4, None);
        assert_eq!(
            node_state(&sensor, Some(&live(false, 0, 0))),
            ("waiting (sensor, 4 checks not met)".into(), 0)
        );
        assert_eq!(
            node_state(&sensor, Some(&live(true, 1, 0))),
            ("running".into(), 1)
        );
        // While it waits, its live ticket counts the checks not met.
        let waiting = node("sensor", 0, None);
        let mut l = live(false, 0, 0);
        l.pokes = 3;
        assert_eq!(
            node_state(&waiting, Some(&l)),
            ("waiting (sensor, 3 checks not met)".into(), 0)
        );
        // Not ready: its record's state.
        let mut done = node("sensor", 4, None);
        done.state = "succeeded".into();
        done.attempts = 1;
        assert_eq!(node_state(&done, None), ("succeeded".into(), 1));
    }
}
