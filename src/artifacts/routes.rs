//! The API's routes of artifacts (served with the others, see `serve`): a
//! run's artifacts listed, and one artifact's bytes streamed from the
//! object store.
//!
//! Both read the nodes' current records, as the run view does: an
//! artifact is named by its node and its name in that node's record (a
//! mapped node's record names its members' as `<index>/<name>`), and
//! fetched by the content hash the record holds. A rerun's new record
//! replaces what the node's route serves once it is written.
//!
//! A download is streamed block by block, never held whole: the object's
//! size is checked against the record before the first byte goes out, its
//! blake3 hash as the blocks pass, and the last block is held back until
//! the hash is known, so a damaged object ends the answer with an error
//! (the client sees a cut body) instead of reaching the client whole. The
//! store is named by its shown URL only, never with a credential.
//!
//! The listing reads the store alone ([`list_in`]): `weir artifacts` uses
//! it when no engine runs.

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use axum::Json;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use weir_actors::scheduler::view;
use weir_actors::store::{Store, StoreError};
use weir_core::artifact::{self, ArtifactRef};

use super::ArtifactStore;
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::handlers::extract::{blocking, Path, Query};
use crate::serve::state::AppState;
use crate::serve::views;

/// The header holding an artifact's blake3 hash (64 lowercase hex digits)
/// on a download, beside its `ETag`.
pub const HASH_HEADER: &str = "x-weir-blake3";
/// Names an artifact error lists of what a node has, at most.
const NAMES_LISTED_MAX: usize = 10;

/// One artifact of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunArtifact {
    /// The node whose record names it.
    pub node: String,
    /// The rerun count of that record (the node's current instance).
    pub rerun: u32,
    /// Its name: a path under the node's `WEIR_ARTIFACTS_OUT`, or a mapped
    /// member's `<index>/<name>`.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The blake3 hash of its content, 64 lowercase hex digits.
    pub hash: String,
}

/// A run's artifacts, node by node in the graph's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RunArtifacts {
    /// The graph.
    pub graph: String,
    /// The run's partition.
    pub partition: String,
    /// Its artifacts, in each record's order.
    pub artifacts: Vec<RunArtifact>,
}

/// Why an artifact or a run's list cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// No such run, node or artifact: the message names which.
    #[error("{0}")]
    NotFound(String),
    /// The partition is neither a partition nor a key.
    #[error("{0}")]
    Bad(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<LookupError> for ApiError {
    fn from(e: LookupError) -> ApiError {
        match e {
            LookupError::NotFound(m) => ApiError::not_found(m),
            LookupError::Bad(m) => ApiError::bad(m),
            LookupError::Store(e) => e.into(),
        }
    }
}

/// The run `text` names (a partition, or a keyed graph's key for its
/// newest run), with its nodes' views.
fn run_of(store: &Store, graph: &str, text: &str) -> Result<view::GraphRunView, LookupError> {
    let p = match views::resolve_partition(store, graph, text) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return Err(LookupError::NotFound(format!(
                "graph {graph:?} has no run for key {text:?}"
            )))
        }
        Err(views::QueryError::Bad(m)) => return Err(LookupError::Bad(m)),
        Err(views::QueryError::Store(e)) => return Err(e.into()),
    };
    view::graph_run(store, graph, &p)?.ok_or_else(|| {
        LookupError::NotFound(format!("graph {graph:?} has no run for partition {p}"))
    })
}

fn node_of<'a>(run: &'a view::GraphRunView, node: &str) -> Result<&'a view::NodeView, LookupError> {
    run.nodes
        .iter()
        .find(|n| n.node == node)
        .ok_or_else(|| LookupError::NotFound(format!("graph {:?} has no node {node:?}", run.graph)))
}

fn listed(n: &view::NodeView, a: &ArtifactRef) -> RunArtifact {
    RunArtifact {
        node: n.node.clone(),
        rerun: n.rerun,
        name: a.name.clone(),
        bytes: a.bytes,
        hash: a.hash.clone(),
    }
}

/// The artifacts of the run of `graph` that `partition` names, of every
/// node or of `node` alone, from the store.
pub fn list_in(
    store: &Store,
    graph: &str,
    partition: &str,
    node: Option<&str>,
) -> Result<RunArtifacts, LookupError> {
    let run = run_of(store, graph, partition)?;
    let nodes: Vec<&view::NodeView> = match node {
        Some(n) => vec![node_of(&run, n)?],
        None => run.nodes.iter().collect(),
    };
    Ok(RunArtifacts {
        artifacts: nodes
            .iter()
            .flat_map(|n| n.artifacts.iter().map(|a| listed(n, a)))
            .collect(),
        graph: run.graph.clone(),
        partition: run.partition.clone(),
    })
}

/// The artifact `name` of `node`'s current record in the run of `graph`
/// that `partition` names, from the store; a miss names what the node has
/// (or why it has none).
pub fn find_in(
    store: &Store,
    graph: &str,
    partition: &str,
    node: &str,
    name: &str,
) -> Result<RunArtifact, LookupError> {
    let run = run_of(store, graph, partition)?;
    let n = node_of(&run, node)?;
    if let Some(a) = n.artifacts.iter().find(|a| a.name == name) {
        return Ok(listed(n, a));
    }
    let has = if n.artifacts.is_empty() {
        format!(
            "its current record (rerun {}, {}) names none",
            n.rerun, n.state
        )
    } else {
        let mut names: Vec<&str> = n
            .artifacts
            .iter()
            .take(NAMES_LISTED_MAX)
            .map(|a| a.name.as_str())
            .collect();
        if n.artifacts.len() > NAMES_LISTED_MAX {
            names.push("…");
        }
        format!("it has {}", names.join(", "))
    };
    Err(LookupError::NotFound(format!(
        "node {node:?} of graph {graph:?}, partition {}, has no artifact {name:?}: {has}",
        run.partition
    )))
}

/// The list route's query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only this node's artifacts.
    node: Option<String>,
}

/// `GET /api/v1/graphs/{graph}/runs/{partition}/artifacts[?node=N]`.
pub async fn list(
    State(s): State<AppState>,
    Path((graph, part)): Path<(String, String)>,
    Query(q): Query<ListParams>,
) -> ApiResult<Json<RunArtifacts>> {
    blocking(move || {
        list_in(s.engine.store(), &graph, &part, q.node.as_deref())
            .map(Json)
            .map_err(ApiError::from)
    })
    .await
}

/// An artifact up to this size is read and checked whole before the
/// answer (memory: one such buffer a download); a larger one is streamed
/// and its check cuts the body short when it fails.
pub const WHOLE_CHECK_BYTES_MAX: u64 = 1 << 20;

/// `GET /api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/artifacts/{*name}`:
/// the artifact's bytes, streamed, with its size, a file name to save it
/// as, and its hash.
pub async fn download(
    State(s): State<AppState>,
    Path((graph, part, node, name)): Path<(String, String, String, String)>,
) -> ApiResult<Response> {
    let st = s.clone();
    let found = blocking(move || {
        find_in(st.engine.store(), &graph, &part, &node, &name).map_err(ApiError::from)
    })
    .await?;
    let objects = match s.artifacts.as_deref() {
        Some(ArtifactStore::Missing(why)) => {
            return Err(ApiError::unavailable(format!(
                "artifact {:?} of node {:?}: this engine has no artifact store: {why}",
                found.name, found.node
            )))
        }
        Some(store) => store.store().ok_or_else(|| {
            ApiError::unavailable(format!(
                "artifact {:?} of node {:?}: this engine's artifact store cannot be reached",
                found.name, found.node
            ))
        })?,
        None => {
            return Err(ApiError::unavailable(format!(
                "artifact {:?} of node {:?}: this server was started without the engine's artifact store",
                found.name, found.node
            )))
        }
    };
    let key = artifact::object_key(&found.hash);
    // Looked up first: a missing object is named as such (the record
    // outlived it), not as a failed read.
    match objects.head(&key).await.map_err(ApiError::internal)? {
        None => {
            return Err(ApiError::internal(format!(
                "artifact {:?} of node {:?}: its object {key} is missing from the object store {} (deleted outside weir, or the engine was given another store)",
                found.name,
                found.node,
                objects.shown()
            )))
        }
        Some(o) if o.bytes != found.bytes => {
            return Err(ApiError::internal(format!(
                "artifact {:?} of node {:?}: the object store {} holds {} bytes as {key}, not the {} its record names (damaged or replaced)",
                found.name,
                found.node,
                objects.shown(),
                o.bytes,
                found.bytes
            )))
        }
        Some(_) => {}
    }
    let (_, mut blocks) = objects.get_stream(&key).await.map_err(ApiError::internal)?;
    tracing::debug!(node = %found.node, artifact = %found.name, bytes = found.bytes, "artifact download");
    let body = if found.bytes <= WHOLE_CHECK_BYTES_MAX {
        // Checked before the answer: a damaged object is a 500 that says
        // so. (Streamed, the check ends with the body, and a cut before
        // the server flushed anything reaches the client as no answer.)
        let mut whole = Vec::with_capacity(found.bytes as usize);
        while let Some(block) = blocks.next().await {
            whole.extend_from_slice(&block.map_err(ApiError::internal)?);
            if whole.len() as u64 > found.bytes {
                break;
            }
        }
        let hash = blake3::hash(&whole).to_hex().to_string();
        if whole.len() as u64 != found.bytes || hash != found.hash {
            let m = damaged_message(&found, objects.shown(), whole.len() as u64, &hash);
            tracing::warn!(error = %m, "artifact download refused");
            return Err(ApiError::internal(m));
        }
        Body::from(whole)
    } else {
        Body::from_stream(checked(blocks, found.clone(), objects.shown().to_string()))
    };
    let value = |v: String| {
        HeaderValue::from_str(&v).map_err(|e| ApiError::internal(format!("header {v:?}: {e}")))
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(found.bytes));
    h.insert(
        header::CONTENT_DISPOSITION,
        value(content_disposition(&found.name))?,
    );
    h.insert(header::ETAG, value(format!("\"{}\"", found.hash))?);
    h.insert(HASH_HEADER, value(found.hash.clone())?);
    // The URL names the node's current record, which a rerun replaces:
    // a cached copy is checked again (its ETag says whether it changed).
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-cache"),
    );
    // An artifact is a node's output, not the UI's: a browser saves it and
    // never renders it (an HTML report runs no script on the UI's origin).
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    Ok(resp)
}

/// The file name a download is saved as: the artifact's name with its
/// folders joined by `_` (`reports/a.html` → `reports_a.html`, a member's
/// `3/part.bin` → `3_part.bin`: distinct names stay distinct), as an
/// ASCII fallback and in full as RFC 8187 UTF-8.
pub fn content_disposition(name: &str) -> String {
    let flat = name.replace('/', "_");
    let ascii: String = flat
        .chars()
        .map(|c| {
            if (c.is_ascii_graphic() && c != '"' && c != '\\') || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    const ATTR: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{}",
        percent_encoding::utf8_percent_encode(&flat, ATTR)
    )
}

/// What a download's stream holds between blocks.
struct Checking {
    blocks: BoxStream<'static, Result<Bytes, String>>,
    hasher: blake3::Hasher,
    /// The block read last, sent once the next one (or the end) is read.
    held: Option<Bytes>,
    sent_bytes: u64,
    ended: bool,
}

/// `blocks` as they are, but each checked into `want`'s size and hash: a
/// read error, too many bytes, or at the end too few or another hash end
/// the stream with an error naming `shown`, before its last block.
/// What a download says of an object that is not what its record names.
fn damaged_message(want: &RunArtifact, shown: &str, got: u64, hash: &str) -> String {
    format!(
        "artifact {:?} of node {:?}: the object store {shown} holds {got} bytes hashing to {hash} as {}, not the {} bytes hashing to {} its record names (damaged or replaced)",
        want.name,
        want.node,
        artifact::object_key(&want.hash),
        want.bytes,
        want.hash
    )
}

fn checked(
    blocks: BoxStream<'static, Result<Bytes, String>>,
    want: RunArtifact,
    shown: String,
) -> BoxStream<'static, Result<Bytes, String>> {
    let state = Checking {
        blocks,
        hasher: blake3::Hasher::new(),
        held: None,
        sent_bytes: 0,
        ended: false,
    };
    let (bytes, hash) = (want.bytes, want.hash.clone());
    let damaged = move |got: u64, hash: &str| {
        let m = damaged_message(&want, &shown, got, hash);
        tracing::warn!(error = %m, "artifact download cut");
        m
    };
    futures::stream::unfold(state, move |mut st| {
        let damaged = damaged.clone();
        let hash = hash.clone();
        async move {
            if st.ended {
                return None;
            }
            loop {
                match st.blocks.next().await {
                    Some(Ok(b)) => {
                        st.sent_bytes += b.len() as u64;
                        if st.sent_bytes > bytes {
                            st.ended = true;
                            let e = damaged(st.sent_bytes, "(more than named)");
                            return Some((Err(e), st));
                        }
                        st.hasher.update(&b);
                        if b.is_empty() {
                            continue;
                        }
                        if let Some(prev) = st.held.replace(b) {
                            return Some((Ok(prev), st));
                        }
                    }
                    Some(Err(e)) => {
                        st.ended = true;
                        tracing::warn!(error = %e, "artifact download cut");
                        return Some((Err(e), st));
                    }
                    None => {
                        st.ended = true;
                        let got = st.hasher.finalize().to_hex().to_string();
                        if st.sent_bytes != bytes || got != hash {
                            let e = damaged(st.sent_bytes, &got);
                            return Some((Err(e), st));
                        }
                        return st.held.take().map(|b| (Ok(b), st));
                    }
                }
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    /// RFC 6266/8187: an ASCII fallback in quotes (no quote, backslash or
    /// control character in it), the whole name percent-encoded as UTF-8.
    #[test]
    fn a_download_is_saved_under_its_name_with_folders_flattened() {
        let cases = [
            (
                "data.bin",
                "attachment; filename=\"data.bin\"; filename*=UTF-8''data.bin",
            ),
            (
                "reports/a b.html",
                "attachment; filename=\"reports_a b.html\"; filename*=UTF-8''reports_a%20b.html",
            ),
            (
                "3/part.bin",
                "attachment; filename=\"3_part.bin\"; filename*=UTF-8''3_part.bin",
            ),
            (
                "r\u{e9}sum\u{e9}.txt",
                "attachment; filename=\"r_sum_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9.txt",
            ),
            (
                "a\"b\\c\u{7}.txt",
                "attachment; filename=\"a_b_c_.txt\"; filename*=UTF-8''a%22b%5Cc%07.txt",
            ),
        ];
        for (i, (name, want)) in cases.iter().enumerate() {
            let got = super::content_disposition(name);
            assert_eq!(
                got, *want,
                "#{i}: name {name:?}: got {got:?}, want {want:?}"
            );
            assert!(
                axum::http::HeaderValue::from_str(&got).is_ok(),
                "#{i}: {got:?} is a header value"
            );
        }
    }
}
