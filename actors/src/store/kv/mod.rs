//! The ordered key-value trees the store is written on: sled's, or a
//! [`MemoryStore`] held in the process.
//!
//! Every tree, batch and transaction of the store goes through the types
//! here, which offer the part of sled's API the store uses with sled's
//! semantics (batches and transactions are atomic, a transaction reads its
//! own writes, iterators are ordered by key and double-ended), so the
//! store's code is the same over both. The engine runs on sled; a
//! simulation (`weir simulate`) runs the same engine on memory, where half
//! of its time went to sled's copy-on-write pages and the hand-off of its
//! log buffers to I/O threads at every atomic batch. A memory store
//! outlives the store opened on it: the simulation reopens it, as a
//! restarted engine reopens its files.

mod batch;
mod memory;
mod transaction;
mod tree;

pub use batch::Batch;
pub use memory::{MemIter, MemTree, MemoryStore};
pub use sled::IVec;
pub use transaction::{transaction2, transaction3, transaction5, MemTx, Tx5, TxTree};
pub use tree::{Iter, Tree};

pub(crate) use tree::prefix_end;

/// The database the trees are opened in.
pub(crate) enum Db {
    Sled(sled::Db),
    Memory(MemoryStore),
}

impl Db {
    /// The tree `name`, created when missing.
    pub(crate) fn open_tree(&self, name: &str) -> sled::Result<Tree> {
        match self {
            Db::Sled(db) => db.open_tree(name).map(Tree::Sled),
            Db::Memory(m) => Ok(Tree::Memory(m.open_tree(name))),
        }
    }

    /// Writes what is buffered to the files (sled); nothing to do in
    /// memory.
    pub(crate) fn flush(&self) -> sled::Result<usize> {
        match self {
            Db::Sled(db) => db.flush(),
            Db::Memory(_) => Ok(0),
        }
    }

    /// Bytes the database takes: sled's files, or the keys and values
    /// held in memory.
    pub(crate) fn size_on_disk(&self) -> sled::Result<u64> {
        match self {
            Db::Sled(db) => db.size_on_disk(),
            Db::Memory(m) => Ok(m.bytes()),
        }
    }

    /// The sled database, when it is one.
    pub(crate) fn as_sled(&self) -> Option<&sled::Db> {
        match self {
            Db::Sled(db) => Some(db),
            Db::Memory(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
