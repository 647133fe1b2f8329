//! (in progress — being written by a helper; `Partitioning` is fixed here)
use serde::{Deserialize, Serialize};

/// How a graph's runs are partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    /// One run at most per graph: the partition is `none`.
    #[default]
    None,
    /// UTC hours: `2026-11-29T13`.
    Hourly,
    /// UTC days: `2026-11-29`.
    Daily,
    /// ISO weeks starting on Monday, UTC: `2026-W48`.
    Weekly,
    /// UTC months: `2026-11`.
    Monthly,
    /// Keys of an inventory: `key=db1`.
    Keyed,
}
