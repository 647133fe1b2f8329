//! Cron triggers: which windows a graph's cron expression has closed since
//! the last firing handled.
//!
//! Each firing at `F` starts the run of the window that contains the
//! previous occurrence `P` of the expression ([`Schedule::window_closed_by`]).
//! Firing instants come from the expression alone (`next_after`,
//! `prev_before`), never from "now + interval", so a late wake-up does not
//! shift later firings.
//!
//! The record `cron/<graph>` holds the last firing handled and the windows
//! it made due that have not started yet (they wait for room under the
//! graph's `max_active_runs`). A firing and its windows are written in one
//! record before any run starts, and a window leaves `pending` only after
//! its start returned; a crash in between starts it again, which is a no-op
//! (a run exists at most once per partition). So a restart loses no firing
//! and starts nothing twice.
//!
//! After downtime, `catchup = false` starts only the newest missed window
//! and `catchup = true` every missed one, the newest `catchup_max` at most.

use serde::{Deserialize, Serialize};
use weir_core::cron::Schedule;
use weir_core::partition::{Partition, Partitioning};

/// The key of a graph's cron record.
pub fn cron_key(graph: &str) -> String {
    format!("cron/{graph}")
}

/// What a graph's cron trigger has handled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CronRecord {
    /// The expression the firings came from.
    pub expr: String,
    /// The last firing handled, in ms since the epoch.
    pub last_firing_ms: u64,
    /// Windows due by a firing whose runs have not started yet, oldest
    /// first.
    #[serde(default)]
    pub pending: Vec<Partition>,
}

/// The firings due at `now_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Firings to handle, oldest first.
    pub firings: Vec<u64>,
    /// Whether older missed firings were left out (catch-up off, or past
    /// its bound).
    pub older_dropped: bool,
}

/// The firings after `last_ms` and at or before `now_ms`: the newest one
/// only without catch-up, else the newest `catchup_max`. Walks backwards
/// from now, so a long downtime costs `catchup_max` steps, not one step per
/// missed firing.
pub fn due_firings(
    schedule: &Schedule,
    last_ms: u64,
    now_ms: u64,
    catchup: bool,
    catchup_max: usize,
) -> Due {
    let limit = if catchup { catchup_max.max(1) } else { 1 };
    let mut firings = Vec::new();
    let mut at = now_ms.saturating_add(1);
    let mut older_dropped = false;
    while let Some(f) = schedule.prev_before(at) {
        if f <= last_ms {
            break;
        }
        if firings.len() == limit {
            older_dropped = true;
            break;
        }
        firings.push(f);
        at = f;
    }
    firings.reverse();
    Due {
        firings,
        older_dropped,
    }
}

/// The windows the `firings` close, oldest first, without repeats (two
/// firings may close one window when the expression fires more often than
/// the partitioning).
pub fn windows_closed(
    schedule: &Schedule,
    partitioning: Partitioning,
    firings: &[u64],
) -> Vec<Partition> {
    let mut out: Vec<Partition> = Vec::with_capacity(firings.len());
    for &f in firings {
        for p in schedule.windows_closed_by(partitioning, f) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3_600_000;
    /// 2026-11-29T00:00:00Z.
    const T0: u64 = 1_795_910_400_000;

    /// Catch-up table: (catchup, bound, last, now) → firings.
    #[test]
    fn due_firings_table() {
        let hourly = Schedule::parse("0 * * * *").unwrap();
        // (catchup, catchup_max, last firing, now, firings due, more left)
        type Row = (bool, usize, u64, u64, &'static [u64], bool);
        let cases: &[Row] = &[
            // Nothing due before the next firing.
            (false, 10, T0, T0 + H - 1, &[], false),
            // On time: exactly the firing.
            (false, 10, T0, T0 + H, &[T0 + H], false),
            // Downtime of 5 h, catch-up off: the newest only.
            (false, 10, T0, T0 + 5 * H + 30, &[T0 + 5 * H], true),
            // Catch-up on: every missed firing, oldest first.
            (
                true,
                10,
                T0,
                T0 + 3 * H,
                &[T0 + H, T0 + 2 * H, T0 + 3 * H],
                false,
            ),
            // Catch-up past its bound: the newest 2.
            (true, 2, T0, T0 + 5 * H, &[T0 + 4 * H, T0 + 5 * H], true),
        ];
        for (i, &(catchup, bound, last, now, want, dropped)) in cases.iter().enumerate() {
            let got = due_firings(&hourly, last, now, catchup, bound);
            assert_eq!(
                (got.firings.as_slice(), got.older_dropped),
                (want, dropped),
                "#{i}: catchup {catchup}, bound {bound}, last {last}, now {now}"
            );
        }
    }

    #[test]
    fn half_hourly_firings_close_one_hourly_window_once() {
        let s = Schedule::parse("*/30 * * * *").unwrap();
        let firings = [T0 + H / 2, T0 + H, T0 + 3 * H / 2];
        let w = windows_closed(&s, Partitioning::Hourly, &firings);
        let names: Vec<String> = w.iter().map(|p| p.to_string()).collect();
        assert_eq!(names, ["2026-11-29T00", "2026-11-29T01"]);
    }
}
