//! sled's page table, written at a clean close so the next open reads no
//! log.
//!
//! sled 0.34 writes its page table to a snapshot file (`sled/snap.*`) only
//! while it opens, after reading all the log written since the snapshot
//! before: an open pays for everything written since the last open (at
//! 100k pending tickets 11 MB, most of a 30 ms open; at 1 M 68 MB, most of
//! 120 ms). So a clean close, once sled has let go of its files, opens
//! them once more and closes them: that open reads the log and writes the
//! snapshot, and the next start reads the snapshot alone. The cost moves
//! from the start, where the first dispatch waits for it, to the stop;
//! only when a MiB of log or more was written since the open
//! ([`PAGE_TABLE_AFTER_LOG_BYTES`]): less, the next open reads it faster
//! than this close would open sled.
//!
//! Nothing the store holds changes: an open replays sled's own log into
//! the same trees. It runs before the files' digest is taken (the
//! `closed_files` module), so the digest vouches for the files as this
//! open left them. A kill during it leaves the mark whole and no digest:
//! the next open reads the log and checks the content in full, as after
//! any close that wrote no digest. A crash is not a clean close: its next
//! open still reads all the log since the last open.

use std::path::Path;
use std::time::Instant;

use super::closed_files;

/// Below this many bytes of log written since the open, a close leaves
/// the page table as it is: the next open reads that log in a few ms,
/// about what this close's own open would cost (a `weir run
/// --until-idle` of one node was 4-5 ms slower with it, 39 -> 44 ms).
pub(super) const PAGE_TABLE_AFTER_LOG_BYTES: u64 = 1 << 20;

/// Once sled has released its files in `sled_dir`: when `logged_bytes` of
/// log were written since the open, opens them and closes them again,
/// leaving sled's page table written. Returns whether sled let go of its
/// files and, if it was to be written, the page table was (only then may
/// they be digested).
pub(super) fn write_at_close(sled_dir: &Path, logged_bytes: u64) -> bool {
    let db_path = sled_dir.join("db");
    if !closed_files::wait_sled_released(&db_path, closed_files::SLED_RELEASE_WAIT) {
        return false;
    }
    if logged_bytes < PAGE_TABLE_AFTER_LOG_BYTES {
        return true;
    }
    if let Err(e) = remove_unfinished(sled_dir) {
        tracing::warn!(dir = %sled_dir.display(), error = %e, "sled's page table not written at close");
        return false;
    }
    let started = Instant::now();
    // A small cache: this open only reads the log through.
    let opened = sled::Config::new()
        .path(sled_dir)
        .cache_capacity(PAGE_TABLE_CACHE_BYTES)
        .flush_every_ms(None)
        .open();
    let written = match opened {
        Ok(db) => {
            let flushed = db.flush();
            drop(db);
            flushed.map(|_| ())
        }
        Err(e) => Err(e),
    };
    if let Err(e) = &written {
        // No digest then: the next open reads the log and checks the
        // content in full, as after any close that wrote none.
        tracing::warn!(dir = %sled_dir.display(), error = %e, "sled's page table not written at close");
    }
    let released = closed_files::wait_sled_released(&db_path, closed_files::SLED_RELEASE_WAIT);
    tracing::debug!(
        dir = %sled_dir.display(),
        logged_bytes,
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        released,
        "store: sled's page table written at close"
    );
    written.is_ok() && released
}

/// sled's cache for the close's open (bytes).
const PAGE_TABLE_CACHE_BYTES: u64 = 8 << 20;

/// Removes the page tables sled began and never finished in `sled_dir`
/// (`snap.<lsn>.generating`), before sled opens it. sled writes a page
/// table to that name, syncs it and renames it; a kill before the rename
/// leaves it, and sled 0.34 then takes it for its newest page table and
/// refuses the store as corrupted. It is written while sled opens, after
/// reading the log and before changing any segment, so without it sled
/// reads the page table before it and the log, as that open did.
pub(super) fn remove_unfinished(sled_dir: &Path) -> std::io::Result<()> {
    let Ok(entries) = std::fs::read_dir(sled_dir) else {
        // No sled files yet: a new store.
        return Ok(());
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            std::fs::remove_file(entry.path())?;
            tracing::warn!(file = %entry.path().display(), "store: removed a page table sled began and never finished (a kill while it opened)");
        }
    }
    Ok(())
}
