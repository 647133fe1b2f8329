//! The assets actor's interface.

use ractor::RpcReplyPort;

/// Messages of the assets actor.
pub enum AssetsMsg {
    /// A producer succeeded, or a definition was adopted: deliver what is
    /// pending.
    Deliver,
    /// Deliver now and answer with the events delivered.
    Pass(RpcReplyPort<usize>),
    /// Fault injection, for tests only: while held, no event is delivered
    /// (they stay in the store), as if the engine had stopped between a
    /// producer's success and its consumers' starts.
    Hold(bool),
}

impl ractor::Message for AssetsMsg {}
