//! One ordered tree, sled's or a memory store's, and its iterator.

use std::ops::{Bound, RangeBounds};

use sled::IVec;

use super::batch::Batch;
use super::memory::{MemIter, MemTree};

/// One ordered tree of byte keys and values.
#[derive(Clone)]
pub enum Tree {
    /// A sled tree.
    Sled(sled::Tree),
    /// A tree of a [`MemoryStore`].
    Memory(MemTree),
}

impl Tree {
    /// Sets `key` to `value`; returns the value it had.
    pub fn insert<K: AsRef<[u8]>, V: Into<IVec>>(
        &self,
        key: K,
        value: V,
    ) -> sled::Result<Option<IVec>> {
        match self {
            Tree::Sled(t) => t.insert(key, value),
            Tree::Memory(t) => Ok(t.insert(key.as_ref(), value.into())),
        }
    }

    /// The value of `key`.
    pub fn get<K: AsRef<[u8]>>(&self, key: K) -> sled::Result<Option<IVec>> {
        match self {
            Tree::Sled(t) => t.get(key),
            Tree::Memory(t) => Ok(t.get(key.as_ref())),
        }
    }

    /// Whether `key` has a value.
    pub fn contains_key<K: AsRef<[u8]>>(&self, key: K) -> sled::Result<bool> {
        match self {
            Tree::Sled(t) => t.contains_key(key),
            Tree::Memory(t) => Ok(t.get(key.as_ref()).is_some()),
        }
    }

    /// Removes `key`; returns the value it had.
    pub fn remove<K: AsRef<[u8]>>(&self, key: K) -> sled::Result<Option<IVec>> {
        match self {
            Tree::Sled(t) => t.remove(key),
            Tree::Memory(t) => Ok(t.remove(key.as_ref())),
        }
    }

    /// Applies `batch` atomically.
    pub fn apply_batch(&self, batch: Batch) -> sled::Result<()> {
        match self {
            Tree::Sled(t) => t.apply_batch(batch.into_sled()),
            Tree::Memory(t) => {
                t.apply(batch.into_writes());
                Ok(())
            }
        }
    }

    /// The entries whose keys are in `range`, in order.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Iter {
        match self {
            Tree::Sled(t) => Iter::Sled(t.range(range)),
            Tree::Memory(t) => {
                let lo = owned_bound(range.start_bound());
                let hi = owned_bound(range.end_bound());
                Iter::Memory(t.iter(lo, hi))
            }
        }
    }

    /// The entries whose keys start with `prefix`, in order.
    pub fn scan_prefix<P: AsRef<[u8]>>(&self, prefix: P) -> Iter {
        match self {
            Tree::Sled(t) => Iter::Sled(t.scan_prefix(prefix)),
            Tree::Memory(t) => {
                let prefix = prefix.as_ref();
                let lo = Bound::Included(IVec::from(prefix));
                let hi = match prefix_end(prefix) {
                    Some(end) => Bound::Excluded(IVec::from(end)),
                    None => Bound::Unbounded,
                };
                Iter::Memory(t.iter(lo, hi))
            }
        }
    }

    /// Every entry, in order.
    pub fn iter(&self) -> Iter {
        match self {
            Tree::Sled(t) => Iter::Sled(t.iter()),
            Tree::Memory(t) => Iter::Memory(t.iter(Bound::Unbounded, Bound::Unbounded)),
        }
    }

    /// The entry of the smallest key.
    pub fn first(&self) -> sled::Result<Option<(IVec, IVec)>> {
        self.iter().next().transpose()
    }

    /// The entry of the largest key.
    pub fn last(&self) -> sled::Result<Option<(IVec, IVec)>> {
        match self {
            Tree::Sled(t) => t.last(),
            Tree::Memory(_) => self.iter().next_back().transpose(),
        }
    }

    /// How many entries (sled counts them by iterating).
    pub fn len(&self) -> usize {
        match self {
            Tree::Sled(t) => t.len(),
            Tree::Memory(t) => t.len(),
        }
    }

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        match self {
            Tree::Sled(t) => t.is_empty(),
            Tree::Memory(t) => t.len() == 0,
        }
    }

    /// Removes every entry.
    pub fn clear(&self) -> sled::Result<()> {
        match self {
            Tree::Sled(t) => t.clear(),
            Tree::Memory(t) => {
                t.clear();
                Ok(())
            }
        }
    }

    /// Writes what sled buffers; nothing to do in memory.
    pub fn flush(&self) -> sled::Result<usize> {
        match self {
            Tree::Sled(t) => t.flush(),
            Tree::Memory(_) => Ok(0),
        }
    }
}

/// The end of the keys that start with `prefix` (excluded), as sled
/// computes it; `None` when every longer key starts with it.
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut upper = prefix.to_vec();
    while let Some(last) = upper.pop() {
        if last < u8::MAX {
            upper.push(last + 1);
            return Some(upper);
        }
    }
    None
}

fn owned_bound<K: AsRef<[u8]>>(b: Bound<&K>) -> Bound<IVec> {
    match b {
        Bound::Included(k) => Bound::Included(IVec::from(k.as_ref())),
        Bound::Excluded(k) => Bound::Excluded(IVec::from(k.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Entries of a tree in key order, from either end.
pub enum Iter {
    /// sled's iterator.
    Sled(sled::Iter),
    /// A memory tree's.
    Memory(MemIter),
}

impl Iter {
    /// Only the keys.
    pub fn keys(self) -> impl DoubleEndedIterator<Item = sled::Result<IVec>> {
        self.map(|r| r.map(|(k, _)| k))
    }

    /// Only the values.
    pub fn values(self) -> impl DoubleEndedIterator<Item = sled::Result<IVec>> {
        self.map(|r| r.map(|(_, v)| v))
    }
}

impl Iterator for Iter {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sled(i) => i.next(),
            Iter::Memory(i) => i.next().map(Ok),
        }
    }
}

impl DoubleEndedIterator for Iter {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Sled(i) => i.next_back(),
            Iter::Memory(i) => i.next_back().map(Ok),
        }
    }
}
