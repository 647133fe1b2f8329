//! Duration models of simulated attempts: a fixed time, a uniform range,
//! or a log-normal distribution given by its median (p50) and its 99th
//! percentile (p99), which is how latencies are usually known.
//!
//! A model maps two uniform draws in `[0, 1)` to a duration in ms. A
//! log-normal draw is capped at [`LOGNORMAL_CAP_P99S`] times its p99, so a
//! pathological draw cannot stall a simulated week.

use serde::{Deserialize, Serialize};

/// A log-normal draw is at most this many times its p99.
pub const LOGNORMAL_CAP_P99S: u64 = 10;

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
