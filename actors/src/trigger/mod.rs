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
//! (`RunSettled`), routed to it by the engine's [`settled`] hub and
//! forwarded by a task it owns; a lagged subscription is repaired the same
//! way. It wakes at the earliest instant something is
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

mod due;
mod firing;
mod loads;
mod requests;
mod settings;
pub mod settled;
mod state;
mod timer;

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::broadcast;
use weir_core::names::Name;

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::names::Names;
use crate::store::Store;
use settled::{Settled, SettledHub};

// The trigger's interface lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::trigger::{TriggerMsg, TriggerStatus};
use backfill::{backfill_key, BackfillRecord};
pub use settings::{TriggerSettings, SCHEDULER_CALL_MS};
pub use state::{describe_inventory, needed, TriggerState};

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
    pub events: EventSender,
    /// The engine's settles, by graph.
    pub settled: Arc<SettledHub>,
    /// Settings.
    pub settings: TriggerSettings,
}

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
        let rx = args.settled.subscribe(args.graph.as_str());
        let mut state = TriggerState {
            owner: format!("trigger:{}", args.graph),
            rng: args.clock.rng(&format!("trigger:{}", args.graph)),
            graph: args.graph,
            names: args.names,
            store: args.store,
            clock: args.clock,
            events: args.events,
            settings: args.settings,
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
            state.forwarder = Some(tokio::spawn(async move {
                loop {
                    let msg = match rx.recv().await {
                        Ok(Settled::Run { partition, state }) => {
                            TriggerMsg::Settled { partition, state }
                        }
                        Ok(Settled::Lagged) | Err(broadcast::error::RecvError::Lagged(_)) => {
                            TriggerMsg::EventsLagged
                        }
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
                        "graph {}: key {key:?} is not in the graph's inventory (signal it with --add, or \"add\": true in the API, to schedule it anyway)",
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
