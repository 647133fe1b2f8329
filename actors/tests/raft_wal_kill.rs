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
//! `WEIR_WAL_CHILD_DIR` is set).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use weir_actors::store::{Store, StoreSettings};

const CHILD_DIR_ENV: &str = "WEIR_WAL_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "WEIR_WAL_CHILD_ROUND";
const ROUNDS: u64 = 8;
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
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let round: u64 = std::env::var(CHILD_ROUND_ENV).unwrap().parse().unwrap();
    let (store, _) = Store::open(Path::new(&dir), StoreSettings::default()).unwrap();
    let mut wal = store.open_raft_wal().expect("the log opens");
    wal.set_segment_bytes_max(SEGMENT_BYTES);
    let mut last = wal.bounds().map_or(0, |(_, l)| l);
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

/// Runs the child of `round` on `dir`, kills it after `kill_after`, and
/// takes in what it said.
fn run_child(dir: &Path, round: u64, kill_after: Duration, known: &mut Known) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "wal_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(dir.with_extension(format!("stderr-{round}"))).unwrap(),
        ))
        .spawn()
        .expect("child spawns");
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let killer = std::thread::spawn(move || {
        let started = Instant::now();
        std::thread::sleep(kill_after.saturating_sub(started.elapsed()));
        let _ = child.kill();
        child.wait().unwrap()
    });
    let mut started = false;
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
}

#[test]
fn a_kill_at_any_moment_loses_no_acknowledged_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("member");
    let mut known = Known::default();
    for round in 1..=ROUNDS {
        let kill_after = Duration::from_millis(60 + round * 37 % 200);
        run_child(&dir, round, kill_after, &mut known);
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
        assert!(checked > 0, "round {round}: no entry acknowledged");
        eprintln!(
            "round {round}: killed after {kill_after:?}; {checked} entries checked, log {:?}, {} segments",
            wal.bounds(),
            wal.segment_paths().len()
        );
    }
}
