//! The store's writes, proposed to the group: a write returns once its set
//! is committed (on a majority's disks) and applied on this member.

use std::time::{Duration, Instant};

use weir_actors::store::{Replicator, WriteSet};

use super::types::Raft;

/// Proposes through this member's Raft node.
pub(super) struct Proposer {
    raft: Raft,
    handle: tokio::runtime::Handle,
    /// A set not committed within this is an error (the store fail-stops,
    /// and the engine with it): a leader cut from its majority.
    timeout: Duration,
}

impl Proposer {
    pub(super) fn new(raft: Raft, timeout: Duration) -> Proposer {
        Proposer {
            raft,
            handle: tokio::runtime::Handle::current(),
            timeout,
        }
    }
}

impl Replicator for Proposer {
    fn propose(&self, sets: Vec<WriteSet>) -> Result<Vec<bool>, String> {
        let started = Instant::now();
        let bytes: usize = sets.iter().map(WriteSet::bytes).sum();
        let count = sets.len();
        // Made inside the runtime: the timeout needs its timer.
        let write =
            async { tokio::time::timeout(self.timeout, self.raft.client_write(sets)).await };
        // The store's callers are blocking threads (spawn_blocking) or,
        // rarely, runtime workers: block_in_place lets the latter wait
        // without starving the runtime the Raft node runs on.
        let result = match tokio::runtime::Handle::try_current() {
            Ok(_) => tokio::task::block_in_place(|| self.handle.block_on(write)),
            Err(_) => self.handle.block_on(write),
        };
        let elapsed = started.elapsed();
        metrics::histogram!("weir_raft_commit_seconds").record(elapsed.as_secs_f64());
        match result {
            Err(_) => Err(format!(
                "not committed within {} ms (no majority reached)",
                self.timeout.as_millis()
            )),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(resp)) => {
                tracing::trace!(
                    index = resp.log_id.index,
                    sets = count,
                    bytes,
                    elapsed_us = elapsed.as_micros() as u64,
                    "replica: committed"
                );
                Ok(resp.data)
            }
        }
    }
}
