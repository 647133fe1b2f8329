//! The breaker actor: one per target, spawned on the first ticket for it.
//!
//! It owns weir-core's [`Breaker`] for its target and persists its state
//! on every transition (under `breaker/<target>`), so a restart, of the
//! actor or of the process, keeps an open breaker open. An operator's
//! reset ([`BreakerMsg::Reset`]) is a transition like the others: closed,
//! persisted before it is answered, announced as a `Breaker` event.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use serde::{Deserialize, Serialize};
use weir_core::breaker::{Breaker, BreakerSettings, BreakerState, Transition};

use crate::clock::Clock;
use crate::event_channel::EventSender;
use crate::events::EngineEvent;
// The breaker's interface lives in `msg`; re-exported here for the crate's users.
pub use crate::msg::breaker::BreakerMsg;
use crate::store::{Store, StoreError};

/// The prefix of breaker records.
pub const BREAKER_PREFIX: &str = "breaker/";

/// The record key of a target's breaker.
pub fn breaker_key(target: &str) -> String {
    format!("{BREAKER_PREFIX}{target}")
}

/// A breaker as an operator sees it (served as JSON as is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BreakerView {
    /// The target it guards.
    pub target: String,
    /// `closed`, `open` or `half_open`.
    pub state: String,
    /// When it entered that state, if it ever changed state.
    pub since_ms: Option<u64>,
    /// Failures since the last success (closed only; 0 otherwise).
    pub consecutive_failures: u32,
    /// When it opened (open only).
    pub opened_at_ms: Option<u64>,
    /// Until when it denies (open only): then the first call is a probe.
    pub open_until_ms: Option<u64>,
    /// How long it stays open once tripped.
    pub cooldown_ms: u64,
}

impl BreakerView {
    /// The view of `breaker`, the breaker of `target`.
    pub fn of(target: &str, breaker: &Breaker) -> Self {
        let (consecutive_failures, opened_at_ms, open_until_ms) = match &breaker.state {
            BreakerState::Closed {
                consecutive_failures,
                ..
            } => (*consecutive_failures, None, None),
            BreakerState::Open { since_ms, until_ms } => (0, Some(*since_ms), Some(*until_ms)),
            BreakerState::HalfOpen { .. } => (0, None, None),
        };
        BreakerView {
            target: target.to_string(),
            state: breaker.state_name().to_string(),
            since_ms: breaker.changed_at_ms,
            consecutive_failures,
            opened_at_ms,
            open_until_ms,
            cooldown_ms: breaker.settings.cooldown_ms,
        }
    }
}

/// Every persisted breaker, by target: readable with no engine running. A
/// breaker persists on its first transition; a live one that never changed
/// state is only in its actor.
pub fn persisted(store: &Store) -> Result<Vec<BreakerView>, StoreError> {
    Ok(store
        .scan::<Breaker>(BREAKER_PREFIX)?
        .into_iter()
        .map(|(key, b)| BreakerView::of(&key[BREAKER_PREFIX.len()..], &b))
        .collect())
}

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
    pub events: EventSender,
}

/// Its state.
pub struct BreakerActorState {
    target: Arc<str>,
    breaker: Breaker,
    store: Store,
    clock: Clock,
    events: EventSender,
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
        let (state, changed_at_ms) = stored
            .map(|b| (b.state, b.changed_at_ms))
            .unwrap_or_default();
        let breaker = Breaker {
            settings: args.settings,
            state,
            changed_at_ms,
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
            BreakerMsg::Reset(reply) => {
                let from = state.breaker.state_name();
                let t = state.breaker.reset(now);
                tracing::info!(target = %state.target, from, "breaker reset by an operator");
                state.persist(t).await?;
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
        crate::blocking::run(move || store.put_batch(&[(key, bytes)], &[])).await??;
        let name = self.breaker.state_name();
        tracing::info!(target = %self.target, ?transition, state = name, "breaker transition");
        let _ = self.events.send(EngineEvent::Breaker {
            target: self.target.clone(),
            state: name.to_string(),
        });
        Ok(())
    }
}
