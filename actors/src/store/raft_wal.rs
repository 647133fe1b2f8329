//! A member's Raft log in files of its own, beside sled: `raft/wal-<first
//! index>` segments of frames appended and fdatasynced.
//!
//! Why not a sled tree: a durable sled commit hands its log buffer to
//! sled's I/O thread and back (and, until sled's log write ended in its
//! own fdatasync, paid a `sync_file_range` and then weir's fdatasync), where
//! a file appended and fdatasynced pays one device wait on the caller's
//! thread (measured here: 256 µs against 127–152 µs at p50, with the two
//! waits), and a replicated commit pays it twice in series (the leader's
//! append, then a follower's). The state machine stays in sled, made durable by
//! sled's own flushes; an entry cut from it by a crash is applied again
//! from this log, and the log is purged only after sled is synced past it.
//!
//! A frame is one append: `magic u32 | payload length u32 | crc32 u32 |
//! payload`, the payload `(index u64 | length u32 | entry bytes)*`, all
//! little-endian. One append is one write and one fdatasync, so a crash
//! can cut only the last frame of the last segment: at open, a last frame
//! that is short, runs past the file's end, fails its checksum as the
//! file's last frame, is zeros to the end, or has zeros from its header
//! to the end of that sector with no whole frame after it (a power cut
//! kept later pages of the write but not its first), is a write the crash
//! cut (never acknowledged) and is dropped with a warning. Any other frame
//! that does not read is damage: the open is refused naming the file and
//! the offset, so that nothing acknowledged is dropped in silence.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::faults::FaultPoint;
use super::{Durability, Store, StoreError};

/// The log's folder under the data directory.
pub const RAFT_WAL_DIR: &str = "raft";
/// A segment past this many bytes is closed and the next append opens a
/// new one (purges delete whole segments).
pub const SEGMENT_BYTES_MAX: u64 = 64 << 20;
/// An entry larger than this is refused: the length field and a frame
/// must stay well within u32.
pub const ENTRY_BYTES_MAX: usize = 256 << 20;

/// A segment's blocks are allocated this far ahead of its appends (or the
/// segment's cap ahead, when smaller): an append into allocated blocks
/// grows no file (measured on ext4, a small write and its fdatasync:
/// 70–75 µs against 100–110 µs for an append that grows the file; a first
/// write to an allocated block still converts it, in the same fdatasync).
/// The allocated rest reads as zeros, which the open reads as the
/// segment's end.
pub const ALLOCATE_AHEAD_BYTES: u64 = 4 << 20;
const MAGIC: u32 = 0x5745_4952; // "WEIR"
/// The smallest unit a power cut keeps or loses whole: a header of zeros
/// is a lost write only when the zeros run to the end of its sector.
const TORN_SECTOR_BYTES: usize = 512;
/// Places after a header of zeros that hold the magic and are checked for
/// a whole frame, at most (see `whole_frame_after`).
const WHOLE_FRAME_CANDIDATES_MAX: usize = 64;
const HEADER_BYTES: usize = 12;
const ENTRY_HEADER_BYTES: usize = 12;
const PREFIX: &str = "wal-";
/// A segment written anew by a truncation, before it is renamed over the
/// old one; one left by a crash is removed at open.
const TMP_EXTENSION: &str = "tmp";

/// Where an entry's bytes are.
#[derive(Debug, Clone, Copy)]
struct Loc {
    /// The first index of its segment (the segment's name).
    segment: u64,
    /// Where its frame starts in the segment.
    frame_at: u64,
    /// Where its bytes start.
    at: u64,
    len: u32,
}

struct Segment {
    file: File,
    path: PathBuf,
    /// Bytes of whole frames.
    len: u64,
    /// The file's size: `len` and the zeros allocated after it.
    allocated: u64,
}

/// The log: its segments and where each entry is. One writer (openraft's
/// core) at a time; readers share it behind the caller's lock.
pub struct RaftWal {
    store: Store,
    dir: PathBuf,
    /// By first index.
    segments: BTreeMap<u64, Segment>,
    entries: BTreeMap<u64, Loc>,
    /// [`SEGMENT_BYTES_MAX`] unless set (tests roll sooner).
    segment_bytes_max: u64,
}

impl Store {
    /// Opens (or creates) this member's Raft log, reading every segment
    /// and dropping a last frame a crash cut.
    pub fn open_raft_wal(&self) -> Result<RaftWal, StoreError> {
        let dir = self.dir().join(RAFT_WAL_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| StoreError::Dir {
            dir: dir.clone(),
            source,
        })?;
        let mut wal = RaftWal {
            store: self.clone(),
            dir,
            segments: BTreeMap::new(),
            entries: BTreeMap::new(),
            segment_bytes_max: SEGMENT_BYTES_MAX,
        };
        wal.read_all()?;
        Ok(wal)
    }
}

/// What a frame at some offset holds.
enum Frame {
    /// Entries `(index, at, len)`, and the frame's end.
    Whole(Vec<(u64, u64, u32)>, u64),
    /// The end of the file.
    End,
    /// A frame a crash cut (dropped).
    Cut(&'static str),
    /// Damage.
    Bad(String),
}

fn parse_frame(bytes: &[u8], at: usize) -> Frame {
    let rest = &bytes[at..];
    if rest.is_empty() {
        return Frame::End;
    }
    if rest.iter().all(|b| *b == 0) {
        // Space allocated ahead of the appends, or a last append whose
        // bytes never reached the disk: either way nothing was
        // acknowledged from here.
        return Frame::End;
    }
    if rest.len() < HEADER_BYTES {
        return Frame::Cut("a header cut short");
    }
    let word = |i: usize| u32::from_le_bytes(rest[i..i + 4].try_into().unwrap_or([0; 4]));
    let (magic, len, crc) = (word(0), word(4) as usize, word(8));
    // A power cut can keep some pages of the last append and not others;
    // the header's page is then as it was before the append: zeros past
    // the file's old end, at least to the end of the header's sector. A
    // frame that reads after it would prove this one synced (appends run
    // one at a time, each synced before the next is written): damage,
    // below. Zeros over the header alone are not a lost sector: damage.
    let sector_end = ((at / TORN_SECTOR_BYTES + 1) * TORN_SECTOR_BYTES).min(bytes.len());
    let zeros_to = (at + HEADER_BYTES).max(sector_end);
    if bytes[at..zeros_to].iter().all(|b| *b == 0) && !whole_frame_after(bytes, at) {
        return Frame::Cut("a header of zeros to the end of its sector with no whole frame after it (the last write's first page never reached the disk)");
    }
    if magic != MAGIC {
        return Frame::Bad(format!("no frame at offset {at} (magic {magic:#x})"));
    }
    let end = HEADER_BYTES + len;
    if rest.len() < end {
        return Frame::Cut("a frame that runs past the end of the file");
    }
    let payload = &rest[HEADER_BYTES..end];
    if crc32fast::hash(payload) != crc {
        // Zeros after it are space allocated ahead, not a later write.
        return if rest[end..].iter().all(|b| *b == 0) {
            Frame::Cut("the last frame fails its checksum")
        } else {
            Frame::Bad(format!(
                "the frame at offset {at} fails its checksum and {} bytes follow it",
                rest.len() - end
            ))
        };
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < payload.len() {
        if payload.len() - i < ENTRY_HEADER_BYTES {
            return Frame::Bad(format!("the frame at offset {at} ends inside an entry"));
        }
        let index = u64::from_le_bytes(payload[i..i + 8].try_into().unwrap_or([0; 8]));
        let n = u32::from_le_bytes(payload[i + 8..i + 12].try_into().unwrap_or([0; 4]));
        let from = i + ENTRY_HEADER_BYTES;
        if payload.len() - from < n as usize {
            return Frame::Bad(format!(
                "the frame at offset {at} ends inside entry {index}"
            ));
        }
        out.push((index, (at + HEADER_BYTES + from) as u64, n));
        i = from + n as usize;
    }
    Frame::Whole(out, (at + end) as u64)
}

/// Whether a whole frame (its magic, a length within the file and its
/// checksum) starts anywhere after `at`: only on an open that found a
/// header of zeros, so its scan of the file is not on any path an append
/// takes. Entry bytes may hold the magic; past
/// `WHOLE_FRAME_CANDIDATES_MAX` candidates (each a checksum over up to
/// the rest of the segment) it answers yes, and the open reports damage
/// rather than drop what may be a synced write.
fn whole_frame_after(bytes: &[u8], at: usize) -> bool {
    let magic = MAGIC.to_le_bytes();
    let mut from = at + 1;
    let mut candidates = 0;
    while let Some(i) = bytes
        .get(from..)
        .and_then(|rest| rest.windows(4).position(|w| w == magic))
    {
        candidates += 1;
        if candidates > WHOLE_FRAME_CANDIDATES_MAX {
            return true;
        }
        let p = from + i;
        if matches!(parse_frame(bytes, p), Frame::Whole(..)) {
            return true;
        }
        from = p + 1;
    }
    false
}

impl RaftWal {
    fn damaged(&self, path: &Path, what: String) -> StoreError {
        StoreError::Damaged {
            dir: self.store.dir().to_path_buf(),
            file: path.display().to_string(),
            what,
        }
    }

    fn inconsistent(&self, what: String) -> StoreError {
        StoreError::Inconsistent {
            dir: self.store.dir().to_path_buf(),
            tree: "raft log",
            what,
        }
    }

    fn io_error(&self, path: &Path, what: &'static str, source: std::io::Error) -> StoreError {
        let e = StoreError::RaftLog {
            path: path.to_path_buf(),
            what,
            source,
        };
        self.store.fail(&e);
        e
    }

    fn read_all(&mut self) -> Result<(), StoreError> {
        let listing = std::fs::read_dir(&self.dir).map_err(|source| StoreError::Dir {
            dir: self.dir.clone(),
            source,
        })?;
        let mut names = Vec::new();
        for entry in listing {
            let entry = entry.map_err(|source| StoreError::Dir {
                dir: self.dir.clone(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(PREFIX)
                && entry.path().extension().is_some_and(|e| e == TMP_EXTENSION)
            {
                // Not renamed: the segment it was to replace is whole.
                let path = entry.path();
                std::fs::remove_file(&path).map_err(|e| self.io_error(&path, "remove", e))?;
                continue;
            }
            if let Some(first) = name
                .strip_prefix(PREFIX)
                .and_then(|n| n.parse::<u64>().ok())
            {
                names.push((first, entry.path()));
            }
        }
        names.sort();
        let last = names.last().map(|(first, _)| *first);
        for (first, path) in names {
            let bytes = std::fs::read(&path).map_err(|e| self.io_error(&path, "read", e))?;
            let mut at = 0usize;
            let mut expected = first;
            // Whether the scan ended on a write a crash cut (else on the
            // file's end or on zeros allocated ahead).
            let mut cut = false;
            loop {
                match parse_frame(&bytes, at) {
                    Frame::End => break,
                    Frame::Whole(entries, end) => {
                        for (index, from, len) in entries {
                            // Contiguous from the segment's first index, as
                            // appends and truncations leave them.
                            if index != expected {
                                return Err(self.damaged(
                                    &path,
                                    format!("entry {index} where entry {expected} was due, at offset {at}"),
                                ));
                            }
                            self.entries.insert(
                                index,
                                Loc {
                                    segment: first,
                                    frame_at: at as u64,
                                    at: from,
                                    len,
                                },
                            );
                            expected += 1;
                        }
                        at = end as usize;
                    }
                    Frame::Cut(why) if Some(first) == last => {
                        tracing::warn!(
                            file = %path.display(),
                            offset = at,
                            dropped_bytes = bytes.len() - at,
                            why,
                            "raft log: a last write cut by a crash dropped (never acknowledged)"
                        );
                        cut = true;
                        break;
                    }
                    Frame::Cut(why) => {
                        return Err(self.damaged(
                            &path,
                            format!("{why} at offset {at}, in a segment that is not the last"),
                        ))
                    }
                    Frame::Bad(what) => return Err(self.damaged(&path, what)),
                }
            }
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .map_err(|e| self.io_error(&path, "open", e))?;
            // Only the last segment can have taken no frame yet (a roll
            // cut short by a crash): one before it held frames when the
            // next one was started, so a frameless one lost them.
            if at == 0 && Some(first) != last {
                return Err(
                    self.damaged(&path, "no frame in a segment that is not the last".into())
                );
            }
            // A cut write goes; zeros after the last frame stay allocated.
            let mut allocated = bytes.len() as u64;
            if cut {
                file.set_len(at as u64)
                    .map_err(|e| self.io_error(&path, "cut the crash's last write from", e))?;
                self.sync_file(&file, &path)?;
                allocated = at as u64;
            }
            if let Some((prev_first, _)) = self.segments.last_key_value() {
                let prev_last = self
                    .entries
                    .range(*prev_first..first)
                    .next_back()
                    .map(|(i, _)| *i);
                if prev_last.is_some_and(|l| l + 1 != first) {
                    return Err(self.damaged(
                        &path,
                        format!("the segment starts at entry {first}, not after entry {prev_last:?} of the one before"),
                    ));
                }
            }
            self.segments.insert(
                first,
                Segment {
                    file,
                    path,
                    len: at as u64,
                    allocated,
                },
            );
        }
        Ok(())
    }

    fn sync_file(&self, file: &File, path: &Path) -> Result<(), StoreError> {
        if self.store.settings().durability != Durability::Fsync {
            return Ok(());
        }
        self.store
            .inject(FaultPoint::Fsync)
            .and_then(|()| file.sync_data())
            .map_err(|source| {
                let e = StoreError::Fsync {
                    dir: self.store.dir().to_path_buf(),
                    file: path.to_path_buf(),
                    source,
                };
                self.store.fail(&e);
                e
            })
    }

    fn sync_dir(&self) -> Result<(), StoreError> {
        let dir = File::open(&self.dir).map_err(|e| self.io_error(&self.dir, "open", e))?;
        self.sync_file(&dir, &self.dir)
    }

    /// Closes a segment past `bytes` rather than [`SEGMENT_BYTES_MAX`].
    pub fn set_segment_bytes_max(&mut self, bytes: u64) {
        self.segment_bytes_max = bytes.max(1);
    }

    /// The segments' files, oldest first.
    pub fn segment_paths(&self) -> Vec<PathBuf> {
        self.segments.values().map(|s| s.path.clone()).collect()
    }

    /// The first and last index held, if any.
    pub fn bounds(&self) -> Option<(u64, u64)> {
        Some((
            *self.entries.keys().next()?,
            *self.entries.keys().next_back()?,
        ))
    }

    /// Whether the log holds no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes of entries `from..=to` that the log holds, in order.
    pub fn read(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut out = Vec::new();
        if from > to {
            return Ok(out);
        }
        for (index, loc) in self.entries.range(from..=to) {
            let seg = self.segments.get(&loc.segment).ok_or_else(|| {
                self.damaged(&self.dir, format!("entry {index} names a missing segment"))
            })?;
            let mut buf = vec![0u8; loc.len as usize];
            seg.file
                .read_exact_at(&mut buf, loc.at)
                .map_err(|e| self.io_error(&seg.path, "read", e))?;
            out.push((*index, buf));
        }
        Ok(out)
    }

    /// Appends entries (their indexes following the last held, or
    /// starting the log) as one frame, durable when this returns.
    pub fn append(&mut self, entries: &[(u64, Vec<u8>)]) -> Result<(), StoreError> {
        let Some((first, _)) = entries.first() else {
            return Ok(());
        };
        if let Some((_, last)) = self.bounds() {
            if *first != last + 1 {
                return Err(
                    self.inconsistent(format!("append of entry {first} after entry {last}"))
                );
            }
        }
        for (i, (index, bytes)) in entries.iter().enumerate() {
            if *index != first + i as u64 || bytes.len() > ENTRY_BYTES_MAX {
                return Err(self.inconsistent(format!(
                    "append of entry {index} ({} bytes) at position {i} after entry {first}",
                    bytes.len()
                )));
            }
        }
        let frame = self.encode_frame(entries)?;
        if self.entries.is_empty() {
            // Nothing held (a new log, or one purged or cut to nothing, its
            // next index maybe past what the files hold): what the files
            // hold is dead, and a segment starts at this entry.
            self.remove_segments()?;
        }
        let roll = self
            .segments
            .last_key_value()
            .is_none_or(|(_, s)| s.len >= self.segment_bytes_max);
        if roll {
            self.open_segment(*first)?;
        }
        let Some((&segment, seg)) = self.segments.last_key_value() else {
            return Err(self.damaged(&self.dir, "no segment to append to".into()));
        };
        let frame_at = seg.len;
        let end = frame_at + frame.len() as u64;
        let mut allocated = seg.allocated;
        if end > allocated {
            let to = end.max(frame_at + ALLOCATE_AHEAD_BYTES.min(self.segment_bytes_max));
            self.store
                .inject(FaultPoint::Write)
                .and_then(|()| super::disk::fallocate_range(&seg.file, allocated, to - allocated))
                .map_err(|e| self.io_error(&seg.path, "allocate space in", e))?;
            // Without fallocate the write grows the file, as it did.
            allocated = to;
        }
        self.store
            .inject(FaultPoint::Write)
            .and_then(|()| seg.file.write_all_at(&frame, frame_at))
            .map_err(|e| self.io_error(&seg.path, "append to", e))?;
        self.sync_file(&seg.file, &seg.path)?;
        self.index_frame(segment, frame_at, entries);
        if let Some(seg) = self.segments.get_mut(&segment) {
            seg.len = end;
            seg.allocated = allocated;
        }
        Ok(())
    }

    /// One frame of `entries`: header, then each entry's index, length and
    /// bytes.
    fn encode_frame(&self, entries: &[(u64, Vec<u8>)]) -> Result<Vec<u8>, StoreError> {
        let payload_len: usize = entries
            .iter()
            .map(|(_, b)| b.len() + ENTRY_HEADER_BYTES)
            .sum();
        let len = u32::try_from(payload_len)
            .map_err(|_| self.inconsistent(format!("a frame of {payload_len} bytes")))?;
        let mut frame = Vec::with_capacity(HEADER_BYTES + payload_len);
        frame.extend_from_slice(&MAGIC.to_le_bytes());
        frame.extend_from_slice(&len.to_le_bytes());
        frame.extend_from_slice(&[0; 4]);
        for (index, bytes) in entries {
            frame.extend_from_slice(&index.to_le_bytes());
            frame.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            frame.extend_from_slice(bytes);
        }
        let crc = crc32fast::hash(&frame[HEADER_BYTES..]);
        frame[8..HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
        Ok(frame)
    }

    /// Records where the entries of a frame written at `frame_at` are.
    fn index_frame(&mut self, segment: u64, frame_at: u64, entries: &[(u64, Vec<u8>)]) {
        let mut at = frame_at + HEADER_BYTES as u64;
        for (index, bytes) in entries {
            at += ENTRY_HEADER_BYTES as u64;
            self.entries.insert(
                *index,
                Loc {
                    segment,
                    frame_at,
                    at,
                    len: bytes.len() as u32,
                },
            );
            at += bytes.len() as u64;
        }
    }

    /// Creates `path` empty, for reading and writing.
    fn create(&self, path: &Path) -> Result<File, StoreError> {
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| self.io_error(path, "create", e))
    }

    fn open_segment(&mut self, first: u64) -> Result<(), StoreError> {
        let path = self.dir.join(format!("{PREFIX}{first:020}"));
        let file = self.create(&path)?;
        // The new name durable before an entry in it is acknowledged.
        self.sync_dir()?;
        self.segments.insert(
            first,
            Segment {
                file,
                path,
                len: 0,
                allocated: 0,
            },
        );
        Ok(())
    }

    /// Removes entries `from` and after (a leader's log overrides them),
    /// durably. A crash at any point keeps every entry before `from`, and
    /// the log contiguous: later segments go newest first, then the
    /// segment is cut at the frame holding `from`; when that frame also
    /// holds earlier entries, the segment is written anew (its frames
    /// before, then those entries as a frame of their own) and renamed
    /// over the old one, never cut first and written after.
    pub fn truncate(&mut self, from: u64) -> Result<(), StoreError> {
        let Some(loc) = self.entries.get(&from).copied() else {
            return Ok(());
        };
        // Every entry of that frame before `from`, read from the file:
        // those a purge forgot are still in it, and stay.
        let kept: Vec<(u64, Vec<u8>)> = self
            .read_frame(loc.segment, loc.frame_at)?
            .into_iter()
            .filter(|(i, _)| *i < from)
            .collect();
        let held_from = self.entries.keys().next().copied().unwrap_or(from);
        let later: Vec<u64> = self
            .segments
            .range(loc.segment + 1..)
            .rev()
            .map(|(f, _)| *f)
            .collect();
        for first in later {
            self.remove_segment(first)?;
        }
        let Some(seg) = self.segments.get(&loc.segment) else {
            return Err(self.damaged(&self.dir, format!("entry {from} names a missing segment")));
        };
        if kept.is_empty() {
            seg.file
                .set_len(loc.frame_at)
                .map_err(|e| self.io_error(&seg.path, "truncate", e))?;
            self.sync_file(&seg.file, &seg.path)?;
            self.entries.split_off(&from);
            if let Some(seg) = self.segments.get_mut(&loc.segment) {
                seg.len = loc.frame_at;
                seg.allocated = loc.frame_at;
            }
            return Ok(());
        }
        let mut bytes = vec![0u8; loc.frame_at as usize];
        seg.file
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| self.io_error(&seg.path, "read", e))?;
        bytes.extend_from_slice(&self.encode_frame(&kept)?);
        let path = seg.path.clone();
        let tmp = path.with_extension(TMP_EXTENSION);
        let file = self.create(&tmp)?;
        self.store
            .inject(FaultPoint::Write)
            .and_then(|()| file.write_all_at(&bytes, 0))
            .map_err(|e| self.io_error(&tmp, "write", e))?;
        self.sync_file(&file, &tmp)?;
        std::fs::rename(&tmp, &path).map_err(|e| self.io_error(&path, "replace", e))?;
        self.sync_dir()?;
        // The index follows the files only now: an error before left both
        // as they were. The kept entries' new places replace their old
        // ones; those a purge forgot stay forgotten.
        self.entries.split_off(&from);
        self.index_frame(loc.segment, loc.frame_at, &kept);
        self.entries = self.entries.split_off(&held_from);
        if let Some(seg) = self.segments.get_mut(&loc.segment) {
            seg.file = file;
            seg.len = bytes.len() as u64;
            seg.allocated = bytes.len() as u64;
        }
        Ok(())
    }

    /// The entries of the frame at `frame_at` of `segment`, as the file
    /// holds them.
    fn read_frame(&self, segment: u64, frame_at: u64) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let seg = self
            .segments
            .get(&segment)
            .ok_or_else(|| self.damaged(&self.dir, format!("segment {segment} is missing")))?;
        let mut header = [0u8; HEADER_BYTES];
        seg.file
            .read_exact_at(&mut header, frame_at)
            .map_err(|e| self.io_error(&seg.path, "read", e))?;
        let len = u32::from_le_bytes(header[4..8].try_into().unwrap_or([0; 4])) as usize;
        let mut frame = vec![0u8; HEADER_BYTES + len];
        seg.file
            .read_exact_at(&mut frame, frame_at)
            .map_err(|e| self.io_error(&seg.path, "read", e))?;
        match parse_frame(&frame, 0) {
            Frame::Whole(entries, _) => Ok(entries
                .into_iter()
                .map(|(i, at, n)| (i, frame[at as usize..at as usize + n as usize].to_vec()))
                .collect()),
            _ => Err(self.damaged(
                &seg.path,
                format!("the frame at offset {frame_at} no longer reads"),
            )),
        }
    }

    /// Removes one segment's file, durably: removals are made one at a
    /// time so that a crash never leaves a newer segment without an
    /// older one it follows.
    fn remove_segment(&mut self, first: u64) -> Result<(), StoreError> {
        if let Some(seg) = self.segments.get(&first) {
            std::fs::remove_file(&seg.path).map_err(|e| self.io_error(&seg.path, "remove", e))?;
            self.segments.remove(&first);
            self.sync_dir()?;
        }
        Ok(())
    }

    /// Forgets entries up to `upto` and deletes the segments that hold
    /// nothing past it. The caller has made everything they carry durable
    /// elsewhere (the state machine synced past `upto`).
    pub fn purge(&mut self, upto: u64) -> Result<(), StoreError> {
        self.entries = self.entries.split_off(&(upto + 1));
        // A segment goes once the next one starts at or before upto + 1;
        // the last one always stays (the next append goes there).
        let firsts: Vec<u64> = self.segments.keys().copied().collect();
        for pair in firsts.windows(2) {
            if pair[1] > upto + 1 {
                break;
            }
            self.remove_segment(pair[0])?;
        }
        Ok(())
    }

    /// Removes every segment (a member that forgets its group).
    pub fn clear(&mut self) -> Result<(), StoreError> {
        self.entries.clear();
        self.remove_segments()
    }

    /// Removes every segment, newest first.
    fn remove_segments(&mut self) -> Result<(), StoreError> {
        let firsts: Vec<u64> = self.segments.keys().rev().copied().collect();
        for first in firsts {
            self.remove_segment(first)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::super::{FaultInjector, StoreSettings};
    use super::*;

    fn entry(i: u64) -> (u64, Vec<u8>) {
        (
            i,
            format!("entry {i}")
                .repeat(1 + (i % 5) as usize)
                .into_bytes(),
        )
    }

    fn entries(from: u64, to: u64) -> Vec<(u64, Vec<u8>)> {
        (from..=to).map(entry).collect()
    }

    fn open(dir: &Path) -> (Store, Result<RaftWal, StoreError>) {
        let (store, _) = Store::open(dir, StoreSettings::default()).unwrap();
        let wal = store.open_raft_wal();
        (store, wal)
    }

    /// Settings whose `point` fails with `errno` once the flag is set.
    fn failing(point: FaultPoint, errno: i32) -> (StoreSettings, Arc<AtomicBool>) {
        let fail = Arc::new(AtomicBool::new(false));
        let f = fail.clone();
        let settings = StoreSettings {
            faults: Some(FaultInjector::new(move |p| {
                if p == point && f.load(Ordering::SeqCst) {
                    Err(std::io::Error::from_raw_os_error(errno))
                } else {
                    Ok(())
                }
            })),
            ..StoreSettings::default()
        };
        (settings, fail)
    }

    /// Reopens the log of `dir` and reads all it holds.
    fn reopened(dir: &Path) -> Vec<(u64, Vec<u8>)> {
        let (_store, wal) = open(dir);
        wal.unwrap().read(0, u64::MAX).unwrap()
    }

    /// A log of entries 1-2 and 3-5 in two frames: its file and the
    /// frames' bytes (without the zeros allocated after them).
    fn two_frames(dir: &Path) -> (PathBuf, Vec<u8>) {
        let (_store, wal) = open(dir);
        let mut wal = wal.unwrap();
        wal.append(&entries(1, 2)).unwrap();
        wal.append(&entries(3, 5)).unwrap();
        let path = wal.segment_paths().pop().unwrap();
        let len = wal.segments.last_key_value().map(|(_, s)| s.len).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.truncate(len as usize);
        (path, bytes)
    }

    #[test]
    fn appends_read_back_in_order_across_segments_and_reopens() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        {
            let (_store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            wal.set_segment_bytes_max(200);
            wal.append(&entries(1, 3)).unwrap();
            for i in 4..=20 {
                wal.append(&[entry(i)]).unwrap();
            }
            assert!(wal.segment_paths().len() > 2, "{:?}", wal.segment_paths());
            assert_eq!(wal.bounds(), Some((1, 20)));
            assert_eq!(wal.read(5, 7).unwrap(), entries(5, 7));
            // Out of order: refused, nothing written.
            assert!(wal.append(&[entry(22)]).is_err());
            assert_eq!(wal.bounds(), Some((1, 20)));
        }
        assert_eq!(reopened(&dir), entries(1, 20));
    }

    #[test]
    fn a_last_frame_cut_by_a_crash_is_dropped_and_the_rest_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (path, whole) = two_frames(&dir);
        // Cut inside the last frame, at its header and at its payload.
        for cut in [whole.len() - 1, whole.len() - 20, whole.len() - 40] {
            std::fs::write(&path, &whole[..cut]).unwrap();
            assert_eq!(reopened(&dir), entries(1, 2), "cut at {cut}");
            // The cut was removed from the file: an append follows on.
            let (store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            wal.append(&entries(3, 4)).unwrap();
            drop((wal, store));
            assert_eq!(reopened(&dir), entries(1, 4));
            std::fs::write(&path, &whole).unwrap();
        }
        // Zeros past the last frame (a size grown, its data never written).
        let mut zeros = whole.clone();
        zeros.extend_from_slice(&[0u8; 300]);
        std::fs::write(&path, &zeros).unwrap();
        assert_eq!(reopened(&dir), entries(1, 5));
        // The last frame's checksum fails (part of it never written), with
        // and without the zeros allocated after it.
        let mut flipped = whole.clone();
        let n = flipped.len();
        flipped[n - 3] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(reopened(&dir), entries(1, 2));
        flipped.extend_from_slice(&[0u8; 4096]);
        std::fs::write(&path, &flipped).unwrap();
        assert_eq!(reopened(&dir), entries(1, 2));
        // Bytes after it that are not zeros are a later write: damage.
        flipped.extend_from_slice(&[1u8; 16]);
        std::fs::write(&path, &flipped).unwrap();
        let (_store, wal) = open(&dir);
        assert!(wal.is_err(), "a bad frame with bytes after it opened");
    }

    #[test]
    fn appends_write_into_space_allocated_ahead_and_reopen_after_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (path, size) = {
            let (_store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            wal.append(&entries(1, 2)).unwrap();
            let path = wal.segment_paths().pop().unwrap();
            let size = std::fs::metadata(&path).unwrap().len();
            assert_eq!(
                size, ALLOCATE_AHEAD_BYTES,
                "allocated ahead at the first append"
            );
            for i in 3..=40 {
                wal.append(&[entry(i)]).unwrap();
                let now = std::fs::metadata(&path).unwrap().len();
                assert_eq!(now, size, "append {i} grew the segment");
            }
            (path, size)
        };
        // The zeros after the frames are the log's end: every entry, the
        // space kept, and appends go on after the last frame.
        assert_eq!(reopened(&dir), entries(1, 40));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
        {
            let (_store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            wal.append(&entries(41, 45)).unwrap();
        }
        assert_eq!(reopened(&dir), entries(1, 45));
        // A frame larger than what is left is allocated to its end.
        {
            let (_store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            let big = vec![(46, vec![9u8; (ALLOCATE_AHEAD_BYTES + 100) as usize])];
            wal.append(&big).unwrap();
            assert!(std::fs::metadata(&path).unwrap().len() > ALLOCATE_AHEAD_BYTES + 100);
        }
        let read = reopened(&dir);
        assert_eq!(read.len(), 46);
        assert_eq!(read[45].1.len() as u64, ALLOCATE_AHEAD_BYTES + 100);
    }

    #[test]
    fn damage_before_the_last_frame_refuses_the_open_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (path, whole) = two_frames(&dir);
        // A byte of the first frame's payload flipped.
        let mut flipped = whole.clone();
        flipped[HEADER_BYTES + 3] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        let (store, wal) = open(&dir);
        let e = wal
            .err()
            .expect("a damaged frame refuses the open")
            .to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("checksum"),
            "{e}"
        );
        drop(store);
        // The first frame's magic overwritten.
        let mut bad = whole.clone();
        bad[0] = b'x';
        std::fs::write(&path, &bad).unwrap();
        let (_store, wal) = open(&dir);
        assert!(wal.err().unwrap().to_string().contains("offset 0"));
    }

    #[test]
    fn a_segment_before_the_last_with_no_frame_refuses_the_open() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let paths = {
            let (_store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            wal.set_segment_bytes_max(200);
            for i in 1..=20 {
                wal.append(&[entry(i)]).unwrap();
            }
            wal.segment_paths()
        };
        assert!(paths.len() > 2, "{paths:?}");
        // A middle segment's frames all gone to zeros (its size kept), or
        // the file emptied: entries lost in the middle of the log.
        let middle = &paths[1];
        let size = std::fs::metadata(middle).unwrap().len() as usize;
        for bytes in [vec![0u8; size], Vec::new()] {
            std::fs::write(middle, &bytes).unwrap();
            let (_store, wal) = open(&dir);
            let e = wal.err().expect("a hole in the log opened").to_string();
            assert!(
                e.contains(&middle.display().to_string()) && e.contains("no frame"),
                "{e}"
            );
        }
    }

    /// A log of entries 1-2 (small) and 3, then 4 (1,500 bytes each, so
    /// their frames span sectors), in three frames: its file, bytes and
    /// where each frame starts.
    fn spanning_frames(dir: &Path) -> (PathBuf, Vec<u8>, Vec<usize>) {
        let big = |i: u64| vec![(i, vec![i as u8; 1_500])];
        let (_store, wal) = open(dir);
        let mut wal = wal.unwrap();
        wal.append(&entries(1, 2)).unwrap();
        wal.append(&big(3)).unwrap();
        wal.append(&big(4)).unwrap();
        let path = wal.segment_paths().pop().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let mut starts = vec![0];
        while starts.len() < 3 {
            let at = *starts.last().unwrap();
            let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
            starts.push(at + HEADER_BYTES + len);
        }
        (path, bytes, starts)
    }

    /// `bytes` with zeros from `at` to the end of its sector.
    fn sector_lost(bytes: &[u8], at: usize) -> Vec<u8> {
        let mut torn = bytes.to_vec();
        let end = (at / TORN_SECTOR_BYTES + 1) * TORN_SECTOR_BYTES;
        torn[at..end.min(bytes.len())].fill(0);
        torn
    }

    #[test]
    fn a_last_write_whose_first_sector_never_reached_the_disk_is_dropped_and_no_other() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (path, whole, starts) = spanning_frames(&dir);
        let last = starts[2];
        // The last frame's first sector as before its append (zeros past
        // the old end), its later sectors on the disk.
        let torn = sector_lost(&whole, last);
        assert!(torn[last + HEADER_BYTES..].iter().any(|b| *b != 0));
        std::fs::write(&path, &torn).unwrap();
        let mut want = entries(1, 2);
        want.push((3, vec![3; 1_500]));
        assert_eq!(reopened(&dir), want, "the torn last write dropped");
        // The file was cut at that frame: appends go on after entry 3.
        let (store, wal) = open(&dir);
        let mut wal = wal.unwrap();
        wal.append(&[entry(4)]).unwrap();
        drop((wal, store));
        want.push(entry(4));
        assert_eq!(reopened(&dir), want);

        // Zeros over the last header alone are not a lost sector: damage.
        let other = tmp.path().join("header-only");
        let (path, whole, starts) = spanning_frames(&other);
        let mut zeroed = whole.clone();
        zeroed[starts[2]..starts[2] + HEADER_BYTES].fill(0);
        std::fs::write(&path, &zeroed).unwrap();
        let e = open(&other)
            .1
            .err()
            .expect("damage refuses the open")
            .to_string();
        assert!(e.contains(&format!("offset {}", starts[2])), "{e}");

        // A lost first sector with a whole frame after it: that frame was
        // synced after this one, so this one is damage.
        let other = tmp.path().join("not-last");
        let (path, whole, starts) = spanning_frames(&other);
        std::fs::write(&path, sector_lost(&whole, starts[1])).unwrap();
        let e = open(&other)
            .1
            .err()
            .expect("damage refuses the open")
            .to_string();
        assert!(
            e.contains(&path.display().to_string()) && e.contains(&format!("offset {}", starts[1])),
            "{e}"
        );
    }

    #[test]
    fn a_truncation_inside_a_frame_keeps_the_entries_before_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        {
            let (store, wal) = open(&dir);
            let mut wal = wal.unwrap();
            wal.set_segment_bytes_max(150);
            wal.append(&entries(1, 4)).unwrap();
            wal.append(&entries(5, 8)).unwrap();
            wal.append(&entries(9, 12)).unwrap();
            wal.truncate(7).unwrap();
            assert_eq!(wal.read(0, u64::MAX).unwrap(), entries(1, 6));
            // A leader's entries at 7 and after: other bytes.
            let other: Vec<(u64, Vec<u8>)> = (7..=9).map(|i| (i, vec![i as u8; 9])).collect();
            wal.append(&other).unwrap();
            let mut want = entries(1, 6);
            want.extend(other);
            assert_eq!(wal.read(0, u64::MAX).unwrap(), want);
            drop((wal, store));
            assert_eq!(reopened(&dir), want);
        }
        // A truncation of everything, then a log from elsewhere.
        let (store, wal) = open(&dir);
        let mut wal = wal.unwrap();
        wal.truncate(1).unwrap();
        assert!(wal.is_empty());
        wal.append(&entries(1, 2)).unwrap();
        drop((wal, store));
        assert_eq!(reopened(&dir), entries(1, 2));
    }

    #[test]
    fn a_truncation_after_a_purge_inside_one_frame_keeps_the_purged_entries_in_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (store, wal) = open(&dir);
        let mut wal = wal.unwrap();
        wal.append(&entries(1, 8)).unwrap();
        wal.purge(4).unwrap();
        wal.truncate(7).unwrap();
        assert_eq!(wal.read(0, u64::MAX).unwrap(), entries(5, 6));
        wal.append(&entries(7, 7)).unwrap();
        drop((wal, store));
        // The file still runs on from its name: the open takes it.
        assert_eq!(reopened(&dir), entries(1, 7));
    }

    #[test]
    fn a_truncation_cut_short_keeps_the_entries_before_it() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (settings, fail) = failing(FaultPoint::Write, libc::ENOSPC);
        {
            let (store, _) = Store::open(&dir, settings).unwrap();
            let mut wal = store.open_raft_wal().unwrap();
            wal.append(&entries(1, 4)).unwrap();
            wal.append(&entries(5, 8)).unwrap();
            // The frame's earlier entries (5, 6) cannot be written again.
            fail.store(true, Ordering::SeqCst);
            assert!(wal.truncate(7).is_err());
        }
        // As a crash at that point would leave it: the entries before 7
        // all there; the rewrite's unfinished file gone.
        let held = reopened(&dir);
        assert_eq!(held[..6], entries(1, 6)[..]);
        let names: Vec<String> = std::fs::read_dir(dir.join(RAFT_WAL_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_purge_deletes_whole_segments_and_a_log_may_go_on_past_a_gap() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (store, wal) = open(&dir);
        let mut wal = wal.unwrap();
        wal.set_segment_bytes_max(100);
        for i in 1..=30 {
            wal.append(&[entry(i)]).unwrap();
        }
        let before = wal.segment_paths();
        wal.purge(20).unwrap();
        assert_eq!(wal.bounds(), Some((21, 30)));
        let after = wal.segment_paths();
        assert!(after.len() < before.len(), "{before:?} -> {after:?}");
        assert!(after.iter().all(|p| p.exists()));
        assert!(before
            .iter()
            .filter(|p| !after.contains(p))
            .all(|p| !p.exists()));
        assert_eq!(wal.read(0, u64::MAX).unwrap(), entries(21, 30));
        // Everything purged, and the log goes on far past it (a snapshot
        // installed): the old segments go, the open finds no gap.
        wal.purge(30).unwrap();
        assert!(wal.is_empty());
        wal.append(&entries(100, 101)).unwrap();
        drop((wal, store));
        assert_eq!(reopened(&dir), entries(100, 101));
    }

    #[test]
    fn a_failed_fsync_fails_the_append_and_stops_the_store() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let (settings, fail) = failing(FaultPoint::Fsync, libc::EIO);
        let (store, _) = Store::open(&dir, settings).unwrap();
        let mut wal = store.open_raft_wal().unwrap();
        wal.append(&entries(1, 2)).unwrap();
        fail.store(true, Ordering::SeqCst);
        let e = wal.append(&entries(3, 3)).unwrap_err().to_string();
        assert!(e.contains("fsync") && e.contains("wal-"), "{e}");
        assert!(store.is_failed());
        // Not acknowledged, so not held.
        assert_eq!(wal.bounds(), Some((1, 2)));
    }
}
