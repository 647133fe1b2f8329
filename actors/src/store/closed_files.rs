//! The digest of sled's files as a clean close left them (`DATA/store.files`),
//! which lets the next open skip reading every tree back.
//!
//! The mark's content (see the `content` module) is there to catch damage:
//! sled skips a damaged message of its stable log silently. Checking it
//! means reading every tree through sled's cache: at 100k pending tickets
//! that was two thirds of the open's time and half its memory. A damaged
//! message is a changed byte of a file, and reading the files as bytes is
//! cheaper than reading them as trees: a stream through one buffer at the
//! speed of CRC-32, which touches no cache of sled's. So a clean close,
//! once sled has let go of its files, also writes their digest, and the
//! next open, before sled touches them, digests them again:
//! - the same digest: the files are the bytes the close left, whose content
//!   the mark recorded; the content check is not needed;
//! - any other (a byte flipped, a file cut or added, sled wrote after the
//!   digest, no digest at all): the full content check runs as before.
//!
//! `store.files` names the mark's sequence and content it was written
//! with, and an open removes it before anything writes, so it never
//! vouches for files that changed since.
//!
//! Damage after the close is what it catches, as the content check did. A
//! damaged or stale `store.files` only costs the full check. What it gives
//! up: damage before the close (a segment rotted on disk while the store
//! ran, the page cache no longer holding the good copy) is digested as it
//! is, where the content check compared it with what sled held in memory.
//! Catching that too means reading the files back at the close, sled
//! reopened, and comparing (about the cost the open saves).
//!
//! A separate file, not a line of the mark: an older weir refuses a mark
//! with a line it does not know, and would then refuse a store a newer one
//! closed.

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use super::content::Content;

/// The digest file, in the data directory.
pub(crate) const FILES_FILE: &str = "store.files";

/// A closing store waits at most this long for sled to release its files
/// (its last threads to finish, a few ms) before digesting them; past it,
/// no digest is written and the next open runs the full check. Generous:
/// on a loaded machine a digest lost to a short wait costs the next open
/// the full read.
pub(crate) const SLED_RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Bytes read per `read` while digesting.
const READ_BUFFER_BYTES: usize = 1 << 20;
/// A file is read by this many threads at most, in as many pieces...
const THREADS_MAX: usize = 4;
/// ...of at least this many bytes each.
const PIECE_BYTES_MIN: u64 = 8 << 20;

/// What sled's files were: how many, their bytes, and a CRC-32 of each
/// one's path, length and bytes, in path order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest {
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    pub(crate) crc: u32,
}

impl Digest {
    /// Reads every file under `sled_dir`, a large file in parallel pieces.
    pub(crate) fn of(sled_dir: &Path) -> std::io::Result<Digest> {
        let mut paths = Vec::new();
        list(sled_dir, Path::new(""), &mut paths)?;
        paths.sort();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(THREADS_MAX);
        let mut hasher = crc32fast::Hasher::new();
        let (mut files, mut bytes) = (0u64, 0u64);
        for rel in paths {
            let name = rel.to_string_lossy();
            hasher.update(&(name.len() as u64).to_be_bytes());
            hasher.update(name.as_bytes());
            let f = std::fs::File::open(sled_dir.join(&rel))?;
            let len = f.metadata()?.len();
            hasher.update(&len.to_be_bytes());
            // CRC-32s of consecutive pieces combine into the whole's.
            let piece_bytes = len.div_ceil(threads as u64).max(PIECE_BYTES_MIN);
            let starts: Vec<u64> = (0..len).step_by(piece_bytes as usize).collect();
            let pieces: Vec<std::io::Result<crc32fast::Hasher>> = if starts.len() <= 1 {
                vec![digest_range(&f, 0, len)]
            } else {
                std::thread::scope(|s| {
                    // A thread the system refuses is a piece read here.
                    let handles: Vec<_> = starts
                        .iter()
                        .map(|&at| {
                            let f = &f;
                            let to = (at + piece_bytes).min(len);
                            std::thread::Builder::new()
                                .spawn_scoped(s, move || digest_range(f, at, to))
                                .map_err(|_| (at, to))
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| match h {
                            Ok(h) => h.join().unwrap_or_else(|_| {
                                Err(std::io::Error::other("a digest thread panicked"))
                            }),
                            Err((at, to)) => digest_range(&f, at, to),
                        })
                        .collect()
                })
            };
            for piece in pieces {
                hasher.combine(&piece?);
            }
            // A file that grew while read is not the file its length names.
            if f.metadata()?.len() != len {
                return Err(std::io::Error::other(format!("{name} changed while read")));
            }
            files += 1;
            bytes += len;
        }
        Ok(Digest {
            files,
            bytes,
            crc: hasher.finalize(),
        })
    }

    fn parse(text: &str) -> Option<Digest> {
        let (files, bytes, crc) = super::content::parse_count_bytes_crc(text)?;
        Some(Digest { files, bytes, crc })
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {:08x}", self.files, self.bytes, self.crc)
    }
}

/// The regular files under `root/rel`, relative to `root`.
fn list(root: &Path, rel: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(root.join(rel))? {
        let e = e?;
        let path = rel.join(e.file_name());
        let kind = e.file_type()?;
        if kind.is_dir() {
            list(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path);
        } else {
            // sled writes regular files only; opening a FIFO would hang.
            return Err(std::io::Error::other(format!(
                "{} is not a regular file",
                path.display()
            )));
        }
    }
    Ok(())
}

/// The CRC-32 of `f`'s bytes `from..to`; a file shorter than `to` is an
/// error (it changed while read).
fn digest_range(f: &std::fs::File, from: u64, to: u64) -> std::io::Result<crc32fast::Hasher> {
    use std::os::unix::fs::FileExt;
    let mut hasher = crc32fast::Hasher::new();
    let mut buf = vec![0u8; READ_BUFFER_BYTES.min((to - from) as usize)];
    let mut at = from;
    while at < to {
        let n = buf.len().min((to - at) as usize);
        f.read_exact_at(&mut buf[..n], at)?;
        hasher.update(&buf[..n]);
        at += n as u64;
    }
    Ok(hasher)
}

/// What `store.files` says: the mark it was written beside and the digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Closed {
    pub(crate) last_seq: u64,
    pub(crate) content: Content,
    pub(crate) digest: Digest,
}

impl Closed {
    fn parse(text: &str) -> Option<Closed> {
        let mut lines = text.lines();
        let last_seq = lines
            .next()?
            .strip_prefix("last_seq ")?
            .trim()
            .parse()
            .ok()?;
        let content = Content::parse(lines.next()?.strip_prefix("content ")?)?;
        let digest = Digest::parse(lines.next()?.strip_prefix("files ")?)?;
        if lines.any(|l| !l.trim().is_empty()) {
            return None;
        }
        Some(Closed {
            last_seq,
            content,
            digest,
        })
    }

    /// The digest file of the store in `dir`, if there is one that reads;
    /// one that does not only costs the full check, so it is logged, not
    /// refused.
    pub(crate) fn read(dir: &Path) -> Option<Closed> {
        let path = dir.join(FILES_FILE);
        let text = std::fs::read_to_string(&path).ok()?;
        let closed = Closed::parse(&text);
        if closed.is_none() {
            tracing::warn!(file = %path.display(), "the store's files digest does not read: the open checks the content in full");
        }
        closed
    }

    /// Writes it to a temporary file, synced and renamed, so a crash
    /// leaves the whole file or none.
    pub(crate) fn write(&self, dir: &Path) -> std::io::Result<()> {
        let text = format!(
            "last_seq {}\ncontent {}\nfiles {}\n",
            self.last_seq, self.content, self.digest
        );
        write_replacing(dir, FILES_FILE, &text)
    }
}

/// Replaces `dir/name` with `text` through `name.tmp`, synced, given the
/// directory's owner and renamed, so a crash leaves the old file or the
/// new one whole (the rename itself is durable once `dir` is synced). The
/// mark and the files' digest are both written so.
pub(crate) fn write_replacing(dir: &Path, name: &str, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        owned_like_dir(&tmp, dir)?;
        std::fs::rename(&tmp, dir.join(name))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Gives `file` the owner of `dir` when this process runs as root: an
/// inspection run with sudo must not leave the engine's user a mark or
/// digest it cannot rewrite.
fn owned_like_dir(file: &Path, dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let meta = std::fs::metadata(dir)?;
    std::os::unix::fs::chown(file, Some(meta.uid()), Some(meta.gid()))
}

/// Removes the digest file, if any: the store is about to change.
pub(crate) fn remove(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(dir.join(FILES_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Waits until no one holds sled's lock on `sled/db` (sled holds it from
/// its open until its last handle and thread are gone, and flushes before
/// it lets go), at most `wait`. Whether it was released.
pub(crate) fn wait_sled_released(db_path: &Path, wait: Duration) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(db_path) else {
        return false;
    };
    let until = Instant::now() + wait;
    let mut pause = Duration::from_micros(200);
    loop {
        // SAFETY: flock on a descriptor this function owns; no memory.
        let got = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if got {
            // Closing the descriptor releases it.
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    #[test]
    fn a_digest_sees_a_flipped_byte_a_cut_a_new_file_and_a_rename() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path();
        write(&s.join("db"), &vec![7u8; 3 << 20]);
        write(&s.join("conf"), b"segment_size: 524288\n");
        write(&s.join("blobs/12"), b"blob");
        let first = Digest::of(s).unwrap();
        assert_eq!((first.files, first.bytes), (3, (3 << 20) + 21 + 4));
        assert_eq!(Digest::of(s).unwrap(), first, "a digest is stable");
        assert_eq!(Digest::parse(&first.to_string()), Some(first));

        let mut db = std::fs::read(s.join("db")).unwrap();
        db[(3 << 20) / 2] ^= 1;
        std::fs::write(s.join("db"), &db).unwrap();
        assert_ne!(Digest::of(s).unwrap(), first, "a flipped byte");
        db[(3 << 20) / 2] ^= 1;
        std::fs::write(s.join("db"), &db).unwrap();
        assert_eq!(Digest::of(s).unwrap(), first, "flipped back");

        std::fs::write(s.join("db"), &db[..db.len() - 1]).unwrap();
        assert_ne!(Digest::of(s).unwrap(), first, "a cut");
        std::fs::write(s.join("db"), &db).unwrap();

        write(&s.join("snap.00"), b"");
        assert_ne!(Digest::of(s).unwrap(), first, "an empty new file");
        std::fs::remove_file(s.join("snap.00")).unwrap();

        std::fs::rename(s.join("blobs/12"), s.join("blobs/13")).unwrap();
        assert_ne!(Digest::of(s).unwrap(), first, "a renamed file");
    }

    #[test]
    fn a_large_file_read_in_pieces_digests_as_read_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..(PIECE_BYTES_MIN * 2 + 12_345))
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write(&tmp.path().join("db"), &bytes);
        let mut whole = crc32fast::Hasher::new();
        whole.update(&2u64.to_be_bytes());
        whole.update(b"db");
        whole.update(&(bytes.len() as u64).to_be_bytes());
        whole.update(&bytes);
        let d = Digest::of(tmp.path()).unwrap();
        assert_eq!((d.files, d.bytes), (1, bytes.len() as u64));
        assert_eq!(d.crc, whole.finalize());
    }

    #[test]
    fn the_file_reads_back_and_refuses_what_it_did_not_write() {
        let tmp = tempfile::tempdir().unwrap();
        let closed = Closed {
            last_seq: 42,
            content: Content::parse("3 10 0000abcd").unwrap(),
            digest: Digest::parse("2 99 deadbeef").unwrap(),
        };
        closed.write(tmp.path()).unwrap();
        assert_eq!(Closed::read(tmp.path()), Some(closed));
        std::fs::write(
            tmp.path().join(FILES_FILE),
            "last_seq 42\ncontent 3 10 0000abcd\n",
        )
        .unwrap();
        assert_eq!(Closed::read(tmp.path()), None, "no files line");
        std::fs::write(tmp.path().join(FILES_FILE), "garbage").unwrap();
        assert_eq!(Closed::read(tmp.path()), None);
        remove(tmp.path()).unwrap();
        remove(tmp.path()).unwrap();
        assert_eq!(Closed::read(tmp.path()), None, "none");
    }

    #[test]
    fn as_root_a_written_file_takes_the_data_directory_s_owner() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("store.mark");
        std::fs::write(&file, "last_seq 1\n").unwrap();
        // SAFETY: no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let mine = std::fs::metadata(&file).unwrap().uid();
        if root {
            // The engine's user, say, owns the directory.
            std::os::unix::fs::chown(tmp.path(), Some(65_534), Some(65_534)).unwrap();
        }
        owned_like_dir(&file, tmp.path()).unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        if root {
            assert_eq!((meta.uid(), meta.gid()), (65_534, 65_534));
        } else {
            assert_eq!(meta.uid(), mine, "not root: nothing changes");
        }
    }

    #[test]
    fn sled_holds_its_files_until_its_last_handle_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let db = sled::open(tmp.path()).unwrap();
        let tree = db.open_tree("t").unwrap();
        tree.insert("k", "v").unwrap();
        let db_path = tmp.path().join("db");
        assert!(!wait_sled_released(&db_path, Duration::from_millis(30)));
        drop(db);
        // A tree keeps the whole database open.
        assert!(!wait_sled_released(&db_path, Duration::from_millis(30)));
        drop(tree);
        assert!(wait_sled_released(&db_path, Duration::from_secs(5)));
    }
}
