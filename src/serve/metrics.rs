//! Prometheus metrics at `/metrics`, through the `metrics` facade and
//! `metrics-exporter-prometheus`.
//!
//! Counters and histograms come from the engine's events (completions,
//! failures, retries, deferrals and dead letters per graph and node,
//! attempt durations, breaker states, trigger lateness, run durations) and
//! from the queue actor itself (commit batch sizes, flush latency); gauges
//! of queue depth and running attempts per pool are read from the queue at
//! each scrape, so they are never stale.

use std::collections::HashMap;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use weir_actors::msg::work::DeferCause;
use weir_actors::scheduler::records::{parse_node_key, run_key, GraphRunRecord};
use weir_core::partition::Partition;

use crate::{DoneStatus, Engine, EngineEvent};

/// Histogram buckets for durations, in seconds.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 900.0, 3600.0,
];
/// Histogram buckets for ops per commit batch.
pub const OPS_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0,
];
/// Histogram buckets for one Raft commit, in seconds: 0.1 ms apart where
/// a commit on one machine or a LAN lies (0.2 to 2 ms), so its median is
/// read to a tenth of a millisecond, not between 1 and 2.5 ms.
pub const COMMIT_BUCKETS: &[f64] = &[
    0.000_1, 0.000_2, 0.000_3, 0.000_4, 0.000_5, 0.000_6, 0.000_7, 0.000_8, 0.000_9, 0.001,
    0.001_1, 0.001_2, 0.001_3, 0.001_4, 0.001_5, 0.001_6, 0.001_7, 0.001_8, 0.001_9, 0.002,
    0.002_5, 0.003, 0.003_5, 0.004, 0.005, 0.006, 0.008, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.25,
    0.5, 1.0, 2.5, 5.0, 10.0,
];
/// Attempts whose start is remembered for their duration; older ones are
/// forgotten (their duration is then not observed).
pub const STARTS_TRACKED_MAX: usize = 100_000;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's metrics registry.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl Metrics {
    /// Installs the Prometheus recorder (once per process) and returns it.
    pub fn install() -> Metrics {
        let handle = HANDLE
            .get_or_init(|| {
                let builder = PrometheusBuilder::new()
                    .set_buckets(SECONDS_BUCKETS)
                    .and_then(|b| {
                        b.set_buckets_for_metric(
                            Matcher::Full("weir_commit_batch_ops".into()),
                            OPS_BUCKETS,
                        )
                    })
                    .and_then(|b| {
                        b.set_buckets_for_metric(
                            Matcher::Full("weir_raft_commit_seconds".into()),
                            COMMIT_BUCKETS,
                        )
                    })
                    .expect("the bucket lists are not empty");
                match builder.install_recorder() {
                    Ok(h) => h,
                    // Another recorder was installed by the application:
                    // render an empty registry of our own rather than fail.
                    Err(e) => {
                        tracing::warn!(error = %e, "a metrics recorder is installed already; /metrics shows only weir's gauges");
                        PrometheusBuilder::new().build_recorder().handle()
                    }
                }
            })
            .clone();
        describe();
        // A counter without labels is there from the first scrape, at 0.
        metrics::counter!("weir_workers_lost_total").absolute(0);
        Metrics { handle }
    }

    /// The text exposition, after refreshing the gauges read at scrape.
    pub async fn render(&self, engine: &Engine) -> String {
        if let Ok(status) = engine.status().await {
            for (pool, s) in &status.pools {
                let p = pool.clone();
                metrics::gauge!("weir_queue_pending", "pool" => p.clone()).set(s.pending as f64);
                metrics::gauge!("weir_queue_due", "pool" => p.clone()).set(s.due as f64);
                metrics::gauge!("weir_queue_running", "pool" => p.clone()).set(s.running as f64);
                metrics::gauge!("weir_pool_workers", "pool" => p.clone()).set(s.workers as f64);
                metrics::gauge!("weir_pool_credit", "pool" => p).set(s.credit as f64);
            }
            metrics::gauge!("weir_queue_live").set(status.live as f64);
            metrics::gauge!("weir_journal_last_seq").set(status.last_seq as f64);
        }
        if let Ok(workers) = engine.workers().await {
            let now = engine.now_ms();
            for w in &workers {
                let name = w.name.clone();
                let joined = w.state == crate::WorkerState::Joined;
                metrics::gauge!("weir_worker_up", "worker" => name.clone()).set(if joined {
                    1.0
                } else {
                    0.0
                });
                metrics::gauge!("weir_worker_running", "worker" => name.clone())
                    .set(w.running as f64);
                let slots: u32 = w.pools.iter().map(|p| p.slots).sum();
                metrics::gauge!("weir_worker_slots", "worker" => name.clone())
                    .set(f64::from(slots));
                metrics::gauge!("weir_worker_heartbeat_age_seconds", "worker" => name.clone())
                    .set(now.saturating_sub(w.last_heartbeat_ms) as f64 / 1000.0);
                metrics::gauge!("weir_worker_reports_refused", "worker" => name.clone())
                    .set(w.reports_refused as f64);
                metrics::gauge!("weir_worker_times_lost", "worker" => name)
                    .set(f64::from(w.times_lost));
            }
        }
        // SLA misses are counted from their records, so a restart neither
        // loses one nor counts one twice.
        let store = engine.store().clone();
        let counts = tokio::task::spawn_blocking(move || {
            super::views::graph_names(&store).map(|gs| {
                gs.into_iter()
                    .map(|g| {
                        let n =
                            weir_actors::records::sla::graph_miss_count(&store, &g).unwrap_or(0);
                        (g, n)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .await;
        if let Ok(Ok(counts)) = counts {
            for (g, n) in counts {
                metrics::counter!("weir_sla_misses_total", "graph" => g).absolute(n as u64);
            }
        }
        metrics::gauge!("weir_engine_up").set(if engine.error().is_none() { 1.0 } else { 0.0 });
        self.handle.render()
    }
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "weir_completions_total",
        "tickets ended, by graph, node and status"
    );
    describe_counter!(
        "weir_attempt_failures_total",
        "attempts that failed, by graph and node"
    );
    describe_counter!("weir_retries_total", "failed attempts that will run again");
    describe_counter!(
        "weir_deferrals_total",
        "hand-outs a breaker held back (no attempt spent)"
    );
    describe_counter!(
        "weir_slot_bounces_total",
        "hand-outs a worker gave back for want of a free slot (no attempt spent)"
    );
    describe_counter!("weir_dead_letters_total", "tickets whose tries are spent");
    describe_counter!(
        "weir_sensor_pokes_total",
        "sensor checks that found their condition not met (no attempt spent)"
    );
    describe_counter!(
        "weir_asset_materializations_total",
        "materializations delivered, by asset"
    );
    describe_histogram!(
        "weir_attempt_duration_seconds",
        Unit::Seconds,
        "attempt durations"
    );
    describe_gauge!("weir_breaker_state", "0 closed, 1 half-open, 2 open");
    describe_histogram!(
        "weir_trigger_lateness_seconds",
        Unit::Seconds,
        "due instant to run start"
    );
    describe_histogram!(
        "weir_run_duration_seconds",
        Unit::Seconds,
        "run start to settle"
    );
    describe_counter!("weir_runs_started_total", "graph runs started");
    describe_counter!(
        "weir_sla_misses_total",
        "SLA misses recorded (runs' and nodes'), by graph, within the runs' retention"
    );
    describe_counter!("weir_runs_settled_total", "graph runs settled, by state");
    describe_counter!(
        "weir_actor_restarts_total",
        "actors restarted by the supervisor"
    );
    describe_gauge!("weir_worker_up", "1 while a worker process is joined");
    describe_gauge!("weir_worker_running", "attempts running on a worker");
    describe_gauge!("weir_worker_slots", "a worker's slots, over its pools");
    describe_gauge!(
        "weir_worker_heartbeat_age_seconds",
        "time since the engine last heard from a worker"
    );
    describe_gauge!(
        "weir_worker_reports_refused",
        "reports of superseded attempts refused, per worker"
    );
    describe_gauge!("weir_worker_times_lost", "times a worker was declared lost");
    describe_counter!("weir_workers_lost_total", "workers declared lost");
    describe_gauge!("weir_queue_pending", "pending tickets per pool");
    describe_gauge!("weir_queue_due", "pending tickets due now, per pool");
    describe_gauge!("weir_queue_live", "live tickets: pending and running");
    describe_gauge!(
        "weir_pool_workers",
        "pool actors serving a pool, local and remote"
    );
    describe_gauge!(
        "weir_pool_credit",
        "slots the workers of a pool offered and the queue has not used"
    );
    describe_gauge!("weir_journal_last_seq", "the last journal sequence written");
    describe_gauge!(
        "weir_engine_up",
        "1 while the engine runs, 0 once it stopped on an error"
    );
    describe_gauge!("weir_queue_running", "running attempts per pool");
    describe_histogram!("weir_commit_batch_ops", "ops per durable commit batch");
    describe_histogram!(
        "weir_commit_flush_seconds",
        Unit::Seconds,
        "durable flush latency"
    );
}

/// The (graph, node) labels of a ticket key: a run id's, or ("", "") for a
/// plain job.
fn labels(key: &str) -> (String, String) {
    match parse_node_key(key) {
        Some((id, _)) => (id.graph, id.node),
        None => (String::new(), String::new()),
    }
}

/// Turns events into metrics; remembers attempt starts (by ticket: one attempt
/// runs at a time) for durations.
#[derive(Default)]
pub struct EventMetrics {
    starts_ms: HashMap<u64, u64>,
    /// (graph, node) pairs whose counters are set up at zero.
    zeroed_nodes: std::collections::HashSet<(String, String)>,
    /// Graphs whose run counters are set up at zero.
    zeroed_graphs: std::collections::HashSet<String>,
}

/// The most (graph, node) pairs, and graphs, remembered as set up at zero;
/// past it a set starts over (setting a counter up again changes nothing;
/// it is only work).
pub const ZEROED_TRACKED_MAX: usize = 10_000;

// Counters are in the exposition, at zero, from their node's first ticket
// or their graph's first run, not from their first increment: a rate over
// a series that appears late misses its first count.
impl EventMetrics {
    /// Sets up the counters of node `node` of `graph` at zero, once.
    fn zero_node(&mut self, graph: &str, node: &str) {
        let k = (graph.to_string(), node.to_string());
        if self.zeroed_nodes.contains(&k) {
            return;
        }
        if self.zeroed_nodes.len() >= ZEROED_TRACKED_MAX {
            self.zeroed_nodes.clear();
        }
        let (g, n) = k.clone();
        self.zeroed_nodes.insert(k);
        for name in [
            "weir_retries_total",
            "weir_attempt_failures_total",
            "weir_deferrals_total",
            "weir_dead_letters_total",
        ] {
            metrics::counter!(name, "graph" => g.clone(), "node" => n.clone()).increment(0);
        }
        for status in [DoneStatus::Succeeded, DoneStatus::Failed] {
            metrics::counter!("weir_completions_total", "graph" => g.clone(), "node" => n.clone(), "status" => status.to_string())
                .increment(0);
        }
    }

    /// Sets up the run counters of `graph` at zero, once.
    fn zero_graph(&mut self, graph: &str) {
        if self.zeroed_graphs.contains(graph) {
            return;
        }
        if self.zeroed_graphs.len() >= ZEROED_TRACKED_MAX {
            self.zeroed_graphs.clear();
        }
        self.zeroed_graphs.insert(graph.to_string());
        let g = graph.to_string();
        metrics::counter!("weir_runs_started_total", "graph" => g.clone()).increment(0);
        for state in ["complete", "failed", "cancelled"] {
            metrics::counter!("weir_runs_settled_total", "graph" => g.clone(), "state" => state)
                .increment(0);
        }
    }
}

impl EventMetrics {
    /// Records one event.
    pub fn see(&mut self, _m: &Metrics, engine: &Engine, e: &EngineEvent) {
        let now = engine.now_ms();
        match e {
            EngineEvent::Enqueued { key, .. } => {
                let (g, n) = labels(key);
                self.zero_node(&g, &n);
            }
            EngineEvent::Started { id, .. } => {
                if self.starts_ms.len() >= STARTS_TRACKED_MAX {
                    self.starts_ms.clear();
                }
                self.starts_ms.insert(*id, now);
            }
            EngineEvent::Retrying { key, id, .. } => {
                let (g, n) = labels(key);
                self.attempt_ended(*id, now, &g, &n);
                metrics::counter!("weir_retries_total", "graph" => g.clone(), "node" => n.clone())
                    .increment(1);
                metrics::counter!("weir_attempt_failures_total", "graph" => g, "node" => n)
                    .increment(1);
            }
            EngineEvent::Poked { key, id, .. } => {
                let (g, n) = labels(key);
                // A check that was not met ends its attempt without one.
                self.starts_ms.remove(id);
                metrics::counter!("weir_sensor_pokes_total", "graph" => g, "node" => n)
                    .increment(1);
            }
            EngineEvent::AssetMaterialized { asset, .. } => {
                metrics::counter!("weir_asset_materializations_total", "asset" => asset.clone())
                    .increment(1);
            }
            EngineEvent::Deferred { key, id, cause, .. } => {
                let (g, n) = labels(key);
                // A deferred hand-out ran nothing: forget its start.
                self.starts_ms.remove(id);
                // A breaker's deferral and a grant a worker had no slot for
                // are counted apart: the second is no breaker's doing.
                let name = match cause {
                    DeferCause::Breaker => "weir_deferrals_total",
                    DeferCause::NoSlot => "weir_slot_bounces_total",
                };
                metrics::counter!(name, "graph" => g, "node" => n).increment(1);
            }
            EngineEvent::Completed {
                key, id, status, ..
            } => {
                let (g, n) = labels(key);
                self.attempt_ended(*id, now, &g, &n);
                metrics::counter!("weir_completions_total", "graph" => g.clone(), "node" => n.clone(), "status" => status.to_string())
                    .increment(1);
                if *status == DoneStatus::Failed {
                    metrics::counter!("weir_attempt_failures_total", "graph" => g.clone(), "node" => n.clone())
                        .increment(1);
                    metrics::counter!("weir_dead_letters_total", "graph" => g, "node" => n)
                        .increment(1);
                }
            }
            EngineEvent::Breaker { target, state } => {
                let v = match state.as_str() {
                    "open" => 2.0,
                    "half_open" => 1.0,
                    _ => 0.0,
                };
                metrics::gauge!("weir_breaker_state", "target" => target.to_string()).set(v);
            }
            EngineEvent::WorkerLost { .. } => {
                metrics::counter!("weir_workers_lost_total").increment(1);
            }
            EngineEvent::Restarted { role, .. } => {
                metrics::counter!("weir_actor_restarts_total", "role" => role.clone()).increment(1);
            }
            EngineEvent::CronFired {
                graph, firing_ms, ..
            } => {
                let late_s = now.saturating_sub(*firing_ms) as f64 / 1000.0;
                metrics::histogram!("weir_trigger_lateness_seconds", "graph" => graph.clone(), "trigger" => "cron")
                    .record(late_s);
            }
            EngineEvent::RunStarted {
                graph, partition, ..
            } => {
                self.zero_graph(graph);
                metrics::counter!("weir_runs_started_total", "graph" => graph.clone()).increment(1);
                // A keyed run's partition carries the instant it was due.
                if let Some(due) = partition.parse::<Partition>().ok().and_then(|p| p.at_ms()) {
                    let late_s = now.saturating_sub(due) as f64 / 1000.0;
                    metrics::histogram!("weir_trigger_lateness_seconds", "graph" => graph.clone(), "trigger" => "key")
                        .record(late_s);
                }
            }
            EngineEvent::RunSettled {
                graph,
                partition,
                state,
            } => {
                metrics::counter!("weir_runs_settled_total", "graph" => graph.clone(), "state" => state.clone())
                    .increment(1);
                if let Ok(p) = partition.parse::<Partition>() {
                    if let Ok(Some(r)) = engine.store().get::<GraphRunRecord>(&run_key(graph, &p)) {
                        let end = r.settled_at_ms.unwrap_or(now);
                        // From its instant, for a run prepared ahead.
                        let s = end.saturating_sub(r.started_ms()) as f64 / 1000.0;
                        metrics::histogram!("weir_run_duration_seconds", "graph" => graph.clone())
                            .record(s);
                    }
                }
            }
            _ => {}
        }
    }

    fn attempt_ended(&mut self, id: u64, now: u64, g: &str, n: &str) {
        if let Some(start) = self.starts_ms.remove(&id) {
            let s = now.saturating_sub(start) as f64 / 1000.0;
            metrics::histogram!("weir_attempt_duration_seconds", "graph" => g.to_string(), "node" => n.to_string())
                .record(s);
        }
    }
}
