//! What an open writes over sled's free space. At every open sled makes
//! every free segment, and the rest of the segment its recovery read last,
//! read as zeros; weir's copy (`vendor/sled/WEIR.md`, change 4) writes
//! those zeros only where the bytes are not zeros already. So a store
//! reopened after a clean close writes nothing to sled's log before its
//! first commit (once the segments freed since an open were zeroed by the
//! next), while other bytes there (a torn write, a segment left as it
//! was) are still zeroed, and nothing written is lost.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use weir_actors::store::{Durability, Store, StoreSettings};
use weir_core::codec;

/// sled's segment (its `segment_size`, as weir opens it).
const SEGMENT_BYTES: u64 = 512 << 10;
/// A segment's header: CRC-32, LSN, highest stable LSN.
const SEGMENT_HEADER_BYTES: usize = 20;
/// Records written, of [`VALUE_BYTES`]: about 2 MB, several segments.
const RECORDS: usize = 500;
const VALUE_BYTES: usize = 4_000;
/// Records written after the page table: about 600 kB.
const LATER: usize = 150;
/// What the tests write over free space.
const GARBAGE: u8 = 0xA5;

fn settings() -> StoreSettings {
    StoreSettings {
        durability: Durability::Fsync,
        ..StoreSettings::default()
    }
}

fn key(i: usize) -> String {
    format!("rec/{i:04}")
}

fn later(i: usize) -> String {
    format!("later/{i:04}")
}

/// Record `i`'s value, in the store's envelope.
fn value(i: usize) -> Vec<u8> {
    codec::encode(&vec![(i % 251) as u8; VALUE_BYTES]).unwrap()
}

fn small() -> Vec<u8> {
    codec::encode(&"x").unwrap()
}

/// A store with [`RECORDS`] records, closed cleanly (past a MiB of log,
/// so the close has sled write its page table), then opened, given
/// [`LATER`] records more (past a segment, under a MiB), and closed
/// again: the next open reads the log written after the page table into
/// a new segment, whose rest sled then zeroes (it does so only for a
/// segment its recovery read from the start).
fn filled(dir: &Path) {
    let (store, _) = Store::open(dir, settings()).expect("the store opens");
    write_records(&store);
    drop(store);
    let (store, _) = Store::open(dir, settings()).expect("the store reopens");
    for i in 0..LATER {
        store.put_batch(&[(later(i), value(i))], &[]).unwrap();
    }
    store.sync().unwrap();
    drop(store);
}

/// Writes the [`RECORDS`] records, durably.
fn write_records(store: &Store) {
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(25) {
        let puts: Vec<(String, Vec<u8>)> = chunk.iter().map(|&i| (key(i), value(i))).collect();
        store.put_batch(&puts, &[]).unwrap();
    }
    store.sync().unwrap();
}

/// A free segment of the closed store in `dir` (no whole header) below
/// one in use (an open may cut the free segments after the last in use
/// off the file's end): the records are written again until sled has
/// freed one (their old copies are dead). Waits until sled has let go of
/// the file.
fn with_free_segment(dir: &Path) -> usize {
    let log_file = log_path(dir);
    for _round in 0..8 {
        released(&log_file);
        let log = std::fs::read(&log_file).unwrap();
        assert_eq!(log.len() as u64 % SEGMENT_BYTES, 0, "whole segments");
        let lsns = segment_lsns(&log);
        let last_in_use = lsns
            .iter()
            .rposition(Option::is_some)
            .expect("a segment in use");
        if let Some(free) = lsns[..last_in_use].iter().position(Option::is_none) {
            return free;
        }
        let (store, _) = Store::open(dir, settings()).expect("the store reopens");
        write_records(&store);
    }
    panic!("sled freed no segment in 8 rounds of writes");
}

fn assert_records(store: &Store) {
    for i in 0..RECORDS {
        let got = store.get_raw(&key(i)).unwrap();
        assert_eq!(got.as_deref(), Some(value(i).as_slice()), "record {i}");
    }
    for i in 0..LATER {
        let got = store.get_raw(&later(i)).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(value(i).as_slice()),
            "later record {i}"
        );
    }
}

fn log_path(dir: &Path) -> std::path::PathBuf {
    dir.join("sled").join("db")
}

/// Each segment's LSN, if its header is whole (its CRC holds).
fn segment_lsns(log: &[u8]) -> Vec<Option<u64>> {
    log.chunks(SEGMENT_BYTES as usize)
        .map(|seg| {
            let h = &seg[..SEGMENT_HEADER_BYTES];
            let stored = u32::from_le_bytes(h[0..4].try_into().unwrap()) ^ 0xFFFF_FFFF;
            (crc32fast::hash(&h[4..20]) == stored)
                .then(|| u64::from_le_bytes(h[4..12].try_into().unwrap()) ^ 0x7FFF_FFFF_FFFF_FFFF)
        })
        .collect()
}

/// The segment the log ends in (the highest LSN): its index, and the
/// offset in it of its last byte not zero.
fn active_segment(log: &[u8]) -> (usize, usize) {
    let (active, _) = segment_lsns(log)
        .iter()
        .enumerate()
        .filter_map(|(i, l)| l.map(|l| (i, l)))
        .max_by_key(|&(_, l)| l)
        .expect("a segment in use");
    let seg = &log[active * SEGMENT_BYTES as usize..(active + 1) * SEGMENT_BYTES as usize];
    (active, seg.iter().rposition(|&b| b != 0).unwrap())
}

#[test]
fn a_clean_reopen_writes_nothing_to_sleds_log_before_a_commit() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path());
    let log = log_path(dir.path());
    // Each open zeroes what is free and not zero yet: the segments sled
    // freed since the last (while it ran, or at that open). Upstream
    // sled wrote zeros over every free segment at every open, so with one
    // in the file no open came out unchanged.
    // Any write moves the file's modification time to now: it is set to
    // an instant long past before each open (whatever the file system's
    // clock granularity), and read again after it.
    let long_ago = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
    let mut opens = 0;
    let store = loop {
        with_free_segment(dir.path());
        let bytes_before = std::fs::read(&log).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        let (store, _) = Store::open(dir.path(), settings()).expect("the store reopens");
        let modified = std::fs::metadata(&log).unwrap().modified().unwrap();
        if modified == long_ago {
            assert_eq!(std::fs::read(&log).unwrap(), bytes_before);
            break store;
        }
        opens += 1;
        assert!(opens < 4, "each of {opens} opens wrote to sled's log");
        drop(store);
    };
    commit_and_reopen(dir.path(), store);
}

/// `store` (open on `dir`) holds every record; a commit after the open
/// lands, and the store reopens with all of them.
fn commit_and_reopen(dir: &Path, store: Store) {
    assert_records(&store);
    store
        .put_batch(&[("after".to_string(), small())], &[])
        .unwrap();
    store.sync().unwrap();
    drop(store);
    let (store, _) = Store::open(dir, settings()).expect("the store reopens");
    assert_records(&store);
    assert_eq!(
        store.get_raw("after").unwrap().as_deref(),
        Some(small().as_slice())
    );
}

/// Writes one [`GARBAGE`] byte at each of `at` in `file`, durably.
fn garble(file: &Path, at: &[u64]) {
    let f = std::fs::OpenOptions::new().write(true).open(file).unwrap();
    for &at in at {
        f.write_all_at(&[GARBAGE], at).unwrap();
    }
    f.sync_all().unwrap();
}

fn assert_zeros(file: &Path, at: u64, len: usize) {
    let mut buf = vec![GARBAGE; len];
    std::fs::File::open(file)
        .unwrap()
        .read_exact_at(&mut buf, at)
        .unwrap();
    assert!(
        buf.iter().all(|&b| b == 0),
        "the {len} bytes at {at} read as zeros after the open"
    );
}

/// Waits until no sled handle holds `log` (sled locks it with `flock`; a
/// dropped handle's threads let go of it a moment later and may write
/// until then).
fn released(log: &Path) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(log).unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(10);
    // SAFETY: `flock` on a descriptor this function owns.
    while unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        assert!(std::time::Instant::now() < until, "sled let go of its log");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn other_bytes_in_a_free_segment_are_zeroed_at_open_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    filled(dir.path());
    let log_file = log_path(dir.path());
    let free = with_free_segment(dir.path());
    // One byte in its middle and one at its end: sled reads 64 KiB at a
    // time, and must reach both.
    let base = free as u64 * SEGMENT_BYTES;
    garble(&log_file, &[base + 300_000, base + SEGMENT_BYTES - 1]);
    let (at, len) = (base + 4096, SEGMENT_BYTES as usize - 4096);
    let (store, _) = Store::open(dir.path(), settings()).expect("the store reopens");
    assert_zeros(&log_file, at, len);
    commit_and_reopen(dir.path(), store);
}

/// sled alone, as weir configures it: it zeroes the rest of the last
/// segment its recovery read from the segment's start (a weir store's
/// close writes sled's page table, after which its next open reads no
/// segment from its start; a crash leaves such a tail).
#[test]
fn other_bytes_after_the_end_of_sleds_log_are_zeroed_at_open_and_nothing_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let sled_dir = dir.path().join("sled");
    let config = || weir_actors::store::sled_config(&sled_dir, &settings());
    let log_file = sled_dir.join("db");
    // Values until the log has just started a segment (at least 300 of
    // them, several segments): more than sled's 64 KiB read is left free
    // after the end of the log, so the byte put at its end is past the
    // first read.
    let mut values = 0;
    {
        let db = config().open().unwrap();
        loop {
            db.insert(key(values), value(values)).unwrap();
            db.flush().unwrap();
            values += 1;
            let (_, used) = active_segment(&std::fs::read(&log_file).unwrap());
            if values >= 300 && used < 256 << 10 {
                break;
            }
            assert!(values < 2_000, "the log started no new segment");
        }
    }
    released(&log_file);
    let (active, last_written) = active_segment(&std::fs::read(&log_file).unwrap());
    let seg_len = SEGMENT_BYTES as usize;
    let from = (last_written + 4096) & !4095;
    assert!(from + 4096 <= seg_len, "the last segment has a free page");
    // To the segment's last byte but one: sled zeroes no further. One byte
    // at that end: sled reads 64 KiB at a time from the end of its log,
    // and must reach it.
    let (at, len) = (
        active as u64 * SEGMENT_BYTES + from as u64,
        seg_len - from - 1,
    );
    assert!(len > 64 << 10);
    garble(&log_file, &[at + len as u64 - 1]);
    let db = wait_open(&config);
    assert_zeros(&log_file, at, len);
    for i in 0..values {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(value(i).as_slice()),
            "value {i}"
        );
    }
    db.insert("after", small()).unwrap();
    db.flush().unwrap();
    drop(db);
    let db = wait_open(&config);
    assert_eq!(
        db.get("after").unwrap().as_deref(),
        Some(small().as_slice())
    );
    assert_eq!(db.len(), values + 1);
}

/// Opens sled, retrying while its previous handle's threads still hold
/// the file's lock (a few ms after a drop).
fn wait_open(config: &dyn Fn() -> sled::Config) -> sled::Db {
    let until = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match config().open() {
            Ok(db) => return db,
            Err(_) if std::time::Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("sled opens: {e}"),
        }
    }
}
