//! The latency scenario's open loop, shared by the Rust peers: enqueues at
//! a fixed rate, each acknowledged on its own, then the time from each
//! acknowledgement to its job's start.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::{pct_us, Error};

/// What one rate's window produced.
pub struct Window {
    /// (job, when its enqueue was acknowledged).
    pub acked: Vec<(u64, Instant)>,
    /// Enqueues the peer refused (e.g. a pool timeout): counted, not fatal.
    pub refused: u64,
    /// Acknowledged enqueues per second of the window.
    pub achieved_per_s: f64,
    /// When the peer's answers stop counting.
    pub cutoff: Instant,
}

/// Spawns `push(k)` for k in 0..per_s*secs, one every 1/per_s seconds
/// (late ticks catch up in a burst), and gathers the acknowledgements. A
/// peer that cannot keep up gets a quarter of the window more to answer;
/// the figures are over what it acknowledged by then.
pub async fn run<F, Fut>(per_s: u64, secs: u64, push: F) -> Result<Window, Error>
where
    F: Fn(u64) -> Fut,
    Fut: Future<Output = Result<(), Error>> + Send + 'static,
{
    let total = per_s * secs;
    let mut ticks = tokio::time::interval(Duration::from_nanos(1_000_000_000 / per_s));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let began = Instant::now();
    let mut acks = tokio::task::JoinSet::new();
    for k in 0..total {
        ticks.tick().await;
        let pushed = push(k);
        acks.spawn(async move { pushed.await.map(|()| (k, Instant::now())) });
    }
    let cutoff = began + Duration::from_secs(secs + (secs / 4).max(2));
    let mut acked = Vec::new();
    let mut refused = 0u64;
    while let Ok(Some(r)) = tokio::time::timeout_at(cutoff.into(), acks.join_next()).await {
        match r? {
            Ok(a) => acked.push(a),
            Err(_) => refused += 1,
        }
    }
    acks.abort_all();
    let achieved_per_s = acked.len() as f64 / began.elapsed().as_secs_f64();
    Ok(Window {
        acked,
        refused,
        achieved_per_s,
        cutoff,
    })
}

/// The deadline for the acknowledged jobs to start.
pub fn start_deadline(w: &Window) -> Instant {
    w.cutoff.max(Instant::now() + Duration::from_secs(2))
}

/// Prints the rate's figures and appends them to `pairs`: p50 and p99 of
/// acknowledgement → start over the jobs that started, the achieved rate
/// and the refused count.
pub fn report(
    peer: &str,
    per_s: u64,
    w: &Window,
    starts: &HashMap<u64, Instant>,
    pairs: &mut Vec<(&'static str, String)>,
) {
    let mut lat: Vec<Duration> = w
        .acked
        .iter()
        .filter_map(|(k, a)| starts.get(k).map(|s| s.saturating_duration_since(*a)))
        .collect();
    lat.sort_unstable();
    let (p50, p99) = (pct_us(&lat, 0.5), pct_us(&lat, 0.99));
    println!(
        "{peer} latency at {per_s}/s (achieved {:.0}/s, {} started, {} refused): p50 {p50:.0} us, p99 {p99:.0} us",
        w.achieved_per_s,
        lat.len(),
        w.refused
    );
    let key = |what: &str| -> &'static str {
        match (per_s, what) {
            (100, "p50") => "r100_p50_us",
            (100, "p99") => "r100_p99_us",
            (100, "achieved") => "r100_achieved_per_s",
            (100, _) => "r100_refused",
            (1_000, "p50") => "r1000_p50_us",
            (1_000, "p99") => "r1000_p99_us",
            (1_000, "achieved") => "r1000_achieved_per_s",
            (1_000, _) => "r1000_refused",
            (_, "p50") => "r10000_p50_us",
            (_, "p99") => "r10000_p99_us",
            (_, "achieved") => "r10000_achieved_per_s",
            _ => "r10000_refused",
        }
    };
    pairs.push((key("p50"), format!("{p50:.0}")));
    pairs.push((key("p99"), format!("{p99:.0}")));
    pairs.push((key("achieved"), format!("{:.0}", w.achieved_per_s)));
    pairs.push((key("refused"), w.refused.to_string()));
}
