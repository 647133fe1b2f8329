//! weir: zeros written over a range of sled's file only where it does not
//! already read as zeros (`vendor/sled/WEIR.md`, change 4).
//!
//! sled zeroes the tail of the segment its recovery ends in (then syncs
//! the whole file) and every free segment, at every open. Most of those
//! bytes are zeros already: a segment free at the last open was zeroed by
//! it, and weir's fsync mode allocates a new segment whole (`bump_tip`),
//! so the rest of the last one was never written. Rewriting them cost
//! 4-5 ms of a 14 ms recovery of 100k tickets here (9.4 ms without), and
//! up to 7 ms more when the sync had dirty pages to write. Segments sled freed since
//! the last open (by cleaning, or at that open) still hold their old
//! bytes, and are written as before.

use std::fs::File;
use std::io;

use super::{pread_exact_or_eof, pwrite_all, LogOffset, MessageKind};

/// Read this many bytes at a time while looking for a byte not zero.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Makes the `len` bytes of `file` at `base` read as
/// `MessageKind::Corrupted` (0). Reads them first, and writes from the
/// first chunk that holds another byte (or that the file's end cuts) to
/// the range's end; returns whether it wrote. What it skips already reads
/// as zeros: on the device, or in dirty pages an earlier open left (killed
/// before its sync). The recovered segment's caller then fdatasyncs the
/// file; the free segments' caller syncs nothing, as upstream's does not.
///
/// One case differs from upstream, which rewrote every range: a page whose
/// write-back failed stays in the page cache marked clean, so it reads as
/// zeros the device does not hold. Linux reports such a failure once per
/// open file (weir asks after every flush, `actors/src/store/sync.rs`), so
/// only a failure reported to a handle already gone is missed here.
pub(crate) fn zero_range(
    file: &File,
    base: LogOffset,
    len: usize,
) -> io::Result<bool> {
    let zero: u8 = MessageKind::Corrupted.into();
    assert_eq!(zero, 0, "a free byte of sled's log is 0");
    let mut buf = vec![0_u8; READ_CHUNK_BYTES.min(len)];
    let mut at = 0_usize;
    while at < len {
        let n = READ_CHUNK_BYTES.min(len - at);
        let offset = base + at as LogOffset;
        let read = pread_exact_or_eof(file, &mut buf[..n], offset)?;
        if read < n || !all_zero(&buf[..n]) {
            pwrite_all(file, &vec![zero; len - at], offset)?;
            return Ok(true);
        }
        at += n;
    }
    Ok(false)
}

/// Whether every byte of `bytes` is 0: an OR of them all, which the
/// compiler makes wide (a search that stops at the first other byte
/// reads one byte at a time: 3 ms of a recovery's open here).
fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().fold(0_u8, |acc, &b| acc | b) == 0
}
