//! Free space: the store stops writing before the disk is full.
//!
//! sled 0.34.7 does not survive ENOSPC in the middle of a write: a store
//! filled to the last byte, killed and reopened was seen to fail every later
//! open, its acknowledged records gone. So the store never lets sled get
//! there. Before each commit batch and each record write it asks the
//! filesystem of the data directory for its free space ([`FreeSpaceProbe`],
//! `statvfs` by default); below the reserve (the larger of
//! `disk_reserve_min_bytes` and `disk_reserve_percent` of the filesystem)
//! it refuses the write with [`StoreError::DiskFull`] and goes fail-stop,
//! as after a failed append: the engine stops, nothing more is
//! acknowledged, and everything acknowledged is already durable.
//!
//! A full disk costs availability, never data: the store keeps a
//! preallocated reserve file (`DATA/reserve`, `reserve_file_bytes`) and
//! deletes it when it hits the reserve, so that sled's last flush at
//! shutdown and the next open (which writes a little) find room even if
//! something else filled the disk meanwhile. The next open recreates it
//! when there is room again.
//!
//! `statvfs` is one syscall of about a microsecond: negligible beside a
//! commit (a flush at the least), so it is not cached.
//!
//! [`StoreError::DiskFull`]: super::StoreError::DiskFull

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file the store keeps allocated as room for its last writes.
pub(crate) const RESERVE_FILE: &str = "reserve";

/// Space of a filesystem, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes an unprivileged writer may still allocate.
    pub free_bytes: u64,
    /// The filesystem's size.
    pub total_bytes: u64,
}

/// A function that measures the filesystem holding a path.
type ProbeFn = dyn Fn(&Path) -> io::Result<DiskSpace> + Send + Sync;

/// Reports the space of the filesystem that holds a path. The default asks
/// `statvfs`; tests pass a fake to drive the store into its reserve.
#[derive(Clone)]
pub struct FreeSpaceProbe(Arc<ProbeFn>);

impl FreeSpaceProbe {
    /// A probe that calls `f`.
    pub fn new(f: impl Fn(&Path) -> io::Result<DiskSpace> + Send + Sync + 'static) -> Self {
        FreeSpaceProbe(Arc::new(f))
    }

    /// The probe that asks the filesystem (`statvfs`).
    pub fn statvfs() -> Self {
        FreeSpaceProbe::new(statvfs_space)
    }

    /// The space of the filesystem holding `path`.
    pub fn probe(&self, path: &Path) -> io::Result<DiskSpace> {
        (self.0)(path)
    }
}

impl Default for FreeSpaceProbe {
    fn default() -> Self {
        FreeSpaceProbe::statvfs()
    }
}

impl std::fmt::Debug for FreeSpaceProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FreeSpaceProbe(..)")
    }
}

impl PartialEq for FreeSpaceProbe {
    /// Two probes are equal when they are the same probe.
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// `statvfs` of `path`: available blocks (those an unprivileged writer may
/// use, so root's reserved blocks never count) and the total.
pub fn statvfs_space(path: &Path) -> io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs writes into the zeroed struct we own and reads the
    // NUL-terminated path, which lives until the call returns.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let frsize = if st.f_frsize > 0 {
        st.f_frsize as u64
    } else {
        st.f_bsize as u64
    };
    Ok(DiskSpace {
        free_bytes: (st.f_bavail as u64).saturating_mul(frsize),
        total_bytes: (st.f_blocks as u64).saturating_mul(frsize),
    })
}

/// The reserve for a filesystem of `total_bytes`: the larger of the
/// minimum and the percentage.
pub(crate) fn reserve_bytes(total_bytes: u64, min_bytes: u64, percent: u32) -> u64 {
    let share = (u128::from(total_bytes) * u128::from(percent.min(100)) / 100) as u64;
    min_bytes.max(share)
}

/// The reserve file's path in `dir`.
pub(crate) fn reserve_path(dir: &Path) -> PathBuf {
    dir.join(RESERVE_FILE)
}

/// Creates the reserve file of `bytes` in `dir`, allocated and fsynced,
/// unless it is there already at that size. Its blocks are taken from the
/// free space; a failure leaves no partial file behind.
pub(crate) fn create_reserve(dir: &Path, bytes: u64) -> io::Result<()> {
    let path = reserve_path(dir);
    if std::fs::metadata(&path).is_ok_and(|m| m.len() >= bytes) {
        return Ok(());
    }
    let made = (|| {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        allocate(&file, bytes)?;
        file.sync_all()?;
        File::open(dir)?.sync_all()
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&path);
    }
    made
}

/// Allocates `bytes` of `file` from `offset` (`fallocate`, the file's size
/// grown to cover them); `false` where the filesystem has no `fallocate`.
pub fn fallocate_range(file: &File, offset: u64, bytes: u64) -> io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    let too_large = |_| io::Error::new(io::ErrorKind::InvalidInput, "allocation too large");
    let at = libc::off_t::try_from(offset).map_err(too_large)?;
    let len = libc::off_t::try_from(bytes).map_err(too_large)?;
    // SAFETY: fallocate on a descriptor we own; no memory is involved.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, at, len) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return Ok(false);
    }
    Err(err)
}

/// Allocates `bytes` to `file`: `fallocate` where the filesystem has it,
/// else zeros written (a sparse file would reserve nothing).
fn allocate(file: &File, bytes: u64) -> io::Result<()> {
    use std::io::Write;
    if fallocate_range(file, 0, bytes)? {
        return Ok(());
    }
    let zeros = vec![0u8; 1 << 20];
    let mut left = bytes;
    let mut w = file;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        w.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Deletes the reserve file, giving its blocks back; `true` when it was
/// there.
pub(crate) fn release_reserve(dir: &Path) -> bool {
    std::fs::remove_file(reserve_path(dir)).is_ok()
}
