//! The fuzz corpora (`fuzz/corpus/<target>/`: hand-written seeds, and
//! the inputs fuzz runs add), replayed through the same entry points the fuzz targets call
//! (`weir::fuzzing`): no input may panic there, nor get a 5xx from the API.
//! Every input libFuzzer found interesting stays a regression test in each
//! `cargo test`, without libFuzzer or nightly. A file that fails is named
//! with its panic. How to fuzz: fuzz/README.md.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The corpus files of `target`, sorted.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join("corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "corpus {} is empty: nothing is replayed",
        dir.display()
    );
    files
}

/// Feeds every corpus file of `target` to `entry`; fails naming each file
/// that panicked.
fn replay(target: &str, entry: impl Fn(&[u8])) {
    let mut failed = Vec::new();
    let files = corpus(target);
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| entry(&data))) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", file.display()));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} {target} inputs failed:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn the_definition_corpus_never_panics() {
    replay("definition", weir::fuzzing::definition);
}

#[test]
fn the_envelope_corpus_never_panics() {
    replay("envelope", weir::fuzzing::envelope);
}

#[test]
fn the_api_corpus_never_panics_nor_gets_a_5xx() {
    let statuses = std::sync::Mutex::new(std::collections::BTreeMap::<u16, usize>::new());
    replay("api", |data| {
        if let Some(status) = weir::fuzzing::api(data) {
            *statuses.lock().unwrap().entry(status).or_default() += 1;
        }
    });
    // The harness reaches the engine: some inputs are accepted, not all
    // refused at the token check or the router.
    let statuses = statuses.into_inner().unwrap();
    assert!(
        statuses.keys().any(|s| (200..300).contains(s)),
        "no corpus input was accepted: {statuses:?}"
    );
    assert!(
        statuses.keys().any(|s| (400..500).contains(s)),
        "no corpus input was refused: {statuses:?}"
    );
    eprintln!("api corpus answers by status: {statuses:?}");
}
