//! `weir artifacts GRAPH PARTITION [NODE]` lists a run's artifacts (node,
//! rerun, name, size, hash) and `weir artifacts get GRAPH PARTITION NODE
//! NAME [-o FILE]` fetches one, both from the running engine's API, or from
//! the store (and the default artifact folder, `DATA/artifacts`, or the
//! one `--artifacts URL` names) when no engine runs.
//!
//! A fetch is streamed, never held whole, and checked against the size and
//! blake3 hash its record names as it passes. Into a file it is written
//! beside it and renamed once whole and checked: a cut or a mismatch
//! (exit 3) leaves no file. To stdout the bytes go out as they come, so a
//! mismatch is known only once they are out: the exit status says it.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use clap::{Args, Subcommand};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use tokio::io::AsyncWriteExt;

use super::client::{self, Client, Conn};
use super::failure::Failure;
use super::output::out;
use super::table;
use crate::artifacts::routes::{self as routes, LookupError, RunArtifact, RunArtifacts};
use crate::objects::Objects;

/// `weir artifacts GRAPH PARTITION [NODE]` or `weir artifacts get ...`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ArtifactsArgs {
    #[command(subcommand)]
    pub action: Option<ArtifactsAction>,
    /// The graph.
    #[arg(required = true)]
    pub graph: Option<String>,
    /// The partition (or a keyed graph's key, for its newest run).
    #[arg(required = true)]
    pub partition: Option<String>,
    /// Only this node's artifacts.
    pub node: Option<String>,
    #[command(flatten)]
    pub conn: Conn,
}

/// What to do with one artifact.
#[derive(Debug, Subcommand)]
pub enum ArtifactsAction {
    /// Fetches one artifact into a file (or stdout), checking its blake3
    /// hash as it streams.
    Get(GetArgs),
}

/// `weir artifacts get GRAPH PARTITION NODE NAME [-o FILE]`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The graph.
    pub graph: String,
    /// The partition (or a keyed graph's key, for its newest run).
    pub partition: String,
    /// The node.
    pub node: String,
    /// The artifact's name, as listed (`reports/a.html`, a mapped member's
    /// `3/part.bin`).
    pub name: String,
    /// The file to write (default, or `-`: stdout). Written beside it and
    /// renamed once checked: a failed fetch leaves none.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// While no engine runs: the store its artifacts are in, when it was
    /// started with --artifacts URL (default: DATA/artifacts).
    #[arg(long, value_name = "URL")]
    pub artifacts: Option<String>,
    /// With --artifacts: a file of NAME=VALUE lines for the store.
    #[arg(long, value_name = "FILE", requires = "artifacts")]
    pub artifacts_credentials: Option<PathBuf>,
}

/// Runs `weir artifacts`.
pub fn run(a: ArtifactsArgs) -> Result<u8, Failure> {
    match a.action {
        Some(ArtifactsAction::Get(g)) => get(&a.conn, g),
        None => {
            // clap asks for both when no subcommand is given.
            let (Some(graph), Some(partition)) = (a.graph, a.partition) else {
                return Err(Failure::input(
                    "weir artifacts GRAPH PARTITION [NODE], or weir artifacts get GRAPH PARTITION NODE NAME",
                ));
            };
            list(&a.conn, &graph, &partition, a.node.as_deref())
        }
    }
}

fn lookup_failure(e: LookupError) -> Failure {
    match e {
        LookupError::NotFound(m) | LookupError::Bad(m) => Failure::input(m),
        LookupError::Store(e) => Failure::store(e.to_string()),
    }
}

fn list(conn: &Conn, graph: &str, partition: &str, node: Option<&str>) -> Result<u8, Failure> {
    let listed: RunArtifacts = match client::source(conn)? {
        client::Source::Engine(c) => {
            let query: Vec<(&str, String)> =
                node.map(|n| ("node", n.to_string())).into_iter().collect();
            client::block_on(async move {
                c.get(
                    &["api", "v1", "graphs", graph, "runs", partition, "artifacts"],
                    &query,
                )
                .await
            })???
        }
        client::Source::Store(dir) => {
            let (store, _) = super::inspect::open(&dir)?;
            routes::list_in(&store, graph, partition, node).map_err(lookup_failure)?
        }
    };
    if conn.json {
        let s = serde_json::to_string_pretty(&listed).map_err(|e| Failure::store(e.to_string()))?;
        out(&s);
        return Ok(0);
    }
    if listed.artifacts.is_empty() {
        let whose = node.map_or_else(String::new, |n| format!("node {n} of "));
        out(&format!(
            "{whose}run {} {} has no artifacts",
            listed.graph, listed.partition
        ));
        return Ok(0);
    }
    let mut t = table::new(&["node", "rerun", "name", "size", "hash"]);
    for x in &listed.artifacts {
        t.add_row(vec![
            x.node.clone(),
            x.rerun.to_string(),
            x.name.clone(),
            table::size(x.bytes),
            x.hash.clone(),
        ]);
    }
    table::print(&t);
    Ok(0)
}

/// The blocks of one artifact, and the size and hash they must have.
struct Fetch {
    blocks: BoxStream<'static, Result<Bytes, String>>,
    bytes: u64,
    hash: String,
}

fn get(conn: &Conn, a: GetArgs) -> Result<u8, Failure> {
    let found = client::find(conn)?;
    client::block_on(async move {
        let fetch = match found {
            (Some(c), _) => from_engine(&c, &a).await?,
            (None, Some(data)) => from_store(&data, &a).await?,
            (None, None) => return Err(Failure::input("no engine and no data directory")),
        };
        let to_file = a.output.as_deref().filter(|o| *o != Path::new("-"));
        save(fetch, to_file, &a.name).await?;
        if let Some(file) = to_file {
            // Stdout names the file written, for scripts.
            if conn.json {
                out(&serde_json::json!({"file": file, "name": a.name}).to_string());
            } else {
                out(&file.display().to_string());
            }
        }
        Ok(0)
    })?
}

async fn from_engine(c: &Client, a: &GetArgs) -> Result<Fetch, Failure> {
    let mut segments = vec![
        "api",
        "v1",
        "graphs",
        &a.graph,
        "runs",
        &a.partition,
        "nodes",
        &a.node,
        "artifacts",
    ];
    // Its folders as the path's segments, each encoded.
    segments.extend(a.name.split('/'));
    let resp = c.stream(&segments, &[]).await?;
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let hash = header(routes::HASH_HEADER).ok_or_else(|| {
        Failure::store(format!(
            "the engine's answer has no {} header: is it an older weir?",
            routes::HASH_HEADER
        ))
    })?;
    let bytes = resp
        .content_length()
        .ok_or_else(|| Failure::store("the engine's answer has no Content-Length".to_string()))?;
    let blocks = resp
        .bytes_stream()
        .map_err(|e| format!("the download was cut: {e}"))
        .boxed();
    Ok(Fetch {
        blocks,
        bytes,
        hash,
    })
}

async fn from_store(data: &Path, a: &GetArgs) -> Result<Fetch, Failure> {
    let found: RunArtifact = {
        let (store, _) = super::inspect::open(data)?;
        routes::find_in(&store, &a.graph, &a.partition, &a.node, &a.name).map_err(lookup_failure)?
    };
    let objects = match &a.artifacts {
        Some(url) => Objects::open(url, a.artifacts_credentials.as_deref())
            .map_err(|e| Failure::input(format!("--artifacts: {e}")))?,
        None => {
            let folder = data.join("artifacts");
            if !folder.is_dir() {
                return Err(Failure::store(format!(
                    "no engine runs and {} is not a folder: the engine keeps its artifacts elsewhere (pass its --artifacts URL, or start it)",
                    folder.display()
                )));
            }
            Objects::folder(&folder).map_err(Failure::store)?
        }
    };
    let key = weir_core::artifact::object_key(&found.hash);
    if objects.head(&key).await.map_err(Failure::store)?.is_none() {
        return Err(Failure::store(format!(
            "artifact {:?} of node {:?}: its object {key} is not in the object store {} (the engine may keep its artifacts elsewhere: pass its --artifacts URL)",
            found.name,
            found.node,
            objects.shown()
        )));
    }
    let (_, blocks) = objects.get_stream(&key).await.map_err(Failure::store)?;
    Ok(Fetch {
        blocks,
        bytes: found.bytes,
        hash: found.hash,
    })
}

/// Writes `fetch` to `file` (beside it, renamed once checked) or stdout,
/// checking its size and hash.
async fn save(fetch: Fetch, file: Option<&Path>, name: &str) -> Result<(), Failure> {
    match file {
        None => {
            let mut stdout = tokio::io::stdout();
            let r = copy_checked(fetch, &mut stdout, name).await;
            let _ = stdout.flush().await;
            r.map_err(|e| {
                Failure::store(format!(
                    "{e} (the bytes written to stdout are not the artifact)"
                ))
            })
        }
        Some(file) => {
            let part = partial_path(file);
            let result = async {
                let mut f = tokio::fs::File::create(&part)
                    .await
                    .map_err(|e| format!("cannot create {}: {e}", part.display()))?;
                copy_checked(fetch, &mut f, name).await?;
                f.sync_all()
                    .await
                    .map_err(|e| format!("cannot write {}: {e}", part.display()))?;
                drop(f);
                tokio::fs::rename(&part, file).await.map_err(|e| {
                    format!(
                        "cannot rename {} to {}: {e}",
                        part.display(),
                        file.display()
                    )
                })
            }
            .await;
            if result.is_err() {
                let _ = tokio::fs::remove_file(&part).await;
            }
            result.map_err(Failure::store)
        }
    }
}

/// `FILE.weir-part-XXXXXXXX`, beside `file` (a rename stays on one
/// filesystem).
fn partial_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".weir-part-{:08x}", rand::random::<u32>()));
    file.with_file_name(name)
}

/// Copies the blocks into `w`, hashing them; an error names what differs.
async fn copy_checked<W: tokio::io::AsyncWrite + Unpin>(
    mut fetch: Fetch,
    w: &mut W,
    name: &str,
) -> Result<(), String> {
    let mut hasher = blake3::Hasher::new();
    let mut got = 0u64;
    while let Some(block) = fetch.blocks.next().await {
        let block = block?;
        got += block.len() as u64;
        if got > fetch.bytes {
            return Err(format!(
                "artifact {name:?}: more than the {} bytes its record names came",
                fetch.bytes
            ));
        }
        hasher.update(&block);
        w.write_all(&block)
            .await
            .map_err(|e| format!("cannot write artifact {name:?}: {e}"))?;
    }
    let hash = hasher.finalize().to_hex().to_string();
    if got != fetch.bytes || hash != fetch.hash {
        return Err(format!(
            "artifact {name:?}: {got} bytes hashing to {hash} came, not the {} bytes hashing to {} its record names",
            fetch.bytes, fetch.hash
        ));
    }
    w.flush()
        .await
        .map_err(|e| format!("cannot write artifact {name:?}: {e}"))
}
