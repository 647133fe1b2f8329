//! Keyed schedules: when each key of an inventory runs next, and signals.
//!
//! This is glazed's `Orchestrator::Policy`, translated function for
//! function, in ms instead of seconds and with the random draw passed in.
//! Each key of a keyed graph has a [`KeySchedule`] record; every change to
//! it is one of these pure functions, and each returns a new record (or a
//! decision) and leaves the one given untouched, so the caller journals the
//! result and a replay takes the same decisions:
//!
//! - [`discovered`]: a key new to the inventory is due within `jitter`.
//! - [`signal`]: trailing debounce. The key becomes due `delay` after the
//!   latest signal, but no later than `max_wait` after the first signal not
//!   yet followed by a run (the *signal window*); `immediate` makes it due
//!   at the signal. An earlier scheduled run is kept unless the key is
//!   running, since that run started before the signal. A signal during a
//!   run opens a new window when the old one began before the run, and
//!   makes the next run due as the signal asked.
//! - [`claim`]: lease a due key to an owner for `lease_ms`.
//! - [`completed`]: record the outcome and schedule the next run after
//!   `interval` (or `retry_interval` after a failure) plus jitter; a signal
//!   that arrived during the run keeps its due instant when that is earlier.
//! - [`released`]: give a lease up without recording a run.
//!
//! A key is *running* while an owner holds an unexpired lease. A lease that
//! expires is not taken away: the owner may still complete or release it,
//! until another owner claims the key. Everything in a record survives a
//! crash, because the record is what is stored.
//!
//! Two choices differ in form, not in effect, from glazed: "no lease owner"
//! is `None` rather than an empty string (so `completed` by an owner `""`
//! matches nothing), and [`claim`], [`completed`] and [`released`] return a
//! decision ([`Claim`], [`Update`]) rather than the same record unchanged.

use serde::{Deserialize, Serialize};

use crate::names::Key;

/// ms between runs when the settings give 0 (glazed's 3600 s).
pub const DEFAULT_INTERVAL_MS: u64 = 3_600_000;
/// ms a signal waits for further signals when the debounce gives 0 (60 s).
pub const DEFAULT_DELAY_MS: u64 = 60_000;
/// ms after the first signal of a window by which the key runs when the
/// debounce gives 0 (600 s).
pub const DEFAULT_MAX_WAIT_MS: u64 = 600_000;

/// Why a key is due when it is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DueReason {
    /// The key is new to the inventory.
    Inventory,
    /// The last run succeeded; this is the next one on the interval.
    Schedule,
    /// The last run failed; this is the retry.
    Retry,
    /// A signal asked for the run.
    Signal {
        /// Where the signal came from, as the signal named it.
        source: String,
    },
}

/// The schedule record of one key. Times are ms since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeySchedule {
    /// The key.
    pub key: Key,
    /// When the next run is due.
    pub due_at_ms: u64,
    /// When the next run is due by the interval alone, ignoring signals;
    /// `None` for a key that only signals have touched so far.
    #[serde(default)]
    pub scheduled_at_ms: Option<u64>,
    /// Why the next run is due at `due_at_ms`.
    pub due_reason: DueReason,
    /// Who holds the lease, if anyone.
    #[serde(default)]
    pub lease_owner: Option<String>,
    /// When the lease ends.
    #[serde(default)]
    pub lease_until_ms: Option<u64>,
    /// When the last run was claimed.
    #[serde(default)]
    pub last_started_at_ms: Option<u64>,
    /// When the last run finished.
    #[serde(default)]
    pub last_finished_at_ms: Option<u64>,
    /// Whether the last run failed.
    #[serde(default)]
    pub last_failed: bool,
    /// Why the last run failed.
    #[serde(default)]
    pub last_error: Option<String>,
    /// Failed runs since the last success.
    #[serde(default)]
    pub consecutive_failures: u32,
    /// When the first signal not yet followed by a run arrived.
    #[serde(default)]
    pub signal_window_started_at_ms: Option<u64>,
}

/// The interval settings of a keyed graph. A 0 means the default, as in
/// glazed, so a definition that leaves a field out gets the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ScheduleSettings {
    /// ms from the end of a run to the next; 0 = [`DEFAULT_INTERVAL_MS`].
    pub interval_ms: u64,
    /// ms from the end of a failed run to the retry; 0 = `interval_ms`.
    pub retry_interval_ms: u64,
    /// The most ms of random delay added to a new key and to each next
    /// run, so keys spread out; 0 = none.
    pub jitter_ms: u64,
}

impl Default for ScheduleSettings {
    fn default() -> Self {
        ScheduleSettings {
            interval_ms: DEFAULT_INTERVAL_MS,
            retry_interval_ms: 0,
            jitter_ms: 0,
        }
    }
}

impl ScheduleSettings {
    /// The interval after a run, with the zero-means-default rule applied.
    pub fn effective_interval_ms(&self, failed: bool) -> u64 {
        let interval = nonzero(self.interval_ms, DEFAULT_INTERVAL_MS);
        if failed {
            nonzero(self.retry_interval_ms, interval)
        } else {
            interval
        }
    }

    /// The jitter for a random `draw`: uniform in `0..=jitter_ms` (up to the
    /// slight bias of a modulo, which is far below what jitter cares about).
    pub fn jitter_for(&self, draw: u64) -> u64 {
        match self.jitter_ms {
            0 => 0,
            u64::MAX => draw,
            max => draw % (max + 1),
        }
    }
}

/// The debounce of signals. A 0 means the default, as in glazed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Debounce {
    /// ms a signal waits for further signals; 0 = [`DEFAULT_DELAY_MS`].
    pub delay_ms: u64,
    /// The most ms from the first signal of a window to the run;
    /// 0 = [`DEFAULT_MAX_WAIT_MS`].
    pub max_wait_ms: u64,
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce {
            delay_ms: DEFAULT_DELAY_MS,
            max_wait_ms: DEFAULT_MAX_WAIT_MS,
        }
    }
}

/// An external nudge to run a key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signal {
    /// Where it came from; becomes the [`DueReason::Signal`] source.
    pub source: String,
    /// When it was received, if the sender says; else the caller's now.
    #[serde(default)]
    pub received_at_ms: Option<u64>,
    /// Run at once instead of waiting for more signals.
    #[serde(default)]
    pub immediate: bool,
}

/// What a claim decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Claim {
    /// The key was due and free: here is the record with the lease.
    Claimed(KeySchedule),
    /// The key is not due yet.
    NotDue,
    /// An owner holds an unexpired lease (the key is running).
    Leased,
}

/// What a change that needs the lease decided.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Update {
    /// The caller holds the lease: here is the new record.
    Applied(KeySchedule),
    /// The caller does not hold the lease (another owner claimed the key,
    /// or nobody holds it): the stored record stays as it is.
    NotOwner,
}

impl Update {
    /// The new record, or `None` when the record stays as it is.
    pub fn into_record(self) -> Option<KeySchedule> {
        match self {
            Update::Applied(record) => Some(record),
            Update::NotOwner => None,
        }
    }
}

/// The record of a key new to the inventory, due within the jitter.
pub fn discovered(key: Key, now_ms: u64, settings: &ScheduleSettings, draw: u64) -> KeySchedule {
    let due = now_ms.saturating_add(settings.jitter_for(draw));
    let record = KeySchedule {
        key,
        due_at_ms: due,
        scheduled_at_ms: Some(due),
        due_reason: DueReason::Inventory,
        lease_owner: None,
        lease_until_ms: None,
        last_started_at_ms: None,
        last_finished_at_ms: None,
        last_failed: false,
        last_error: None,
        consecutive_failures: 0,
        signal_window_started_at_ms: None,
    };
    assert_invariants(&record);
    record
}

/// Applies a signal for `key` with trailing debounce (see the module
/// documentation). `record` is the key's record, `None` when it has none
/// yet (a signal may come before the inventory lists the key).
pub fn signal(
    record: Option<&KeySchedule>,
    key: &Key,
    signal: &Signal,
    now_ms: u64,
    debounce: &Debounce,
) -> KeySchedule {
    let at = signal.received_at_ms.unwrap_or(now_ms);
    let mut updated = match record {
        Some(record) => {
            assert_invariants(record);
            debug_assert_eq!(
                &record.key, key,
                "signal for {key} applied to the record of {}",
                record.key
            );
            record.clone()
        }
        None => KeySchedule {
            key: key.clone(),
            // Both are set below: the due instant to the signal's, the
            // reason to the signal's source (no scheduled run to keep).
            due_at_ms: at,
            scheduled_at_ms: None,
            due_reason: DueReason::Signal {
                source: signal.source.clone(),
            },
            lease_owner: None,
            lease_until_ms: None,
            last_started_at_ms: None,
            last_finished_at_ms: None,
            last_failed: false,
            last_error: None,
            consecutive_failures: 0,
            signal_window_started_at_ms: None,
        },
    };
    let running = running(&updated, now_ms);
    // A new window opens with the first signal after a run began: a window
    // that began before the running run was answered by it.
    // A signal taken while the key runs came after that run began, even in
    // the same millisecond: its window opens after the start, so the run's
    // completion sees it pending (a window at the start instant would read
    // as answered by the run, and the signal would be lost).
    let opened = match updated.last_started_at_ms {
        Some(started) if running => at.max(started.saturating_add(1)),
        _ => at,
    };
    let window = match (
        updated.signal_window_started_at_ms,
        updated.last_started_at_ms,
    ) {
        (None, _) => opened,
        (Some(window), Some(started)) if running && window <= started => opened,
        (Some(window), _) => window,
    };
    let due = if signal.immediate {
        at
    } else {
        let delay = nonzero(debounce.delay_ms, DEFAULT_DELAY_MS);
        let max_wait = nonzero(debounce.max_wait_ms, DEFAULT_MAX_WAIT_MS);
        at.saturating_add(delay)
            .min(window.saturating_add(max_wait))
    };
    match updated.scheduled_at_ms {
        // A scheduled run at or before the signal's due instant answers the
        // signal too, unless the key is running: that run began before it.
        Some(scheduled) if !running && scheduled <= due => updated.due_at_ms = scheduled,
        _ => {
            updated.due_at_ms = due;
            updated.due_reason = DueReason::Signal {
                source: signal.source.clone(),
            };
        }
    }
    updated.signal_window_started_at_ms = Some(window);
    assert_invariants(&updated);
    updated
}

/// Leases the key to `owner` for `lease_ms` when it is due and not running.
pub fn claim(record: &KeySchedule, owner: &str, now_ms: u64, lease_ms: u64) -> Claim {
    assert_invariants(record);
    debug_assert!(!owner.is_empty(), "a lease owner is named");
    if running(record, now_ms) {
        return Claim::Leased;
    }
    if record.due_at_ms > now_ms {
        return Claim::NotDue;
    }
    let mut claimed = record.clone();
    claimed.lease_owner = Some(owner.to_string());
    claimed.lease_until_ms = Some(now_ms.saturating_add(lease_ms));
    claimed.last_started_at_ms = Some(now_ms);
    assert_invariants(&claimed);
    Claim::Claimed(claimed)
}

/// Records the outcome of the run that `owner` claimed and schedules the
/// next one; `error` is why it failed, `None` when it succeeded. A signal
/// that arrived during the run keeps its due instant when that is earlier.
/// [`Update::NotOwner`] when `owner` does not hold the lease.
pub fn completed(
    record: &KeySchedule,
    owner: &str,
    finished_at_ms: u64,
    error: Option<&str>,
    settings: &ScheduleSettings,
    draw: u64,
) -> Update {
    assert_invariants(record);
    if record.lease_owner.as_deref() != Some(owner) {
        return Update::NotOwner;
    }
    let failed = error.is_some();
    let due = finished_at_ms
        .saturating_add(settings.effective_interval_ms(failed))
        .saturating_add(settings.jitter_for(draw));
    // A window that opened after the run began holds signals the run did
    // not answer.
    let pending = matches!(
        (record.signal_window_started_at_ms, record.last_started_at_ms),
        (Some(window), Some(started)) if window > started
    );
    let mut updated = record.clone();
    updated.lease_owner = None;
    updated.lease_until_ms = None;
    updated.last_finished_at_ms = Some(finished_at_ms);
    updated.last_failed = failed;
    updated.last_error = error.map(str::to_string);
    updated.consecutive_failures = if failed {
        record.consecutive_failures.saturating_add(1)
    } else {
        0
    };
    updated.scheduled_at_ms = Some(due);
    if !(pending && record.due_at_ms <= due) {
        updated.due_at_ms = due;
        updated.due_reason = if failed {
            DueReason::Retry
        } else {
            DueReason::Schedule
        };
    }
    if !pending {
        updated.signal_window_started_at_ms = None;
    }
    assert_invariants(&updated);
    Update::Applied(updated)
}

/// Gives up the lease `owner` holds without recording a run, as when the
/// owner is interrupted. [`Update::NotOwner`] when `owner` does not hold it.
pub fn released(record: &KeySchedule, owner: &str) -> Update {
    assert_invariants(record);
    if record.lease_owner.as_deref() != Some(owner) {
        return Update::NotOwner;
    }
    let mut updated = record.clone();
    updated.lease_owner = None;
    updated.lease_until_ms = None;
    assert_invariants(&updated);
    Update::Applied(updated)
}

/// Whether an owner holds an unexpired lease on the key at `now_ms`.
pub fn running(record: &KeySchedule, now_ms: u64) -> bool {
    let owned = record
        .lease_owner
        .as_deref()
        .is_some_and(|owner| !owner.is_empty());
    owned && record.lease_until_ms.is_some_and(|until| until > now_ms)
}

fn nonzero(value: u64, default: u64) -> u64 {
    if value == 0 {
        default
    } else {
        value
    }
}

/// The facts every record these functions make keeps (debug builds).
fn assert_invariants(record: &KeySchedule) {
    debug_assert_eq!(
        record.lease_owner.is_some(),
        record.lease_until_ms.is_some(),
        "key {}: a lease has both an owner and an end",
        record.key
    );
    debug_assert_eq!(
        record.last_failed,
        record.last_error.is_some(),
        "key {}: a failed run has an error and only a failed run has one",
        record.key
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000;
    const T0: u64 = 1_800_000_000_000;

    fn key() -> Key {
        Key::new("db1").unwrap()
    }

    fn record(due_at_ms: u64) -> KeySchedule {
        discovered(key(), due_at_ms, &ScheduleSettings::default(), 0)
    }

    fn leased(mut r: KeySchedule, owner: &str, started: u64, until: u64) -> KeySchedule {
        r.lease_owner = Some(owner.to_string());
        r.lease_until_ms = Some(until);
        r.last_started_at_ms = Some(started);
        r
    }

    fn with_window(mut r: KeySchedule, window: u64) -> KeySchedule {
        r.signal_window_started_at_ms = Some(window);
        r
    }

    fn sig(source: &str, at: Option<u64>, immediate: bool) -> Signal {
        Signal {
            source: source.to_string(),
            received_at_ms: at,
            immediate,
        }
    }

    fn by_signal(source: &str) -> DueReason {
        DueReason::Signal {
            source: source.to_string(),
        }
    }

    /// glazed `Policy.discovered`: due within the jitter, both due and
    /// scheduled, reason inventory.
    #[test]
    fn discovered_table() {
        let cases: &[(u64, u64, u64)] = &[
            // (jitter_ms, draw, want due - now)
            (0, 12_345, 0),
            (10 * S, 0, 0),
            (10 * S, 5, 5),
            (10 * S, 10 * S, 10 * S),
            (10 * S, 10 * S + 1, 0),
            (10 * S, u64::MAX, u64::MAX % (10 * S + 1)),
            (u64::MAX, 7, 7),
        ];
        for (i, (jitter_ms, draw, want)) in cases.iter().enumerate() {
            let settings = ScheduleSettings {
                jitter_ms: *jitter_ms,
                ..ScheduleSettings::default()
            };
            let got = discovered(key(), T0, &settings, *draw);
            assert_eq!(
                got.due_at_ms - T0,
                *want,
                "#{i}: jitter {jitter_ms} draw {draw}: got {got:?}"
            );
            assert_eq!(got.scheduled_at_ms, Some(got.due_at_ms), "#{i}");
            assert_eq!(got.due_reason, DueReason::Inventory, "#{i}");
            assert!(!running(&got, T0), "#{i}");
        }
    }

    /// glazed `Policy.signal`, one row per rule. Columns: record before,
    /// signal, now, debounce; want due_at, reason, window start.
    #[test]
    fn signal_table() {
        let d = Debounce::default();
        let short = Debounce {
            delay_ms: 5 * S,
            max_wait_ms: 20 * S,
        };
        let zeros = Debounce {
            delay_ms: 0,
            max_wait_ms: 0,
        };
        let sched = || Some(record(T0 + 1000 * S));
        let inv = DueReason::Inventory;
        type Row = (
            &'static str,
            Option<KeySchedule>,
            Signal,
            u64,
            Debounce,
            u64,
            DueReason,
            u64,
        );
        let cases: Vec<Row> = vec![
            (
                "no record: due delay after now",
                None,
                sig("hook", None, false),
                T0,
                d,
                T0 + 60 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "received_at is used over now",
                None,
                sig("hook", Some(T0 - 10 * S), false),
                T0,
                d,
                T0 + 50 * S,
                by_signal("hook"),
                T0 - 10 * S,
            ),
            (
                "immediate: due at the signal",
                None,
                sig("hook", None, true),
                T0,
                d,
                T0,
                by_signal("hook"),
                T0,
            ),
            (
                "zeros mean the defaults",
                None,
                sig("hook", None, false),
                T0,
                zeros,
                T0 + 60 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "custom delay",
                None,
                sig("hook", None, false),
                T0,
                short,
                T0 + 5 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "later scheduled run: the signal wins",
                sched(),
                sig("hook", None, false),
                T0,
                d,
                T0 + 60 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "earlier scheduled run is kept",
                Some(record(T0 + 30 * S)),
                sig("hook", None, false),
                T0,
                d,
                T0 + 30 * S,
                inv.clone(),
                T0,
            ),
            (
                "scheduled run at the signal's due is kept",
                Some(record(T0 + 60 * S)),
                sig("hook", None, false),
                T0,
                d,
                T0 + 60 * S,
                inv.clone(),
                T0,
            ),
            (
                "earlier scheduled run is kept over immediate",
                Some(record(T0 - S)),
                sig("hook", None, true),
                T0,
                d,
                T0 - S,
                inv.clone(),
                T0,
            ),
            (
                "second signal in the window: due delay after it",
                Some(with_window(record(T0 + 1000 * S), T0)),
                sig("hook", None, false),
                T0 + 100 * S,
                d,
                T0 + 160 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "max_wait caps the window",
                Some(with_window(record(T0 + 1000 * S), T0)),
                sig("hook", None, false),
                T0 + 590 * S,
                d,
                T0 + 600 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "past max_wait: due at the cap, already overdue",
                Some(with_window(record(T0 + 1000 * S), T0)),
                sig("hook", None, false),
                T0 + 700 * S,
                d,
                T0 + 600 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "custom max_wait",
                Some(with_window(record(T0 + 1000 * S), T0)),
                sig("hook", None, false),
                T0 + 18 * S,
                short,
                T0 + 20 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "running, window began before the run: a new window, due as asked",
                Some(leased(
                    with_window(record(T0 - 100 * S), T0 - 200 * S),
                    "a",
                    T0 - 50 * S,
                    T0 + 300 * S,
                )),
                sig("hook", None, false),
                T0,
                d,
                T0 + 60 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "running, window began during the run: kept",
                Some(leased(
                    with_window(record(T0 - 100 * S), T0 - 40 * S),
                    "a",
                    T0 - 50 * S,
                    T0 + 900 * S,
                )),
                sig("hook", None, false),
                T0 + 580 * S,
                d,
                T0 + 560 * S,
                by_signal("hook"),
                T0 - 40 * S,
            ),
            (
                "running: an earlier scheduled run is not kept",
                Some(leased(record(T0 - 100 * S), "a", T0 - 50 * S, T0 + 300 * S)),
                sig("hook", None, false),
                T0,
                d,
                T0 + 60 * S,
                by_signal("hook"),
                T0,
            ),
            (
                "running, immediate: due at the signal",
                Some(leased(record(T0 - 100 * S), "a", T0 - 50 * S, T0 + 300 * S)),
                sig("hook", None, true),
                T0,
                d,
                T0,
                by_signal("hook"),
                T0,
            ),
            (
                "expired lease is not running: the old window stays",
                Some(leased(
                    with_window(record(T0 + 1000 * S), T0 - 200 * S),
                    "a",
                    T0 - 100 * S,
                    T0 - S,
                )),
                sig("hook", None, false),
                T0,
                d,
                T0 + 60 * S,
                by_signal("hook"),
                T0 - 200 * S,
            ),
        ];
        for (i, (name, before, s, now, deb, want_due, want_reason, want_window)) in
            cases.iter().enumerate()
        {
            let got = signal(before.as_ref(), &key(), s, *now, deb);
            let row = format!("#{i} {name}: before {before:?}, signal {s:?}, now {now}");
            assert_eq!(
                got.due_at_ms,
                *want_due,
                "{row}: due got {}, want {}",
                got.due_at_ms as i64 - T0 as i64,
                *want_due as i64 - T0 as i64
            );
            assert_eq!(&got.due_reason, want_reason, "{row}");
            assert_eq!(got.signal_window_started_at_ms, Some(*want_window), "{row}");
            // A signal changes nothing else.
            let mut rest = got.clone();
            rest.due_at_ms = before.as_ref().map_or(rest.due_at_ms, |b| b.due_at_ms);
            rest.due_reason = before
                .as_ref()
                .map_or(rest.due_reason.clone(), |b| b.due_reason.clone());
            rest.signal_window_started_at_ms =
                before.as_ref().and_then(|b| b.signal_window_started_at_ms);
            if let Some(before) = before {
                assert_eq!(&rest, before, "{row}: only due, reason and window change");
            } else {
                assert_eq!(
                    rest.scheduled_at_ms, None,
                    "{row}: a signal schedules nothing"
                );
            }
        }
    }

    /// A storm: signals `delay` apart keep pushing the run back, but never
    /// past `max_wait` after the first.
    #[test]
    fn signal_storm_is_capped_by_max_wait() {
        let d = Debounce::default();
        let mut r: Option<KeySchedule> = None;
        for n in 0..40u64 {
            let at = T0 + n * 60 * S;
            let got = signal(r.as_ref(), &key(), &sig("storm", Some(at), false), at, &d);
            let want = (at + 60 * S).min(T0 + 600 * S);
            assert_eq!(got.due_at_ms, want, "signal #{n} at +{} s", n * 60);
            assert!(got.due_at_ms <= T0 + 600 * S, "signal #{n}");
            assert_eq!(got.signal_window_started_at_ms, Some(T0), "signal #{n}");
            r = Some(got);
        }
    }

    /// glazed `Policy.claim`: only a due key without an unexpired lease.
    #[test]
    fn claim_table() {
        let due = record(T0);
        let cases: Vec<(&str, KeySchedule, u64, Claim)> = vec![
            ("not due", due.clone(), T0 - 1, Claim::NotDue),
            (
                "due now",
                due.clone(),
                T0,
                Claim::Claimed(leased(due.clone(), "me", T0, T0 + 30 * S)),
            ),
            (
                "overdue",
                due.clone(),
                T0 + S,
                Claim::Claimed(leased(due.clone(), "me", T0 + S, T0 + 31 * S)),
            ),
            (
                "leased to another",
                leased(due.clone(), "other", T0, T0 + 10 * S),
                T0 + S,
                Claim::Leased,
            ),
            (
                "leased to me, unexpired",
                leased(due.clone(), "me", T0, T0 + 10 * S),
                T0 + S,
                Claim::Leased,
            ),
            (
                "lease ends now: expired",
                leased(due.clone(), "other", T0, T0 + 10 * S),
                T0 + 10 * S,
                Claim::Claimed(leased(due.clone(), "me", T0 + 10 * S, T0 + 40 * S)),
            ),
            (
                "expired lease, not yet due",
                leased(record(T0 + 100 * S), "other", T0, T0 + 10 * S),
                T0 + 20 * S,
                Claim::NotDue,
            ),
        ];
        for (i, (name, r, now, want)) in cases.iter().enumerate() {
            let got = claim(r, "me", *now, 30 * S);
            assert_eq!(&got, want, "#{i} {name}: record {r:?} now {now}");
        }
    }

    /// glazed `Policy.completed`: the next run, failures, pending signals,
    /// and ownership.
    #[test]
    fn completed_table() {
        let settings = ScheduleSettings {
            interval_ms: 3600 * S,
            retry_interval_ms: 300 * S,
            jitter_ms: 0,
        };
        let no_retry = ScheduleSettings {
            retry_interval_ms: 0,
            ..settings
        };
        let jittery = ScheduleSettings {
            jitter_ms: 10 * S,
            ..settings
        };
        let zeros = ScheduleSettings {
            interval_ms: 0,
            retry_interval_ms: 0,
            jitter_ms: 0,
        };
        let started = T0;
        let fin = T0 + 100 * S;
        let run = || leased(record(T0), "me", started, T0 + 600 * S);
        let failed_twice = || {
            let mut r = run();
            r.consecutive_failures = 2;
            r.last_failed = true;
            r.last_error = Some("boom".into());
            r
        };
        // A signal came during the run: window after the start, due as asked.
        let signalled = |due: u64| {
            let mut r = with_window(run(), started + 10 * S);
            r.due_at_ms = due;
            r.due_reason = by_signal("hook");
            r
        };
        // A window from before the run: the run answered it.
        let answered = || with_window(run(), started - 10 * S);
        type Row = (
            &'static str,
            KeySchedule,
            Option<&'static str>,
            ScheduleSettings,
            u64,
            Option<(u64, DueReason, u32, Option<u64>)>,
        );
        let cases: Vec<Row> = vec![
            (
                "success: interval",
                run(),
                None,
                settings,
                0,
                Some((fin + 3600 * S, DueReason::Schedule, 0, None)),
            ),
            (
                "success with jitter",
                run(),
                None,
                jittery,
                7,
                Some((fin + 3600 * S + 7, DueReason::Schedule, 0, None)),
            ),
            (
                "zeros: default interval",
                run(),
                None,
                zeros,
                0,
                Some((fin + DEFAULT_INTERVAL_MS, DueReason::Schedule, 0, None)),
            ),
            (
                "failure: retry interval",
                run(),
                Some("boom"),
                settings,
                0,
                Some((fin + 300 * S, DueReason::Retry, 1, None)),
            ),
            (
                "failure without retry interval: interval",
                run(),
                Some("boom"),
                no_retry,
                0,
                Some((fin + 3600 * S, DueReason::Retry, 1, None)),
            ),
            (
                "failure with zeros: default interval",
                run(),
                Some("boom"),
                zeros,
                0,
                Some((fin + DEFAULT_INTERVAL_MS, DueReason::Retry, 1, None)),
            ),
            (
                "another failure counts",
                failed_twice(),
                Some("again"),
                settings,
                0,
                Some((fin + 300 * S, DueReason::Retry, 3, None)),
            ),
            (
                "success resets the count",
                failed_twice(),
                None,
                settings,
                0,
                Some((fin + 3600 * S, DueReason::Schedule, 0, None)),
            ),
            (
                "signal during the run keeps its earlier due and its window",
                signalled(fin + 60 * S),
                None,
                settings,
                0,
                Some((fin + 60 * S, by_signal("hook"), 0, Some(started + 10 * S))),
            ),
            (
                "signal during the run, due later than the schedule: schedule wins, window stays",
                signalled(fin + 400 * S),
                Some("boom"),
                settings,
                0,
                Some((fin + 300 * S, DueReason::Retry, 1, Some(started + 10 * S))),
            ),
            (
                "window from before the run is closed",
                answered(),
                None,
                settings,
                0,
                Some((fin + 3600 * S, DueReason::Schedule, 0, None)),
            ),
            (
                "another owner holds it",
                leased(record(T0), "other", started, T0 + 600 * S),
                None,
                settings,
                0,
                None,
            ),
            ("nobody holds it", record(T0), None, settings, 0, None),
            (
                "expired lease, same owner: applied",
                leased(record(T0), "me", started, started + S),
                None,
                settings,
                0,
                Some((fin + 3600 * S, DueReason::Schedule, 0, None)),
            ),
        ];
        for (i, (name, r, error, settings, draw, want)) in cases.iter().enumerate() {
            let got = completed(r, "me", fin, *error, settings, *draw);
            let row = format!("#{i} {name}: record {r:?}, error {error:?}");
            let Some((due, reason, failures, window)) = want else {
                assert_eq!(got, Update::NotOwner, "{row}");
                continue;
            };
            let Update::Applied(got) = got else {
                panic!("{row}: got {got:?}, want applied");
            };
            assert_eq!(got.due_at_ms, *due, "{row}: due");
            assert_eq!(&got.due_reason, reason, "{row}: reason");
            assert_eq!(got.consecutive_failures, *failures, "{row}: failures");
            assert_eq!(got.signal_window_started_at_ms, *window, "{row}: window");
            let scheduled =
                fin + settings.effective_interval_ms(error.is_some()) + settings.jitter_for(*draw);
            assert_eq!(got.scheduled_at_ms, Some(scheduled), "{row}: scheduled");
            assert_eq!(
                (got.lease_owner.as_ref(), got.lease_until_ms),
                (None, None),
                "{row}: lease"
            );
            assert_eq!(got.last_finished_at_ms, Some(fin), "{row}");
            assert_eq!(got.last_failed, error.is_some(), "{row}");
            assert_eq!(got.last_error.as_deref(), *error, "{row}");
            assert_eq!(got.last_started_at_ms, r.last_started_at_ms, "{row}");
        }
    }

    #[test]
    fn released_table() {
        let r = leased(record(T0), "me", T0, T0 + 600 * S);
        let mut free = r.clone();
        free.lease_owner = None;
        free.lease_until_ms = None;
        let cases: Vec<(&str, KeySchedule, &str, Update)> = vec![
            (
                "owner releases",
                r.clone(),
                "me",
                Update::Applied(free.clone()),
            ),
            ("another owner cannot", r.clone(), "other", Update::NotOwner),
            ("nobody holds it", record(T0), "me", Update::NotOwner),
            (
                "empty owner matches no lease",
                record(T0),
                "",
                Update::NotOwner,
            ),
        ];
        for (i, (name, r, owner, want)) in cases.iter().enumerate() {
            let got = released(r, owner);
            assert_eq!(&got, want, "#{i} {name}: record {r:?} owner {owner:?}");
        }
    }

    #[test]
    fn running_table() {
        let r = record(T0);
        let mut empty_owner = leased(r.clone(), "", T0, T0 + 10);
        empty_owner.lease_owner = Some(String::new());
        let cases: Vec<(&str, KeySchedule, u64, bool)> = vec![
            ("no lease", r.clone(), T0, false),
            (
                "unexpired lease",
                leased(r.clone(), "a", T0, T0 + 10),
                T0 + 9,
                true,
            ),
            (
                "lease ends now",
                leased(r.clone(), "a", T0, T0 + 10),
                T0 + 10,
                false,
            ),
            (
                "lease ended",
                leased(r.clone(), "a", T0, T0 + 10),
                T0 + 11,
                false,
            ),
            ("empty owner is no owner", empty_owner, T0, false),
        ];
        for (i, (name, r, now, want)) in cases.iter().enumerate() {
            assert_eq!(
                running(r, *now),
                *want,
                "#{i} {name}: record {r:?} now {now}"
            );
        }
    }

    /// The life of a key through glazed's rules: discovered, claimed, a
    /// signal during the run, completed (the signal's earlier due kept),
    /// claimed again at that due, completed (window closed).
    #[test]
    fn a_signal_during_a_run_is_answered_by_the_next() {
        let settings = ScheduleSettings {
            interval_ms: 3600 * S,
            retry_interval_ms: 0,
            jitter_ms: 0,
        };
        let d = Debounce::default();
        let r = discovered(key(), T0, &settings, 0);
        let Claim::Claimed(r) = claim(&r, "a", T0, 600 * S) else {
            panic!("due at discovery")
        };
        let r = signal(Some(&r), &key(), &sig("hook", None, false), T0 + 10 * S, &d);
        assert_eq!(
            (r.due_at_ms, r.signal_window_started_at_ms),
            (T0 + 70 * S, Some(T0 + 10 * S))
        );
        assert_eq!(
            claim(&r, "b", T0 + 70 * S, 600 * S),
            Claim::Leased,
            "still running"
        );
        let r = completed(&r, "a", T0 + 100 * S, None, &settings, 0)
            .into_record()
            .unwrap();
        assert_eq!(r.due_at_ms, T0 + 70 * S, "the signal's due is kept");
        assert_eq!(r.scheduled_at_ms, Some(T0 + 3700 * S));
        assert_eq!(r.due_reason, by_signal("hook"));
        let Claim::Claimed(r) = claim(&r, "b", T0 + 100 * S, 600 * S) else {
            panic!("overdue")
        };
        assert_eq!(
            completed(&r, "a", T0 + 150 * S, None, &settings, 0),
            Update::NotOwner
        );
        let r = completed(&r, "b", T0 + 150 * S, None, &settings, 0)
            .into_record()
            .unwrap();
        assert_eq!(r.due_at_ms, T0 + 3750 * S);
        assert_eq!(r.due_reason, DueReason::Schedule);
        assert_eq!(
            r.signal_window_started_at_ms, None,
            "the window was answered"
        );
    }

    #[test]
    fn a_signal_in_the_millisecond_a_run_began_is_not_lost() {
        // The run is claimed at T0 and the signal taken while it runs, in
        // the same millisecond (a paused clock, a coarse one): the run
        // began before the signal, so it does not answer it.
        let settings = ScheduleSettings {
            interval_ms: 3600 * S,
            retry_interval_ms: 0,
            jitter_ms: 0,
        };
        let d = Debounce::default();
        let r = discovered(key(), T0, &settings, 0);
        let Claim::Claimed(r) = claim(&r, "a", T0, 600 * S) else {
            panic!("due at discovery")
        };
        let r = signal(Some(&r), &key(), &sig("trigger", None, true), T0, &d);
        let r = completed(&r, "a", T0, None, &settings, 0)
            .into_record()
            .unwrap();
        assert_eq!(r.due_reason, by_signal("trigger"), "{r:?}");
        assert_eq!(r.due_at_ms, T0, "due now, not at the next interval");
    }

    #[test]
    fn record_serde_is_named_and_round_trips() {
        let r = signal(
            Some(&record(T0)),
            &key(),
            &sig("hook", None, false),
            T0 - 100 * S,
            &Debounce::default(),
        );
        let bytes = rmp_serde::to_vec_named(&r).unwrap();
        assert_eq!(rmp_serde::from_slice::<KeySchedule>(&bytes).unwrap(), r);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["due_reason"],
            serde_json::json!({"signal": {"source": "hook"}})
        );
        let s: ScheduleSettings = serde_json::from_str("{}").unwrap();
        assert_eq!(s, ScheduleSettings::default());
        let d: Debounce = serde_json::from_str(r#"{"delay_ms": 5}"#).unwrap();
        assert_eq!(
            d,
            Debounce {
                delay_ms: 5,
                max_wait_ms: DEFAULT_MAX_WAIT_MS
            }
        );
    }

    fn debounce() -> impl Strategy<Value = Debounce> {
        (0..120 * S, 0..1200 * S).prop_map(|(delay_ms, max_wait_ms)| Debounce {
            delay_ms,
            max_wait_ms,
        })
    }

    proptest! {
        /// Signals without runs, received in order (gaps up to 5 min):
        /// the window starts at the first and stays; a delayed signal is due
        /// no later than window + max_wait, and no earlier than the signal
        /// unless the cap passed (then it is due at the cap, overdue) or a
        /// scheduled run at or before its due was kept; an immediate one is
        /// due at the signal or at an earlier scheduled run.
        #[test]
        fn signals_without_runs_respect_the_window(
            deb in debounce(),
            scheduled_in in prop::option::of(0..2000 * S),
            steps in prop::collection::vec((0..300 * S, any::<bool>()), 1..40),
        ) {
            let delay = nonzero(deb.delay_ms, DEFAULT_DELAY_MS);
            let max_wait = nonzero(deb.max_wait_ms, DEFAULT_MAX_WAIT_MS);
            let mut r = scheduled_in.map(|s| record(T0 + s));
            let mut at = T0;
            let mut first = None;
            for (n, (gap, immediate)) in steps.into_iter().enumerate() {
                at += gap;
                let before = r.clone();
                let got = signal(r.as_ref(), &key(), &sig("p", Some(at), immediate), at, &deb);
                let window = *first.get_or_insert(at);
                prop_assert_eq!(got.signal_window_started_at_ms, Some(window), "#{}", n);
                let asked = if immediate { at } else { (at + delay).min(window + max_wait) };
                let kept = before.as_ref().and_then(|b| b.scheduled_at_ms).filter(|&s| s <= asked);
                match kept {
                    Some(s) => {
                        prop_assert_eq!(got.due_at_ms, s, "#{}: scheduled run kept", n);
                        prop_assert_eq!(&got.due_reason, &before.unwrap().due_reason);
                    }
                    None => {
                        prop_assert_eq!(got.due_at_ms, asked, "#{}", n);
                        prop_assert_eq!(&got.due_reason, &by_signal("p"));
                        if !immediate {
                            prop_assert!(got.due_at_ms <= window + max_wait, "#{}: past the cap", n);
                            prop_assert!(got.due_at_ms >= at.min(window + max_wait), "#{}: before the signal", n);
                        }
                    }
                }
                if !immediate {
                    prop_assert!(got.due_at_ms <= window + max_wait, "#{}: past the cap", n);
                } else {
                    prop_assert!(got.due_at_ms <= at, "#{}: immediate is not postponed past the signal", n);
                }
                r = Some(got);
            }
        }
    }
}
