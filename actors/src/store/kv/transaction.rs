//! Transactions over several trees: sled's, or one lock of a
//! [`MemoryStore`](super::MemoryStore) with the writes buffered until the
//! closure returns `Ok` (an abort or an error applies none of them). A
//! transaction reads its own writes, as sled's does. sled may run the
//! closure again after a conflict; memory runs it once.

use std::cell::RefCell;
use std::collections::BTreeMap;

use sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionError,
    TransactionResult, TransactionalTree, UnabortableTransactionError,
};
use sled::{IVec, Transactional};

use super::batch::Batch;
use super::memory::{MemDb, MemTree};
use super::tree::Tree;

/// A tree inside a transaction.
#[derive(Clone, Copy)]
pub enum TxTree<'a> {
    /// sled's.
    Sled(&'a TransactionalTree),
    /// A memory tree's, by its index in the store.
    Memory(&'a MemTx<'a>, usize),
}

/// The state of a memory transaction: the store as it was when it began
/// (locked) and the writes made since, by key in each tree (indexed as the
/// store's trees are).
pub struct MemTx<'a> {
    db: &'a MemDb,
    writes: RefCell<Vec<BTreeMap<IVec, Option<IVec>>>>,
}

type TxResult<T> = Result<T, UnabortableTransactionError>;

impl TxTree<'_> {
    /// The value of `key`, the transaction's own writes included.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> TxResult<Option<IVec>> {
        match self {
            TxTree::Sled(t) => t.get(key),
            TxTree::Memory(tx, idx) => {
                let key = key.as_ref();
                if let Some(w) = tx.writes.borrow()[*idx].get(key) {
                    return Ok(w.clone());
                }
                Ok(tx.db.trees[*idx].get(key).cloned())
            }
        }
    }

    /// Sets `key` to `value`; returns the value it had.
    pub fn insert<K, V>(&self, key: K, value: V) -> TxResult<Option<IVec>>
    where
        K: AsRef<[u8]> + Into<IVec>,
        V: Into<IVec>,
    {
        match self {
            TxTree::Sled(t) => t.insert(key, value),
            TxTree::Memory(tx, idx) => {
                let old = self.get(key.as_ref())?;
                tx.writes.borrow_mut()[*idx].insert(key.into(), Some(value.into()));
                Ok(old)
            }
        }
    }

    /// Removes `key`; returns the value it had.
    pub fn remove<K>(&self, key: K) -> TxResult<Option<IVec>>
    where
        K: AsRef<[u8]> + Into<IVec>,
    {
        match self {
            TxTree::Sled(t) => t.remove(key),
            TxTree::Memory(tx, idx) => {
                let old = self.get(key.as_ref())?;
                tx.writes.borrow_mut()[*idx].insert(key.into(), None);
                Ok(old)
            }
        }
    }

    /// Applies every change of `batch`.
    pub fn apply_batch(&self, batch: &Batch) -> TxResult<()> {
        match self {
            // As sled's own `apply_batch` does, without a batch of its own.
            TxTree::Sled(t) => {
                for (k, v) in batch.writes() {
                    match v {
                        Some(v) => t.insert(k, v)?,
                        None => t.remove(k)?,
                    };
                }
                Ok(())
            }
            TxTree::Memory(tx, idx) => {
                let mut writes = tx.writes.borrow_mut();
                for (k, v) in batch.writes() {
                    writes[*idx].insert(k.clone(), v.clone());
                }
                Ok(())
            }
        }
    }
}

/// The error of a transaction over trees of different stores.
fn mixed() -> sled::Error {
    sled::Error::Unsupported("a transaction over trees of different stores".into())
}

/// Runs `f` over memory trees that must share one store.
fn memory<A, E, const N: usize>(
    trees: [&MemTree; N],
    f: impl FnOnce([TxTree<'_>; N]) -> ConflictableTransactionResult<A, E>,
) -> TransactionResult<A, E> {
    let store = &trees[0].store;
    if trees.iter().any(|t| !t.store.same(store)) {
        return Err(TransactionError::Storage(mixed()));
    }
    let mut db = store.lock();
    let (result, writes) = {
        let tx = MemTx {
            db: &db,
            writes: RefCell::new(vec![BTreeMap::new(); db.trees.len()]),
        };
        let views = trees.map(|t| TxTree::Memory(&tx, t.idx));
        let result = f(views);
        (result, tx.writes.into_inner())
    };
    match result {
        Ok(a) => {
            for (idx, tree) in writes.into_iter().enumerate() {
                for (k, v) in tree {
                    db.write(idx, k, v);
                }
            }
            Ok(a)
        }
        Err(ConflictableTransactionError::Abort(e)) => Err(TransactionError::Abort(e)),
        Err(ConflictableTransactionError::Storage(e)) => Err(TransactionError::Storage(e)),
        // Nothing else holds the lock: a memory transaction cannot conflict.
        Err(ConflictableTransactionError::Conflict) => Err(TransactionError::Storage(
            sled::Error::ReportableBug("a memory transaction reported a conflict".into()),
        )),
    }
}

/// A transaction over two trees.
pub fn transaction2<A, E, F>(trees: (&Tree, &Tree), f: F) -> TransactionResult<A, E>
where
    F: for<'a> Fn(&(TxTree<'a>, TxTree<'a>)) -> ConflictableTransactionResult<A, E>,
{
    match trees {
        (Tree::Sled(a), Tree::Sled(b)) => {
            (a, b).transaction(|(a, b)| f(&(TxTree::Sled(a), TxTree::Sled(b))))
        }
        (Tree::Memory(a), Tree::Memory(b)) => memory([a, b], |[a, b]| f(&(a, b))),
        _ => Err(TransactionError::Storage(mixed())),
    }
}

/// A transaction over three trees.
pub fn transaction3<A, E, F>(trees: (&Tree, &Tree, &Tree), f: F) -> TransactionResult<A, E>
where
    F: for<'a> Fn(&(TxTree<'a>, TxTree<'a>, TxTree<'a>)) -> ConflictableTransactionResult<A, E>,
{
    match trees {
        (Tree::Sled(a), Tree::Sled(b), Tree::Sled(c)) => (a, b, c)
            .transaction(|(a, b, c)| f(&(TxTree::Sled(a), TxTree::Sled(b), TxTree::Sled(c)))),
        (Tree::Memory(a), Tree::Memory(b), Tree::Memory(c)) => {
            memory([a, b, c], |[a, b, c]| f(&(a, b, c)))
        }
        _ => Err(TransactionError::Storage(mixed())),
    }
}

/// The trees of a five-tree transaction, as its closure sees them.
pub type Tx5<'a> = (TxTree<'a>, TxTree<'a>, TxTree<'a>, TxTree<'a>, TxTree<'a>);

/// A transaction over five trees.
pub fn transaction5<A, E, F>(
    trees: (&Tree, &Tree, &Tree, &Tree, &Tree),
    f: F,
) -> TransactionResult<A, E>
where
    F: for<'a> Fn(&Tx5<'a>) -> ConflictableTransactionResult<A, E>,
{
    match trees {
        (Tree::Sled(a), Tree::Sled(b), Tree::Sled(c), Tree::Sled(d), Tree::Sled(e)) => {
            (a, b, c, d, e).transaction(|(a, b, c, d, e)| {
                f(&(
                    TxTree::Sled(a),
                    TxTree::Sled(b),
                    TxTree::Sled(c),
                    TxTree::Sled(d),
                    TxTree::Sled(e),
                ))
            })
        }
        (Tree::Memory(a), Tree::Memory(b), Tree::Memory(c), Tree::Memory(d), Tree::Memory(e)) => {
            memory([a, b, c, d, e], |[a, b, c, d, e]| f(&(a, b, c, d, e)))
        }
        _ => Err(TransactionError::Storage(mixed())),
    }
}
