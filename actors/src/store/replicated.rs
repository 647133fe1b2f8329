//! Replicated writes: in clustered mode (see DESIGN §7a) the store does not
//! write sled itself. Each write path builds the same changes it would
//! write, as a [`WriteSet`], and hands it to the [`Replicator`] (a Raft
//! group); every node, this one included, applies the committed set with
//! [`Store::apply_replicated`]. A write returns once its set is committed
//! (persisted on a majority) and applied here, so the caller reads its own
//! write, as in single-node mode.
//!
//! A compare-and-put travels as a guard evaluated at apply time, in log
//! order, the same on every node. Journal sequences are assigned by the one
//! writer of the journal (the leader's queue) under the commit lock, as in
//! single-node mode. Blobs travel inside the set that writes them, ahead of
//! any set naming them, so a follower never holds a record whose blob it
//! lacks.
//!
//! Single-node mode has no replicator: every write path takes its sled
//! branch, which is the code it had before, and [`WriteBatch`] is a plain
//! `sled::Batch` there.

use std::sync::Arc;

use sled::transaction::{ConflictableTransactionError, TransactionError};
use sled::Transactional;

use super::blobs::BlobRef;
use super::write_set::{Replicator, TreeId, WriteBatch, WriteSet};
use super::{Store, StoreError};

impl Store {
    /// Sends every later write to `replicator` instead of sled (clustered
    /// mode). Set once, right after the open, before anything writes.
    pub fn set_replicator(&self, replicator: Arc<dyn Replicator>) {
        if self.inner.replicator.set(replicator).is_err() {
            tracing::warn!(dir = %self.dir().display(), "replicator set twice; the first stays");
        }
        // The mark guards a single node's journal against a lost tail; a
        // replica's tail is the Raft log's, replayed by the group.
        self.inner
            .mark_on_close
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// Whether writes are replicated (clustered mode).
    pub fn is_replicated(&self) -> bool {
        self.inner.replicator.get().is_some()
    }

    /// A batch for `tree`, of the kind this store writes.
    pub(crate) fn batch(&self, tree: TreeId) -> WriteBatch {
        WriteBatch {
            tree,
            sled: sled::Batch::default(),
            recorded: self.is_replicated().then(Vec::new),
        }
    }

    /// Writes batches atomically: proposed as one set in clustered mode,
    /// applied to sled otherwise (a failure fail-stops the store either
    /// way). Not made durable: the caller syncs.
    pub(crate) fn write_batches(
        &self,
        what: &'static str,
        batches: Vec<WriteBatch>,
    ) -> Result<(), StoreError> {
        if self.is_replicated() {
            let writes = batches
                .into_iter()
                .flat_map(WriteBatch::into_writes)
                .collect();
            self.replicate(WriteSet {
                what: what.into(),
                writes,
                ..WriteSet::default()
            })?;
            return Ok(());
        }
        for batch in batches {
            let tree = self.tree_of(batch.tree).clone();
            let sled = batch.into_sled();
            self.write_sled(what, || tree.apply_batch(sled))?;
        }
        Ok(())
    }

    /// Proposes `set` (clustered mode): its failure fail-stops the store,
    /// as a failed sled write does.
    pub(crate) fn replicate(&self, set: WriteSet) -> Result<bool, StoreError> {
        let Some(replicator) = self.inner.replicator.get() else {
            unreachable!("replicate is called in clustered mode only");
        };
        self.inject(super::FaultPoint::Write).map_err(|source| {
            let e = StoreError::Write {
                dir: self.dir().to_path_buf(),
                what: "replicated write",
                source: sled::Error::Io(source),
            };
            self.fail(&e);
            e
        })?;
        let what = set.what.clone();
        replicator.propose(set).map_err(|reason| {
            let e = StoreError::NotReplicated {
                dir: self.dir().to_path_buf(),
                what,
                reason,
            };
            self.fail(&e);
            e
        })
    }

    /// Clears a fail-stop (clustered mode): a node that lost its leadership
    /// stopped its engine on the failed proposal; when it leads again, its
    /// engine recovers from the store, which holds exactly what committed.
    pub fn clear_failure(&self) {
        let inner = &self.inner;
        *inner.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *inner.on_failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        inner
            .failed
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// Applies a committed set, with the state machine's own values `meta`
    /// (applied log id, membership) in the same transaction. Returns
    /// whether its guard held; when it did not, only `meta` is written.
    /// Not gated by fail-stop: a follower applies what the group committed.
    pub fn apply_replicated(
        &self,
        set: &WriteSet,
        meta: &[(&str, Vec<u8>)],
    ) -> Result<bool, StoreError> {
        let inner = &self.inner;
        for bytes in &set.blobs {
            self.write_blob_file(&BlobRef::of(bytes), bytes)?;
        }
        let guard = set.guard.as_ref();
        let result = (
            &inner.journal,
            &inner.snapshot,
            &inner.records,
            &inner.expiry,
            &inner.replica,
        )
            .transaction(|(j, s, r, x, m)| {
                let held = match guard {
                    None => true,
                    Some(g) => {
                        r.get(g.key.as_bytes())?.as_deref()
                            == g.expected.as_ref().map(|v| v.as_slice())
                    }
                };
                if held {
                    for w in &set.writes {
                        let tree = match w.tree {
                            TreeId::Journal => j,
                            TreeId::Snapshot => s,
                            TreeId::Records => r,
                            TreeId::Expiry => x,
                        };
                        match &w.value {
                            Some(v) => tree.insert(w.key.as_slice(), v.as_slice())?,
                            None => tree.remove(w.key.as_slice())?,
                        };
                    }
                }
                for (k, v) in meta {
                    m.insert(k.as_bytes(), v.as_slice())?;
                }
                Ok::<bool, ConflictableTransactionError<()>>(held)
            });
        match result {
            Ok(held) => Ok(held),
            Err(TransactionError::Abort(())) => unreachable!("apply never aborts"),
            Err(TransactionError::Storage(source)) => Err(StoreError::Write {
                dir: self.dir().to_path_buf(),
                what: "replicated apply",
                source,
            }),
        }
    }

    /// The state machine's tree (applied log id, membership, vote).
    pub fn replica_tree(&self) -> &sled::Tree {
        &self.inner.replica
    }

    /// The Raft log's tree.
    pub fn raft_log_tree(&self) -> &sled::Tree {
        &self.inner.raft_log
    }

    /// Makes everything written so far durable (sled's flush and, in the
    /// `fsync` mode, an fsync), whatever the fail-stop flag says: the Raft
    /// log's appends and the state machine's snapshots.
    pub fn sync_replica(&self) -> Result<(), StoreError> {
        self.sync_inner()
    }
}
