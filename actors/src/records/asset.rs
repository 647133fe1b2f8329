//! The records of assets.
//!
//! Keys:
//! - `assetev/<asset>/<run id>`: an [`AssetEvent`], a materialization of
//!   `<asset>` by the task instance `<run id>` not yet delivered to the
//!   graphs that start on it. The queue writes it in the same atomic batch
//!   as the producing node's done record (a mapped node's scheduler, with
//!   the node's record), so a success is never without its event; the
//!   assets actor deletes it once every consumer's run is started
//!   (durably), so a crash in between delivers it again, which starts
//!   nothing twice (a run exists once per graph and partition).
//! - `asset/<asset>`: an [`AssetRecord`], its last delivered
//!   materialization and how many there were.

use serde::{Deserialize, Serialize};

/// The prefix of undelivered materializations.
pub const ASSET_EVENT_PREFIX: &str = "assetev/";
/// The prefix of asset records.
pub const ASSET_PREFIX: &str = "asset/";

/// The key of the materialization of `asset` by the ticket `key`.
pub fn asset_event_key(asset: &str, key: &str) -> String {
    format!("{ASSET_EVENT_PREFIX}{asset}/{key}")
}

/// The key of the record of `asset`.
pub fn asset_key(asset: &str) -> String {
    format!("{ASSET_PREFIX}{asset}")
}

/// A materialization not yet delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssetEvent {
    /// The asset.
    pub asset: String,
    /// The producing task instance's run id (`graph/partition/node/rerun`).
    pub key: String,
    /// When the producer succeeded.
    pub at_ms: u64,
}

/// An asset's last delivered materialization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AssetRecord {
    /// The asset.
    pub asset: String,
    /// The graph that produced it last.
    pub graph: String,
    /// Its node.
    pub node: String,
    /// The partition.
    pub partition: String,
    /// The node's rerun count.
    pub rerun: u32,
    /// When the producer succeeded.
    pub at_ms: u64,
    /// Materializations delivered in all.
    pub count: u64,
    /// The consumer runs the last one started or found, as
    /// `graph/partition`.
    #[serde(default)]
    pub triggered: Vec<String>,
}
