//! The simulated task: what every command, HTTP call and sensor of the
//! definitions runs under `weir simulate`. Nothing is executed: the attempt
//! sleeps (virtual time) for the duration its model draws and ends as the
//! scenario says — a node failure by its probability, a target that is
//! down failing after `fails_after`. (The pools' utilisation is read from
//! the engine's events, not from here: see `collect`.)

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use weir_actors::clock::Clock;
use weir_actors::scheduler::records::TaskInput;
use weir_actors::task::{Task, TaskContext, TaskError, TaskResult};
use weir_core::simulate::model::DurationModel;

use super::draw;
use super::scenario::{Durations, Failure, Scenario, Scope, DURATION_DEFAULT_MS};

/// The model of an attempt no scenario model matches.
static MODEL_DEFAULT: DurationModel = DurationModel::Fixed {
    ms: DURATION_DEFAULT_MS,
};

/// Draw streams, one per decision.
const STREAM_DURATION_1: u64 = 1;
const STREAM_DURATION_2: u64 = 2;
const STREAM_FAILURE: u64 = 3;

/// What the simulator knows of a node.
#[derive(Debug, Clone)]
pub struct NodeFacts {
    /// Its pool.
    pub pool: String,
    /// Its target.
    pub target: Option<String>,
    /// A sensor: its model draws how long until its condition holds, and
    /// each check answers at once (not met until then).
    pub sensor: bool,
}

/// The simulated task.
pub struct SimTask {
    /// The scenario.
    pub scenario: Arc<Scenario>,
    /// Nodes by (graph, node).
    pub nodes: Arc<BTreeMap<(String, String), NodeFacts>>,
    /// The seed.
    pub seed: u64,
    /// The engine's clock.
    pub clock: Clock,
    /// Each sensor ticket's instant its condition holds, set at its first
    /// check.
    pub sensors: Arc<Mutex<BTreeMap<String, u64>>>,
}

/// How an attempt ends, decided when it starts.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    Succeed(u64),
    Fail(u64, TaskError),
    NotMet(u64),
}

impl SimTask {
    /// The duration of an attempt at `node` of `graph` (in `pool`) for the
    /// draws `u1` and `u2`: by the most specific scope's model, skipping a
    /// `from_history` one that recorded nothing for this node.
    fn duration_ms(&self, graph: &str, node: &str, pool: &str, u1: f64, u2: f64) -> u64 {
        let d = &self.scenario.durations;
        let scopes = [
            Scope::Node(graph.into(), node.into()),
            Scope::Graph(graph.into()),
            Scope::Pool(pool.into()),
            Scope::All,
        ];
        let key = (graph.to_string(), node.to_string());
        for scope in &scopes {
            match d.get(scope) {
                Some(Durations::Model(m)) => return m.sample_ms(u1, u2),
                Some(Durations::History(h)) => {
                    if let Some(e) = h.get(&key) {
                        return e.sample_ms(u1);
                    }
                }
                None => {}
            }
        }
        MODEL_DEFAULT.sample_ms(u1, u2)
    }

    fn plan(&self, input: &TaskInput, key: &str, attempt: u32, now: u64) -> Plan {
        let facts = self.nodes.get(&(input.graph.clone(), input.node.clone()));
        let pool = facts.map_or("default", |f| f.pool.as_str());
        let target = facts.and_then(|f| f.target.as_deref());
        let u = |stream| draw::unit(self.seed, key, attempt, stream);
        let ms = self.duration_ms(
            &input.graph,
            &input.node,
            pool,
            u(STREAM_DURATION_1),
            u(STREAM_DURATION_2),
        );
        if facts.is_some_and(|f| f.sensor) {
            // The condition holds `ms` after the first check; every check
            // answers at once.
            let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
            let holds_at = *sensors.entry(key.to_string()).or_insert(now + ms);
            if now < holds_at {
                return Plan::NotMet(holds_at - now);
            }
            sensors.remove(key);
            return Plan::Succeed(0);
        }
        for f in &self.scenario.failures {
            match f {
                Failure::TargetDown {
                    target: t,
                    from_ms,
                    until_ms,
                    fails_after_ms,
                } if Some(t.as_str()) == target && (*from_ms..*until_ms).contains(&now) => {
                    return Plan::Fail(
                        *fails_after_ms,
                        TaskError::Retryable(format!("target {t:?} is down (simulated)")),
                    );
                }
                Failure::Node {
                    graph,
                    node,
                    probability,
                    exit_code,
                    permanent,
                    from_ms,
                    until_ms,
                } if *graph == input.graph
                    && *node == input.node
                    && (*from_ms..*until_ms).contains(&now)
                    && u(STREAM_FAILURE) < *probability =>
                {
                    let what = match exit_code {
                        Some(c) => format!("exited with code {c} (simulated)"),
                        None => "failed (simulated)".to_string(),
                    };
                    let e = if *permanent {
                        TaskError::Permanent(what)
                    } else {
                        TaskError::Retryable(what)
                    };
                    return Plan::Fail(ms, e);
                }
                _ => {}
            }
        }
        Plan::Succeed(ms)
    }
}

impl Task for SimTask {
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        let start = self.clock.now_ms();
        let input: Option<TaskInput> = weir_core::codec::decode(&ctx.payload).ok();
        let (plan, output) = match &input {
            Some(i) => {
                let output = self
                    .scenario
                    .outputs
                    .get(&(i.graph.clone(), i.node.clone()))
                    .cloned()
                    .unwrap_or_default();
                (self.plan(i, &ctx.key, ctx.attempt, start), output)
            }
            // A plain job (not a graph node): the default duration.
            None => (Plan::Succeed(DURATION_DEFAULT_MS), Vec::new()),
        };
        Box::pin(async move {
            let (ms, result) = match plan {
                Plan::Succeed(ms) => (ms, Ok(output)),
                Plan::Fail(ms, e) => (ms, Err(e)),
                Plan::NotMet(left) => (
                    0,
                    Err(TaskError::NotMet(format!("holds in {left} ms (simulated)"))),
                ),
            };
            let ended = tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(ms)) => result,
                () = ctx.cancel.cancelled() => Err(TaskError::Retryable("cancelled (simulated)".into())),
            };
            ended
        })
    }
}

/// The notification task under simulation: nothing is sent.
pub struct SimNotify;

impl Task for SimNotify {
    fn run(&self, _ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        Box::pin(async { Ok(Vec::new()) })
    }
}
