//! The throw-away store of a simulation: where its files go and how it is
//! set up. Nothing of it outlives the simulation, and nothing else writes
//! it, so it is tuned for speed. Its trees are held in memory (a
//! [`MemoryStore`], which the engine reopens after a simulated crash as a
//! real one reopens its files): on sled, half of a simulation's time went
//! to sled's copy-on-write pages and the hand-off of its log buffers to
//! I/O threads at every atomic batch. [`ENV_SIMULATE_STORE`]` = sled` puts
//! them back on sled's files, to compare the two (the reports are the
//! same), tuned as follows: no flush at commit (`durability = none`),
//! under a memory filesystem when there is one, no reserve file, the free
//! space measured every [`FREE_SPACE_PROBE_EVERY`] writes rather than at
//! each, and sled's background pass (which alone reclaims the space of
//! dead log segments) run every [`BACKGROUND_FLUSH_MS`]: a simulation
//! writes a week of records in a minute, and at sled's usual pace (500 ms)
//! its files grew by the gigabyte. On a disk, where each pass ends with an
//! fsync, every [`BACKGROUND_FLUSH_DISK_MS`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use weir_actors::store::{
    statvfs_space, DiskSpace, Durability, FreeSpaceProbe, MemoryStore, StoreSettings,
};

/// Environment variable that chooses the trees of a simulation's store:
/// `memory` (the default) or `sled`.
pub const ENV_SIMULATE_STORE: &str = "WEIR_SIMULATE_STORE";

/// Where a simulation's trees are.
#[derive(Clone)]
pub enum ScratchTrees {
    /// In memory, shared by every engine the simulation opens.
    Memory(MemoryStore),
    /// In sled's files under the scratch folder.
    Sled,
}

impl ScratchTrees {
    /// As [`ENV_SIMULATE_STORE`] says; an unknown value is an error naming
    /// it.
    pub fn from_env() -> Result<ScratchTrees, String> {
        match std::env::var(ENV_SIMULATE_STORE) {
            Err(_) => Ok(ScratchTrees::Memory(MemoryStore::new())),
            Ok(v) => match v.trim() {
                "" | "memory" => Ok(ScratchTrees::Memory(MemoryStore::new())),
                "sled" => Ok(ScratchTrees::Sled),
                other => Err(format!(
                    "environment variable {ENV_SIMULATE_STORE}={other:?} is not one of memory, sled"
                )),
            },
        }
    }
}

/// Writes between two measures of the store's free space.
pub const FREE_SPACE_PROBE_EVERY: u64 = 1_024;

/// sled's background pass, ms (500 in the engine): at 20 ms a week of the
/// benchmark still grew the files to 600 MB, at 5 ms (and at 2) they stay
/// near 60 MB.
pub const BACKGROUND_FLUSH_MS: u64 = 5;

/// sled's background pass when the store is on a disk, ms.
pub const BACKGROUND_FLUSH_DISK_MS: u64 = 20;

/// The settings of a simulation's store in `dir`, its trees in `trees`.
pub fn store_settings(dir: &Path, trees: &ScratchTrees) -> StoreSettings {
    let in_memory = dir.starts_with(SCRATCH_MEMORY_DIR);
    StoreSettings {
        memory: match trees {
            ScratchTrees::Memory(m) => Some(m.clone()),
            ScratchTrees::Sled => None,
        },
        durability: Durability::None,
        background_flush_ms: if in_memory {
            BACKGROUND_FLUSH_MS
        } else {
            BACKGROUND_FLUSH_DISK_MS
        },
        reserve_file_bytes: 0,
        free_space: sampled_statvfs(),
        ..StoreSettings::default()
    }
}

/// `statvfs`, asked once every [`FREE_SPACE_PROBE_EVERY`] calls; the calls
/// between get the last answer.
fn sampled_statvfs() -> FreeSpaceProbe {
    let calls = AtomicU64::new(0);
    let last: Arc<Mutex<Option<DiskSpace>>> = Arc::default();
    FreeSpaceProbe::new(move |path| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        match *last {
            Some(space) if !n.is_multiple_of(FREE_SPACE_PROBE_EVERY) => Ok(space),
            _ => {
                let space = statvfs_space(path)?;
                *last = Some(space);
                Ok(space)
            }
        }
    })
}

/// Where a simulated store goes when the system has a memory
/// filesystem: sled writes its log there without a disk under it (on a
/// disk, each of the engine's small atomic batches was one write and one
/// `sync_file_range`, a third of a simulation's time).
const SCRATCH_MEMORY_DIR: &str = "/dev/shm";

/// A folder for the simulated store, removed when dropped: under
/// [`SCRATCH_MEMORY_DIR`] when there is one that takes it, else under the
/// system's temporary folder. A store holds the records of the graphs'
/// retention at most (the engine expires records during a simulation),
/// though sled's files hold more than their records (see the module doc).
pub struct Scratch(PathBuf);

impl Scratch {
    /// A new, empty folder.
    pub fn new() -> std::io::Result<Scratch> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "weir-simulate-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let memory = Path::new(SCRATCH_MEMORY_DIR);
        if memory.is_dir() {
            let dir = memory.join(&name);
            if Self::fresh(&dir).is_ok() {
                return Ok(Scratch(dir));
            }
        }
        let dir = std::env::temp_dir().join(name);
        Self::fresh(&dir)?;
        Ok(Scratch(dir))
    }

    fn fresh(dir: &Path) -> std::io::Result<()> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir_all(dir)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
