//! A backup stream, in process: what it holds restores whole, and no
//! damage of it passes. Every single byte of a small backup is flipped in
//! turn, and every cut of it is tried: each is refused as damaged, with
//! the offset named, and a restore of it leaves nothing behind. (The CLI's
//! tests, in `tests/backup.rs`, cover the same through `weir` processes at
//! a few positions; this one covers every position of one stream.)

use std::path::Path;

use weir_actors::store::backup::{self, BackupError};
use weir_actors::store::{Commit, Durability, Store, StoreSettings};
use weir_core::queue::{Job, Op};

fn settings() -> StoreSettings {
    StoreSettings {
        durability: Durability::Flush,
        ..StoreSettings::default()
    }
}

/// A store with a few commits and one blob, and its backup.
fn backed_up(dir: &Path) -> (Vec<u8>, u64) {
    let (store, _) = Store::open(dir, settings()).expect("store opens");
    for i in 0..3 {
        let commit = Commit {
            ops: vec![Op::Enqueue(Job::new(format!("k{i}"), "noop", "p"))],
            ..Commit::default()
        };
        store.commit(&commit).expect("commit");
    }
    store.write_blob(b"a blob's bytes").expect("blob");
    let mut out = Vec::new();
    let summary = store.backup_to(&mut out, 1).expect("backup");
    assert_eq!(summary.blobs, 1);
    assert_eq!(summary.bytes, out.len() as u64);
    (out, store.last_seq())
}

fn assert_damaged(result: Result<backup::BackupSummary, BackupError>, what: &str) {
    match result {
        Err(BackupError::Damaged { what: why, .. }) => {
            assert!(why.contains("(at byte "), "{what}: {why}")
        }
        Err(e) => panic!("{what}: not reported as damage: {e}"),
        Ok(s) => panic!("{what}: accepted: {s:?}"),
    }
}

#[test]
fn a_backup_restores_its_journal_and_blobs() {
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, last_seq) = backed_up(&tmp.path().join("a"));
    let summary = backup::verify(&bytes[..], "b.wbk").expect("verifies");
    assert_eq!(summary.header.journal_seq, last_seq);
    let target = tmp.path().join("restored");
    backup::restore(&bytes[..], "b.wbk", &target, settings()).expect("restores");
    let (store, _) = Store::open(&target, settings()).expect("restored store opens");
    assert_eq!(store.last_seq(), last_seq);
    let blob = weir_actors::store::BlobRef::of(b"a blob's bytes");
    assert_eq!(store.read_blob(&blob).expect("blob"), b"a blob's bytes");
}

#[test]
fn every_flipped_byte_and_every_cut_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (bytes, _) = backed_up(&tmp.path().join("a"));
    assert!(bytes.len() > 200, "{} bytes", bytes.len());
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80] {
            let mut flipped = bytes.clone();
            flipped[at] ^= mask;
            assert_damaged(
                backup::verify(&flipped[..], "f.wbk"),
                &format!("byte {at} ^ {mask:#x}"),
            );
        }
    }
    for cut in 0..bytes.len() {
        assert_damaged(
            backup::verify(&bytes[..cut], "c.wbk"),
            &format!("cut at {cut}"),
        );
    }
    // A restore refuses what verify refuses, and makes nothing: one flip
    // in every frame kind's reach (head, entries, blob, trailer).
    for at in [0, 9, bytes.len() / 3, bytes.len() / 2, bytes.len() - 3] {
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x01;
        let target = tmp.path().join(format!("r-{at}"));
        assert_damaged(
            backup::restore(&flipped[..], "f.wbk", &target, settings()),
            &format!("restore, byte {at}"),
        );
        assert!(!target.exists(), "byte {at}: nothing is made");
    }
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("restoring"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
