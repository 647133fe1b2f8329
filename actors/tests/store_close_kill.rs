//! Kill test of the clean close: a child process writes more than a MiB of
//! log (so its close opens sled once more to write its page table, then
//! digests the files), says which writes were acknowledged, and closes the
//! store; the parent kills it with SIGKILL at moments spread over that
//! close. After each kill, a copy of the store, opened as the kill left
//! it, must hold every acknowledged write. A first child, not killed,
//! times a whole close and shows that it wrote sled's page table.
//!
//! The child is this test binary run again (`close_child`, a no-op unless
//! `store_support::spawn_child` started it).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::{Duration, Instant};

use weir_actors::store::{Durability, Store, StoreSettings};
use weir_core::codec;

mod store_support;
use store_support::{copy_dir, page_table_lsn};

/// Values each child writes, of [`VALUE_BYTES`]: 1.2 MB, over the MiB of
/// log after which a close writes sled's page table.
const VALUES: usize = 300;
const VALUE_BYTES: usize = 4_000;
const ROUNDS: u64 = 16;

fn settings() -> StoreSettings {
    StoreSettings {
        // A kill loses nothing flushed: the kernel has it.
        durability: Durability::Flush,
        ..StoreSettings::default()
    }
}

fn key(round: u64, i: usize) -> String {
    format!("r{round:02}/{i:04}")
}

#[test]
fn close_child() {
    let Some((dir, round)) = store_support::child_of() else {
        return;
    };
    let (store, _) = Store::open(&dir, settings()).expect("the store opens");
    for chunk in 0..VALUES / 10 {
        let puts: Vec<(String, Vec<u8>)> = (chunk * 10..chunk * 10 + 10)
            .map(|i| {
                (
                    key(round, i),
                    codec::encode(&vec![round as u8; VALUE_BYTES]).unwrap(),
                )
            })
            .collect();
        store.put_batch(&puts, &[]).unwrap();
        store.sync().unwrap();
    }
    println!("CLOSING");
    drop(store);
    println!("CLOSED");
}

/// Runs the child of `round` on `dir` and kills it `kill_after` after it
/// starts its close (none: lets it finish); how long its close took, if it
/// finished it.
fn run_child(dir: &Path, round: u64, kill_after: Option<Duration>) -> Option<Duration> {
    let mut child =
        store_support::spawn_child("close_child", dir, round, &dir.with_extension("stderr"));
    // libtest's "test close_child ... " may lead a line.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let closing = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.ends_with("CLOSING"));
    assert!(closing, "round {round}: the child died before its close");
    let started = Instant::now();
    let reader = std::thread::spawn(move || {
        // Read to the end: a pipe closed early fails the child's libtest.
        let mut closed = None;
        for line in lines.map_while(Result::ok) {
            if line.ends_with("CLOSED") && closed.is_none() {
                closed = Some(started.elapsed());
            }
        }
        closed
    });
    match kill_after {
        Some(after) => {
            std::thread::sleep(after.saturating_sub(started.elapsed()));
            let _ = child.kill();
        }
        None => {
            let status = child.wait().unwrap();
            assert!(
                status.success(),
                "round {round}: the child failed ({status}): {}",
                std::fs::read_to_string(dir.with_extension("stderr")).unwrap_or_default()
            );
        }
    }
    child.wait().unwrap();
    reader.join().unwrap()
}

#[test]
fn a_kill_during_a_clean_close_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    // How long a whole close takes here: the kills spread over it.
    let calibration = tmp.path().join("calibration");
    let close = run_child(&calibration, 0, None).expect("an unkilled child closes");
    assert!(
        page_table_lsn(&calibration).is_some() && calibration.join("store.files").exists(),
        "a whole close writes sled's page table and the digest"
    );
    let (mut cut, mut digested) = (0, 0);
    for round in 1..=ROUNDS {
        // Each child writes a new store of its own; the open after a cut
        // close is the check's.
        let dir = tmp.path().join(format!("store-{round}"));
        let kill_after = close.mul_f64(round as f64 / ROUNDS as f64);
        if run_child(&dir, round, Some(kill_after)).is_none() {
            cut += 1;
        }
        digested += u32::from(dir.join("store.files").exists());
        let check = tmp.path().join(format!("check-{round}"));
        copy_dir(&dir, &check);
        let (store, _) = Store::open(&check, settings())
            .unwrap_or_else(|e| panic!("round {round}: the store does not open: {e}"));
        for i in 0..VALUES {
            let value: Option<Vec<u8>> = store.get(&key(round, i)).unwrap();
            assert_eq!(
                value.as_deref(),
                Some(&vec![round as u8; VALUE_BYTES][..]),
                "round {round}: {} was acknowledged",
                key(round, i)
            );
        }
    }
    eprintln!(
        "a close took {close:?}; {cut} of {ROUNDS} kills cut one, {digested} after its digest"
    );
    assert!(cut > 0, "no kill landed inside a close");
}
