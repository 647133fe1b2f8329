//! A trigger's state: the graph's adopted definition, its cron position,
//! its key schedules and backfills, its timer; and the helpers its
//! concerns share.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{ActorProcessingErr, RpcReplyPort};
use rand::rngs::SmallRng;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use weir_core::cron::Schedule;
use weir_core::graph::GraphDef;
use weir_core::names::Name;
use weir_core::partition::{Partition, PartitionRange};

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::msg::scheduler::StartOutcome;
use crate::msg::trigger::{BackfillOrder, InventoryChange, TriggerMsg, TriggerStatus};
use crate::names::Names;
use crate::records::graph::GraphRecord;
use crate::records::keys::{def_key, graph_key};
use crate::store::{Store, StoreError};

use super::backfill::{backfill_key, BackfillRecord};
use super::cron::{cron_key, CronRecord};
use super::inventory::describe;
use super::keyed::{inventory_key, sched_prefix, InventoryRecord, KeyRecord, Keyed};
use super::settings::TriggerSettings;
use super::settled::Settled;

pub(super) struct CronState {
    pub(super) schedule: Schedule,
    pub(super) catchup: bool,
    pub(super) record: CronRecord,
}

pub(super) struct KeyedState {
    pub(super) keys: Keyed,
    /// Whether an inventory has ever loaded.
    pub(super) loaded_at_ms: Option<u64>,
    pub(super) next_refresh_ms: u64,
    pub(super) loading: bool,
    pub(super) waiters: Vec<RpcReplyPort<Result<InventoryChange, String>>>,
}

/// The wake timer's handle.
pub(super) type TimerHandle = JoinHandle<Result<(), ractor::MessagingErr<TriggerMsg>>>;

/// The trigger's state.
pub struct TriggerState {
    pub(super) graph: Name,
    pub(super) names: Names,
    pub(super) store: Store,
    pub(super) clock: Clock,
    pub(super) events: EventSender,
    pub(super) settings: TriggerSettings,
    pub(super) rng: SmallRng,
    /// The lease owner of this graph's claims. Stable across restarts, so
    /// a restarted trigger completes the leases its predecessor took.
    pub(super) owner: String,
    pub(super) def: Option<Arc<GraphDef>>,
    pub(super) cron: Option<CronState>,
    pub(super) backfills: BackfillRecord,
    /// Windows of each backfill in start order, computed once.
    pub(super) windows: HashMap<u64, Arc<Vec<weir_core::partition::Partition>>>,
    pub(super) keyed: Option<KeyedState>,
    pub(super) rx: Option<broadcast::Receiver<Settled>>,
    pub(super) forwarder: Option<JoinHandle<()>>,
    pub(super) timer: Option<(u64, TimerHandle)>,
    pub(super) wake_queued: bool,
    pub(super) last_repair_ms: u64,
    pub(super) repair_now: bool,
    pub(super) retry_at_ms: Option<u64>,
    /// Starts wait for room under max_active_runs.
    pub(super) waiting_for_room: bool,
    /// Paused: nothing starts by itself ([`pause`]).
    pub(super) paused: bool,
    /// The cron firing whose windows are prepared, and those windows (a
    /// preparation is idempotent per partition, so a restart that forgets
    /// this prepares them again, as a no-op).
    pub(super) cron_prepared: Option<(u64, Vec<Partition>)>,
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

pub(super) fn adopted_def(store: &Store, graph: &str) -> Result<Option<GraphDef>, StoreError> {
    let Some(record) = store.get::<GraphRecord>(&graph_key(graph))? else {
        return Ok(None);
    };
    store.get::<GraphDef>(&def_key(&record.definition))
}

pub(super) type Res<T> = Result<T, ActorProcessingErr>;

impl TriggerState {
    /// Rereads the adopted definition and sets up cron and keyed state.
    pub(super) async fn configure(&mut self) -> Res<()> {
        let store = self.store.clone();
        let graph = self.graph.to_string();
        let def = crate::blocking::run(move || adopted_def(&store, &graph)).await??;
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
                    .map_err(|e| format!("graph {}: cron: {e}", self.graph))?
                    .in_zone(def.zone());
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
                let (records, inv) = crate::blocking::run(move || {
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
        let replaced = self.def.as_deref().is_some_and(|old| *old != def);
        self.def = Some(Arc::new(def));
        if replaced {
            // Runs prepared ahead under the old definition are taken back
            // and prepared again under the new one, at the instants it
            // gives (a cron moved from 02:00 to 03:00 starts its window at
            // 03:00, under the new hash). One the scheduler refuses goes
            // ahead under the definition it was prepared with, as a run
            // that started before the change does.
            match self.withdraw_prepared().await? {
                Ok(()) => {
                    tracing::info!(graph = %self.graph, "runs prepared under the replaced definition withdrawn")
                }
                Err(e) => {
                    tracing::warn!(graph = %self.graph, error = %e, "runs prepared under the replaced definition not all withdrawn")
                }
            }
        }
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

    pub(super) fn status(&self) -> TriggerStatus {
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
}

/// The start of the window that holds `start` (a start date in the
/// middle of a window starts with that window).
pub(super) fn start_window_ms(def: &GraphDef, start: u64) -> u64 {
    Partition::of_time(def.partitioning, start, def.zone())
        .and_then(|p| p.start_ms(def.zone()))
        .unwrap_or(start)
}

/// The range a first adoption with a start date and catch-up backfills:
/// from the start date's window to the newest window closed at `now`;
/// `None` without one, or when no window from the start has closed yet.
pub(super) fn start_catch_up(def: &GraphDef, now: u64) -> Option<PartitionRange> {
    let start = def.start_ms?;
    if !def.catchup {
        return None;
    }
    let z = def.zone();
    let from = Partition::of_time(def.partitioning, start, z)?;
    let to = Partition::of_time(def.partitioning, now, z)?.prev(z)?;
    (to.start_ms(z)? >= from.start_ms(z)?).then_some(PartitionRange { from, to })
}

pub(super) fn started(out: &[StartOutcome]) -> usize {
    out.iter().filter(|o| o.started).count()
}

/// How an inventory source is named in errors.
pub fn describe_inventory(source: &weir_core::keyed::InventorySource) -> String {
    describe(source)
}
