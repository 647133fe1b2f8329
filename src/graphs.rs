//! The engine's graph API: adopt definitions, start, rerun and cancel runs,
//! and read them.

use std::collections::BTreeMap;
use std::time::Duration;

use ractor::ActorRef;
use serde::{Deserialize, Serialize};
use weir_core::graph::{Graph, GraphDef};
use weir_core::names::Name;
use weir_core::partition::Partition;

use weir_actors::scheduler::records::{def_key, graph_key, GraphRecord, RunState};
use weir_actors::scheduler::view::{self, GraphRunView, RunSummary};
use weir_actors::scheduler::{ReconcileReport, RerunOutcome, SchedulerMsg, StartOutcome};
use weir_actors::supervisor::SupervisorMsg;

use crate::{Engine, EngineError, CALL_TIMEOUT};

/// What adopting a definition did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdoptOutcome {
    /// The graph.
    pub graph: String,
    /// The definition's content hash.
    pub hash: String,
    /// Whether it replaced another definition (or was the first).
    pub changed: bool,
}

impl Engine {
    /// Validates a definition against this engine (pools, tasks), stores it
    /// by content hash and makes it current for its graph. Adopting the same
    /// content again changes nothing; runs keep the definition they started
    /// with.
    pub async fn adopt(&self, def: GraphDef) -> Result<AdoptOutcome, EngineError> {
        let graph: Graph = def
            .validate()
            .map_err(|e| EngineError::BadGraph(e.to_string()))?;
        let name = graph.name().to_string();
        for node in graph.nodes() {
            if !self.pools.contains_key(node.pool.as_str()) {
                return Err(EngineError::BadGraph(format!(
                    "graph {name:?}: node {:?}: pool {:?} is not a pool of this engine",
                    node.name.as_str(),
                    node.pool.as_str()
                )));
            }
            if self.tasks.find(node.task.task.as_str()).is_none() {
                return Err(EngineError::BadGraph(format!(
                    "graph {name:?}: node {:?}: no task is registered under the name {:?}",
                    node.name.as_str(),
                    node.task.task.as_str()
                )));
            }
        }
        for (field, spec) in [
            ("on_failure", &graph.def().on_failure),
            ("on_success", &graph.def().on_success),
        ] {
            let Some(spec) = spec else { continue };
            if self.tasks.find(spec.task.as_str()).is_none() {
                return Err(EngineError::BadGraph(format!(
                    "graph {name:?}: {field}: no task is registered under the name {:?}",
                    spec.task.as_str()
                )));
            }
            // Notifications run in the pool `default`.
            if !self.pools.contains_key(weir_core::graph::POOL_DEFAULT) {
                return Err(EngineError::BadGraph(format!(
                    "graph {name:?}: {field}: notifications run in the pool \"default\", which this engine does not have"
                )));
            }
        }
        // An asset has one producer across the adopted graphs (swale's
        // rule): a second graph producing it is refused, naming the first.
        for node in graph.nodes() {
            for asset in &node.produces {
                for other in self.assets()? {
                    if other.asset != asset.as_str() {
                        continue;
                    }
                    if let Some(p) = other.producers.iter().find(|p| p.graph != name) {
                        return Err(EngineError::BadGraph(format!(
                            "graph {name:?}: node {:?}: produces: asset {:?} is produced by graph {:?} (node {:?}): an asset has one producer",
                            node.name.as_str(),
                            asset.as_str(),
                            p.graph,
                            p.node
                        )));
                    }
                }
            }
        }
        // A keyed graph whose inventory does not load is refused here, so
        // nothing is adopted that could not schedule.
        let keys = self.check_inventory(&graph).await?;
        let hash = graph.hash().to_string();
        let store = self.store.clone();
        let def = graph.def().clone();
        let (h, n) = (hash.clone(), name.clone());
        let now = self.now_ms();
        let changed = tokio::task::spawn_blocking(move || -> Result<bool, EngineError> {
            if !store.contains(&def_key(&h))? {
                let bytes = store.encode("definition", &def)?;
                store.put_batch(&[(def_key(&h), bytes)], &[])?;
            }
            let key = graph_key(&n);
            loop {
                let current = store.get_raw(&key)?;
                if let Some(bytes) = &current {
                    let record: GraphRecord = weir_core::codec::decode(bytes)
                        .map_err(|e| EngineError::BadGraph(format!("graph record {key}: {e}")))?;
                    if record.definition == h {
                        return Ok(false);
                    }
                }
                let record = GraphRecord {
                    definition: h.clone(),
                    adopted_at_ms: now,
                };
                // The history entry goes first: a crash before the record
                // leaves an entry for an adopt that a retry repeats (same
                // key, same value), never a current hash missing from it.
                let hist = store.encode("graph history", &h)?;
                store.put_batch(&[(crate::serve::views::history_key(&n, now), hist)], &[])?;
                let bytes = store.encode("graph record", &record)?;
                if store.compare_and_put(&key, current.as_deref(), Some(&bytes), &[], &[])? {
                    return Ok(true);
                }
            }
        })
        .await
        .map_err(|e| EngineError::Settings(format!("adopt panicked: {e}")))??;
        let scheduler = self.scheduler(&name).await?;
        if changed {
            let _ = scheduler.cast(SchedulerMsg::Adopted(hash.clone()));
            tracing::info!(graph = %name, definition = %hash, "definition adopted");
        }
        self.ensure_trigger(&graph, keys).await?;
        if changed && !graph.def().trigger_assets.is_empty() {
            // A consumer adopted now starts on what is pending.
            if let Some(a) =
                ActorRef::<weir_actors::assets::AssetsMsg>::where_is(self.names.assets())
            {
                let _ = a.cast(weir_actors::assets::AssetsMsg::Deliver);
            }
        }
        Ok(AdoptOutcome {
            graph: name,
            hash,
            changed,
        })
    }

    /// The scheduler of `graph`, started if needed.
    async fn scheduler(&self, graph: &str) -> Result<ActorRef<SchedulerMsg>, EngineError> {
        if let Some(s) = ActorRef::<SchedulerMsg>::where_is(self.names.scheduler(graph)) {
            return Ok(s);
        }
        let name = Name::new(graph).map_err(|e| EngineError::BadGraph(e.to_string()))?;
        ractor::call_t!(
            self.supervisor,
            SupervisorMsg::EnsureScheduler,
            CALL_TIMEOUT.as_millis() as u64,
            name
        )
        .map_err(|e| self.call_err("supervisor", e))?
        .map_err(EngineError::Stopped)
    }

    pub(crate) async fn adopted_scheduler(
        &self,
        graph: &str,
    ) -> Result<ActorRef<SchedulerMsg>, EngineError> {
        if !self.store.contains(&graph_key(graph))? {
            return Err(EngineError::NotFound(format!(
                "graph {graph:?} has no adopted definition"
            )));
        }
        self.scheduler(graph).await
    }

    /// Starts the runs of `graph` for `partitions` (at most once each),
    /// with the definition's params.
    pub async fn start_runs(
        &self,
        graph: &str,
        partitions: Vec<Partition>,
    ) -> Result<Vec<StartOutcome>, EngineError> {
        self.start_runs_with(graph, partitions, BTreeMap::new())
            .await
    }

    /// Starts the runs of `graph` for `partitions` (at most once each),
    /// with `params` over the definition's defaults. A name the definition
    /// does not declare refuses the whole start ([`EngineError::BadParam`]);
    /// a run that exists already keeps the params it started with.
    pub async fn start_runs_with(
        &self,
        graph: &str,
        partitions: Vec<Partition>,
        params: BTreeMap<String, String>,
    ) -> Result<Vec<StartOutcome>, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        ractor::call_t!(
            s,
            SchedulerMsg::StartRuns,
            CALL_TIMEOUT.as_millis() as u64,
            partitions,
            params
        )
        .map_err(|e| self.call_err("scheduler", e))?
        .map_err(|e| {
            // The scheduler words a refused param as weir-core's params
            // module does.
            if e.starts_with("param ") {
                EngineError::BadParam(e)
            } else {
                EngineError::Graph(e)
            }
        })
    }

    /// Starts one run.
    pub async fn start_run(
        &self,
        graph: &str,
        partition: Partition,
    ) -> Result<StartOutcome, EngineError> {
        let mut out = self.start_runs(graph, vec![partition]).await?;
        Ok(out.pop().expect("one outcome per partition"))
    }

    /// Reruns `node` of a run, with its rerun scope (swale's semantics).
    pub async fn rerun(
        &self,
        graph: &str,
        partition: Partition,
        node: &str,
    ) -> Result<RerunOutcome, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        ractor::call_t!(
            s,
            SchedulerMsg::Rerun,
            CALL_TIMEOUT.as_millis() as u64,
            partition,
            node.to_string()
        )
        .map_err(|e| self.call_err("scheduler", e))?
        .map_err(EngineError::Graph)
    }

    /// Cancels a run: `false` when it is not active.
    pub async fn cancel_run(&self, graph: &str, partition: Partition) -> Result<bool, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        ractor::call_t!(
            s,
            SchedulerMsg::CancelRun,
            CALL_TIMEOUT.as_millis() as u64,
            partition
        )
        .map_err(|e| self.call_err("scheduler", e))?
        .map_err(EngineError::Graph)
    }

    /// One reconciler pass now over the active run of `partition` only
    /// (`None`: every active run of the graph), answered with its report.
    pub async fn reconcile_now(
        &self,
        graph: &str,
        partition: Option<Partition>,
    ) -> Result<ReconcileReport, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        s.call(
            |port| SchedulerMsg::ReconcileNow(partition, port),
            Some(CALL_TIMEOUT),
        )
        .await
        .map_err(|e| self.call_err("scheduler", e))?
        .success_or(self.call_err("scheduler", "no answer"))
    }

    /// One reconciler pass now.
    pub async fn reconcile(&self, graph: &str) -> Result<ReconcileReport, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        s.call(
            |port| SchedulerMsg::Reconcile(Some(port)),
            Some(CALL_TIMEOUT),
        )
        .await
        .map_err(|e| self.call_err("scheduler", e))?
        .success_or(self.call_err("scheduler", "no answer"))
    }

    /// A run with its nodes' states.
    pub fn graph_run(
        &self,
        graph: &str,
        partition: &Partition,
    ) -> Result<Option<GraphRunView>, EngineError> {
        Ok(view::graph_run(&self.store, graph, partition)?)
    }

    /// The runs of a graph, optionally in one state.
    pub fn list_runs(
        &self,
        graph: &str,
        state: Option<RunState>,
    ) -> Result<Vec<RunSummary>, EngineError> {
        Ok(view::list_runs(&self.store, graph, state)?)
    }

    /// Waits until the runs of `graph` for `partitions` have settled;
    /// returns their states in order.
    pub async fn wait_settled(
        &self,
        graph: &str,
        partitions: &[Partition],
        timeout: Duration,
    ) -> Result<Vec<RunState>, EngineError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.error() {
                return Err(EngineError::Stopped(e));
            }
            let mut states = Vec::with_capacity(partitions.len());
            for p in partitions {
                let s = self
                    .store
                    .get::<weir_actors::scheduler::records::GraphRunRecord>(
                        &weir_actors::scheduler::records::run_key(graph, p),
                    )?
                    .map(|r| r.state);
                states.push(s);
            }
            if states
                .iter()
                .all(|s| s.is_some_and(|s| s != RunState::Active))
            {
                return Ok(states.into_iter().flatten().collect());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EngineError::Timeout(timeout, "graph runs to settle"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
