//! The trigger actor of one graph: runs that start themselves.
//!
//! One per graph that has a cron expression, a keyed inventory or a
//! backfill in progress. It owns three sources of starts, each in its own
//! module, and hands every start to the graph's scheduler
//! (`SchedulerMsg::StartRuns`, idempotent per partition):
//!
//! - [`cron`]: each firing starts the window it closes; the last firing
//!   handled and the windows waiting for room are in `cron/<graph>`.
//! - [`backfill`]: every window of a range, oldest or newest first; the
//!   backfills and their cursors are in `backfill/<graph>`.
//! - [`keyed`]: glazed's key schedules, one record `sched/<graph>/<key>`
//!   each, fed by the [`inventory`] (reloaded every `refresh`), by signals
//!   and by the end of each key's run.
//!
//! Every start waits for room: the graph's active runs (asked of the
//! scheduler) stay at or below its `max_active_runs`. Cron windows start
//! first, then backfills in the order they were asked for, then due keys in
//! claim batches of at most `batch_size`.
//!
//! The actor holds no state the store does not: a restart rebuilds it from
//! the records above and repairs at once (a leased key whose run settled
//! while nobody listened is completed, one whose start was lost is started
//! again). It learns that runs settled from the engine's events
//! (`RunSettled`), forwarded by a task it owns; a lagged subscription is
//! repaired the same way. It wakes at the earliest instant something is
//! due (one `send_after` timer, re-armed after every message), never on a
//! fixed poll; while keys are leased or starts wait for room it also wakes
//! every `repair_interval_ms` at the latest, so a lost event costs one
//! interval at most. Jitter comes from a `SmallRng` the actor owns and is
//! passed to weir-core's pure schedule functions as a draw.
//!
//! A paused graph ([`pause`]) starts nothing by itself: no cron firing is
//! handled, no backfill window and no due key is started, until it is
//! unpaused.

pub mod backfill;
pub mod cron;
pub mod inventory;
pub mod keyed;
// The pause record lives with the other records; its old paths stay.
pub use crate::records::pause;
pub use crate::records::pause::paused;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use weir_core::cron::Schedule;
use weir_core::graph::GraphDef;
use weir_core::names::{Key, Name};
use weir_core::partition::{Partition, PartitionRange};
use weir_core::schedule::Signal;

use crate::clock::Clock;
use crate::events::EngineEvent;
use crate::names::Names;
// The trigger's interface lives in `msg`; re-exported here for the crate's users.
use crate::msg::scheduler::{SchedulerMsg, StartOutcome};
use crate::msg::trigger::{Backfill, BackfillOrder, InventoryChange, KeyScheduleView};
pub use crate::msg::trigger::{TriggerMsg, TriggerStatus};
use crate::records::graph::{GraphRecord, GraphRunRecord};
use crate::records::keys::{def_key, graph_key, run_key};
use crate::store::{Store, StoreError};
use backfill::{backfill_key, BackfillRecord};
use cron::{cron_key, CronRecord};
use inventory::{describe, InventoryLimits};
use keyed::{inventory_key, sched_key, sched_prefix, InventoryRecord, KeyRecord, Keyed};

/// How long the trigger waits for its scheduler.
pub const SCHEDULER_CALL_MS: u64 = 60_000;

/// Settings of the trigger actors. Every bound is here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TriggerSettings {
    /// Windows a cron graph with `catchup = true` starts after downtime at
    /// most (the newest); older missed windows are dropped, and said so.
    pub cron_catchup_max: usize,
    /// Windows one backfill may span at most.
    pub backfill_windows_max: usize,
    /// Backfills of one graph in progress at most.
    pub backfills_max: usize,
    /// Partitions in one start request to the scheduler at most.
    pub start_batch_max: usize,
    /// How long an inventory command may run, in ms.
    pub inventory_timeout_ms: u64,
    /// The most bytes an inventory file or command output may hold.
    pub inventory_bytes_max: usize,
    /// The most keys an inventory may list.
    pub inventory_keys_max: usize,
    /// After a failed first inventory load (no keys yet), the next try,
    /// in ms (at most the graph's refresh).
    pub inventory_retry_ms: u64,
    /// The longest sleep while keys are leased or starts wait for room:
    /// each wake checks leased keys' runs, repairing lost events.
    pub repair_interval_ms: u64,
    /// After the scheduler could not be reached, the next try, in ms.
    pub retry_ms: u64,
    /// Key schedules written in one store batch at most. sled holds a
    /// batch's pages in memory: 1,000 a batch keeps loading 100,000 keys
    /// near 100 MiB of RSS growth, where 10,000 a batch took 370 MiB, at
    /// the same speed.
    pub write_batch_max: usize,
    /// How far ahead of their instants due keys and cron windows are
    /// prepared, in ms: their runs are created and their first tickets
    /// enqueued durably, to be handed out at the instant, so a burst due
    /// at one instant waits for no commit then. 0 prepares nothing (every
    /// start happens at its instant).
    pub prepare_ahead_ms: u64,
}

impl Default for TriggerSettings {
    fn default() -> Self {
        TriggerSettings {
            cron_catchup_max: 1_000,
            backfill_windows_max: 100_000,
            backfills_max: 100,
            start_batch_max: 1_000,
            inventory_timeout_ms: 30_000,
            inventory_bytes_max: 64 << 20,
            inventory_keys_max: 1_000_000,
            inventory_retry_ms: 10_000,
            repair_interval_ms: 60_000,
            retry_ms: 1_000,
            write_batch_max: 1_000,
            // Preparing 10,000 runs takes about 3 s on 2 cores with fsync.
            prepare_ahead_ms: 5_000,
        }
    }
}

impl TriggerSettings {
    /// The bounds of an inventory load.
    pub fn inventory_limits(&self) -> InventoryLimits {
        InventoryLimits {
            timeout_ms: self.inventory_timeout_ms,
            bytes_max: self.inventory_bytes_max,
            keys_max: self.inventory_keys_max,
        }
    }
}

/// The trigger actor.
pub struct TriggerActor;

/// What it needs to start.
pub struct TriggerArgs {
    /// Its graph.
    pub graph: Name,
    /// Engine names.
    pub names: Names,
    /// The store.
    pub store: Store,
    /// The clock.
    pub clock: Clock,
    /// Engine events.
    pub events: broadcast::Sender<EngineEvent>,
    /// Settings.
    pub settings: TriggerSettings,
}

struct CronState {
    schedule: Schedule,
    catchup: bool,
    record: CronRecord,
}

struct KeyedState {
    keys: Keyed,
    /// Whether an inventory has ever loaded.
    loaded_at_ms: Option<u64>,
    next_refresh_ms: u64,
    loading: bool,
    waiters: Vec<RpcReplyPort<Result<InventoryChange, String>>>,
}

/// The wake timer's handle.
type TimerHandle = JoinHandle<Result<(), ractor::MessagingErr<TriggerMsg>>>;

/// The trigger's state.
pub struct TriggerState {
    graph: Name,
    names: Names,
    store: Store,
    clock: Clock,
    events: broadcast::Sender<EngineEvent>,
    settings: TriggerSettings,
    rng: SmallRng,
    /// The lease owner of this graph's claims. Stable across restarts, so
    /// a restarted trigger completes the leases its predecessor took.
    owner: String,
    def: Option<Arc<GraphDef>>,
    cron: Option<CronState>,
    backfills: BackfillRecord,
    /// Windows of each backfill in start order, computed once.
    windows: HashMap<u64, Arc<Vec<weir_core::partition::Partition>>>,
    keyed: Option<KeyedState>,
    rx: Option<broadcast::Receiver<EngineEvent>>,
    forwarder: Option<JoinHandle<()>>,
    timer: Option<(u64, TimerHandle)>,
    wake_queued: bool,
    last_repair_ms: u64,
    repair_now: bool,
    retry_at_ms: Option<u64>,
    /// Starts wait for room under max_active_runs.
    waiting_for_room: bool,
    /// Paused: nothing starts by itself ([`pause`]).
    paused: bool,
    /// The cron firing whose windows are prepared, and those windows (a
    /// preparation is idempotent per partition, so a restart that forgets
    /// this prepares them again, as a no-op).
    cron_prepared: Option<(u64, Vec<Partition>)>,
}

/// Whether `graph` needs a trigger: its adopted definition has a cron
/// expression or a keyed inventory, or it has a backfill in progress.
pub fn needed(store: &Store, graph: &str) -> Result<bool, StoreError> {
    if let Some(def) = adopted_def(store, graph)? {
        if def.cron.is_some() || def.keyed.is_some() {
            return Ok(true);
        }
    }
    Ok(store
        .get::<BackfillRecord>(&backfill_key(graph))?
        .is_some_and(|r| !r.backfills.is_empty()))
}

fn adopted_def(store: &Store, graph: &str) -> Result<Option<GraphDef>, StoreError> {
    let Some(record) = store.get::<GraphRecord>(&graph_key(graph))? else {
        return Ok(None);
    };
    store.get::<GraphDef>(&def_key(&record.definition))
}

type Res<T> = Result<T, ActorProcessingErr>;

impl Actor for TriggerActor {
    type Msg = TriggerMsg;
    type State = TriggerState;
    type Arguments = TriggerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<TriggerMsg>,
        args: TriggerArgs,
    ) -> Result<TriggerState, ActorProcessingErr> {
        // Subscribe first: a settle between the reads below and the
        // subscription would otherwise wait for a repair.
        let rx = args.events.subscribe();
        let mut state = TriggerState {
            owner: format!("trigger:{}", args.graph),
            graph: args.graph,
            names: args.names,
            store: args.store,
            clock: args.clock,
            events: args.events,
            settings: args.settings,
            rng: SmallRng::from_entropy(),
            def: None,
            cron: None,
            backfills: BackfillRecord::default(),
            windows: HashMap::new(),
            keyed: None,
            rx: Some(rx),
            forwarder: None,
            timer: None,
            wake_queued: false,
            last_repair_ms: 0,
            repair_now: true,
            retry_at_ms: None,
            waiting_for_room: false,
            cron_prepared: None,
            paused: false,
        };
        state.paused = paused(&state.store, state.graph.as_str())?;
        state.backfills = state
            .store
            .get(&backfill_key(state.graph.as_str()))?
            .unwrap_or_default();
        state.configure().await?;
        tracing::info!(
            graph = %state.graph,
            cron = state.cron.is_some(),
            keys = state.keyed.as_ref().map_or(0, |k| k.keys.len()),
            backfills = state.backfills.backfills.len(),
            paused = state.paused,
            "trigger started"
        );
        Ok(state)
    }

    async fn post_start(
        &self,
        myself: ActorRef<TriggerMsg>,
        state: &mut TriggerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(mut rx) = state.rx.take() {
            let me = myself.clone();
            let graph = state.graph.to_string();
            state.forwarder = Some(tokio::spawn(async move {
                loop {
                    let msg = match rx.recv().await {
                        Ok(EngineEvent::RunSettled {
                            graph: g,
                            partition,
                            state,
                        }) if g == graph => TriggerMsg::Settled { partition, state },
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Lagged(_)) => TriggerMsg::EventsLagged,
                        Err(broadcast::error::RecvError::Closed) => break,
                    };
                    if me.cast(msg).is_err() {
                        break;
                    }
                }
            }));
        }
        state.wake_soon(&myself);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<TriggerMsg>,
        state: &mut TriggerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(f) = state.forwarder.take() {
            f.abort();
        }
        if let Some((_, t)) = state.timer.take() {
            t.abort();
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<TriggerMsg>,
        msg: TriggerMsg,
        state: &mut TriggerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            TriggerMsg::Wake => {
                state.wake_queued = false;
                state.tick(&myself).await?;
            }
            TriggerMsg::Adopted => {
                state.configure().await?;
                state.wake_soon(&myself);
            }
            TriggerMsg::Settled {
                partition,
                state: s,
            } => {
                state.settled(&partition, &s);
                state.wake_soon(&myself);
            }
            TriggerMsg::EventsLagged => {
                tracing::warn!(graph = %state.graph, "trigger missed engine events; repairing");
                state.repair_now = true;
                state.wake_soon(&myself);
            }
            TriggerMsg::Signal(key, signal, reply) => {
                let r = state.signal(&key, &signal).await?;
                let _ = reply.send(r);
                state.arm(&myself);
            }
            TriggerMsg::Backfill(range, order, reply) => {
                let r = state.add_backfill(range, order).await?;
                let _ = reply.send(r);
                state.wake_soon(&myself);
            }
            TriggerMsg::ReloadInventory(reply) => match state.keyed.as_mut() {
                None => {
                    let _ = reply.send(Err(format!("graph {} is not keyed", state.graph)));
                }
                Some(k) => {
                    k.waiters.push(reply);
                    state.start_load(&myself);
                }
            },
            TriggerMsg::InventoryLoaded(result) => {
                if let Some(k) = state.keyed.as_mut() {
                    k.loading = false;
                }
                state.inventory_loaded(result).await?;
                state.wake_soon(&myself);
            }
            TriggerMsg::ApplyInventory(keys, reply) => match state.keyed.as_mut() {
                None => {
                    let _ = reply.send(Err(format!("graph {} is not keyed", state.graph)));
                }
                Some(k) => {
                    k.waiters.push(reply);
                    state.inventory_loaded(Ok(keys)).await?;
                    state.wake_soon(&myself);
                }
            },
            TriggerMsg::Schedules(reply) => {
                let views = state
                    .keyed
                    .as_ref()
                    .map(|k| k.keys.views())
                    .unwrap_or_default();
                let _ = reply.send(views);
            }
            TriggerMsg::Status(reply) => {
                let _ = reply.send(state.status());
            }
            TriggerMsg::SignalKey {
                key,
                signal,
                add,
                reply,
            } => {
                let known = state
                    .keyed
                    .as_ref()
                    .is_some_and(|k| k.keys.get(&key).is_some());
                let r = if known || add || state.keyed.is_none() {
                    if !known && add {
                        tracing::info!(graph = %state.graph, key = %key, "key not in the inventory added by a signal");
                    }
                    state.signal(&key, &signal).await?
                } else {
                    Err(format!(
                        "graph {}: key {key:?} is not in the graph's inventory (signal it with add to schedule it anyway)",
                        state.graph
                    ))
                };
                let _ = reply.send(r);
                state.arm(&myself);
            }
            TriggerMsg::SignalAll(signal, reply) => {
                let r = state.signal_all(&signal).await?;
                let _ = reply.send(r);
                state.wake_soon(&myself);
            }
            TriggerMsg::SetPaused(paused, reply) => {
                let r = state.set_paused(paused).await?;
                let _ = reply.send(r);
                state.wake_soon(&myself);
            }
        }
        Ok(())
    }
}

impl TriggerState {
    /// Rereads the adopted definition and sets up cron and keyed state.
    async fn configure(&mut self) -> Res<()> {
        let store = self.store.clone();
        let graph = self.graph.to_string();
        let def = tokio::task::spawn_blocking(move || adopted_def(&store, &graph)).await??;
        let now = self.clock.now_ms();
        let Some(def) = def else {
            self.def = None;
            self.cron = None;
            self.keyed = None;
            return Ok(());
        };
        // Cron: continue from the last firing handled; a graph new to cron
        // starts counting now (no window closed before it had a cron) —
        // unless it has a start date with catch-up: then every window from
        // the start to the newest closed one is backfilled once, before the
        // cron record exists (a crash in between asks again: a backfill is
        // identified by its range, and a run starts at most once).
        let mut catch_up: Option<PartitionRange> = None;
        self.cron = match &def.cron {
            None => None,
            Some(expr) => {
                let schedule = Schedule::parse(expr)
                    .map_err(|e| format!("graph {}: cron: {e}", self.graph))?;
                let key = cron_key(self.graph.as_str());
                let stored: Option<CronRecord> = self.store.get(&key)?;
                let fresh = stored.is_none();
                let mut record = stored.unwrap_or_else(|| CronRecord {
                    expr: expr.clone(),
                    last_firing_ms: now,
                    pending: Vec::new(),
                });
                if fresh {
                    catch_up = start_catch_up(&def, now);
                }
                if (fresh && catch_up.is_none()) || (!fresh && record.expr != *expr) {
                    record.expr = expr.clone();
                    self.put(&key, &record).await?;
                }
                Some(CronState {
                    schedule,
                    catchup: def.catchup,
                    record,
                })
            }
        };
        self.keyed = match (&def.keyed, self.keyed.take()) {
            (None, _) => None,
            (Some(spec), Some(mut k)) => {
                if k.keys.spec.inventory != spec.inventory {
                    k.next_refresh_ms = now;
                }
                k.keys.spec = spec.clone();
                Some(k)
            }
            (Some(spec), None) => {
                let store = self.store.clone();
                let graph = self.graph.to_string();
                let (records, inv) = tokio::task::spawn_blocking(move || {
                    let records: Vec<(String, KeyRecord)> = store.scan(&sched_prefix(&graph))?;
                    let inv: Option<InventoryRecord> = store.get(&inventory_key(&graph))?;
                    Ok::<_, StoreError>((records, inv))
                })
                .await??;
                let keys = Keyed::new(spec.clone(), records.into_iter().map(|(_, r)| r).collect());
                let loaded_at_ms = inv.map(|i| i.loaded_at_ms);
                Some(KeyedState {
                    keys,
                    loaded_at_ms,
                    // Never loaded: the adopt applies its first load
                    // (ApplyInventory) right away; if that was lost, the
                    // trigger loads by itself shortly.
                    next_refresh_ms: loaded_at_ms.map_or_else(
                        || {
                            now.saturating_add(
                                self.settings
                                    .inventory_retry_ms
                                    .clamp(1, spec.refresh_ms.max(1)),
                            )
                        },
                        |at| at.saturating_add(spec.refresh_ms),
                    ),
                    loading: false,
                    waiters: Vec::new(),
                })
            }
        };
        self.def = Some(Arc::new(def));
        if let Some(range) = catch_up {
            match self
                .add_backfill(range.clone(), BackfillOrder::Oldest)
                .await?
            {
                Ok(b) => {
                    tracing::info!(graph = %self.graph, backfill = b.id, range = %range, "catch-up from the start date")
                }
                Err(e) => {
                    tracing::error!(graph = %self.graph, range = %range, error = %e, "catch-up from the start date refused")
                }
            }
            if let Some(c) = &self.cron {
                let record = c.record.clone();
                self.put(&cron_key(self.graph.as_str()), &record).await?;
            }
        }
        Ok(())
    }

    fn status(&self) -> TriggerStatus {
        TriggerStatus {
            graph: self.graph.to_string(),
            cron_last_firing_ms: self.cron.as_ref().map(|c| c.record.last_firing_ms),
            cron_pending: self
                .cron
                .as_ref()
                .map(|c| c.record.pending.iter().map(|p| p.to_string()).collect())
                .unwrap_or_default(),
            backfills: self.backfills.backfills.clone(),
            keys: self.keyed.as_ref().map_or(0, |k| k.keys.len()),
            inventory_loaded_at_ms: self.keyed.as_ref().and_then(|k| k.loaded_at_ms),
        }
    }

    fn wake_soon(&mut self, myself: &ActorRef<TriggerMsg>) {
        if !self.wake_queued {
            self.wake_queued = true;
            let _ = myself.cast(TriggerMsg::Wake);
        }
    }

    /// One pass: reload the inventory if due, handle cron firings, repair,
    /// start what has room, write changed schedules, re-arm the timer.
    async fn tick(&mut self, myself: &ActorRef<TriggerMsg>) -> Res<()> {
        let now = self.clock.now_ms();
        if let Some(k) = &self.keyed {
            if !k.loading && now >= k.next_refresh_ms {
                self.start_load(myself);
            }
        }
        if !self.paused {
            self.fire_cron(now).await?;
            self.prepare_cron(now).await?;
        }
        let repair_due = self.repair_now
            || now
                >= self
                    .last_repair_ms
                    .saturating_add(self.settings.repair_interval_ms);
        if repair_due {
            self.repair(now).await?;
        }
        if self.paused {
            self.waiting_for_room = false;
        } else if self.retry_at_ms.is_none_or(|at| now >= at) {
            self.retry_at_ms = None;
            self.start_due(myself, now).await?;
        }
        self.flush().await?;
        self.arm(myself);
        Ok(())
    }

    /// Handles the cron firings due at `now`: their windows join `pending`
    /// and the firing is recorded, in one write.
    async fn fire_cron(&mut self, now: u64) -> Res<()> {
        let Some(def) = self.def.clone() else {
            return Ok(());
        };
        let Some(c) = self.cron.as_mut() else {
            return Ok(());
        };
        let due = cron::due_firings(
            &c.schedule,
            c.record.last_firing_ms,
            now,
            c.catchup,
            self.settings.cron_catchup_max,
        );
        let Some(&newest) = due.firings.last() else {
            return Ok(());
        };
        let mut windows = cron::windows_closed(&c.schedule, def.partitioning, &due.firings);
        if let Some(start) = def.start_ms {
            // No window before the start date, ever.
            windows.retain(|w| {
                w.start_ms()
                    .is_some_and(|ms| ms >= start_window_ms(&def, start))
            });
        }
        if due.older_dropped {
            tracing::warn!(
                graph = %self.graph,
                catchup = c.catchup,
                "older missed cron firings were not started"
            );
        }
        tracing::info!(graph = %self.graph, firing_ms = newest, windows = windows.len(), "cron fired");
        for w in &windows {
            if !c.record.pending.contains(w) {
                c.record.pending.push(w.clone());
            }
        }
        c.record.last_firing_ms = newest;
        let record = c.record.clone();
        let _ = self.events.send(EngineEvent::CronFired {
            graph: self.graph.to_string(),
            firing_ms: newest,
            windows: windows.iter().map(|p| p.to_string()).collect(),
            older_dropped: due.older_dropped,
        });
        self.put(&cron_key(self.graph.as_str()), &record).await
    }

    /// The next cron firing, when it falls within the preparation horizon
    /// and is not prepared yet.
    fn cron_to_prepare(&self, now: u64) -> Option<u64> {
        let c = self.cron.as_ref()?;
        if self.settings.prepare_ahead_ms == 0 {
            return None;
        }
        let next = c.schedule.next_after(c.record.last_firing_ms.max(now))?;
        let prepared = self
            .cron_prepared
            .as_ref()
            .is_some_and(|(at, _)| *at == next);
        (!prepared).then_some(next)
    }

    /// Prepares the windows the next cron firing closes, when it is within
    /// the horizon and the graph has room: at the firing they are started
    /// as always, which finds them prepared.
    async fn prepare_cron(&mut self, now: u64) -> Res<()> {
        let Some(next) = self.cron_to_prepare(now) else {
            return Ok(());
        };
        if next > now.saturating_add(self.settings.prepare_ahead_ms) {
            return Ok(());
        }
        let (Some(def), Some(c)) = (self.def.clone(), self.cron.as_ref()) else {
            return Ok(());
        };
        let mut windows = cron::windows_closed(&c.schedule, def.partitioning, &[next]);
        if let Some(start) = def.start_ms {
            windows.retain(|w| {
                w.start_ms()
                    .is_some_and(|ms| ms >= start_window_ms(&def, start))
            });
        }
        let Some(active) = self.active_runs().await else {
            return Ok(());
        };
        let room = (def.max_active_runs as usize).saturating_sub(active);
        if windows.len() > room {
            // Started at the firing, as they would be without preparation.
            self.cron_prepared = Some((next, Vec::new()));
            return Ok(());
        }
        let runs = windows.iter().map(|w| (w.clone(), next)).collect();
        if self.prepare(runs).await?.is_some() {
            tracing::debug!(graph = %self.graph, firing_ms = next, windows = windows.len(), "cron windows prepared");
            self.cron_prepared = Some((next, windows));
        }
        Ok(())
    }

    /// Checks the run of every key this trigger leased: a settled run
    /// whose event was lost completes the key, a run whose start was lost
    /// starts (again: a no-op if it exists).
    async fn repair(&mut self, now: u64) -> Res<()> {
        self.repair_now = false;
        self.last_repair_ms = now;
        let Some(k) = &self.keyed else {
            return Ok(());
        };
        let leased = k.keys.leased(&self.owner);
        if leased.is_empty() {
            return Ok(());
        }
        let store = self.store.clone();
        let graph = self.graph.to_string();
        let found = tokio::task::spawn_blocking(move || {
            let mut out = Vec::new();
            for (key, at, waits) in leased {
                let Ok(p) = Partition::keyed_at(key.clone(), at) else {
                    continue;
                };
                let run: Option<GraphRunRecord> = store.get(&run_key(&graph, &p))?;
                out.push((key, at, waits, p, run.map(|r| r.state)));
            }
            Ok::<_, StoreError>(out)
        })
        .await??;
        let mut lost_starts = Vec::new();
        let mut lost_preparations = Vec::new();
        let mut repaired = 0;
        for (key, at, waits, p, run) in found {
            use crate::records::graph::RunState;
            match run {
                // A prepared claim's run is prepared again (to wait for the
                // same instant, or start at once if that has passed).
                None => match waits {
                    Some(w) if w > now => lost_preparations.push((p, w)),
                    _ => lost_starts.push(p),
                },
                Some(RunState::Active) => {}
                // The withdrawal landed and the key's record did not: the
                // key is as before its claim.
                Some(RunState::Withdrawn) => {
                    let k = self.keyed.as_mut().expect("checked above");
                    if !k.keys.unprepare(&key) {
                        // Not a prepared claim: its start revives the run.
                        lost_starts.push(p);
                    }
                    repaired += 1;
                }
                Some(s) => {
                    let error = self.failure(&p, &s.to_string());
                    let draw = self.rng.gen();
                    let k = self.keyed.as_mut().expect("checked above");
                    if k.keys
                        .completed(&key, at, &self.owner, now, error.as_deref(), draw)
                    {
                        repaired += 1;
                    }
                }
            }
        }
        if repaired > 0 || !lost_starts.is_empty() || !lost_preparations.is_empty() {
            tracing::info!(graph = %self.graph, completed = repaired, restarted = lost_starts.len(), prepared = lost_preparations.len(), "trigger repaired leased keys");
        }
        if !lost_starts.is_empty() || !lost_preparations.is_empty() {
            self.flush().await?;
            if self.start(lost_starts).await?.is_none()
                || self.prepare(lost_preparations).await?.is_none()
            {
                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
            }
        }
        Ok(())
    }

    /// Why run `p` of a key did not complete, from its nodes' records;
    /// `None` when it completed.
    fn failure(&self, p: &Partition, state: &str) -> Option<String> {
        if state == "complete" {
            return None;
        }
        let detail = crate::views::run::graph_run(&self.store, self.graph.as_str(), p)
            .ok()
            .flatten()
            .and_then(|v| {
                v.nodes
                    .into_iter()
                    .find(|n| n.state == "failed" || n.state == "cancelled")
                    .map(|n| match n.error {
                        Some(e) => format!(": node {}: {e}", n.node),
                        None => format!(": node {} {}", n.node, n.state),
                    })
            })
            .unwrap_or_default();
        Some(format!("run {p} {state}{detail}"))
    }

    /// A run of the graph settled: a keyed run completes its key.
    fn settled(&mut self, partition: &str, state: &str) {
        let Ok(p) = partition.parse::<Partition>() else {
            return;
        };
        let (Some(key), Some(at)) = (p.key().cloned(), p.at_ms()) else {
            return;
        };
        if self.keyed.is_none() {
            return;
        }
        let error = self.failure(&p, state);
        let now = self.clock.now_ms();
        let draw = self.rng.gen();
        let k = self.keyed.as_mut().expect("checked above");
        if k.keys
            .completed(&key, at, &self.owner, now, error.as_deref(), draw)
        {
            tracing::debug!(graph = %self.graph, key = %key, state, "key run ended");
        }
    }

    /// Starts cron windows, then backfill windows, then due keys, while
    /// the graph has room under its max_active_runs.
    async fn start_due(&mut self, myself: &ActorRef<TriggerMsg>, now: u64) -> Res<()> {
        self.waiting_for_room = false;
        let cron_pending = self
            .cron
            .as_ref()
            .is_some_and(|c| !c.record.pending.is_empty());
        let keys_due = self
            .keyed
            .as_ref()
            .and_then(|k| k.keys.next_claimable())
            .is_some_and(|at| at <= now.saturating_add(self.settings.prepare_ahead_ms));
        if !cron_pending && self.backfills.backfills.is_empty() && !keys_due {
            return Ok(());
        }
        let Some(def) = self.def.clone() else {
            return Ok(());
        };
        let Some(active) = self.active_runs().await else {
            self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
            return Ok(());
        };
        let mut room = (def.max_active_runs as usize).saturating_sub(active);
        let batch_max = self.settings.start_batch_max.max(1);

        // Cron windows.
        while room > 0
            && self
                .cron
                .as_ref()
                .is_some_and(|c| !c.record.pending.is_empty())
        {
            let c = self.cron.as_ref().expect("checked");
            let n = room.min(batch_max).min(c.record.pending.len());
            let batch: Vec<Partition> = c.record.pending[..n].to_vec();
            let Some(out) = self.start(batch).await? else {
                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
                return Ok(());
            };
            room = room.saturating_sub(started(&out));
            let c = self.cron.as_mut().expect("checked");
            c.record.pending.drain(..n);
            let record = c.record.clone();
            self.put(&cron_key(self.graph.as_str()), &record).await?;
        }

        // Backfills, in the order asked for.
        while room > 0 && !self.backfills.backfills.is_empty() {
            let b = self.backfills.backfills[0].clone();
            let windows = match self.windows.get(&b.id) {
                Some(w) => w.clone(),
                None => {
                    let w = Arc::new(
                        b.ordered_windows(def.partitioning, self.settings.backfill_windows_max)
                            .map_err(|e| format!("graph {}: backfill {}: {e}", self.graph, b.id))?,
                    );
                    self.windows.insert(b.id, w.clone());
                    w
                }
            };
            let from = b.cursor as usize;
            let to = (from + room.min(batch_max)).min(windows.len());
            let batch = windows[from..to].to_vec();
            let Some(out) = self.start(batch).await? else {
                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
                return Ok(());
            };
            let n = started(&out);
            room = room.saturating_sub(n);
            let b = &mut self.backfills.backfills[0];
            b.cursor = to as u64;
            b.started += n as u64;
            b.skipped += (out.len() - n) as u64;
            if b.is_done() {
                let b = self.backfills.backfills.remove(0);
                self.windows.remove(&b.id);
                tracing::info!(graph = %self.graph, backfill = b.id, started = b.started, skipped = b.skipped, "backfill done");
                let _ = self.events.send(EngineEvent::BackfillDone {
                    graph: self.graph.to_string(),
                    id: b.id,
                    started: b.started,
                    skipped: b.skipped,
                });
            }
            let record = self.backfills.clone();
            self.put(&backfill_key(self.graph.as_str()), &record)
                .await?;
        }

        // Due keys: one claim batch per pass; another pass is queued while
        // keys stay due and there is room, so signals and queries get a
        // turn between batches. Keys due within the preparation horizon
        // are prepared in the same batch, after those due now.
        let horizon = self.settings.prepare_ahead_ms;
        if room > 0 {
            if let Some(k) = self.keyed.as_mut() {
                let n = room.min(k.keys.spec.batch_size.max(1) as usize);
                let claimed = k
                    .keys
                    .claim_until(&self.owner, now, now.saturating_add(horizon), n);
                if !claimed.is_empty() {
                    // Leases are durable before their runs start: a crash in
                    // between leaves leases that the repair starts.
                    self.flush().await?;
                    let (ahead, at_once): (Vec<_>, Vec<_>) =
                        claimed.into_iter().partition(|(_, at)| *at > now);
                    let at_once: Vec<Partition> = at_once.into_iter().map(|(p, _)| p).collect();
                    tracing::debug!(graph = %self.graph, keys = at_once.len(), prepared = ahead.len(), "keys claimed");
                    for out in [self.start(at_once).await?, self.prepare(ahead).await?] {
                        match out {
                            None => {
                                self.retry_at_ms = Some(now.saturating_add(self.settings.retry_ms));
                                return Ok(());
                            }
                            Some(out) => room = room.saturating_sub(started(&out)),
                        }
                    }
                    let more = self
                        .keyed
                        .as_ref()
                        .and_then(|k| k.keys.next_claimable())
                        .is_some_and(|at| at <= now.saturating_add(horizon));
                    if more && room > 0 {
                        self.wake_soon(myself);
                    }
                }
            }
        }
        let keys_due = self
            .keyed
            .as_ref()
            .and_then(|k| k.keys.next_claimable())
            .is_some_and(|at| at <= now.saturating_add(horizon));
        self.waiting_for_room = room == 0
            && (keys_due
                || !self.backfills.backfills.is_empty()
                || self
                    .cron
                    .as_ref()
                    .is_some_and(|c| !c.record.pending.is_empty()));
        Ok(())
    }

    /// The graph's active runs, from its scheduler; `None` when it cannot
    /// be reached (restarting).
    async fn active_runs(&self) -> Option<usize> {
        let s = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))?;
        match ractor::call_t!(s, SchedulerMsg::ActiveRuns, SCHEDULER_CALL_MS) {
            Ok(runs) => Some(runs.len()),
            Err(e) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler did not answer");
                None
            }
        }
    }

    /// Starts runs; `None` when the scheduler cannot be reached or refused
    /// (the caller retries after `retry_ms`).
    async fn start(&self, partitions: Vec<Partition>) -> Res<Option<Vec<StartOutcome>>> {
        if partitions.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))
        else {
            tracing::warn!(graph = %self.graph, "scheduler not running; starts wait");
            return Ok(None);
        };
        match ractor::call_t!(
            s,
            SchedulerMsg::StartRuns,
            SCHEDULER_CALL_MS,
            partitions,
            // Cron firings and backfills run with the definition's params.
            std::collections::BTreeMap::new()
        ) {
            Ok(Ok(out)) => {
                tracing::debug!(graph = %self.graph, started = started(&out), asked = out.len(), "runs started");
                Ok(Some(out))
            }
            Ok(Err(e)) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler refused to start runs");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler did not answer a start");
                Ok(None)
            }
        }
    }

    /// Prepares runs to start at their instants (`SchedulerMsg::PrepareRuns`);
    /// `None` as for [`TriggerState::start`].
    async fn prepare(&self, runs: Vec<(Partition, u64)>) -> Res<Option<Vec<StartOutcome>>> {
        if runs.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))
        else {
            tracing::warn!(graph = %self.graph, "scheduler not running; preparations wait");
            return Ok(None);
        };
        match ractor::call_t!(s, SchedulerMsg::PrepareRuns, SCHEDULER_CALL_MS, runs) {
            Ok(Ok(out)) => {
                tracing::debug!(graph = %self.graph, prepared = started(&out), asked = out.len(), "runs prepared");
                Ok(Some(out))
            }
            Ok(Err(e)) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler refused to prepare runs");
                Ok(None)
            }
            Err(e) => {
                tracing::warn!(graph = %self.graph, error = %e, "scheduler did not answer a preparation");
                Ok(None)
            }
        }
    }

    /// Withdraws prepared runs (`SchedulerMsg::Withdraw`): for each, whether
    /// it was withdrawn. An error when the scheduler cannot be reached: the
    /// change that asked is refused, and nothing is changed.
    async fn withdraw(&self, runs: Vec<Partition>) -> Res<Result<Vec<bool>, String>> {
        if runs.is_empty() {
            return Ok(Ok(Vec::new()));
        }
        let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(self.graph.as_str()))
        else {
            return Ok(Err(format!(
                "graph {}: the scheduler is not running, so prepared runs cannot be withdrawn; try again",
                self.graph
            )));
        };
        match ractor::call_t!(s, SchedulerMsg::Withdraw, SCHEDULER_CALL_MS, runs) {
            Ok(Ok(out)) => Ok(Ok(out)),
            Ok(Err(e)) => Ok(Err(format!("graph {}: withdraw: {e}", self.graph))),
            Err(e) => Ok(Err(format!(
                "graph {}: the scheduler did not answer a withdrawal: {e}",
                self.graph
            ))),
        }
    }

    /// Withdraws the prepared runs of `keys` (those of `None`: every key)
    /// that still wait for their instants: a withdrawn key's record is as
    /// before its claim; one found begun keeps its claim as an ordinary one.
    /// Not written here: the caller flushes.
    async fn withdraw_keys(&mut self, keys: Option<&[Key]>) -> Res<Result<usize, String>> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_ref() else {
            return Ok(Ok(0));
        };
        let waiting = k.keys.waiting(now, keys);
        if waiting.is_empty() {
            return Ok(Ok(0));
        }
        let parts = waiting.iter().map(|(_, p)| p.clone()).collect();
        let answers = match self.withdraw(parts).await? {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let k = self.keyed.as_mut().expect("checked above");
        let mut n = 0;
        for ((key, p), withdrawn) in waiting.iter().zip(answers) {
            if withdrawn {
                k.keys.unprepare(key);
                n += 1;
                tracing::info!(graph = %self.graph, key = %key, partition = %p, "prepared key run withdrawn");
            } else {
                k.keys.begun(key);
            }
        }
        Ok(Ok(n))
    }

    /// Writes the key schedules that changed, in batches of at most
    /// `write_batch_max` (one durable sync each).
    async fn flush(&mut self) -> Res<()> {
        let Some(k) = self.keyed.as_mut() else {
            return Ok(());
        };
        if !k.keys.has_changes() {
            return Ok(());
        }
        let store = self.store.clone();
        let (puts, deletes) = k.keys.take_changes(|r| store.encode("key schedule", r))?;
        let graph = self.graph.to_string();
        let batch_max = self.settings.write_batch_max.max(1);
        tokio::task::spawn_blocking(move || {
            let mut puts = puts.into_iter();
            let mut deletes = deletes.into_iter();
            loop {
                let p: Vec<(String, Vec<u8>)> = puts
                    .by_ref()
                    .take(batch_max)
                    .map(|(k, v)| (sched_key(&graph, &k), v))
                    .collect();
                let d: Vec<String> = deletes
                    .by_ref()
                    .take(batch_max - p.len())
                    .map(|k| sched_key(&graph, &k))
                    .collect();
                if p.is_empty() && d.is_empty() {
                    break;
                }
                store.put_batch(&p, &d)?;
            }
            Ok::<_, StoreError>(())
        })
        .await??;
        Ok(())
    }

    async fn put<T: Serialize>(&self, key: &str, value: &T) -> Res<()> {
        let bytes = self.store.encode(key, value)?;
        let store = self.store.clone();
        let key = key.to_string();
        tokio::task::spawn_blocking(move || store.put_batch(&[(key, bytes)], &[])).await??;
        Ok(())
    }

    /// Re-arms the timer at the earliest instant something is due.
    fn arm(&mut self, myself: &ActorRef<TriggerMsg>) {
        let now = self.clock.now_ms();
        let mut at: Option<u64> = None;
        let mut consider = |t: u64| at = Some(at.map_or(t, |a| a.min(t)));
        let paused = self.paused;
        if let Some(c) = self.cron.as_ref().filter(|_| !paused) {
            if let Some(next) = c.schedule.next_after(c.record.last_firing_ms.max(now)) {
                consider(next);
            }
        }
        if let Some(next) = self.cron_to_prepare(now).filter(|_| !paused) {
            consider(next.saturating_sub(self.settings.prepare_ahead_ms));
        }
        if let Some(k) = &self.keyed {
            if !k.loading {
                consider(k.next_refresh_ms);
            }
            if let Some(t) = k.keys.next_claimable().filter(|_| !paused) {
                // Prepared ahead of the instant; keys due with no room wait
                // for a settle (or the repair).
                let t = t.saturating_sub(self.settings.prepare_ahead_ms);
                if !(self.waiting_for_room && t <= now) {
                    consider(t);
                }
            }
            if k.keys.any_leased() {
                consider(
                    self.last_repair_ms
                        .saturating_add(self.settings.repair_interval_ms),
                );
            }
        }
        if self.waiting_for_room {
            consider(now.saturating_add(self.settings.repair_interval_ms));
        }
        if let Some(t) = self.retry_at_ms {
            consider(t);
        }
        let Some(at) = at else {
            if let Some((_, t)) = self.timer.take() {
                t.abort();
            }
            return;
        };
        if let Some((armed, t)) = &self.timer {
            if *armed == at && !t.is_finished() {
                return;
            }
        }
        if let Some((_, t)) = self.timer.take() {
            t.abort();
        }
        let delay = Duration::from_millis(at.saturating_sub(now));
        self.timer = Some((at, myself.send_after(delay, || TriggerMsg::Wake)));
    }

    /// Spawns an inventory load, unless one runs; its result comes back as
    /// `InventoryLoaded`.
    fn start_load(&mut self, myself: &ActorRef<TriggerMsg>) {
        let Some(k) = self.keyed.as_mut() else {
            return;
        };
        if k.loading {
            return;
        }
        k.loading = true;
        let source = k.keys.spec.inventory.clone();
        let limits = self.settings.inventory_limits();
        let me = myself.clone();
        let graph = self.graph.clone();
        tokio::spawn(async move {
            let r = inventory::load(&source, &limits)
                .await
                .map_err(|e| format!("graph {graph}: {e}"));
            let _ = me.cast(TriggerMsg::InventoryLoaded(r));
        });
    }

    async fn inventory_loaded(&mut self, result: Result<Vec<Key>, String>) -> Res<()> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_mut() else {
            return Ok(());
        };
        let waiters = std::mem::take(&mut k.waiters);
        let refresh = k.keys.spec.refresh_ms.max(1);
        match result {
            Ok(keys) => {
                // Keys no longer listed whose prepared runs wait: withdrawn
                // first, so a removed key does not run at its instant.
                let listed: std::collections::HashSet<&Key> = keys.iter().collect();
                let removed: Vec<Key> = k
                    .keys
                    .waiting(now, None)
                    .into_iter()
                    .map(|(key, _)| key)
                    .filter(|key| !listed.contains(key))
                    .collect();
                drop(listed);
                if let Err(e) = self.withdraw_keys(Some(&removed)).await? {
                    tracing::warn!(graph = %self.graph, error = %e, keys = removed.len(), "prepared runs of keys removed from the inventory not withdrawn; they run as started ones would");
                }
                let k = self.keyed.as_mut().expect("checked above");
                let rng = &mut self.rng;
                let change = k.keys.apply_inventory(keys, now, || rng.gen());
                k.loaded_at_ms = Some(now);
                k.next_refresh_ms = now.saturating_add(refresh);
                self.flush().await?;
                let record = InventoryRecord {
                    loaded_at_ms: now,
                    keys: change.keys as u64,
                };
                self.put(&inventory_key(self.graph.as_str()), &record)
                    .await?;
                if change.added > 0 || change.removed > 0 {
                    tracing::info!(graph = %self.graph, keys = change.keys, added = change.added, removed = change.removed, "inventory changed");
                }
                let _ = self.events.send(EngineEvent::InventoryLoaded {
                    graph: self.graph.to_string(),
                    keys: change.keys,
                    added: change.added,
                    removed: change.removed,
                });
                for w in waiters {
                    let _ = w.send(Ok(change.clone()));
                }
            }
            Err(error) => {
                // A failed reload must not stop scheduled runs: the keys
                // of the last good load stay. Before any good load there
                // are none, so it is tried again sooner.
                let kept = k.keys.len();
                let retry = if k.loaded_at_ms.is_some() {
                    refresh
                } else {
                    self.settings.inventory_retry_ms.clamp(1, refresh)
                };
                k.next_refresh_ms = now.saturating_add(retry);
                tracing::error!(graph = %self.graph, error = %error, keys_kept = kept, "inventory load failed; keeping the previous keys");
                let _ = self.events.send(EngineEvent::InventoryFailed {
                    graph: self.graph.to_string(),
                    error: error.clone(),
                    keys_kept: kept,
                });
                for w in waiters {
                    let _ = w.send(Err(error.clone()));
                }
            }
        }
        Ok(())
    }

    async fn signal(&mut self, key: &Key, signal: &Signal) -> Res<Result<KeyScheduleView, String>> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_mut() else {
            return Ok(Err(format!(
                "graph {} is not keyed: signals need a keyed graph",
                self.graph
            )));
        };
        // A signal that moves a prepared run's instant takes the run back
        // first; one that finds it begun applies to a running key.
        if k.keys.signal_moves(key, signal, now).is_some() {
            if let Err(e) = self.withdraw_keys(Some(std::slice::from_ref(key))).await? {
                return Ok(Err(e));
            }
        }
        let k = self.keyed.as_mut().expect("checked above");
        let view = KeyScheduleView::from(k.keys.signal(key, signal, now));
        // Acknowledged only once durable.
        self.flush().await?;
        Ok(Ok(view))
    }

    /// Signals every key with a schedule; durable before it answers.
    async fn signal_all(&mut self, signal: &Signal) -> Res<Result<Vec<String>, String>> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_mut() else {
            return Ok(Err(format!(
                "graph {} is not keyed: signals need a keyed graph",
                self.graph
            )));
        };
        let keys = k.keys.keys();
        let moved: Vec<Key> = keys
            .iter()
            .filter(|key| k.keys.signal_moves(key, signal, now).is_some())
            .cloned()
            .collect();
        if let Err(e) = self.withdraw_keys(Some(&moved)).await? {
            return Ok(Err(e));
        }
        let k = self.keyed.as_mut().expect("checked above");
        for key in &keys {
            k.keys.signal(key, signal, now);
        }
        self.flush().await?;
        tracing::info!(graph = %self.graph, keys = keys.len(), source = %signal.source, immediate = signal.immediate, "every key signalled");
        Ok(Ok(keys.into_iter().map(|k| k.to_string()).collect()))
    }

    /// Pauses or unpauses: the record is durable before the answer.
    /// Returns whether it changed.
    async fn set_paused(&mut self, paused: bool) -> Res<Result<bool, String>> {
        if self.paused == paused {
            return Ok(Ok(false));
        }
        if paused {
            // Runs prepared for instants still ahead are taken back: a
            // paused graph starts nothing by itself. Their keys are due as
            // before and are prepared again once unpaused.
            if let Err(e) = self.withdraw_keys(None).await? {
                return Ok(Err(e));
            }
            self.flush().await?;
            let now = self.clock.now_ms();
            if let Some((at, windows)) = self.cron_prepared.clone() {
                if at > now {
                    if let Err(e) = self.withdraw(windows).await? {
                        return Ok(Err(e));
                    }
                }
                self.cron_prepared = None;
            }
        }
        let record = pause::PauseRecord {
            paused,
            changed_at_ms: self.clock.now_ms(),
        };
        self.put(&pause::pause_key(self.graph.as_str()), &record)
            .await?;
        self.paused = paused;
        tracing::info!(graph = %self.graph, paused, "graph triggers paused or unpaused");
        let _ = self.events.send(EngineEvent::GraphPaused {
            graph: self.graph.to_string(),
            paused,
        });
        Ok(Ok(true))
    }

    async fn add_backfill(
        &mut self,
        range: PartitionRange,
        order: BackfillOrder,
    ) -> Res<Result<Backfill, String>> {
        let Some(def) = self.def.clone() else {
            return Ok(Err(format!(
                "graph {} has no adopted definition",
                self.graph
            )));
        };
        // A backfill is identified by (graph, range): asking again for a
        // range that an unfinished backfill covers resumes that one. A
        // `weir run --backfill` restarted after a crash asks again every
        // time; each ask must not leak a backfill.
        let covers = |b: &Backfill| {
            let (Some(bf), Some(bt), Some(rf), Some(rt)) = (
                b.from.start_ms(),
                b.to.start_ms(),
                range.from.start_ms(),
                range.to.start_ms(),
            ) else {
                return b.from == range.from && b.to == range.to;
            };
            b.from.partitioning() == range.from.partitioning() && bf <= rf && rt <= bt
        };
        if let Some(b) = self.backfills.backfills.iter().find(|b| covers(b)) {
            tracing::info!(graph = %self.graph, backfill = b.id, range = %range, "backfill asked for again; resuming the one in progress");
            return Ok(Ok(b.clone()));
        }
        if self.backfills.backfills.len() >= self.settings.backfills_max {
            return Ok(Err(format!(
                "graph {}: {} backfills are in progress, the most allowed",
                self.graph, self.settings.backfills_max
            )));
        }
        let windows = match range.windows(def.partitioning, self.settings.backfill_windows_max) {
            Ok(w) => w.len() as u64,
            Err(e) => return Ok(Err(format!("graph {}: backfill {range}: {e}", self.graph))),
        };
        self.backfills.next_id += 1;
        let b = Backfill {
            id: self.backfills.next_id,
            from: range.from,
            to: range.to,
            order,
            windows,
            cursor: 0,
            started: 0,
            skipped: 0,
            requested_at_ms: self.clock.now_ms(),
        };
        self.backfills.backfills.push(b.clone());
        let record = self.backfills.clone();
        self.put(&backfill_key(self.graph.as_str()), &record)
            .await?;
        tracing::info!(graph = %self.graph, backfill = b.id, range = %b.range(), order = ?order, windows, "backfill asked for");
        Ok(Ok(b))
    }
}

/// The start of the window that holds `start` (a start date in the
/// middle of a window starts with that window).
fn start_window_ms(def: &GraphDef, start: u64) -> u64 {
    Partition::of_time(def.partitioning, start)
        .and_then(|p| p.start_ms())
        .unwrap_or(start)
}

/// The range a first adoption with a start date and catch-up backfills:
/// from the start date's window to the newest window closed at `now`;
/// `None` without one, or when no window from the start has closed yet.
fn start_catch_up(def: &GraphDef, now: u64) -> Option<PartitionRange> {
    let start = def.start_ms?;
    if !def.catchup {
        return None;
    }
    let from = Partition::of_time(def.partitioning, start)?;
    let to = Partition::of_time(def.partitioning, now)?.prev()?;
    (to.start_ms()? >= from.start_ms()?).then_some(PartitionRange { from, to })
}

fn started(out: &[StartOutcome]) -> usize {
    out.iter().filter(|o| o.started).count()
}

/// How an inventory source is named in errors.
pub fn describe_inventory(source: &weir_core::keyed::InventorySource) -> String {
    describe(source)
}
