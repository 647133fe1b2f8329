//! Blobs: large values (task outputs) kept as content-addressed files
//! beside sled, not in it.
//!
//! A value over [`BLOB_INLINE_BYTES_MAX`] goes to
//! `DATA/blobs/<first 2 hex>/<blake3 hex>`; the record that holds it keeps a
//! [`BlobRef`] (hash and size) instead. sled is a log-structured store that
//! rewrites pages as they change: a 1 MiB output held in a done record, in
//! its downstream's Enqueue op, in the snapshot's ticket and in sled's
//! rewritten leaves cost about five times its size, and an op past the
//! journal's entry limit (a 1 MiB output, or a fan-in whose upstream
//! outputs add up past it) could never be journaled at all.
//!
//! Order of writes, so that no record ever names a blob that is not there:
//! a blob is written to a temporary file, fsynced, renamed to its name and
//! its folder fsynced (in the `fsync` and `flush` durability modes) before
//! the record naming it is committed. A crash before the commit leaves an
//! unreferenced blob, which the sweep at engine open removes.
//!
//! References: every record that names a blob has two index records,
//! written and deleted in the same atomic batch as the record itself:
//! `blobref/<hash>/<record key>` (who references a hash) and
//! `blobof/<record key>` (the [`BlobRef`] a record holds). A blob is removed
//! only after the deletion of its last reference is durable, and only when
//! no writer holds it pinned: a crash between the two leaks the blob (the
//! sweep at open removes it), never removes a referenced one.
//!
//! Pins: a writer pins the hash before it writes (or finds) the file and
//! unpins it once the record naming it is durable (or was refused), so that
//! a sweep never removes a blob whose reference is on its way to the
//! journal. Pins live in memory: at open nothing is in flight. A pin whose
//! report was lost (its worker actor died before the acknowledgement) is
//! never released in this process: its blob may outlive its records until
//! the next open's sweep, a leak and never a loss.
//!
//! Reads check the size and the hash: a missing or damaged blob is a
//! [`StoreError::Blob`] naming its file, never bytes used silently.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Values up to this many bytes stay inline in their record; larger ones
/// become blobs. Small enough that a record stays far below sled's page
/// sizes, large enough that the common small JSON output costs no file.
pub const BLOB_INLINE_BYTES_MAX: usize = 4 << 10;

/// The folder of blobs in the data directory.
pub const BLOBS_DIR: &str = "blobs";

/// Prefix of the index `blobref/<hash>/<record key>`: who references a
/// blob.
pub(crate) const BLOB_REF_PREFIX: &str = "blobref/";
/// Prefix of the index `blobof/<record key>`: the blob a record holds.
pub(crate) const BLOB_OF_PREFIX: &str = "blobof/";

/// Prefix of temporary files (a blob being written).
pub(super) const TMP_PREFIX: &str = ".tmp-";

/// A reference to a blob: its content hash and size.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BlobRef {
    /// The blake3 hash of the content, 64 lower-case hex digits.
    pub hash: String,
    /// The content's size in bytes.
    pub bytes: u64,
}

impl BlobRef {
    /// The reference of `bytes`.
    pub fn of(bytes: &[u8]) -> BlobRef {
        BlobRef {
            hash: blake3::hash(bytes).to_hex().to_string(),
            bytes: bytes.len() as u64,
        }
    }

    /// Whether the hash is 64 lower-case hex digits (a reference decoded
    /// from a record is checked before it becomes a path).
    pub(super) fn is_well_formed(&self) -> bool {
        self.hash.len() == 64
            && self
                .hash
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }
}

/// The blob folder and its pins, shared by every handle of a store.
#[derive(Debug)]
pub(crate) struct Blobs {
    pub(super) dir: PathBuf,
    /// Pinned hashes and how many writers hold each. Also the lock under
    /// which a sweep checks references and removes a file.
    pub(super) pins: Mutex<HashMap<String, u32>>,
    /// Numbers temporary files apart.
    pub(super) tmp_seq: AtomicU64,
}

impl Blobs {
    pub(crate) fn new(data_dir: &Path) -> Blobs {
        Blobs {
            dir: data_dir.join(BLOBS_DIR),
            pins: Mutex::new(HashMap::new()),
            tmp_seq: AtomicU64::new(0),
        }
    }

    pub(super) fn pins(&self) -> std::sync::MutexGuard<'_, HashMap<String, u32>> {
        self.pins.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The key of the index record saying that `record_key` references `hash`.
pub(super) fn ref_key(hash: &str, record_key: &str) -> String {
    format!("{BLOB_REF_PREFIX}{hash}/{record_key}")
}

/// The key of the index record holding the blob of `record_key`.
pub(crate) fn of_key(record_key: &str) -> String {
    format!("{BLOB_OF_PREFIX}{record_key}")
}

pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}
