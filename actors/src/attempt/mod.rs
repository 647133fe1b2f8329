//! What running an attempt needs on the engine's side, shared by the local
//! pool actor and the engine's proxy of a remote pool: the breakers asked
//! before an attempt and told after it, and the outputs read for and kept
//! from it. No actor lives here.

pub mod breakers;
pub mod ended;
pub mod outputs;
