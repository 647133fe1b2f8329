//! What a commit asks of the device: in the `fsync` mode, sled's log write
//! ends in an fdatasync of its file (one device wait, the device's cache
//! flushed), then weir asks on its own handle whether write-back failed (a
//! `sync_file_range` that only waits), and no range call writes; a sled
//! blob file and its folder are synced before the log write that names the
//! blob; in the `flush` mode the log write is a `sync_file_range` and
//! nothing is fdatasynced. weir builds sled from `vendor/sled`, whose
//! `sync_to_device` setting does this (`vendor/sled/WEIR.md`).
//!
//! How it sees the calls: this binary defines `fdatasync`, `fsync` and
//! `sync_file_range` itself, so every call of the process (the standard
//! library's `File::sync_data`, sled's `libc::sync_file_range`) lands here
//! first; each records the call and the path of its descriptor, then makes
//! the system call. Its own binary, so that no other test's files are
//! synced while one counts.

use std::os::raw::{c_int, c_uint};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use weir_actors::store::{Commit, Durability, Store, StoreError, StoreSettings};
use weir_core::queue::{Job, Op};

/// One call seen, in the order the process made them.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    Fdatasync(PathBuf),
    Fsync(PathBuf),
    /// With its flags.
    SyncFileRange(PathBuf, c_uint),
    /// The test's own marks: a commit starts, a commit was acknowledged.
    Start(usize),
    Acked(usize),
}

static RECORDING: AtomicBool = AtomicBool::new(false);
/// While set, a `sync_file_range` that only waits (weir's question after a
/// flush) fails with EIO, as it does when the file's write-back failed.
static WAIT_FAILS: AtomicBool = AtomicBool::new(false);
/// While set, an fdatasync of sled's log fails with EIO, as the device's
/// does when a write is lost.
static LOG_SYNC_FAILS: AtomicBool = AtomicBool::new(false);
static EVENTS: Mutex<Vec<Event>> = Mutex::new(Vec::new());
/// One test records at a time: the calls of the whole process land in one
/// list.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn record(event: impl FnOnce() -> Event) {
    if RECORDING.load(Ordering::SeqCst) {
        let event = event();
        EVENTS.lock().unwrap_or_else(|p| p.into_inner()).push(event);
    }
}

fn fd_path(fd: c_int) -> PathBuf {
    std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap_or_default()
}

/// # Safety
/// As the C library's: `fd` is any descriptor; the call only syncs it.
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    record(|| Event::Fdatasync(fd_path(fd)));
    if LOG_SYNC_FAILS.load(Ordering::SeqCst) && fd_path(fd).ends_with("sled/db") {
        *libc::__errno_location() = libc::EIO;
        return -1;
    }
    libc::syscall(libc::SYS_fdatasync, fd) as c_int
}

/// # Safety
/// As the C library's.
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    record(|| Event::Fsync(fd_path(fd)));
    libc::syscall(libc::SYS_fsync, fd) as c_int
}

/// # Safety
/// As the C library's.
#[no_mangle]
pub unsafe extern "C" fn sync_file_range(
    fd: c_int,
    offset: libc::off64_t,
    nbytes: libc::off64_t,
    flags: c_uint,
) -> c_int {
    record(|| Event::SyncFileRange(fd_path(fd), flags));
    if flags == libc::SYNC_FILE_RANGE_WAIT_AFTER && WAIT_FAILS.load(Ordering::SeqCst) {
        *libc::__errno_location() = libc::EIO;
        return -1;
    }
    libc::syscall(libc::SYS_sync_file_range, fd, offset, nbytes, flags) as c_int
}

/// Runs `f` with the calls recorded; returns them.
fn recorded(f: impl FnOnce()) -> Vec<Event> {
    EVENTS.lock().unwrap_or_else(|p| p.into_inner()).clear();
    RECORDING.store(true, Ordering::SeqCst);
    f();
    RECORDING.store(false, Ordering::SeqCst);
    std::mem::take(&mut *EVENTS.lock().unwrap_or_else(|p| p.into_inner()))
}

fn mark(event: Event) {
    EVENTS.lock().unwrap_or_else(|p| p.into_inner()).push(event);
}

fn open(dir: &Path, durability: Durability) -> Store {
    let settings = StoreSettings {
        durability,
        // No background flush during the count: each log write below is a
        // commit's.
        background_flush_ms: 60_000,
        ..StoreSettings::default()
    };
    Store::open(dir, settings).expect("store opens").0
}

/// Commits the enqueue of a job keyed `key`.
fn try_commit(store: &Store, key: &str) -> Result<(), StoreError> {
    let commit = Commit {
        ops: vec![Op::Enqueue(Job::new(key, "noop", "p"))],
        ..Commit::default()
    };
    store.commit(&commit).map(|_| ())
}

fn commit(store: &Store, key: &str) {
    try_commit(store, key).expect("commit");
}

/// The events between the marks of commit `i`.
fn during(events: &[Event], i: usize) -> &[Event] {
    let start = events
        .iter()
        .position(|e| *e == Event::Start(i))
        .expect("start mark");
    let end = events
        .iter()
        .position(|e| *e == Event::Acked(i))
        .expect("ack mark");
    &events[start..end]
}

const COMMITS: usize = 20;

/// A store in `dir` opened in `durability`, one commit made, then
/// [`COMMITS`] commits recorded, each between its marks: the store, the
/// path of sled's log and the calls.
fn marked_commits(dir: &Path, durability: Durability) -> (Store, PathBuf, Vec<Event>) {
    let store = open(dir, durability);
    commit(&store, "warm");
    let log = dir.join("sled").join("db").canonicalize().unwrap();
    let events = recorded(|| {
        for i in 0..COMMITS {
            mark(Event::Start(i));
            commit(&store, &format!("job-{i}"));
            mark(Event::Acked(i));
        }
    });
    (store, log, events)
}

#[test]
fn a_durable_commit_is_acknowledged_after_an_fdatasync_of_sleds_log_and_a_write_back_check() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let (store, log, events) = marked_commits(tmp.path(), Durability::Fsync);
    let asked = Event::SyncFileRange(log.clone(), libc::SYNC_FILE_RANGE_WAIT_AFTER);
    for i in 0..COMMITS {
        let calls = during(&events, i);
        let synced = calls
            .iter()
            .position(|e| *e == Event::Fdatasync(log.clone()));
        let Some(synced) = synced else {
            panic!(
                "commit {i}: no fdatasync of sled's log before its acknowledgement \
                 (is sled built from vendor/sled?): {calls:?}"
            );
        };
        // Then weir asks, on its own handle, whether write-back failed.
        assert!(
            calls[synced..].contains(&asked),
            "commit {i}: no write-back check after the fdatasync: {calls:?}"
        );
    }
    // One per commit is the whole durable step. A commit whose bytes cross
    // into sled's next segment writes two buffers, each synced; a second
    // sync of weir's own after each flush would double the count.
    let fdatasyncs = events
        .iter()
        .filter(|e| **e == Event::Fdatasync(log.clone()))
        .count();
    assert!(
        fdatasyncs <= COMMITS + 2,
        "{fdatasyncs} fdatasyncs of sled's log over {COMMITS} commits: a \
         second device wait per commit"
    );
    // No range call writes anything: sled's write-out and wait is gone.
    let writes: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::SyncFileRange(_, f) if f & libc::SYNC_FILE_RANGE_WRITE != 0))
        .collect();
    assert!(
        writes.is_empty(),
        "sync_file_range writing in the fsync mode: {writes:?}"
    );
    assert_eq!(store.last_seq(), (COMMITS + 1) as u64);
}

#[test]
fn the_flush_mode_waits_for_the_write_and_makes_no_fdatasync() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let (_store, log, events) = marked_commits(tmp.path(), Durability::Flush);
    for i in 0..COMMITS {
        let calls = during(&events, i);
        assert!(
            calls.iter().any(|e| matches!(
                e,
                Event::SyncFileRange(p, f) if *p == log && f & libc::SYNC_FILE_RANGE_WRITE != 0
            )),
            "commit {i}: no sync_file_range of sled's log before its acknowledgement: {calls:?}"
        );
    }
    let syncs: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::Fdatasync(_) | Event::Fsync(_)))
        .collect();
    assert!(syncs.is_empty(), "syncs in the flush mode: {syncs:?}");
}

#[test]
fn a_sled_blob_and_its_folder_are_synced_before_the_log_write_that_names_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), Durability::Fsync);
    commit(&store, "warm");
    let sled_dir = tmp.path().join("sled").canonicalize().unwrap();
    let log = sled_dir.join("db");
    let blobs = sled_dir.join("blobs");
    // A value larger than a quarter of sled's 512 KiB segment is written
    // to a blob file of its own, the log holding a pointer to it.
    let records = store.raw_tree("records").expect("the records tree");
    let events = recorded(|| {
        records
            .insert(b"big", vec![7u8; 300 << 10])
            .expect("insert");
        store.sync().expect("sync");
    });
    let blob_sync = events
        .iter()
        .position(|e| matches!(e, Event::Fdatasync(p) if p.parent() == Some(blobs.as_path())))
        .unwrap_or_else(|| panic!("no fdatasync of a file in {}: {events:?}", blobs.display()));
    let folder_sync = events
        .iter()
        .position(|e| *e == Event::Fsync(blobs.clone()))
        .unwrap_or_else(|| panic!("no fsync of {}: {events:?}", blobs.display()));
    let log_sync = events
        .iter()
        .rposition(|e| *e == Event::Fdatasync(log.clone()))
        .unwrap_or_else(|| panic!("no fdatasync of sled's log: {events:?}"));
    assert!(
        blob_sync < folder_sync && folder_sync < log_sync,
        "the blob, then its folder, then the log: {events:?}"
    );
    drop(records);
    drop(store);
    // sled reads it back from the blob after a reopen (sled alone: weir's
    // open would refuse a record of no format of its own).
    let db = sled::Config::new()
        .path(&sled_dir)
        .open()
        .expect("sled opens");
    let records = db.open_tree("records").expect("the records tree");
    assert_eq!(
        records.get(b"big").unwrap().map(|v| v.len()),
        Some(300 << 10)
    );
}

#[test]
fn a_durable_commit_writes_into_allocated_blocks_and_grows_no_file() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), Durability::Fsync);
    commit(&store, "warm");
    let log = tmp.path().join("sled").join("db");
    let len = || std::fs::metadata(&log).unwrap().len();
    // sled's segments are 512 KiB; its current one is allocated whole when
    // sled starts it, so the commits that fit in it change no file size.
    const SEGMENT_BYTES: u64 = 512 << 10;
    let before = len();
    assert_eq!(
        before % SEGMENT_BYTES,
        0,
        "sled's log is {before} bytes, not whole segments: its segment was not allocated ahead"
    );
    for i in 0..COMMITS {
        commit(&store, &format!("job-{i}"));
        assert_eq!(len(), before, "commit {i} grew sled's log");
    }
    drop(store);
    // The allocated rest of the segment reads as sled's free space: the
    // store opens with every commit.
    let store = open(tmp.path(), Durability::Fsync);
    assert_eq!(store.last_seq(), (COMMITS + 1) as u64);
}

#[test]
fn a_write_back_error_reported_to_weirs_handle_fails_the_commit_and_stops_the_store() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), Durability::Fsync);
    commit(&store, "warm");
    // sled's fdatasync succeeds (its background flush took the error, say);
    // the question on weir's own handle reports it.
    WAIT_FAILS.store(true, Ordering::SeqCst);
    let got = try_commit(&store, "lost");
    WAIT_FAILS.store(false, Ordering::SeqCst);
    let e = got
        .expect_err("a commit whose write-back failed was acknowledged")
        .to_string();
    assert!(
        e.contains("fsync of") && e.contains("sled/db") && e.contains("Input/output error"),
        "the error names the fsync, the file and the OS error: {e}"
    );
    assert!(store.is_failed(), "fail-stop after a write-back error");
    assert!(
        store.commit(&Commit::default()).is_err(),
        "a write after it"
    );
}

#[test]
fn a_failed_fdatasync_of_sleds_log_fails_the_commit_and_loses_nothing_acknowledged() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path(), Durability::Fsync);
    commit(&store, "kept");
    let kept_seq = store.last_seq();
    // The device's error fails the commit that waited for the write (sled
    // writes a flush's buffer on the committing thread; the pool, which
    // wrote it before, set sled's global error for the waiting flush).
    LOG_SYNC_FAILS.store(true, Ordering::SeqCst);
    let got = try_commit(&store, "lost");
    let later = try_commit(&store, "later");
    LOG_SYNC_FAILS.store(false, Ordering::SeqCst);
    let e = got
        .expect_err("a commit whose log fdatasync failed was acknowledged")
        .to_string();
    assert!(
        e.contains("flush of") && e.contains("sled") && e.contains("Input/output error"),
        "the error names the flush and the OS error: {e}"
    );
    assert!(store.is_failed(), "fail-stop after a failed log sync");
    assert!(later.is_err(), "a write after it was acknowledged");
    drop(store);
    // The next open has what was acknowledged.
    let store = open(tmp.path(), Durability::Fsync);
    assert!(
        store.last_seq() >= kept_seq,
        "the acknowledged commit is gone: last seq {} < {kept_seq}",
        store.last_seq()
    );
}

#[test]
fn an_open_in_the_fsync_mode_syncs_the_blobs_a_flush_mode_store_left() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path(), Durability::Flush);
        let records = store.raw_tree("records").expect("the records tree");
        records
            .insert(b"big", vec![7u8; 300 << 10])
            .expect("insert");
        store.sync().expect("sync");
        // Removed again, so that weir's open finds only records of its
        // own; the blob file stays until sled collects it.
        records.remove(b"big").expect("remove");
        store.sync().expect("sync");
    }
    let blobs = tmp
        .path()
        .join("sled")
        .join("blobs")
        .canonicalize()
        .unwrap();
    let left: Vec<PathBuf> = std::fs::read_dir(&blobs)
        .unwrap()
        .map(|e| e.unwrap().path().canonicalize().unwrap())
        .collect();
    assert!(!left.is_empty(), "the flush-mode store left no blob file");
    let events = recorded(|| {
        open(tmp.path(), Durability::Fsync);
    });
    let synced = left
        .iter()
        .filter(|b| events.contains(&Event::Fdatasync((*b).clone())))
        .count();
    assert!(synced > 0, "the open synced none of {left:?}: {events:?}");
    assert!(events.contains(&Event::Fsync(blobs.clone())), "{events:?}");
}
