//! `weir bench replicated`: what replication costs, a single `weir serve`
//! beside a group of three `weir serve --raft-id` members on loopback, both
//! running for the whole scenario, measured in R alternating rounds
//! (single, group, single, group, …) so that a change of the machine's
//! load falls on both alike. Each round, on each engine:
//!
//! - Chain: one run of a chain of K `true` nodes. ms per node from the
//!   run's own node records (`started_ms` of the first node to
//!   `finished_ms` of the last, over K), read from
//!   `GET /api/v1/graphs/chain/runs/{partition}` once it completed: the
//!   poll that waits for it does not count.
//! - Drain: a backfill of N one-node runs; runs/s from the request to the
//!   latest `settled_at_ms` among them.
//!
//! The figures are medians over the rounds: `replicated_chain_ratio` (the
//! median of each round's group / single; goal ≤ 1.3),
//! `replication_added_ms_per_node` (the median of each round's group −
//! single; goal ≤ 0.7, etcd's cost per commit on this machine in issue
//! #45), `replicated_drain_ratio` (goal ≥ 0.8).
//!
//! `replicated_commit_p50_ms`: the median of the leader's
//! `weir_raft_commit_seconds` (a proposal from the store's writer to its
//! commit, timed in the member) over the group's chain runs only: the
//! difference of two scrapes of its `/metrics` around each, the median
//! interpolated in the histogram's 0.1 ms buckets; the exact mean
//! (sum / count) is printed beside it. `raft_floor_ms` is what one commit
//! cannot go below on this machine: two durable appends of a small value
//! (a file write and an fdatasync, as the Raft log pays them) and one
//! loopback round trip, measured
//! with no engine running, before the rounds and after them (the lower).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::floor::RaftFloor;
use super::prom::Histogram;
use super::report::{result_line, BenchError};
use super::serve_group::{days, failed, now_ms, prepare_root, Api, Engine};

/// Goal: the replicated chain costs at most this times the single one.
pub const CHAIN_RATIO_GOAL: f64 = 1.3;
/// Goal: replication adds at most this per chain node, ms.
pub const ADDED_MS_GOAL: f64 = 0.7;
/// Goal: the replicated drain reaches at least this share of the single.
pub const DRAIN_RATIO_GOAL: f64 = 0.8;
/// The histogram of one commit on the leader.
const COMMIT_METRIC: &str = "weir_raft_commit_seconds";

/// Sizes of a run of the scenario.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    rounds: usize,
    chain_nodes: usize,
    drain_runs: usize,
}

impl Sizes {
    fn of(quick: bool) -> Sizes {
        if quick {
            Sizes {
                rounds: 3,
                chain_nodes: 30,
                drain_runs: 200,
            }
        } else {
            Sizes {
                rounds: 7,
                chain_nodes: 50,
                drain_runs: 600,
            }
        }
    }
}

fn write_defs(dir: &Path, chain_nodes: usize) -> Result<PathBuf, BenchError> {
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).map_err(failed)?;
    let mut chain =
        String::from("name = \"chain\"\npartitioning = \"daily\"\n[pools]\ndefault = 8\n");
    for i in 0..chain_nodes {
        chain.push_str(&format!(
            "[[nodes]]\nname = \"n{i}\"\ncommand = [\"true\"]\n"
        ));
        if i > 0 {
            chain.push_str(&format!("upstreams = [\"n{}\"]\n", i - 1));
        }
    }
    let write = |name: &str, text: String| std::fs::write(defs.join(name), text).map_err(failed);
    write("chain.toml", chain)?;
    write(
        "drain.toml",
        "name = \"drain\"\npartitioning = \"daily\"\nmax_active_runs = 64\n[pools]\ndefault = 8\n\
         [[nodes]]\nname = \"one\"\ncommand = [\"true\"]\n"
            .into(),
    )?;
    Ok(defs)
}

/// The first node's start and the last node's end of a run's detail, ms
/// since the epoch, and how many nodes it has.
pub fn node_span(detail: &serde_json::Value) -> Option<(u64, u64, usize)> {
    let nodes = detail["nodes"].as_array()?;
    let first = nodes
        .iter()
        .filter_map(|n| n["started_ms"].as_u64())
        .min()?;
    let last = nodes
        .iter()
        .filter_map(|n| n["finished_ms"].as_u64())
        .max()?;
    Some((first, last, nodes.len()))
}

/// One run of the chain at `part`; ms per node from its node records.
fn chain(e: &Engine, api: &Api, part: &str, nodes: usize) -> Result<f64, BenchError> {
    e.call(
        api,
        "POST",
        "/api/v1/graphs/chain/runs",
        Some(json!({"partitions": [part]})),
    )?;
    let t0 = Instant::now();
    let detail = loop {
        let v = e.call(
            api,
            "GET",
            &format!("/api/v1/graphs/chain/runs/{part}"),
            None,
        )?;
        match v["state"].as_str() {
            Some("complete") => break v,
            Some("failed" | "cancelled") => {
                return Err(failed(format!(
                    "{}: the chain run {part} {}",
                    e.name, v["state"]
                )))
            }
            _ => {}
        }
        if t0.elapsed() > Duration::from_secs(300) {
            return Err(failed(format!(
                "{}: the chain run {part} not complete within 300 s",
                e.name
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (first, last, n) = node_span(&detail).ok_or_else(|| {
        failed(format!(
            "{}: the chain run {part} has no node times",
            e.name
        ))
    })?;
    if n != nodes {
        return Err(failed(format!(
            "{}: the chain run {part} has {n} nodes, not {nodes}",
            e.name
        )));
    }
    Ok(last.saturating_sub(first) as f64 / nodes as f64)
}

/// Runs/s of a backfill of `n` one-node runs from `year`-01-01: from the
/// request to the latest run's settle, as recorded.
fn drain(e: &Engine, api: &Api, year: u32, n: usize) -> Result<f64, BenchError> {
    let parts = days(year, n);
    let t0 = now_ms();
    e.call(
        api,
        "POST",
        "/api/v1/graphs/drain/backfills",
        Some(json!({"from": parts[0], "to": parts[n - 1]})),
    )?;
    let last = e.wait_settled(
        api,
        "drain",
        &parts,
        Duration::from_secs(600),
        Duration::from_millis(100),
    )?;
    let secs = last.saturating_sub(t0).max(1) as f64 / 1e3;
    Ok(n as f64 / secs)
}

/// The median of `v` (the upper middle of an even count); `NaN` if empty.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

/// What the rounds measured.
#[derive(Debug, Default)]
struct Rounds {
    single_chain: Vec<f64>,
    group_chain: Vec<f64>,
    single_drain: Vec<f64>,
    group_drain: Vec<f64>,
    /// The leader's commits during the group's chain runs.
    commits: Option<Histogram>,
    /// Why the commits could not be read, if they could not.
    commits_missing: Option<String>,
}

impl Rounds {
    fn add_commits(&mut self, h: Histogram) {
        self.commits = Some(match self.commits.take() {
            None => h,
            Some(mut acc) => {
                for (a, b) in acc.buckets.iter_mut().zip(&h.buckets) {
                    a.1 += b.1;
                }
                acc.sum += h.sum;
                acc.count += h.count;
                acc
            }
        });
    }
}

/// The leader's commit histogram, or why not.
fn commit_histogram(group: &Engine, api: &Api, leader: u64) -> Result<Histogram, String> {
    let page = group.metrics(api, leader).map_err(|e| e.to_string())?;
    Histogram::parse(&page, COMMIT_METRIC)
        .ok_or_else(|| format!("member {leader}'s /metrics has no {COMMIT_METRIC}"))
}

/// The group's chain run with its leader's commits around it.
fn group_chain(
    group: &Engine,
    api: &Api,
    part: &str,
    nodes: usize,
    r: &mut Rounds,
) -> Result<f64, BenchError> {
    let leader = group.wait_leader(api, Duration::from_secs(30))?;
    let before = commit_histogram(group, api, leader);
    let ms = chain(group, api, part, nodes)?;
    let after = commit_histogram(group, api, leader);
    match (before, after) {
        (Ok(b), Ok(a)) => match a.since(&b) {
            // The same leader throughout: its counts only grow.
            Some(d) if d.count >= 0.0 => r.add_commits(d),
            _ => r.commits_missing = Some("the leader changed during a chain run".into()),
        },
        (Err(e), _) | (_, Err(e)) => r.commits_missing = Some(e),
    }
    Ok(ms)
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let sizes = Sizes::of(quick);
    let exe = std::env::current_exe().map_err(failed)?;
    let root = prepare_root("replicated")?;
    let defs = write_defs(root.path(), sizes.chain_nodes)?;
    // The floor with no engine running beside it: before the rounds and
    // after them, the lower of the two (see `RaftFloor::lower`).
    let before = RaftFloor::measure(root.path())?;
    let api = Api::new()?;
    let single = Engine::start(&exe, &defs, root.path(), "single", 1, false)?;
    let group = Engine::start(&exe, &defs, root.path(), "member", 3, false)?;
    single.wait_leader(&api, Duration::from_secs(30))?;
    group.wait_leader(&api, Duration::from_secs(30))?;
    group.wait_caught_up(&api, Duration::from_secs(30))?;
    let parts = days(1990, sizes.rounds + 1);
    // A warm-up run on each, not counted: the definitions loaded, the
    // stores' files grown, every connection open.
    chain(&single, &api, &parts[0], sizes.chain_nodes)?;
    chain(&group, &api, &parts[0], sizes.chain_nodes)?;
    let mut r = Rounds::default();
    for round in 0..sizes.rounds {
        let part = &parts[round + 1];
        // Two years of days per round: room for 730 runs.
        let year = 2000 + 2 * round as u32;
        let sc = chain(&single, &api, part, sizes.chain_nodes)?;
        let sd = drain(&single, &api, year, sizes.drain_runs)?;
        let gc = group_chain(&group, &api, part, sizes.chain_nodes, &mut r)?;
        let gd = drain(&group, &api, year, sizes.drain_runs)?;
        println!(
            "round {}: chain {sc:.2} ms/node single, {gc:.2} replicated (ratio {:.2}); drain {sd:.0} runs/s single, {gd:.0} replicated (ratio {:.2})",
            round + 1,
            gc / sc,
            gd / sd
        );
        r.single_chain.push(sc);
        r.group_chain.push(gc);
        r.single_drain.push(sd);
        r.group_drain.push(gd);
    }
    drop(single);
    drop(group);
    let after = RaftFloor::measure(root.path())?;
    let floor = before.lower(&after);
    println!(
        "floor: one append+fdatasync of 60 bytes to a file p50 {:.3} ms (before the rounds {:.3}, after {:.3}), loopback TCP round trip p50 {:.3} ms: one commit of three >= 2 fsyncs + 1 round trip = {:.3} ms",
        floor.fsync_ms,
        before.fsync_ms,
        after.fsync_ms,
        floor.rtt_ms,
        floor.ms()
    );
    let pairs = figures(&r, &floor, sizes);
    println!("{}", result_line("replicated", &pairs));
    Ok(())
}

/// The summary lines and the RESULT pairs of the rounds.
fn figures(r: &Rounds, floor: &RaftFloor, sizes: Sizes) -> Vec<(&'static str, String)> {
    let ratios =
        |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x / y).collect() };
    let chain_ratio = median(&ratios(&r.group_chain, &r.single_chain));
    let added = median(
        &r.group_chain
            .iter()
            .zip(&r.single_chain)
            .map(|(g, s)| g - s)
            .collect::<Vec<_>>(),
    );
    let drain_ratio = median(&ratios(&r.group_drain, &r.single_drain));
    let (sc, gc) = (median(&r.single_chain), median(&r.group_chain));
    let (sd, gd) = (median(&r.single_drain), median(&r.group_drain));
    println!(
        "chain of {} true nodes, median of {} rounds: {sc:.2} ms/node single, {gc:.2} replicated; ratio {chain_ratio:.2} (goal <= {CHAIN_RATIO_GOAL}); replication adds {added:.2} ms/node (goal <= {ADDED_MS_GOAL})",
        sizes.chain_nodes, sizes.rounds
    );
    println!(
        "drain of {} one-node runs: {sd:.0} runs/s single, {gd:.0} replicated; ratio {drain_ratio:.2} (goal >= {DRAIN_RATIO_GOAL})",
        sizes.drain_runs
    );
    let commit = r.commits.as_ref().filter(|h| h.count > 0.0);
    let (p50, mean, count) = match commit {
        Some(h) => (
            h.quantile(0.5)
                .map_or_else(|| "unavailable".into(), |s| format!("{:.3}", s * 1e3)),
            h.mean()
                .map_or_else(|| "unavailable".into(), |s| format!("{:.3}", s * 1e3)),
            format!("{:.0}", h.count),
        ),
        None => {
            eprintln!(
                "weir bench replicated: no commit figures: {}",
                r.commits_missing.as_deref().unwrap_or("no commit observed")
            );
            ("unavailable".into(), "unavailable".into(), "0".into())
        }
    };
    println!(
        "the leader's commits during the chains ({count}): p50 {p50} ms (histogram), mean {mean} ms; floor {:.3} ms",
        floor.ms()
    );
    vec![
        ("rounds", sizes.rounds.to_string()),
        ("chain_nodes", sizes.chain_nodes.to_string()),
        ("drain_runs", sizes.drain_runs.to_string()),
        ("single_chain_ms_per_node", format!("{sc:.3}")),
        ("replicated_chain_ms_per_node", format!("{gc:.3}")),
        ("replicated_chain_ratio", format!("{chain_ratio:.3}")),
        ("replicated_chain_ratio_goal", CHAIN_RATIO_GOAL.to_string()),
        ("replication_added_ms_per_node", format!("{added:.3}")),
        ("replication_added_goal_ms", ADDED_MS_GOAL.to_string()),
        ("single_drain_per_s", format!("{sd:.0}")),
        ("replicated_drain_per_s", format!("{gd:.0}")),
        ("replicated_drain_ratio", format!("{drain_ratio:.3}")),
        ("replicated_drain_ratio_goal", DRAIN_RATIO_GOAL.to_string()),
        ("replicated_commit_p50_ms", p50),
        ("replicated_commit_mean_ms", mean),
        ("replicated_commits", count),
        ("fsync_ms", format!("{:.3}", floor.fsync_ms)),
        ("loopback_rtt_ms", format!("{:.3}", floor.rtt_ms)),
        ("raft_floor_ms", format!("{:.3}", floor.ms())),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_spans_its_first_start_to_its_last_end() {
        let detail = json!({"nodes": [
            {"node": "n1", "started_ms": 1_010, "finished_ms": 1_013},
            {"node": "n0", "started_ms": 1_000, "finished_ms": 1_004},
            {"node": "n2", "started_ms": 1_020, "finished_ms": 1_031},
        ]});
        assert_eq!(node_span(&detail), Some((1_000, 1_031, 3)));
        let unstarted = json!({"nodes": [{"node": "n0", "started_ms": null}]});
        assert_eq!(node_span(&unstarted), None);
        assert_eq!(node_span(&json!({})), None);
    }

    #[test]
    fn medians_and_the_figures_of_rounds() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert!(median(&[]).is_nan());
        let r = Rounds {
            single_chain: vec![2.0, 3.0, 2.5],
            group_chain: vec![3.0, 6.0, 3.0],
            single_drain: vec![400.0, 500.0, 450.0],
            group_drain: vec![200.0, 450.0, 360.0],
            commits: Some(Histogram {
                buckets: vec![(0.001, 0.0), (0.002, 10.0), (f64::INFINITY, 10.0)],
                sum: 0.015,
                count: 10.0,
            }),
            commits_missing: None,
        };
        let floor = RaftFloor {
            fsync_ms: 0.2,
            rtt_ms: 0.05,
        };
        let pairs = figures(&r, &floor, Sizes::of(true));
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| *key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no {k} in {pairs:?}"))
        };
        // Ratios per round 1.5, 2.0, 1.2: median 1.5; differences 1, 3,
        // 0.5: median 1.
        assert_eq!(get("replicated_chain_ratio"), "1.500");
        assert_eq!(get("replication_added_ms_per_node"), "1.000");
        assert_eq!(get("single_chain_ms_per_node"), "2.500");
        // Drain ratios 0.5, 0.9, 0.8: median 0.8.
        assert_eq!(get("replicated_drain_ratio"), "0.800");
        assert_eq!(get("replicated_commit_p50_ms"), "1.500");
        assert_eq!(get("replicated_commit_mean_ms"), "1.500");
        assert_eq!(get("raft_floor_ms"), "0.450");
        let none = figures(&Rounds::default(), &floor, Sizes::of(true));
        let p50 = none.iter().find(|(k, _)| *k == "replicated_commit_p50_ms");
        assert_eq!(p50.map(|(_, v)| v.as_str()), Some("unavailable"));
    }
}
