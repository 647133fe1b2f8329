//! What the store's test binaries share: copies of a data directory and
//! what sled left in one.

use std::path::Path;

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
