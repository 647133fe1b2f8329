//! Duration models of simulated attempts: a fixed time, a uniform range,
//! or a log-normal distribution given by its median (p50) and its 99th
//! percentile (p99), which is how latencies are usually known.
//!
//! A model maps two uniform draws in `[0, 1)` to a duration in ms. A
//! log-normal draw is capped at [`LOGNORMAL_CAP_P99S`] times its p99, so a
//! pathological draw cannot stall a simulated week.
//!
//! An [`Empirical`] model is the other kind: durations that were recorded
//! (a data directory's attempts), each drawn with the same chance — a
//! bootstrap of the recorded distribution, which keeps its shape (several
//! modes, a long tail) without fitting a curve to it.

use serde::{Deserialize, Serialize};

/// A log-normal draw is at most this many times its p99.
pub const LOGNORMAL_CAP_P99S: u64 = 10;

/// The most recorded durations an [`Empirical`] model keeps (the newest).
pub const EMPIRICAL_SAMPLES_MAX: usize = 10_000;

/// The standard normal's 99th percentile.
const Z_P99: f64 = 2.326_347_874_040_841;

/// How long a simulated attempt takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum DurationModel {
    /// Always `ms`.
    Fixed {
        /// The duration.
        ms: u64,
    },
    /// Uniform between `min_ms` and `max_ms` (inclusive).
    Uniform {
        /// The least.
        min_ms: u64,
        /// The most.
        max_ms: u64,
    },
    /// Log-normal with median `p50_ms` and 99th percentile `p99_ms`.
    Lognormal {
        /// The median.
        p50_ms: u64,
        /// The 99th percentile.
        p99_ms: u64,
    },
}

impl DurationModel {
    /// Checks the model's bounds; the error says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            DurationModel::Fixed { .. } => Ok(()),
            DurationModel::Uniform { min_ms, max_ms } if min_ms > max_ms => Err(format!(
                "uniform: min ({min_ms} ms) is above max ({max_ms} ms)"
            )),
            DurationModel::Uniform { .. } => Ok(()),
            DurationModel::Lognormal { p50_ms, p99_ms } if p50_ms == 0 || p99_ms < p50_ms => {
                Err(format!(
                    "lognormal: p50 ({p50_ms} ms) must be above 0 and at most p99 ({p99_ms} ms)"
                ))
            }
            DurationModel::Lognormal { .. } => Ok(()),
        }
    }

    /// The duration for the draws `u1` and `u2`, each uniform in `[0, 1)`.
    pub fn sample_ms(&self, u1: f64, u2: f64) -> u64 {
        match *self {
            DurationModel::Fixed { ms } => ms,
            DurationModel::Uniform { min_ms, max_ms } => {
                let span = (max_ms - min_ms) as f64 + 1.0;
                (min_ms + (u1.clamp(0.0, 1.0) * span) as u64).min(max_ms)
            }
            DurationModel::Lognormal { p50_ms, p99_ms } => {
                let mu = (p50_ms as f64).ln();
                let sigma = ((p99_ms as f64).ln() - mu) / Z_P99;
                let z = normal(u1, u2);
                let ms = (mu + sigma * z).exp();
                let cap = p99_ms.saturating_mul(LOGNORMAL_CAP_P99S);
                if ms.is_finite() {
                    (ms.round() as u64).min(cap)
                } else {
                    cap
                }
            }
        }
    }
}

/// Recorded durations, drawn from with equal chance each: the empirical
/// distribution. Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Empirical {
    /// The durations, ascending.
    sorted_ms: Vec<u64>,
}

impl Empirical {
    /// The model of `newest_first_ms` (recorded durations, the newest
    /// first), keeping the first [`EMPIRICAL_SAMPLES_MAX`]; `None` when
    /// there are none.
    pub fn new(newest_first_ms: impl IntoIterator<Item = u64>) -> Option<Empirical> {
        let mut sorted_ms: Vec<u64> = newest_first_ms
            .into_iter()
            .take(EMPIRICAL_SAMPLES_MAX)
            .collect();
        if sorted_ms.is_empty() {
            return None;
        }
        sorted_ms.sort_unstable();
        Some(Empirical { sorted_ms })
    }

    /// The recorded duration drawn by `u`, uniform in `[0, 1)`: each
    /// recorded one has the same chance.
    pub fn sample_ms(&self, u: f64) -> u64 {
        let n = self.sorted_ms.len();
        let i = ((u.clamp(0.0, 1.0) * n as f64) as usize).min(n - 1);
        self.sorted_ms[i]
    }

    /// How many durations it holds.
    pub fn len(&self) -> usize {
        self.sorted_ms.len()
    }

    /// Never: a model holds one duration at least.
    pub fn is_empty(&self) -> bool {
        self.sorted_ms.is_empty()
    }

    /// The shortest recorded.
    pub fn min_ms(&self) -> u64 {
        self.sorted_ms[0]
    }

    /// The longest recorded.
    pub fn max_ms(&self) -> u64 {
        self.sorted_ms[self.sorted_ms.len() - 1]
    }
}

/// A standard normal draw from two uniform draws (Box–Muller).
pub fn normal(u1: f64, u2: f64) -> f64 {
    // 1 - u1 is in (0, 1]: its logarithm is finite.
    let r = (-2.0 * (1.0 - u1.clamp(0.0, 1.0 - f64::EPSILON)).ln()).sqrt();
    r * (std::f64::consts::TAU * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A low-discrepancy grid of draws, so a test needs no random source.
    fn grid(n: usize) -> impl Iterator<Item = (f64, f64)> {
        (0..n).map(move |i| {
            let u1 = (i as f64 + 0.5) / n as f64;
            let u2 = ((i as f64 * 0.618_033_988_749_895) + 0.25).fract();
            (u1, u2)
        })
    }

    #[test]
    fn fixed_and_uniform_stay_in_bounds() {
        assert_eq!(DurationModel::Fixed { ms: 42 }.sample_ms(0.3, 0.9), 42);
        let u = DurationModel::Uniform {
            min_ms: 10,
            max_ms: 20,
        };
        let got: Vec<u64> = grid(1000).map(|(a, b)| u.sample_ms(a, b)).collect();
        assert!(got.iter().all(|&ms| (10..=20).contains(&ms)), "{got:?}");
        assert_eq!(got.iter().min(), Some(&10));
        assert_eq!(got.iter().max(), Some(&20));
        assert_eq!(u.sample_ms(0.999_999_999, 0.0), 20);
    }

    #[test]
    fn lognormal_hits_its_percentiles() {
        let m = DurationModel::Lognormal {
            p50_ms: 60_000,
            p99_ms: 600_000,
        };
        let mut got: Vec<u64> = grid(20_000).map(|(a, b)| m.sample_ms(a, b)).collect();
        got.sort_unstable();
        let p50 = got[got.len() / 2] as f64;
        let p99 = got[got.len() * 99 / 100] as f64;
        assert!((p50 / 60_000.0 - 1.0).abs() < 0.1, "p50 {p50}");
        assert!((p99 / 600_000.0 - 1.0).abs() < 0.2, "p99 {p99}");
        assert!(got.iter().all(|&ms| ms <= 6_000_000));
    }

    /// The empirical model draws only recorded durations, each about
    /// equally often; it keeps the newest [`EMPIRICAL_SAMPLES_MAX`]; none
    /// recorded is no model.
    #[test]
    fn empirical_draws_recorded_durations_evenly() {
        assert_eq!(Empirical::new(Vec::new()), None);
        let m = Empirical::new([300, 100, 200, 100]).unwrap();
        assert_eq!((m.min_ms(), m.max_ms(), m.len()), (100, 300, 4));
        let mut counts = std::collections::BTreeMap::new();
        for (u, _) in grid(4_000) {
            *counts.entry(m.sample_ms(u)).or_insert(0) += 1;
        }
        // 100 was recorded twice: half the draws.
        assert_eq!(
            counts,
            [(100, 2_000), (200, 1_000), (300, 1_000)]
                .into_iter()
                .collect()
        );
        // The ends of the draws' range stay inside.
        assert_eq!(m.sample_ms(0.0), 100);
        assert_eq!(m.sample_ms(0.999_999_999), 300);
        assert_eq!(m.sample_ms(1.0), 300);
        // Only the newest are kept: the oldest (5) is dropped.
        let newest_first = (0..=EMPIRICAL_SAMPLES_MAX as u64).rev().map(|i| i + 5);
        let m = Empirical::new(newest_first).unwrap();
        assert_eq!(m.len(), EMPIRICAL_SAMPLES_MAX);
        assert_eq!(m.min_ms(), 6);
    }

    #[test]
    fn bad_bounds_are_refused() {
        let cases = [
            (
                DurationModel::Uniform {
                    min_ms: 5,
                    max_ms: 4,
                },
                false,
            ),
            (
                DurationModel::Lognormal {
                    p50_ms: 0,
                    p99_ms: 4,
                },
                false,
            ),
            (
                DurationModel::Lognormal {
                    p50_ms: 9,
                    p99_ms: 4,
                },
                false,
            ),
            (
                DurationModel::Lognormal {
                    p50_ms: 4,
                    p99_ms: 4,
                },
                true,
            ),
            (DurationModel::Fixed { ms: 0 }, true),
        ];
        for (i, (m, ok)) in cases.iter().enumerate() {
            assert_eq!(m.validate().is_ok(), *ok, "#{i}: {m:?}");
        }
    }
}
