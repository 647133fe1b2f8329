//! A backup's file: its name (`weir-backup-<UTC stamp>-<journal
//! seq>.wbk`, stamps sorting as times) and how it is created (readable by
//! its owner only). Shared by folder and object store backups.

use std::path::Path;

/// A scheduled backup's file: `weir-backup-<UTC stamp>-<journal seq>.wbk`.
pub const FILE_PREFIX: &str = "weir-backup-";
/// See [`FILE_PREFIX`].
pub const FILE_SUFFIX: &str = ".wbk";

/// `YYYYMMDDTHHMMSSZ` of a time in ms (UTC).
pub fn chrono_stamp(ms: u64) -> String {
    let dt = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms as i64).unwrap_or_default();
    dt.format("%Y%m%dT%H%M%SZ").to_string()
}

/// Creates (truncating) a file only its owner reads: a backup is as
/// sensitive as the data directory.
pub fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .mode(0o600)
        .open(path)
}
