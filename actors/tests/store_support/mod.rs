//! What the store's test binaries share: copies of a data directory, what
//! sled left in one, and the child processes of the kill tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A kill test's child reads its data directory from here...
const CHILD_DIR_ENV: &str = "WEIR_KILL_CHILD_DIR";
/// ...and its round from here.
const CHILD_ROUND_ENV: &str = "WEIR_KILL_CHILD_ROUND";

/// Starts this test binary again, running only its test `test` as the
/// child of `round` on `dir`: its stdout piped to the parent, its stderr
/// to the file `stderr`.
pub fn spawn_child(test: &str, dir: &Path, round: u64, stderr: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR_ENV, dir)
        .env(CHILD_ROUND_ENV, round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(stderr).unwrap()))
        .spawn()
        .expect("child spawns")
}

/// In a child [`spawn_child`] started: its data directory and round;
/// `None` in the test run itself (the child's test then does nothing).
pub fn child_of() -> Option<(PathBuf, u64)> {
    let dir = std::env::var_os(CHILD_DIR_ENV)?;
    let round = std::env::var(CHILD_ROUND_ENV).unwrap().parse().unwrap();
    Some((PathBuf::from(dir), round))
}

/// Copies the directory `from` into `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.metadata().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// The log position sled's newest page table in the data directory
/// `dir` covers (`sled/snap.<hex>`), if it wrote one.
pub fn page_table_lsn(dir: &Path) -> Option<u64> {
    std::fs::read_dir(dir.join("sled"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            u64::from_str_radix(name.strip_prefix("snap.")?, 16).ok()
        })
        .max()
}
