//! Backups of a running engine or member (DESIGN §7b): the store's image
//! at one point between writes (see `weir_actors::store::backup`),
//! spooled to a file beside the store — the store's writers wait only for
//! that, at disk speed — then served as `GET /api/v1/backup`, or kept in a
//! folder or an object store on a schedule (`weir serve --backup-dir
//! DIR|URL --backup-every 6h --backup-keep 7d`; see [`remote`]).

pub mod file;
pub mod remote;

pub use file::{chrono_stamp, create_private, FILE_PREFIX, FILE_SUFFIX};

use std::io::Seek;
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use weir_actors::store::backup::BackupSummary;
use weir_actors::store::Store;

use crate::serve::error::ApiError;

/// The media type of a backup.
pub const CONTENT_TYPE: &str = "application/vnd.weir.backup";
/// The response header with the journal sequence the backup is at.
pub const SEQ_HEADER: &str = "x-weir-backup-journal-seq";
/// The response header with the backup's BLAKE3.
pub const HASH_HEADER: &str = "x-weir-backup-blake3";

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes a backup of `store` into `file` through a 1 MiB buffer: the
/// file back, flushed (not synced), and what it holds.
pub fn backup_into(
    store: &Store,
    file: std::fs::File,
) -> Result<(std::fs::File, BackupSummary), String> {
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let summary = store
        .backup_to(&mut out, now_ms())
        .map_err(|e| e.to_string())?;
    let file = out.into_inner().map_err(|e| e.to_string())?;
    Ok((file, summary))
}

/// Takes a backup of `store` into an unnamed file in its data directory
/// (unlinked at once: a crash leaves nothing), rewound for reading.
pub fn spool(store: &Store) -> Result<(std::fs::File, BackupSummary), String> {
    let dir = store.dir();
    let path = dir.join(format!(".backup-spool-{}-{}", std::process::id(), now_ms()));
    let file = std::fs::OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot make the backup's spool {}: {e}", path.display()))?;
    let _ = std::fs::remove_file(&path);
    let (mut file, summary) =
        backup_into(store, file).map_err(|e| format!("the backup's spool: {e}"))?;
    file.rewind()
        .map_err(|e| format!("the backup's spool: {e}"))?;
    Ok((file, summary))
}

/// The answer to `GET /api/v1/backup`: the backup, streamed from its
/// spool, with its size, sequence and checksum in the headers.
pub async fn response(store: Store) -> Response {
    let spooled = tokio::task::spawn_blocking(move || spool(&store)).await;
    let (file, summary) = match spooled {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return ApiError::internal(e).into_response(),
        Err(e) => return ApiError::internal(e.to_string()).into_response(),
    };
    tracing::info!(
        journal_seq = summary.header.journal_seq,
        bytes = summary.bytes,
        entries = summary.entries,
        "backup served"
    );
    let stream =
        tokio_util::io::ReaderStream::with_capacity(tokio::fs::File::from_std(file), 1 << 20);
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, CONTENT_TYPE.to_string()),
            (header::CONTENT_LENGTH, summary.bytes.to_string()),
            (
                header::HeaderName::from_static(SEQ_HEADER),
                summary.header.journal_seq.to_string(),
            ),
            (header::HeaderName::from_static(HASH_HEADER), summary.blake3),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

/// Where scheduled backups go.
#[derive(Debug, Clone)]
pub enum Place {
    /// A folder.
    Folder(PathBuf),
    /// An object store: each backup is written in `spool` (a folder of
    /// the data directory), checked, uploaded, then removed there.
    Store {
        /// The store (its URL is the backups' prefix).
        objects: crate::objects::Objects,
        /// The local folder a backup is written in before its upload.
        spool: PathBuf,
    },
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Folder(dir) => write!(f, "{}", dir.display()),
            Place::Store { objects, .. } => f.write_str(objects.shown()),
        }
    }
}

/// Scheduled backups into a folder or an object store.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Where they go.
    pub place: Place,
    /// Between two backups.
    pub every: Duration,
    /// Backups older than this are removed (the newest one never).
    pub keep: Duration,
}

/// Writes one backup of `store` into `dir`, durably: a `.partial` file,
/// synced, renamed. Returns its path.
pub fn write_into(store: &Store, dir: &Path) -> Result<(PathBuf, BackupSummary), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("backup folder {}: {e}", dir.display()))?;
    let stamp = chrono_stamp(now_ms());
    let partial = dir.join(format!("{FILE_PREFIX}{stamp}{FILE_SUFFIX}.partial"));
    let file = create_private(&partial).map_err(|e| format!("{}: {e}", partial.display()))?;
    let (file, summary) = backup_into(store, file).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        format!("{}: {e}", partial.display())
    })?;
    file.sync_all()
        .map_err(|e| format!("{}: {e}", partial.display()))?;
    let done = dir.join(format!(
        "{FILE_PREFIX}{stamp}-{}{FILE_SUFFIX}",
        summary.header.journal_seq
    ));
    std::fs::rename(&partial, &done).map_err(|e| format!("{}: {e}", done.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok((done, summary))
}

/// Removes this folder's backups older than `keep` (by their stamp),
/// never the newest; and `.partial` files a crash left. Returns how many.
pub fn prune(dir: &Path, keep: Duration, now_ms: u64) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut ours: Vec<(String, PathBuf)> = Vec::new();
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(FILE_PREFIX) {
            continue;
        }
        if name.ends_with(".partial") {
            if std::fs::remove_file(e.path()).is_ok() {
                removed += 1;
            }
            continue;
        }
        if name.ends_with(FILE_SUFFIX) {
            ours.push((name, e.path()));
        }
    }
    ours.sort();
    let newest = ours.pop();
    let cutoff = chrono_stamp(now_ms.saturating_sub(keep.as_millis() as u64));
    for (name, path) in ours {
        // Stamps sort as times: `weir-backup-20261204T183000Z-…`.
        let stamp = &name[FILE_PREFIX.len()..];
        if stamp < cutoff.as_str() && std::fs::remove_file(&path).is_ok() {
            tracing::info!(file = %path.display(), "backup removed: older than --backup-keep");
            removed += 1;
        }
    }
    drop(newest);
    removed
}

/// Runs `schedule` for `store` until the task is aborted: a backup every
/// `every` (the first one `every` after the start), then the prune.
pub fn spawn_schedule(store: Store, schedule: Schedule) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(schedule.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let (store2, s) = (store.clone(), schedule.clone());
            let local = match &s.place {
                Place::Folder(dir) => dir.clone(),
                Place::Store { spool, .. } => spool.clone(),
            };
            let done = tokio::task::spawn_blocking(move || {
                let written = write_into(&store2, &local);
                let pruned = match &s.place {
                    Place::Folder(dir) => prune(dir, s.keep, now_ms()),
                    // The spool keeps nothing but a crash's .partial.
                    Place::Store { spool, .. } => prune(spool, Duration::ZERO, now_ms()),
                };
                (written, pruned)
            })
            .await;
            match (done, &schedule.place) {
                (Ok((Ok((path, summary)), pruned)), Place::Folder(_)) => {
                    tracing::info!(file = %path.display(), journal_seq = summary.header.journal_seq, bytes = summary.bytes, pruned, "scheduled backup written")
                }
                (Ok((Ok((path, summary)), _)), Place::Store { objects, .. }) => {
                    let name = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let sent = remote::upload(objects, &name, &path).await;
                    let _ = std::fs::remove_file(&path);
                    match sent {
                        Ok(bytes) => {
                            let pruned = remote::prune(objects, schedule.keep, now_ms()).await;
                            tracing::info!(store = %objects.shown(), backup = %name, journal_seq = summary.header.journal_seq, bytes, pruned = ?pruned, "scheduled backup uploaded")
                        }
                        Err(e) => tracing::error!(error = %e, "scheduled backup not uploaded"),
                    }
                }
                (Ok((Err(e), _)), _) => tracing::error!(error = %e, "scheduled backup failed"),
                (Err(e), _) => tracing::error!(error = %e, "scheduled backup panicked"),
            }
        }
    })
}

/// Paces a download to at most `max_bytes_per_s` (0: no limit).
pub struct Throttle {
    max_bytes_per_s: u64,
    started: std::time::Instant,
    sent: u64,
}

impl Throttle {
    /// A throttle of `max_bytes_per_s` (0: none).
    pub fn new(max_bytes_per_s: u64) -> Throttle {
        Throttle {
            max_bytes_per_s,
            started: std::time::Instant::now(),
            sent: 0,
        }
    }

    /// How long to wait before passing `bytes` more.
    pub fn wait_for(&mut self, bytes: usize) -> Duration {
        self.sent += bytes as u64;
        if self.max_bytes_per_s == 0 {
            return Duration::ZERO;
        }
        let due = Duration::from_secs_f64(self.sent as f64 / self.max_bytes_per_s as f64);
        due.saturating_sub(self.started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_keeps_the_newest_and_what_is_young() {
        let dir = tempfile::tempdir().unwrap();
        let day = 86_400_000u64;
        let now = 1_800_000_000_000u64;
        let names: Vec<String> = [now - 10 * day, now - 8 * day, now - day, now - 1_000]
            .iter()
            .map(|t| format!("{FILE_PREFIX}{}-7{FILE_SUFFIX}", chrono_stamp(*t)))
            .collect();
        for n in &names {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        std::fs::write(
            dir.path()
                .join(format!("{FILE_PREFIX}x{FILE_SUFFIX}.partial")),
            b"x",
        )
        .unwrap();
        std::fs::write(dir.path().join("other.txt"), b"x").unwrap();
        let removed = prune(dir.path(), Duration::from_millis(7 * day), now);
        assert_eq!(removed, 3, "two old backups and a partial");
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want = vec![names[2].clone(), names[3].clone(), "other.txt".to_string()];
        want.sort();
        assert_eq!(left, want);
        // Only old ones: the newest stays.
        let only = tempfile::tempdir().unwrap();
        std::fs::write(only.path().join(&names[0]), b"x").unwrap();
        assert_eq!(prune(only.path(), Duration::from_millis(day), now), 0);
    }

    #[test]
    fn a_throttle_spreads_bytes_over_time() {
        let mut t = Throttle::new(1_000);
        assert!(t.wait_for(500) > Duration::from_millis(400));
        let mut free = Throttle::new(0);
        assert_eq!(free.wait_for(1 << 30), Duration::ZERO);
    }
}
