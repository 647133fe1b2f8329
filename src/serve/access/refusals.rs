//! The refusal budget: how many refused requests of one caller the audit
//! log takes.
//!
//! A refusal decided before any handler runs (a role too low, no route, a
//! method the route does not take, a body over the limit) changed nothing;
//! its entry says who tried what. A caller that repeats one in a loop (a
//! viewer's dashboard posting 300 times a second) would otherwise fill the
//! log and the disk with the same line. So each caller (token name) has a
//! bucket of [`AUDIT_REFUSALS_BURST`] entries, refilled by one every
//! [`AUDIT_REFUSAL_REFILL_MS`]: a refusal finding the bucket empty is
//! dropped and counted, and the next one written carries the count
//! (`refusals_dropped`). Requests that reach a handler are written ahead
//! whatever their outcome: they may change something.
//!
//! The budget lives in memory (a restart refills every bucket) and holds at
//! most [`AUDIT_REFUSAL_CALLERS_MAX`] callers. Time is passed in.

use std::collections::BTreeMap;

use super::tokens::TOKENS_MAX;

/// Refusals of one caller written back to back before the budget applies.
pub const AUDIT_REFUSALS_BURST: u32 = 20;
/// One more refusal of a caller is written per this many ms (60 a minute
/// once the burst is spent).
pub const AUDIT_REFUSAL_REFILL_MS: u64 = 1_000;
/// Callers the budget tracks at most: every token name and DATA/token's.
pub const AUDIT_REFUSAL_CALLERS_MAX: usize = TOKENS_MAX + 1;

/// What the budget decided for one refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    /// Write its entry, saying how many of the caller's refusals were
    /// dropped since its last one written.
    Write {
        /// Refusals dropped before this one.
        dropped_before: u64,
    },
    /// Leave it out (counted).
    Drop,
}

/// Takes `who`'s refusal at `now_ms` from the shared `budget`: the count
/// of its refusals dropped before this one when its entry is to be
/// written, `None` when it is dropped (counted in
/// `weir_audit_refusals_dropped_total`). The engine's refusals and a
/// replicated front's take from it alike.
pub fn admit(budget: &std::sync::Mutex<RefusalBudget>, who: &str, now_ms: u64) -> Option<u64> {
    let verdict = budget
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take(who, now_ms);
    match verdict {
        Verdict::Write { dropped_before } => Some(dropped_before),
        Verdict::Drop => {
            metrics::counter!("weir_audit_refusals_dropped_total", "who" => who.to_string())
                .increment(1);
            None
        }
    }
}

#[derive(Debug, Clone)]
struct Bucket {
    /// Entries it may still write now.
    available: u32,
    /// The instant its last refill counts from.
    refilled_at_ms: u64,
    /// Refusals dropped since the last one written.
    dropped: u64,
}

/// Every caller's bucket.
#[derive(Debug, Default)]
pub struct RefusalBudget {
    buckets: BTreeMap<String, Bucket>,
}

impl RefusalBudget {
    /// Decides on a refusal of `who` at `now_ms`.
    pub fn take(&mut self, who: &str, now_ms: u64) -> Verdict {
        if !self.buckets.contains_key(who) {
            self.make_room();
        }
        let b = self.buckets.entry(who.to_string()).or_insert(Bucket {
            available: AUDIT_REFUSALS_BURST,
            refilled_at_ms: now_ms,
            dropped: 0,
        });
        // Whole refills since the last one; a clock that went back refills
        // nothing.
        let refills = now_ms.saturating_sub(b.refilled_at_ms) / AUDIT_REFUSAL_REFILL_MS;
        if refills > 0 {
            let room = u64::from(AUDIT_REFUSALS_BURST - b.available);
            b.available += refills.min(room) as u32;
            b.refilled_at_ms = if b.available == AUDIT_REFUSALS_BURST {
                now_ms
            } else {
                b.refilled_at_ms + refills * AUDIT_REFUSAL_REFILL_MS
            };
        }
        debug_assert!(b.available <= AUDIT_REFUSALS_BURST, "a bucket overflows");
        if b.available == 0 {
            b.dropped += 1;
            return Verdict::Drop;
        }
        b.available -= 1;
        let dropped_before = std::mem::take(&mut b.dropped);
        Verdict::Write { dropped_before }
    }

    /// Makes room for one more caller when the budget is full: forgets a
    /// caller whose bucket is full and owes no count (it is as if new), or
    /// else the one refilled longest ago (its dropped count stays in the
    /// metric).
    fn make_room(&mut self) {
        if self.buckets.len() < AUDIT_REFUSAL_CALLERS_MAX {
            return;
        }
        let idle = self
            .buckets
            .iter()
            .find(|(_, b)| b.available == AUDIT_REFUSALS_BURST && b.dropped == 0)
            .map(|(k, _)| k.clone());
        let victim = idle.or_else(|| {
            self.buckets
                .iter()
                .min_by_key(|(_, b)| b.refilled_at_ms)
                .map(|(k, _)| k.clone())
        });
        if let Some(k) = victim {
            self.buckets.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A caller's refusals over time: the burst is written, the rest
    /// dropped and counted until a refill, and the next written carries the
    /// count; another caller has its own bucket.
    #[test]
    fn a_burst_then_one_a_refill_and_the_count_of_the_dropped() {
        let mut b = RefusalBudget::default();
        for i in 0..AUDIT_REFUSALS_BURST {
            assert_eq!(
                b.take("dash", 0),
                Verdict::Write { dropped_before: 0 },
                "#{i} of the burst"
            );
        }
        for i in 0..280 {
            assert_eq!(b.take("dash", 999), Verdict::Drop, "#{i} past the burst");
        }
        assert_eq!(
            b.take("other", 999),
            Verdict::Write { dropped_before: 0 },
            "another caller's bucket is its own"
        );
        // (at_ms, want)
        let table = [
            (
                1_000,
                Verdict::Write {
                    dropped_before: 280,
                },
            ),
            (1_500, Verdict::Drop),
            (1_999, Verdict::Drop),
            (2_000, Verdict::Write { dropped_before: 2 }),
            (2_000, Verdict::Drop),
            // A long quiet refills the burst, no more.
            (1_000_000, Verdict::Write { dropped_before: 1 }),
        ];
        for (i, (at, want)) in table.into_iter().enumerate() {
            assert_eq!(b.take("dash", at), want, "#{i}: at {at}");
        }
        for i in 1..AUDIT_REFUSALS_BURST {
            assert_eq!(
                b.take("dash", 1_000_000),
                Verdict::Write { dropped_before: 0 },
                "#{i} of the refilled burst"
            );
        }
        assert_eq!(b.take("dash", 1_000_000), Verdict::Drop);
        // A clock that goes back refills nothing and breaks nothing.
        assert_eq!(b.take("dash", 5), Verdict::Drop);
    }

    /// The callers tracked are bounded; a full bucket owing nothing is the
    /// first forgotten.
    #[test]
    fn the_callers_are_bounded() {
        let mut b = RefusalBudget::default();
        for i in 0..AUDIT_REFUSAL_CALLERS_MAX + 10 {
            let _ = b.take(&format!("t{i}"), 0);
        }
        assert!(b.buckets.len() <= AUDIT_REFUSAL_CALLERS_MAX);
    }
}
