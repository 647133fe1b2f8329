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
use std::time::Instant;

use super::panics;
use super::write_set::{Proposal, Replicator, Submitted, TreeId, WriteSet};

/// Entries submitted and not yet committed, at most: enough to keep the
/// leader's fsync and the followers' busy at once; more only queue in
/// openraft's core.
pub(crate) const IN_FLIGHT_MAX: usize = 4;

/// The histogram of a proposal's time from its submission until its
/// writers are answered (its commit and its apply here), in seconds.
pub(crate) const COMMIT_METRIC: &str = "weir_raft_commit_seconds";

/// Sets one flush proposes at most (one Raft entry).
const FLUSH_SETS_MAX: usize = 4_096;
/// Bytes one flush proposes at most, unless one set is larger: an entry
/// travels to a follower in appends of up to 64 entries, under the Raft
/// listener's 256 MiB body limit.
const FLUSH_BYTES_MAX: usize = 1 << 20;

/// The pending writes and their flusher.
pub(crate) struct Pipeline {
    /// Drawn at random when it starts: names its entries' [`Proposal`]s.
    id: u64,
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
    /// When each entry not yet answered was submitted, by its last
    /// sequence, oldest first: [`COMMIT_METRIC`] times them.
    submitted_at: VecDeque<(u64, Instant)>,
}

impl State {
    /// Entries submitted and not yet committed.
    fn in_flight_count(&self) -> usize {
        self.in_flight.len() + usize::from(self.completing)
    }

    /// Every set up to `upto` is answered, committed and applied here: its
    /// records leave the overlay (sled has them), unless the store failed.
    fn settle(&mut self, upto: u64) {
        self.flushed = self.flushed.max(upto);
        let committed = self.failed.is_none();
        if committed {
            self.overlay.retain(|_, (seq, _)| *seq > upto);
        }
        self.answered(committed);
    }

    /// Times the entries answered since the last call, by whichever path
    /// answered them first (`committed`: their writers are told success).
    fn answered(&mut self, committed: bool) {
        while let Some(&(upto, at)) = self.submitted_at.front() {
            if upto > self.flushed {
                break;
            }
            self.submitted_at.pop_front();
            if committed {
                metrics::histogram!(COMMIT_METRIC).record(at.elapsed().as_secs_f64());
            }
        }
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
            id: rand::random(),
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
                let mut sets: Vec<WriteSet> = st.pending.drain(..n).collect();
                let upto = first + n as u64 - 1;
                if let Some(last) = sets.last_mut() {
                    last.proposal = Some(Proposal {
                        pipeline: self.id,
                        epoch: st.epoch,
                        first,
                        upto,
                    });
                }
                st.submitted_at.push_back((upto, Instant::now()));
                (sets, first, upto, st.epoch)
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
                // Answered here already: applied on this member, so
                // committed, whatever the core's answer says (a proposal's
                // deadline that ran out as the apply landed).
                Err(e) if next.upto <= st.flushed && st.failed.is_none() => {
                    tracing::warn!(upto = next.upto, error = %e, "store: a replicated entry applied here, then its proposal failed; it stands");
                    None
                }
                Err(e) => Some(e),
            };
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
                st.answered(false);
            } else {
                st.settle(next.upto);
            }
            self.cv.notify_all();
        }
    }

    /// This member applied an entry `proposal` names, and each of its
    /// sets' guards held or not (`held`): when the entry is this
    /// pipeline's, of its epoch, and every guard held, its sets are durable
    /// (committed, so on a majority's disks, and applied here), and their
    /// writers are answered now rather than when the Raft core's answer
    /// reaches the completer. A failed guard is left to the completer,
    /// which fail-stops the store with the core's answer in hand.
    pub(crate) fn applied_here(&self, proposal: &Proposal, held: &[bool]) {
        if proposal.pipeline != self.id || !held.iter().all(|h| *h) {
            return;
        }
        let mut st = self.lock();
        // An entry of before a reset: the store was reread since, and its
        // sequences may be answered already. And only the entry right after
        // what is answered: an entry before it that was not answered here
        // (a guard that failed) must fail its writers first, which the
        // completer does; until it has, the entries behind it wait for it.
        if st.epoch != proposal.epoch || proposal.first != st.flushed + 1 {
            return;
        }
        debug_assert!(
            proposal.upto <= st.appended,
            "applied past what was appended"
        );
        st.settle(proposal.upto);
        self.cv.notify_all();
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
        st.submitted_at.clear();
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
        /// Each entry's proposal (on its last set), in order.
        proposals: Mutex<Vec<Option<Proposal>>>,
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
            let proposal = sets.last().and_then(|s| s.proposal);
            self.0.proposals.lock().unwrap().push(proposal);
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

    /// Appends one set and waits until it is submitted, an entry of its
    /// own: its sequence.
    fn append_submitted(p: &Pipeline, fake: &Fake) -> u64 {
        let before = fake.log.lock().unwrap().len();
        let seq = append(p).unwrap();
        until("submitted", || fake.log.lock().unwrap().len() == before + 1);
        seq
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
        for _ in 1..=3 {
            seqs.push(append_submitted(&p, &fake));
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
        for _ in 1..=IN_FLIGHT_MAX {
            append_submitted(&p, &fake);
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

    /// Entry `n`'s proposal, as the member's apply of it reads it.
    fn proposal(fake: &Fake, n: usize) -> Proposal {
        fake.proposals.lock().unwrap()[n].expect("the pipeline names its entries")
    }

    #[test]
    fn an_entry_applied_here_answers_its_writers_before_the_cores_answer() {
        let fake = Arc::new(Fake::default());
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        for _ in 1..=2 {
            append_submitted(&p, &fake);
        }
        let (first, second) = (proposal(&fake, 0), proposal(&fake, 1));
        assert_eq!((first.first, first.upto, second.first), (1, 1, 2));
        // Another pipeline's entry (another member's, or this one's before
        // a restart) answers nothing; nor does this one's of an old epoch.
        p.applied_here(
            &Proposal {
                pipeline: first.pipeline.wrapping_add(1),
                ..first
            },
            &[true],
        );
        p.applied_here(
            &Proposal {
                epoch: first.epoch + 1,
                ..first
            },
            &[true],
        );
        assert_eq!(p.lock().flushed, 0);
        // Applied here: answered with no entry released by the core.
        p.applied_here(&first, &[true]);
        p.wait(1).unwrap();
        assert_eq!(p.lock().flushed, 1, "only what was applied");
        p.applied_here(&second, &[true]);
        p.wait(2).unwrap();
        // The core's answers come after and change nothing.
        release(&fake, usize::MAX);
        until("completed", || p.lock().in_flight_count() == 0);
        assert_eq!(p.lock().flushed, 2);
        assert!(p.lock().failed.is_none());
        p.stop();
    }

    #[test]
    fn an_entry_applied_here_stands_when_its_proposal_then_fails() {
        let fake = Arc::new(Fake {
            fail_entry: Some(0),
            ..Fake::default()
        });
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        append_submitted(&p, &fake);
        p.applied_here(&proposal(&fake, 0), &[true]);
        p.wait(1).unwrap();
        // The core's answer for it is an error (a deadline run out as the
        // apply landed): it was applied here, so committed; no fail-stop.
        release(&fake, usize::MAX);
        until("completed", || p.lock().in_flight_count() == 0);
        assert!(p.lock().failed.is_none());
        let seq = append_submitted(&p, &fake);
        p.applied_here(&proposal(&fake, 1), &[true]);
        p.wait(seq).unwrap();
        p.stop();
    }

    #[test]
    fn a_guard_that_failed_holds_back_the_entries_applied_behind_it() {
        let fake = Arc::new(Fake {
            fail_entry: Some(0),
            ..Fake::default()
        });
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        for _ in 1..=2 {
            append_submitted(&p, &fake);
        }
        // The first entry's guard did not hold: not answered here; the
        // second, applied behind it, must not answer the first's writer.
        p.applied_here(&proposal(&fake, 0), &[false]);
        p.applied_here(&proposal(&fake, 1), &[true]);
        assert_eq!(p.lock().flushed, 0);
        release(&fake, usize::MAX);
        assert!(p.wait(1).is_err(), "the completer fails it");
        assert!(p.wait(2).is_err(), "and what is behind it");
        p.stop();
    }

    #[test]
    fn a_failed_entry_fails_its_sets_and_every_later_one_until_a_reset() {
        let fake = Arc::new(Fake {
            fail_entry: Some(1),
            ..Fake::default()
        });
        let p = Pipeline::start(Arc::new(Shared(fake.clone())));
        for _ in 1..=3 {
            append_submitted(&p, &fake);
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
