//! A small durable commit wakes none of sled's I/O threads.
//!
//! Each commit flushes sled's log. sled 0.34.7 hands that write to its own
//! pool of I/O threads (seven or more, idle between commits) and the
//! flushing thread waits for it: two thread switches per commit, and
//! upstream's pool woke every idle thread for each task (seven context
//! switches and a race for one mutex, on a machine of two cores that the
//! commit's own threads need). In weir's copy (`vendor/sled/WEIR.md`), a
//! flush with `sync_to_device` writes the buffer it seals on its own
//! thread, and a task pushed on the pool wakes one thread. This test counts
//! the wake-ups of sled's I/O threads (their voluntary context switches,
//! from `/proc/self/task`) over a run of commits of one op each.
//!
//! Its own binary: sled's pool is global to the process, and no other
//! test's commits may run while it counts.

use std::collections::HashMap;
use std::path::Path;

use weir_actors::store::{Commit, Durability, Store, StoreSettings};
use weir_core::queue::{Job, Op};

/// Commits counted: each one flushes sled's log once.
const COMMITS: usize = 300;
/// Wake-ups of sled's I/O threads allowed per commit: none is needed (the
/// committing thread writes and syncs the log itself); the slack is for
/// sled's own background work. 0.0 measured; 4.1–4.2 when the pool wrote
/// each commit, 10.1–10.3 with upstream's pool (2026-12-07). Besides these,
/// each idle pool thread wakes once a second at its wait's timeout, however
/// slow the disk makes the run.
const WAKEUPS_PER_COMMIT_MAX: f64 = 0.25;

/// Voluntary context switches of each of this process's threads named
/// `sled-io-*`, by thread id.
fn sled_io_switches() -> HashMap<String, u64> {
    let mut found = HashMap::new();
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task lists threads") {
        let Ok(task) = task else { continue };
        let path = task.path();
        // A thread that ended between the listing and the read is skipped:
        // sled's idle threads beyond its seven may end after a second.
        let Ok(comm) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        if !comm.starts_with("sled-io") {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(path.join("status")) else {
            continue;
        };
        let switches = status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("status names voluntary_ctxt_switches");
        found.insert(task.file_name().to_string_lossy().into_owned(), switches);
    }
    found
}

fn commit(store: &Store, key: &str) {
    let commit = Commit {
        ops: vec![Op::Enqueue(Job::new(key, "noop", "p"))],
        ..Commit::default()
    };
    store.commit(&commit).expect("commit");
}

fn open(dir: &Path) -> Store {
    let settings = StoreSettings {
        durability: Durability::Fsync,
        ..StoreSettings::default()
    };
    Store::open(dir, settings).expect("store opens").0
}

#[test]
fn a_small_commit_wakes_no_sled_io_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    // The pool's threads start with the first write, and a few commits
    // let the ones sled adds settle.
    for i in 0..20 {
        commit(&store, &format!("warm-{i}"));
    }
    let before = sled_io_switches();
    let idle_threads = before.len();
    assert!(
        idle_threads >= 7,
        "sled's I/O pool has {idle_threads} threads; the test expects its seven idle ones"
    );
    let started = std::time::Instant::now();
    for i in 0..COMMITS {
        commit(&store, &format!("job-{i}"));
    }
    let after = sled_io_switches();
    // sled's idle threads time out of their wait once a second each.
    let timeouts = idle_threads as u64 * (started.elapsed().as_secs() + 1);
    // A thread that started during the run counts from zero.
    let wakeups: u64 = after
        .iter()
        // A thread id reused by a new thread may count from below.
        .map(|(tid, n)| n.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum::<u64>()
        .saturating_sub(timeouts);
    let per_commit = wakeups as f64 / COMMITS as f64;
    assert!(
        per_commit <= WAKEUPS_PER_COMMIT_MAX,
        "{wakeups} wake-ups of sled's {} I/O threads over {COMMITS} commits \
         (beyond {timeouts} for their idle timeouts): {per_commit:.2} per \
         commit, more than {WAKEUPS_PER_COMMIT_MAX} (is sled built from \
         vendor/sled?)",
        after.len()
    );
    // The commits were made: each one is in the store.
    assert_eq!(store.last_seq(), (20 + COMMITS) as u64);
}
