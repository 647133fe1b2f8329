//! The breakers a pool (or a remote pool's proxy) asks before an attempt
//! and tells after it: found by name, spawned by the supervisor on first
//! use, cached.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::ActorRef;
use weir_core::breaker::Admit;
use weir_core::queue::TicketId;
use weir_core::retry::AttemptOutcome;

use crate::msg::breaker::BreakerMsg;
use crate::msg::supervisor::SupervisorMsg;
use crate::names::Names;

/// How long a pool waits for its breaker's answer before it defers.
pub const BREAKER_CALL_MS: u64 = 5_000;

/// How long a ticket waits when its breaker could not be asked.
pub const BREAKER_UNREACHABLE_DEFER_MS: u64 = 250;

/// The breakers a pool asks before an attempt and tells after it; found
/// by name, spawned by the supervisor on first use, cached.
pub struct Breakers {
    names: Names,
    supervisor: Option<ActorRef<SupervisorMsg>>,
    cache: HashMap<Arc<str>, ActorRef<BreakerMsg>>,
}

impl Breakers {
    /// The breakers of an engine.
    pub fn new(names: Names, supervisor: Option<ActorRef<SupervisorMsg>>) -> Self {
        Breakers {
            names,
            supervisor,
            cache: HashMap::new(),
        }
    }

    async fn find(&mut self, target: &Arc<str>) -> Option<ActorRef<BreakerMsg>> {
        if let Some(b) = self.cache.get(target) {
            if b.get_status() == ractor::ActorStatus::Running {
                return Some(b.clone());
            }
        }
        let found = match ActorRef::<BreakerMsg>::where_is(self.names.breaker(target)) {
            Some(b) => Some(b),
            None => match &self.supervisor {
                Some(sup) => ractor::call_t!(
                    sup,
                    SupervisorMsg::EnsureBreaker,
                    BREAKER_CALL_MS,
                    target.clone()
                )
                .ok()
                .flatten(),
                None => None,
            },
        };
        if let Some(b) = &found {
            self.cache.insert(target.clone(), b.clone());
        }
        found
    }

    /// Asks `target`'s breaker whether ticket `id` may run now: `None` if
    /// it may, else until when it is deferred (the breaker's open window,
    /// or a short wait when the breaker could not be asked).
    pub async fn admit(&mut self, target: &Arc<str>, id: TicketId, now_ms: u64) -> Option<u64> {
        let admit = match self.find(target).await {
            Some(b) => ractor::call_t!(b, BreakerMsg::Admit, BREAKER_CALL_MS).ok(),
            None => None,
        };
        match admit {
            Some(Admit::Allowed) | Some(Admit::Probe) => None,
            Some(Admit::Denied { until_ms }) => Some(until_ms),
            None => {
                tracing::warn!(target = %target, id, "breaker unreachable; deferring");
                Some(now_ms + BREAKER_UNREACHABLE_DEFER_MS)
            }
        }
    }

    /// Tells `target`'s breaker how an attempt ended. A permanent failure
    /// is the input's fault, not the target's; a sensor's check that was
    /// not met found the target answering.
    pub fn record(&self, target: &Arc<str>, outcome: AttemptOutcome) {
        if let Some(b) = self.cache.get(target) {
            let failed = matches!(outcome, AttemptOutcome::Retryable | AttemptOutcome::Timeout);
            let _ = b.cast(BreakerMsg::Record { failed });
        }
    }
}
