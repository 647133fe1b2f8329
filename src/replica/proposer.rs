//! The store's writes, proposed to the group: a write returns once its set
//! is committed (on a majority's disks) and applied on this member.

use std::time::{Duration, Instant};

use weir_actors::store::{Replicator, Submitted, WriteSet};

use super::types::{Raft, TypeConfig};

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

/// Runs `fut` to its end on `handle` from the store's thread: a blocking
/// thread (spawn_blocking), the pipeline's own, or, rarely, a runtime
/// worker, which block_in_place lets wait without starving the runtime the
/// Raft node runs on.
fn block_on<F: std::future::Future>(handle: &tokio::runtime::Handle, fut: F) -> F::Output {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => tokio::task::block_in_place(|| handle.block_on(fut)),
        Err(_) => handle.block_on(fut),
    }
}

/// An entry handed to the Raft node, waiting for its commit.
struct Pending {
    rx: ResponderReceiver,
    handle: tokio::runtime::Handle,
    /// When the entry was submitted, and how long its commit may take.
    started: Instant,
    timeout: Duration,
    count: usize,
    bytes: usize,
}

/// What `client_write_ff` hands back: the entry's answer, once applied.
type ResponderReceiver = <super::runtime::RpcRuntime as openraft::AsyncRuntime>::OneshotReceiver<
    openraft::raft::ClientWriteResult<TypeConfig>,
>;

impl Submitted for Pending {
    fn wait(self: Box<Self>) -> Result<Vec<bool>, String> {
        let Pending {
            rx,
            handle,
            started,
            timeout,
            count,
            bytes,
        } = *self;
        let left = timeout.saturating_sub(started.elapsed());
        // Made inside the runtime: the timeout needs its timer.
        let answer = async { tokio::time::timeout(left, rx).await };
        let result = block_on(&handle, answer);
        // Timed by the store's pipeline (`weir_raft_commit_seconds`): the
        // member's apply answers the writers before this answer comes.
        let elapsed = started.elapsed();
        match result {
            Err(_) => Err(format!(
                "not committed within {} ms (no majority reached)",
                timeout.as_millis()
            )),
            Ok(Err(_)) => Err("the Raft node stopped before the entry committed".into()),
            Ok(Ok(Err(e))) => Err(e.to_string()),
            Ok(Ok(Ok(resp))) => {
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

impl Replicator for Proposer {
    fn propose(&self, sets: Vec<WriteSet>) -> Result<Vec<bool>, String> {
        self.submit(sets)?.wait()
    }

    fn submit(&self, sets: Vec<WriteSet>) -> Result<Box<dyn Submitted>, String> {
        let started = Instant::now();
        let bytes: usize = sets.iter().map(WriteSet::bytes).sum();
        let count = sets.len();
        // Handed to the core's queue in call order: entries are logged in
        // the order they are submitted.
        let rx =
            block_on(&self.handle, self.raft.client_write_ff(sets)).map_err(|e| e.to_string())?;
        Ok(Box::new(Pending {
            rx,
            handle: self.handle.clone(),
            started,
            timeout: self.timeout,
            count,
            bytes,
        }))
    }
}
