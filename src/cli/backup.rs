//! `weir backup FILE`: a backup of the running engine (or of the member
//! asked) into FILE, checked before it is named FILE; `weir restore FILE
//! --data DIR`: a new data directory from a backup, refused whole if the
//! backup is damaged or cut.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use futures::StreamExt;
use weir_actors::store::backup::{self, BackupError, BackupSummary};
use weir_actors::store::StoreSettings;

use super::client::{self, Conn};
use super::{out, Failure};
use crate::backup::Throttle;

/// `weir backup`.
#[derive(Debug, Args)]
pub struct BackupArgs {
    /// Where to write it: a file (made as FILE.partial, checked, then
    /// renamed; an existing FILE is not overwritten).
    pub file: PathBuf,
    /// Download at most this many KiB a second (0: as fast as it comes):
    /// the engine spools the backup first, so a slow download never holds
    /// its writers back.
    #[arg(long, default_value_t = 0)]
    pub max_kib_per_s: u64,
    #[command(flatten)]
    pub conn: Conn,
}

/// `weir restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The backup file.
    pub file: PathBuf,
    /// The data directory to make (absent or empty).
    #[arg(long)]
    pub data: PathBuf,
    /// Print JSON instead of a line.
    #[arg(long)]
    pub json: bool,
}

fn said(s: &BackupSummary) -> String {
    format!(
        "journal sequence {}, {} entries, {} blobs, {} bytes, BLAKE3 {}",
        s.header.journal_seq, s.entries, s.blobs, s.bytes, s.blake3
    )
}

fn failure(e: BackupError) -> Failure {
    match e {
        BackupError::Target { .. } => Failure::input(e.to_string()),
        _ => Failure::store(e.to_string()),
    }
}

/// Runs `weir backup`.
pub fn run_backup(a: BackupArgs) -> Result<u8, Failure> {
    if a.file.exists() {
        return Err(Failure::input(format!(
            "{} exists: a backup never overwrites a file (pick another name)",
            a.file.display()
        )));
    }
    let c = client::engine(&a.conn)?;
    let partial = PathBuf::from(format!("{}.partial", a.file.display()));
    let started = std::time::Instant::now();
    let fetched: Result<(), Failure> = client::block_on(async {
        let resp = c.stream(&["api", "v1", "backup"], &[]).await?;
        let mut f = crate::backup::create_private(&partial)
            .map_err(|e| Failure::store(format!("{}: {e}", partial.display())))?;
        let mut throttle = Throttle::new(a.max_kib_per_s.saturating_mul(1024));
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| {
                Failure::store(format!(
                    "the backup stopped mid-way: {e} ({} kept)",
                    partial.display()
                ))
            })?;
            f.write_all(&chunk)
                .map_err(|e| Failure::store(format!("{}: {e}", partial.display())))?;
            let wait = throttle.wait_for(chunk.len());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        f.sync_all()
            .map_err(|e| Failure::store(format!("{}: {e}", partial.display())))?;
        Ok(())
    })?;
    fetched?;
    // Checked whole before it takes its name: a FILE is always complete.
    let read = std::fs::File::open(&partial)
        .map_err(|e| Failure::store(format!("{}: {e}", partial.display())))?;
    let summary = backup::verify(read, &partial.display().to_string()).map_err(failure)?;
    std::fs::rename(&partial, &a.file)
        .map_err(|e| Failure::store(format!("{}: {e}", a.file.display())))?;
    let secs = started.elapsed().as_secs_f64().max(1e-6);
    if a.conn.json {
        out(&serde_json::to_string(&summary).unwrap_or_default());
    } else {
        out(&format!(
            "backup written to {}: {} ({:.1} MB/s)",
            a.file.display(),
            said(&summary),
            summary.bytes as f64 / 1e6 / secs
        ));
    }
    Ok(0)
}

/// Runs `weir restore`.
pub fn run_restore(a: RestoreArgs) -> Result<u8, Failure> {
    let f = std::fs::File::open(&a.file)
        .map_err(|e| Failure::input(format!("backup {}: {e}", a.file.display())))?;
    let settings = StoreSettings::default()
        .with_env_overrides()
        .map_err(Failure::input)?;
    let started = std::time::Instant::now();
    let summary =
        backup::restore(f, &a.file.display().to_string(), &a.data, settings).map_err(failure)?;
    if a.json {
        out(&serde_json::to_string(&summary).unwrap_or_default());
    } else {
        out(&format!(
            "{} restored from {} in {} ms: {}. Start it as a single engine (weir serve DEFS --data {}), \
             or as a new group's first member (--raft-id 1 --raft-peers with itself alone, then weir members add)",
            a.data.display(),
            a.file.display(),
            started.elapsed().as_millis(),
            said(&summary),
            a.data.display()
        ));
    }
    Ok(0)
}
