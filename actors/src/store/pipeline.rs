//! Group commit of a replicated store's writes: writers append their sets
//! to a pending list (deciding a compare-and-put here, against what is
//! pending and what is applied), one flusher thread proposes everything
//! pending as one Raft entry at a time, and a writer that must be durable
//! waits for the flush that carries its set. As in single-node mode, where
//! many unsynced writes share one fsync: a scheduler that starts forty runs
//! and then syncs pays one majority round trip, not forty.
//!
//! The order of the log is the order of the pending list, and this member
//! is the group's only writer while it leads, so a guard decided here
//! holds when the entry is applied (every member checks it again; one that
//! fails there means a second writer, and the store fail-stops). Records
//! written but not yet applied are read from the overlay, so a writer reads
//! its own unsynced write, as it would from sled in single-node mode.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::panics;
use super::write_set::{Replicator, TreeId, WriteSet};

/// Sets one flush proposes at most (one Raft entry).
const FLUSH_SETS_MAX: usize = 4_096;
/// Bytes one flush proposes at most, unless one set is larger: an entry
/// travels to a follower in appends of up to 64 entries, under the Raft
/// listener's 256 MiB body limit.
const FLUSH_BYTES_MAX: usize = 1 << 20;

/// The pending writes and their flusher.
pub(crate) struct Pipeline {
    state: Mutex<State>,
    /// Wakes the flusher (a set appended) and the waiters (a flush ended).
    cv: Condvar,
}

#[derive(Default)]
struct State {
    /// Sets appended and not yet taken by a flush, in order.
    pending: Vec<WriteSet>,
    /// Sequence of the last set appended (the first is 1).
    appended: u64,
    /// Every set up to this sequence was flushed (or failed, see below).
    flushed: u64,
    /// The first sequence that failed, and why: it and every later set
    /// may or may not take effect; the store fail-stops.
    failed: Option<(u64, String)>,
    /// Records written by sets not yet applied: key → (sequence, value).
    overlay: HashMap<Vec<u8>, (u64, Option<Vec<u8>>)>,
    stopped: bool,
    /// Bumped by a reset: a flush of before it reports nothing.
    epoch: u64,
}

impl Pipeline {
    /// Starts the flusher over `replicator`.
    pub(crate) fn start(replicator: Arc<dyn Replicator>) -> Arc<Pipeline> {
        let pipeline = Arc::new(Pipeline {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let p = pipeline.clone();
        let spawned = std::thread::Builder::new()
            .name("weir-replicate".into())
            .spawn(move || p.run(replicator.as_ref()));
        if let Err(e) = spawned {
            pipeline.lock().failed = Some((1, format!("cannot start the flusher thread: {e}")));
        }
        pipeline
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run(&self, replicator: &dyn Replicator) {
        loop {
            let (sets, upto, epoch) = {
                let mut st = self.lock();
                while st.pending.is_empty() && !st.stopped {
                    st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                if st.stopped {
                    return;
                }
                let mut n = 0;
                let mut bytes = 0;
                while n < st.pending.len()
                    && n < FLUSH_SETS_MAX
                    && (n == 0 || bytes + st.pending[n].bytes() <= FLUSH_BYTES_MAX)
                {
                    bytes += st.pending[n].bytes();
                    n += 1;
                }
                let sets: Vec<WriteSet> = st.pending.drain(..n).collect();
                // Sets are flushed in order, so these are the next `n`.
                (sets, st.flushed + n as u64, st.epoch)
            };
            let first = upto + 1 - sets.len() as u64;
            // A panicking replicator must not leave every writer waiting
            // on a flusher that is gone.
            let result =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| replicator.propose(sets)))
                    .unwrap_or_else(|panic| {
                        let message = panics::message(panic.as_ref()).unwrap_or_default();
                        Err(format!("the replicator panicked: {message}"))
                    });
            let mut st = self.lock();
            if st.epoch != epoch {
                // Reset while it flushed: what it carried is the old
                // engine's, and the store was reread since.
                self.cv.notify_all();
                continue;
            }
            let failure = match result {
                Ok(held) if held.iter().all(|h| *h) => None,
                Ok(_) => Some(
                    "a compare-and-put decided here did not hold when applied: another writer?"
                        .to_string(),
                ),
                Err(e) => Some(e),
            };
            st.flushed = upto;
            if let Some(why) = failure {
                if st.failed.is_none() {
                    st.failed = Some((first, why));
                }
                // What is pending will not be proposed: it may depend on
                // what failed.
                st.pending.clear();
                st.flushed = st.appended;
                st.overlay.clear();
            } else {
                st.overlay.retain(|_, (seq, _)| *seq > upto);
            }
            self.cv.notify_all();
        }
    }

    /// Appends `set`. With a guard, decides it first against the pending
    /// value of its record, else `applied(key)`: `Ok(None)` when it does
    /// not hold (nothing appended). `Ok(Some(seq))` otherwise: the set is
    /// durable once [`Pipeline::wait`] for `seq` returns.
    pub(crate) fn append(
        &self,
        set: WriteSet,
        applied: impl FnOnce(&str) -> Result<Option<Vec<u8>>, String>,
    ) -> Result<Option<u64>, String> {
        let mut st = self.lock();
        if let Some((_, why)) = &st.failed {
            return Err(why.clone());
        }
        if let Some(g) = &set.guard {
            let current = match st.overlay.get(g.key.as_bytes()) {
                Some((_, v)) => v.clone(),
                None => applied(&g.key)?,
            };
            if current.as_deref() != g.expected.as_ref().map(|v| v.as_slice()) {
                return Ok(None);
            }
        }
        st.appended += 1;
        let seq = st.appended;
        for w in &set.writes {
            if w.tree == TreeId::Records {
                st.overlay
                    .insert(w.key.to_vec(), (seq, w.value.as_ref().map(|v| v.to_vec())));
            }
        }
        st.pending.push(set);
        self.cv.notify_all();
        Ok(Some(seq))
    }

    /// Waits until set `seq` is committed and applied; an error when it
    /// (or a set before it) failed.
    pub(crate) fn wait(&self, seq: u64) -> Result<(), String> {
        let mut st = self.lock();
        loop {
            if let Some((from, why)) = &st.failed {
                if seq >= *from {
                    return Err(why.clone());
                }
            }
            if st.flushed >= seq {
                return Ok(());
            }
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits until every set appended so far is committed and applied.
    pub(crate) fn wait_all(&self) -> Result<(), String> {
        let seq = self.lock().appended;
        self.wait(seq)
    }

    /// The value of a record written but not yet applied: `Some(None)` for
    /// a pending removal, `None` when nothing is pending for it.
    pub(crate) fn pending_record(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        self.lock().overlay.get(key).map(|(_, v)| v.clone())
    }

    /// Forgets a failure (the member leads again; its engine recovers from
    /// what the store holds, which is what committed).
    pub(crate) fn reset(&self) {
        let mut st = self.lock();
        st.failed = None;
        st.pending.clear();
        st.overlay.clear();
        st.flushed = st.appended;
        st.epoch += 1;
        self.cv.notify_all();
    }

    /// Stops the flusher.
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.cv.notify_all();
    }
}
