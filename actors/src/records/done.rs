//! Done records: what remains of a ticket after it ends, written in the same
//! atomic batch as its Complete (or Cancel) op, so a crash can never leave
//! one without the other. The record under `done/<key>` also makes a
//! completed key known: enqueuing it again is a no-op until the record
//! expires.

use serde::{Deserialize, Serialize};
use weir_core::queue::TicketId;

use crate::store::{BlobRef, Store, StoreError};

use super::keys::parse_run_id;
// The keys live with the other record keys; their paths here stay.
pub use super::keys::{dead_key, done_key, DEAD_PREFIX, DONE_PREFIX};

/// How a ticket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DoneStatus {
    /// An attempt succeeded.
    Succeeded,
    /// Retrying is over and it failed.
    Failed,
    /// It was cancelled.
    Cancelled,
    /// A graph node whose trigger rule decided it would not run.
    Skipped,
    /// A graph node that cannot run because an upstream failed.
    UpstreamFailed,
}

impl DoneStatus {
    /// Its name, as records and views write it.
    pub fn as_str(self) -> &'static str {
        match self {
            DoneStatus::Succeeded => "succeeded",
            DoneStatus::Failed => "failed",
            DoneStatus::Cancelled => "cancelled",
            DoneStatus::Skipped => "skipped",
            DoneStatus::UpstreamFailed => "upstream_failed",
        }
    }
}

impl std::fmt::Display for DoneStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a queue worker id is shown: a worker process's name (the queue
/// calls a remote pool `remote.<worker>.<pool>.<incarnation>`), or
/// `local` for a pool of the engine's own process.
pub fn worker_shown(queue_worker_id: &str) -> String {
    match queue_worker_id.strip_prefix("remote.") {
        Some(rest) => {
            let mut parts = rest.rsplitn(3, '.');
            let (_incarnation, _pool) = (parts.next(), parts.next());
            let id = parts.next().unwrap_or(rest);
            // A worker process's id is its name and a hex incarnation
            // (`w1.3f57df58806128a0`): shown by name, as `weir workers` does.
            match id.rsplit_once('.') {
                Some((name, tail))
                    if !name.is_empty()
                        && tail.len() == 16
                        && tail.bytes().all(|b| b.is_ascii_hexdigit()) =>
                {
                    name.to_string()
                }
                _ => id.to_string(),
            }
        }
        None => "local".to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn workers_are_shown_by_name() {
        use super::worker_shown;
        assert_eq!(worker_shown("default.0.weir.3"), "local");
        assert_eq!(worker_shown("remote.w1.3f57df58806128a0.default.7"), "w1");
        assert_eq!(worker_shown("remote.gpu-box.gpu.2"), "gpu-box");
        assert_eq!(worker_shown("remote.odd"), "odd");
    }
}

/// The record of an ended ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DoneRecord {
    /// The ticket.
    pub id: TicketId,
    /// Its key.
    pub key: String,
    /// Its task.
    pub task: String,
    /// Its pool.
    pub pool: String,
    /// How it ended.
    pub status: DoneStatus,
    /// Attempts that started their task (a hand-out a breaker deferred is
    /// no attempt; records written before deferrals were counted apart
    /// count them here).
    pub attempts: u32,
    /// Hand-outs deferred before their task started (a breaker held them
    /// back).
    #[serde(default)]
    pub deferrals: u32,
    /// Attempts that failed.
    pub failures: u32,
    /// The last error, if any.
    #[serde(default)]
    pub error: Option<String>,
    /// The output of the succeeding attempt (bounded by the engine), when
    /// it is at most [`crate::store::BLOB_INLINE_BYTES_MAX`] bytes; a larger one is in
    /// `output_blob` and this is empty.
    #[serde(with = "serde_bytes", default)]
    #[schemars(with = "Vec<u8>")]
    pub output: Vec<u8>,
    /// The output, when it is larger than [`crate::store::BLOB_INLINE_BYTES_MAX`]: a
    /// blob under `DATA/blobs` (read it with [`DoneRecord::load_output`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_blob: Option<BlobRef>,
    /// When it was first due.
    pub first_due_ms: u64,
    /// When its last attempt started.
    #[serde(default)]
    pub started_ms: Option<u64>,
    /// When it ended.
    pub finished_ms: u64,
    /// A sensor's checks that found its condition not met (no attempts).
    /// Left out of the encoding at 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pokes: u32,
    /// A mapped node's member counts (its record is written by its
    /// scheduler once every member ended). Left out when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<Box<weir_core::mapped::MemberCounts>>,
    /// Where its last attempt ran: `local` (a pool of the engine's
    /// process) or a worker's name; absent for a record no attempt made (a
    /// mark, a decision) and in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The artifacts its succeeding attempt stored in the artifact store,
    /// by name, size and content hash. Left out of the encoding when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<weir_core::artifact::ArtifactRef>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

impl DoneRecord {
    /// The output's size, inline or in its blob.
    pub fn output_len(&self) -> u64 {
        match &self.output_blob {
            Some(b) => b.bytes,
            None => self.output.len() as u64,
        }
    }

    /// The output, read from its blob (checked against its hash) when it
    /// has one.
    pub fn load_output(&self, store: &Store) -> Result<Vec<u8>, StoreError> {
        match &self.output_blob {
            Some(b) => store.read_blob(b),
            None => Ok(self.output.clone()),
        }
    }

    /// Moves the output from its blob into `output`: the record as it was
    /// before outputs were kept apart, for readers that show it.
    pub fn resolve_output(&mut self, store: &Store) -> Result<(), StoreError> {
        if let Some(b) = &self.output_blob {
            self.output = store.read_blob(b)?;
            self.output_blob = None;
        }
        Ok(())
    }
}

/// The most dead letters one page holds.
pub const DEAD_PAGE_MAX: usize = 1_000;

/// What the queue keeps of a ticket whose tries are spent (it ended
/// Failed), under `dead/<key>`: enough to run it again. Written in the same
/// atomic batch as the ticket's Complete and done record; it expires with
/// the done record (plain jobs: the same expiry instant; graph nodes: with
/// their run) and is removed when the letter is requeued (or, for a graph
/// node, when the node is rerun).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadRecord {
    /// The job as enqueued: task, pool, target, payload, policy, timeout.
    /// A graph node's payload is left out: a requeue reruns the node,
    /// which builds its input afresh.
    pub job: weir_core::queue::Job,
    /// The ticket that died.
    pub id: TicketId,
    /// Attempts started.
    pub attempts: u32,
    /// Attempts that failed.
    pub failures: u32,
    /// The last error.
    #[serde(default)]
    pub error: Option<String>,
    /// When it was first due.
    pub first_due_ms: u64,
    /// When it ended.
    pub finished_ms: u64,
    /// When it expires with its done record (`None`: never by itself).
    #[serde(default)]
    pub expires_at_ms: Option<u64>,
}

impl DeadRecord {
    /// Whether it is a graph node's task instance (its scheduler is told
    /// when it ends).
    pub fn is_graph_node(&self) -> bool {
        self.job.notify.is_some()
    }
}

/// A dead letter as an operator sees it (served as JSON as is).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeadLetter {
    /// The ticket's key (a graph node's run id).
    pub key: String,
    /// Its task.
    pub task: String,
    /// Its pool.
    pub pool: String,
    /// Its target, if any.
    pub target: Option<String>,
    /// Attempts started.
    pub attempts: u32,
    /// Attempts that failed.
    pub failures: u32,
    /// The last error.
    pub error: Option<String>,
    /// When it ended.
    pub finished_ms: u64,
    /// The graph, for a graph node.
    pub graph: Option<String>,
    /// The partition, for a graph node.
    pub partition: Option<String>,
    /// The node, for a graph node.
    pub node: Option<String>,
    /// The rerun count of the instance, for a graph node.
    pub rerun: Option<u32>,
}

impl DeadLetter {
    /// The letter of `record`.
    pub fn of(record: &DeadRecord) -> Self {
        let node = if record.is_graph_node() {
            parse_run_id(&record.job.key)
        } else {
            None
        };
        DeadLetter {
            key: record.job.key.to_string(),
            task: record.job.task.to_string(),
            pool: record.job.pool.to_string(),
            target: record.job.target.as_ref().map(|t| t.to_string()),
            attempts: record.attempts,
            failures: record.failures,
            error: record.error.clone(),
            finished_ms: record.finished_ms,
            graph: node.as_ref().map(|n| n.graph.clone()),
            partition: node.as_ref().map(|n| n.partition.clone()),
            node: node.as_ref().map(|n| n.node.clone()),
            rerun: node.map(|n| n.rerun),
        }
    }
}

/// One page of dead letters, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeadLetterPage {
    /// The letters, newest (by `finished_ms`, then key) first.
    pub letters: Vec<DeadLetter>,
    /// Pass it back for the next page; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// A page of dead letters, newest first: at most `limit` (capped at
/// [`DEAD_PAGE_MAX`]), after `cursor` (from the page before). Reads the
/// store only, so it works with no engine running. Costs a scan of every
/// dead letter: they are few by nature (each is a job that failed for
/// good), and ordering by time would need a second index written with
/// each.
pub fn dead_letters(
    store: &crate::store::Store,
    limit: usize,
    cursor: Option<&str>,
) -> Result<DeadLetterPage, DeadPageError> {
    let after = cursor.map(parse_cursor).transpose()?;
    let limit = limit.clamp(1, DEAD_PAGE_MAX);
    let mut all: Vec<DeadLetter> = store
        .scan::<DeadRecord>(DEAD_PREFIX)?
        .iter()
        .map(|(_, r)| DeadLetter::of(r))
        .collect();
    // Newest first; equal instants by key, so the order is total.
    all.sort_by(|a, b| {
        b.finished_ms
            .cmp(&a.finished_ms)
            .then_with(|| a.key.cmp(&b.key))
    });
    let start = match &after {
        None => 0,
        Some((ms, key)) => all.partition_point(|l| {
            l.finished_ms > *ms || (l.finished_ms == *ms && l.key.as_str() <= key.as_str())
        }),
    };
    let letters: Vec<DeadLetter> = all.iter().skip(start).take(limit).cloned().collect();
    let next_cursor = if start + letters.len() < all.len() {
        letters
            .last()
            .map(|l| format!("{}:{}", l.finished_ms, l.key))
    } else {
        None
    };
    Ok(DeadLetterPage {
        letters,
        next_cursor,
    })
}

/// The dead record of `key`, if it has one.
pub fn dead_record(
    store: &crate::store::Store,
    key: &str,
) -> Result<Option<DeadRecord>, crate::store::StoreError> {
    store.get(&dead_key(key))
}

fn parse_cursor(cursor: &str) -> Result<(u64, String), DeadPageError> {
    let bad = || DeadPageError::Cursor(cursor.to_string());
    let (ms, key) = cursor.split_once(':').ok_or_else(bad)?;
    Ok((ms.parse().map_err(|_| bad())?, key.to_string()))
}

/// Why a page of dead letters could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DeadPageError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// The cursor is not one a page handed out.
    #[error("dead letters: cursor {0:?} is not one a page handed out")]
    Cursor(String),
}
