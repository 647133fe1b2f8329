//! Blobs at the store's edge: a record's blob is removed with the last
//! record naming it, never while another record or a writer's pin holds
//! it; the sweep at open removes what a crash left unreferenced (and
//! temporary files) and keeps the rest; reads check the hash; the disk
//! reserve covers blob writes.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use weir_actors::store::{
    BlobRef, DiskSpace, Durability, FreeSpaceProbe, Store, StoreError, StoreSettings, BLOBS_DIR,
};

fn open(dir: &Path) -> Store {
    let settings = StoreSettings {
        durability: Durability::Flush,
        reserve_file_bytes: 0,
        ..StoreSettings::default()
    };
    Store::open(dir, settings).unwrap().0
}

/// Writes record `key` naming `blob`, with its index records.
fn put_record(store: &Store, key: &str, blob: &BlobRef) {
    let mut puts = vec![(key.to_string(), store.encode("test record", &1u64).unwrap())];
    puts.extend(store.blob_index_puts(key, blob).unwrap());
    store.put_batch(&puts, &[]).unwrap();
}

fn bytes(seed: u8) -> Vec<u8> {
    (0..10_000u32)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect()
}

#[test]
fn a_blob_goes_with_the_last_record_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let shared = store.write_blob(&bytes(3)).unwrap();
    let again = store.write_blob(&bytes(3)).unwrap();
    assert_eq!(shared, again, "the same content is one blob");
    put_record(&store, "done/a", &shared);
    put_record(&store, "done/b", &shared);
    store.unpin_blob(&shared);
    store.unpin_blob(&again);
    let path = store.blob_path(&shared);
    assert!(path.is_file());

    store.put_batch(&[], &["done/a".to_string()]).unwrap();
    assert!(path.is_file(), "done/b still names it");
    assert_eq!(store.read_blob(&shared).unwrap(), bytes(3));
    store.put_batch(&[], &["done/b".to_string()]).unwrap();
    assert!(!path.exists(), "no record names it any more");
    let left = store.scan_keys("blob").unwrap();
    assert!(left.is_empty(), "index records left: {left:?}");
}

#[test]
fn a_pinned_blob_outlives_the_deletion_of_its_references() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let first = store.write_blob(&bytes(5)).unwrap();
    put_record(&store, "done/a", &first);
    store.unpin_blob(&first);
    // A second writer of the same content, whose record is not yet
    // written: its pin keeps the file.
    let second = store.write_blob(&bytes(5)).unwrap();
    store.delete_prefix("done/").unwrap();
    assert_eq!(store.read_blob(&second).unwrap(), bytes(5));
    put_record(&store, "done/b", &second);
    store.unpin_blob(&second);
    store.delete_prefix("done/").unwrap();
    assert!(!store.blob_path(&second).exists());
}

#[test]
fn the_sweep_removes_unreferenced_blobs_and_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let (kept, orphan, tmp) = {
        let store = open(dir.path());
        let kept = store.write_blob(&bytes(7)).unwrap();
        put_record(&store, "done/kept", &kept);
        // Written, never named: a crash before its record.
        let orphan = store.write_blob(&bytes(9)).unwrap();
        let tmp = store
            .blob_path(&kept)
            .with_file_name(".tmp-left-by-a-crash");
        std::fs::write(&tmp, b"half").unwrap();
        (kept, orphan, tmp)
    };
    let store = open(dir.path());
    let (n_kept, removed) = store.sweep_blobs().unwrap();
    assert_eq!((n_kept, removed), (1, 2));
    assert!(store.blob_path(&kept).is_file());
    assert!(!store.blob_path(&orphan).exists());
    assert!(!tmp.exists());
    assert_eq!(store.read_blob(&kept).unwrap(), bytes(7));
}

#[test]
fn reads_check_the_hash_and_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let blob = store.write_blob(&bytes(11)).unwrap();
    let path = store.blob_path(&blob);
    let shown = path.display().to_string();
    let mut b = std::fs::read(&path).unwrap();
    b[100] ^= 1;
    std::fs::write(&path, &b).unwrap();
    let e = store.read_blob(&blob).unwrap_err();
    assert!(matches!(e, StoreError::Blob { .. }), "{e:?}");
    assert!(e.to_string().contains(&shown), "{e}");
    // A write of the same content repairs it.
    store.write_blob(&bytes(11)).unwrap();
    assert_eq!(store.read_blob(&blob).unwrap(), bytes(11));
    std::fs::remove_file(&path).unwrap();
    let e = store.read_blob(&blob).unwrap_err().to_string();
    assert!(e.contains(&shown) && e.contains("missing"), "{e}");
    let short = std::fs::write(&path, b"short");
    short.unwrap();
    let e = store.read_blob(&blob).unwrap_err().to_string();
    assert!(e.contains("5 bytes"), "{e}");
    // A reference that is no hash never becomes a path outside the folder.
    let bad = BlobRef {
        hash: "../../etc/passwd".into(),
        bytes: 1,
    };
    assert!(store
        .blob_path(&bad)
        .starts_with(dir.path().join(BLOBS_DIR)));
    assert!(store.read_blob(&bad).is_err());
}

#[test]
fn the_disk_reserve_covers_blob_writes() {
    let dir = tempfile::tempdir().unwrap();
    let free = Arc::new(AtomicU64::new(1 << 30));
    let f = free.clone();
    let settings = StoreSettings {
        durability: Durability::Flush,
        disk_reserve_min_bytes: 8 << 20,
        reserve_file_bytes: 0,
        free_space: FreeSpaceProbe::new(move |_: &Path| {
            Ok(DiskSpace {
                free_bytes: f.load(Ordering::SeqCst),
                total_bytes: 1 << 30,
            })
        }),
        ..StoreSettings::default()
    };
    let (store, _) = Store::open(dir.path(), settings).unwrap();
    store.write_blob(&bytes(13)).unwrap();
    // Room for the reserve, not for the reserve and the blob.
    free.store((8 << 20) + 5_000, Ordering::SeqCst);
    let e = store.write_blob(&bytes(17)).unwrap_err();
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e:?}");
    assert!(!store.blob_path(&BlobRef::of(&bytes(17))).exists());
    assert!(store.is_failed(), "a full disk stops the store");
}
