//! A batch of changes to one tree.

use sled::IVec;

/// Changes to one tree, applied together and atomically. They are kept in
/// the order made and applied in it (a later change of a key replaces an
/// earlier one), which leaves a tree as sled's `Batch` does; a list costs
/// less to build than sled's map, which is built once, on the way in.
#[derive(Debug, Default, Clone)]
pub struct Batch {
    writes: Vec<(IVec, Option<IVec>)>,
}

impl Batch {
    /// Sets `key` to `value`.
    pub fn insert<K: Into<IVec>, V: Into<IVec>>(&mut self, key: K, value: V) {
        self.writes.push((key.into(), Some(value.into())));
    }

    /// Removes `key`.
    pub fn remove<K: Into<IVec>>(&mut self, key: K) {
        self.writes.push((key.into(), None));
    }

    /// The same changes as sled's batch.
    pub(super) fn into_sled(self) -> sled::Batch {
        let mut b = sled::Batch::default();
        for (k, v) in self.writes {
            match v {
                Some(v) => b.insert(k, v),
                None => b.remove(k),
            }
        }
        b
    }

    /// The changes, in the order made, taken out.
    pub(super) fn into_writes(self) -> Vec<(IVec, Option<IVec>)> {
        self.writes
    }

    /// The changes, in the order made.
    pub(crate) fn writes(&self) -> &[(IVec, Option<IVec>)] {
        &self.writes
    }
}
