//! A graph's runs, tallied as they settle: counts by outcome, lateness in a
//! bounded histogram, and the rows of the report's Gantt — the first
//! [`RUNS_LISTED_MAX`] runs by start, the rest counted only. Memory does
//! not grow with the span, so the engine may expire run records as it
//! would in production (each graph's `retention`).
//!
//! A run is one partition's run, as the store has it: one that settles
//! again (a rerun of some of its nodes, an upstream's new data) is counted
//! once, as it settled last. For that the tally remembers each settled
//! run's outcome until its record expires: the runs the store holds.
//!
//! Who feeds it: the event watcher, with each run's record read at its
//! `RunSettled` (settled before the span's end), and the driver at the
//! span's end, with the records still active then or settled at that very
//! instant (the watcher leaves those to it).

use std::collections::BTreeMap;

use serde::Serialize;
use weir_actors::records::graph::{GraphRunRecord, RunState};
use weir_core::partition::Partition;
use weir_core::simulate::stats::Histogram;
use weir_core::zone::Zone;

/// Runs listed per graph (for the Gantt): the first by start; the rest are
/// counted only.
pub const RUNS_LISTED_MAX: usize = 500;

/// One run, for the Gantt.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunRow {
    /// The partition.
    pub partition: String,
    /// Due: the later of its window's end and its start, ms.
    pub due_ms: u64,
    /// When it started, ms.
    pub started_ms: u64,
    /// When it settled, ms.
    pub settled_ms: Option<u64>,
    /// Its state.
    pub state: String,
}

/// A graph's runs so far.
#[derive(Debug, Clone, Default)]
pub struct RunTally {
    /// Runs started in the span.
    pub started: u64,
    /// Runs completed.
    pub completed: u64,
    /// Runs failed.
    pub failed: u64,
    /// Runs cancelled.
    pub cancelled: u64,
    /// Runs active at the span's end.
    pub unsettled: u64,
    /// Each settled run's lateness, ms.
    pub lateness: Histogram,
    /// The first [`RUNS_LISTED_MAX`] runs by (start, partition).
    rows: BTreeMap<(u64, String), RunRow>,
    /// Each counted run whose record the store still holds: what it
    /// counted as, so that settling again replaces it.
    /// (Looked up only, never walked: a hash map.)
    counted: std::collections::HashMap<String, Counted>,
    /// `counted` by when each record expires.
    expiring: std::collections::BTreeSet<(u64, String)>,
}

/// What a run counted as.
#[derive(Debug, Clone)]
struct Counted {
    started_ms: u64,
    state: RunState,
    lateness_ms: Option<u64>,
    expires_ms: u64,
}

impl RunTally {
    /// Counts the run of `partition` as `record` has it at `now_ms`, in
    /// place of what it counted as before if it was counted. A run that
    /// starts at or after `until_ms` (prepared ahead for a firing after the
    /// span) and one withdrawn (no task of it ran) are not counted.
    pub fn count(
        &mut self,
        partition: &str,
        record: &GraphRunRecord,
        zone: Zone,
        until_ms: u64,
        now_ms: u64,
    ) {
        self.forget_expired(now_ms);
        let started = record.started_ms();
        if started >= until_ms || record.state == RunState::Withdrawn {
            return;
        }
        match self.counted.remove(partition) {
            Some(before) => {
                self.expiring
                    .remove(&(before.expires_ms, partition.to_string()));
                self.uncount(&before);
                self.rows
                    .remove(&(before.started_ms, partition.to_string()));
            }
            None => self.started += 1,
        }
        let window_end = partition
            .parse::<Partition>()
            .ok()
            .and_then(|p| p.end_ms(zone))
            .unwrap_or(0);
        let due = started.max(window_end);
        let lateness = record.settled_at_ms.map(|s| s.saturating_sub(due));
        let counted = Counted {
            started_ms: started,
            state: record.state,
            lateness_ms: lateness,
            expires_ms: record
                .settled_at_ms
                .map_or(u64::MAX, |s| s.saturating_add(record.retention_ms)),
        };
        *self.state_count(record.state) += 1;
        if let Some(l) = lateness {
            self.lateness.record(l);
        }
        self.expiring
            .insert((counted.expires_ms, partition.to_string()));
        self.counted.insert(partition.to_string(), counted);
        let key = (started, partition.to_string());
        let full = self.rows.len() >= RUNS_LISTED_MAX;
        if full
            && self
                .rows
                .last_key_value()
                .is_some_and(|(last, _)| *last < key)
        {
            return;
        }
        self.rows.insert(
            key,
            RunRow {
                partition: partition.to_string(),
                due_ms: due,
                started_ms: started,
                settled_ms: record.settled_at_ms,
                state: format!("{:?}", record.state).to_lowercase(),
            },
        );
        if self.rows.len() > RUNS_LISTED_MAX {
            self.rows.pop_last();
        }
    }

    fn state_count(&mut self, state: RunState) -> &mut u64 {
        match state {
            RunState::Complete => &mut self.completed,
            RunState::Failed => &mut self.failed,
            RunState::Cancelled => &mut self.cancelled,
            RunState::Active | RunState::Withdrawn => &mut self.unsettled,
        }
    }

    fn uncount(&mut self, before: &Counted) {
        let n = self.state_count(before.state);
        *n = n.saturating_sub(1);
        if let Some(l) = before.lateness_ms {
            self.lateness.remove(l);
        }
    }

    /// Forgets the outcomes of runs whose records have expired by `now_ms`:
    /// the engine starts such a partition afresh, as a new run.
    fn forget_expired(&mut self, now_ms: u64) {
        while let Some((at, partition)) = self.expiring.first().cloned() {
            if at > now_ms {
                break;
            }
            self.expiring.pop_first();
            self.counted.remove(&partition);
        }
    }

    /// Runs remembered (the memory it holds beyond its fixed part).
    pub fn remembered(&self) -> usize {
        self.counted.len()
    }

    /// The listed runs, by start, and how many were left out.
    pub fn rows(&self) -> (Vec<RunRow>, u64) {
        let listed: Vec<RunRow> = self.rows.values().cloned().collect();
        let omitted = self.started - listed.len() as u64;
        (listed, omitted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(started: u64, settled: Option<u64>, state: RunState) -> GraphRunRecord {
        GraphRunRecord {
            definition: String::new(),
            state,
            requested_at_ms: started,
            settled_at_ms: settled,
            expected_reruns: BTreeMap::new(),
            retention_ms: 100,
            params: BTreeMap::new(),
            not_before_ms: None,
            failure: None,
        }
    }

    #[test]
    fn keeps_the_first_runs_by_start_and_counts_the_rest() {
        let mut t = RunTally::default();
        // Offered latest first: the rows kept are still the earliest.
        for i in (0..RUNS_LISTED_MAX as u64 + 10).rev() {
            t.count(
                &format!("k{i:04}"),
                &record(i, Some(i + 5), RunState::Complete),
                Zone::UTC,
                u64::MAX,
                i + 5,
            );
        }
        let (rows, omitted) = t.rows();
        assert_eq!((rows.len(), omitted), (RUNS_LISTED_MAX, 10));
        assert_eq!(rows[0].started_ms, 0);
        assert_eq!(rows.last().unwrap().started_ms, RUNS_LISTED_MAX as u64 - 1);
        assert_eq!(
            (t.completed, t.lateness.max()),
            (RUNS_LISTED_MAX as u64 + 10, 5)
        );
    }

    #[test]
    fn runs_after_the_span_and_withdrawn_runs_are_not_counted() {
        let cases = [
            (record(10, None, RunState::Active), 20, 1),
            (record(20, None, RunState::Active), 20, 0),
            (record(10, Some(12), RunState::Withdrawn), 20, 0),
        ];
        for (i, (r, until, want)) in cases.iter().enumerate() {
            let mut t = RunTally::default();
            t.count("p", r, Zone::UTC, *until, 30);
            assert_eq!(t.started, *want, "#{i}: {r:?} until {until}");
        }
    }

    #[test]
    fn a_run_that_settles_again_is_counted_once_until_it_expires() {
        let mut t = RunTally::default();
        t.count(
            "p",
            &record(10, Some(20), RunState::Failed),
            Zone::UTC,
            1_000,
            20,
        );
        // Rerun: active again, then complete.
        t.count(
            "p",
            &record(10, Some(50), RunState::Complete),
            Zone::UTC,
            1_000,
            50,
        );
        assert_eq!((t.started, t.failed, t.completed), (1, 0, 1));
        assert_eq!((t.lateness.len(), t.lateness.max()), (1, 40));
        let (rows, omitted) = t.rows();
        assert_eq!(
            (rows.len(), omitted, rows[0].state.as_str()),
            (1, 0, "complete")
        );
        // Expired (settled at 50, kept 100 ms): the partition's next run is
        // a new one.
        t.count(
            "p",
            &record(200, Some(210), RunState::Complete),
            Zone::UTC,
            1_000,
            210,
        );
        assert_eq!((t.started, t.completed, t.remembered()), (2, 2, 1));
    }
}
