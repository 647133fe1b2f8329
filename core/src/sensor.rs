//! Sensors: a node that waits for a condition (a file, a command's exit
//! 0, an HTTP status) without holding a pool slot while it waits.
//!
//! Each check is one hand-out of the sensor's ticket: it takes a slot for
//! as long as the check runs. A check that finds the condition met
//! succeeds with what it saw. One that finds it not met is a *poke*, not
//! a failure: the queue journals a `Poke` that puts the ticket back in
//! its pool's pending order, due `every_ms` later, with no attempt spent
//! and no retry counted; nothing holds a slot until then. A check that
//! errors (the command cannot start, the connection is refused) is a
//! failed attempt, retried by the node's policy like any other.
//!
//! The wait is bounded: `timeout_ms` after the ticket was first due (when
//! the node became ready) a check that is still not met ends it, failed
//! or — with `on_timeout = "skip"` — skipped, so its downstreams decide
//! by their trigger rules (an `all_success` downstream is skipped). The
//! last check runs at the deadline itself, never later: a poke's next due
//! instant is capped there ([`after_not_met`]).

use serde::{Deserialize, Serialize};

/// The wait between checks when the definition does not say.
pub const EVERY_MS_DEFAULT: u64 = 30_000;
/// How long a sensor waits in all when the definition does not say.
pub const TIMEOUT_MS_DEFAULT: u64 = 6 * 3_600_000;

fn every_default() -> u64 {
    EVERY_MS_DEFAULT
}

fn timeout_default() -> u64 {
    TIMEOUT_MS_DEFAULT
}

/// What a sensor that is still not met at its deadline ends as.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    /// Failed: its downstreams see a failure.
    #[default]
    Fail,
    /// Skipped: its downstreams see a skip.
    Skip,
}

/// A sensor's waiting: how often it checks, how long in all, and what a
/// timeout ends it as. It travels in the sensor's ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SensorPolicy {
    /// The wait between a check that was not met and the next.
    #[serde(default = "every_default")]
    pub every_ms: u64,
    /// How long after the ticket was first due the last check runs.
    #[serde(default = "timeout_default")]
    pub timeout_ms: u64,
    /// What it ends as when still not met then.
    #[serde(default)]
    pub on_timeout: OnTimeout,
}

impl Default for SensorPolicy {
    fn default() -> Self {
        SensorPolicy {
            every_ms: EVERY_MS_DEFAULT,
            timeout_ms: TIMEOUT_MS_DEFAULT,
            on_timeout: OnTimeout::Fail,
        }
    }
}

impl SensorPolicy {
    /// Checks the fields: both waits above zero.
    pub fn validate(&self) -> Result<(), String> {
        if self.every_ms == 0 {
            return Err("every: must be above 0".into());
        }
        if self.timeout_ms == 0 {
            return Err("timeout: must be above 0".into());
        }
        Ok(())
    }
}

/// What follows a check that was not met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Poke {
    /// Check again at this instant; no attempt spent.
    Again {
        /// The next check's due instant.
        due_ms: u64,
    },
    /// The deadline has come: end the ticket as the policy says.
    TimedOut(OnTimeout),
}

/// What follows a check at `now_ms` that was not met, for a ticket first
/// due at `first_due_ms`: again `every_ms` later (capped at the
/// deadline, so the last check runs at it), or the end once the deadline
/// has come.
pub fn after_not_met(policy: &SensorPolicy, first_due_ms: u64, now_ms: u64) -> Poke {
    let deadline_ms = first_due_ms.saturating_add(policy.timeout_ms);
    if now_ms >= deadline_ms {
        return Poke::TimedOut(policy.on_timeout);
    }
    Poke::Again {
        due_ms: now_ms
            .saturating_add(policy.every_ms.max(1))
            .min(deadline_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A poke's next due instant, one row a case: every, timeout, on
    /// timeout, first due, now, what follows.
    #[test]
    fn after_not_met_table() {
        let cases: &[(u64, u64, OnTimeout, u64, u64, Poke)] = &[
            (30, 1_000, OnTimeout::Fail, 0, 0, Poke::Again { due_ms: 30 }),
            (
                30,
                1_000,
                OnTimeout::Fail,
                0,
                500,
                Poke::Again { due_ms: 530 },
            ),
            // The last check runs at the deadline, not after it.
            (
                30,
                1_000,
                OnTimeout::Fail,
                0,
                990,
                Poke::Again { due_ms: 1_000 },
            ),
            (
                30,
                1_000,
                OnTimeout::Fail,
                0,
                1_000,
                Poke::TimedOut(OnTimeout::Fail),
            ),
            (
                30,
                1_000,
                OnTimeout::Skip,
                0,
                5_000,
                Poke::TimedOut(OnTimeout::Skip),
            ),
            // The deadline counts from the first due instant.
            (
                30,
                1_000,
                OnTimeout::Fail,
                10_000,
                10_500,
                Poke::Again { due_ms: 10_530 },
            ),
            // Huge values saturate, never wrap.
            (
                u64::MAX,
                u64::MAX,
                OnTimeout::Fail,
                5,
                7,
                Poke::Again { due_ms: u64::MAX },
            ),
        ];
        for (i, &(every_ms, timeout_ms, on_timeout, first, now, want)) in cases.iter().enumerate() {
            let p = SensorPolicy {
                every_ms,
                timeout_ms,
                on_timeout,
            };
            let got = after_not_met(&p, first, now);
            assert_eq!(
                got, want,
                "#{i}: every {every_ms}, timeout {timeout_ms}, first {first}, now {now}"
            );
        }
    }

    #[test]
    fn zero_waits_are_refused() {
        let mut p = SensorPolicy::default();
        assert!(p.validate().is_ok());
        p.every_ms = 0;
        assert!(p.validate().unwrap_err().contains("every"));
        p.every_ms = 1;
        p.timeout_ms = 0;
        assert!(p.validate().unwrap_err().contains("timeout"));
    }
}
