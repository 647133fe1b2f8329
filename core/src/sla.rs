//! SLAs: when a run, or a node of it, has missed its service-level
//! deadline.
//!
//! `sla = "1h"` on a graph means: a run not complete one hour after its
//! **anchor** has missed; on a node, the node not succeeded or skipped by
//! then. The anchor is the instant the work is for: the end of a time
//! window (in the graph's zone), the instant a keyed run fell due, or, for
//! an unpartitioned run, the instant it started (its own instant, for a
//! run prepared ahead). A miss is decided here and recorded once per run
//! and node by the scheduler.

use crate::partition::Partition;
use crate::zone::Zone;

/// What an SLA's deadline counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// The end of the run's time window.
    WindowEnd,
    /// The instant a keyed run fell due.
    Due,
    /// The instant an unpartitioned run started.
    Start,
}

impl Anchor {
    /// Its name, as a miss shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Anchor::WindowEnd => "window_end",
            Anchor::Due => "due",
            Anchor::Start => "start",
        }
    }
}

/// The anchor of a run of `partition` in `zone` that started at
/// `started_ms`, and its instant.
pub fn anchor(partition: &Partition, zone: Zone, started_ms: u64) -> (Anchor, u64) {
    if let Some(end) = partition.end_ms(zone) {
        return (Anchor::WindowEnd, end);
    }
    if let Some(at) = partition.at_ms() {
        return (Anchor::Due, at);
    }
    (Anchor::Start, started_ms)
}

/// The deadline of an SLA of `sla_ms` from an anchor at `anchor_ms`.
pub fn deadline_ms(anchor_ms: u64, sla_ms: u64) -> u64 {
    anchor_ms.saturating_add(sla_ms)
}

/// Whether something not `done` at `now_ms` has missed a deadline at
/// `deadline_ms`: it is past and the work is not done.
pub fn missed(now_ms: u64, deadline_ms: u64, done: bool) -> bool {
    !done && now_ms >= deadline_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_and_misses_table() {
        let berlin = Zone::parse("Europe/Berlin").unwrap();
        let day: Partition = "2026-03-29".parse().unwrap();
        // The local day ends at 2026-03-29T22:00Z.
        assert_eq!(
            anchor(&day, berlin, 5),
            (Anchor::WindowEnd, 1_774_821_600_000)
        );
        assert_eq!(
            anchor(&day, Zone::UTC, 5),
            (Anchor::WindowEnd, 1_774_828_800_000)
        );
        let keyed: Partition = "key=db1@2026-11-29T13:05:00.000Z".parse().unwrap();
        assert_eq!(
            anchor(&keyed, Zone::UTC, 5),
            (Anchor::Due, 1_795_957_500_000)
        );
        assert_eq!(anchor(&Partition::NONE, berlin, 5), (Anchor::Start, 5));
        assert_eq!(deadline_ms(10, 5), 15);
        assert_eq!(deadline_ms(u64::MAX, 5), u64::MAX);
        // (now, deadline, done) → missed
        let cases = [
            (14, 15, false, false),
            (15, 15, false, true),
            (16, 15, false, true),
            (16, 15, true, false),
        ];
        for (now, deadline, done, want) in cases {
            assert_eq!(missed(now, deadline, done), want, "{now} {deadline} {done}");
        }
    }
}
