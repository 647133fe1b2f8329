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
    /// renamed; an existing FILE is not overwritten), or an object's URL
    /// (s3://BUCKET/PREFIX/NAME.wbk, gs://…, az://…: written and checked
    /// in a local file, then uploaded; keys from the AWS_*, GOOGLE_*,
    /// AZURE_* variables or --credentials).
    pub file: PathBuf,
    /// A file of NAME=VALUE lines (AWS_ACCESS_KEY_ID=…) for a URL's store.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
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
    /// The backup file, or an object's URL (s3://BUCKET/PREFIX/NAME.wbk).
    pub file: PathBuf,
    /// A file of NAME=VALUE lines (AWS_ACCESS_KEY_ID=…) for a URL's store.
    #[arg(long, value_name = "FILE")]
    pub credentials: Option<PathBuf>,
    /// The data directory to make (absent or empty).
    #[arg(long)]
    pub data: PathBuf,
    /// Print JSON instead of a line.
    #[arg(long)]
    pub json: bool,
}

/// Removes a fetched file when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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
/// The store and object name of a backup URL, or `None` for a path.
fn remote_of(
    file: &std::path::Path,
    credentials: Option<&std::path::Path>,
) -> Result<Option<(crate::objects::Objects, String)>, Failure> {
    let text = file.to_string_lossy();
    if !crate::backup::remote::is_url(&text) {
        return Ok(None);
    }
    let (dir, name) = crate::backup::remote::split(&text).map_err(Failure::input)?;
    let objects = crate::objects::Objects::open(&dir, credentials).map_err(Failure::input)?;
    Ok(Some((objects, name)))
}

/// Runs `weir backup`.
pub fn run_backup(a: BackupArgs) -> Result<u8, Failure> {
    let remote = remote_of(&a.file, a.credentials.as_deref())?;
    if let Some((objects, name)) = &remote {
        // Refused before the engine spends a backup on it.
        let exists = client::block_on(objects.head(name))?.map_err(Failure::store)?;
        if exists.is_some() {
            return Err(Failure::input(format!(
                "{}/{name} exists: a backup never overwrites one (pick another name)",
                objects.shown()
            )));
        }
    } else if a.file.exists() {
        return Err(Failure::input(format!(
            "{} exists: a backup never overwrites a file (pick another name)",
            a.file.display()
        )));
    }
    let c = client::engine(&a.conn)?;
    let partial = match &remote {
        Some((_, name)) => {
            std::env::temp_dir().join(format!("{name}.{}.partial", std::process::id()))
        }
        None => PathBuf::from(format!("{}.partial", a.file.display())),
    };
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
    let summary = backup::verify(read, &partial.display().to_string()).map_err(|e| {
        if remote.is_some() {
            let _ = std::fs::remove_file(&partial);
        }
        failure(e)
    })?;
    match &remote {
        Some((objects, name)) => {
            let sent = client::block_on(crate::backup::remote::upload(objects, name, &partial))?;
            let _ = std::fs::remove_file(&partial);
            sent.map_err(Failure::store)?;
        }
        None => std::fs::rename(&partial, &a.file)
            .map_err(|e| Failure::store(format!("{}: {e}", a.file.display())))?,
    }
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
    // A URL's backup is fetched into a local file first (restore reads it
    // twice: checked whole before anything is written).
    let fetched = match remote_of(&a.file, a.credentials.as_deref())? {
        Some((objects, name)) => {
            let local =
                std::env::temp_dir().join(format!("weir-restore-{}-{name}", std::process::id()));
            let got = client::block_on(crate::backup::remote::download(&objects, &name, &local))?;
            if let Err(e) = got {
                let _ = std::fs::remove_file(&local);
                return Err(Failure::store(e));
            }
            Some(local)
        }
        None => None,
    };
    let _cleanup = fetched.clone().map(TempFile);
    let path = fetched.unwrap_or_else(|| a.file.clone());
    let f = std::fs::File::open(&path)
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
