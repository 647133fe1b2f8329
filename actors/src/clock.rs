//! Wall-clock milliseconds for the actors, from tokio's clock.
//!
//! Deadlines are wall-clock instants (ms since the epoch) so they keep their
//! meaning across a restart. The clock is anchored once at the system time
//! and advances with `tokio::time::Instant`, so under tokio's paused time
//! (tests) it jumps with the virtual clock and timers and deadlines agree.

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
            }),
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
