//! The engine's trigger API: signals, backfills, key schedules and
//! inventory reloads. Each goes to the graph's trigger actor
//! (`weir_actors::trigger`), which is started for a graph on its first
//! adopt with cron or keys, or on its first backfill.

use ractor::ActorRef;
use weir_core::graph::Graph;
use weir_core::names::{Key, Name};
use weir_core::partition::{PartitionRange, Partitioning};
use weir_core::schedule::Signal;

use weir_actors::scheduler::records::graph_key;
use weir_actors::supervisor::SupervisorMsg;
use weir_actors::trigger::backfill::{Backfill, BackfillOrder};
use weir_actors::trigger::inventory;
use weir_actors::trigger::keyed::{InventoryChange, KeyScheduleView};
use weir_actors::trigger::{TriggerMsg, TriggerStatus};

use crate::{Engine, EngineError, CALL_TIMEOUT};

impl Engine {
    /// Signals `key` of keyed graph `graph`: with `immediate` it is due at
    /// once, else after the graph's debounce delay (trailing), no later
    /// than its max wait after the first signal of the window. Returns the
    /// key's schedule once the change is durable.
    pub async fn signal(
        &self,
        graph: &str,
        key: &str,
        source: &str,
        immediate: bool,
    ) -> Result<KeyScheduleView, EngineError> {
        let key = Key::new(key)
            .map_err(|e| EngineError::Graph(format!("graph {graph:?}: signal: {e}")))?;
        let signal = Signal {
            source: source.to_string(),
            received_at_ms: None,
            immediate,
        };
        let t = self.trigger(graph).await?;
        ractor::call_t!(
            t,
            TriggerMsg::Signal,
            CALL_TIMEOUT.as_millis() as u64,
            key,
            signal
        )
        .map_err(|e| self.call_err("trigger", e))?
        .map_err(EngineError::Graph)
    }

    /// Signals every key of keyed graph `graph` at once (one instant for
    /// all, one durable write): each is due as [`Engine::signal`] would
    /// make it. Returns the keys signalled.
    pub async fn signal_all(
        &self,
        graph: &str,
        source: &str,
        immediate: bool,
    ) -> Result<Vec<String>, EngineError> {
        let signal = Signal {
            source: source.to_string(),
            received_at_ms: None,
            immediate,
        };
        let t = self.trigger(graph).await?;
        ractor::call_t!(
            t,
            TriggerMsg::SignalAll,
            CALL_TIMEOUT.as_millis() as u64,
            signal
        )
        .map_err(|e| self.call_err("trigger", e))?
        .map_err(EngineError::Graph)
    }

    /// Starts the runs of every window of `range`, oldest or newest first,
    /// never more than the graph's `max_active_runs` active at once.
    /// Windows whose run exists are skipped. Returns the backfill as
    /// recorded (durably); it proceeds in the background.
    pub async fn backfill(
        &self,
        graph: &str,
        range: PartitionRange,
        order: BackfillOrder,
    ) -> Result<Backfill, EngineError> {
        let t = self.trigger(graph).await?;
        ractor::call_t!(
            t,
            TriggerMsg::Backfill,
            CALL_TIMEOUT.as_millis() as u64,
            range,
            order
        )
        .map_err(|e| self.call_err("trigger", e))?
        .map_err(EngineError::Graph)
    }

    /// Every key's schedule of keyed graph `graph`, by key.
    pub async fn schedules(&self, graph: &str) -> Result<Vec<KeyScheduleView>, EngineError> {
        let t = self.trigger(graph).await?;
        ractor::call_t!(t, TriggerMsg::Schedules, CALL_TIMEOUT.as_millis() as u64)
            .map_err(|e| self.call_err("trigger", e))
    }

    /// Reloads the inventory of keyed graph `graph` now; returns what
    /// changed, or why the load failed (the previous keys are then kept).
    pub async fn reload_inventory(&self, graph: &str) -> Result<InventoryChange, EngineError> {
        let t = self.trigger(graph).await?;
        ractor::call_t!(
            t,
            TriggerMsg::ReloadInventory,
            CALL_TIMEOUT.as_millis() as u64
        )
        .map_err(|e| self.call_err("trigger", e))?
        .map_err(EngineError::Graph)
    }

    /// The trigger's state: last cron firing, waiting windows, backfills
    /// in progress, key count.
    pub async fn trigger_status(&self, graph: &str) -> Result<TriggerStatus, EngineError> {
        let t = self.trigger(graph).await?;
        ractor::call_t!(t, TriggerMsg::Status, CALL_TIMEOUT.as_millis() as u64)
            .map_err(|e| self.call_err("trigger", e))
    }

    /// The trigger of an adopted graph, started if needed.
    pub(crate) async fn trigger(&self, graph: &str) -> Result<ActorRef<TriggerMsg>, EngineError> {
        if let Some(t) = ActorRef::<TriggerMsg>::where_is(self.names.trigger(graph)) {
            return Ok(t);
        }
        if !self.store.contains(&graph_key(graph))? {
            return Err(EngineError::NotFound(format!(
                "graph {graph:?} has no adopted definition"
            )));
        }
        self.ensure_trigger_named(graph).await
    }

    /// Starts the triggers held at open ([`crate::EngineBuilder::hold_triggers`]):
    /// every stored graph's with cron, keys or a backfill that is not
    /// running. Returns how many it started; with none held, 0.
    pub async fn start_triggers(&self) -> Result<usize, EngineError> {
        let n = ractor::call_t!(
            self.supervisor,
            SupervisorMsg::StartTriggers,
            CALL_TIMEOUT.as_millis() as u64
        )
        .map_err(|e| self.call_err("supervisor", e))?
        .map_err(EngineError::Stopped)?;
        tracing::info!(started = n, "held triggers started");
        Ok(n)
    }

    async fn ensure_trigger_named(&self, graph: &str) -> Result<ActorRef<TriggerMsg>, EngineError> {
        let name = Name::new(graph).map_err(|e| EngineError::BadGraph(e.to_string()))?;
        ractor::call_t!(
            self.supervisor,
            SupervisorMsg::EnsureTrigger,
            CALL_TIMEOUT.as_millis() as u64,
            name
        )
        .map_err(|e| self.call_err("supervisor", e))?
        .map_err(EngineError::Stopped)
    }

    /// After an adopt: starts the graph's trigger when it has cron or keys,
    /// and tells a running one to reread its definition. `keys`, the
    /// inventory [`Engine::check_inventory`] loaded, are applied before
    /// this returns, so a keyed graph's keys have schedules once adopted.
    pub(crate) async fn ensure_trigger(
        &self,
        graph: &Graph,
        keys: Option<Vec<Key>>,
    ) -> Result<(), EngineError> {
        let def = graph.def();
        let name = graph.name().as_str();
        let running = ActorRef::<TriggerMsg>::where_is(self.names.trigger(name)).is_some();
        if def.cron.is_some() || def.keyed.is_some() || running {
            let t = self.ensure_trigger_named(name).await?;
            if let Some(keys) = keys {
                ractor::call_t!(
                    t,
                    TriggerMsg::ApplyInventory,
                    CALL_TIMEOUT.as_millis() as u64,
                    keys
                )
                .map_err(|e| self.call_err("trigger", e))?
                .map_err(EngineError::Graph)?;
            }
        }
        Ok(())
    }

    /// Before an adopt: a keyed graph's inventory must load (the first
    /// load must succeed). The error names the graph and the source.
    /// Returns the keys (`None` for a graph without an inventory).
    pub(crate) async fn check_inventory(
        &self,
        graph: &Graph,
    ) -> Result<Option<Vec<Key>>, EngineError> {
        let Some(keyed) = &graph.def().keyed else {
            return Ok(None);
        };
        debug_assert_eq!(graph.def().partitioning, Partitioning::Keyed);
        let limits = self.trigger_limits();
        inventory::load(&keyed.inventory, &limits)
            .await
            .map(Some)
            .map_err(|e| {
                EngineError::BadGraph(format!(
                    "graph {:?}: the first inventory load failed: {e}",
                    graph.name().as_str()
                ))
            })
    }

    fn trigger_limits(&self) -> inventory::InventoryLimits {
        self.trigger_settings.inventory_limits()
    }
}
