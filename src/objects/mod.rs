//! Object stores behind one URL: where artifacts (and backups) live when
//! they must outlive the machine that wrote them.
//!
//! [`Objects`] opens a URL ([`url::StoreUrl`]) through the `object_store`
//! crate (S3 and S3-compatible stores, GCS, Azure, a local folder) and
//! offers what weir needs of it: a start-up probe, streamed uploads of a
//! file, streamed downloads checked against a blake3 hash, listing and
//! deletion. Credentials come from the environment or a credentials file
//! and never appear in what is shown: errors name the store by its
//! [`Objects::shown`] URL.
//!
//! Requests are bounded: a connection attempt gives up after
//! [`CONNECT_TIMEOUT_MS`], a request after [`REQUEST_TIMEOUT_MS`], and the
//! client retries a failed request for at most [`RETRY_TIMEOUT_MS`]; a
//! node's own retry policy covers longer outages. A local folder is
//! written with fsync (file and folder) before a put returns, as a remote
//! store's acknowledgement is durable.

pub mod url;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as Key;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub use self::url::{Kind, StoreUrl};

/// How long a connection attempt to a store may take.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// How long one request may take (a part of a large upload is one).
pub const REQUEST_TIMEOUT_MS: u64 = 120_000;
/// How long the client retries a failed request before the error goes to
/// the caller.
pub const RETRY_TIMEOUT_MS: u64 = 10_000;
/// The most retries of one request.
pub const RETRIES_MAX: usize = 3;
/// The size of the blocks a file is read, hashed and sent in, and the part
/// size of a multipart upload.
pub const BLOCK_BYTES: usize = 8 << 20;
/// Parts of one upload in flight at once.
pub const PARTS_IN_FLIGHT: usize = 4;
/// The largest file uploaded in one request; a larger one is a multipart
/// upload in [`BLOCK_BYTES`] parts. A file of two blocks as a multipart
/// upload costs three more requests than one put, and the store's
/// reassembly of its parts (S3-compatible servers copy them: a 10 MiB
/// artifact took twice a put's time on s3s-fs, `weir bench artifacts`),
/// while one put holds less memory than the multipart path may
/// ([`PARTS_IN_FLIGHT`] parts and the block being filled).
pub const SINGLE_PUT_BYTES_MAX: u64 = 2 * BLOCK_BYTES as u64;
/// The size of the blocks a local folder's object is read in, one task of
/// the blocking pool each (object_store's own stream reads 8 KiB a task:
/// 1,280 of them for 10 MiB), and of the buffer a download is written
/// through.
pub const READ_BLOCK_BYTES: usize = 1 << 20;

/// An object's listing entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its key, relative to the store's URL.
    pub key: String,
    /// Its size.
    pub bytes: u64,
    /// When it was last written, ms since the epoch.
    pub modified_ms: u64,
}

/// An opened object store.
#[derive(Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
    shown: String,
    folder: Option<PathBuf>,
}

impl std::fmt::Debug for Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl Objects {
    /// Opens the store `url` names, with the store variables of the
    /// environment and of `credentials` (a file of `NAME=VALUE` lines).
    /// Nothing is sent yet: [`Objects::probe`] checks that it answers.
    pub fn open(url: &str, credentials: Option<&Path>) -> Result<Objects, String> {
        let parsed = StoreUrl::parse(url)?;
        let options = url::options(std::env::vars(), credentials)?;
        Objects::open_parsed(&parsed, &options)
    }

    /// A local folder (created if missing).
    pub fn folder(dir: &Path) -> Result<Objects, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the folder {}: {e}", dir.display()))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .map_err(|e| format!("file://{}: {e}", dir.display()))?
            .with_fsync(true)
            .with_automatic_cleanup(true);
        Ok(Objects {
            store: Arc::new(store),
            shown: format!("file://{}", dir.display()),
            folder: Some(dir.to_path_buf()),
        })
    }

    fn open_parsed(
        parsed: &StoreUrl,
        options: &std::collections::BTreeMap<String, String>,
    ) -> Result<Objects, String> {
        let shown = parsed.shown.clone();
        let fail = |e: object_store::Error| format!("{shown}: {}", clean_error(&e.to_string()));
        let retry = object_store::RetryConfig {
            backoff: object_store::BackoffConfig::default(),
            max_retries: RETRIES_MAX,
            retry_timeout: Duration::from_millis(RETRY_TIMEOUT_MS),
        };
        let client = object_store::ClientOptions::new()
            .with_connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
            .with_timeout(Duration::from_millis(REQUEST_TIMEOUT_MS));
        let path = object_store::ObjectStoreScheme::parse(&parsed.url)
            .map(|(_, p)| p)
            .unwrap_or_default();
        let inner: Arc<dyn ObjectStore> = match &parsed.kind {
            Kind::Folder(dir) => return Objects::folder(dir),
            Kind::S3 => {
                let mut b = object_store::aws::AmazonS3Builder::new();
                for (k, v) in options {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
                // An endpoint the user gave as http:// (a local MinIO or
                // S3-compatible server) is their choice: allow it.
                let plain = [
                    "aws_endpoint",
                    "aws_endpoint_url",
                    "endpoint",
                    "endpoint_url",
                ]
                .iter()
                .any(|k| options.get(*k).is_some_and(|v| v.starts_with("http://")));
                // Client options first: they hold allow_http.
                let b = b
                    .with_client_options(client)
                    .with_url(parsed.url.as_str())
                    .with_allow_http(plain)
                    .with_retry(retry);
                Arc::new(b.build().map_err(fail)?)
            }
            Kind::Gcs => {
                let mut b = object_store::gcp::GoogleCloudStorageBuilder::new();
                for (k, v) in options {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
                let b = b
                    .with_url(parsed.url.as_str())
                    .with_retry(retry)
                    .with_client_options(client);
                Arc::new(b.build().map_err(fail)?)
            }
            Kind::Azure => {
                let mut b = object_store::azure::MicrosoftAzureBuilder::new();
                for (k, v) in options {
                    if let Ok(key) = k.parse() {
                        b = b.with_config(key, v);
                    }
                }
                let b = b
                    .with_url(parsed.url.as_str())
                    .with_retry(retry)
                    .with_client_options(client);
                Arc::new(b.build().map_err(fail)?)
            }
        };
        let store: Arc<dyn ObjectStore> = if path.as_ref().is_empty() {
            inner
        } else {
            Arc::new(PrefixStore::new(inner, path))
        };
        Ok(Objects {
            store,
            shown,
            folder: None,
        })
    }

    /// The store's URL as shown (no secret in it).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The folder, when the store is one on this machine.
    pub fn local_folder(&self) -> Option<&Path> {
        self.folder.as_deref()
    }

    fn error(&self, what: &str, key: &str, e: impl std::fmt::Display) -> String {
        format!(
            "the object store {}: {what} {key}: {}",
            self.shown,
            clean_error(&e.to_string())
        )
    }

    /// Writes a probe object, reads it back and deletes it: the store
    /// answers, the credentials are accepted and writes are read back.
    /// `who` names the prober in the object's key.
    pub async fn probe(&self, who: &str) -> Result<(), String> {
        let nonce: u64 = rand::random();
        let key = format!("probes/{who}-{nonce:016x}");
        let body = Bytes::from(format!("weir probe {nonce:016x}"));
        let path = Key::from(key.as_str());
        self.store
            .put(&path, body.clone().into())
            .await
            .map_err(|e| self.error("cannot write", &key, e))?;
        let got = self
            .store
            .get(&path)
            .await
            .map_err(|e| self.error("cannot read back", &key, e))?
            .bytes()
            .await
            .map_err(|e| self.error("cannot read back", &key, e))?;
        if got != body {
            return Err(format!(
                "the object store {}: {key} read back other bytes than were written",
                self.shown
            ));
        }
        self.store
            .delete(&path)
            .await
            .map_err(|e| self.error("cannot delete", &key, e))?;
        Ok(())
    }

    /// The object `key`'s size and last write, or `None` when absent.
    pub async fn head(&self, key: &str) -> Result<Option<Listed>, String> {
        match self.store.head(&Key::from(key)).await {
            Ok(m) => Ok(Some(listed(&m))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error("cannot look up", key, e)),
        }
    }

    /// Uploads the file `file` as `key`: in one request up to
    /// [`SINGLE_PUT_BYTES_MAX`], else streamed in blocks of
    /// [`BLOCK_BYTES`] (a multipart upload). Returns once the store
    /// acknowledged the whole object: it is durable. A failed upload is
    /// aborted and leaves no object.
    pub async fn put_file(&self, key: &str, file: &Path) -> Result<u64, String> {
        // Up to the limit, one read on the blocking pool (a tokio file
        // reads through a buffer of its own: a second copy); a larger
        // file, or one grown past the limit since, is streamed.
        let path = file.to_path_buf();
        let whole = tokio::task::spawn_blocking(move || read_whole(&path, SINGLE_PUT_BYTES_MAX))
            .await
            .map_err(|e| format!("cannot read {}: {e}", file.display()))??;
        if let Some(buf) = whole {
            let sent = buf.len() as u64;
            self.put_bytes(key, Bytes::from(buf)).await?;
            return Ok(sent);
        }
        let mut f = tokio::fs::File::open(file)
            .await
            .map_err(|e| format!("cannot open {}: {e}", file.display()))?;
        let mut w = object_store::buffered::BufWriter::with_capacity(
            self.store.clone(),
            Key::from(key),
            BLOCK_BYTES,
        )
        .with_max_concurrency(PARTS_IN_FLIGHT);
        let mut sent = 0u64;
        loop {
            let mut buf = Vec::with_capacity(BLOCK_BYTES);
            let n = (&mut f)
                .take(BLOCK_BYTES as u64)
                .read_to_end(&mut buf)
                .await
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            if n == 0 {
                break;
            }
            sent += n as u64;
            if let Err(e) = w.put(Bytes::from(buf)).await {
                let _ = w.abort().await;
                return Err(self.error("cannot write", key, e));
            }
        }
        if let Err(e) = w.shutdown().await {
            let _ = w.abort().await;
            return Err(self.error("cannot write", key, e));
        }
        Ok(sent)
    }

    /// Uploads `bytes` as `key` in one request.
    pub async fn put_bytes(&self, key: &str, bytes: Bytes) -> Result<(), String> {
        self.store
            .put(&Key::from(key), bytes.into())
            .await
            .map(|_| ())
            .map_err(|e| self.error("cannot write", key, e))
    }

    /// The object `key` as a stream of blocks, with its size.
    pub async fn get_stream(
        &self,
        key: &str,
    ) -> Result<(u64, BoxStream<'static, Result<Bytes, String>>), String> {
        let got = self
            .store
            .get(&Key::from(key))
            .await
            .map_err(|e| self.error("cannot read", key, e))?;
        let size = got.meta.size;
        let shown = self.shown.clone();
        let k = key.to_string();
        let stream = match got.payload {
            object_store::GetResultPayload::File(file, _) => {
                let what: Arc<str> = format!("the object store {shown}: cannot read {k}").into();
                file_blocks(file, got.range, what)
            }
            object_store::GetResultPayload::Stream(s) => s
                .map_err(move |e| {
                    format!(
                        "the object store {shown}: cannot read {k}: {}",
                        clean_error(&e.to_string())
                    )
                })
                .boxed(),
        };
        Ok((size, stream))
    }

    /// Downloads `key` into the file `dest`, streamed: written to a
    /// temporary file beside it, checked against `bytes` and the blake3
    /// `hash`, then renamed into place, so `dest` is whole or absent.
    pub async fn get_file(
        &self,
        key: &str,
        dest: &Path,
        bytes: u64,
        hash: &str,
    ) -> Result<(), String> {
        let tmp = dest.with_extension(format!("weir-part-{:08x}", rand::random::<u32>()));
        let result = async {
            let (_, mut stream) = self.get_stream(key).await?;
            // Buffered: a remote store's blocks are a few KiB, and each
            // write of a tokio file is a task of the blocking pool.
            let mut out = tokio::io::BufWriter::with_capacity(
                READ_BLOCK_BYTES,
                tokio::fs::File::create(&tmp)
                    .await
                    .map_err(|e| format!("cannot create {}: {e}", tmp.display()))?,
            );
            let mut hasher = blake3::Hasher::new();
            let mut got = 0u64;
            while let Some(block) = stream.next().await {
                let block = block?;
                got += block.len() as u64;
                if got > bytes {
                    break;
                }
                hasher.update(&block);
                out.write_all(&block)
                    .await
                    .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
            }
            out.flush()
                .await
                .map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
            let actual = hasher.finalize().to_hex().to_string();
            if got != bytes || actual != hash {
                return Err(format!(
                    "the object store {}: {key} holds {got} bytes hashing to {actual}, not the {bytes} bytes hashing to {hash} its record names (damaged or replaced)",
                    self.shown
                ));
            }
            tokio::fs::rename(&tmp, dest)
                .await
                .map_err(|e| format!("cannot rename {} to {}: {e}", tmp.display(), dest.display()))
        }
        .await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result
    }

    /// Every object under `prefix`.
    pub async fn list(&self, prefix: &str) -> Result<Vec<Listed>, String> {
        let p = Key::from(prefix);
        self.store
            .list(Some(&p))
            .map_ok(|m| listed(&m))
            .try_collect()
            .await
            .map_err(|e| self.error("cannot list", prefix, e))
    }

    /// Deletes `key` (absent is no error).
    pub async fn delete(&self, key: &str) -> Result<(), String> {
        match self.store.delete(&Key::from(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error("cannot delete", key, e)),
        }
    }
}

/// The whole content of the file `path` when it holds at most `max`
/// bytes, read once into a buffer of its size (to its end, as it may grow
/// while read, within `max` and a byte); `None` when it is larger.
/// Blocking.
pub fn read_whole(path: &Path, max: u64) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read as _;
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let len = f
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?
        .len();
    if len > max {
        return Ok(None);
    }
    let mut buf = Vec::with_capacity(len as usize + 1);
    f.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok((buf.len() as u64 <= max).then_some(buf))
}

/// The `range` of a local folder's object, in blocks of
/// [`READ_BLOCK_BYTES`], each read on the blocking pool; errors start with
/// `what`.
fn file_blocks(
    file: std::fs::File,
    range: std::ops::Range<u64>,
    what: Arc<str>,
) -> BoxStream<'static, Result<Bytes, String>> {
    let file = Arc::new(file);
    futures::stream::try_unfold(range.start, move |at| {
        let (file, what) = (file.clone(), what.clone());
        let end = range.end;
        async move {
            if at >= end {
                return Ok(None);
            }
            let n = (end - at).min(READ_BLOCK_BYTES as u64) as usize;
            let block = tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; n];
                std::os::unix::fs::FileExt::read_exact_at(&*file, &mut buf, at).map(|()| buf)
            })
            .await
            .map_err(|e| format!("{what}: {e}"))?
            .map_err(|e| format!("{what}: {e}"))?;
            Ok(Some((Bytes::from(block), at + n as u64)))
        }
    })
    .boxed()
}

fn listed(m: &object_store::ObjectMeta) -> Listed {
    Listed {
        key: m.location.to_string(),
        bytes: m.size,
        modified_ms: u64::try_from(m.last_modified.timestamp_millis()).unwrap_or(0),
    }
}

/// An object store error's text with any signed query string cut out (a
/// presigned URL's signature must not reach a log).
fn clean_error(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("X-Amz-") {
        // Cut from the query's start to the end of the URL.
        let start = rest[..i].rfind('?').unwrap_or(i);
        out.push_str(&rest[..start]);
        let end = rest[i..]
            .find(|c: char| c.is_whitespace() || c == '"' || c == ')')
            .map_or(rest.len(), |e| i + e);
        out.push_str("?…");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_queries_do_not_reach_errors() {
        let e = clean_error(
            "error sending request for url (http://h/b/k?X-Amz-Signature=abc&X-Amz-Credential=key) after 1 retry",
        );
        assert!(!e.contains("abc") && !e.contains("Credential"), "{e}");
        assert!(
            e.contains("http://h/b/k?…") && e.ends_with("after 1 retry"),
            "{e}"
        );
    }

    /// A file of one request (under SINGLE_PUT_BYTES_MAX) read back
    /// from a folder in blocks of READ_BLOCK_BYTES, the last one short.
    #[tokio::test]
    async fn a_small_file_goes_in_one_put_and_comes_back_in_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::folder(&dir.path().join("store")).unwrap();
        let src = dir.path().join("src");
        let data: Vec<u8> = (0..(READ_BLOCK_BYTES * 3 + 5))
            .map(|i| (i % 253) as u8)
            .collect();
        std::fs::write(&src, &data).unwrap();
        assert_eq!(
            objects.put_file("s/1", &src).await.unwrap(),
            data.len() as u64
        );
        let (size, stream) = objects.get_stream("s/1").await.unwrap();
        assert_eq!(size, data.len() as u64);
        let blocks: Vec<Bytes> = stream.try_collect().await.unwrap();
        let lens: Vec<usize> = blocks.iter().map(|b| b.len()).collect();
        assert_eq!(
            lens,
            [READ_BLOCK_BYTES, READ_BLOCK_BYTES, READ_BLOCK_BYTES, 5]
        );
        assert_eq!(blocks.concat(), data);
        let dest = dir.path().join("dest");
        let hash = blake3::hash(&data).to_hex().to_string();
        objects
            .get_file("s/1", &dest, data.len() as u64, &hash)
            .await
            .unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), data);
        std::fs::write(&src, b"").unwrap();
        assert_eq!(objects.put_file("s/empty", &src).await.unwrap(), 0);
        let (size, stream) = objects.get_stream("s/empty").await.unwrap();
        assert_eq!(size, 0);
        assert!(stream.try_collect::<Vec<Bytes>>().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_folder_round_trips_and_checks_what_it_reads() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::folder(&dir.path().join("store")).unwrap();
        objects.probe("test").await.unwrap();
        let src = dir.path().join("src");
        let data: Vec<u8> = (0..(BLOCK_BYTES * 2 + 17))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&src, &data).unwrap();
        let hash = blake3::hash(&data).to_hex().to_string();
        assert_eq!(
            objects.put_file("a/b", &src).await.unwrap(),
            data.len() as u64
        );
        let dest = dir.path().join("dest");
        objects
            .get_file("a/b", &dest, data.len() as u64, &hash)
            .await
            .unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), data);
        let listed = objects.list("a").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].bytes, data.len() as u64);
        let e = objects
            .get_file(
                "a/b",
                &dir.path().join("bad"),
                data.len() as u64,
                &"0".repeat(64),
            )
            .await
            .unwrap_err();
        assert!(e.contains("damaged or replaced"), "{e}");
        assert!(!dir.path().join("bad").exists());
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .contains("weir-part")));
        objects.delete("a/b").await.unwrap();
        objects.delete("a/b").await.unwrap();
        assert!(objects.head("a/b").await.unwrap().is_none());
    }
}
