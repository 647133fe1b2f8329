//! weir: zeros written over a range of sled's file only where it does not
//! already read as zeros (`vendor/sled/WEIR.md`, change 4).
//!
//! sled zeroes the tail of the segment its recovery ends in (then syncs
//! the whole file) and every free segment, at every open. After a clean
//! close those bytes are zeros already (sled zeroed them at an earlier
//! open, or `fallocate` allocated them), so the writes and the sync only
//! cost the open time: 4-5 ms of a 13-15 ms recovery of 100k tickets
//! here, up to 7 ms more when the file had dirty pages to sync.

use std::fs::File;
use std::io;

use super::{pread_exact_or_eof, pwrite_all, LogOffset, MessageKind};

/// Read this many bytes at a time while looking for a byte not zero.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// Makes the `len` bytes of `file` at `base` read as
/// `MessageKind::Corrupted` (0). Reads them first, and writes from the
/// first chunk that holds another byte (or that the file's end cuts) to
/// the range's end; returns whether it wrote. What it skips already reads
/// as zeros: on the device, or in dirty pages that the caller's sync (or
/// the next log write's) puts there.
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
        if read < n || buf[..n].iter().any(|&b| b != zero) {
            pwrite_all(file, &vec![zero; len - at], offset)?;
            return Ok(true);
        }
        at += n;
    }
    Ok(false)
}
