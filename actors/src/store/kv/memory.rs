//! Trees held in the process: a [`MemoryStore`] is a set of ordered maps
//! behind one lock, which makes a batch or a transaction over several
//! trees atomic. It is for a simulation's engine, which reopens it after
//! a simulated crash as a real engine reopens its files: a write that
//! returned is there, one that did not is wholly absent.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};

use sled::IVec;

/// Trees held in memory; clones share them. Give one to
/// `StoreSettings::memory` and every store opened with those settings
/// writes there instead of sled's files.
#[derive(Clone, Default)]
pub struct MemoryStore(Arc<Mutex<MemDb>>);

#[derive(Default)]
pub(super) struct MemDb {
    names: Vec<Vec<u8>>,
    pub(super) trees: Vec<BTreeMap<IVec, IVec>>,
    /// Bytes of every key and value held.
    bytes: u64,
}

impl MemDb {
    pub(super) fn put(&mut self, idx: usize, key: IVec, value: IVec) -> Option<IVec> {
        self.bytes += (key.len() + value.len()) as u64;
        let klen = key.len() as u64;
        let old = self.trees[idx].insert(key, value);
        if let Some(old) = &old {
            self.bytes -= klen + old.len() as u64;
        }
        old
    }

    pub(super) fn delete(&mut self, idx: usize, key: &[u8]) -> Option<IVec> {
        let old = self.trees[idx].remove(key);
        if let Some(old) = &old {
            self.bytes -= (key.len() + old.len()) as u64;
        }
        old
    }

    /// One change of a batch or a transaction: `key` set, or removed when
    /// `value` is `None`.
    pub(super) fn write(&mut self, idx: usize, key: IVec, value: Option<IVec>) {
        match value {
            Some(v) => {
                self.put(idx, key, v);
            }
            None => {
                self.delete(idx, &key);
            }
        }
    }
}

impl MemoryStore {
    /// An empty one.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    /// Bytes of the keys and values it holds.
    pub fn bytes(&self) -> u64 {
        self.lock().bytes
    }

    /// Whether `other` shares its trees.
    pub fn same(&self, other: &MemoryStore) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, MemDb> {
        // A panic while the lock was held left no half-applied write: every
        // write applies after its last fallible step.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn open_tree(&self, name: &str) -> MemTree {
        let mut db = self.lock();
        let idx = match db.names.iter().position(|n| n == name.as_bytes()) {
            Some(i) => i,
            None => {
                db.names.push(name.as_bytes().to_vec());
                db.trees.push(BTreeMap::new());
                db.trees.len() - 1
            }
        };
        MemTree {
            store: self.clone(),
            idx,
        }
    }
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MemoryStore({} bytes)", self.bytes())
    }
}

impl PartialEq for MemoryStore {
    fn eq(&self, other: &Self) -> bool {
        self.same(other)
    }
}

/// One tree of a [`MemoryStore`].
#[derive(Clone)]
pub struct MemTree {
    pub(super) store: MemoryStore,
    pub(super) idx: usize,
}

impl MemTree {
    pub(super) fn insert(&self, key: &[u8], value: IVec) -> Option<IVec> {
        self.store.lock().put(self.idx, IVec::from(key), value)
    }

    pub(super) fn get(&self, key: &[u8]) -> Option<IVec> {
        self.store.lock().trees[self.idx].get(key).cloned()
    }

    pub(super) fn remove(&self, key: &[u8]) -> Option<IVec> {
        self.store.lock().delete(self.idx, key)
    }

    pub(super) fn apply(&self, writes: Vec<(IVec, Option<IVec>)>) {
        let mut db = self.store.lock();
        for (k, v) in writes {
            db.write(self.idx, k, v);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.store.lock().trees[self.idx].len()
    }

    pub(super) fn clear(&self) {
        let mut db = self.store.lock();
        let tree = std::mem::take(&mut db.trees[self.idx]);
        db.bytes -= tree
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum::<u64>();
    }

    pub(super) fn iter(&self, lo: Bound<IVec>, hi: Bound<IVec>) -> MemIter {
        MemIter {
            tree: self.clone(),
            lo,
            hi,
            front: VecDeque::new(),
            back: VecDeque::new(),
            batch: 1,
        }
    }
}

/// Entries read from a memory tree at most at one step (the first step
/// reads one: many scans stop at their first entry).
const ITER_BATCH_MAX: usize = 128;

/// Entries of a memory tree between two bounds, read a few at a time under
/// the lock (so a long scan holds it for no more than one step). Like
/// sled's, it sees the writes made while it runs past what it has read.
pub struct MemIter {
    tree: MemTree,
    lo: Bound<IVec>,
    hi: Bound<IVec>,
    /// Read from the front and not yet returned, in key order.
    front: VecDeque<(IVec, IVec)>,
    /// Read from the back and not yet returned, largest key first.
    back: VecDeque<(IVec, IVec)>,
    /// Entries the next read takes at most (doubles up to
    /// [`ITER_BATCH_MAX`]).
    batch: usize,
}

impl MemIter {
    /// Whether no key can lie between the bounds (`BTreeMap::range`
    /// panics on such a range).
    fn exhausted(&self) -> bool {
        match (&self.lo, &self.hi) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a), Bound::Excluded(b))
            | (Bound::Excluded(a), Bound::Included(b))
            | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
            _ => false,
        }
    }

    /// Reads the next entries from the front (or the back) into its
    /// buffer, moving the bound past them; whatever the other end read is
    /// past the bounds already, so no entry is read twice.
    fn read(&mut self, back: bool) {
        if self.exhausted() {
            return;
        }
        let n = self.batch;
        self.batch = (n * 2).min(ITER_BATCH_MAX);
        let db = self.tree.store.lock();
        let range = db.trees[self.tree.idx].range((self.lo.clone(), self.hi.clone()));
        let read: Vec<(IVec, IVec)> = if back {
            range
                .rev()
                .take(n)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        } else {
            range.take(n).map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        drop(db);
        if let Some((last, _)) = read.last() {
            if back {
                self.hi = Bound::Excluded(last.clone());
            } else {
                self.lo = Bound::Excluded(last.clone());
            }
        }
        if back {
            self.back.extend(read);
        } else {
            self.front.extend(read);
        }
    }
}

impl Iterator for MemIter {
    type Item = (IVec, IVec);

    fn next(&mut self) -> Option<Self::Item> {
        if self.front.is_empty() {
            self.read(false);
        }
        // Past the bounds, what the back read and did not return is next.
        self.front.pop_front().or_else(|| self.back.pop_back())
    }
}

impl DoubleEndedIterator for MemIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.back.is_empty() {
            self.read(true);
        }
        self.back.pop_front().or_else(|| self.front.pop_back())
    }
}
