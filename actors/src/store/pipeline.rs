//! Group commit of a replicated store's writes: writers append their sets
//! to a pending list (deciding a compare-and-put here, against what is
//! pending and what is applied), a flusher thread submits everything
//! pending as one Raft entry, up to [`IN_FLIGHT_MAX`] entries in flight
//! (the leader's append and fsync of one overlap the followers' of the one
//! before), a completer thread takes their outcomes in log order, and a
//! writer that must be durable waits for the flush that carries its set.
//! As in single-node mode, where many unsynced writes share one fsync: a
//! scheduler that starts forty runs and then syncs pays one majority round
//! trip, not forty.
//!
//! The order of the log is the order of the pending list, and this member
//! is the group's only writer while it leads, so a guard decided here
//! holds when the entry is applied (every member checks it again; one that
//! fails there means a second writer, and the store fail-stops). Records
//! written but not yet applied are read from the overlay, so a writer reads
//! its own unsynced write, as it would from sled in single-node mode.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::panics;
use super::write_set::{Replicator, Submitted, TreeId, WriteSet};

/// Entries submitted and not yet committed, at most: enough to keep the
/// leader's fsync and the followers' busy at once; more only queue in
/// openraft's core.
pub(crate) const IN_FLIGHT_MAX: usize = 4;

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
    /// Entries submitted, oldest first, for the completer.
    in_flight: VecDeque<InFlight>,
    /// Whether the completer holds one more, taken from `in_flight` and
    /// waited for: in flight too, so the bound counts it.
    completing: bool,
}

impl State {
    /// Entries submitted and not yet committed.
    fn in_flight_count(&self) -> usize {
        self.in_flight.len() + usize::from(self.completing)
    }
}

/// An entry submitted: its sets' sequences `first..=upto`, the epoch it
/// was submitted in, and its handle (or why it could not be submitted).
struct InFlight {
    first: u64,
    upto: u64,
    epoch: u64,
    submitted: Result<Box<dyn Submitted>, String>,
}

/// Runs `f`, turning a panic into an error: a panicking replicator must
/// not leave every writer waiting on a flusher that is gone.
fn unwound<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let message = panics::message(panic.as_ref()).unwrap_or_default();
        Err(format!("the replicator panicked: {message}"))
    })
}

impl Pipeline {
    /// Starts the flusher and the completer over `replicator`.
    pub(crate) fn start(replicator: Arc<dyn Replicator>) -> Arc<Pipeline> {
        let pipeline = Arc::new(Pipeline {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let (p, q) = (pipeline.clone(), pipeline.clone());
        let spawned = std::thread::Builder::new()
            .name("weir-replicate".into())
            .spawn(move || p.submit_loop(replicator.as_ref()))
            .and_then(|_| {
                std::thread::Builder::new()
                    .name("weir-committed".into())
                    .spawn(move || q.complete_loop())
            });
        if let Err(e) = spawned {
            let mut st = pipeline.lock();
            st.failed = Some((1, format!("cannot start the flusher threads: {e}")));
            st.stopped = true;
            pipeline.cv.notify_all();
        }
        pipeline
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Submits what is pending, one entry at a time, while fewer than
    /// [`IN_FLIGHT_MAX`] are in flight.
    fn submit_loop(&self, replicator: &dyn Replicator) {
        loop {
            let (sets, first, upto, epoch) = {
                let mut st = self.lock();
                while !st.stopped
                    && (st.pending.is_empty() || st.in_flight_count() >= IN_FLIGHT_MAX)
                {
                    st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                }
                if st.stopped {
                    return;
                }
                // Every set appended is pending, submitted, or dropped by a
                // failure or a reset: the pending ones come next.
                let first = st.appended - st.pending.len() as u64 + 1;
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
                (sets, first, first + n as u64 - 1, st.epoch)
            };
            let submitted = unwound(|| replicator.submit(sets));
            let mut st = self.lock();
            st.in_flight.push_back(InFlight {
                first,
                upto,
                epoch,
                submitted,
            });
            self.cv.notify_all();
        }
    }

    /// Takes the outcomes of the entries in flight, in log order.
    fn complete_loop(&self) {
        loop {
            let next = {
                let mut st = self.lock();
                loop {
                    if st.stopped {
                        return;
                    }
                    if let Some(next) = st.in_flight.pop_front() {
                        st.completing = true;
                        break next;
                    }
                    st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
                }
            };
            let result = next.submitted.and_then(|s| unwound(|| s.wait()));
            let mut st = self.lock();
            st.completing = false;
            if st.epoch != next.epoch {
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
            st.flushed = st.flushed.max(next.upto);
            if let Some(why) = failure {
                if st.failed.is_none() {
                    st.failed = Some((next.first, why));
                }
                // What is pending will not be proposed: it may depend on
                // what failed. Entries already in flight behind it may or
                // may not take effect, as it may: the store fail-stops.
                st.pending.clear();
                st.flushed = st.appended;
                st.overlay.clear();
            } else if st.failed.is_none() {
                let upto = next.upto;
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

    /// Stops the flusher and the completer.
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.cv.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use super::*;

    /// A log whose entries commit when the test releases them.
    #[derive(Default)]
    struct Fake {
        /// Sets per entry submitted, in order.
        log: Mutex<Vec<usize>>,
        /// Entries released (committed) so far.
        released: Mutex<usize>,
        cv: Condvar,
        in_flight: AtomicUsize,
        in_flight_most: AtomicUsize,
        fail_entry: Option<usize>,
    }

    struct Ticket {
        fake: Arc<Fake>,
        entry: usize,
        sets: usize,
    }

    impl Submitted for Ticket {
        fn wait(self: Box<Self>) -> Result<Vec<bool>, String> {
            let mut released = self.fake.released.lock().unwrap();
            while *released <= self.entry {
                released = self.fake.cv.wait(released).unwrap();
            }
            self.fake.in_flight.fetch_sub(1, Ordering::SeqCst);
            if self.fake.fail_entry == Some(self.entry) {
                return Err("lost the lead".into());
            }
            Ok(vec![true; self.sets])
        }
    }

    struct Shared(Arc<Fake>);

    impl Replicator for Shared {
        fn propose(&self, sets: Vec<WriteSet>) -> Result<Vec<bool>, String> {
            self.submit(sets)?.wait()
        }

        fn submit(&self, sets: Vec<WriteSet>) -> Result<Box<dyn Submitted>, String> {
            let mut log = self.0.log.lock().unwrap();
            log.push(sets.len());
            let now = self.0.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.0.in_flight_most.fetch_max(now, Ordering::SeqCst);
            Ok(Box::new(Ticket {
                fake: self.0.clone(),
                entry: log.len() - 1,
                sets: sets.len(),
            }))
        }
    }

    fn release(fake: &Fake, entries: usize) {
        *fake.released.lock().unwrap() = entries;
        fake.cv.notify_all();
    }

    fn until(what: &str, f: impl Fn() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn append(p: &Pipeline) -> Result<u64, String> {
        Ok(p.append(WriteSet::default(), |_| Ok(None))?
            .expect("no guard"))
    }

    #[test]
    fn entries_are_submitted_before_the_ones_ahead_commit_and_complete_in_order() {
        let fake = Arc::new(Fake::default());
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        let mut seqs = Vec::new();
        for n in 1..=3 {
            seqs.push(append(&p).unwrap());
            until("submitted", || fake.log.lock().unwrap().len() == n);
        }
        assert_eq!(seqs, vec![1, 2, 3]);
        // Three entries in flight at once, none committed.
        assert_eq!(fake.in_flight.load(Ordering::SeqCst), 3);
        assert_eq!(p.lock().flushed, 0);
        release(&fake, 1);
        p.wait(1).unwrap();
        assert_eq!(p.lock().flushed, 1, "the second is not committed yet");
        release(&fake, 3);
        p.wait_all().unwrap();
        // No more than the bound in flight, however many are appended.
        for _ in 0..50 {
            append(&p).unwrap();
        }
        release(&fake, usize::MAX);
        p.wait_all().unwrap();
        assert!(fake.in_flight_most.load(Ordering::SeqCst) <= IN_FLIGHT_MAX);
        let sets: usize = fake.log.lock().unwrap().iter().sum();
        assert_eq!(sets, 53, "every set proposed once");
        p.stop();
    }

    #[test]
    fn the_entry_the_completer_waits_for_counts_against_the_bound() {
        let fake = Arc::new(Fake::default());
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        // One set per entry, nothing committed: the completer holds the
        // first and waits, the rest queue behind it.
        for n in 1..=IN_FLIGHT_MAX {
            append(&p).unwrap();
            until("submitted", || fake.log.lock().unwrap().len() == n);
        }
        append(&p).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            fake.log.lock().unwrap().len(),
            IN_FLIGHT_MAX,
            "no entry past the bound before one commits"
        );
        release(&fake, 1);
        until("the next submitted once one committed", || {
            fake.log.lock().unwrap().len() == IN_FLIGHT_MAX + 1
        });
        release(&fake, usize::MAX);
        p.wait_all().unwrap();
        p.stop();
    }

    #[test]
    fn a_failed_entry_fails_its_sets_and_every_later_one_until_a_reset() {
        let fake = Arc::new(Fake {
            fail_entry: Some(1),
            ..Fake::default()
        });
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        for n in 1..=3 {
            append(&p).unwrap();
            until("submitted", || fake.log.lock().unwrap().len() == n);
        }
        release(&fake, 3);
        p.wait(1).unwrap();
        assert_eq!(p.wait(2).unwrap_err(), "lost the lead");
        assert!(p.wait(3).is_err(), "in flight behind the failure");
        assert!(append(&p).is_err(), "the store fail-stops");
        p.reset();
        let seq = append(&p).unwrap();
        assert_eq!(seq, 4);
        release(&fake, usize::MAX);
        p.wait(seq).unwrap();
        p.stop();
    }
}
