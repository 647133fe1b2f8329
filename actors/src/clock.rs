//! Wall-clock milliseconds for the actors, from tokio's clock.
//!
//! Deadlines are wall-clock instants (ms since the epoch) so they keep their
//! meaning across a restart. The clock is anchored once at the system time
//! and advances with `tokio::time::Instant`, so under tokio's paused time
//! (tests) it jumps with the virtual clock and timers and deadlines agree.
//!
//! The clock also hands the actors their random sources ([`Clock::rng`]):
//! from entropy by default, or derived from one seed (`weir simulate`, where
//! the same seed must give the same jitter and so the same run).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of the current time in ms since the epoch.
#[derive(Clone)]
pub struct Clock {
    inner: Arc<Anchor>,
}

struct Anchor {
    epoch_ms: u64,
    at: tokio::time::Instant,
    /// The seed of every random source handed out, when seeded.
    seed: Option<u64>,
}

impl Clock {
    /// A clock anchored at the system time now.
    pub fn system() -> Self {
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Clock::anchored(epoch_ms)
    }

    /// A clock that reads `epoch_ms` now and advances with tokio's clock.
    pub fn anchored(epoch_ms: u64) -> Self {
        Clock {
            inner: Arc::new(Anchor {
                epoch_ms,
                at: tokio::time::Instant::now(),
                seed: None,
            }),
        }
    }

    /// This clock, whose random sources derive from `seed`.
    pub fn seeded(self, seed: u64) -> Self {
        Clock {
            inner: Arc::new(Anchor {
                epoch_ms: self.inner.epoch_ms,
                at: self.inner.at,
                seed: Some(seed),
            }),
        }
    }

    /// A random source for the actor named by `salt`: from entropy, or,
    /// on a seeded clock, from the seed and the salt (each actor its own
    /// sequence, the same at every run).
    pub fn rng(&self, salt: &str) -> rand::rngs::SmallRng {
        use rand::SeedableRng;
        match self.inner.seed {
            None => rand::rngs::SmallRng::from_entropy(),
            Some(seed) => {
                // FNV-1a of the salt, mixed into the seed.
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for b in salt.bytes() {
                    h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
                }
                rand::rngs::SmallRng::seed_from_u64(seed ^ h)
            }
        }
    }

    /// Now, in ms since the epoch.
    pub fn now_ms(&self) -> u64 {
        self.inner.epoch_ms + self.inner.at.elapsed().as_millis() as u64
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", self.now_ms())
    }
}
