//! Retry policy: how long a failed attempt waits before the next, and when
//! to stop.
//!
//! The arithmetic is Temporal's: `attempts_max` counts the first attempt
//! (0 = unlimited); the first retry waits `initial_ms`, each later one
//! `multiplier` times the one before, capped at `max_ms`. A permanent
//! failure stops at once. A deadline (`deadline_ms` after the ticket's first
//! due instant) stops retrying when the next attempt would start after it.
//! Jitter takes up to `jitter` (a fraction) off the wait, drawn from a random
//! value the caller passes in, so replay and tests are exact and the wait
//! never exceeds `max_ms`.

use serde::{Deserialize, Serialize};

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AttemptOutcome {
    /// The task succeeded.
    Success,
    /// The task failed and may succeed if tried again.
    Retryable,
    /// The task failed and will fail again: do not retry.
    Permanent,
    /// The attempt ran past its timeout; retried like a retryable failure.
    Timeout,
    /// A sensor's check found its condition not met: not a failure. A
    /// ticket with a sensor policy checks again later without an attempt
    /// spent (see `sensor`); any other is retried as a retryable failure.
    NotMet,
}

/// A retry policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct RetryPolicy {
    /// Attempts in all, counting the first; 0 = unlimited.
    pub attempts_max: u32,
    /// The wait before the first retry, in ms.
    pub initial_ms: u64,
    /// The factor between consecutive waits (≥ 1).
    pub multiplier: f64,
    /// The longest wait, in ms.
    pub max_ms: u64,
    /// The largest fraction (0..=1) of a wait that jitter takes off.
    pub jitter: f64,
    /// No attempt starts later than this many ms after the ticket's first
    /// due instant; `None` = no deadline.
    pub deadline_ms: Option<u64>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts_max: 3,
            initial_ms: 1_000,
            multiplier: 2.0,
            max_ms: 60_000,
            jitter: 0.0,
            deadline_ms: None,
        }
    }
}

/// Why a policy is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RetryPolicyError {
    /// The multiplier is below 1 or not a number.
    #[error("multiplier {0} is not a number ≥ 1")]
    Multiplier(f64),
    /// The jitter is outside 0..=1.
    #[error("jitter {0} is not a fraction between 0 and 1")]
    Jitter(f64),
    /// The maximum wait is below the initial wait.
    #[error("max_ms {max_ms} is below initial_ms {initial_ms}")]
    MaxBelowInitial {
        /// The maximum wait.
        max_ms: u64,
        /// The initial wait.
        initial_ms: u64,
    },
}

/// What to do after an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[must_use]
pub enum Plan {
    /// The ticket is done: it succeeded, or retrying is over.
    Stop(Stop),
    /// Run again after this many ms.
    Wait(u64),
}

/// Why a ticket stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stop {
    /// The attempt succeeded.
    Succeeded,
    /// The attempt failed permanently.
    Permanent,
    /// No attempt is left.
    AttemptsSpent,
    /// The next attempt would start after the deadline.
    DeadlinePassed,
    /// A sensor's condition was still not met at its timeout.
    SensorTimedOut,
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn once() -> Self {
        RetryPolicy {
            attempts_max: 1,
            ..RetryPolicy::default()
        }
    }

    /// Checks the fields.
    pub fn validate(&self) -> Result<(), RetryPolicyError> {
        // NaN fails both comparisons, so test for the valid range.
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(RetryPolicyError::Multiplier(self.multiplier));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(RetryPolicyError::Jitter(self.jitter));
        }
        if self.max_ms < self.initial_ms {
            return Err(RetryPolicyError::MaxBelowInitial {
                max_ms: self.max_ms,
                initial_ms: self.initial_ms,
            });
        }
        Ok(())
    }

    /// The un-jittered wait after attempt number `attempt` (1 = the first)
    /// failed, or `None` when no attempt is left after it.
    pub fn delay_ms(&self, attempt: u32) -> Option<u64> {
        if attempt == 0 {
            return Some(0);
        }
        if self.attempts_max != 0 && attempt >= self.attempts_max {
            return None;
        }
        // initial × multiplier^(attempt-1), capped; computed in f64 and
        // clamped, so a huge exponent saturates at max_ms instead of
        // overflowing.
        let factor = self
            .multiplier
            .max(1.0)
            .powi((attempt - 1).min(i32::MAX as u32) as i32);
        let raw = self.initial_ms as f64 * factor;
        let capped = if raw.is_finite() && raw < self.max_ms as f64 {
            raw as u64
        } else {
            self.max_ms
        };
        Some(capped.min(self.max_ms))
    }

    /// The wait after attempt `attempt` failed, with jitter from `draw`
    /// (any `u64`, read as a fraction of 2^64).
    pub fn jittered_delay_ms(&self, attempt: u32, draw: u64) -> Option<u64> {
        let delay = self.delay_ms(attempt)?;
        let jitter = self.jitter.clamp(0.0, 1.0);
        if jitter == 0.0 || delay == 0 {
            return Some(delay);
        }
        let fraction = draw as f64 / (u64::MAX as f64 + 1.0);
        let off = (delay as f64 * jitter * fraction) as u64;
        Some(delay - off.min(delay))
    }
}

/// The failures so far of one ticket, its hand-outs that a breaker held back
/// before they ran, and the instant it was first due, from which the policy
/// deadline counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Tries {
    /// Attempts that failed (requeued), before the one being planned.
    pub failures: u32,
    /// Hand-outs deferred before their task started (a breaker held them
    /// back, or the grant was lost with a queue incarnation): not attempts,
    /// so the retry policy spends nothing on them. Records written before
    /// this count existed read as 0.
    #[serde(default)]
    pub deferrals: u32,
    /// Checks of a sensor that found its condition not met (pokes): not
    /// attempts either. Left out of the encoding at 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pokes: u32,
    /// Crash orphans in a row whose attempt had not said it started (see
    /// the queue's `orphans`); 0 once an attempt starts. Older records read
    /// 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unstarted_orphans: u32,
    /// The ticket's first due instant, in ms since the epoch.
    pub first_due_ms: u64,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// What follows an attempt that ended with `outcome` at `now_ms`, given the
/// ticket's earlier `tries`. `draw` is a random value for jitter.
pub fn plan(
    outcome: AttemptOutcome,
    policy: &RetryPolicy,
    tries: Tries,
    now_ms: u64,
    draw: u64,
) -> Plan {
    plan_waiting(outcome, policy, tries, now_ms, draw, 0)
}

/// As [`plan`], with a retry waiting at least `min_wait_ms` (the wait a
/// server asked for with `Retry-After`). The deadline counts the longer
/// wait: a retry that would start after it does not happen.
pub fn plan_waiting(
    outcome: AttemptOutcome,
    policy: &RetryPolicy,
    tries: Tries,
    now_ms: u64,
    draw: u64,
    min_wait_ms: u64,
) -> Plan {
    match outcome {
        AttemptOutcome::Success => Plan::Stop(Stop::Succeeded),
        AttemptOutcome::Permanent => Plan::Stop(Stop::Permanent),
        AttemptOutcome::Retryable | AttemptOutcome::Timeout | AttemptOutcome::NotMet => {
            let attempt = tries.failures.saturating_add(1);
            let Some(wait_ms) = policy.jittered_delay_ms(attempt, draw) else {
                return Plan::Stop(Stop::AttemptsSpent);
            };
            let wait_ms = wait_ms.max(min_wait_ms);
            if let Some(deadline_ms) = policy.deadline_ms {
                let deadline_at = tries.first_due_ms.saturating_add(deadline_ms);
                if now_ms.saturating_add(wait_ms) > deadline_at {
                    return Plan::Stop(Stop::DeadlinePassed);
                }
            }
            Plan::Wait(wait_ms)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(attempts_max: u32, initial_ms: u64, multiplier: f64, max_ms: u64) -> RetryPolicy {
        RetryPolicy {
            attempts_max,
            initial_ms,
            multiplier,
            max_ms,
            jitter: 0.0,
            deadline_ms: None,
        }
    }

    /// A server's Retry-After lengthens the wait, never shortens it, and
    /// counts against the deadline.
    #[test]
    fn a_minimum_wait_lengthens_the_policys() {
        let p = policy(5, 1_000, 2.0, 100_000);
        let tries = Tries {
            failures: 0,
            deferrals: 0,
            pokes: 0,
            unstarted_orphans: 0,
            first_due_ms: 0,
        };
        let r = AttemptOutcome::Retryable;
        assert_eq!(plan_waiting(r, &p, tries, 0, 0, 0), Plan::Wait(1_000));
        assert_eq!(plan_waiting(r, &p, tries, 0, 0, 5_000), Plan::Wait(5_000));
        assert_eq!(plan_waiting(r, &p, tries, 0, 0, 10), Plan::Wait(1_000));
        let mut d = p.clone();
        d.deadline_ms = Some(3_000);
        assert_eq!(
            plan_waiting(r, &d, tries, 0, 0, 5_000),
            Plan::Stop(Stop::DeadlinePassed)
        );
        assert_eq!(
            plan_waiting(AttemptOutcome::Permanent, &p, tries, 0, 0, 5_000),
            Plan::Stop(Stop::Permanent)
        );
    }

    /// Attempt number and the delay after it failed.
    type DelayRows = &'static [(u32, Option<u64>)];

    /// Temporal's retry arithmetic: delays for each failed attempt number.
    #[test]
    fn delays_table() {
        let cases: &[(RetryPolicy, DelayRows)] = &[
            (
                policy(5, 1_000, 2.0, 100_000),
                &[
                    (1, Some(1_000)),
                    (2, Some(2_000)),
                    (3, Some(4_000)),
                    (4, Some(8_000)),
                    (5, None),
                ],
            ),
            (
                policy(0, 1_000, 2.0, 5_000),
                &[
                    (1, Some(1_000)),
                    (3, Some(4_000)),
                    (4, Some(5_000)),
                    (50, Some(5_000)),
                    (u32::MAX, Some(5_000)),
                ],
            ),
            (policy(1, 1_000, 2.0, 5_000), &[(1, None)]),
            (
                policy(3, 500, 1.0, 500),
                &[(1, Some(500)), (2, Some(500)), (3, None)],
            ),
            (
                policy(0, 100, 1.5, 10_000),
                &[(2, Some(150)), (3, Some(225))],
            ),
        ];
        for (i, (p, rows)) in cases.iter().enumerate() {
            for (attempt, want) in rows.iter() {
                let got = p.delay_ms(*attempt);
                assert_eq!(
                    got, *want,
                    "#{i}: policy {p:?}, attempt {attempt}: got {got:?}, want {want:?}"
                );
            }
        }
    }

    #[test]
    fn plan_table() {
        let base = policy(3, 1_000, 2.0, 60_000);
        let deadline = RetryPolicy {
            deadline_ms: Some(10_000),
            ..base.clone()
        };
        let t = |failures| Tries {
            failures,
            deferrals: 0,
            pokes: 0,
            unstarted_orphans: 0,
            first_due_ms: 1_000,
        };
        use AttemptOutcome::*;
        let cases: &[(AttemptOutcome, &RetryPolicy, Tries, u64, Plan)] = &[
            (Success, &base, t(0), 5_000, Plan::Stop(Stop::Succeeded)),
            (Permanent, &base, t(0), 5_000, Plan::Stop(Stop::Permanent)),
            (Retryable, &base, t(0), 5_000, Plan::Wait(1_000)),
            (Timeout, &base, t(1), 5_000, Plan::Wait(2_000)),
            (
                Retryable,
                &base,
                t(2),
                5_000,
                Plan::Stop(Stop::AttemptsSpent),
            ),
            // deadline at 11_000: an attempt at 9_000 + 1_000 = 10_000 still starts.
            (Retryable, &deadline, t(0), 9_000, Plan::Wait(1_000)),
            (Retryable, &deadline, t(0), 10_000, Plan::Wait(1_000)),
            (
                Retryable,
                &deadline,
                t(0),
                10_001,
                Plan::Stop(Stop::DeadlinePassed),
            ),
            (
                Retryable,
                &deadline,
                t(1),
                9_500,
                Plan::Stop(Stop::DeadlinePassed),
            ),
        ];
        for (i, (o, p, tries, now, want)) in cases.iter().enumerate() {
            let got = plan(*o, p, *tries, *now, 0);
            assert_eq!(
                got, *want,
                "#{i}: {o:?} tries {tries:?} now {now}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn jitter_stays_within_bounds() {
        let p = RetryPolicy {
            jitter: 0.5,
            ..policy(0, 1_000, 2.0, 8_000)
        };
        for draw in [0, 1, u64::MAX / 3, u64::MAX / 2, u64::MAX] {
            for attempt in 1..10 {
                let full = p.delay_ms(attempt).unwrap();
                let got = p.jittered_delay_ms(attempt, draw).unwrap();
                assert!(
                    got <= full && got >= full / 2,
                    "attempt {attempt} draw {draw}: {got} vs {full}"
                );
            }
        }
        assert_eq!(p.jittered_delay_ms(1, 0), Some(1_000));
        assert_eq!(p.jittered_delay_ms(1, u64::MAX / 2 + 1), Some(750));
    }

    #[test]
    fn validation() {
        assert!(RetryPolicy::default().validate().is_ok());
        assert!(RetryPolicy {
            multiplier: 0.5,
            ..RetryPolicy::default()
        }
        .validate()
        .is_err());
        assert!(RetryPolicy {
            multiplier: f64::NAN,
            ..RetryPolicy::default()
        }
        .validate()
        .is_err());
        assert!(RetryPolicy {
            jitter: 1.5,
            ..RetryPolicy::default()
        }
        .validate()
        .is_err());
        assert!(RetryPolicy {
            max_ms: 1,
            ..RetryPolicy::default()
        }
        .validate()
        .is_err());
    }
}
