//! Kill test of the Raft log's files: a child process appends to the log
//! over and over (frames of one to four entries, in segments small enough
//! to roll often), now and then truncates its last entries (inside a
//! frame, too) and writes them again, and purges its oldest; it says on
//! stdout what each append made durable, and what each truncation and
//! purge is about to remove. The parent kills it with SIGKILL at moments spread over
//! its run, several times on the same log, and after each kill opens the
//! log as the kill left it: every acknowledged entry must be there with
//! the bytes last acknowledged for it, and the next child goes on from
//! where the log ends.
//!
//! The child is this test binary run again (`wal_child`, a no-op unless
//! `store_support::spawn_child` started it).

mod store_support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::time::Duration;

use weir_actors::store::{Store, StoreSettings};

const ROUNDS: u64 = 8;
/// A child that has not said START within this is killed.
const CHILD_START_MAX: Duration = Duration::from_secs(30);
/// Segments this small roll every few dozen appends.
const SEGMENT_BYTES: u64 = 16 << 10;

/// The bytes of entry `index` as written in `round`: lengths vary so that
/// frames cross pages and segments at different places.
fn value(index: u64, round: u64) -> Vec<u8> {
    let len = 20 + (index * 7 + round * 13) % 700;
    (0..len).map(|i| (index + round + i) as u8).collect()
}

#[test]
fn wal_child() {
    let Some((dir, round)) = store_support::child_of() else {
        return;
    };
    let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
    let mut wal = store.open_raft_wal().expect("the log opens");
    wal.set_segment_bytes_max(SEGMENT_BYTES);
    // A log purged of all it held ends at what was purged, as the log
    // store keeps it: noted here before each purge.
    let purged_file = dir.with_extension("purged");
    let mut last = match wal.bounds() {
        Some((_, l)) => l,
        None => std::fs::read_to_string(&purged_file).map_or(0, |s| s.trim().parse().unwrap()),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "START {last}").unwrap();
    for n in 0u64.. {
        // A truncation and a purge are said before they are made: the
        // entries they remove may or may not be there after a kill, and
        // every other must be.
        if n % 100 == 79 && last > 300 {
            // A purge into the frame the truncation below cuts (the frame
            // of three appended just before): a snapshot installed over
            // entries a new leader then overrides.
            writeln!(out, "PURGE {}", last - 2).unwrap();
            std::fs::write(&purged_file, (last - 2).to_string()).unwrap();
            wal.purge(last - 2).unwrap();
        }
        if n % 40 == 39 && last > 3 {
            // A leader's entries replace the last two (inside the last
            // frame when it holds three or four).
            writeln!(out, "TRUNC {}", last - 1).unwrap();
            wal.truncate(last - 1).unwrap();
            last -= 2;
        }
        if n % 100 == 99 && last > 300 {
            writeln!(out, "PURGE {}", last - 200).unwrap();
            std::fs::write(&purged_file, (last - 200).to_string()).unwrap();
            wal.purge(last - 200).unwrap();
        }
        let count = 1 + n % 4;
        let frame: Vec<(u64, Vec<u8>)> = (last + 1..=last + count)
            .map(|i| (i, value(i, round)))
            .collect();
        wal.append(&frame).unwrap();
        last += count;
        writeln!(out, "ACK {} {last}", last + 1 - count).unwrap();
        out.flush().unwrap();
    }
}

/// What the parent knows of the log: each acknowledged index's round
/// (`None`: durable but written after the last acknowledgement the
/// parent read), and what was purged.
#[derive(Default)]
struct Known {
    entries: BTreeMap<u64, Option<u64>>,
    purged: u64,
}

/// Runs the child of `round` on `dir`, kills it `kill_after` after it
/// says it started (its process's start and the store's open vary by
/// tens of ms; measured from the spawn, an early kill could land before
/// any append), and takes in what it said: how many appends it
/// acknowledged.
fn run_child(dir: &Path, round: u64, kill_after: Duration, known: &mut Known) -> usize {
    let mut child = store_support::spawn_child(
        "wal_child",
        dir,
        round,
        &dir.with_extension(format!("stderr-{round}")),
    );
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (said_start, start_said) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        // No START within the bound (or the child gone): killed now, and
        // the parent's assertion says the child did not start.
        let _ = start_said.recv_timeout(CHILD_START_MAX);
        std::thread::sleep(kill_after);
        let _ = child.kill();
        child.wait().unwrap()
    });
    let mut started = false;
    let mut acks = 0;
    for line in lines.map_while(Result::ok) {
        // libtest's "test wal_child ... " may lead a line.
        let Some(at) = ["START ", "ACK ", "TRUNC ", "PURGE "]
            .iter()
            .filter_map(|w| line.find(w))
            .min()
        else {
            continue;
        };
        let words: Vec<&str> = line[at..].split(' ').collect();
        let num = |i: usize| words[i].parse::<u64>().unwrap();
        match words[0] {
            "START" => {
                started = true;
                let _ = said_start.send(());
                let last = num(1);
                let known_last = known.entries.keys().next_back().copied().unwrap_or(0);
                assert!(
                    last >= known_last,
                    "round {round}: the log ends at {last}, before the acknowledged {known_last}"
                );
                // Durable, written after the last acknowledgement read.
                for i in known_last + 1..=last {
                    known.entries.insert(i, None);
                }
                // Whatever was past it is gone for good now.
                known.entries.split_off(&(last + 1));
            }
            "ACK" => {
                acks += 1;
                for i in num(1)..=num(2) {
                    known.entries.insert(i, Some(round));
                }
            }
            "TRUNC" => {
                known.entries.split_off(&num(1));
            }
            "PURGE" => known.purged = known.purged.max(num(1)),
            _ => unreachable!(),
        }
    }
    killer.join().unwrap();
    assert!(started, "round {round}: the child did not start");
    acks
}

#[test]
fn a_kill_at_any_moment_loses_no_acknowledged_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("member");
    let mut known = Known::default();
    let mut checked_all = 0;
    for round in 1..=ROUNDS {
        let kill_after = Duration::from_millis(60 + round * 37 % 200);
        let acks = run_child(&dir, round, kill_after, &mut known);
        // Every round appends under the kill; what of it is left to check
        // may be nothing, when the kill lands right after a purge of all
        // but the last entries and the truncation of those.
        assert!(acks > 0, "round {round}: no append acknowledged");
        let (store, _) = Store::open(&dir, StoreSettings::default()).unwrap();
        let wal = store
            .open_raft_wal()
            .unwrap_or_else(|e| panic!("round {round}: the log does not open: {e}"));
        let held: BTreeMap<u64, Vec<u8>> = wal
            .read(known.purged + 1, u64::MAX)
            .unwrap()
            .into_iter()
            .collect();
        let mut checked = 0;
        for (index, written) in known.entries.range(known.purged + 1..) {
            let bytes = held
                .get(index)
                .unwrap_or_else(|| {
                    panic!(
                        "round {round}: acknowledged entry {index} is lost (log {:?}, purged {}, acknowledged up to {:?}, segments {:?})",
                        wal.bounds(),
                        known.purged,
                        known.entries.keys().next_back(),
                        wal.segment_paths()
                    )
                });
            if let Some(r) = written {
                assert_eq!(
                    bytes,
                    &value(*index, *r),
                    "round {round}: entry {index} holds other bytes than acknowledged"
                );
                checked += 1;
            }
        }
        checked_all += checked;
        eprintln!(
            "round {round}: killed after {kill_after:?}; {checked} entries checked, log {:?}, {} segments",
            wal.bounds(),
            wal.segment_paths().len()
        );
    }
    assert!(checked_all > 0, "no acknowledged entry was ever checked");
}
