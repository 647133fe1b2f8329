//! The assets actor: delivers materializations to the graphs that start
//! on them.
//!
//! A node with `produces = [...]` that succeeds writes one
//! materialization record per asset (`assetev/…`) in the same atomic
//! batch as its done record ([`records`]); nothing is acted on before it
//! is durable. This actor then delivers each: for every adopted graph
//! whose `[trigger] assets` names the asset (and that is not paused), it
//! starts the runs of the partitions the materialization falls in
//! ([`weir_core::asset::consumer_partitions`]) through that graph's
//! scheduler, which makes them durable before it answers; then it writes
//! the asset's record (its last materialization) and deletes the event in
//! one batch. A crash anywhere in between leaves the event, which the
//! next pass delivers again: a run exists at most once per (graph,
//! partition), so that starts nothing twice and loses no start.
//!
//! Passes run when a scheduler says a producer succeeded
//! ([`AssetsMsg::Deliver`]), after an adopt, at start, and every
//! `pass_interval_ms` (which covers a lost message). A consumer whose
//! scheduler cannot be reached keeps the event for the next pass; a
//! materialization that maps to no partition of a consumer (see
//! `weir_core::asset`) is logged with the reason and not retried.
//!
//! Messages: schedulers and the engine only cast to this actor, and it
//! calls schedulers, so no cycle of calls exists.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::{Deserialize, Serialize};
use weir_core::graph::GraphDef;
use weir_core::partition::{Partition, Partitioning};
use weir_core::zone::Zone;

use crate::event_channel::EventSender;
use crate::events::EngineEvent;
use crate::names::Names;
// The actor's interface lives in `msg`, its records in `records` and its
// view in `views`; re-exported here for the crate's users.
pub use crate::msg::assets::AssetsMsg;
use crate::msg::scheduler::SchedulerMsg;
pub use crate::records::asset as records;
use crate::records::asset::{asset_key, AssetEvent, AssetRecord, ASSET_EVENT_PREFIX};
use crate::records::graph::GraphRecord;
use crate::records::keys::{def_key, parse_run_id, GRAPH_PREFIX};
use crate::records::pause::paused;
use crate::store::{Store, StoreError};
pub use crate::views::asset as view;

/// How long a pass waits for a consumer's scheduler to start runs.
pub const START_CALL_MS: u64 = 60_000;

/// Settings of the assets actor. Every limit explicit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AssetsSettings {
    /// Time between passes when nothing asks for one.
    pub pass_interval_ms: u64,
    /// Events delivered in one pass at most (a pass with more asks for
    /// the next at once).
    pub events_per_pass_max: usize,
}

impl Default for AssetsSettings {
    fn default() -> Self {
        AssetsSettings {
            pass_interval_ms: 5_000,
            events_per_pass_max: 1_000,
        }
    }
}

/// The assets actor.
pub struct AssetsActor;

/// What it needs to start.
pub struct AssetsArgs {
    /// Engine names.
    pub names: Names,
    /// The store.
    pub store: Store,
    /// Engine events.
    pub events: EventSender,
    /// Settings.
    pub settings: AssetsSettings,
}

/// Its state.
pub struct AssetsState {
    names: Names,
    store: Store,
    events: EventSender,
    settings: AssetsSettings,
    held: bool,
    /// Definitions read, by hash.
    defs: HashMap<String, Arc<GraphDef>>,
    /// Each adopted graph's zone, as of the last scan of consumers: a
    /// producer's partition is a window in its own zone.
    zones: HashMap<String, Zone>,
    myself: Option<ActorRef<AssetsMsg>>,
}

impl Actor for AssetsActor {
    type Msg = AssetsMsg;
    type State = AssetsState;
    type Arguments = AssetsArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<AssetsMsg>,
        args: AssetsArgs,
    ) -> Result<AssetsState, ActorProcessingErr> {
        Ok(AssetsState {
            names: args.names,
            store: args.store,
            events: args.events,
            settings: args.settings,
            zones: HashMap::new(),
            held: false,
            defs: HashMap::new(),
            myself: None,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<AssetsMsg>,
        state: &mut AssetsState,
    ) -> Result<(), ActorProcessingErr> {
        state.myself = Some(myself.clone());
        // What a crash left undelivered goes out at once.
        let _ = myself.cast(AssetsMsg::Deliver);
        let every = Duration::from_millis(state.settings.pass_interval_ms.max(1));
        myself.send_interval(every, || AssetsMsg::Deliver);
        Ok(())
    }

    async fn handle(
        &self,
        _myself: ActorRef<AssetsMsg>,
        msg: AssetsMsg,
        state: &mut AssetsState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            AssetsMsg::Deliver => {
                state.pass().await?;
            }
            AssetsMsg::Pass(reply) => {
                let n = state.pass().await?;
                let _ = reply.send(n);
            }
            AssetsMsg::Hold(held) => {
                tracing::warn!(held, "asset deliveries held (fault injection)");
                state.held = held;
            }
        }
        Ok(())
    }
}

type Res<T> = Result<T, ActorProcessingErr>;

/// What a materialization does to a consumer's run that exists.
enum Refresh {
    /// It read the materialization (or was cancelled): nothing.
    NotNeeded,
    /// It is active and started before it: asked again at the next pass.
    Waits,
    /// It was rerun from its roots.
    Done,
}

/// A graph that starts on assets.
struct Consumer {
    graph: String,
    partitioning: Partitioning,
    zone: Zone,
    /// Its nodes without upstreams: what a refresh reruns.
    roots: Vec<String>,
}

impl AssetsState {
    /// Every adopted graph that starts on an asset, by asset.
    fn consumers(&mut self) -> Result<BTreeMap<String, Vec<Consumer>>, StoreError> {
        let mut out: BTreeMap<String, Vec<Consumer>> = BTreeMap::new();
        for (key, record) in self.store.scan::<GraphRecord>(GRAPH_PREFIX)? {
            let graph = key[GRAPH_PREFIX.len()..].to_string();
            let def = match self.defs.get(&record.definition) {
                Some(d) => d.clone(),
                None => {
                    let Some(d) = self.store.get::<GraphDef>(&def_key(&record.definition))? else {
                        continue;
                    };
                    let d = Arc::new(d);
                    self.defs.insert(record.definition.clone(), d.clone());
                    d
                }
            };
            self.zones.insert(graph.clone(), def.zone());
            for a in &def.trigger_assets {
                out.entry(a.to_string()).or_default().push(Consumer {
                    graph: graph.clone(),
                    partitioning: def.partitioning,
                    zone: def.zone(),
                    roots: def
                        .nodes
                        .iter()
                        .filter(|n| n.upstreams.is_empty())
                        .map(|n| n.name.to_string())
                        .collect(),
                });
            }
        }
        Ok(out)
    }

    /// One delivery pass; returns the events delivered.
    async fn pass(&mut self) -> Res<usize> {
        if self.held {
            return Ok(0);
        }
        let store = self.store.clone();
        let max = self.settings.events_per_pass_max.max(1);
        let pending: Vec<(String, AssetEvent)> = crate::blocking::run(move || {
            store.scan::<AssetEvent>(ASSET_EVENT_PREFIX).map(|mut v| {
                v.truncate(max);
                v
            })
        })
        .await??;
        if pending.is_empty() {
            return Ok(0);
        }
        let full = pending.len() == max;
        let consumers = self.consumers()?;
        let mut delivered = 0;
        for (key, event) in pending {
            if self.deliver(&key, &event, &consumers).await? {
                delivered += 1;
            }
        }
        if full {
            if let Some(me) = &self.myself {
                let _ = me.cast(AssetsMsg::Deliver);
            }
        }
        Ok(delivered)
    }

    /// Delivers one event to every consumer; `true` when it is done with
    /// (its record written and the event deleted), `false` when a consumer
    /// could not be reached and it stays for the next pass.
    async fn deliver(
        &mut self,
        key: &str,
        event: &AssetEvent,
        consumers: &BTreeMap<String, Vec<Consumer>>,
    ) -> Res<bool> {
        let Some(id) = parse_run_id(&event.key) else {
            tracing::warn!(key, producer = %event.key, "asset event names no task instance; dropped");
            self.finish(key, event, None, Vec::new()).await?;
            return Ok(true);
        };
        let Ok(partition) = id.partition.parse::<Partition>() else {
            tracing::warn!(key, partition = %id.partition, "asset event's partition does not parse; dropped");
            self.finish(key, event, None, Vec::new()).await?;
            return Ok(true);
        };
        let _ = self.events.send(EngineEvent::AssetMaterialized {
            asset: event.asset.clone(),
            graph: id.graph.clone(),
            node: id.node.clone(),
            partition: id.partition.clone(),
        });
        let mut triggered = Vec::new();
        let mut all = true;
        for c in consumers.get(&event.asset).into_iter().flatten() {
            if paused(&self.store, &c.graph)? {
                tracing::info!(asset = %event.asset, graph = %c.graph, partition = %partition, "consumer paused: the materialization starts no run of it");
                continue;
            }
            let producer_zone = self.zones.get(&id.graph).copied().unwrap_or_default();
            let partitions = match weir_core::asset::consumer_partitions(
                &partition,
                producer_zone,
                c.partitioning,
                c.zone,
            ) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(asset = %event.asset, graph = %c.graph, error = %e, "materialization starts no run of its consumer");
                    continue;
                }
            };
            let Some(scheduler) =
                ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(&c.graph))
            else {
                tracing::warn!(asset = %event.asset, graph = %c.graph, "consumer's scheduler is not running; the materialization waits for the next pass");
                all = false;
                continue;
            };
            let answer = ractor::call_t!(
                scheduler,
                SchedulerMsg::StartRuns,
                START_CALL_MS,
                partitions,
                BTreeMap::new()
            );
            match answer {
                Ok(Ok(outcomes)) => {
                    for o in outcomes {
                        if !o.started {
                            // The run exists: it may have read the asset
                            // before this materialization (a week's run,
                            // started by its first day). Refreshed then.
                            match self.refresh(&scheduler, c, &o.partition, event).await? {
                                Refresh::Waits => all = false,
                                Refresh::Done => {
                                    triggered
                                        .push(format!("{}/{} (refreshed)", c.graph, o.partition));
                                    continue;
                                }
                                Refresh::NotNeeded => {}
                            }
                        }
                        tracing::info!(asset = %event.asset, producer = %event.key, graph = %c.graph, partition = %o.partition, started = o.started, "asset triggered a run");
                        let _ = self.events.send(EngineEvent::AssetTriggered {
                            asset: event.asset.clone(),
                            graph: c.graph.clone(),
                            partition: o.partition.clone(),
                            started: o.started,
                        });
                        triggered.push(format!("{}/{}", c.graph, o.partition));
                    }
                }
                Ok(Err(e)) => {
                    // Refused (a definition the consumer's scheduler cannot
                    // load): asking again gives the same answer.
                    tracing::warn!(asset = %event.asset, graph = %c.graph, error = %e, "consumer refused the start");
                }
                Err(e) => {
                    tracing::warn!(asset = %event.asset, graph = %c.graph, error = %e, "consumer's scheduler did not answer; the materialization waits for the next pass");
                    all = false;
                }
            }
        }
        if !all {
            return Ok(false);
        }
        self.finish(key, event, Some(&id), triggered).await?;
        Ok(true)
    }

    /// Refreshes the consumer's existing run of `partition` if it started
    /// before `event`'s materialization (Dagster's behaviour: a week's run
    /// re-reads its days): rerun from its roots once it has settled; while
    /// it is active the event waits for the next pass. A run that started
    /// after the materialization read it; a cancelled one stays cancelled.
    async fn refresh(
        &self,
        scheduler: &ActorRef<SchedulerMsg>,
        c: &Consumer,
        partition: &str,
        event: &AssetEvent,
    ) -> Res<Refresh> {
        let Ok(p) = partition.parse::<Partition>() else {
            return Ok(Refresh::NotNeeded);
        };
        let key = crate::records::keys::run_key(&c.graph, &p);
        let Some(run) = self
            .store
            .get::<crate::records::graph::GraphRunRecord>(&key)?
        else {
            return Ok(Refresh::NotNeeded);
        };
        use crate::records::graph::RunState;
        if run.started_ms() >= event.at_ms {
            return Ok(Refresh::NotNeeded);
        }
        match run.state {
            RunState::Active => return Ok(Refresh::Waits),
            RunState::Cancelled | RunState::Withdrawn => return Ok(Refresh::NotNeeded),
            RunState::Complete | RunState::Failed => {}
        }
        for root in &c.roots {
            let answer = ractor::call_t!(
                scheduler,
                SchedulerMsg::RerunNode,
                START_CALL_MS,
                p.clone(),
                root.clone(),
                true
            );
            match answer {
                Ok(Ok(o)) => {
                    tracing::info!(asset = %event.asset, producer = %event.key, graph = %c.graph, partition, node = %root, outcome = ?o, "asset refreshed a run it started before")
                }
                Ok(Err(e)) => {
                    tracing::warn!(asset = %event.asset, graph = %c.graph, partition, error = %e, "consumer refused the refresh");
                }
                Err(e) => {
                    tracing::warn!(asset = %event.asset, graph = %c.graph, error = %e, "consumer's scheduler did not answer; the refresh waits for the next pass");
                    return Ok(Refresh::Waits);
                }
            }
        }
        let _ = self.events.send(EngineEvent::AssetTriggered {
            asset: event.asset.clone(),
            graph: c.graph.clone(),
            partition: partition.to_string(),
            started: true,
        });
        Ok(Refresh::Done)
    }

    /// Writes the asset's record and deletes the event, in one batch.
    async fn finish(
        &self,
        key: &str,
        event: &AssetEvent,
        id: Option<&crate::records::keys::RunId>,
        triggered: Vec<String>,
    ) -> Res<()> {
        let mut puts = Vec::new();
        if let Some(id) = id {
            let count = self
                .store
                .get::<AssetRecord>(&asset_key(&event.asset))?
                .map_or(0, |r| r.count);
            let record = AssetRecord {
                asset: event.asset.clone(),
                graph: id.graph.clone(),
                node: id.node.clone(),
                partition: id.partition.clone(),
                rerun: id.rerun,
                at_ms: event.at_ms,
                count: count + 1,
                triggered,
            };
            puts.push((
                asset_key(&event.asset),
                self.store.encode("asset record", &record)?,
            ));
        }
        let store = self.store.clone();
        let deletes = vec![key.to_string()];
        crate::blocking::run(move || store.put_batch(&puts, &deletes)).await??;
        tracing::debug!(key, "asset event delivered");
        Ok(())
    }
}
