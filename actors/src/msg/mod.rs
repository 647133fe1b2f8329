//! Every message that crosses between actors, in one place: each actor's
//! message enum (its whole interface), the replies its queries answer
//! with, and the values that travel between actors (grants, reports,
//! completions, notices, views). An actor file imports these, the store,
//! events, the clock, names and weir-core, never another actor's file;
//! the supervisor alone knows every actor type, because it spawns them.
//!
//! What crosses processes is serialisable (serde) and travels inside the
//! wire types of [`crate::protocol`], which carry the version check.

pub mod assets;
pub mod breaker;
pub mod cluster;
pub mod pool;
pub mod queue;
pub mod scheduler;
pub mod supervisor;
pub mod trigger;
pub mod work;
