//! The store's one error type: every refusal names the data directory, the
//! tree and the key or file it concerns.

use std::path::PathBuf;

use weir_core::codec::CodecError;

/// A failure of the store. Messages say what and where.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process (or this one) has the data directory open.
    #[error("data directory {0} is in use by another weir process")]
    InUse(PathBuf),
    /// The data directory could not be created or opened.
    #[error("data directory {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// sled failed.
    #[error("store {dir}: {source}")]
    Sled {
        /// The data directory.
        dir: PathBuf,
        /// The cause.
        source: sled::Error,
    },
    /// A write into sled failed (what the store was writing is named).
    #[error("store {dir}: {what} failed: {source}")]
    Write {
        /// The data directory.
        dir: PathBuf,
        /// What was written: `journal commit`, `record batch`, ...
        what: &'static str,
        /// The cause.
        source: sled::Error,
    },
    /// A replicated write was not committed by a majority (clustered
    /// mode): the leadership was lost or the majority is out of reach.
    #[error("store {dir}: {what} was not committed by the group: {reason}")]
    NotReplicated {
        /// The data directory.
        dir: PathBuf,
        /// What was written.
        what: String,
        /// Why.
        reason: String,
    },
    /// sled's flush of its log failed (in the `fsync` mode, its
    /// fdatasync too: sled makes it).
    #[error("store {dir}: flush of {dir}/sled failed: {source}")]
    Flush {
        /// The data directory.
        dir: PathBuf,
        /// The cause.
        source: sled::Error,
    },
    /// An fsync of the data directory's files failed.
    #[error("store {dir}: fsync of {file}: {source}")]
    Fsync {
        /// The data directory.
        dir: PathBuf,
        /// The file.
        file: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A stored value does not decode.
    #[error("store {dir}: tree {tree}, key {key}: {source}")]
    Corrupt {
        /// The data directory.
        dir: PathBuf,
        /// The tree.
        tree: &'static str,
        /// The key, printable.
        key: String,
        /// The cause.
        source: CodecError,
    },
    /// The journal or snapshot is inconsistent (a gap in sequences, a
    /// snapshot that does not restore).
    #[error("store {dir}: tree {tree}: {what}")]
    Inconsistent {
        /// The data directory.
        dir: PathBuf,
        /// The tree.
        tree: &'static str,
        /// What is wrong.
        what: String,
    },
    /// The filesystem of the data directory has less free space than the
    /// reserve: the write was refused and the store fail-stopped before
    /// sled could run out of space mid-write.
    #[error(
        "store {dir}: disk full: {free_bytes} bytes free, under the reserve of {reserve_bytes} bytes; \
         weir stopped writing so that nothing acknowledged is lost: free space on the filesystem \
         of {dir} (or enlarge it), then run again; the work resumes where it stopped"
    )]
    DiskFull {
        /// The data directory.
        dir: PathBuf,
        /// Free bytes found.
        free_bytes: u64,
        /// The reserve the store keeps.
        reserve_bytes: u64,
    },
    /// The store's files are damaged: sled refused them or panicked on them.
    #[error(
        "store {dir}: {file} is damaged ({what}); restore the data directory from a \
         backup, or move it aside to start empty"
    )]
    Damaged {
        /// The data directory.
        dir: PathBuf,
        /// The file (or files) found damaged.
        file: String,
        /// What was found.
        what: String,
    },
    /// A write failed earlier (the second field says which, and why); the
    /// store refuses writes until reopened.
    #[error("store {0} refuses writes after an earlier failure ({1}); reopen it")]
    FailStopped(PathBuf, String),
    /// A file of the Raft log could not be read, written or removed.
    #[error("raft log {path}: cannot {what}: {source}")]
    RaftLog {
        /// The file.
        path: PathBuf,
        /// What was done: `append to`, `read`, ...
        what: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// A blob named by a record is missing or damaged.
    #[error("blob {path}: {what}")]
    Blob {
        /// The blob's file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// A blob could not be written.
    #[error("blob {path}: cannot write: {source}")]
    BlobWrite {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An op is larger than the entry limit.
    #[error("op of {size} bytes is over the entry limit of {limit} bytes (key {key:?})")]
    EntryTooLarge {
        /// The op's key (for an Enqueue) or kind.
        key: String,
        /// Its encoded size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The journal is over its limit: a snapshot is overdue.
    #[error("journal of {bytes} bytes is over its limit of {limit} bytes; a snapshot is overdue")]
    JournalFull {
        /// Journal bytes since the last snapshot.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// A value could not be encoded.
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// What.
        what: String,
        /// The cause.
        source: CodecError,
    },
}

/// A printable form of a key: UTF-8 as is, else hex.
pub(crate) fn printable(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) if !s.chars().any(char::is_control) => s.to_string(),
        _ => key.iter().map(|b| format!("{b:02x}")).collect(),
    }
}
