//! `weir bench backup`: a backup of a store of 1M pending tickets (100k
//! with `--quick`) beside a raw copy of the same store's files in the same
//! run, its restore, and what a backup costs the store's writers.
//!
//! - Copy: every file of the data directory read and written into another
//!   folder of the same filesystem, then fsynced: the limit of moving
//!   these bytes. Backup: `Store::backup_to` into a file of that
//!   filesystem, fsynced. Rounds alternate (the disk drifts); medians.
//!   `backup_over_copy` is the copy's time over the backup's (goal ≥ 0.5).
//! - Restore: `weir_actors::store::backup::restore` of that file into a
//!   new directory (checked as it is read, synced).
//! - Writers: a thread commits 16-op Enqueue commits (`flush` durability)
//!   for a window (10 s; 3 s with `--quick`) with no backup, then for the
//!   same window with one backup taken in it; `drain_during_backup_ratio`
//!   is the commits of the second window over the first (goal ≥ 0.8), and
//!   `writer_stall_ms` the longest wait of one commit in it: writers wait
//!   while the backup reads the store (its gate), not while it is served.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use weir_actors::store::backup;
use weir_actors::store::{Commit, Durability, Store, StoreSettings};

use super::report::{result_line, BenchError};
use super::store::{build_pending, dir_bytes, enqueue, TempDir};

const ROUNDS: usize = 3;
const GOAL_OVER_COPY: f64 = 0.5;
const GOAL_DRAIN_RATIO: f64 = 0.8;

fn failed<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> BenchError {
    move |e| BenchError::Failed(format!("{what}: {e}"))
}

/// Copies every file under `from` into `to`, then fsyncs them.
pub(super) fn copy_tree(from: &Path, to: &Path) -> Result<u64, BenchError> {
    std::fs::create_dir_all(to).map_err(failed("copy"))?;
    let mut bytes = 0;
    for e in std::fs::read_dir(from).map_err(failed("copy"))? {
        let e = e.map_err(failed("copy"))?;
        let target = to.join(e.file_name());
        if e.file_type().map_err(failed("copy"))?.is_dir() {
            bytes += copy_tree(&e.path(), &target)?;
        } else {
            bytes += std::fs::copy(e.path(), &target).map_err(failed("copy"))?;
            std::fs::File::open(&target)
                .and_then(|f| f.sync_all())
                .map_err(failed("copy fsync"))?;
        }
    }
    Ok(bytes)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Commits for `window` from a thread while `during` runs once, a quarter
/// of the way in (if given): commits made, and the longest commit.
fn writers(
    store: &Store,
    window: Duration,
    first: u64,
    during: Option<&(dyn Fn() -> Result<(), BenchError> + Sync)>,
) -> Result<(u64, Duration), BenchError> {
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| {
        let writer = {
            let store = store.clone();
            let stop = stop.clone();
            scope.spawn(move || -> Result<(u64, Duration), BenchError> {
                let pool: Arc<str> = "pool".into();
                let task: Arc<str> = "noop".into();
                let (mut n, mut key, mut longest) = (0u64, first, Duration::ZERO);
                while !stop.load(Ordering::Relaxed) {
                    let ops = (key..key + 16).map(|k| enqueue(k, &pool, &task)).collect();
                    key += 16;
                    let t = Instant::now();
                    store
                        .commit(&Commit {
                            ops,
                            ..Commit::default()
                        })
                        .map_err(failed("commit"))?;
                    longest = longest.max(t.elapsed());
                    n += 1;
                }
                Ok((n, longest))
            })
        };
        let started = Instant::now();
        if let Some(f) = during {
            std::thread::sleep(window / 4);
            f()?;
        }
        std::thread::sleep(window.saturating_sub(started.elapsed()));
        stop.store(true, Ordering::Relaxed);
        writer
            .join()
            .map_err(|_| BenchError::Failed("the writer panicked".into()))?
    })
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let tickets: u64 = if quick { 100_000 } else { 1_000_000 };
    let window = Duration::from_secs(if quick { 3 } else { 10 });
    let root = TempDir::named("backup")?;
    let dir = root.path.join("store");
    let built = Instant::now();
    build_pending(&dir, tickets)?;
    let store_bytes = dir_bytes(&dir);
    println!(
        "a store of {tickets} pending tickets, {} MiB on disk, built in {:.1} s",
        store_bytes >> 20,
        built.elapsed().as_secs_f64()
    );
    let settings = StoreSettings {
        durability: Durability::Flush,
        ..StoreSettings::default()
    };
    let (store, _) = Store::open(&dir, settings.clone()).map_err(failed("open"))?;
    let file = root.path.join("backup.wbk");
    let (mut copy_s, mut backup_s) = (Vec::new(), Vec::new());
    let mut backup_bytes = 0;
    for round in 0..ROUNDS {
        let copy_to = root.path.join(format!("copy-{round}"));
        let t = Instant::now();
        copy_tree(&dir, &copy_to)?;
        copy_s.push(t.elapsed().as_secs_f64());
        let _ = std::fs::remove_dir_all(&copy_to);
        let t = Instant::now();
        let out = std::fs::File::create(&file).map_err(failed("backup file"))?;
        let (out, summary) = crate::backup::backup_into(&store, out).map_err(failed("backup"))?;
        out.sync_all().map_err(failed("backup fsync"))?;
        backup_s.push(t.elapsed().as_secs_f64());
        backup_bytes = summary.bytes;
    }
    let (copy, took) = (median(copy_s), median(backup_s));
    let backup_mb_per_s = backup_bytes as f64 / 1e6 / took;
    let copy_mb_per_s = store_bytes as f64 / 1e6 / copy;
    let over_copy = copy / took;
    println!(
        "backup: {} MiB in {:.0} ms ({backup_mb_per_s:.0} MB/s); raw copy of the store's {} MiB: {:.0} ms ({copy_mb_per_s:.0} MB/s); copy time over backup time {over_copy:.2} (goal ≥ {GOAL_OVER_COPY})",
        backup_bytes >> 20,
        took * 1e3,
        store_bytes >> 20,
        copy * 1e3
    );

    let restored = root.path.join("restored");
    let t = Instant::now();
    let f = std::fs::File::open(&file).map_err(failed("backup file"))?;
    backup::restore(f, "bench", &restored, settings).map_err(failed("restore"))?;
    let restore_ms = t.elapsed().as_secs_f64() * 1e3;
    println!("restore: {restore_ms:.0} ms");

    let (alone, _) = writers(&store, window, 10_000_000, None)?;
    let spool = root.path.join("spool.wbk");
    let take = || -> Result<(), BenchError> {
        let out = std::fs::File::create(&spool).map_err(failed("spool"))?;
        crate::backup::backup_into(&store, out).map_err(failed("backup"))?;
        Ok(())
    };
    let (beside, stall) = writers(&store, window, 20_000_000, Some(&take))?;
    let ratio = beside as f64 / alone.max(1) as f64;
    println!(
        "writers: {alone} commits in {} s alone, {beside} with one backup in the window: {ratio:.2} (goal ≥ {GOAL_DRAIN_RATIO}); longest commit {} ms",
        window.as_secs(),
        stall.as_millis()
    );
    println!(
        "{}",
        result_line(
            "backup",
            &[
                ("tickets", tickets.to_string()),
                ("store_bytes", store_bytes.to_string()),
                ("backup_bytes", backup_bytes.to_string()),
                ("backup_mb_per_s", format!("{backup_mb_per_s:.1}")),
                ("copy_mb_per_s", format!("{copy_mb_per_s:.1}")),
                ("backup_over_copy", format!("{over_copy:.3}")),
                ("restore_ms", format!("{restore_ms:.0}")),
                ("drain_during_backup_ratio", format!("{ratio:.3}")),
                ("writer_stall_ms", stall.as_millis().to_string()),
                ("window_ms", window.as_millis().to_string()),
            ],
        )
    );
    Ok(())
}
