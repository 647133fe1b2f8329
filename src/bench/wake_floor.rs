//! The raw equivalent of a prepared burst: what tokio alone takes to start
//! N tasks waiting for one instant, on the runtime the engine runs on.
//!
//! Each task sleeps until the instant, then does the least a task of the
//! burst does: it notes its lateness (under a lock, as the bench's task
//! does) and sends one message that it ended (as a pool's report is sent).
//! No store, no actor. The gap between this and the engine's lateness is
//! the engine's; this much belongs to the runtime and the machine.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::report::percentile;

/// Lateness of the tasks' starts, ms (fractional: measured in µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WakeFloor {
    /// How many tasks started (all of them, once the measure returns).
    pub tasks: usize,
    pub min_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// How far ahead of the instant the tasks are spawned: past tokio's
/// first wheel level (64 ms), as a grant handed out ahead is.
pub const AHEAD_MS: u64 = 300;

/// Starts `n` tasks due at one instant and measures their lateness.
pub async fn measure(n: usize) -> WakeFloor {
    let late = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let at = tokio::time::Instant::now() + Duration::from_millis(AHEAD_MS);
    let at_std: Instant = at.into_std();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    for _ in 0..n {
        let late = late.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let us = Instant::now().saturating_duration_since(at_std).as_micros() as u64;
            late.lock().unwrap_or_else(|p| p.into_inner()).push(us);
            let _ = tx.send(());
        });
    }
    drop(tx);
    while rx.recv().await.is_some() {}
    let mut us = std::mem::take(&mut *late.lock().unwrap_or_else(|p| p.into_inner()));
    summarize(&mut us)
}

/// Min, p50, p99 and max of `us`, in ms.
fn summarize(us: &mut [u64]) -> WakeFloor {
    us.sort_unstable();
    let at = |q: f64| percentile(us, q) as f64 / 1e3;
    WakeFloor {
        tasks: us.len(),
        min_ms: at(0.0),
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_microseconds_in_ms() {
        let mut us: Vec<u64> = (1..=100).rev().map(|i| i * 1_000).collect();
        let f = summarize(&mut us);
        assert_eq!(f.min_ms, 1.0);
        assert_eq!(f.p50_ms, 51.0);
        assert_eq!(f.p99_ms, 99.0);
        assert_eq!(f.max_ms, 100.0);
        assert_eq!(summarize(&mut []).p99_ms, 0.0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_task_starts_once_and_the_figures_are_ordered() {
        let f = measure(200).await;
        assert_eq!(f.tasks, 200);
        assert!(f.min_ms <= f.p50_ms);
        assert!(f.p50_ms <= f.p99_ms && f.p99_ms <= f.max_ms);
        // Late by seconds would be a hang, not a floor.
        assert!(f.max_ms < 5_000.0, "{f:?}");
    }
}
