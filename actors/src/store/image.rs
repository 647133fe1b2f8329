//! A whole store as one value: what a replicated engine's snapshot holds,
//! sent to a member that is new or whose log was compacted away. It holds
//! the store's trees, the state machine's values and every blob; not the
//! Raft log or vote, which are the member's own.

use std::io;

use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;
use sled::transaction::{ConflictableTransactionError, TransactionError};
use weir_core::codec;

use super::blobs::BlobRef;
use super::{Store, StoreError, TreeId};

/// Keys of the replica tree that belong to the Raft log, not the state
/// machine: left out of an image and kept by an install.
pub const LOG_KEYS: [&str; 3] = ["vote", "committed", "purged"];

/// A store's image.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct StoreImage {
    /// Every tree's entries, by tree.
    pub trees: Vec<(TreeId, Vec<(ByteBuf, ByteBuf)>)>,
    /// The state machine's values (applied log id, membership, the last
    /// guarded entry's decisions).
    pub meta: Vec<(String, ByteBuf)>,
    /// Every blob's bytes.
    pub blobs: Vec<ByteBuf>,
}

impl Store {
    /// The image of the store as it stands: the caller keeps writes out
    /// while it is read (the state machine holds its lock).
    pub fn export_image(&self) -> Result<Vec<u8>, StoreError> {
        let mut image = StoreImage::default();
        for tree in [
            TreeId::Journal,
            TreeId::Snapshot,
            TreeId::Records,
            TreeId::Expiry,
        ] {
            let mut entries = Vec::new();
            for item in self.tree_of(tree).iter() {
                let (k, v) = item.map_err(|e| self.sled_err(e))?;
                entries.push((ByteBuf::from(k.to_vec()), ByteBuf::from(v.to_vec())));
            }
            image.trees.push((tree, entries));
        }
        for item in self.inner.replica.iter() {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            let key = String::from_utf8_lossy(&k).into_owned();
            if !LOG_KEYS.contains(&key.as_str()) {
                image.meta.push((key, ByteBuf::from(v.to_vec())));
            }
        }
        for path in self.blob_files().map_err(|source| StoreError::Dir {
            dir: self.inner.blobs.dir.clone(),
            source,
        })? {
            let bytes = std::fs::read(&path).map_err(|source| StoreError::Dir {
                dir: path.clone(),
                source,
            })?;
            image.blobs.push(ByteBuf::from(bytes));
        }
        self.encode("store image", &image)
    }

    /// Replaces the store's content with `bytes` (an image), atomically:
    /// a crash midway leaves the store as it was. Blobs are written first
    /// (content-addressed: one already there is kept).
    pub fn install_image(&self, bytes: &[u8]) -> Result<(), StoreError> {
        let image: StoreImage = codec::decode(bytes).map_err(|source| StoreError::Corrupt {
            dir: self.dir().to_path_buf(),
            tree: "replica",
            key: "snapshot image".into(),
            source,
        })?;
        for blob in &image.blobs {
            self.write_blob_file(&BlobRef::of(blob), blob)?;
        }
        let inner = &self.inner;
        let _gate = self.write_gate();
        // The keys to remove, read before the transaction: a tree read
        // inside a transaction over that tree waits for the transaction.
        let mut stale: Vec<(TreeId, Vec<sled::IVec>)> = Vec::new();
        for tree in [
            TreeId::Journal,
            TreeId::Snapshot,
            TreeId::Records,
            TreeId::Expiry,
        ] {
            let keys = self
                .tree_of(tree)
                .iter()
                .keys()
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.sled_err(e))?;
            stale.push((tree, keys));
        }
        let stale_meta: Vec<sled::IVec> = inner
            .replica
            .iter()
            .keys()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| self.sled_err(e))?
            .into_iter()
            .filter(|k| !LOG_KEYS.contains(&String::from_utf8_lossy(k).as_ref()))
            .collect();
        let trees = (
            &inner.journal,
            &inner.snapshot,
            &inner.records,
            &inner.expiry,
            &inner.replica,
        );
        let result = super::kv::transaction5(trees, |tx| {
            let m = &tx.4;
            for (tree, keys) in &stale {
                let t = tree.in_tx(tx);
                for k in keys {
                    t.remove(k.clone())?;
                }
            }
            for k in &stale_meta {
                m.remove(k.clone())?;
            }
            for (tree, entries) in &image.trees {
                let t = tree.in_tx(tx);
                for (k, v) in entries {
                    t.insert(k.as_slice(), v.as_slice())?;
                }
            }
            for (k, v) in &image.meta {
                m.insert(k.as_bytes(), v.as_slice())?;
            }
            Ok::<(), ConflictableTransactionError<()>>(())
        });
        match result {
            Ok(()) => self.sync_inner(),
            Err(TransactionError::Abort(())) => unreachable!("an install never aborts"),
            Err(TransactionError::Storage(source)) => Err(StoreError::Write {
                dir: self.dir().to_path_buf(),
                what: "snapshot install",
                source,
            }),
        }
    }

    pub(super) fn tree_of(&self, tree: TreeId) -> &super::kv::Tree {
        match tree {
            TreeId::Journal => &self.inner.journal,
            TreeId::Snapshot => &self.inner.snapshot,
            TreeId::Records => &self.inner.records,
            TreeId::Expiry => &self.inner.expiry,
        }
    }

    /// Paths of every blob file.
    pub(super) fn blob_files(&self) -> io::Result<Vec<std::path::PathBuf>> {
        let mut out = Vec::new();
        let dir = &self.inner.blobs.dir;
        let Ok(shards) = std::fs::read_dir(dir) else {
            return Ok(out);
        };
        for shard in shards {
            let shard = shard?;
            if !shard.file_type()?.is_dir() {
                continue;
            }
            for f in std::fs::read_dir(shard.path())? {
                let f = f?;
                let name = f.file_name();
                let name = name.to_string_lossy();
                if f.file_type()?.is_file() && name.len() == 64 && !name.starts_with('.') {
                    out.push(f.path());
                }
            }
        }
        out.sort();
        Ok(out)
    }
}
