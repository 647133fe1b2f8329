//! weir-actors: the ractor actors of weir and its sled store.
