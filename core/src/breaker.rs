//! A circuit breaker per target: it defers work to a failing target instead
//! of burning attempts on it.
//!
//! States (resilience4j and failsafe): *closed* counts outcomes and trips
//! on `failures_max` consecutive failures, or on a failure rate of at least
//! `failure_rate` over the last `window_calls` outcomes once `min_calls`
//! were seen; *open* denies everything for `cooldown_ms`; the first admit
//! after the cooldown moves it to *half-open* (on demand, not on a timer),
//! which admits `probes` calls. The probes are a window that is decided as
//! soon as its outcome is certain (failsafe's half-open thresholds): it
//! reopens at the `probe_failures_max`-th failed probe, since the window
//! can then no longer close (with 3 probes and `probe_failures_max = 1`,
//! that is 3 successes needed of 3, the first failure reopens it), and it
//! closes as soon as the probes still out could no longer bring the
//! failures to `probe_failures_max` (with 4 probes and 2 failures to
//! reopen, 3 successes close it). With one probe (the default) that probe
//! decides; `ceil(rate × probes)` gives resilience4j's failure-rate
//! threshold over the half-open calls. A half-open breaker whose probes
//! are all out denies until they report. Probes still out when the window
//! was decided report into the state it moved to: ignored while open,
//! counted as ordinary outcomes once closed.
//! Outcomes that arrive while open are ignored (they belong to calls
//! admitted before it opened).
//!
//! The cooldown's edge: an open breaker denies while `now < opened_at +
//! cooldown` and admits a probe at exactly `opened_at + cooldown`
//! (resilience4j admits only after it; one millisecond apart, and this way
//! a deferred ticket due at `until_ms` is admitted when it comes due). The state is a plain value:
//! the breaker actor persists it on every transition, so a restart keeps an
//! open breaker open.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Settings of one breaker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct BreakerSettings {
    /// Consecutive failures that trip it; 0 = this rule is off.
    pub failures_max: u32,
    /// Failure fraction (0..=1) over the window that trips it; 0 = off.
    pub failure_rate: f64,
    /// Outcomes the rate is computed over.
    pub window_calls: u32,
    /// Outcomes needed in the window before the rate counts.
    pub min_calls: u32,
    /// How long it stays open.
    pub cooldown_ms: u64,
    /// Calls admitted while half-open.
    pub probes: u32,
    /// Failed probes that reopen it (1..=probes): it reopens at the one
    /// that reaches this count, without waiting for the probes still out,
    /// and closes as soon as the probes left cannot reach it. Left out of
    /// the encoding at its default (1), so definitions written before it
    /// keep their hash.
    #[serde(skip_serializing_if = "is_one")]
    pub probe_failures_max: u32,
    /// How long a call denied while half-open (all probes out) waits.
    pub probe_wait_ms: u64,
}

fn is_one(v: &u32) -> bool {
    *v == 1
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failures_max: 5,
            failure_rate: 0.0,
            window_calls: 20,
            min_calls: 10,
            cooldown_ms: 30_000,
            probes: 1,
            probe_failures_max: 1,
            probe_wait_ms: 1_000,
        }
    }
}

/// Why settings are not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BreakerSettingsError {
    /// Neither rule can trip the breaker.
    #[error("failures_max and failure_rate are both 0: the breaker could never open")]
    NeverTrips,
    /// The rate is not a fraction.
    #[error("failure_rate {0} is not a fraction between 0 and 1")]
    Rate(f64),
    /// A half-open breaker must admit at least one probe.
    #[error("probes is 0: a half-open breaker could never close")]
    NoProbes,
    /// The failed probes that reopen it must be 1..=probes.
    #[error("probe_failures {probe_failures_max} must be between 1 and probes ({probes})")]
    ProbeFailures {
        /// The failed probes that reopen it.
        probe_failures_max: u32,
        /// The probes.
        probes: u32,
    },
    /// The window is empty or smaller than its minimum.
    #[error("window_calls {window_calls} must be at least 1 and at least min_calls {min_calls}")]
    Window {
        /// The window.
        window_calls: u32,
        /// Its minimum.
        min_calls: u32,
    },
}

impl BreakerSettings {
    /// Checks the fields.
    pub fn validate(&self) -> Result<(), BreakerSettingsError> {
        if !(0.0..=1.0).contains(&self.failure_rate) {
            return Err(BreakerSettingsError::Rate(self.failure_rate));
        }
        if self.failures_max == 0 && self.failure_rate == 0.0 {
            return Err(BreakerSettingsError::NeverTrips);
        }
        if self.probes == 0 {
            return Err(BreakerSettingsError::NoProbes);
        }
        if self.probe_failures_max == 0 || self.probe_failures_max > self.probes {
            return Err(BreakerSettingsError::ProbeFailures {
                probe_failures_max: self.probe_failures_max,
                probes: self.probes,
            });
        }
        if self.failure_rate > 0.0 && (self.window_calls == 0 || self.window_calls < self.min_calls)
        {
            return Err(BreakerSettingsError::Window {
                window_calls: self.window_calls,
                min_calls: self.min_calls,
            });
        }
        Ok(())
    }
}

/// A breaker's state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BreakerState {
    /// Admitting; counting outcomes.
    Closed {
        /// Failures since the last success.
        consecutive_failures: u32,
        /// The last outcomes, oldest first: true = failure.
        window: VecDeque<bool>,
    },
    /// Denying until `until_ms`.
    Open {
        /// When it opened.
        since_ms: u64,
        /// When the first admit may move it to half-open.
        until_ms: u64,
    },
    /// Admitting up to `probes` calls.
    HalfOpen {
        /// Probes admitted.
        admitted: u32,
        /// Probes that succeeded.
        succeeded: u32,
        /// Probes that failed (absent in records written before probes
        /// were a window: none had failed, or it would have reopened).
        #[serde(default)]
        failed: u32,
    },
}

impl Default for BreakerState {
    fn default() -> Self {
        BreakerState::Closed {
            consecutive_failures: 0,
            window: VecDeque::new(),
        }
    }
}

/// What `admit` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Admit {
    /// Closed: go ahead.
    Allowed,
    /// Half-open: go ahead as a probe.
    Probe,
    /// Not now: defer until `until_ms`, without spending an attempt.
    Denied {
        /// When it may admit again.
        until_ms: u64,
    },
}

/// A change of state, for the log and for persisting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Closed → open.
    Opened,
    /// Open → half-open.
    HalfOpened,
    /// Half-open → open.
    Reopened,
    /// Half-open → closed.
    Closed,
    /// Any state → closed, by an operator ([`Breaker::reset`]).
    Reset,
}

/// A breaker: settings and state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Breaker {
    /// Its settings.
    pub settings: BreakerSettings,
    /// Its state.
    pub state: BreakerState,
    /// When it last changed state (ms since the epoch); `None` before its
    /// first transition, and in records written before this was kept.
    #[serde(default)]
    pub changed_at_ms: Option<u64>,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(settings: BreakerSettings) -> Self {
        Breaker {
            settings,
            state: BreakerState::default(),
            changed_at_ms: None,
        }
    }

    /// An operator's reset at `now_ms`: closed, with no failures counted,
    /// whatever the state was. Always a transition (even from closed: the
    /// count of failures starts over), so the caller persists it and says
    /// so.
    pub fn reset(&mut self, now_ms: u64) -> Transition {
        self.state = BreakerState::default();
        self.changed_at_ms = Some(now_ms);
        Transition::Reset
    }

    /// The state's name: `closed`, `open` or `half_open`.
    pub fn state_name(&self) -> &'static str {
        match self.state {
            BreakerState::Closed { .. } => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }

    /// Whether a call may start at `now_ms`. Moves open to half-open on the
    /// first admit after the cooldown, and counts half-open probes.
    pub fn admit(&mut self, now_ms: u64) -> (Admit, Option<Transition>) {
        match &mut self.state {
            BreakerState::Closed { .. } => (Admit::Allowed, None),
            BreakerState::Open { until_ms, .. } => {
                if now_ms < *until_ms {
                    (
                        Admit::Denied {
                            until_ms: *until_ms,
                        },
                        None,
                    )
                } else {
                    self.state = BreakerState::HalfOpen {
                        admitted: 1,
                        succeeded: 0,
                        failed: 0,
                    };
                    self.changed_at_ms = Some(now_ms);
                    (Admit::Probe, Some(Transition::HalfOpened))
                }
            }
            BreakerState::HalfOpen { admitted, .. } => {
                if *admitted < self.settings.probes {
                    *admitted += 1;
                    (Admit::Probe, None)
                } else {
                    let until_ms = now_ms.saturating_add(self.settings.probe_wait_ms.max(1));
                    (Admit::Denied { until_ms }, None)
                }
            }
        }
    }

    /// Counts the outcome of a call that ended at `now_ms`.
    pub fn record(&mut self, now_ms: u64, failed: bool) -> Option<Transition> {
        let s = &self.settings;
        match &mut self.state {
            BreakerState::Open { .. } => None,
            BreakerState::Closed {
                consecutive_failures,
                window,
            } => {
                if failed {
                    *consecutive_failures = consecutive_failures.saturating_add(1);
                } else {
                    *consecutive_failures = 0;
                }
                if s.failure_rate > 0.0 {
                    window.push_back(failed);
                    while window.len() > s.window_calls as usize {
                        window.pop_front();
                    }
                }
                let by_count = s.failures_max > 0 && *consecutive_failures >= s.failures_max;
                let by_rate =
                    s.failure_rate > 0.0 && window.len() >= s.min_calls.max(1) as usize && {
                        let failures = window.iter().filter(|&&f| f).count();
                        failures as f64 >= s.failure_rate * window.len() as f64
                    };
                if by_count || by_rate {
                    self.open(now_ms);
                    Some(Transition::Opened)
                } else {
                    None
                }
            }
            BreakerState::HalfOpen {
                succeeded,
                failed: failures,
                ..
            } => {
                if failed {
                    *failures += 1;
                } else {
                    *succeeded += 1;
                }
                // Decided as soon as the outcome is certain, both ways
                // (failsafe's half-open thresholds): failures only grow, so
                // at `reopen_at` failures the window can no longer close;
                // when the probes still out could not bring the failures to
                // `reopen_at`, it can no longer reopen.
                let reopen_at = s.probe_failures_max.max(1);
                let reported = *succeeded + *failures;
                let out = s.probes.saturating_sub(reported);
                if *failures >= reopen_at {
                    self.open(now_ms);
                    Some(Transition::Reopened)
                } else if failures.saturating_add(out) < reopen_at {
                    self.state = BreakerState::default();
                    self.changed_at_ms = Some(now_ms);
                    Some(Transition::Closed)
                } else {
                    None
                }
            }
        }
    }

    fn open(&mut self, now_ms: u64) {
        self.changed_at_ms = Some(now_ms);
        self.state = BreakerState::Open {
            since_ms: now_ms,
            until_ms: now_ms.saturating_add(self.settings.cooldown_ms),
        };
    }

    /// Whether it is open (denying) at `now_ms`, without changing it.
    pub fn is_open_at(&self, now_ms: u64) -> bool {
        matches!(self.state, BreakerState::Open { until_ms, .. } if now_ms < until_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a trace: admit at t, or record an outcome at t.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        Admit(u64, Admit),
        Ok(u64, Option<Transition>),
        Fail(u64, Option<Transition>),
    }
    use Step::{Fail, Ok};
    const fn at(t: u64, a: super::Admit) -> Step {
        Step::Admit(t, a)
    }

    fn run(settings: BreakerSettings, trace: &[Step]) {
        let mut b = Breaker::new(settings.clone());
        for (i, step) in trace.iter().enumerate() {
            match *step {
                Step::Admit(t, want) => {
                    let (got, _) = b.admit(t);
                    assert_eq!(
                        got, want,
                        "#{i}: admit at {t}: got {got:?}, want {want:?} (state {:?})",
                        b.state
                    );
                }
                Ok(t, want) => {
                    let got = b.record(t, false);
                    assert_eq!(
                        got, want,
                        "#{i}: success at {t}: got {got:?}, want {want:?}"
                    );
                }
                Fail(t, want) => {
                    let got = b.record(t, true);
                    assert_eq!(
                        got, want,
                        "#{i}: failure at {t}: got {got:?}, want {want:?}"
                    );
                }
            }
        }
    }

    /// Traces after resilience4j's CircuitBreakerStateMachine tests: trip on
    /// consecutive failures, deny while open, half-open on the first admit
    /// after the wait, close or reopen on the probes.
    #[test]
    fn consecutive_failures_trace() {
        let s = BreakerSettings {
            failures_max: 3,
            cooldown_ms: 100,
            probes: 2,
            probe_wait_ms: 10,
            ..BreakerSettings::default()
        };
        run(
            s,
            &[
                at(0, super::Admit::Allowed),
                Fail(1, None),
                Fail(2, None),
                Ok(3, None), // a success resets the count
                Fail(4, None),
                Fail(5, None),
                Fail(6, Some(Transition::Opened)),
                at(7, super::Admit::Denied { until_ms: 106 }),
                Fail(8, None), // outcomes while open are ignored
                at(105, super::Admit::Denied { until_ms: 106 }),
                at(106, super::Admit::Probe),
                at(107, super::Admit::Probe),
                at(108, super::Admit::Denied { until_ms: 118 }),
                Ok(109, None),
                Fail(110, Some(Transition::Reopened)),
                at(150, super::Admit::Denied { until_ms: 210 }),
                at(210, super::Admit::Probe),
                Ok(211, None),
                at(212, super::Admit::Probe),
                Ok(213, Some(Transition::Closed)),
                at(214, super::Admit::Allowed),
                Fail(215, None),
            ],
        );
    }

    #[test]
    fn failure_rate_trace() {
        let s = BreakerSettings {
            failures_max: 0,
            failure_rate: 0.5,
            window_calls: 4,
            min_calls: 4,
            cooldown_ms: 50,
            probes: 1,
            ..BreakerSettings::default()
        };
        run(
            s,
            &[
                Fail(0, None),
                Fail(1, None),
                Ok(2, None),                     // 2 of 3: below min_calls
                Ok(3, Some(Transition::Opened)), // 2 of 4 = 0.5
                at(60, super::Admit::Probe),
                Ok(61, Some(Transition::Closed)),
                Ok(62, None),
                Ok(63, None),
                Fail(64, None),
                Ok(65, None),                       // window [ok, ok, fail, ok]: 0.25
                Fail(66, Some(Transition::Opened)), // [ok, fail, ok, fail]: 0.5
            ],
        );
    }

    /// The half-open probes are a window decided as soon as its outcome is
    /// certain, both ways. The rows follow failsafe's half-open thresholds
    /// (`withFailureThreshold(2, 4)`: 2 failures of 4 calls reopen it, at
    /// the second failure, since the window can then no longer close; it
    /// closes as soon as the calls left cannot make 2 failures). Where a
    /// row ends, the window was decided: the probes still out report into
    /// the new state. Each row: the outcomes of the 4 probes in order
    /// (true = failed), and the transition after each.
    #[test]
    fn half_open_decides_on_the_window() {
        use Transition::{Closed, Reopened};
        let s = BreakerSettings {
            failures_max: 1,
            cooldown_ms: 100,
            probes: 4,
            probe_failures_max: 2,
            probe_wait_ms: 10,
            ..BreakerSettings::default()
        };
        let table: &[(&[bool], &[Option<Transition>])] = &[
            // Two failures first: the window cannot close any more.
            (&[true, true], &[None, Some(Reopened)]),
            (&[true, false, true], &[None, None, Some(Reopened)]),
            (
                &[false, true, false, true],
                &[None, None, None, Some(Reopened)],
            ),
            // One failure of 4: the 4th decides (failsafe and resilience4j agree).
            (
                &[true, false, false, false],
                &[None, None, None, Some(Closed)],
            ),
            (
                &[false, true, false, false],
                &[None, None, None, Some(Closed)],
            ),
            // After 3 successes the one probe left cannot make 2 failures.
            (&[false, false, false], &[None, None, Some(Closed)]),
        ];
        for (row, (outcomes, want)) in table.iter().enumerate() {
            assert_eq!(outcomes.len(), want.len(), "row {row}: malformed");
            let mut b = Breaker::new(s.clone());
            assert_eq!(b.record(0, true), Some(Transition::Opened));
            for _ in 0..4 {
                assert_eq!(b.admit(100).0, super::Admit::Probe, "row {row}");
            }
            assert_eq!(
                b.admit(101).0,
                super::Admit::Denied { until_ms: 111 },
                "row {row}: all probes out"
            );
            for (i, (&failed, &want)) in outcomes.iter().zip(want.iter()).enumerate() {
                let got = b.record(102 + i as u64, failed);
                assert_eq!(
                    got, want,
                    "row {row}, probe {i}: outcomes {outcomes:?}: got {got:?}, want {want:?}"
                );
            }
        }
    }

    /// failsafe's rule as the issue states it (#43 item 15): 3 probes that
    /// need 3 successes (`probe_failures_max = 1`) reopen at the first
    /// failure, with the two other probes still out; their late outcomes
    /// are ignored while open, and the cooldown starts at the failure.
    #[test]
    fn the_first_failure_of_three_probes_needing_three_successes_reopens() {
        let s = BreakerSettings {
            failures_max: 1,
            cooldown_ms: 100,
            probes: 3,
            probe_failures_max: 1,
            probe_wait_ms: 10,
            ..BreakerSettings::default()
        };
        run(
            s,
            &[
                Fail(0, Some(Transition::Opened)),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                Fail(101, Some(Transition::Reopened)),
                at(102, super::Admit::Denied { until_ms: 201 }),
                Ok(103, None), // a probe still out: ignored while open
                Ok(104, None),
                at(200, super::Admit::Denied { until_ms: 201 }),
                at(201, super::Admit::Probe),
            ],
        );
    }

    /// After the window decided, the breaker behaves as its new state: a
    /// late probe is ignored while open, and a closed one admits.
    #[test]
    fn after_the_window_decides() {
        let s = BreakerSettings {
            failures_max: 1,
            cooldown_ms: 100,
            probes: 4,
            probe_failures_max: 2,
            probe_wait_ms: 10,
            ..BreakerSettings::default()
        };
        run(
            s.clone(),
            &[
                Fail(0, Some(Transition::Opened)),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                Ok(101, None),
                Ok(102, None),
                Ok(103, Some(Transition::Closed)), // the 4th probe cannot make 2 failures
                at(104, super::Admit::Allowed),
            ],
        );
        run(
            s,
            &[
                Fail(0, Some(Transition::Opened)),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                at(100, super::Admit::Probe),
                Fail(101, None),
                Fail(102, Some(Transition::Reopened)), // 2 failed: it can no longer close
                Ok(103, None),                         // late outcomes, ignored while open
                Ok(104, None),
                at(106, super::Admit::Denied { until_ms: 202 }),
            ],
        );
    }

    /// With the default `probe_failures_max = 1` and several probes, the
    /// first failed probe reopens it, whatever the probes still out do.
    #[test]
    fn one_failure_of_the_window_reopens_by_default() {
        let s = BreakerSettings {
            failures_max: 1,
            cooldown_ms: 10,
            probes: 3,
            ..BreakerSettings::default()
        };
        assert_eq!(s.probe_failures_max, 1);
        run(
            s,
            &[
                Fail(0, Some(Transition::Opened)),
                at(9, super::Admit::Denied { until_ms: 10 }),
                at(10, super::Admit::Probe), // admitted at exactly opened + cooldown
                at(10, super::Admit::Probe),
                at(10, super::Admit::Probe),
                Ok(11, None),
                Fail(12, Some(Transition::Reopened)),
                Ok(13, None),
            ],
        );
    }

    proptest::proptest! {
        /// For any window (`probes`, `probe_failures_max`) and any order of
        /// probe outcomes: the window is decided exactly at the first probe
        /// after which its verdict is certain (failures reached the
        /// threshold, or the probes left cannot reach it), and the verdict
        /// is the one the whole window would give (reopen iff at least
        /// `probe_failures_max` of all `probes` failed) — deciding early
        /// never changes the answer, only when it comes.
        #[test]
        fn half_open_decides_at_the_first_certain_probe(
            probes in 1u32..=8,
            threshold_pick in 0u32..8,
            outcomes in proptest::collection::vec(proptest::bool::ANY, 8),
        ) {
            let probe_failures_max = 1 + threshold_pick % probes;
            let outcomes = &outcomes[..probes as usize];
            let s = BreakerSettings {
                failures_max: 1,
                cooldown_ms: 100,
                probes,
                probe_failures_max,
                ..BreakerSettings::default()
            };
            let mut b = Breaker::new(s);
            proptest::prop_assert_eq!(b.record(0, true), Some(Transition::Opened));
            for _ in 0..probes {
                proptest::prop_assert_eq!(b.admit(100).0, Admit::Probe);
            }
            let failed_total = outcomes.iter().filter(|&&f| f).count() as u32;
            let verdict = if failed_total >= probe_failures_max {
                Transition::Reopened
            } else {
                Transition::Closed
            };
            let mut failed = 0u32;
            let mut decided = None;
            for (i, &f) in outcomes.iter().enumerate() {
                failed += u32::from(f);
                let left = probes - (i as u32 + 1);
                let certain = failed >= probe_failures_max || failed + left < probe_failures_max;
                let got = b.record(101 + i as u64, f);
                if decided.is_some() {
                    // Decided earlier: a late probe never moves it again
                    // (ignored while open; counted while closed, where one
                    // failure would open it, so only successes are checked).
                    if verdict == Transition::Reopened || !f {
                        proptest::prop_assert_eq!(got, None, "probe {} after the decision", i);
                    }
                    continue;
                }
                if certain {
                    proptest::prop_assert_eq!(got, Some(verdict), "probe {}: {:?}", i, outcomes);
                    decided = Some(i);
                } else {
                    proptest::prop_assert_eq!(got, None, "probe {}: {:?}", i, outcomes);
                }
            }
            proptest::prop_assert!(decided.is_some(), "the last probe decides at the latest");
        }
    }

    /// A half-open record written before probes were a window (no
    /// `failed` field) still decodes.
    #[test]
    fn an_older_half_open_record_decodes() {
        #[derive(Serialize)]
        enum Old {
            #[allow(dead_code)]
            Closed,
            #[allow(dead_code)]
            Open,
            HalfOpen {
                admitted: u32,
                succeeded: u32,
            },
        }
        let bytes = crate::codec::encode(&Old::HalfOpen {
            admitted: 2,
            succeeded: 1,
        })
        .unwrap();
        let back: BreakerState = crate::codec::decode(&bytes).unwrap();
        assert_eq!(
            back,
            BreakerState::HalfOpen {
                admitted: 2,
                succeeded: 1,
                failed: 0
            }
        );
    }

    #[test]
    fn settings_validation() {
        assert!(BreakerSettings::default().validate().is_ok());
        let never = BreakerSettings {
            failures_max: 0,
            failure_rate: 0.0,
            ..BreakerSettings::default()
        };
        assert_eq!(never.validate(), Err(BreakerSettingsError::NeverTrips));
        let no_probes = BreakerSettings {
            probes: 0,
            ..BreakerSettings::default()
        };
        assert_eq!(no_probes.validate(), Err(BreakerSettingsError::NoProbes));
        let too_many = BreakerSettings {
            probes: 2,
            probe_failures_max: 3,
            ..BreakerSettings::default()
        };
        assert!(matches!(
            too_many.validate(),
            Err(BreakerSettingsError::ProbeFailures { .. })
        ));
    }

    /// A reset closes the breaker from any state and counts from zero.
    #[test]
    fn reset_closes_from_any_state() {
        let s = BreakerSettings {
            failures_max: 2,
            cooldown_ms: 100,
            ..BreakerSettings::default()
        };
        // (state reached by the steps, then reset at 50)
        let cases: &[(&str, &[bool])] =
            &[("closed with a failure", &[true]), ("open", &[true, true])];
        for (i, (what, fails)) in cases.iter().enumerate() {
            let mut b = Breaker::new(s.clone());
            for (t, f) in fails.iter().enumerate() {
                let _ = b.record(t as u64, *f);
            }
            assert_eq!(b.reset(50), Transition::Reset, "#{i}: {what}");
            assert_eq!(b.state, BreakerState::default(), "#{i}: {what}");
            assert_eq!(b.changed_at_ms, Some(50), "#{i}: {what}");
            assert_eq!(b.admit(51).0, Admit::Allowed, "#{i}: {what}");
            // One failure after the reset does not trip a threshold of 2.
            assert_eq!(b.record(52, true), None, "#{i}: {what}");
        }
    }

    #[test]
    fn state_survives_encoding() {
        let mut b = Breaker::new(BreakerSettings::default());
        for t in 0..5 {
            let _ = b.record(t, true);
        }
        assert!(b.is_open_at(10));
        let bytes = crate::codec::encode(&b).unwrap();
        let back: Breaker = crate::codec::decode(&bytes).unwrap();
        assert_eq!(back, b);
        assert!(back.is_open_at(10));
    }
}
