//! The order in which one pool's pending tickets are handed out: by
//! priority (higher first), then due instant, then id (submit order).
//!
//! A select at `now` takes the due ticket (due at or before `now`) with
//! the highest priority, and among those the lowest `(due_ms, id)`: a
//! backlog of one priority is FIFO, as before priorities existed. A ticket
//! of higher priority that is not due yet does not hold back a due one of
//! lower priority.
//!
//! The tickets are kept in one `(due_ms, id)` set per priority level, the
//! levels highest first. With one level (every ticket at priority 0, which
//! is what tickets journaled before priorities existed read as) this is
//! the single ordered set the queue always had, at the same memory cost; a
//! select, the earliest due instant and the due count each cost one step
//! per priority level in use in the pool, plus the set's own log.
//! Iteration order is fixed (B-trees), so live state and replayed state
//! compare equal.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::queue::ticket::TicketId;

/// A ticket in a level: `(due_ms, id)`.
pub type Entry = (u64, TicketId);

/// One pool's pending tickets, by (priority descending, due, id).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingOrder {
    /// Per priority level, highest first: tickets by (due_ms, id).
    levels: BTreeMap<Reverse<i32>, BTreeSet<(u64, TicketId)>>,
    /// Tickets over all levels.
    len: usize,
}

impl PendingOrder {
    /// An empty order.
    pub fn new() -> Self {
        PendingOrder::default()
    }

    /// Adds a ticket; `false` if it was there already.
    pub fn insert(&mut self, priority: i32, due_ms: u64, id: TicketId) -> bool {
        let added = self
            .levels
            .entry(Reverse(priority))
            .or_default()
            .insert((due_ms, id));
        if added {
            self.len += 1;
        }
        added
    }

    /// Removes a ticket; `false` if it was not there.
    pub fn remove(&mut self, priority: i32, due_ms: u64, id: TicketId) -> bool {
        let Some(level) = self.levels.get_mut(&Reverse(priority)) else {
            return false;
        };
        let removed = level.remove(&(due_ms, id));
        if level.is_empty() {
            self.levels.remove(&Reverse(priority));
        }
        if removed {
            self.len -= 1;
        }
        removed
    }

    /// Tickets in the order.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no ticket.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ticket a select at `now_ms` takes, as (priority, due_ms, id):
    /// the first due one of the highest level that has one.
    pub fn first_due(&self, now_ms: u64) -> Option<(i32, u64, TicketId)> {
        self.levels.iter().find_map(|(&Reverse(p), level)| {
            level
                .first()
                .filter(|&&(due, _)| due <= now_ms)
                .map(|&(due, id)| (p, due, id))
        })
    }

    /// The first ticket `(due_ms, id)` of the `priority` level.
    pub fn first_of(&self, priority: i32) -> Option<(u64, TicketId)> {
        self.levels
            .get(&Reverse(priority))
            .and_then(|level| level.first().copied())
    }

    /// The priority levels in use.
    pub fn priorities(&self) -> Vec<i32> {
        self.levels.keys().map(|&Reverse(p)| p).collect()
    }

    /// Removes and returns the tickets of the `priority` level after its
    /// first `keep`, in order, with the last one kept (`None` when the
    /// level holds `keep` or fewer, and nothing is removed).
    pub fn split_level_after(&mut self, priority: i32, keep: usize) -> Option<(Entry, Vec<Entry>)> {
        let level = self.levels.get_mut(&Reverse(priority))?;
        if level.len() <= keep || keep == 0 {
            return None;
        }
        let first_moved = *level.iter().nth(keep).expect("more than keep");
        let moved = level.split_off(&first_moved);
        let last_kept = *level.last().expect("keep > 0");
        self.len -= moved.len();
        Some((last_kept, moved.into_iter().collect()))
    }

    /// The earliest due instant over every level.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.levels
            .values()
            .filter_map(|level| level.first().map(|&(due, _)| due))
            .min()
    }

    /// Tickets due at or before `now_ms`.
    pub fn due_count(&self, now_ms: u64) -> usize {
        self.levels
            .values()
            .map(|level| level.range(..(now_ms.saturating_add(1), 0)).count())
            .sum()
    }

    /// Every ticket as (priority, due_ms, id), in hand-out order when all
    /// are due.
    pub fn iter(&self) -> impl Iterator<Item = (i32, u64, TicketId)> + '_ {
        self.levels
            .iter()
            .flat_map(|(&Reverse(p), level)| level.iter().map(move |&(due, id)| (p, due, id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn highest_due_priority_first_then_fifo() {
        let mut o = PendingOrder::new();
        // (priority, due, id)
        for (p, due, id) in [(0, 5, 1), (5, 9, 2), (5, 3, 3), (-1, 0, 4), (0, 5, 0)] {
            assert!(o.insert(p, due, id));
        }
        assert!(!o.insert(0, 5, 1), "a second insert adds nothing");
        assert_eq!(o.len(), 5);
        // At 4: the priority 5 ticket due at 3, though others wait longer.
        assert_eq!(o.first_due(4), Some((5, 3, 3)));
        assert!(o.remove(5, 3, 3));
        // At 4 the other priority-5 ticket is not due: the lower levels go.
        assert_eq!(o.first_due(4), Some((-1, 0, 4)));
        assert_eq!(o.first_due(5), Some((0, 5, 0)), "FIFO within a level");
        assert_eq!(o.next_due_ms(), Some(0));
        assert_eq!(o.due_count(5), 3);
        assert_eq!(
            o.iter().collect::<Vec<_>>(),
            vec![(5, 9, 2), (0, 5, 0), (0, 5, 1), (-1, 0, 4)]
        );
        assert!(!o.remove(7, 0, 0));
        assert!(!o.remove(0, 6, 1));
        for (p, due, id) in [(5, 9, 2), (0, 5, 0), (0, 5, 1), (-1, 0, 4)] {
            assert!(o.remove(p, due, id));
        }
        assert!(o.is_empty());
        assert_eq!(o, PendingOrder::new(), "empty levels are dropped");
    }

    proptest! {
        /// Against a plain list: every query answers as a scan would.
        #[test]
        fn agrees_with_a_scan(
            ops in prop::collection::vec((any::<bool>(), -3i32..3, 0u64..20, 0u64..30), 0..200),
            nows in prop::collection::vec(0u64..25, 1..10),
        ) {
            let mut o = PendingOrder::new();
            let mut model: BTreeSet<(i32, u64, TicketId)> = BTreeSet::new();
            for (add, p, due, id) in ops {
                if add {
                    prop_assert_eq!(o.insert(p, due, id), model.insert((p, due, id)));
                } else {
                    prop_assert_eq!(o.remove(p, due, id), model.remove(&(p, due, id)));
                }
                prop_assert_eq!(o.len(), model.len());
                for &now in &nows {
                    let want = model
                        .iter()
                        .filter(|t| t.1 <= now)
                        .min_by_key(|t| (Reverse(t.0), t.1, t.2))
                        .copied();
                    prop_assert_eq!(o.first_due(now), want);
                    prop_assert_eq!(o.due_count(now), model.iter().filter(|t| t.1 <= now).count());
                }
                prop_assert_eq!(o.next_due_ms(), model.iter().map(|t| t.1).min());
            }
        }
    }
}
