//! The engine's control operations: what the HTTP API and the CLI call to
//! steer a running engine (rerun a node alone, clear a run's failures,
//! mark a node, pause a graph's triggers, trigger a graph now, signal a
//! key with a membership check, dead letters and their requeue, breakers
//! and their reset).
//!
//! Each operation is a message to the actor that owns the state it
//! changes — a graph's scheduler for nodes and runs, a graph's trigger for
//! pause and signals, the queue for dead letters, a target's breaker for
//! its state — and answers only once the change is durable. The read-only
//! ones (`is_paused`, `dead_letters`) read the store, and have store-level
//! forms in weir-actors for use with no engine running.

use ractor::ActorRef;
use serde::{Deserialize, Serialize};
use weir_core::cron::{window_due_now, Schedule};
use weir_core::graph::GraphDef;
use weir_core::names::{Key, Name};
use weir_core::partition::{Partition, Partitioning};
use weir_core::readiness::NodeStatus;
use weir_core::schedule::Signal;

use weir_actors::breaker::{self, BreakerMsg, BreakerView};
use weir_actors::done::{self, DeadLetterPage, DeadPageError};
use weir_actors::events::EngineEvent;
use weir_actors::queue::{Enqueued, QueueMsg};
use weir_actors::scheduler::records::{def_key, graph_key, parse_node_key, GraphRecord};
use weir_actors::scheduler::{MarkResult, RerunOutcome, SchedulerMsg};
use weir_actors::supervisor::{Role, SupervisorMsg};
use weir_actors::trigger::keyed::KeyScheduleView;
use weir_actors::trigger::TriggerMsg;

use crate::{Engine, EngineError, CALL_TIMEOUT};

/// What an operator marks a node as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkAs {
    /// Succeeded: its downstreams may run.
    Succeeded,
    /// Failed: its downstreams are decided as a failure decides them.
    Failed,
}

impl MarkAs {
    fn status(self) -> NodeStatus {
        match self {
            MarkAs::Succeeded => NodeStatus::Succeeded,
            MarkAs::Failed => NodeStatus::Failed,
        }
    }
}

/// What a mark did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum MarkOutcome {
    /// The node's record is now the mark (no instance of it was live).
    Marked {
        /// The run id of the mark's record.
        run_id: String,
        /// `succeeded` or `failed`.
        state: String,
    },
    /// A live instance of the node was cancelled, then the mark recorded
    /// at the next rerun count.
    CancelledAndMarked {
        /// The run id of the cancelled instance.
        cancelled: String,
        /// The run id of the mark's record.
        run_id: String,
        /// `succeeded` or `failed`.
        state: String,
    },
    /// The node's current record has that state already: nothing changed.
    Unchanged {
        /// The run id of its current record.
        run_id: String,
        /// Its state.
        state: String,
    },
}

/// What "trigger now" started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TriggerNowOutcome {
    /// The graph.
    pub graph: String,
    /// Partitions whose run this call started.
    pub started: Vec<String>,
    /// Partitions whose run existed already (nothing started).
    pub existing: Vec<String>,
    /// Keys signalled to run now (keyed graphs).
    pub keys_signalled: Vec<String>,
}

/// What a requeue of a dead letter did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum RequeueOutcome {
    /// A plain job runs again as a fresh ticket (its tries start over).
    Requeued {
        /// Its key.
        key: String,
        /// The new ticket.
        id: u64,
    },
    /// The key is live again already (requeued by someone else).
    AlreadyLive {
        /// Its key.
        key: String,
        /// Its live ticket.
        id: u64,
    },
    /// A graph node was rerun with its downstreams.
    Rerun {
        /// The dead instance's run id.
        key: String,
        /// The rerun's outcome.
        rerun: RerunOutcome,
    },
}

impl Engine {
    /// Reruns `node`; with `downstream=false` only the node itself gets a
    /// new instance: its downstreams that ran keep their records, and the
    /// ones it decided (skipped, upstream-failed) are decided again when
    /// it ends.
    pub async fn rerun_node(
        &self,
        graph: &str,
        partition: Partition,
        node: &str,
        downstream: bool,
    ) -> Result<RerunOutcome, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        ractor::call_t!(
            s,
            SchedulerMsg::RerunNode,
            CALL_TIMEOUT.as_millis() as u64,
            partition,
            node.to_string(),
            downstream
        )
        .map_err(|e| self.call_err("scheduler", e))?
        .map_err(EngineError::Graph)
    }

    /// Clear: reruns every failed node of the run (status failed) with its
    /// downstreams, so the upstream-failed nodes come back with them.
    /// Returns one outcome per failed node, in topological order.
    pub async fn clear_failed(
        &self,
        graph: &str,
        partition: Partition,
    ) -> Result<Vec<(String, RerunOutcome)>, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        ractor::call_t!(
            s,
            SchedulerMsg::ClearFailed,
            CALL_TIMEOUT.as_millis() as u64,
            partition
        )
        .map_err(|e| self.call_err("scheduler", e))?
        .map_err(EngineError::Graph)
    }

    /// Marks a node succeeded or failed (Airflow's "mark success/failed"):
    /// a live instance is cancelled, the mark is recorded at the right
    /// rerun count, the downstreams' readiness is decided again (marking
    /// an upstream succeeded lets its downstreams run), and the run
    /// settles or becomes active again accordingly.
    pub async fn mark_node(
        &self,
        graph: &str,
        partition: Partition,
        node: &str,
        mark: MarkAs,
    ) -> Result<MarkOutcome, EngineError> {
        let s = self.adopted_scheduler(graph).await?;
        let r = ractor::call_t!(
            s,
            SchedulerMsg::Mark,
            CALL_TIMEOUT.as_millis() as u64,
            partition,
            node.to_string(),
            mark.status()
        )
        .map_err(|e| self.call_err("scheduler", e))?
        .map_err(EngineError::Graph)?;
        Ok(match r {
            MarkResult::Marked {
                run_id,
                status,
                cancelled: None,
                ..
            } => MarkOutcome::Marked {
                run_id,
                state: status.to_string(),
            },
            MarkResult::Marked {
                run_id,
                status,
                cancelled: Some(cancelled),
                ..
            } => MarkOutcome::CancelledAndMarked {
                cancelled,
                run_id,
                state: status.to_string(),
            },
            MarkResult::Unchanged { run_id, status } => MarkOutcome::Unchanged {
                run_id,
                state: status.to_string(),
            },
        })
    }

    /// Pauses (true) or unpauses a graph's triggers, durably: while
    /// paused, cron firings, backfill pacing and key schedules start no
    /// run; on unpause, missed cron windows follow the graph's catch-up
    /// rule and due keys start. Explicit `start_runs` and reruns still
    /// work. Returns whether it changed.
    pub async fn set_paused(&self, graph: &str, paused: bool) -> Result<bool, EngineError> {
        let t = self.trigger(graph).await?;
        ractor::call_t!(
            t,
            TriggerMsg::SetPaused,
            CALL_TIMEOUT.as_millis() as u64,
            paused
        )
        .map_err(|e| self.call_err("trigger", e))?
        .map_err(EngineError::Graph)
    }

    /// Whether a graph is paused (from the store; with no engine running,
    /// use [`weir_actors::trigger::paused`]).
    pub fn is_paused(&self, graph: &str) -> Result<bool, EngineError> {
        Ok(weir_actors::trigger::paused(&self.store, graph)?)
    }

    /// Triggers a graph now: a time-partitioned graph starts the run of
    /// its newest closed window (the window its latest cron firing
    /// started; without cron, the last whole window before now); a keyed
    /// graph makes every key due now (an immediate signal with source
    /// `trigger`, which starts once the graph is unpaused if it is
    /// paused); an unpartitioned graph starts its `none` run. A run that
    /// exists is reported, not started again.
    pub async fn trigger_now(&self, graph: &str) -> Result<TriggerNowOutcome, EngineError> {
        let def = self.adopted_def(graph)?;
        let mut out = TriggerNowOutcome {
            graph: graph.to_string(),
            started: Vec::new(),
            existing: Vec::new(),
            keys_signalled: Vec::new(),
        };
        if def.partitioning == Partitioning::Keyed {
            let t = self.trigger(graph).await?;
            let signal = Signal {
                source: "trigger".into(),
                received_at_ms: None,
                immediate: true,
            };
            out.keys_signalled = ractor::call_t!(
                t,
                TriggerMsg::SignalAll,
                CALL_TIMEOUT.as_millis() as u64,
                signal
            )
            .map_err(|e| self.call_err("trigger", e))?
            .map_err(EngineError::Graph)?;
            tracing::info!(
                graph,
                keys = out.keys_signalled.len(),
                "graph triggered now"
            );
            return Ok(out);
        }
        let schedule = def
            .cron
            .as_deref()
            .map(Schedule::parse)
            .transpose()
            .map_err(|e| EngineError::BadGraph(format!("graph {graph:?}: cron: {e}")))?
            .map(|s| s.in_zone(def.zone()));
        let now = self.now_ms();
        let partition = window_due_now(def.partitioning, schedule.as_ref(), now, def.zone())
            .ok_or_else(|| {
                EngineError::Graph(format!(
                    "graph {graph:?}: no {:?} window has closed before now",
                    def.partitioning
                ))
            })?;
        for o in self.start_runs(graph, vec![partition]).await? {
            if o.started {
                out.started.push(o.partition);
            } else {
                out.existing.push(o.partition);
            }
        }
        tracing::info!(graph, started = ?out.started, existing = ?out.existing, "graph triggered now");
        Ok(out)
    }

    /// Signals `key` of keyed graph `graph`, checking membership: a key
    /// the graph's inventory does not list is refused, naming the graph
    /// and the key, unless `add` is true (then it gets a schedule, until
    /// an inventory load that does not list it).
    pub async fn signal_key(
        &self,
        graph: &str,
        key: &str,
        source: &str,
        immediate: bool,
        add: bool,
    ) -> Result<KeyScheduleView, EngineError> {
        let key = Key::new(key)
            .map_err(|e| EngineError::Graph(format!("graph {graph:?}: signal: {e}")))?;
        let signal = Signal {
            source: source.to_string(),
            received_at_ms: None,
            immediate,
        };
        let t = self.trigger(graph).await?;
        t.call(
            |reply| TriggerMsg::SignalKey {
                key,
                signal,
                add,
                reply,
            },
            Some(CALL_TIMEOUT),
        )
        .await
        .map_err(|e| self.call_err("trigger", e))?
        .success_or(self.call_err("trigger", "no answer"))?
        .map_err(EngineError::Graph)
    }

    /// Dead letters: tickets whose tries are spent (they ended failed),
    /// newest first, `limit` a page (at most [`done::DEAD_PAGE_MAX`]),
    /// after `cursor` (from the page before). With no engine running, use
    /// [`weir_actors::done::dead_letters`].
    pub fn dead_letters(
        &self,
        limit: usize,
        cursor: Option<&str>,
    ) -> Result<DeadLetterPage, EngineError> {
        done::dead_letters(&self.store, limit, cursor).map_err(|e| match e {
            DeadPageError::Store(e) => EngineError::Store(e),
            e @ DeadPageError::Cursor(_) => EngineError::Graph(e.to_string()),
        })
    }

    /// Requeues one dead letter: a plain job runs again (a fresh ticket
    /// with its original task, pool, target, payload and policy; its tries
    /// start over); a graph node is rerun with its downstreams. An unknown
    /// key is an error naming it.
    pub async fn requeue_dead(&self, key: &str) -> Result<RequeueOutcome, EngineError> {
        let store = self.store.clone();
        let k = key.to_string();
        let record = tokio::task::spawn_blocking(move || done::dead_record(&store, &k))
            .await
            .map_err(|e| EngineError::Settings(format!("dead letter read panicked: {e}")))??
            .ok_or_else(|| EngineError::NotFound(format!("no dead letter has the key {key:?}")))?;
        if record.is_graph_node() {
            // A mapped node's member is requeued as a rerun of its node,
            // which runs the members that did not succeed.
            let (id, _member) = parse_node_key(key).ok_or_else(|| {
                EngineError::Graph(format!("dead letter {key:?} is not a graph node's run id"))
            })?;
            let partition: Partition = id
                .partition
                .parse()
                .map_err(|e| EngineError::Graph(format!("dead letter {key:?}: partition: {e}")))?;
            let rerun = self.rerun(&id.graph, partition, &id.node).await?;
            if matches!(rerun, RerunOutcome::Submitted(_) | RerunOutcome::Active(_)) {
                // The scheduler drops the letters of the records a rerun
                // supersedes; this one may be older than the node's
                // current record.
                let store = self.store.clone();
                let dk = done::dead_key(key);
                tokio::task::spawn_blocking(move || store.put_batch(&[], &[dk]))
                    .await
                    .map_err(|e| {
                        EngineError::Settings(format!("dead letter delete panicked: {e}"))
                    })??;
                tracing::info!(key, rerun = ?rerun, "dead graph node requeued as a rerun");
                let _ = self.events.send(EngineEvent::DeadRequeued {
                    key: key.to_string(),
                });
            }
            return Ok(RequeueOutcome::Rerun {
                key: key.to_string(),
                rerun,
            });
        }
        let queue = self.live_queue()?;
        let r = ractor::call_t!(
            queue,
            QueueMsg::RequeueDead,
            CALL_TIMEOUT.as_millis() as u64,
            key.to_string()
        )
        .map_err(|e| self.call_err("queue", e))?
        .map_err(EngineError::Graph)?;
        Ok(match r {
            Enqueued::New(id) => RequeueOutcome::Requeued {
                key: key.to_string(),
                id,
            },
            Enqueued::Live(id) => RequeueOutcome::AlreadyLive {
                key: key.to_string(),
                id,
            },
            Enqueued::Done => {
                return Err(EngineError::Graph(format!(
                    "dead letter {key:?}: the requeue found the key done"
                )))
            }
        })
    }

    /// Requeues every dead letter, newest first; one answer per letter.
    pub async fn requeue_all_dead(
        &self,
    ) -> Result<Vec<(String, Result<RequeueOutcome, String>)>, EngineError> {
        let mut keys = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.dead_letters(done::DEAD_PAGE_MAX, cursor.as_deref())?;
            keys.extend(page.letters.into_iter().map(|l| l.key));
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let r = self.requeue_dead(&key).await.map_err(|e| e.to_string());
            out.push((key, r));
        }
        Ok(out)
    }

    /// Every breaker that has state, persisted or live, by target: state,
    /// since, consecutive failures, when it opened, its cooldown. With no
    /// engine running, use [`weir_actors::breaker::persisted`].
    pub async fn breakers(&self) -> Result<Vec<BreakerView>, EngineError> {
        let mut by_target: std::collections::BTreeMap<String, BreakerView> =
            breaker::persisted(&self.store)?
                .into_iter()
                .map(|v| (v.target.clone(), v))
                .collect();
        for (role, cell) in self.children().await? {
            let Role::Breaker(target) = role else {
                continue;
            };
            let b = ActorRef::<BreakerMsg>::from(cell);
            // A breaker stopping now is left as persisted.
            if let Ok(live) = ractor::call_t!(b, BreakerMsg::Get, CALL_TIMEOUT.as_millis() as u64) {
                by_target.insert(target.to_string(), BreakerView::of(&target, &live));
            }
        }
        Ok(by_target.into_values().collect())
    }

    /// Resets a target's breaker to closed, durably, and emits its
    /// `Breaker` event. A target no ticket has used (no breaker, live or
    /// persisted) is an error naming it.
    pub async fn reset_breaker(&self, target: &str) -> Result<BreakerView, EngineError> {
        Name::new(target).map_err(|e| EngineError::Graph(format!("target {target:?}: {e}")))?;
        let b = match ActorRef::<BreakerMsg>::where_is(self.names.breaker(target)) {
            Some(b) => b,
            None => {
                if !self.store.contains(&breaker::breaker_key(target))? {
                    return Err(EngineError::NotFound(format!(
                        "target {target:?} has no breaker: no ticket has used it"
                    )));
                }
                ractor::call_t!(
                    self.supervisor,
                    SupervisorMsg::EnsureBreaker,
                    CALL_TIMEOUT.as_millis() as u64,
                    std::sync::Arc::from(target)
                )
                .map_err(|e| self.call_err("supervisor", e))?
                .ok_or_else(|| {
                    EngineError::Stopped(format!("the breaker of target {target:?} did not start"))
                })?
            }
        };
        let reset = ractor::call_t!(b, BreakerMsg::Reset, CALL_TIMEOUT.as_millis() as u64)
            .map_err(|e| self.call_err("breaker", e))?;
        Ok(BreakerView::of(target, &reset))
    }

    /// The adopted definition of `graph`.
    fn adopted_def(&self, graph: &str) -> Result<GraphDef, EngineError> {
        let no = || EngineError::NotFound(format!("graph {graph:?} has no adopted definition"));
        let record: GraphRecord = self.store.get(&graph_key(graph))?.ok_or_else(no)?;
        self.store.get(&def_key(&record.definition))?.ok_or_else(no)
    }

    fn live_queue(&self) -> Result<ActorRef<QueueMsg>, EngineError> {
        if let Some(e) = self.error() {
            return Err(EngineError::Stopped(e));
        }
        ActorRef::<QueueMsg>::where_is(self.names.queue()).ok_or_else(|| EngineError::Call {
            actor: "queue",
            why: "not running (restarting?)".into(),
        })
    }
}
