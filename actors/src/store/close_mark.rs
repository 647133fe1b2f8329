//! The mark a clean close leaves (`DATA/store.mark`, read by the `damage`
//! module at the next open) and, beside it, the digest of sled's files (the
//! `closed_files` module): written once sled has closed, while weir's
//! directory lock is still held.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::closed_files;
use super::content::Content;
use super::Durability;

/// The mark file: the last journal sequence of a durable store when it
/// last closed, and its content if nothing wrote since.
pub(crate) const MARK_FILE: &str = "store.mark";

/// The mark a closing store writes once sled is closed.
pub(super) struct PendingMark {
    pub(super) dir: PathBuf,
    pub(super) durability: Durability,
    pub(super) last_seq: u64,
    /// Bytes of log written since the open (see `Inner::logged_bytes`).
    pub(super) logged_bytes: u64,
    pub(super) content: Option<Content>,
}

/// Writes the mark the store's drop left, after the fields before it (sled's
/// handles) are dropped and before the directory lock is: with its content,
/// the digest of sled's files goes beside it (see the `closed_files`
/// module), taken once sled has let go of them.
#[derive(Default)]
pub(super) struct Closing(pub(super) Mutex<Option<PendingMark>>);

impl Drop for Closing {
    fn drop(&mut self) {
        let Some(mark) = self.0.get_mut().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let dir = &mark.dir;
        // Whatever this close writes, an older digest must not outlive it.
        if let Err(e) = closed_files::remove(dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot remove the store's old files digest");
            return write_mark(dir, mark.durability, mark.last_seq, None);
        }
        // The mark first: a kill while the digest is taken then leaves a
        // whole mark, and the next open reads every tree back.
        write_mark(dir, mark.durability, mark.last_seq, mark.content);
        if let Some(content) = mark.content {
            write_digest(dir, mark.last_seq, mark.logged_bytes, content);
        }
    }
}

/// Has sled write its page table (the `page_table` module), then digests
/// sled's files once sled has released them and writes the digest
/// beside the mark just written; on any failure, writes none (the next
/// open then checks the content in full).
fn write_digest(dir: &Path, last_seq: u64, logged_bytes: u64, content: Content) {
    let sled = dir.join("sled");
    let waited = std::time::Instant::now();
    if !super::page_table::write_at_close(&sled, logged_bytes) {
        tracing::warn!(dir = %dir.display(), "sled's files not released with their page table written: no digest of them, the next open checks the content in full");
        return;
    }
    tracing::debug!(dir = %dir.display(), waited_ms = waited.elapsed().as_secs_f64() * 1e3, "sled released its files, its page table written");
    let written = closed_files::Digest::of(&sled).and_then(|digest| {
        closed_files::Closed {
            last_seq,
            content,
            digest,
        }
        .write(dir)
    });
    // A failed write renamed nothing, and the close removed the old digest
    // first: no digest is left.
    if let Err(e) = written {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot write the digest of the store's files");
    }
}

/// Writes the mark of a store: its last journal sequence, which is durable
/// in the `fsync` and `flush` modes (a commit returns after its flush),
/// and at a clean close its content. Written to a temporary file, synced
/// and renamed, so a crash leaves the old mark or the new one.
pub(crate) fn write_mark(
    store_dir: &Path,
    durability: Durability,
    last_seq: u64,
    content: Option<Content>,
) {
    if durability == Durability::None {
        return;
    }
    let mut text = format!("last_seq {last_seq}\n");
    if let Some(content) = content {
        text.push_str(&format!("content {content}\n"));
    }
    let written = closed_files::write_replacing(store_dir, MARK_FILE, &text)
        .and_then(|()| std::fs::File::open(store_dir)?.sync_all());
    if let Err(e) = written {
        tracing::warn!(dir = %store_dir.display(), error = %e, "cannot write the store's mark");
    }
}
