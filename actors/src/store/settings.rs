//! How a store is opened and kept: its durability mode, its disk reserve,
//! its snapshot cadence, fault injection; every limit with its default and
//! the environment variables that override them.

use serde::{Deserialize, Serialize};

use super::disk::FreeSpaceProbe;
use super::faults::{FaultInjector, ENV_FAULT_INJECT};
use super::kv::MemoryStore;

/// How durable a returned commit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// sled's flush with its log write fdatasynced (and its blob files
    /// synced before the log names them): a returned commit survives a
    /// process crash, a kernel crash and a power cut (as far as the device
    /// honours fsync). The default.
    #[default]
    Fsync,
    /// sled's flush only (`sync_file_range`): survives a process crash
    /// (kill -9); a power cut may lose recent commits, since the device
    /// cache is not flushed (sled issue 1452).
    Flush,
    /// No flush at commit: sled writes in the background (every 500 ms by
    /// default, `background_flush_ms`). A process crash may lose the last
    /// half second of commits. For tests and throw-away work only.
    None,
}

impl std::str::FromStr for Durability {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "flush" => Ok(Durability::Flush),
            "none" => Ok(Durability::None),
            other => Err(format!(
                "durability {other:?} is not one of fsync, flush, none"
            )),
        }
    }
}

/// Settings of a store. Every limit is explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreSettings {
    /// How durable a returned commit is.
    pub durability: Durability,
    /// The largest encoded op (an Enqueue with its payload), in bytes.
    pub entry_bytes_max: usize,
    /// Ops journaled since the last snapshot that call for a new one.
    pub snapshot_ops: u64,
    /// Journal bytes since the last snapshot that call for a new one.
    pub snapshot_bytes: u64,
    /// Journal bytes past which commits are refused until a snapshot is
    /// taken (the snapshot is overdue: the caller ignored `snapshot_due`).
    pub journal_bytes_max: u64,
    /// Ops packed into one journal value at most (a value also closes near
    /// 6 KiB of ops); a commit of more ops writes several consecutive
    /// values in the same atomic batch, so no value grows into one of
    /// sled's unsynced blob files.
    pub entry_ops_max: usize,
    /// sled's page cache, in bytes.
    pub cache_bytes: u64,
    /// Time between the passes of sled's background thread, in ms: each
    /// writes what is buffered (all that `durability = "none"` makes
    /// durable), then spends up to half the interval reclaiming the space
    /// of dead log segments. Space is reclaimed only there, so a store
    /// written faster than these passes reclaim it grows: a simulation,
    /// which writes a week of records in a minute, passes more often.
    pub background_flush_ms: u64,
    /// Pending tickets of one pool and priority read from the store at a
    /// time, at open and as they are handed out: the rest of a backlog
    /// stays in the store (see weir-core's `cold` module), so an open
    /// reads this many per level, however many are pending.
    pub window_tickets: usize,
    /// Records deleted in one expiry pass at most.
    pub expiry_batch_max: usize,
    /// Free bytes the store leaves on its filesystem at the least: a write
    /// that finds less free (or less than `disk_reserve_percent`, whichever
    /// is larger) is refused with [`StoreError::DiskFull`].
    pub disk_reserve_min_bytes: u64,
    /// Percent of the filesystem's size the store leaves free at the least
    /// (see `disk_reserve_min_bytes`); 0 by default.
    pub disk_reserve_percent: u32,
    /// Size of the preallocated reserve file (`DATA/reserve`), deleted when
    /// the store hits the disk reserve so that the last flush and the next
    /// open have room; 0 for none.
    pub reserve_file_bytes: u64,
    /// How the free space is measured (`statvfs` of the data directory;
    /// tests pass a fake). Not serialized.
    #[serde(skip)]
    pub free_space: FreeSpaceProbe,
    /// Faults to inject before writes, flushes and fsyncs (see the
    /// `faults` module): for tests only; `None` by default. Not
    /// serialized.
    #[doc(hidden)]
    #[serde(skip)]
    pub faults: Option<FaultInjector>,
    /// Trees held in memory to write instead of sled's files (see the
    /// `kv` module): a simulation's engine, which reopens them after a
    /// simulated crash. `None` (sled) by default. Not serialized.
    #[serde(skip)]
    pub memory: Option<MemoryStore>,
}

/// Environment variables that override the disk settings, for `weir run`
/// on a small filesystem (and the tests that fill one).
pub const ENV_DISK_RESERVE_BYTES: &str = "WEIR_DISK_RESERVE_BYTES";

/// See [`ENV_DISK_RESERVE_BYTES`]: overrides `disk_reserve_percent`.
pub const ENV_DISK_RESERVE_PERCENT: &str = "WEIR_DISK_RESERVE_PERCENT";

/// See [`ENV_DISK_RESERVE_BYTES`]: overrides `reserve_file_bytes`.
pub const ENV_RESERVE_FILE_BYTES: &str = "WEIR_RESERVE_FILE_BYTES";

/// Overrides `cache_bytes`, sled's page cache (256 MiB by default; sled's
/// own default is 1 GiB): the largest part of an engine's resident memory
/// under load.
pub const ENV_CACHE_BYTES: &str = "WEIR_CACHE_BYTES";

impl StoreSettings {
    /// These settings with the disk settings the environment overrides
    /// ([`ENV_DISK_RESERVE_BYTES`], [`ENV_DISK_RESERVE_PERCENT`],
    /// [`ENV_RESERVE_FILE_BYTES`]) and the cache size ([`ENV_CACHE_BYTES`];
    /// whole numbers). An unparsable value is an
    /// error naming the variable.
    pub fn with_env_overrides(mut self) -> Result<Self, String> {
        fn read(name: &str) -> Result<Option<u64>, String> {
            match std::env::var(name) {
                Err(_) => Ok(None),
                Ok(v) => v.trim().parse::<u64>().map(Some).map_err(|e| {
                    format!("environment variable {name}={v:?}: {e} (give a whole number)")
                }),
            }
        }
        if let Some(v) = read(ENV_DISK_RESERVE_BYTES)? {
            self.disk_reserve_min_bytes = v;
        }
        if let Some(v) = read(ENV_DISK_RESERVE_PERCENT)? {
            if v > 100 {
                return Err(format!(
                    "environment variable {ENV_DISK_RESERVE_PERCENT}={v}: a percent is at most 100"
                ));
            }
            self.disk_reserve_percent = v as u32;
        }
        if let Some(v) = read(ENV_RESERVE_FILE_BYTES)? {
            self.reserve_file_bytes = v;
        }
        if let Some(v) = read(ENV_CACHE_BYTES)? {
            self.cache_bytes = v;
        }
        if let Ok(spec) = std::env::var(ENV_FAULT_INJECT) {
            let faults = FaultInjector::parse(&spec)
                .map_err(|e| format!("environment variable {ENV_FAULT_INJECT}: {e}"))?;
            tracing::warn!(spec = %spec, "store fault injection is on (a test setting)");
            self.faults = Some(faults);
        }
        Ok(self)
    }
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            durability: Durability::Fsync,
            entry_bytes_max: 1 << 20,
            // The journal tail is what an open replays (about 5 us an op):
            // 20,000 ops keep that near 100 ms, and a snapshot writes only
            // the tickets changed since the last, so snapshotting ten times
            // as often costs no more in all (200,000 made a restart after a
            // busy minute take half a second in `weir bench torture`).
            snapshot_ops: 20_000,
            snapshot_bytes: 16 << 20,
            journal_bytes_max: 512 << 20,
            entry_ops_max: 256,
            cache_bytes: 256 << 20,
            background_flush_ms: 500,
            window_tickets: 1_024,
            expiry_batch_max: 10_000,
            disk_reserve_min_bytes: 64 << 20,
            // A share of the filesystem is opt-in: 5% of a large shared
            // disk (12 GiB of 252) refused every write on a machine whose
            // other tenants had filled it, though 64 MiB is room enough
            // for sled's last segment writes and the next open.
            disk_reserve_percent: 0,
            reserve_file_bytes: 16 << 20,
            free_space: FreeSpaceProbe::default(),
            faults: None,
            memory: None,
        }
    }
}
