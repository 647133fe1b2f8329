//! Commands that change a running engine, each a call of its API:
//! `start`, `backfill`, `rerun`, `clear`, `mark`, `cancel`, `pause`,
//! `unpause`, `trigger`, `keys`, `signal`, `dead`, `breakers`, `reload`.
//! Each prints what it did (or `--json`, the API's answer) and needs a
//! running engine (`weir serve` or `weir run`).

use clap::Args;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::client::{self, Conn};
use super::failure::Failure;
use super::output::out;
use super::table;

fn print_json(v: &Value) {
    out(&serde_json::to_string_pretty(v).unwrap_or_default());
}

/// A request to the API.
pub(super) enum Req {
    Get(Vec<String>, Vec<(&'static str, String)>),
    Post(Vec<String>, Value),
}

pub(super) fn get(segs: &[&str], query: Vec<(&'static str, String)>) -> Req {
    Req::Get(segs.iter().map(|s| s.to_string()).collect(), query)
}

pub(super) fn post(segs: &[&str], body: Value) -> Req {
    Req::Post(segs.iter().map(|s| s.to_string()).collect(), body)
}

/// Sends `req` to the engine and decodes its answer.
fn fetch<T: DeserializeOwned>(conn: &Conn, req: Req) -> Result<T, Failure> {
    let c = client::engine(conn)?;
    Ok(client::block_on(async move {
        match req {
            Req::Get(segs, q) => {
                let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
                c.get::<T>(&segs, &q).await
            }
            Req::Post(segs, body) => {
                let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
                c.post::<_, T>(&segs, &body).await
            }
        }
    })???)
}

/// Sends `req` to the engine, prints JSON when asked, else `human`.
pub(super) fn call<T>(
    conn: &Conn,
    req: Req,
    human: impl FnOnce(&T) -> Result<u8, Failure>,
) -> Result<u8, Failure>
where
    T: DeserializeOwned + serde::Serialize,
{
    let answer = fetch::<T>(conn, req)?;
    if conn.json {
        print_json(&serde_json::to_value(&answer).unwrap_or(Value::Null));
        return Ok(0);
    }
    human(&answer)
}

/// As [`call`], for an answer that can be a refusal (some of a reload's
/// files, some of a requeue's letters): `refused` reads it from the
/// answer, and the command then exits 2, with `--json` as without it.
pub(super) fn call_refusable<T>(
    conn: &Conn,
    req: Req,
    refused: impl Fn(&T) -> bool,
    human: impl FnOnce(&T),
) -> Result<u8, Failure>
where
    T: DeserializeOwned + serde::Serialize,
{
    let answer = fetch::<T>(conn, req)?;
    if conn.json {
        print_json(&serde_json::to_value(&answer).unwrap_or(Value::Null));
    } else {
        human(&answer);
    }
    Ok(if refused(&answer) {
        crate::exit::EXIT_BAD_INPUT
    } else {
        0
    })
}

pub(super) fn s(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".into(),
        Some(other) => other.to_string(),
    }
}

/// `weir start GRAPH PARTITION... [--param NAME=VALUE]...`.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// The graph.
    pub graph: String,
    /// Partitions to start (`none` for an unpartitioned graph).
    #[arg(required = true)]
    pub partitions: Vec<String>,
    /// A param of the runs, over the definition's default (repeatable): `--param region=eu`.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `NAME=VALUE` pairs as a map; a pair without `=`, or a name given twice,
/// is bad input.
fn param_pairs(pairs: &[String]) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let mut out = std::collections::BTreeMap::new();
    for p in pairs {
        let Some((k, v)) = p.split_once('=') else {
            return Err(Failure::input(format!(
                "--param {p:?}: write NAME=VALUE (e.g. --param region=eu)"
            )));
        };
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(Failure::input(format!("--param {k}: given twice")));
        }
    }
    Ok(out)
}

/// Runs `weir start`.
pub fn start(a: StartArgs) -> Result<u8, Failure> {
    let params = param_pairs(&a.params)?;
    // Checked here first, so the message is about what was typed.
    for p in &a.partitions {
        p.parse::<weir_core::partition::Partition>()
            .map_err(|e| Failure::input(e.to_string()))?;
    }
    let body = json!({ "partitions": a.partitions, "params": params });
    call(
        &a.conn,
        post(&["api", "v1", "graphs", &a.graph, "runs"], body),
        |outcomes: &Vec<Value>| {
            for o in outcomes {
                let started = o.get("started").and_then(Value::as_bool).unwrap_or(false);
                out(&format!(
                    "{} {}: {}",
                    a.graph,
                    s(o, "partition"),
                    if started {
                        "started"
                    } else {
                        "exists already (not started again)"
                    }
                ));
            }
            Ok(0)
        },
    )
}

/// `weir backfill GRAPH FROM..TO`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// The graph.
    pub graph: String,
    /// The range of windows, e.g. 2026-11-01..2026-11-07 (both included).
    pub range: String,
    /// Newest window first (default: oldest first).
    #[arg(long)]
    pub newest_first: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir backfill`.
pub fn backfill(a: BackfillArgs) -> Result<u8, Failure> {
    let Some((from, to)) = a.range.split_once("..") else {
        return Err(Failure::input(format!(
            "range {:?}: write FROM..TO, e.g. 2026-11-01..2026-11-07",
            a.range
        )));
    };
    let body = json!({ "from": from, "to": to, "order": if a.newest_first { "newest" } else { "oldest" } });
    // Counted before the backfill is asked for: it starts runs at once.
    let existing = if a.conn.json {
        0
    } else {
        existing_runs(&a.conn, &a.graph, from, to)?
    };
    let answer: Value = fetch(
        &a.conn,
        post(&["api", "v1", "graphs", &a.graph, "backfills"], body),
    )?;
    if a.conn.json {
        print_json(&answer);
        return Ok(0);
    }
    let windows = answer.get("windows").and_then(Value::as_u64).unwrap_or(0);
    let id = s(&answer, "id");
    if windows > 0 && existing >= windows {
        out(&format!(
            "backfill {id} of {}: all {windows} windows of {}..{} exist already; nothing to start (use `weir rerun` or `weir clear` to run them again)",
            a.graph,
            s(&answer, "from"),
            s(&answer, "to"),
        ));
        return Ok(0);
    }
    let skipped = if existing > 0 {
        format!(", {existing} of which exist already and are skipped")
    } else {
        String::new()
    };
    out(&format!(
        "backfill {id} of {}: {} windows to start of {windows} in {}..{}{skipped}; it runs paced by max_active_runs — watch it with `weir runs --graph {}`",
        a.graph,
        windows - existing.min(windows),
        s(&answer, "from"),
        s(&answer, "to"),
        a.graph
    ));
    Ok(0)
}

/// How many runs of `graph` exist in `from..=to` (pages of the runs list).
fn existing_runs(conn: &Conn, graph: &str, from: &str, to: &str) -> Result<u64, Failure> {
    let mut count = 0u64;
    let mut cursor: Option<String> = None;
    loop {
        let mut q = vec![
            ("graph", graph.to_string()),
            ("from", from.to_string()),
            ("to", to.to_string()),
            ("limit", "1000".to_string()),
        ];
        if let Some(c) = &cursor {
            q.push(("cursor", c.clone()));
        }
        let page: Value = fetch(conn, get(&["api", "v1", "runs"], q))?;
        count += page["runs"].as_array().map_or(0, |r| r.len() as u64);
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return Ok(count),
        }
    }
}

/// `weir rerun GRAPH PARTITION NODE [--no-downstream]`.
#[derive(Debug, Args)]
pub struct RerunArgs {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// The node.
    pub node: String,
    /// Rerun only the node, not its downstreams.
    #[arg(long)]
    pub no_downstream: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// A rerun answer in words; an outcome other than `submitted` is a refusal
/// (exit 2).
fn rerun_line(node: &str, v: &Value) -> String {
    match s(v, "outcome").as_str() {
        "submitted" => format!("{node}: rerun submitted as {}", s(v, "run_id")),
        "active" => format!(
            "{node}: active already as {}; nothing submitted",
            s(v, "run_id")
        ),
        "no_record" => format!("{node}: has not run yet; nothing to rerun"),
        "not_ready" => format!("{node}: its upstreams do not allow it to run; nothing submitted"),
        o => format!("{node}: {o}"),
    }
}

/// Runs `weir rerun`.
pub fn rerun(a: RerunArgs) -> Result<u8, Failure> {
    let body = json!({ "downstream": !a.no_downstream });
    let c = client::engine(&a.conn)?;
    let segs = [
        "api",
        "v1",
        "graphs",
        &a.graph,
        "runs",
        &a.partition,
        "nodes",
        &a.node,
        "rerun",
    ];
    let answer = client::block_on(c.post::<_, Value>(&segs, &body))??;
    // 409 carries an outcome (active, not ready): an answer, not a failure.
    let v = match answer {
        Ok(v) => v,
        Err(f) if f.status == 409 => serde_json::from_str(&f.body).unwrap_or(Value::Null),
        Err(f) => return Err(f.into()),
    };
    if a.conn.json {
        print_json(&v);
    } else {
        out(&rerun_line(&a.node, &v));
    }
    // Active, no_record, not_ready: refused (the API answers 409), exit 2.
    Ok(if s(&v, "outcome") == "submitted" {
        0
    } else {
        crate::exit::EXIT_BAD_INPUT
    })
}

/// `weir clear GRAPH PARTITION`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir clear`.
pub fn clear(a: RunArgs) -> Result<u8, Failure> {
    call(
        &a.conn,
        post(
            &[
                "api",
                "v1",
                "graphs",
                &a.graph,
                "runs",
                &a.partition,
                "clear",
            ],
            json!({}),
        ),
        |nodes: &Vec<Value>| {
            if nodes.is_empty() {
                out(&format!(
                    "{} {}: no failed node to clear",
                    a.graph, a.partition
                ));
            }
            for n in nodes {
                out(&rerun_line(&s(n, "node"), n));
            }
            Ok(0)
        },
    )
}

/// Runs `weir cancel`.
pub fn cancel(a: RunArgs) -> Result<u8, Failure> {
    let c = client::engine(&a.conn)?;
    let segs = [
        "api",
        "v1",
        "graphs",
        &a.graph,
        "runs",
        &a.partition,
        "cancel",
    ];
    let answer = client::block_on(c.post::<_, Value>(&segs, &json!({})))??;
    let v = match answer {
        Ok(v) => v,
        Err(f) if f.status == 409 => {
            if a.conn.json {
                out(&f.body);
            } else {
                out(&format!(
                    "{} {}: not active; nothing cancelled",
                    a.graph, a.partition
                ));
            }
            return Ok(crate::exit::EXIT_BAD_INPUT);
        }
        Err(f) => return Err(f.into()),
    };
    if a.conn.json {
        print_json(&v);
    } else {
        out(&format!("{} {}: cancelled", a.graph, a.partition));
    }
    Ok(0)
}

/// `weir mark GRAPH PARTITION NODE success|failed`.
#[derive(Debug, Args)]
pub struct MarkArgs {
    /// The graph.
    pub graph: String,
    /// The partition.
    pub partition: String,
    /// The node.
    pub node: String,
    /// success (or succeeded) or failed.
    pub state: String,
    /// Mark every node downstream of it the same (Airflow's mark with
    /// downstream); without it, downstreams that ran keep their records and
    /// those that did not follow the node's new state.
    #[arg(long)]
    pub downstream: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir mark`: the node, and with `--downstream` every node
/// downstream of it (Airflow's mark with downstream), in topological order.
pub fn mark(a: MarkArgs) -> Result<u8, Failure> {
    let state = match a.state.as_str() {
        "success" | "succeeded" => "succeeded",
        "failed" => "failed",
        o => return Err(Failure::input(format!("state {o:?}: success or failed"))),
    };
    let mut nodes = vec![a.node.clone()];
    if a.downstream {
        let detail: Value = fetch(&a.conn, get(&["api", "v1", "graphs", &a.graph], vec![]))?;
        nodes.extend(downstreams_of(&detail["definition"], &a.node)?);
    }
    let mut answers = Vec::with_capacity(nodes.len());
    for node in &nodes {
        let v: Value = fetch(
            &a.conn,
            post(
                &[
                    "api",
                    "v1",
                    "graphs",
                    &a.graph,
                    "runs",
                    &a.partition,
                    "nodes",
                    node,
                    "mark",
                ],
                json!({ "state": state }),
            ),
        )?;
        answers.push((node.clone(), v));
    }
    if a.conn.json {
        match answers.as_slice() {
            [(_, one)] => print_json(one),
            all => print_json(&Value::Array(all.iter().map(|(_, v)| v.clone()).collect())),
        }
        return Ok(0);
    }
    for (node, v) in &answers {
        let what = match s(v, "outcome").as_str() {
            "marked" => format!("marked {} (record {})", s(v, "state"), s(v, "run_id")),
            "cancelled_and_marked" => format!(
                "its live instance {} cancelled, then marked {} (record {})",
                s(v, "cancelled"),
                s(v, "state"),
                s(v, "run_id")
            ),
            "unchanged" => format!("{} already; nothing changed", s(v, "state")),
            other => other.to_string(),
        };
        out(&format!("{} {} {node}: {what}", a.graph, a.partition));
    }
    Ok(0)
}

/// Every node downstream of `node` in a definition (its JSON), in
/// topological order, read with weir-core's indexed graph.
fn downstreams_of(def: &Value, node: &str) -> Result<Vec<String>, Failure> {
    let def: weir_core::graph::GraphDef = serde_json::from_value(def.clone())
        .map_err(|e| Failure::store(format!("the engine's definition does not read: {e}")))?;
    let g = def
        .validate()
        .map_err(|e| Failure::store(format!("the engine's definition: {e}")))?;
    let Some(start) = g.index_of(node) else {
        return Err(Failure::input(format!(
            "graph {:?} has no node {node:?}",
            g.name().as_str()
        )));
    };
    let mut seen = vec![false; g.len()];
    let mut stack = vec![start];
    while let Some(u) = stack.pop() {
        for &d in g.downstreams(u) {
            if !seen[d] {
                seen[d] = true;
                stack.push(d);
            }
        }
    }
    Ok(g.topological_order()
        .iter()
        .filter(|&&i| seen[i])
        .map(|&i| g.node_at(i).name.to_string())
        .collect())
}

/// `weir pause|unpause|trigger GRAPH`.
#[derive(Debug, Args)]
pub struct GraphArgs {
    /// The graph.
    pub graph: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir pause` (true) or `weir unpause` (false).
pub fn pause(a: GraphArgs, paused: bool) -> Result<u8, Failure> {
    let verb = if paused { "pause" } else { "unpause" };
    call(
        &a.conn,
        post(&["api", "v1", "graphs", &a.graph, verb], json!({})),
        |v: &Value| {
            let changed = v.get("changed").and_then(Value::as_bool).unwrap_or(false);
            out(&format!(
                "{}: {}{}",
                a.graph,
                if paused { "paused" } else { "unpaused" },
                if changed { "" } else { " (it was already)" }
            ));
            Ok(0)
        },
    )
}

/// Runs `weir trigger`.
pub fn trigger(a: GraphArgs) -> Result<u8, Failure> {
    call(
        &a.conn,
        post(&["api", "v1", "graphs", &a.graph, "trigger"], json!({})),
        |v: &Value| {
            let list = |k: &str| -> Vec<String> {
                v[k].as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let (started, existing, keys) =
                (list("started"), list("existing"), list("keys_signalled"));
            for p in &started {
                out(&format!("{}: started the run of {p}", a.graph));
            }
            for p in &existing {
                out(&format!(
                    "{}: the run of {p} exists already (not started again; `weir rerun` or `weir clear` runs it again)",
                    a.graph
                ));
            }
            if !keys.is_empty() {
                out(&format!(
                    "{}: {} keys signalled to run now: {}",
                    a.graph,
                    keys.len(),
                    keys.join(", ")
                ));
            }
            if started.is_empty() && existing.is_empty() && keys.is_empty() {
                out(&format!("{}: nothing to start", a.graph));
            }
            Ok(0)
        },
    )
}

/// `weir reconcile GRAPH [PARTITION]`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The graph.
    pub graph: String,
    /// Only this partition's active run (default: every active run).
    pub partition: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir reconcile`: one reconciler pass now, and its report.
pub fn reconcile(a: ReconcileArgs) -> Result<u8, Failure> {
    let body = match &a.partition {
        Some(p) => json!({ "partition": p }),
        None => json!({}),
    };
    call(
        &a.conn,
        post(&["api", "v1", "graphs", &a.graph, "reconcile"], body),
        |r: &Value| {
            let n = |k: &str| r[k].as_u64().unwrap_or(0);
            let what = match &a.partition {
                Some(p) => format!("{} {p}", a.graph),
                None => a.graph.clone(),
            };
            out(&format!(
                "reconciled {what}: {} active run(s) visited, {} node(s) submitted, {} run(s) settled, {} instance(s) cancelled",
                n("active_runs"),
                n("submitted"),
                n("settled"),
                n("cancelled")
            ));
            Ok(0)
        },
    )
}

/// Runs `weir keys`.
pub fn keys(a: GraphArgs) -> Result<u8, Failure> {
    call(
        &a.conn,
        get(&["api", "v1", "graphs", &a.graph, "keys"], vec![]),
        |keys: &Vec<Value>| {
            let mut t = table::new(&[
                "key",
                "due",
                "reason",
                "lease",
                "last start",
                "last finish",
                "failures",
                "last error",
            ]);
            for k in keys {
                let ms = |f: &str| k.get(f).and_then(Value::as_u64);
                t.add_row(vec![
                    s(k, "key"),
                    table::time(ms("due_at_ms")),
                    s(k, "due_reason"),
                    match k.get("lease_owner").and_then(Value::as_str) {
                        Some(o) => format!("{o} until {}", table::time(ms("lease_until_ms"))),
                        None => "-".into(),
                    },
                    table::time(ms("last_started_at_ms")),
                    table::time(ms("last_finished_at_ms")),
                    s(k, "consecutive_failures"),
                    table::first_line(k.get("last_error").and_then(Value::as_str), 60),
                ]);
            }
            table::print(&t);
            Ok(0)
        },
    )
}

/// `weir signal GRAPH KEY`.
#[derive(Debug, Args)]
pub struct SignalArgs {
    /// The graph.
    pub graph: String,
    /// The key.
    pub key: String,
    /// Due now instead of after the debounce.
    #[arg(long)]
    pub immediate: bool,
    /// Accept a key the inventory does not list.
    #[arg(long)]
    pub add: bool,
    /// Where the signal comes from (kept as the due reason).
    #[arg(long, default_value = "cli")]
    pub source: String,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir signal`.
pub fn signal(a: SignalArgs) -> Result<u8, Failure> {
    let body = json!({ "immediate": a.immediate, "add": a.add, "source": a.source });
    call(
        &a.conn,
        post(
            &["api", "v1", "graphs", &a.graph, "keys", &a.key, "signal"],
            body,
        ),
        |v: &Value| {
            out(&format!(
                "{} key {}: due {} ({})",
                a.graph,
                a.key,
                table::time(v.get("due_at_ms").and_then(Value::as_u64)),
                s(v, "due_reason")
            ));
            Ok(0)
        },
    )
}

/// `weir dead [--requeue KEY | --all]`.
#[derive(Debug, Args)]
pub struct DeadArgs {
    /// Requeue this dead letter.
    #[arg(long, conflicts_with = "all")]
    pub requeue: Option<String>,
    /// Requeue every dead letter.
    #[arg(long)]
    pub all: bool,
    /// At most this many listed.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir dead`.
pub fn dead(a: DeadArgs) -> Result<u8, Failure> {
    if let Some(key) = &a.requeue {
        let key = key.clone();
        return call(
            &a.conn,
            post(&["api", "v1", "queue", "dead", &key, "requeue"], json!({})),
            |v: &Value| {
                out(&format!("requeued: {v}"));
                Ok(0)
            },
        );
    }
    if a.all {
        return call_refusable(
            &a.conn,
            post(&["api", "v1", "queue", "dead", "requeue"], json!({})),
            |rows: &Vec<Value>| rows.iter().any(|r| !r["error"].is_null()),
            |rows: &Vec<Value>| {
                let failed = rows.iter().filter(|r| !r["error"].is_null()).count();
                for r in rows {
                    match r["error"].as_str() {
                        Some(e) => out(&format!("{}: not requeued: {e}", s(r, "key"))),
                        None => out(&format!("{}: requeued", s(r, "key"))),
                    }
                }
                out(&format!(
                    "{} requeued, {failed} refused",
                    rows.len() - failed
                ));
            },
        );
    }
    let limit = a.limit.to_string();
    call(
        &a.conn,
        get(&["api", "v1", "queue", "dead"], vec![("limit", limit)]),
        |page: &Value| {
            let empty = Vec::new();
            let letters = page["letters"].as_array().unwrap_or(&empty);
            if letters.is_empty() {
                out("no dead letters");
                return Ok(0);
            }
            let mut t = table::new(&["key", "task", "attempts", "finished", "error"]);
            for l in letters {
                t.add_row(vec![
                    s(l, "key"),
                    s(l, "task"),
                    s(l, "attempts"),
                    table::time(l.get("finished_ms").and_then(Value::as_u64)),
                    table::first_line(l.get("error").and_then(Value::as_str), 80),
                ]);
            }
            table::print(&t);
            Ok(0)
        },
    )
}

/// `weir breakers [--reset TARGET]`.
#[derive(Debug, Args)]
pub struct BreakersArgs {
    /// Reset this target's breaker to closed.
    #[arg(long)]
    pub reset: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir breakers`.
pub fn breakers(a: BreakersArgs) -> Result<u8, Failure> {
    if let Some(target) = &a.reset {
        let target = target.clone();
        return call(
            &a.conn,
            post(&["api", "v1", "breakers", &target, "reset"], json!({})),
            |v: &Value| {
                out(&format!("{}: {}", s(v, "target"), s(v, "state")));
                Ok(0)
            },
        );
    }
    call(
        &a.conn,
        get(&["api", "v1", "breakers"], vec![]),
        |rows: &Vec<Value>| {
            if rows.is_empty() {
                out("no breaker has state yet");
                return Ok(0);
            }
            let mut t = table::new(&["target", "state", "since", "failures"]);
            for b in rows {
                t.add_row(vec![
                    s(b, "target"),
                    s(b, "state"),
                    table::time(b.get("since_ms").and_then(Value::as_u64)),
                    s(b, "failures"),
                ]);
            }
            table::print(&t);
            Ok(0)
        },
    )
}

/// `weir reload`.
#[derive(Debug, Args)]
pub struct ReloadArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir reload`: exit 2 when any file or graph was refused.
pub fn reload(a: ReloadArgs) -> Result<u8, Failure> {
    call_refusable(
        &a.conn,
        post(&["api", "v1", "reload"], json!({})),
        |r: &Value| r["refused"].as_array().is_some_and(|v| !v.is_empty()),
        |r: &Value| {
            let list = |k: &str| r[k].as_array().cloned().unwrap_or_default();
            for g in list("adopted") {
                // (graph, new definition hash)
                let graph = g[0].as_str().unwrap_or("");
                let hash: String = g[1].as_str().unwrap_or("").chars().take(12).collect();
                out(&format!("adopted {graph} (definition {hash})"));
            }
            for g in list("unchanged") {
                out(&format!("unchanged {}", g.as_str().unwrap_or("")));
            }
            for e in list("refused") {
                out(&format!("refused: {}", e.as_str().unwrap_or("")));
            }
        },
    )
}
