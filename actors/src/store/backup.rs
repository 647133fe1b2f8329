//! Backups: the store's content at one point between writes, as one
//! stream with a checksum, and a new data directory made from one.
//!
//! Every write of the store's content (the `write_sled` path, a
//! replicated apply, a snapshot install, a blob written or removed) holds
//! the backup gate shared; [`Store::backup_to`] holds it alone while it
//! reads the trees and blobs, so the stream is the store as of its last
//! write before the backup: in a replicated member, at one applied index.
//! The caller writes the stream to a local file (a spool) at disk speed,
//! so writers wait only for that read, never for a slow reader: serving or
//! uploading the spool happens after the gate is released.
//!
//! The stream: [`MAGIC`], then frames `[kind u8][length u32 BE][payload]`
//! — one header, every entry of the journal, snapshot, records and expiry
//! trees, every blob, then a trailer with the counts and the BLAKE3 of
//! every byte before it. The Raft log and the replicated state machine's
//! own values are not in it: a restored directory is a single engine, or a
//! new group's first member. A stream that ends before its trailer, or
//! whose checksum differs, is refused by [`restore`] and [`verify`] before
//! anything is made.

use std::io::{self, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::blobs::BlobRef;
use super::{Store, StoreError, StoreSettings, TreeId};

/// The first bytes of a backup: a name and the format's version.
pub const MAGIC: &[u8; 8] = b"WEIRBK01";
/// The largest frame a backup holds (a blob, a value): larger is damage.
pub const FRAME_BYTES_MAX: u32 = 1 << 30;
/// A frame's payload is read into a buffer of at most this much at first,
/// grown as its bytes arrive.
const PAYLOAD_RESERVE_BYTES: usize = 1 << 20;
/// Entries written to sled per batch by a restore.
const RESTORE_BATCH_ENTRIES: usize = 4_096;

const KIND_HEADER: u8 = 1;
const KIND_ENTRY: u8 = 2;
const KIND_BLOB: u8 = 3;
const KIND_TRAILER: u8 = 0xff;

/// What a backup says of itself, first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupHeader {
    /// The format (1).
    pub format: u32,
    /// When it was taken (ms since the epoch).
    pub created_ms: u64,
    /// The weir that took it.
    pub weir: String,
    /// The journal's last sequence in it: the point it is consistent at.
    pub journal_seq: u64,
    /// Whether the store was a replicated member's.
    pub replicated: bool,
}

/// What a backup holds, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackupSummary {
    /// Its header.
    pub header: BackupHeader,
    /// Tree entries.
    pub entries: u64,
    /// Blobs.
    pub blobs: u64,
    /// Bytes of the whole stream, trailer included.
    pub bytes: u64,
    /// The BLAKE3 of every byte before the trailer, hex.
    pub blake3: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Trailer {
    entries: u64,
    blobs: u64,
    blake3: String,
}

/// Why a backup cannot be read or restored.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Not a backup, or damaged: what, and where in it.
    #[error("backup {source_name}: {what}")]
    Damaged {
        /// The file or URL.
        source_name: String,
        /// What is wrong, with the byte offset.
        what: String,
    },
    /// Reading or writing failed.
    #[error("backup {source_name}: {error}")]
    Io {
        /// The file or URL.
        source_name: String,
        /// The error.
        error: io::Error,
    },
    /// The target directory cannot take it.
    #[error("restore into {dir}: {what}")]
    Target {
        /// The data directory.
        dir: PathBuf,
        /// Why.
        what: String,
    },
    /// The store failed while it was read or made.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A writer that hashes and counts what passes, in blocks: BLAKE3 is
/// fast on large inputs and slow on the few bytes of one frame's parts.
struct Hashing<W> {
    inner: W,
    hash: blake3::Hasher,
    bytes: u64,
    block: Vec<u8>,
}

/// Bytes hashed and written at once.
const HASH_BLOCK_BYTES: usize = 1 << 20;

impl<W: Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Hashing {
            inner,
            hash: blake3::Hasher::new(),
            bytes: 0,
            block: Vec::with_capacity(HASH_BLOCK_BYTES),
        }
    }

    fn frame(&mut self, kind: u8, payload: &[&[u8]]) -> io::Result<()> {
        let len: usize = payload.iter().map(|p| p.len()).sum();
        let len = u32::try_from(len)
            .ok()
            .filter(|l| *l <= FRAME_BYTES_MAX)
            .ok_or_else(|| io::Error::other(format!("a frame of {len} bytes is too large")))?;
        self.write_all(&[kind])?;
        self.write_all(&len.to_be_bytes())?;
        for p in payload {
            self.write_all(p)?;
        }
        Ok(())
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.bytes += bytes.len() as u64;
        self.block.extend_from_slice(bytes);
        if self.block.len() >= HASH_BLOCK_BYTES {
            self.drain()?;
        }
        Ok(())
    }

    /// Hashes and writes the block.
    fn drain(&mut self) -> io::Result<()> {
        self.hash.update(&self.block);
        self.inner.write_all(&self.block)?;
        self.block.clear();
        Ok(())
    }
}

fn tree_byte(t: TreeId) -> u8 {
    match t {
        TreeId::Journal => 0,
        TreeId::Snapshot => 1,
        TreeId::Records => 2,
        TreeId::Expiry => 3,
    }
}

fn tree_of_byte(b: u8) -> Option<TreeId> {
    Some(match b {
        0 => TreeId::Journal,
        1 => TreeId::Snapshot,
        2 => TreeId::Records,
        3 => TreeId::Expiry,
        _ => return None,
    })
}

const TREES: [TreeId; 4] = [
    TreeId::Journal,
    TreeId::Snapshot,
    TreeId::Records,
    TreeId::Expiry,
];

impl Store {
    /// The journal's last sequence as its tree holds it (a follower's
    /// journal is written by applies, not by a writer that counts).
    fn journal_end(&self) -> Result<u64, StoreError> {
        Ok(
            match self.inner.journal.last().map_err(|e| self.sled_err(e))? {
                Some((k, _)) => k
                    .as_ref()
                    .try_into()
                    .map(u64::from_be_bytes)
                    .unwrap_or_default(),
                None => 0,
            },
        )
    }

    /// Writes a backup of the store into `out`, with every write of the
    /// store's content held back while it reads (see the module). `out`
    /// should be a local file: the gate is held until this returns.
    pub fn backup_to(
        &self,
        out: &mut dyn Write,
        created_ms: u64,
    ) -> Result<BackupSummary, BackupError> {
        let io_err = |error| BackupError::Io {
            source_name: "(being written)".into(),
            error,
        };
        let _gate = self
            .inner
            .backup_gate
            .write()
            .unwrap_or_else(|p| p.into_inner());
        let journal_seq = self.journal_end()?;
        let header = BackupHeader {
            format: 1,
            created_ms,
            weir: env!("CARGO_PKG_VERSION").to_string(),
            journal_seq,
            replicated: self.is_replicated() || !self.inner.replica.is_empty(),
        };
        let mut w = Hashing::new(out);
        w.write_all(MAGIC).map_err(io_err)?;
        let head = rmp_serde::to_vec_named(&header).map_err(|e| io_err(io::Error::other(e)))?;
        w.frame(KIND_HEADER, &[&head]).map_err(io_err)?;
        let mut entries = 0u64;
        for tree in TREES {
            for item in self.tree_of(tree).iter() {
                let (k, v) = item.map_err(|e| self.sled_err(e))?;
                let key_len = u32::try_from(k.len()).unwrap_or(u32::MAX).to_be_bytes();
                w.frame(KIND_ENTRY, &[&[tree_byte(tree)], &key_len, &k, &v])
                    .map_err(io_err)?;
                entries += 1;
            }
        }
        let paths = self.blob_files().map_err(|source| StoreError::Dir {
            dir: self.inner.blobs.dir.clone(),
            source,
        })?;
        let mut blobs = 0u64;
        for path in paths {
            let bytes = std::fs::read(&path).map_err(|source| StoreError::Dir {
                dir: path.clone(),
                source,
            })?;
            w.frame(KIND_BLOB, &[&bytes]).map_err(io_err)?;
            blobs += 1;
        }
        w.drain().map_err(io_err)?;
        let blake3 = w.hash.finalize().to_hex().to_string();
        let trailer = Trailer {
            entries,
            blobs,
            blake3: blake3.clone(),
        };
        let tail = rmp_serde::to_vec_named(&trailer).map_err(|e| io_err(io::Error::other(e)))?;
        // The trailer is not hashed: it carries the hash.
        let mut frame = vec![KIND_TRAILER];
        frame.extend_from_slice(&(tail.len() as u32).to_be_bytes());
        frame.extend_from_slice(&tail);
        w.inner.write_all(&frame).map_err(io_err)?;
        w.inner.flush().map_err(io_err)?;
        let bytes = w.bytes + frame.len() as u64;
        tracing::info!(dir = %self.dir().display(), journal_seq, entries, blobs, bytes, "store: backup taken");
        Ok(BackupSummary {
            header,
            entries,
            blobs,
            bytes,
            blake3,
        })
    }
}

/// One frame read.
enum Frame {
    Header(BackupHeader),
    Entry(TreeId, Vec<u8>, Vec<u8>),
    Blob(Vec<u8>),
    Trailer(Trailer),
}

/// Reads frames, hashing what comes before the trailer.
struct Reader<'a, R> {
    inner: R,
    name: &'a str,
    hash: blake3::Hasher,
    offset: u64,
}

impl<'a, R: Read> Reader<'a, BufReader<R>> {
    /// A reader of `input`, its first bytes checked.
    fn open(input: R, name: &'a str) -> Result<Self, BackupError> {
        let mut r = Reader {
            inner: BufReader::with_capacity(1 << 20, input),
            name,
            hash: blake3::Hasher::new(),
            offset: 0,
        };
        r.magic()?;
        Ok(r)
    }
}

impl<R: Read> Reader<'_, R> {
    fn damaged(&self, what: impl std::fmt::Display) -> BackupError {
        BackupError::Damaged {
            source_name: self.name.to_string(),
            what: format!("{what} (at byte {})", self.offset),
        }
    }

    /// The stream ended inside `what`.
    fn incomplete(&self, what: &str) -> BackupError {
        self.damaged(format!(
            "it ends inside {what}, before its trailer: an incomplete backup (interrupted?)"
        ))
    }

    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), BackupError> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.offset += buf.len() as u64;
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(self.incomplete(what)),
            Err(error) => Err(BackupError::Io {
                source_name: self.name.to_string(),
                error,
            }),
        }
    }

    /// A frame's payload of `len` bytes. Memory grows with the bytes read,
    /// not with the length a damaged head claims (up to a GiB).
    fn payload(&mut self, len: u32) -> Result<Vec<u8>, BackupError> {
        let mut payload = Vec::with_capacity((len as usize).min(PAYLOAD_RESERVE_BYTES));
        let read = (&mut self.inner)
            .take(u64::from(len))
            .read_to_end(&mut payload)
            .map_err(|error| BackupError::Io {
                source_name: self.name.to_string(),
                error,
            })?;
        self.offset += read as u64;
        if read < len as usize {
            return Err(self.incomplete("a frame"));
        }
        Ok(payload)
    }

    fn magic(&mut self) -> Result<(), BackupError> {
        let mut m = [0u8; 8];
        self.exact(&mut m, "its first bytes")?;
        if &m != MAGIC {
            return Err(self.damaged(format!(
                "not a weir backup: it starts with {:?}, not {:?}",
                String::from_utf8_lossy(&m),
                String::from_utf8_lossy(MAGIC)
            )));
        }
        self.hash.update(&m);
        Ok(())
    }

    fn next(&mut self) -> Result<Frame, BackupError> {
        let mut head = [0u8; 5];
        self.exact(&mut head, "a frame's head")?;
        let kind = head[0];
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        if len > FRAME_BYTES_MAX {
            return Err(self.damaged(format!(
                "a frame of {len} bytes (at most {FRAME_BYTES_MAX})"
            )));
        }
        let mut payload = self.payload(len)?;
        if kind != KIND_TRAILER {
            self.hash.update(&head);
            self.hash.update(&payload);
        }
        match kind {
            KIND_HEADER => rmp_serde::from_slice(&payload)
                .map(Frame::Header)
                .map_err(|e| self.damaged(format!("its header does not decode: {e}"))),
            KIND_ENTRY => {
                if payload.len() < 5 {
                    return Err(self.damaged("an entry shorter than its own head"));
                }
                let tree = tree_of_byte(payload[0]).ok_or_else(|| {
                    self.damaged(format!("an entry of unknown tree {}", payload[0]))
                })?;
                let key_len =
                    u32::from_be_bytes([payload[1], payload[2], payload[3], payload[4]]) as usize;
                if 5 + key_len > payload.len() {
                    return Err(self.damaged("an entry whose key runs past it"));
                }
                let value = payload.split_off(5 + key_len);
                let key = payload[5..].to_vec();
                Ok(Frame::Entry(tree, key, value))
            }
            KIND_BLOB => Ok(Frame::Blob(payload)),
            KIND_TRAILER => rmp_serde::from_slice(&payload)
                .map(Frame::Trailer)
                .map_err(|e| self.damaged(format!("its trailer does not decode: {e}"))),
            other => Err(self.damaged(format!("a frame of unknown kind {other}"))),
        }
    }

    /// Checks the trailer against what was read; then nothing may follow.
    fn finish(
        &mut self,
        header: Option<BackupHeader>,
        trailer: Trailer,
        (entries, blobs): (u64, u64),
    ) -> Result<BackupSummary, BackupError> {
        let got = self.hash.finalize().to_hex().to_string();
        if got != trailer.blake3 {
            return Err(self.damaged(format!(
                "checksum mismatch: its trailer records BLAKE3 {} but its content hashes to {got}",
                trailer.blake3
            )));
        }
        if (entries, blobs) != (trailer.entries, trailer.blobs) {
            return Err(self.damaged(format!(
                "its trailer counts {} entries and {} blobs, it holds {entries} and {blobs}",
                trailer.entries, trailer.blobs
            )));
        }
        let mut rest = [0u8; 1];
        if matches!(self.inner.read(&mut rest), Ok(n) if n > 0) {
            return Err(self.damaged("bytes after its trailer"));
        }
        let header = header.ok_or_else(|| self.damaged("no header"))?;
        Ok(BackupSummary {
            header,
            entries,
            blobs,
            bytes: self.offset,
            blake3: got,
        })
    }
}

/// Reads a whole backup and checks it: its checksum, its counts, its
/// frames. Nothing is written.
pub fn verify(input: impl Read, name: &str) -> Result<BackupSummary, BackupError> {
    let mut r = Reader::open(input, name)?;
    let (mut header, mut entries, mut blobs) = (None, 0u64, 0u64);
    loop {
        match r.next()? {
            Frame::Header(h) => header = Some(h),
            Frame::Entry(..) => entries += 1,
            Frame::Blob(_) => blobs += 1,
            Frame::Trailer(t) => return r.finish(header, t, (entries, blobs)),
        }
    }
}

/// Makes data directory `dir` (absent or empty) from a backup, checked as
/// it is read: built beside `dir` and renamed into place only once the
/// whole stream and its checksum are right, so a damaged or cut backup
/// leaves nothing behind. The result opens as a single engine, or as a new
/// group's first member (no Raft log, vote or membership).
pub fn restore(
    input: impl Read,
    name: &str,
    dir: &Path,
    settings: StoreSettings,
) -> Result<BackupSummary, BackupError> {
    let target = |what: String| BackupError::Target {
        dir: dir.to_path_buf(),
        what,
    };
    if let Ok(mut entries) = std::fs::read_dir(dir) {
        if entries.next().is_some() {
            return Err(target(
                "the directory is not empty: restore into a new one (a store is never overwritten)"
                    .into(),
            ));
        }
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| target(e.to_string()))?;
    let file_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "data".into());
    let building = parent.join(format!(".{file_name}.restoring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&building);
    let built = build(input, name, &building, settings);
    match built {
        Ok(summary) => {
            if dir.exists() {
                std::fs::remove_dir(dir).map_err(|e| target(e.to_string()))?;
            }
            std::fs::rename(&building, dir).map_err(|e| target(e.to_string()))?;
            if let Ok(d) = std::fs::File::open(parent) {
                let _ = d.sync_all();
            }
            Ok(summary)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&building);
            Err(e)
        }
    }
}

fn build(
    input: impl Read,
    name: &str,
    dir: &Path,
    settings: StoreSettings,
) -> Result<BackupSummary, BackupError> {
    let (store, _) = Store::open(dir, settings)?;
    let mut r = Reader::open(input, name)?;
    let (mut header, mut entries, mut blobs) = (None, 0u64, 0u64);
    let mut batches: Vec<(TreeId, super::kv::Batch, usize)> = Vec::new();
    let flush = |store: &Store, batches: &mut Vec<(TreeId, super::kv::Batch, usize)>| {
        for (tree, batch, _) in batches.drain(..) {
            store
                .tree_of(tree)
                .apply_batch(batch)
                .map_err(|e| store.sled_err(e))?;
        }
        Ok::<(), StoreError>(())
    };
    let summary = loop {
        match r.next()? {
            Frame::Header(h) => {
                if h.format != 1 {
                    return Err(
                        r.damaged(format!("format {} (this weir reads format 1)", h.format))
                    );
                }
                header = Some(h);
            }
            Frame::Entry(tree, k, v) => {
                entries += 1;
                let slot = match batches.iter().position(|(t, _, _)| *t == tree) {
                    Some(i) => i,
                    None => {
                        batches.push((tree, super::kv::Batch::default(), 0));
                        batches.len() - 1
                    }
                };
                batches[slot].1.insert(k, v);
                batches[slot].2 += 1;
                if batches[slot].2 >= RESTORE_BATCH_ENTRIES {
                    flush(&store, &mut batches)?;
                }
            }
            Frame::Blob(bytes) => {
                blobs += 1;
                store.write_blob_file(&BlobRef::of(&bytes), &bytes)?;
            }
            Frame::Trailer(t) => break r.finish(header, t, (entries, blobs))?,
        }
    };
    flush(&store, &mut batches)?;
    store.sync_replica()?;
    let last = store.journal_end()?;
    store
        .inner
        .last_seq
        .store(last, std::sync::atomic::Ordering::Release);
    drop(store);
    tracing::info!(dir = %dir.display(), entries, blobs, journal_seq = summary.header.journal_seq, "store: restored from a backup");
    Ok(summary)
}
