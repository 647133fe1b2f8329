//! Done records: what remains of a ticket after it ends, written in the same
//! atomic batch as its Complete (or Cancel) op, so a crash can never leave
//! one without the other. The record under `done/<key>` also makes a
//! completed key known: enqueuing it again is a no-op until the record
//! expires.

use serde::{Deserialize, Serialize};
use weir_core::queue::TicketId;

/// The prefix of done records.
pub const DONE_PREFIX: &str = "done/";

/// The record key of a ticket key.
pub fn done_key(key: &str) -> String {
    let mut k = String::with_capacity(DONE_PREFIX.len() + key.len());
    k.push_str(DONE_PREFIX);
    k.push_str(key);
    k
}

/// How a ticket ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
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

impl std::fmt::Display for DoneStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DoneStatus::Succeeded => "succeeded",
            DoneStatus::Failed => "failed",
            DoneStatus::Cancelled => "cancelled",
            DoneStatus::Skipped => "skipped",
            DoneStatus::UpstreamFailed => "upstream_failed",
        })
    }
}

/// The record of an ended ticket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// Attempts started.
    pub attempts: u32,
    /// Attempts that failed.
    pub failures: u32,
    /// The last error, if any.
    #[serde(default)]
    pub error: Option<String>,
    /// The output of the succeeding attempt (bounded by the engine).
    #[serde(with = "serde_bytes", default)]
    pub output: Vec<u8>,
    /// When it was first due.
    pub first_due_ms: u64,
    /// When its last attempt started.
    #[serde(default)]
    pub started_ms: Option<u64>,
    /// When it ended.
    pub finished_ms: u64,
}
