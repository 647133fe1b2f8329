//! The report of a simulation: per graph, runs started, completed and
//! failed, lateness (p50, p99, max) against each run's window, SLA misses,
//! retries, deferrals and dead letters; breaker open intervals; the queue's
//! depth and each pool's utilisation over the span. Built from what the
//! driver observed, by pure arithmetic, so the same observation gives the
//! same report, byte for byte, as JSON ([`Report`] serialises in a fixed
//! order: structs and `BTreeMap`s). Shown as a terminal table
//! ([`table`]) and as one self-contained HTML page ([`html`]).

pub mod html;
pub mod table;

use std::collections::BTreeMap;

use serde::Serialize;
use weir_core::simulate::stats::Histogram;
pub use weir_core::simulate::stats::SERIES_BUCKETS_MAX;
use weir_core::zone::Zone;

use super::driver::Observed;
pub use super::runs::{RunRow, RUNS_LISTED_MAX};
use super::scenario::Scenario;

/// The figures of a graph, or of all graphs.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Figures {
    /// Runs that started in the span.
    pub runs_started: u64,
    /// Runs that completed.
    pub runs_completed: u64,
    /// Runs that failed.
    pub runs_failed: u64,
    /// Runs cancelled.
    pub runs_cancelled: u64,
    /// Runs still active at the span's end.
    pub runs_unsettled: u64,
    /// Median lateness of settled runs, ms.
    pub lateness_p50: u64,
    /// 99th percentile lateness, ms.
    pub lateness_p99: u64,
    /// Largest lateness, ms.
    pub lateness_max: u64,
    /// SLA misses (runs' and nodes').
    pub sla_misses: u64,
    /// Attempts started (a sensor's checks that found its condition not
    /// met are not attempts: see `sensor_checks`).
    pub attempts: u64,
    /// Sensor checks that found their condition not met.
    pub sensor_checks: u64,
    /// Failed attempts retried.
    pub retries: u64,
    /// Tickets the breaker held back (no attempt spent).
    pub deferrals: u64,
    /// Tickets given back for want of a slot.
    pub deferrals_no_slot: u64,
    /// Tickets that ended failed: dead letters.
    pub dead: u64,
}

/// A graph's part.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GraphReport {
    /// The figures.
    #[serde(flatten)]
    pub figures: Figures,
    /// Its time zone.
    pub timezone: String,
    /// The first runs by start (at most `runs_listed_max`).
    pub runs: Vec<RunRow>,
    /// Runs left out of `runs`.
    pub runs_omitted: u64,
}

/// An interval a breaker was not closed.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpenInterval {
    /// The target.
    pub target: String,
    /// When it opened, ms.
    pub from_ms: u64,
    /// When it closed, ms (the span's end if it never did).
    pub until_ms: u64,
}

/// A pool's utilisation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PoolReport {
    /// Its slots.
    pub slots: u32,
    /// Mean share of slots busy over the span (0..=1).
    pub utilisation_mean: f64,
    /// Highest bucket mean.
    pub utilisation_max: f64,
    /// Per bucket, the mean share of slots busy.
    pub utilisation: Vec<f64>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// The scenario's file name.
    pub scenario: String,
    /// The seed.
    pub seed: u64,
    /// The span's start, ms since the epoch.
    pub from_ms: u64,
    /// The span's end.
    pub until_ms: u64,
    /// Each series' bucket, ms.
    pub bucket_ms: u64,
    /// Runs each graph lists (the first by start; the rest are in its
    /// figures only).
    pub runs_listed_max: usize,
    /// All graphs together.
    pub totals: Figures,
    /// Per graph.
    pub graphs: BTreeMap<String, GraphReport>,
    /// Breaker open intervals, by start.
    pub breakers: Vec<OpenInterval>,
    /// Highest queue depth (tickets waiting) per bucket.
    pub queue_depth: Vec<u64>,
    /// Highest queue depth over the span.
    pub queue_depth_max: u64,
    /// Pools.
    pub pools: BTreeMap<String, PoolReport>,
    /// Engine events seen. Not in the JSON: after an injected crash, how
    /// many actors the supervisor restarts (and so how many events they
    /// send) depends on how the dying actors' last moments interleave.
    #[serde(skip)]
    pub events: u64,
    /// Events the watcher missed (0 in a sound run).
    pub events_lagged: u64,
    /// Inputs and faults the engine refused.
    pub refused: Vec<String>,
    /// Actors the supervisor restarted (after a crash or a lost worker).
    /// Not in the JSON, as `events`.
    #[serde(skip)]
    pub actor_restarts: u64,
    /// Engine restarts (killed and reopened on its store).
    pub engine_restarts: u64,
    /// Leaders lost (a replicated engine's), each followed by a failover.
    pub leader_losses: u64,
    /// The failovers' time in all, ms: no leader, so no engine.
    pub failover_ms: u64,
}

/// Builds the report.
pub fn build(obs: &Observed, scenario: &Scenario, seed: u64) -> Report {
    let (from, until) = (scenario.from_ms, scenario.until_ms);
    let buckets = obs.tally.setup.buckets;
    let mut graphs = BTreeMap::new();
    let mut all_lateness = Histogram::default();
    let mut totals = Figures::default();
    let empty = super::collect::GraphTally::default();
    for (name, def) in &obs.graphs {
        let zone = def.timezone.unwrap_or(Zone::UTC);
        let t = obs.tally.graphs.get(name).unwrap_or(&empty);
        let r = &t.runs;
        let f = Figures {
            runs_started: r.started,
            runs_completed: r.completed,
            runs_failed: r.failed,
            runs_cancelled: r.cancelled,
            runs_unsettled: r.unsettled,
            lateness_p50: r.lateness.percentile(50),
            lateness_p99: r.lateness.percentile(99),
            lateness_max: r.lateness.max(),
            sla_misses: t.sla_misses,
            attempts: t.attempts.saturating_sub(t.pokes),
            sensor_checks: t.pokes,
            retries: t.retries,
            deferrals: t.deferrals_breaker,
            deferrals_no_slot: t.deferrals_slot,
            dead: t.dead,
        };
        all_lateness.merge(&r.lateness);
        add(&mut totals, &f);
        let (rows, omitted) = r.rows();
        graphs.insert(
            name.clone(),
            GraphReport {
                figures: f,
                timezone: zone.to_string(),
                runs: rows,
                runs_omitted: omitted,
            },
        );
    }
    totals.lateness_p50 = all_lateness.percentile(50);
    totals.lateness_p99 = all_lateness.percentile(99);
    totals.lateness_max = all_lateness.max();

    let queue_depth = obs.tally.depth.per_bucket();
    let queue_depth_max = obs.tally.depth.max();
    let mut pools = BTreeMap::new();
    for (name, &slots) in &obs.pools {
        let (per, busy_ms) = match obs.tally.pools.get(name) {
            Some(b) => (buckets.means(&b.area), b.busy_ms),
            None => (vec![0.0; buckets.count], 0),
        };
        let share: Vec<f64> = per
            .iter()
            .map(|b| round3(b / f64::from(slots.max(1))))
            .collect();
        let mean = busy_ms as f64 / ((until - from) as f64 * f64::from(slots.max(1)));
        pools.insert(
            name.clone(),
            PoolReport {
                slots,
                utilisation_mean: round3(mean),
                utilisation_max: share.iter().copied().fold(0.0, f64::max),
                utilisation: share,
            },
        );
    }
    Report {
        scenario: scenario
            .file
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        seed,
        from_ms: from,
        until_ms: until,
        bucket_ms: buckets.bucket_ms,
        runs_listed_max: RUNS_LISTED_MAX,
        totals,
        graphs,
        breakers: open_intervals(&obs.tally.breakers, until, &obs.cooldowns),
        queue_depth,
        queue_depth_max,
        pools,
        events: obs.tally.events,
        events_lagged: obs.tally.lagged,
        refused: obs.refused.clone(),
        actor_restarts: obs.tally.restarts,
        engine_restarts: obs.tally.engine_restarts,
        leader_losses: obs.tally.leader_losses,
        failover_ms: obs.tally.failover_ms,
    }
}

/// Rounded to 3 decimals, so the JSON's floats read plainly.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn add(t: &mut Figures, f: &Figures) {
    t.runs_started += f.runs_started;
    t.runs_completed += f.runs_completed;
    t.runs_failed += f.runs_failed;
    t.runs_cancelled += f.runs_cancelled;
    t.runs_unsettled += f.runs_unsettled;
    t.sla_misses += f.sla_misses;
    t.attempts += f.attempts;
    t.sensor_checks += f.sensor_checks;
    t.retries += f.retries;
    t.deferrals += f.deferrals;
    t.deferrals_no_slot += f.deferrals_no_slot;
    t.dead += f.dead;
}

/// Intervals each breaker spent open, denying: from its opening to its
/// next transition or the end of its cooldown, whichever is first (an open
/// breaker becomes half-open on demand, at the first ticket after the
/// cooldown, so its transitions alone would overstate the interval).
fn open_intervals(
    steps: &[(u64, String, String)],
    until: u64,
    cooldowns: &BTreeMap<String, u64>,
) -> Vec<OpenInterval> {
    let cooldown = |t: &str| {
        cooldowns
            .get(t)
            .copied()
            .unwrap_or(weir_core::breaker::BreakerSettings::default().cooldown_ms)
    };
    let mut open: BTreeMap<&str, u64> = BTreeMap::new();
    let mut out = Vec::new();
    for (at, target, state) in steps {
        if let Some(from) = open.remove(target.as_str()) {
            out.push(OpenInterval {
                target: target.clone(),
                from_ms: from,
                until_ms: (*at).min(from + cooldown(target)),
            });
        }
        if state == "open" {
            open.insert(target.as_str(), *at);
        }
    }
    for (target, from) in open {
        out.push(OpenInterval {
            target: target.to_string(),
            from_ms: from,
            until_ms: until.min(from + cooldown(target)),
        });
    }
    out.sort_by(|a, b| (a.from_ms, &a.target).cmp(&(b.from_ms, &b.target)));
    out
}

/// The figure `metric` of `graph` (or of all graphs), for `--check`; none
/// when there is no such figure.
pub fn figure(report: &Report, graph: Option<&str>, metric: &str) -> Option<f64> {
    let f = match graph {
        Some(g) => &report.graphs.get(g)?.figures,
        None => &report.totals,
    };
    let v = match metric {
        "runs_started" => f.runs_started,
        "runs_completed" => f.runs_completed,
        "runs_failed" => f.runs_failed,
        "runs_cancelled" => f.runs_cancelled,
        "runs_unsettled" => f.runs_unsettled,
        "lateness_p50" => f.lateness_p50,
        "lateness_p99" => f.lateness_p99,
        "lateness_max" => f.lateness_max,
        "sla_misses" => f.sla_misses,
        "attempts" => f.attempts,
        "sensor_checks" => f.sensor_checks,
        "retries" => f.retries,
        "deferrals" => f.deferrals,
        "deferrals_no_slot" => f.deferrals_no_slot,
        "dead" => f.dead,
        "queue_depth_max" if graph.is_none() => report.queue_depth_max,
        "breaker_opens" if graph.is_none() => report.breakers.len() as u64,
        "breaker_open_ms" if graph.is_none() => {
            report.breakers.iter().map(|b| b.until_ms - b.from_ms).sum()
        }
        "engine_restarts" if graph.is_none() => report.engine_restarts,
        "leader_losses" if graph.is_none() => report.leader_losses,
        "failover_ms" if graph.is_none() => report.failover_ms,
        "utilisation_max" if graph.is_none() => {
            return Some(
                report
                    .pools
                    .values()
                    .map(|p| p.utilisation_max)
                    .fold(0.0, f64::max),
            )
        }
        _ => return None,
    };
    Some(v as f64)
}

/// The figures `--check` knows.
pub const FIGURES: &[&str] = &[
    "runs_started",
    "runs_completed",
    "runs_failed",
    "runs_cancelled",
    "runs_unsettled",
    "lateness_p50",
    "lateness_p99",
    "lateness_max",
    "sla_misses",
    "attempts",
    "sensor_checks",
    "retries",
    "deferrals",
    "deferrals_no_slot",
    "dead",
    "queue_depth_max",
    "breaker_opens",
    "breaker_open_ms",
    "utilisation_max",
    "engine_restarts",
    "leader_losses",
    "failover_ms",
];
