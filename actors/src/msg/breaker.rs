//! A target's breaker's interface.

use ractor::RpcReplyPort;
use weir_core::breaker::{Admit, Breaker};

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
    /// An operator's reset to closed; answered once persisted.
    Reset(RpcReplyPort<Breaker>),
    /// Fault injection, for tests only: the handler panics, so the
    /// supervisor sees the actor fail exactly as it would on a bug.
    Panic,
}

impl ractor::Message for BreakerMsg {}
