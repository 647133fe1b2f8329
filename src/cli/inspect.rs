//! `weir inspect --data DIR`: store health.

use std::path::Path;

use weir_actors::store::{open_for_inspection, StoreError};

use super::failure::Failure;

/// Opens the store for reading, or says why not.
pub fn open(
    data: &Path,
) -> Result<(weir_actors::store::Store, weir_actors::store::Recovered), Failure> {
    // A directory with neither the lock file nor the store's files is not
    // a data directory; one that lost only its lock file still holds a
    // store, which is read (and refused by the store if damaged).
    if !data.join("weir.lock").exists() && !data.join("sled").exists() {
        return Err(Failure::input(format!(
            "{} is not a weir data directory (no weir.lock, no sled/)",
            data.display()
        )));
    }
    open_for_inspection(data).map_err(|e| match e {
        StoreError::InUse(dir) => Failure::store(format!(
            "data directory {} is in use by a running engine; status and inspect read the store only while no engine has it open",
            dir.display()
        )),
        other => Failure::store(other.to_string()),
    })
}

/// Runs the command.
pub fn run(data: &Path) -> Result<u8, Failure> {
    let (store, recovered) = open(data)?;
    let i = store.inspect().map_err(|e| Failure::store(e.to_string()))?;
    println!("data directory   {}", i.dir.display());
    println!("journal entries  {}", i.journal_entries);
    println!("last sequence    {}", i.last_seq);
    println!(
        "snapshot seq     {} ({} tickets)",
        i.snapshot_seq, i.snapshot_tickets
    );
    println!(
        "live tickets     {} ({} running at last stop)",
        recovered.state.len(),
        recovered.state.running_len()
    );
    println!(
        "replayed         {} entries, {} ops in {} ms",
        recovered.entries_replayed,
        recovered.ops_replayed,
        recovered.elapsed.as_millis()
    );
    println!("records          {}", i.records);
    println!("expiry entries   {}", i.expiry_entries);
    println!("size on disk     {} bytes", i.size_on_disk_bytes);
    println!(
        "blobs            {} files, {} bytes (outputs over {} bytes, kept apart from sled)",
        i.blob_files,
        i.blob_bytes,
        weir_actors::store::BLOB_INLINE_BYTES_MAX
    );
    Ok(0)
}
