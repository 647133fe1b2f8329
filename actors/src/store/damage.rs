//! Damaged store files: found at open, named, never a panic.
//!
//! sled 0.34.7 reports a damaged log as "Read corrupted data at file offset
//! None backtrace ()", and panics on some damage (a truncated segment
//! indexes out of bounds in `segment.rs`). [`super::Store::open`] runs
//! sled's open and the replay under `catch_unwind`; this module turns what
//! comes out into a [`StoreError::Damaged`] that names the files and what
//! was found.
//!
//! Two kinds of damage sled cannot see, checked here:
//! - a missing `sled/db` beside sled's other files: sled would start an
//!   empty database in its place, silently;
//! - a log that lost its tail (a truncated file, a torn copy): sled recovers
//!   up to the last intact segment as after a crash, silently dropping
//!   commits that were acknowledged. A mark file (`DATA/store.mark`),
//!   written when a durable store closes, records the last journal
//!   sequence; an open that recovers less refuses the store. The mark is a
//!   lower bound (commits after it are durable too), so a crash after the
//!   mark never trips it.

use std::any::Any;
use std::path::Path;

use super::closed_files;
use super::content::Content;
use super::panics;
use super::replay::Recovered;
use super::{Store, StoreError};

pub(crate) use super::close_mark::MARK_FILE;

/// sled's files in the data directory, with their sizes, for messages.
fn sled_files(dir: &Path) -> String {
    let sled = dir.join("sled");
    let mut files: Vec<String> = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&sled) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            match e.metadata() {
                Ok(m) if m.is_dir() => files.push(format!("sled/{name}/")),
                Ok(m) => files.push(format!("sled/{name} ({} bytes)", m.len())),
                Err(_) => files.push(format!("sled/{name}")),
            }
        }
    }
    files.sort();
    if files.is_empty() {
        "sled/".to_string()
    } else {
        files.join(", ")
    }
}

/// Refuses a data directory whose `sled/db` is missing while sled's other
/// files are there.
pub(crate) fn check_files(dir: &Path) -> Result<(), StoreError> {
    let sled = dir.join("sled");
    let Ok(entries) = std::fs::read_dir(&sled) else {
        return Ok(());
    };
    let others: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if !others.is_empty() && !sled.join("db").exists() {
        return Err(StoreError::Damaged {
            dir: dir.to_path_buf(),
            file: "sled/db".into(),
            what: format!(
                "it is missing while sled's other files are there ({})",
                sled_files(dir)
            ),
        });
    }
    Ok(())
}

/// An open's error, as the user should see it: sled's corruption and
/// read errors become [`StoreError::Damaged`] naming the file.
pub(crate) fn classify(dir: &Path, e: StoreError) -> StoreError {
    let StoreError::Sled { source, .. } = &e else {
        return e;
    };
    let (file, what) = match source {
        sled::Error::Corruption { at, .. } => match at {
            Some(sled::DiskPtr::Inline(offset)) => (
                "sled/db".to_string(),
                format!("sled found corrupted data at offset {offset}"),
            ),
            Some(sled::DiskPtr::Blob(offset, blob)) => (
                format!("sled/blobs/{blob}"),
                format!("sled found a corrupted value (its pointer at offset {offset} of sled/db)"),
            ),
            None => (
                sled_files(dir),
                "sled found corrupted data at an unknown offset".to_string(),
            ),
        },
        sled::Error::Io(io)
            if matches!(
                io.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
            ) =>
        {
            (sled_files(dir), format!("sled could not read them: {io}"))
        }
        sled::Error::Unsupported(what) => (
            sled_files(dir),
            format!("sled refused them: {}", what.trim()),
        ),
        sled::Error::ReportableBug(what) => (
            sled_files(dir),
            format!("sled failed on them: {}", what.trim()),
        ),
        _ => return e,
    };
    StoreError::Damaged {
        dir: dir.to_path_buf(),
        file,
        what,
    }
}

/// A panic of sled's open or the replay, as [`StoreError::Damaged`].
pub(crate) fn from_panic(dir: &Path, panic: &(dyn Any + Send)) -> StoreError {
    let msg = panics::message(panic).unwrap_or_else(|| "no message".into());
    tracing::debug!(dir = %dir.display(), panic = %msg, "store open panicked: the files are damaged");
    StoreError::Damaged {
        dir: dir.to_path_buf(),
        file: sled_files(dir),
        what: format!("sled panicked reading them: {msg}"),
    }
}

/// What the mark file says: the last journal sequence of the store when
/// it last closed, and what it held then if nothing wrote since.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) last_seq: u64,
    pub(crate) content: Option<Content>,
}

impl Mark {
    fn parse(text: &str) -> Option<Mark> {
        let mut lines = text.lines();
        let last_seq = lines
            .next()?
            .strip_prefix("last_seq ")?
            .trim()
            .parse::<u64>()
            .ok()?;
        let content = match lines.next() {
            None => None,
            Some(line) => Some(Content::parse(line.strip_prefix("content ")?)?),
        };
        if lines.any(|l| !l.trim().is_empty()) {
            return None;
        }
        Some(Mark { last_seq, content })
    }
}

/// The mark of the store in `dir`, if it has one.
pub(crate) fn read_mark(dir: &Path) -> Result<Option<Mark>, StoreError> {
    let Ok(text) = std::fs::read_to_string(dir.join(MARK_FILE)) else {
        return Ok(None);
    };
    Mark::parse(&text)
        .map(Some)
        .ok_or_else(|| StoreError::Damaged {
            dir: dir.to_path_buf(),
            file: MARK_FILE.into(),
            what: format!(
                "it holds {text:?}, not \"last_seq N\" and an optional \"content ENTRIES BYTES CRC\" \
                 (removing it opens the store without the checks it carries)"
            ),
        })
}

/// Refuses a store whose entries differ from those the mark recorded at
/// its last clean close (see the `content` module), then writes the mark
/// back without them: the store is about to change. Runs right after
/// sled's open, before anything writes.
///
/// `unchanged`: [`files_unchanged`] found sled's files the bytes the close
/// left, so the content it recorded is what sled recovers: not read again.
pub(crate) fn check_content(dir: &Path, db: &sled::Db, unchanged: bool) -> Result<(), StoreError> {
    let Some(mark) = read_mark(dir)? else {
        return forget_files(dir);
    };
    let Some(marked) = mark.content else {
        return forget_files(dir);
    };
    if unchanged {
        tracing::debug!(dir = %dir.display(), entries = marked.entries, "store files unchanged since their clean close: content not read again");
        return drop_content(dir);
    }
    let got = Content::of(db).map_err(|source| StoreError::Sled {
        dir: dir.to_path_buf(),
        source,
    })?;
    if got != marked {
        return Err(StoreError::Damaged {
            dir: dir.to_path_buf(),
            file: sled_files(dir),
            what: format!(
                "sled recovered {got} (entries, bytes, CRC-32) where the store held {marked} when \
                 it last closed ({MARK_FILE}): part of its log was skipped as damaged (were \
                 {MARK_FILE} the damaged file, removing it would open the store without this \
                 check)"
            ),
        });
    }
    tracing::debug!(dir = %dir.display(), entries = got.entries, "store content matches its mark");
    drop_content(dir)
}

/// Cuts the mark back to its first line, the sequence, and syncs it. A
/// cut needs no room, so this works on a full disk; a crash leaves the
/// mark cut or whole, and a whole one is only checked against a store
/// nothing wrote to yet.
fn drop_content(dir: &Path) -> Result<(), StoreError> {
    forget_files(dir)?;
    let path = dir.join(MARK_FILE);
    let cut = (|| {
        let text = std::fs::read_to_string(&path)?;
        let first = text.find('\n').map_or(text.len(), |i| i + 1);
        let f = std::fs::OpenOptions::new().write(true).open(&path)?;
        f.set_len(first as u64)?;
        f.sync_all()
    })();
    cut.map_err(|source| StoreError::Dir { dir: path, source })
}

/// Removes the files digest (see the `closed_files` module) before
/// anything writes: it vouches only for the files as the close left them.
fn forget_files(dir: &Path) -> Result<(), StoreError> {
    closed_files::remove(dir).map_err(|source| StoreError::Dir {
        dir: dir.join(closed_files::FILES_FILE),
        source,
    })
}

/// Whether sled's files are, byte for byte, those a clean close digested
/// beside the mark it wrote (see the `closed_files` module). Runs before
/// sled opens them: sled's open writes.
pub(crate) fn files_unchanged(dir: &Path) -> bool {
    let (Ok(Some(mark)), Some(closed)) = (read_mark(dir), closed_files::Closed::read(dir)) else {
        return false;
    };
    // Written by the same close as the mark, or not to be trusted.
    if mark.last_seq != closed.last_seq || mark.content != Some(closed.content) {
        return false;
    }
    let began = std::time::Instant::now();
    match closed_files::Digest::of(&dir.join("sled")) {
        Ok(now) if now == closed.digest => {
            tracing::debug!(dir = %dir.display(), bytes = now.bytes, digest_ms = began.elapsed().as_secs_f64() * 1e3, "store files as their clean close left them");
            true
        }
        Ok(now) => {
            tracing::info!(dir = %dir.display(), closed = %closed.digest, now = %now, "store files changed since their clean close: the open checks their content");
            false
        }
        Err(e) => {
            tracing::info!(dir = %dir.display(), error = %e, "store files do not read as bytes: the open checks their content");
            false
        }
    }
}

/// Refuses a store that recovered less of its journal than it held when
/// it last closed.
pub(crate) fn check_mark(store: &Store, recovered: &Recovered) -> Result<(), StoreError> {
    let Some(mark) = read_mark(store.dir())? else {
        return Ok(());
    };
    let marked = mark.last_seq;
    let got = store.last_seq();
    if got < marked {
        return Err(StoreError::Damaged {
            dir: store.dir().to_path_buf(),
            file: sled_files(store.dir()),
            what: format!(
                "the journal ends at sequence {got} but reached {marked} when the store last \
                 closed ({MARK_FILE}): the log lost its tail ({} tickets recovered)",
                recovered.state.len()
            ),
        });
    }
    Ok(())
}
