//! The settings of a keyed graph: where its keys come from and how each
//! key's runs are scheduled (glazed's inventory and schedule).

use serde::{Deserialize, Serialize};

use crate::schedule::{Debounce, ScheduleSettings};

/// Where an inventory's keys come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InventorySource {
    /// A file with one key per line (blank lines and `#` comments skipped).
    File(String),
    /// A command (argv, no shell) whose stdout lists one key per line.
    Command(Vec<String>),
}

/// A keyed graph's inventory and schedule.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KeyedSpec {
    /// Where the keys come from.
    pub inventory: InventorySource,
    /// How often the inventory reloads, in ms.
    #[serde(default = "refresh_ms_default")]
    pub refresh_ms: u64,
    /// Interval, retry interval and jitter of each key's runs.
    #[serde(default)]
    pub schedule: ScheduleSettings,
    /// The debounce of signals.
    #[serde(default)]
    pub debounce: Debounce,
    /// Due keys claimed in one batch at most.
    #[serde(default = "batch_size_default")]
    pub batch_size: u32,
    /// How long a claim's lease lasts, in ms: a run that has not settled by
    /// then may be claimed again.
    #[serde(default = "lease_ms_default")]
    pub lease_ms: u64,
}

/// Default inventory refresh: 5 minutes.
pub const REFRESH_MS_DEFAULT: u64 = 300_000;
/// Default claim batch.
pub const BATCH_SIZE_DEFAULT: u32 = 1_000;
/// Default claim lease: 1 hour.
pub const LEASE_MS_DEFAULT: u64 = 3_600_000;

fn refresh_ms_default() -> u64 {
    REFRESH_MS_DEFAULT
}
fn batch_size_default() -> u32 {
    BATCH_SIZE_DEFAULT
}
fn lease_ms_default() -> u64 {
    LEASE_MS_DEFAULT
}

impl KeyedSpec {
    /// A spec over `inventory` with every other setting at its default.
    pub fn new(inventory: InventorySource) -> Self {
        KeyedSpec {
            inventory,
            refresh_ms: REFRESH_MS_DEFAULT,
            schedule: ScheduleSettings::default(),
            debounce: Debounce::default(),
            batch_size: BATCH_SIZE_DEFAULT,
            lease_ms: LEASE_MS_DEFAULT,
        }
    }
}
