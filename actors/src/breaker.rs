//! The breaker actor: one per target, spawned on the first ticket for it.
//!
//! It owns weir-core's [`Breaker`] for its target and persists its state
//! on every transition (under `breaker/<target>`), so a restart, of the
//! actor or of the process, keeps an open breaker open.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::broadcast;
use weir_core::breaker::{Admit, Breaker, BreakerSettings, BreakerState, Transition};

use crate::clock::Clock;
use crate::events::EngineEvent;
use crate::store::Store;

/// The record key of a target's breaker.
pub fn breaker_key(target: &str) -> String {
    format!("breaker/{target}")
}

/// Messages of the breaker actor.
pub enum BreakerMsg {
    /// May a call start now?
    Admit(RpcReplyPort<Admit>),
    /// A call ended.
    Record {
        /// Whether it failed.
        failed: bool,
    },
    /// The breaker as it is.
    Get(RpcReplyPort<Breaker>),
    /// Fault injection, for tests only: the handler panics, so the
    /// supervisor sees the actor fail exactly as it would on a bug.
    Panic,
}

impl ractor::Message for BreakerMsg {}

/// The breaker actor.
pub struct BreakerActor;

/// What it needs to start.
pub struct BreakerArgs {
    /// Its target.
    pub target: Arc<str>,
    /// Its settings.
    pub settings: BreakerSettings,
    /// The store its state persists in.
    pub store: Store,
    /// The clock.
    pub clock: Clock,
    /// Engine events.
    pub events: broadcast::Sender<EngineEvent>,
}

/// Its state.
pub struct BreakerActorState {
    target: Arc<str>,
    breaker: Breaker,
    store: Store,
    clock: Clock,
    events: broadcast::Sender<EngineEvent>,
}

impl Actor for BreakerActor {
    type Msg = BreakerMsg;
    type State = BreakerActorState;
    type Arguments = BreakerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<BreakerMsg>,
        args: BreakerArgs,
    ) -> Result<BreakerActorState, ActorProcessingErr> {
        let stored: Option<Breaker> = args.store.get(&breaker_key(&args.target))?;
        // The stored state, under the settings configured now.
        let breaker = Breaker {
            settings: args.settings,
            state: stored.map(|b| b.state).unwrap_or_default(),
        };
        tracing::info!(target = %args.target, state = ?breaker.state, "breaker started");
        Ok(BreakerActorState {
            target: args.target,
            breaker,
            store: args.store,
            clock: args.clock,
            events: args.events,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<BreakerMsg>,
        msg: BreakerMsg,
        state: &mut BreakerActorState,
    ) -> Result<(), ActorProcessingErr> {
        let now = state.clock.now_ms();
        match msg {
            BreakerMsg::Admit(reply) => {
                let (admit, transition) = state.breaker.admit(now);
                if let Some(t) = transition {
                    state.persist(t).await?;
                }
                let _ = reply.send(admit);
            }
            BreakerMsg::Record { failed } => {
                if let Some(t) = state.breaker.record(now, failed) {
                    state.persist(t).await?;
                }
            }
            BreakerMsg::Get(reply) => {
                let _ = reply.send(state.breaker.clone());
            }
            BreakerMsg::Panic => panic!("breaker {}: fault injected by a test", state.target),
        }
        Ok(())
    }
}

impl BreakerActorState {
    async fn persist(&mut self, transition: Transition) -> Result<(), ActorProcessingErr> {
        let bytes = self.store.encode("breaker state", &self.breaker)?;
        let store = self.store.clone();
        let key = breaker_key(&self.target);
        tokio::task::spawn_blocking(move || store.put_batch(&[(key, bytes)], &[])).await??;
        let name = match self.breaker.state {
            BreakerState::Closed { .. } => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        };
        tracing::info!(target = %self.target, ?transition, state = name, "breaker transition");
        let _ = self.events.send(EngineEvent::Breaker {
            target: self.target.clone(),
            state: name.to_string(),
        });
        Ok(())
    }
}
