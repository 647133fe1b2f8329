//! Shared helpers of the trigger tests: an engine on an anchored clock,
//! graph definitions, and a watcher of run starts and settles.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;
use weir::actors::clock::Clock;
use weir::{Durability, Engine, EngineEvent, GraphDef, NodeDef, TaskError, TaskSpec};
use weir_core::names::Name;

/// 2026-11-29T00:00:00Z.
pub const T0: u64 = 1_795_910_400_000;
pub const S: u64 = 1_000;
pub const MIN: u64 = 60 * S;
pub const H: u64 = 60 * MIN;
pub const DAY: u64 = 24 * H;

/// Outcomes a task reports per key (by partition prefix); default success.
#[derive(Clone, Default)]
pub struct Script {
    /// Partitions (as written in the run id) whose task fails.
    pub failing: Arc<Mutex<Vec<String>>>,
    /// Every run id the task ran, in order.
    pub ran: Arc<Mutex<Vec<String>>>,
    /// Every run id with the engine clock's ms when its task started.
    pub ran_at: Arc<Mutex<Vec<(String, u64)>>>,
}

impl Script {
    pub fn fail_key(&self, key: &str) {
        self.failing.lock().unwrap().push(format!("key={key}@"));
    }
    pub fn heal(&self) {
        self.failing.lock().unwrap().clear();
    }
    pub fn ran(&self) -> Vec<String> {
        self.ran.lock().unwrap().clone()
    }
    /// (partition, task start ms) of the runs of `key`, in order.
    pub fn runs_of(&self, key: &str) -> Vec<(String, u64)> {
        let prefix = format!("key={key}@");
        self.ran_at
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(id, at)| {
                let p = id.split('/').nth(1)?;
                p.starts_with(&prefix).then(|| (p.to_string(), *at))
            })
            .collect()
    }
}

/// An engine in `dir` whose clock reads `epoch_ms` now, with a pool of
/// `capacity` and a task `work` that sleeps `work_ms` and fails for the
/// keys the script says.
pub async fn open(
    dir: &Path,
    epoch_ms: u64,
    capacity: u32,
    work_ms: u64,
    script: &Script,
) -> Engine {
    open_with(
        dir,
        epoch_ms,
        capacity,
        work_ms,
        script,
        weir::TriggerSettings::default(),
        Durability::Flush,
    )
    .await
}

/// [`open`] with trigger settings.
pub async fn open_with(
    dir: &Path,
    epoch_ms: u64,
    capacity: u32,
    work_ms: u64,
    script: &Script,
    settings: weir::TriggerSettings,
    durability: Durability,
) -> Engine {
    builder(
        dir, epoch_ms, capacity, work_ms, script, settings, durability,
    )
    .open()
    .await
    .unwrap()
}

/// The builder [`open_with`] opens, for a test that sets more.
pub fn builder(
    dir: &Path,
    epoch_ms: u64,
    capacity: u32,
    work_ms: u64,
    script: &Script,
    settings: weir::TriggerSettings,
    durability: Durability,
) -> weir::EngineBuilder {
    let s = script.clone();
    let clock = Clock::anchored(epoch_ms);
    let c = clock.clone();
    Engine::builder(dir)
        .durability(durability)
        .clock(clock)
        .trigger_settings(settings)
        .pool("default", capacity)
        .task_fn("work", move |ctx| {
            let s = s.clone();
            let now = c.now_ms();
            async move {
                s.ran.lock().unwrap().push(ctx.key.to_string());
                s.ran_at.lock().unwrap().push((ctx.key.to_string(), now));
                if work_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(work_ms)).await;
                }
                let failing = s.failing.lock().unwrap().clone();
                if failing.iter().any(|f| ctx.key.contains(f.as_str())) {
                    return Err(TaskError::Permanent("scripted failure".into()));
                }
                Ok(Vec::new())
            }
        })
}

/// A one-node graph running `work`.
pub fn graph(name: &str) -> GraphDef {
    let mut n = NodeDef::new(
        Name::new("work").unwrap(),
        vec![],
        TaskSpec {
            task: Name::new("work").unwrap(),
            config: serde_json::Value::Null,
        },
    );
    n.retry = weir::RetryPolicy::once();
    GraphDef::new(Name::new(name).unwrap(), vec![n])
}

/// Counts of run starts and settles seen, and the most runs active at once.
#[derive(Debug, Default, Clone)]
pub struct Watch {
    pub started: BTreeMap<String, usize>,
    pub settled: BTreeMap<String, String>,
    pub active: usize,
    pub active_max: usize,
    pub lagged: bool,
}

/// Watches the run events of `graph`.
pub fn watch(engine: &Engine, graph: &str) -> Arc<Mutex<Watch>> {
    let w = Arc::new(Mutex::new(Watch::default()));
    let mut rx = engine.subscribe();
    let (g, w2) = (graph.to_string(), w.clone());
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(EngineEvent::RunStarted { graph, partition }) if graph == g => {
                    let mut w = w2.lock().unwrap();
                    *w.started.entry(partition).or_default() += 1;
                    w.active += 1;
                    w.active_max = w.active_max.max(w.active);
                }
                Ok(EngineEvent::RunSettled {
                    graph,
                    partition,
                    state,
                }) if graph == g => {
                    let mut w = w2.lock().unwrap();
                    w.active = w.active.saturating_sub(1);
                    w.settled.insert(partition, state);
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => w2.lock().unwrap().lagged = true,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    });
    w
}

/// Sleeps `ms` of (paused) time.
pub async fn advance(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Waits (in small steps of virtual time) until `f` holds, up to `ms`.
pub async fn until(ms: u64, what: &str, mut f: impl FnMut() -> bool) {
    let steps = ms / 10;
    for _ in 0..steps {
        if f() {
            return;
        }
        advance(10).await;
    }
    assert!(f(), "timed out after {ms} ms waiting for {what}");
}

/// A keyed graph over the inventory file `inventory`: interval 1 h, retry
/// 5 min, no jitter, debounce delay 60 s and max wait 600 s, refresh 10
/// min, unless `f` changes them.
pub fn keyed(name: &str, inventory: &Path, f: impl FnOnce(&mut weir::KeyedSpec)) -> GraphDef {
    let mut g = graph(name);
    g.partitioning = weir::Partitioning::Keyed;
    g.max_active_runs = 10_000;
    let mut spec = weir::KeyedSpec::new(weir::InventorySource::File(
        inventory.to_string_lossy().into_owned(),
    ));
    spec.refresh_ms = 10 * MIN;
    spec.schedule = weir::ScheduleSettings {
        interval_ms: H,
        retry_interval_ms: 5 * MIN,
        jitter_ms: 0,
    };
    spec.debounce = weir::Debounce {
        delay_ms: MIN,
        max_wait_ms: 10 * MIN,
    };
    f(&mut spec);
    g.keyed = Some(spec);
    g
}

/// The schedule of `key`.
pub async fn schedule_of(engine: &Engine, graph: &str, key: &str) -> weir::KeyScheduleView {
    engine
        .schedules(graph)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.key == key)
        .unwrap_or_else(|| panic!("key {key} has no schedule"))
}

/// The due instant of a keyed partition `key=<k>@<instant>`.
pub fn due_of(partition: &str) -> u64 {
    let p: weir::Partition = partition.parse().unwrap();
    p.at_ms().unwrap()
}
