//! Artifacts on the side of an attempt: an upstream's artifacts fetched
//! into `$WEIR_ARTIFACTS_IN/<upstream>/<name>` before a command starts,
//! and, after it succeeds, the files its patterns match under
//! `$WEIR_ARTIFACTS_OUT` stored by content before the success is
//! reported (so no failover after a success can lose them).
//!
//! Objects are keyed by the blake3 hash of their content
//! ([`weir_core::artifact::object_key`]): two nodes (or two reruns) that
//! produce the same bytes share one object. A file is hashed first, then
//! uploaded unless the store holds that content already, written recently
//! enough that the collector ([`collect`]) cannot take it before the
//! record naming it is journaled. A download is checked against the size
//! and hash its record names before the command sees it.

pub mod collect;
pub mod options;
pub mod routes;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{FutureExt, StreamExt, TryStreamExt};
use weir_actors::scheduler::records::TaskInput;
use weir_actors::task::TaskError;
use weir_core::artifact::{self, ArtifactRef, Limits, Patterns, Produced};

use crate::objects::Objects;

/// Downloads or uploads of one attempt in flight at once.
pub const TRANSFERS_IN_FLIGHT: usize = 4;
/// The size past which an artifact already in the store (same content,
/// young enough for the collector's grace) is not uploaded again: below
/// it, the HEAD that would find it costs what the upload does.
pub const DEDUP_BYTES_MIN: u64 = 64 << 10;
/// How long an object nothing references is kept before the collector
/// deletes it, unless set: longer than any upload's way from its
/// acknowledgement to its record.
pub const GRACE_MS_DEFAULT: u64 = 60 * 60 * 1000;

/// Where an engine's or a worker's attempts keep artifacts.
#[derive(Clone)]
pub enum ArtifactStore {
    /// An object store (or a folder) every process that runs the graph's
    /// nodes reaches.
    Store {
        /// The store.
        objects: Objects,
        /// How long an unreferenced object is kept.
        grace_ms: u64,
    },
    /// A worker's: the engine's folder once the engine said where it is
    /// (a worker on its machine), else missing, for the reason returned.
    Lazy(Arc<dyn Fn() -> Result<Objects, String> + Send + Sync>),
    /// None: a node that declares artifacts (or whose upstream has some)
    /// fails, for this reason.
    Missing(String),
}

impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArtifactStore::Store { objects, .. } => write!(f, "Store({})", objects.shown()),
            ArtifactStore::Lazy(_) => f.write_str("Lazy"),
            ArtifactStore::Missing(why) => write!(f, "Missing({why})"),
        }
    }
}

/// The artifact store an attempt uses.
pub type Shared = Arc<ArtifactStore>;

impl ArtifactStore {
    /// Artifacts in a local folder (an embedded engine's default), with
    /// the default grace.
    pub fn in_folder(dir: &Path) -> Result<Shared, String> {
        Ok(Arc::new(ArtifactStore::Store {
            objects: Objects::folder(dir)?,
            grace_ms: GRACE_MS_DEFAULT,
        }))
    }

    fn objects(&self) -> Result<Objects, String> {
        match self {
            ArtifactStore::Store { objects, .. } => Ok(objects.clone()),
            ArtifactStore::Lazy(f) => f(),
            ArtifactStore::Missing(why) => Err(why.clone()),
        }
    }

    /// The store, when there is one.
    pub fn store(&self) -> Option<Objects> {
        self.objects().ok()
    }

    /// How long an unreferenced object is kept (a worker's lazy store
    /// takes the default: it does not collect).
    pub fn grace_ms(&self) -> u64 {
        match self {
            ArtifactStore::Store { grace_ms, .. } => *grace_ms,
            _ => GRACE_MS_DEFAULT,
        }
    }

    /// Fetches the artifacts of `input`'s upstreams into `folder`
    /// (`<folder>/<upstream>/<name>`), each checked against its hash. An
    /// unreachable store is a retryable failure; a missing or damaged
    /// object too (the store may be catching up), named.
    pub async fn fetch_inputs(&self, input: &TaskInput, folder: &Path) -> Result<u64, TaskError> {
        tokio::fs::create_dir_all(folder).await.map_err(|e| {
            TaskError::Retryable(format!("cannot create {}: {e}", folder.display()))
        })?;
        let wanted: Vec<(String, ArtifactRef)> = input
            .upstreams
            .iter()
            .flat_map(|(up, r)| r.artifacts.iter().map(move |a| (up.clone(), a.clone())))
            .collect();
        if wanted.is_empty() {
            return Ok(0);
        }
        let objects = self.objects().map_err(|why| {
            TaskError::Permanent(format!(
                "node {}: its upstreams have artifacts, but {why}",
                input.node
            ))
        })?;
        // Owned by each transfer: the futures run side by side.
        futures::stream::iter(wanted.into_iter().map(|(up, a)| {
            let dest = folder.join(&up).join(&a.name);
            let objects = objects.clone();
            let node = input.node.clone();
            async move {
                // The record's name was checked when it was made; a
                // record that names a path outside the folder is refused
                // all the same.
                artifact::check_name(&a.name, false).map_err(|e| {
                    TaskError::Permanent(format!("node {node}: upstream {up}'s artifact {e}"))
                })?;
                if let Some(parent) = dest.parent() {
                    tokio::fs::create_dir_all(parent).await.map_err(|e| {
                        TaskError::Retryable(format!("cannot create {}: {e}", parent.display()))
                    })?;
                }
                objects
                    .get_file(&artifact::object_key(&a.hash), &dest, a.bytes, &a.hash)
                    .await
                    .map_err(|e| {
                        TaskError::Retryable(format!(
                            "node {node}: fetching upstream {up}'s artifact {}: {e}",
                            a.name
                        ))
                    })?;
                Ok::<u64, TaskError>(a.bytes)
            }
            .boxed()
        }))
        .buffer_unordered(TRANSFERS_IN_FLIGHT)
        .try_fold(0u64, |sum, b| async move { Ok(sum + b) })
        .await
    }

    /// Stores the files under `folder` that `patterns` match, within
    /// `limits`, and returns their records. Every pattern must match a
    /// file. A failed upload is retryable (the node's retry policy
    /// covers an outage of the store) and names the store.
    pub async fn store_outputs(
        &self,
        node: &str,
        folder: &Path,
        patterns: &[String],
        limits: &Limits,
        now_ms: u64,
    ) -> Result<Vec<ArtifactRef>, TaskError> {
        let permanent = |e: String| TaskError::Permanent(format!("node {node}: {e}"));
        let patterns = Patterns::new(patterns).map_err(permanent)?;
        let objects = self.objects().map_err(|why| {
            TaskError::Permanent(format!("node {node} declares artifacts, but {why}"))
        })?;
        let grace_ms = self.grace_ms();
        let root = folder.to_path_buf();
        let produced = tokio::task::spawn_blocking(move || list_files(&root))
            .await
            .map_err(|e| TaskError::Retryable(e.to_string()))?
            .map_err(|e| TaskError::Retryable(format!("node {node}: {e}")))?;
        let picked = artifact::select(&patterns, &produced, limits)
            .map_err(|e| TaskError::Retryable(format!("node {node}: {e}")))?;
        futures::stream::iter(picked.into_iter().map(|p| {
            let objects = objects.clone();
            let node = node.to_string();
            let path = folder.join(&p.name);
            async move {
            let hashed = path.clone();
            // A file up to one request's size is read once, hashed and
            // sent from memory (a second read for the upload cost a
            // tenth of a local transfer); a larger one is hashed, then
            // streamed.
            let (hash, bytes, body) = tokio::task::spawn_blocking(move || {
                hash_file_keeping(&hashed, crate::objects::SINGLE_PUT_BYTES_MAX)
            })
            .await
            .map_err(|e| TaskError::Retryable(e.to_string()))?
            .map_err(|e| TaskError::Retryable(format!("node {node}: {e}")))?;
            let key = artifact::object_key(&hash);
            // A small file is put again rather than asked after: one
            // request either way, and a put refreshes the object's age.
            let fresh = bytes > DEDUP_BYTES_MIN && {
                let stored = objects.head(&key).await.map_err(|e| {
                    TaskError::Retryable(format!("node {node}: artifact {}: {e}", p.name))
                })?;
                stored.as_ref().is_some_and(|s| {
                    s.bytes == bytes && artifact::fresh_enough(s.modified_ms, now_ms, grace_ms)
                })
            };
            if !fresh {
                let sent = match body {
                    Some(body) => objects.put_bytes(&key, body).await.map(|()| bytes),
                    None => objects.put_file(&key, &path).await,
                };
                let sent = sent.map_err(|e| {
                    TaskError::Retryable(format!("node {node}: artifact {}: {e}", p.name))
                })?;
                // The key is the content's hash: a file that changed
                // after it was hashed must not be stored under it.
                if sent != bytes {
                    // What went under the key is not what hashes to it.
                    let _ = objects.delete(&key).await;
                    return Err(TaskError::Retryable(format!(
                        "node {node}: artifact {} changed while it was stored ({bytes} bytes hashed, {sent} sent)",
                        p.name
                    )));
                }
            }
            tracing::debug!(node, artifact = %p.name, bytes, hash = %hash, deduplicated = fresh, "artifact stored");
            Ok::<ArtifactRef, TaskError>(ArtifactRef {
                name: p.name,
                bytes,
                hash,
            })
            }
            .boxed()
        }))
        .buffered(TRANSFERS_IN_FLIGHT)
        .try_collect()
        .await
    }
}

/// The regular files under `root`, by `/`-separated relative path. A
/// symbolic link is followed to a file, never into a folder (no loops).
pub fn list_files(root: &Path) -> Result<Vec<Produced>, String> {
    let mut out = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir == root => continue,
            Err(e) => return Err(format!("cannot list {}: {e}", dir.display())),
        };
        for entry in rd {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            let path = entry.path();
            let kind = entry
                .file_type()
                .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
            if kind.is_dir() {
                stack.push(path);
                continue;
            }
            let meta = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => m,
                // A dangling link, a link to a folder, a socket: not a file.
                _ => continue,
            };
            let rel = path
                .strip_prefix(root)
                .map_err(|e| e.to_string())?
                .to_str()
                .ok_or_else(|| format!("{} is not UTF-8: an artifact's name is", path.display()))?
                .to_string();
            out.push(Produced {
                name: rel,
                bytes: meta.len(),
            });
        }
    }
    out.sort();
    Ok(out)
}

/// The blake3 hash (hex) and size of a file, and its content when it is
/// at most `keep_max` bytes (read once, whole); a larger file is read in
/// 1 MiB blocks and not kept.
pub fn hash_file_keeping(
    path: &Path,
    keep_max: u64,
) -> Result<(String, u64, Option<bytes::Bytes>), String> {
    match crate::objects::read_whole(path, keep_max)? {
        Some(buf) => {
            let hash = blake3::hash(&buf).to_hex().to_string();
            Ok((hash, buf.len() as u64, Some(bytes::Bytes::from(buf))))
        }
        None => {
            let (hash, bytes) = hash_file(path)?;
            Ok((hash, bytes, None))
        }
    }
}

/// The blake3 hash (hex) and size of a file, read in 1 MiB blocks.
pub fn hash_file(path: &Path) -> Result<(String, u64), String> {
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = std::io::Read::read(&mut f, &mut buf)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        bytes += n as u64;
        hasher.update(&buf[..n]);
    }
    Ok((hasher.finalize().to_hex().to_string(), bytes))
}
