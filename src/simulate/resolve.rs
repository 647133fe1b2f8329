//! Resolving a scenario file against the definitions: instants to ms,
//! durations to models, and every graph, node, pool and target it names
//! checked against them (an unknown name is an error naming its line).

use std::collections::BTreeMap;
use std::path::Path;

use weir_core::graph::GraphDef;
use weir_core::simulate::model::DurationModel;

use super::scenario::{
    DurationFile, Durations, Failure, Fault, Input, KeysFile, Scenario, ScenarioError,
    ScenarioFile, Scope, CRASHABLE, DOWN_FAILS_AFTER_MS, FILE_BYTES_MAX, KEYS_MAX, SPAN_DAYS_MAX,
};
use crate::definition::{parse_duration_ms, Definitions};

const DAY_MS: u64 = 86_400_000;

/// Reads and resolves the scenario at `path` against `defs`.
pub fn load(path: &Path, defs: &Definitions) -> Result<Scenario, ScenarioError> {
    let err = |line: Option<usize>, what: String| ScenarioError {
        file: path.to_path_buf(),
        line,
        what,
    };
    let meta = std::fs::metadata(path).map_err(|e| err(None, e.to_string()))?;
    if meta.len() > FILE_BYTES_MAX {
        return Err(err(
            None,
            format!("{} bytes, more than the {FILE_BYTES_MAX} read", meta.len()),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(None, e.to_string()))?;
    parse(path, &text, defs)
}

/// Resolves the scenario `text` (read from `path`) against `defs`.
pub fn parse(path: &Path, text: &str, defs: &Definitions) -> Result<Scenario, ScenarioError> {
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    let file: ScenarioFile = toml::from_str(text).map_err(|e| ScenarioError {
        file: path.to_path_buf(),
        line: e.span().map(|s| line_of(s.start)),
        what: e.message().trim().to_string(),
    })?;
    resolve(path, file, defs, &line_of)
}

/// Resolves `file` (read from `path`) against `defs`; `line_of` maps a
/// byte offset of the text to its line.
pub fn resolve(
    path: &Path,
    file: ScenarioFile,
    defs: &Definitions,
    line_of: &dyn Fn(usize) -> usize,
) -> Result<Scenario, ScenarioError> {
    let at = |span: std::ops::Range<usize>| Some(line_of(span.start));
    let err = |line: Option<usize>, what: String| ScenarioError {
        file: path.to_path_buf(),
        line,
        what,
    };
    let graphs: BTreeMap<&str, &GraphDef> = defs
        .graphs
        .iter()
        .map(|l| (l.graph.def().name.as_str(), l.graph.def()))
        .collect();
    let from_ms = instant(file.from.get_ref(), None)
        .map_err(|e| err(at(file.from.span()), format!("from: {e}")))?;
    let until_ms = match (&file.until, &file.days) {
        (Some(u), None) => instant(u.get_ref(), Some(from_ms))
            .map_err(|e| err(at(u.span()), format!("until: {e}")))?,
        (None, Some(d)) if *d.get_ref() >= 1 && *d.get_ref() <= SPAN_DAYS_MAX => {
            from_ms + d.get_ref() * DAY_MS
        }
        (None, Some(d)) => {
            return Err(err(
                at(d.span()),
                format!("days: {} is outside 1..={SPAN_DAYS_MAX}", d.get_ref()),
            ))
        }
        (Some(u), Some(_)) => {
            return Err(err(
                at(u.span()),
                "until and days: give one of them, not both".into(),
            ))
        }
        (None, None) => {
            return Err(err(
                at(file.from.span()),
                "the span has no end: give until = \"…\" or days = N".into(),
            ))
        }
    };
    if until_ms <= from_ms || until_ms - from_ms > SPAN_DAYS_MAX * DAY_MS {
        return Err(err(
            file.until.as_ref().map(|u| line_of(u.span().start)),
            format!(
                "until: the span must end after it starts and last at most {SPAN_DAYS_MAX} days"
            ),
        ));
    }
    let node_of = |graph: &str, node: Option<&str>, line: Option<usize>, field: &str| {
        let g = graphs.get(graph).ok_or_else(|| {
            err(
                line,
                format!(
                    "{field}graph {graph:?} is not a graph of the definitions (graphs: {})",
                    graphs.keys().copied().collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        if let Some(n) = node {
            if !g.nodes.iter().any(|x| x.name.as_str() == n) {
                return Err(err(
                    line,
                    format!("{field}node {n:?} is not a node of graph {graph:?}"),
                ));
            }
        }
        Ok(*g)
    };

    let mut durations = BTreeMap::new();
    let mut history_lines = BTreeMap::new();
    for d in &file.durations {
        let line = at(d.span());
        let (scope, model) = duration(d.get_ref(), line, &node_of, &defs.pools, &err)?;
        if matches!(model, Durations::History(_)) {
            history_lines.insert(scope.clone(), line);
        }
        if durations.insert(scope.clone(), model).is_some() {
            return Err(err(
                line,
                format!("durations: {scope:?} has a model already"),
            ));
        }
    }

    let mut failures = Vec::new();
    let mut faults = Vec::new();
    for f in &file.failures {
        let line = at(f.span());
        let f = f.get_ref();
        let window = |fallback_until: u64| -> Result<(u64, u64), ScenarioError> {
            let start = match &f.at {
                Some(a) => instant(a, Some(from_ms))
                    .map_err(|e| err(line, format!("failures: at: {e}")))?,
                None => from_ms,
            };
            let end = match &f.lasts {
                Some(d) => {
                    start
                        + parse_duration_ms(d)
                            .map_err(|e| err(line, format!("failures: for: {e}")))?
                }
                None => fallback_until,
            };
            Ok((start, end))
        };
        if f.election_timeout.is_some() && f.kind != "leader_lost" {
            return Err(err(
                line,
                format!(
                    "failures: election_timeout is for leader_lost, not {}",
                    f.kind
                ),
            ));
        }
        match f.kind.as_str() {
            "node" => {
                let (Some(g), Some(n)) = (&f.graph, &f.node) else {
                    return Err(err(line, "failures: a node failure names graph and node".into()));
                };
                let def = node_of(g, Some(n), line, "failures: ")?;
                let probability = f.probability.unwrap_or(1.0);
                if !(0.0..=1.0).contains(&probability) {
                    return Err(err(
                        line,
                        format!("failures: probability {probability} is outside 0..=1"),
                    ));
                }
                let permanent = f.exit_code.is_some_and(|code| {
                    def.nodes
                        .iter()
                        .find(|x| x.name.as_str() == n)
                        .and_then(|x| x.task.config.get("permanent_exit_codes"))
                        .and_then(|v| v.as_array())
                        .is_some_and(|codes| codes.iter().any(|c| c.as_i64() == Some(code.into())))
                });
                let (from, until) = window(until_ms)?;
                failures.push(Failure::Node {
                    graph: g.to_string(),
                    node: n.to_string(),
                    probability,
                    exit_code: f.exit_code,
                    permanent,
                    from_ms: from,
                    until_ms: until,
                });
            }
            "target_down" => {
                let Some(t) = &f.target else {
                    return Err(err(line, "failures: target_down names a target".into()));
                };
                let used = graphs
                    .values()
                    .any(|g| g.nodes.iter().any(|n| n.target.as_ref().is_some_and(|x| x.as_str() == t)));
                if !used {
                    return Err(err(
                        line,
                        format!("failures: target {t:?} is the target of no node of the definitions"),
                    ));
                }
                if f.lasts.is_none() {
                    return Err(err(line, "failures: target_down needs for = \"DURATION\"".into()));
                }
                let (from, until) = window(until_ms)?;
                let fails_after_ms = match &f.fails_after {
                    Some(d) => parse_duration_ms(d)
                        .map_err(|e| err(line, format!("failures: fails_after: {e}")))?,
                    None => DOWN_FAILS_AFTER_MS,
                };
                failures.push(Failure::TargetDown {
                    target: t.clone(),
                    from_ms: from,
                    until_ms: until,
                    fails_after_ms,
                });
            }
            "engine_restart" | "worker_lost" | "actor_crash" | "leader_lost" => {
                let Some(a) = &f.at else {
                    return Err(err(line, format!("failures: {} needs at", f.kind)));
                };
                let when = instant(a, Some(from_ms))
                    .map_err(|e| err(line, format!("failures: at: {e}")))?;
                let fault = match f.kind.as_str() {
                    "engine_restart" => Fault::EngineRestart {
                        down_ms: match &f.down {
                            Some(d) => parse_duration_ms(d)
                                .map_err(|e| err(line, format!("failures: down: {e}")))?
                                .max(1),
                            None => 1_000,
                        },
                    },
                    "leader_lost" => {
                        if f.down.is_some() {
                            return Err(err(
                                line,
                                "failures: leader_lost takes election_timeout = [\"MIN\", \"MAX\"], not down: the failover is drawn from it".into(),
                            ));
                        }
                        let (election_min_ms, election_max_ms) = match &f.election_timeout {
                            Some([a, b]) => {
                                let ms = |s: &str| {
                                    parse_duration_ms(s).map_err(|e| {
                                        err(line, format!("failures: election_timeout: {e}"))
                                    })
                                };
                                (ms(a)?, ms(b)?)
                            }
                            None => (
                                crate::replica::ELECTION_MIN_MS_DEFAULT,
                                crate::replica::ELECTION_MAX_MS_DEFAULT,
                            ),
                        };
                        if election_min_ms == 0 || election_min_ms > election_max_ms {
                            return Err(err(
                                line,
                                format!("failures: election_timeout: [{election_min_ms} ms, {election_max_ms} ms] must be above 0, its least first"),
                            ));
                        }
                        Fault::LeaderLost {
                            election_min_ms,
                            election_max_ms,
                        }
                    }
                    "worker_lost" => {
                        let pool = f.pool.clone().unwrap_or_else(|| "default".into());
                        if pool != "default" && !defs.pools.contains_key(&pool) {
                            return Err(err(
                                line,
                                format!("failures: pool {pool:?} is not a pool of the definitions"),
                            ));
                        }
                        Fault::WorkerLost { pool }
                    }
                    _ => {
                        let actor = f.actor.clone().unwrap_or_default();
                        if !CRASHABLE.contains(&actor.as_str()) {
                            return Err(err(
                                line,
                                format!(
                                    "failures: actor {actor:?} is not one of {}",
                                    CRASHABLE.join(", ")
                                ),
                            ));
                        }
                        Fault::ActorCrash { actor }
                    }
                };
                faults.push((when, fault));
            }
            other => {
                return Err(err(
                    line,
                    format!(
                        "failures: kind {other:?} is not one of node, target_down, worker_lost, actor_crash, engine_restart, leader_lost"
                    ),
                ))
            }
        }
    }

    let mut inputs = Vec::new();
    for i in &file.inputs {
        let line = at(i.span());
        let i = i.get_ref();
        let when =
            instant(&i.at, Some(from_ms)).map_err(|e| err(line, format!("inputs: at: {e}")))?;
        let g = node_of(&i.graph, None, line, "inputs: ")?;
        let need = |v: &Option<String>, field: &str| {
            v.clone()
                .ok_or_else(|| err(line, format!("inputs: a {} input needs {field}", i.kind)))
        };
        let input =
            match i.kind.as_str() {
                "backfill" => Input::Backfill {
                    from: need(&i.from, "from")?,
                    to: need(&i.to, "to")?,
                },
                "start" => Input::Start {
                    partition: need(&i.partition, "partition")?,
                },
                "signal" | "inventory" if g.keyed.is_none() => {
                    return Err(err(
                        line,
                        format!(
                            "inputs: {} needs a keyed graph; {:?} is not",
                            i.kind, i.graph
                        ),
                    ))
                }
                "signal" => Input::Signal {
                    key: need(&i.key, "key")?,
                    immediate: i.immediate.unwrap_or(false),
                },
                "inventory" => Input::Inventory {
                    keys: keys(i.keys.as_ref().ok_or_else(|| {
                        err(line, "inputs: an inventory input needs keys".into())
                    })?)
                    .map_err(|e| err(line, format!("inputs: keys: {e}")))?,
                },
                other => {
                    return Err(err(
                        line,
                        format!(
                        "inputs: kind {other:?} is not one of backfill, start, signal, inventory"
                    ),
                    ))
                }
            };
        inputs.push((when, i.graph.clone(), input));
    }
    // Stable: inputs at one instant keep their file order.
    inputs.sort_by_key(|(when, _, _)| *when);

    let mut key_lists = BTreeMap::new();
    for (g, k) in &file.keys {
        let line = at(k.span());
        let def = node_of(g, None, line, "keys: ")?;
        if def.keyed.is_none() {
            return Err(err(line, format!("keys: graph {g:?} is not keyed")));
        }
        key_lists.insert(
            g.clone(),
            keys(k.get_ref()).map_err(|e| err(line, format!("keys: {g}: {e}")))?,
        );
    }
    let mut outputs = BTreeMap::new();
    for o in &file.outputs {
        let line = at(o.span());
        let o = o.get_ref();
        node_of(&o.graph, Some(&o.node), line, "outputs: ")?;
        serde_json::from_str::<serde_json::Value>(&o.json)
            .map_err(|e| err(line, format!("outputs: json: {e}")))?;
        outputs.insert(
            (o.graph.clone(), o.node.clone()),
            o.json.clone().into_bytes(),
        );
    }
    Ok(Scenario {
        file: path.to_path_buf(),
        seed: file.seed,
        from_ms,
        until_ms,
        durations,
        history_lines,
        failures,
        inputs,
        faults: {
            faults.sort_by_key(|(when, _)| *when);
            faults
        },
        keys: key_lists,
        outputs,
    })
}

type NodeOf<'a> =
    dyn Fn(&str, Option<&str>, Option<usize>, &str) -> Result<&'a GraphDef, ScenarioError> + 'a;

fn duration<'a>(
    d: &DurationFile,
    line: Option<usize>,
    node_of: &NodeOf<'a>,
    pools: &BTreeMap<String, u32>,
    err: &dyn Fn(Option<usize>, String) -> ScenarioError,
) -> Result<(Scope, Durations), ScenarioError> {
    let scope = match (&d.graph, &d.node, &d.pool) {
        (None, None, None) => Scope::All,
        (None, None, Some(p)) => {
            if p != "default" && !pools.contains_key(p) {
                return Err(err(
                    line,
                    format!("durations: pool {p:?} is not a pool of the definitions"),
                ));
            }
            Scope::Pool(p.clone())
        }
        (Some(g), None, None) => {
            node_of(g, None, line, "durations: ")?;
            Scope::Graph(g.clone())
        }
        (Some(g), Some(n), None) => {
            node_of(g, Some(n), line, "durations: ")?;
            Scope::Node(g.clone(), n.clone())
        }
        _ => {
            return Err(err(
                line,
                "durations: give pool, or graph, or graph and node".into(),
            ))
        }
    };
    let ms = |s: &str, field: &str| {
        parse_duration_ms(s).map_err(|e| err(line, format!("durations: {field}: {e}")))
    };
    let model = match (&d.fixed, &d.uniform, &d.lognormal) {
        (None, None, None) if d.from_history == Some(true) => {
            // Filled from the data directory once the file is resolved.
            return Ok((scope, Durations::History(BTreeMap::new())));
        }
        _ if d.from_history == Some(true) => {
            return Err(err(
                line,
                "durations: from_history = true is a model by itself: give it alone, or one of fixed, uniform, lognormal".into(),
            ))
        }
        (Some(f), None, None) => DurationModel::Fixed {
            ms: ms(f, "fixed")?,
        },
        (None, Some([a, b]), None) => DurationModel::Uniform {
            min_ms: ms(a, "uniform")?,
            max_ms: ms(b, "uniform")?,
        },
        (None, None, Some(l)) => DurationModel::Lognormal {
            p50_ms: ms(&l.p50, "lognormal.p50")?,
            p99_ms: ms(&l.p99, "lognormal.p99")?,
        },
        _ => {
            return Err(err(
                line,
                "durations: give exactly one of fixed, uniform, lognormal, from_history = true".into(),
            ))
        }
    };
    model
        .validate()
        .map_err(|e| err(line, format!("durations: {e}")))?;
    Ok((scope, Durations::Model(model)))
}

/// Keys from a list or a count.
fn keys(k: &KeysFile) -> Result<Vec<String>, String> {
    let list = match k {
        KeysFile::List(l) => l.clone(),
        KeysFile::Count(n) if *n <= KEYS_MAX => {
            let width = n.to_string().len().max(4);
            (1..=*n).map(|i| format!("key-{i:0width$}")).collect()
        }
        KeysFile::Count(n) => return Err(format!("{n} keys, more than {KEYS_MAX}")),
    };
    for key in &list {
        weir_core::names::Key::new(key.clone()).map_err(|e| format!("{key:?}: {e}"))?;
    }
    Ok(list)
}

/// An instant: RFC 3339, a date (its midnight, UTC), or `+DURATION` after
/// `base` (the span's start).
pub fn instant(s: &str, base: Option<u64>) -> Result<u64, String> {
    if let Some(rel) = s.strip_prefix('+') {
        let base = base.ok_or("a relative instant (+…) needs the span's start")?;
        return Ok(base + parse_duration_ms(rel)?);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return u64::try_from(t.timestamp_millis()).map_err(|_| format!("{s:?} is before 1970"));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        let t = d.and_hms_opt(0, 0, 0).expect("midnight exists").and_utc();
        return u64::try_from(t.timestamp_millis()).map_err(|_| format!("{s:?} is before 1970"));
    }
    Err(format!(
        "{s:?} is not an instant (2026-11-02T09:00:00Z, 2026-11-02, or +1d9h after the span's start)"
    ))
}
