//! Replicated writes: in clustered mode (see DESIGN §7a) the store does not
//! write sled itself. Each write path builds the same changes it would
//! write, as a [`WriteSet`], and appends it to the pipeline (the `pipeline`
//! module), which proposes what is pending to the [`Replicator`] (a Raft
//! group) one entry at a time; every node, this one included, applies the
//! committed sets with `Store::apply_replicated` (the `replicated_apply`
//! module). A write is durable when [`Store::sync`] returns (every synced
//! write path calls it): its set is then committed (persisted on a
//! majority) and applied here.
//!
//! A compare-and-put is decided when appended (see the pipeline) and its
//! guard checked again at apply time, in log order, the same on every node. Journal sequences are assigned by the one
//! writer of the journal (the leader's queue) under the commit lock, as in
//! single-node mode. Blobs travel inside the set that writes them, ahead of
//! any set naming them, so a follower never holds a record whose blob it
//! lacks.
//!
//! Single-node mode has no replicator: every write path takes its sled
//! branch, which is the code it had before, and [`WriteBatch`] is a plain
//! `kv::Batch` there.

use std::sync::Arc;

use super::pipeline::Pipeline;
use super::write_set::{Replicator, TreeId, WriteBatch, WriteSet};
use super::{Store, StoreError};

impl Store {
    /// Sends every later write to `replicator` instead of sled (clustered
    /// mode). Set once, right after the open, before anything writes.
    pub fn set_replicator(&self, replicator: Arc<dyn Replicator>) {
        if self
            .inner
            .replicator
            .set(Pipeline::start(replicator))
            .is_err()
        {
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
            local: super::kv::Batch::default(),
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
            let local = batch.into_local();
            self.write_sled(what, || tree.apply_batch(local))?;
        }
        Ok(())
    }

    /// Appends `set` to the writes to replicate (clustered mode), deciding
    /// its guard: whether it held. Durable after [`Store::sync`]. A
    /// failure fail-stops the store, as a failed sled write does.
    pub(crate) fn replicate(&self, set: WriteSet) -> Result<bool, StoreError> {
        let Some(pipeline) = self.inner.replicator.get() else {
            unreachable!("replicate is called in clustered mode only");
        };
        self.inject_write(super::FaultPoint::Write, "replicated write")?;
        let what = set.what.clone();
        let records = &self.inner.records;
        let appended = pipeline.append(set, |key| {
            records
                .get(key.as_bytes())
                .map(|v| v.map(|v| v.to_vec()))
                .map_err(|e| e.to_string())
        });
        match appended {
            Ok(seq) => Ok(seq.is_some()),
            Err(reason) => Err(self.not_replicated(what, reason)),
        }
    }

    /// Waits until every replicated write appended so far is committed
    /// and applied (clustered mode's [`Store::sync`]).
    pub(super) fn sync_replicated(&self) -> Result<(), StoreError> {
        let Some(pipeline) = self.inner.replicator.get() else {
            return Ok(());
        };
        // A writer on a runtime worker (an API handler, an actor) must not
        // hold the worker while it waits: the Raft node runs on the same
        // runtime.
        let waited = if crate::blocking::can_block_in_place() {
            tokio::task::block_in_place(|| pipeline.wait_all())
        } else {
            pipeline.wait_all()
        };
        waited.map_err(|reason| self.not_replicated("a replicated write".into(), reason))
    }

    /// A record written and not yet applied (clustered mode): `Some(None)`
    /// for a pending removal.
    pub(super) fn pending_record(&self, key: &str) -> Option<Option<Vec<u8>>> {
        self.inner.replicator.get()?.pending_record(key.as_bytes())
    }

    fn not_replicated(&self, what: String, reason: String) -> StoreError {
        let e = StoreError::NotReplicated {
            dir: self.dir().to_path_buf(),
            what,
            reason,
        };
        self.fail(&e);
        e
    }

    /// Clears a fail-stop (clustered mode): a node that lost its leadership
    /// stopped its engine on the failed proposal; when it leads again, its
    /// engine recovers from the store, which holds exactly what committed.
    pub fn clear_failure(&self) {
        let inner = &self.inner;
        *inner.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *inner.on_failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        if let Some(p) = inner.replicator.get() {
            p.reset();
        }
        inner
            .failed
            .store(false, std::sync::atomic::Ordering::Release);
    }

    /// The state machine's tree (applied log id, membership, vote).
    pub fn replica_tree(&self) -> &super::kv::Tree {
        &self.inner.replica
    }

    /// The Raft log's tree.
    pub fn raft_log_tree(&self) -> &super::kv::Tree {
        &self.inner.raft_log
    }

    /// Makes everything written so far durable (sled's flush and, in the
    /// `fsync` mode, an fsync), whatever the fail-stop flag says: the Raft
    /// log's appends and the state machine's snapshots.
    pub fn sync_replica(&self) -> Result<(), StoreError> {
        self.sync_inner()
    }
}
