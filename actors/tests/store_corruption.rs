//! A truncated or corrupted store never panics (issue 13, item 3): a store
//! larger than one sled segment, closed cleanly, then each of its files
//! truncated at several offsets, flipped at several bytes, or deleted. The
//! open returns an error that names the file (or, for damage sled's
//! checksums and the close mark show to be harmless, succeeds with every
//! acknowledged op and record intact); it never panics, and never opens
//! with something acknowledged missing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use weir_actors::store::{Commit, Durability, Store, StoreError, StoreSettings};
use weir_core::codec;
use weir_core::queue::{Job, Op};

mod store_support;
use store_support::{copy_dir, page_table_lsn};

/// Records written; each of `RECORD_BYTES`, so the store spans several
/// of sled's 512 KiB segments.
const RECORDS: usize = 1_500;
const RECORD_BYTES: usize = 2_000;
/// Enqueues journaled, in commits of 50.
const ENQUEUES: usize = 1_000;

fn settings() -> StoreSettings {
    StoreSettings {
        durability: Durability::Flush,
        reserve_file_bytes: 0,
        ..StoreSettings::default()
    }
}

/// What was acknowledged: record values and enqueued keys.
struct Acked {
    records: BTreeMap<String, Vec<u8>>,
    keys: Vec<String>,
}

fn build(dir: &Path) -> Acked {
    let (store, _) = Store::open(dir, settings()).expect("a new store opens");
    let mut records = BTreeMap::new();
    for chunk in 0..RECORDS / 50 {
        let puts: Vec<(String, Vec<u8>)> = (0..50)
            .map(|j| {
                let i = chunk * 50 + j;
                let value = codec::encode(&vec![(i % 251) as u8; RECORD_BYTES]).unwrap();
                (format!("r/{i:05}"), value)
            })
            .collect();
        store.put_batch(&puts, &[]).unwrap();
        records.extend(puts);
    }
    let mut keys = Vec::new();
    for chunk in 0..ENQUEUES / 50 {
        let ops: Vec<Op> = (0..50)
            .map(|j| {
                let key = format!("k{:05}", chunk * 50 + j);
                keys.push(key.clone());
                Op::Enqueue(Job {
                    payload: vec![3; 100],
                    ..Job::new(key.as_str(), "noop", "p")
                })
            })
            .collect();
        store
            .commit(&Commit {
                ops,
                ..Commit::default()
            })
            .unwrap();
    }
    Acked { records, keys }
}

/// Every file under `dir/sled`, relative to `dir`, with its size.
fn sled_files(dir: &Path) -> Vec<(PathBuf, u64)> {
    fn walk(root: &Path, at: &Path, out: &mut Vec<(PathBuf, u64)>) {
        for e in std::fs::read_dir(at).unwrap().flatten() {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk(root, &e.path(), out);
            } else {
                out.push((e.path().strip_prefix(root).unwrap().to_path_buf(), m.len()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, &dir.join("sled"), &mut out);
    out.sort();
    out
}

/// One kind of damage to a file.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Cut to this many bytes.
    Truncate(u64),
    /// Invert the byte at this offset.
    Flip(u64),
    /// Delete the file.
    Delete,
}

fn apply(path: &Path, damage: Damage) {
    match damage {
        Damage::Truncate(len) => {
            let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            f.set_len(len).unwrap();
        }
        Damage::Flip(at) => {
            let mut bytes = std::fs::read(path).unwrap();
            bytes[at as usize] = !bytes[at as usize];
            std::fs::write(path, bytes).unwrap();
        }
        Damage::Delete => std::fs::remove_file(path).unwrap(),
    }
}

/// The damages tried on a file of `len` bytes.
fn damages(len: u64) -> Vec<Damage> {
    let mut out = Vec::new();
    let mut cuts = vec![
        0,
        1,
        len / 3,
        len / 2,
        len.saturating_sub(len / 10),
        len - 1,
    ];
    // Just past the first segment, where sled 0.34.7 was seen to panic
    // (issue 13 truncated at 5,216,813 bytes: a segment and a bit).
    for segment in [512 << 10, 1 << 20, 5 << 20] {
        if segment + 13 < len {
            cuts.push(segment + 13);
        }
    }
    cuts.sort();
    cuts.dedup();
    out.extend(cuts.into_iter().filter(|&c| c < len).map(Damage::Truncate));
    let mut flips = vec![0, 20, len / 4, len / 2, len - 1];
    flips.sort();
    flips.dedup();
    out.extend(flips.into_iter().filter(|&f| f < len).map(Damage::Flip));
    out.push(Damage::Delete);
    out
}

/// Whether the store holds everything acknowledged.
fn intact(
    store: &Store,
    recovered: &weir_actors::store::Recovered,
    acked: &Acked,
) -> Result<(), String> {
    for (k, v) in &acked.records {
        match store.get_raw(k) {
            Ok(Some(got)) if got == *v => {}
            Ok(Some(_)) => return Err(format!("record {k} changed")),
            Ok(None) => return Err(format!("record {k} is missing")),
            Err(e) => return Err(format!("record {k}: {e}")),
        }
    }
    let keys: std::collections::BTreeSet<&str> =
        recovered.state.tickets().map(|t| &*t.job.key).collect();
    for k in &acked.keys {
        if !keys.contains(k.as_str()) {
            return Err(format!("enqueue {k} is missing"));
        }
    }
    Ok(())
}

#[test]
fn damaged_files_are_refused_by_name_and_never_panic() {
    let pristine = tempfile::tempdir().unwrap();
    let acked = build(pristine.path());
    let files = sled_files(pristine.path());
    let db_len = files
        .iter()
        .find(|(p, _)| p == Path::new("sled/db"))
        .map(|(_, l)| *l)
        .expect("sled/db exists");
    assert!(
        db_len > 512 << 10,
        "the store spans more than one sled segment: sled/db is {db_len} bytes"
    );
    let mut refused = 0;
    let mut opened = 0;
    let mut failures = Vec::new();
    for (file, len) in &files {
        for damage in damages(*len) {
            let work = tempfile::tempdir().unwrap();
            let dir = work.path().join("data");
            copy_dir(pristine.path(), &dir);
            apply(&dir.join(file), damage);
            let what = format!("{} ({len} bytes): {damage:?}", file.display());
            let result = std::panic::catch_unwind(|| Store::open(&dir, settings()));
            match result {
                Err(_) => failures.push(format!("{what}: the open panicked")),
                Ok(Err(e)) => {
                    refused += 1;
                    let msg = e.to_string();
                    let name = file.file_name().unwrap().to_string_lossy().into_owned();
                    if !msg.contains(&name) {
                        failures.push(format!("{what}: the error does not name {name}: {msg}"));
                    }
                    if msg.contains("backtrace") {
                        failures.push(format!("{what}: sled's raw message: {msg}"));
                    }
                    if !matches!(
                        e,
                        StoreError::Damaged { .. }
                            | StoreError::Corrupt { .. }
                            | StoreError::Inconsistent { .. }
                    ) {
                        failures.push(format!("{what}: not a damage error: {e:?}"));
                    }
                    eprintln!("{what}: refused: {msg}");
                    // sled may have rewritten the files while it failed;
                    // a second open must not take what is left as whole.
                    match std::panic::catch_unwind(|| Store::open(&dir, settings())) {
                        Err(_) => failures.push(format!("{what}: the second open panicked")),
                        Ok(Err(_)) => {}
                        Ok(Ok((store, recovered))) => {
                            if let Err(lost) = intact(&store, &recovered, &acked) {
                                failures.push(format!("{what}: a second open took it, but {lost}"));
                            }
                        }
                    }
                }
                Ok(Ok((store, recovered))) => {
                    opened += 1;
                    if let Err(lost) = intact(&store, &recovered, &acked) {
                        failures.push(format!("{what}: opened, but {lost}"));
                    }
                    eprintln!("{what}: opened intact");
                }
            }
        }
    }
    eprintln!(
        "{refused} refused, {opened} opened intact, {} failures",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(refused > 0, "some damage is refused");
}

/// Removes record `key` behind the store's back, through sled itself, as
/// a log segment skipped as damaged would lose it.
fn lose_record(dir: &Path, key: &str) {
    let db = sled::open(dir.join("sled")).unwrap();
    let records = db.open_tree("records").unwrap();
    assert!(records.remove(key.as_bytes()).unwrap().is_some());
    db.flush().unwrap();
}

/// sled skips a damaged message in the stable part of its log and goes on
/// (the rest of that segment is taken as freed), so a flipped byte can
/// drop records silently while the journal's tail is whole. Simulated
/// here exactly: a record removed behind the store's back, through sled
/// itself, after a clean close. The open refuses it, naming the mark.
#[test]
fn a_store_that_lost_records_since_its_clean_close_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let acked = build(&dir);
    let mark = std::fs::read_to_string(dir.join("store.mark")).unwrap();
    assert!(
        mark.contains("\ncontent "),
        "a clean close records the content: {mark:?}"
    );
    lose_record(&dir, acked.records.keys().nth(700).unwrap());
    for attempt in ["first", "second"] {
        let e = match Store::open(&dir, settings()) {
            Ok(_) => panic!("{attempt} open took a store that lost a record"),
            Err(e) => e,
        };
        let msg = e.to_string();
        assert!(matches!(e, StoreError::Damaged { .. }), "{e:?}");
        assert!(
            msg.contains("store.mark") && msg.contains("sled/db"),
            "{msg}"
        );
        assert!(msg.contains("part of its log was skipped"), "{msg}");
    }
}

/// The content describes the store until its next write: an open checks
/// it and cuts the mark back to the sequence before anything writes, so a
/// store killed after writing more is not refused for it; a clean close
/// records the content again.
#[test]
fn an_open_store_drops_the_content_from_its_mark_until_it_closes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let acked = build(&dir);
    let whole = std::fs::read_to_string(dir.join("store.mark")).unwrap();
    let (store, recovered) = Store::open(&dir, settings()).unwrap();
    intact(&store, &recovered, &acked).unwrap();
    let open = std::fs::read_to_string(dir.join("store.mark")).unwrap();
    assert_eq!(
        Some(open.as_str()),
        whole.lines().next().map(|l| format!("{l}\n")).as_deref()
    );
    store
        .put_batch(
            &[("r/extra".to_string(), codec::encode(&1u8).unwrap())],
            &[],
        )
        .unwrap();
    drop(store);
    let closed = std::fs::read_to_string(dir.join("store.mark")).unwrap();
    assert!(closed.contains("\ncontent "), "{closed:?}");
    assert_ne!(closed, whole, "the content changed with the write");
    let (store, _) = Store::open(&dir, settings()).unwrap();
    assert!(store.get_raw("r/extra").unwrap().is_some());
}

/// Replaces the content line of a mark-like file (`store.mark`,
/// `store.files`) with `content`.
fn set_content(path: &Path, content: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with("content ") {
                format!("content {content}")
            } else {
                l.to_string()
            }
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// A clean close digests sled's files beside the mark (`store.files`), and
/// the next open reads the trees back only when the files are not the
/// bytes that close left. Shown with a mark whose content no longer fits
/// the store: taken as it is while the files are the closed ones (the
/// content was not read again), refused as soon as they are not, or when
/// the digest is missing or was not written with that mark.
#[test]
fn the_open_reads_the_trees_back_only_when_the_files_changed_since_the_clean_close() {
    let tmp = tempfile::tempdir().unwrap();
    let pristine = tmp.path().join("pristine");
    let acked = build(&pristine);
    let mark = std::fs::read_to_string(pristine.join("store.mark")).unwrap();
    let files = std::fs::read_to_string(pristine.join("store.files")).unwrap();
    assert_eq!(
        files.lines().take(2).collect::<Vec<_>>(),
        mark.lines().collect::<Vec<_>>(),
        "the digest names the mark it was written with: {files:?} {mark:?}"
    );
    assert!(
        files.lines().nth(2).unwrap().starts_with("files "),
        "{files:?}"
    );

    // The control: the files as closed, the mark whole.
    let dir = tmp.path().join("as-closed");
    copy_dir(&pristine, &dir);
    {
        let (store, recovered) = Store::open(&dir, settings()).unwrap();
        intact(&store, &recovered, &acked).unwrap();
        assert!(
            !dir.join("store.files").exists(),
            "an open removes the digest before anything writes"
        );
    }
    assert!(
        dir.join("store.files").exists(),
        "the close writes it again"
    );

    let wrong = "1 2 0000abcd";
    let case = |name: &str, change: &dyn Fn(&Path)| -> Result<(), StoreError> {
        let dir = tmp.path().join(name);
        copy_dir(&pristine, &dir);
        set_content(&dir.join("store.mark"), wrong);
        set_content(&dir.join("store.files"), wrong);
        change(&dir);
        Store::open(&dir, settings()).map(|_| ())
    };
    // Unchanged files: the content is not read, so the wrong one passes.
    case("unchanged", &|_| {}).expect("files as closed: the mark is taken as it is");
    // Anything else reads it, and the wrong content is found.
    let refused = |r: Result<(), StoreError>, what: &str| match r {
        Err(StoreError::Damaged { what: why, .. }) => {
            assert!(why.contains("store.mark"), "{what}: {why}")
        }
        other => panic!("{what}: the content was not checked: {other:?}"),
    };
    // A flipped byte: sled may find it itself (a message it reads) or not
    // (padding, a dead page); either way the store is not taken as closed.
    let flipped = case("byte", &|d| {
        let db = d.join("sled").join("db");
        let mut bytes = std::fs::read(&db).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x01;
        std::fs::write(&db, bytes).unwrap();
    });
    assert!(
        matches!(flipped, Err(StoreError::Damaged { .. })),
        "a flipped byte: {flipped:?}"
    );
    // A file sled does not read at all still changes the files.
    refused(
        case("new-file", &|d| {
            std::fs::write(d.join("sled").join("notes.txt"), "x").unwrap()
        }),
        "a new file",
    );
    refused(
        case("no-digest", &|d| {
            std::fs::remove_file(d.join("store.files")).unwrap()
        }),
        "no digest",
    );
    refused(
        case("other-close", &|d| {
            let p = d.join("store.files");
            let text = std::fs::read_to_string(&p).unwrap();
            let seq: u64 = text.lines().next().unwrap()[9..].parse().unwrap();
            std::fs::write(
                &p,
                text.replacen(
                    &format!("last_seq {seq}"),
                    &format!("last_seq {}", seq - 1),
                    1,
                ),
            )
            .unwrap();
        }),
        "a digest of another close",
    );
    refused(
        case("garbage", &|d| {
            std::fs::write(d.join("store.files"), "files?").unwrap()
        }),
        "a digest that does not read",
    );
}

/// `weir status` and `weir inspect` open the store too: their open cuts the
/// mark like any other, so their close must leave it whole again, or every
/// later open would skip the content check. Shown by losing a record after
/// an inspection: the engine's open still refuses the store.
#[test]
fn an_inspection_leaves_the_mark_whole_and_the_check_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let acked = build(&dir);
    let closed = std::fs::read_to_string(dir.join("store.mark")).unwrap();
    {
        let (store, recovered) = weir_actors::store::open_for_inspection(&dir).unwrap();
        intact(&store, &recovered, &acked).unwrap();
    }
    let mark = std::fs::read_to_string(dir.join("store.mark")).unwrap();
    assert_eq!(
        mark, closed,
        "the inspection wrote nothing: the same content"
    );
    assert!(dir.join("store.files").exists(), "and the files' digest");
    // A second inspection takes the fast path and leaves it whole again.
    drop(weir_actors::store::open_for_inspection(&dir).unwrap());
    assert_eq!(
        std::fs::read_to_string(dir.join("store.mark")).unwrap(),
        closed
    );
    lose_record(&dir, acked.records.keys().nth(300).unwrap());
    match Store::open(&dir, settings()) {
        Err(StoreError::Damaged { what, .. }) => {
            assert!(what.contains("part of its log was skipped"), "{what}")
        }
        Ok(_) => panic!("an open after an inspection took a store that lost a record"),
        Err(e) => panic!("{e:?}"),
    }
}

/// Opens the store in `dir`, writes `values` values of 4,000 bytes and
/// closes it; returns the page table's position the open wrote.
fn write_and_close(dir: &Path, values: usize) -> u64 {
    let (store, _) = Store::open(dir, settings()).unwrap();
    let at_open = page_table_lsn(dir).expect("an open writes one");
    for i in 0..values {
        let puts = vec![(
            format!("later/{i:04}"),
            codec::encode(&vec![7u8; 4_000]).unwrap(),
        )];
        store.put_batch(&puts, &[]).unwrap();
        store.sync().unwrap();
    }
    at_open
}

/// A clean close has sled write its page table after the store's last
/// write (sled writes one only while it opens, and an open reads all the
/// log after it), once a MiB of log or more was written since the open;
/// and the files still digest as that close left them.
#[test]
fn a_clean_close_leaves_sleds_page_table_after_its_last_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    build(&dir);
    let closed = page_table_lsn(&dir).expect("the first close wrote a page table");
    // 1.6 MB of values.
    let at_open = write_and_close(&dir, 400);
    assert!(at_open >= closed, "{at_open} {closed}");
    let reclosed = page_table_lsn(&dir).unwrap();
    assert!(
        reclosed > at_open,
        "the close's page table covers the writes after the open: {reclosed} > {at_open}"
    );
    // The digest is of the files as the page table left them: with a
    // mark whose content no longer fits, the open still takes the mark as
    // it is (it read no tree back).
    set_content(&dir.join("store.mark"), "1 2 0000abcd");
    set_content(&dir.join("store.files"), "1 2 0000abcd");
    let (store, _) = Store::open(&dir, settings()).expect("the files are as the close left them");
    assert!(store.get::<Vec<u8>>("later/0399").unwrap().is_some());
}

/// A close after a few writes leaves the page table the open wrote: the
/// next open reads that little log again in less time than the close would
/// spend opening sled to spare it.
#[test]
fn a_close_after_little_log_leaves_the_page_table_as_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    build(&dir);
    let at_open = write_and_close(&dir, 3);
    assert_eq!(page_table_lsn(&dir), Some(at_open));
    let (store, _) = Store::open(&dir, settings()).unwrap();
    assert!(store.get::<Vec<u8>>("later/0002").unwrap().is_some());
}

/// A page table sled began and never finished (a kill while it opened, at
/// a start or at a clean close) is removed before sled opens: sled 0.34
/// would take it for its newest page table and refuse the store.
#[test]
fn a_page_table_left_unfinished_by_a_kill_is_removed_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    build(&dir);
    let unfinished = dir.join("sled").join("snap.FFFFFFFFFFFFFFFF.generating");
    std::fs::write(&unfinished, b"").unwrap();
    let (store, _) = Store::open(&dir, settings()).expect("the store opens");
    assert!(!unfinished.exists());
    assert!(store.get::<Vec<u8>>("r/00000").unwrap().is_some());
}
