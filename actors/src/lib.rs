//! weir-actors: the ractor actors of weir and its sled store.
//!
//! `store` is the durable half (journal, snapshots, records, expiry);
//! the actors journal weir-core's decisions through it and apply them.

pub mod store;
