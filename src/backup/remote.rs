//! Backups in an object store: `weir backup s3://bucket/prefix/name.wbk`,
//! `weir restore s3://…`, and scheduled backups into a URL
//! (`--backup-dir s3://bucket/prefix`). A backup is written and checked
//! in a local file first (as for a folder), then uploaded whole: the
//! store's upload is atomic, so an object under a backup's name is always
//! a complete, checked backup.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::file::{chrono_stamp, create_private, FILE_PREFIX, FILE_SUFFIX};
use crate::objects::Objects;

/// Whether a backup place is a URL (`scheme://…`) rather than a path.
pub fn is_url(place: &str) -> bool {
    place.contains("://") && !place.starts_with("file://")
}

/// Splits a backup object's URL into its folder's URL and its name:
/// `s3://b/p/x.wbk` → (`s3://b/p`, `x.wbk`).
pub fn split(url: &str) -> Result<(String, String), String> {
    let (dir, name) = url
        .rsplit_once('/')
        .filter(|(d, n)| {
            !n.is_empty() && d.contains("://") && !d.ends_with(':') && !d.ends_with("//")
        })
        .ok_or_else(|| format!("{url:?} names no object: write s3://BUCKET/[PREFIX/]NAME.wbk"))?;
    Ok((dir.to_string(), name.to_string()))
}

/// Uploads the checked backup `file` as `name` in `objects`, refusing to
/// replace an object of that name.
pub async fn upload(objects: &Objects, name: &str, file: &Path) -> Result<u64, String> {
    if objects.head(name).await?.is_some() {
        return Err(format!(
            "{}/{name} exists: a backup never overwrites one (pick another name)",
            objects.shown()
        ));
    }
    objects.put_file(name, file).await
}

/// Downloads the object `name` into `file` (created, 0600).
pub async fn download(objects: &Objects, name: &str, file: &Path) -> Result<u64, String> {
    let (_, mut stream) = objects.get_stream(name).await?;
    let std_file = create_private(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut out = tokio::fs::File::from_std(std_file);
    let mut got = 0u64;
    while let Some(block) = stream.next().await {
        let block = block?;
        got += block.len() as u64;
        out.write_all(&block)
            .await
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    out.flush()
        .await
        .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(got)
}

/// Removes the store's scheduled backups older than `keep` (by the stamp
/// in their names), never the newest. Returns how many.
pub async fn prune(objects: &Objects, keep: Duration, now_ms: u64) -> Result<usize, String> {
    let mut ours: Vec<String> = objects
        .list("")
        .await?
        .into_iter()
        .map(|l| l.key)
        .filter(|k| !k.contains('/') && k.starts_with(FILE_PREFIX) && k.ends_with(FILE_SUFFIX))
        .collect();
    ours.sort();
    ours.pop();
    let cutoff = chrono_stamp(now_ms.saturating_sub(keep.as_millis() as u64));
    let mut removed = 0;
    for name in ours {
        if &name[FILE_PREFIX.len()..] < cutoff.as_str() {
            objects.delete(&name).await?;
            tracing::info!(store = %objects.shown(), backup = %name, "backup removed: older than --backup-keep");
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_folder_and_name() {
        assert_eq!(
            split("s3://b/p/q/x.wbk").unwrap(),
            ("s3://b/p/q".to_string(), "x.wbk".to_string())
        );
        assert_eq!(
            split("s3://b/x.wbk").unwrap(),
            ("s3://b".to_string(), "x.wbk".to_string())
        );
        assert!(split("s3://b/").is_err());
        assert!(split("s3://b").is_err());
        assert!(is_url("s3://b/x") && !is_url("/tmp/x.wbk") && !is_url("file:///tmp/x"));
    }
}
