//! The limits: raw sled insert + flush + fsync at weir's batch size, and a
//! non-durable tokio channel.

use std::sync::Arc;
use std::time::Instant;

use crate::{result, Error};

/// Jobs per second at 3 durable ops per job (enqueue, select, complete),
/// `ops` ops per commit; and through an unbounded channel to 32 consumers.
pub async fn drain(dir: &std::path::Path, jobs: u64, ops: u64) -> Result<(), Error> {
    crate::fresh(dir)?;
    // sled's log write ends in an fdatasync (`sync_to_device`, weir's
    // vendor/sled), as in weir's fsync mode.
    let db = sled::Config::new()
        .path(dir.join("raw"))
        .sync_to_device(true)
        .open()?;
    let tree = db.open_tree("journal")?;
    let value = [7u8; 60];
    let commits = (jobs * 3 / ops.max(1)).max(1);
    let started = Instant::now();
    let mut seq = 0u64;
    for _ in 0..commits {
        let mut batch = sled::Batch::default();
        for _ in 0..ops {
            seq += 1;
            batch.insert(&seq.to_be_bytes(), &value[..]);
        }
        tree.apply_batch(batch)?;
        db.flush()?;
    }
    let raw = (commits * ops) as f64 / 3.0 / started.elapsed().as_secs_f64();

    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<u64>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let started = Instant::now();
    for k in 0..jobs {
        let _ = tx.send(k);
    }
    drop(tx);
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let rx = rx.clone();
        set.spawn(async move { while rx.lock().await.recv().await.is_some() {} });
    }
    while set.join_next().await.is_some() {}
    let chan = jobs as f64 / started.elapsed().as_secs_f64();
    println!("raw sled insert+flush+fsync, {ops} ops per commit: {raw:.0} jobs/s; tokio mpsc: {chan:.0} jobs/s");
    result(
        "drain",
        &[
            ("raw_sled_jobs_per_s", format!("{raw:.0}")),
            ("channel_jobs_per_s", format!("{chan:.0}")),
        ],
    );
    Ok(())
}
