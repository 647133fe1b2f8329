//! The shapes of a replicated write (see the `replicated` module): the
//! changes one write path of the store makes at once, the trait the store
//! proposes them through, and the batch that records them.

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use super::kv;

/// A tree a replicated write names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeId {
    /// The queue's journal.
    Journal,
    /// The queue's snapshot.
    Snapshot,
    /// Records.
    Records,
    /// The expiry index.
    Expiry,
}

impl TreeId {
    /// This tree in a transaction over the store's five trees, opened in
    /// the order journal, snapshot, records, expiry (then the replica's).
    pub(super) fn in_tx<'a>(self, tx: &kv::Tx5<'a>) -> kv::TxTree<'a> {
        match self {
            TreeId::Journal => tx.0,
            TreeId::Snapshot => tx.1,
            TreeId::Records => tx.2,
            TreeId::Expiry => tx.3,
        }
    }
}

/// One change of one tree: a put, or a removal (`value: None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Write {
    /// The tree.
    pub tree: TreeId,
    /// The key.
    pub key: ByteBuf,
    /// The new value; `None` removes the key.
    pub value: Option<ByteBuf>,
}

/// The condition of a compare-and-put: record `key` holds `expected`
/// (`None`: absent). Evaluated at apply time; when it fails, nothing of the
/// set is written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    /// The record's key.
    pub key: String,
    /// The value it must hold.
    pub expected: Option<ByteBuf>,
}

/// One replicated write: what one write path of the store writes at once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteSet {
    /// What it is, for logs and errors ("journal commit", "snapshot").
    pub what: String,
    /// The condition, for a compare-and-put.
    pub guard: Option<Guard>,
    /// Blobs (content-addressed) written before the changes.
    pub blobs: Vec<ByteBuf>,
    /// The changes, applied atomically.
    pub writes: Vec<Write>,
    /// On an entry's last set: the pipeline that proposed the entry, so
    /// that its apply on that member answers the waiting writers at once
    /// (see [`Proposal`]). Absent from entries logged before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) proposal: Option<Proposal>,
}

/// Who proposed an entry: one pipeline of one member's process (`pipeline`,
/// drawn at random when it starts), in its `epoch` (bumped by a reset), and
/// the last of its sequences the entry carries. The member's own apply of
/// the entry tells that pipeline its writers are durable, one hop where the
/// Raft core's answer takes three (the state machine's result back to the
/// core, the core's answer, the pipeline's completer). Another member, or
/// this one after a restart or a reset, ignores it. A replicated entry's
/// bytes are the same on every member; only the proposer reads this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Proposal {
    pub(crate) pipeline: u64,
    pub(crate) epoch: u64,
    /// The entry's sets' sequences, `first..=upto`.
    pub(crate) first: u64,
    pub(crate) upto: u64,
}

impl WriteSet {
    /// Bytes it carries (blobs, keys and values), roughly its entry's size.
    pub fn bytes(&self) -> usize {
        self.blobs.iter().map(|b| b.len()).sum::<usize>()
            + self
                .writes
                .iter()
                .map(|w| w.key.len() + w.value.as_ref().map_or(0, |v| v.len()))
                .sum::<usize>()
    }
}

/// Where the store sends its writes in clustered mode.
pub trait Replicator: Send + Sync + 'static {
    /// Proposes `sets` as one entry; returns once it is committed and
    /// applied on this node, with whether each set's guard held (`true`
    /// without a guard). An error means the sets may or may not take effect
    /// later (a lost leadership, a majority out of reach): the store
    /// fail-stops, as after a failed write.
    fn propose(&self, sets: Vec<WriteSet>) -> Result<Vec<bool>, String>;

    /// Hands `sets` to the log as one entry and returns without waiting
    /// for its commit: entries submitted one after another are logged in
    /// that order, and several may be in flight at once. The default
    /// proposes at once (no pipelining).
    fn submit(&self, sets: Vec<WriteSet>) -> Result<Box<dyn Submitted>, String> {
        Ok(Box::new(Proposed(self.propose(sets))))
    }
}

/// An entry submitted to the log: [`Submitted::wait`] returns what
/// [`Replicator::propose`] would have.
pub trait Submitted: Send {
    /// Waits until the entry is committed and applied on this node.
    fn wait(self: Box<Self>) -> Result<Vec<bool>, String>;
}

/// An entry whose outcome is known.
struct Proposed(Result<Vec<bool>, String>);

impl Submitted for Proposed {
    fn wait(self: Box<Self>) -> Result<Vec<bool>, String> {
        self.0
    }
}

/// A batch of changes to one tree: a `kv::Batch` in single-node mode, a
/// list of [`Write`]s to replicate in clustered mode.
pub(crate) struct WriteBatch {
    pub(super) tree: TreeId,
    pub(super) local: kv::Batch,
    pub(super) recorded: Option<Vec<Write>>,
}

impl WriteBatch {
    /// A local batch whatever the mode: for what a node writes of its own
    /// (a migration at open).
    pub(crate) fn local(tree: TreeId) -> WriteBatch {
        WriteBatch {
            tree,
            local: kv::Batch::default(),
            recorded: None,
        }
    }

    /// Inserts `key` = `value`.
    pub(crate) fn insert(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        match &mut self.recorded {
            None => self.local.insert(key.as_ref(), value.as_ref()),
            Some(r) => r.push(Write {
                tree: self.tree,
                key: ByteBuf::from(key.as_ref()),
                value: Some(ByteBuf::from(value.as_ref())),
            }),
        }
    }

    /// Removes `key`.
    pub(crate) fn remove(&mut self, key: impl AsRef<[u8]>) {
        match &mut self.recorded {
            None => self.local.remove(key.as_ref()),
            Some(r) => r.push(Write {
                tree: self.tree,
                key: ByteBuf::from(key.as_ref()),
                value: None,
            }),
        }
    }

    /// The batch to apply (single-node mode).
    pub(crate) fn into_local(self) -> kv::Batch {
        debug_assert!(
            self.recorded.is_none(),
            "a recorded batch goes to the replicator"
        );
        self.local
    }

    /// The recorded writes (clustered mode).
    pub(crate) fn into_writes(self) -> Vec<Write> {
        self.recorded.unwrap_or_default()
    }
}
