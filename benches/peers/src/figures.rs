//! The parts of the drain, chain and recovery scenarios that the Rust
//! peers share: filling a store in bulks, and turning stamps into the
//! printed figures and `RESULT` pairs.

use std::collections::HashMap;
use std::future::Future;
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::{pct_us, result, Error};

/// Jobs per bulk enqueue.
const BULK_JOBS: u64 = 1_000;

/// Enqueues jobs 0..`jobs` through `push`, one bulk of at most 1,000 at a
/// time, until all are in or `until` passes. Returns how many went in.
pub async fn fill<F, Fut>(jobs: u64, until: Option<Instant>, mut push: F) -> Result<u64, Error>
where
    F: FnMut(Range<u64>) -> Fut,
    Fut: Future<Output = Result<(), Error>>,
{
    let mut enq = 0u64;
    while enq < jobs && until.is_none_or(|u| Instant::now() < u) {
        let n = BULK_JOBS.min(jobs - enq);
        push(enq..enq + n).await?;
        enq += n;
    }
    Ok(enq)
}

/// The enqueue deadline of a drain level: the first half of its budget,
/// in whole seconds rounded up.
pub fn fill_until(began: Instant, budget_s: u64) -> Option<Instant> {
    Some(began + Duration::from_secs(budget_s.div_ceil(2)))
}

/// Prints one drain level and appends its rate and count to `pairs`.
pub fn drain_level(
    peer: &str,
    workers: usize,
    (jobs, enq, done): (u64, u64, u64),
    elapsed: Duration,
    pairs: &mut Vec<(&'static str, String)>,
) {
    let el = elapsed.as_secs_f64();
    let rate = done as f64 / el;
    println!("{peer} drain, {workers} workers: {enq} of {jobs} enqueued, {done} run in {el:.1} s = {rate:.0} jobs/s");
    let (rate_key, done_key) = match workers {
        1 => ("w1_jobs_per_s", "w1_done"),
        8 => ("w8_jobs_per_s", "w8_done"),
        _ => ("w32_jobs_per_s", "w32_done"),
    };
    pairs.push((rate_key, format!("{rate:.0}")));
    pairs.push((done_key, done.to_string()));
}

/// Prints a chain of `nodes` and its `RESULT` line: the total, and p50/p99
/// of each edge, from job i's end to job i+1's start.
pub fn chain_result(
    peer: &str,
    nodes: u64,
    total: Duration,
    starts: &HashMap<u64, Instant>,
    ends: &HashMap<u64, Instant>,
) {
    let mut edges: Vec<Duration> = (0..nodes.saturating_sub(1))
        .filter_map(|i| {
            Some(
                starts
                    .get(&(i + 1))?
                    .saturating_duration_since(*ends.get(&i)?),
            )
        })
        .collect();
    edges.sort_unstable();
    let (p50, p99) = (pct_us(&edges, 0.5), pct_us(&edges, 0.99));
    println!(
        "{peer} chain of {nodes}: {:.1} ms ({} of {nodes} started), edge p50 {p50:.0} us, p99 {p99:.0} us",
        total.as_secs_f64() * 1e3,
        starts.len()
    );
    result(
        "chain",
        &[
            ("nodes", nodes.to_string()),
            ("settle_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
            ("edge_p50_us", format!("{p50:.0}")),
            ("edge_p99_us", format!("{p99:.0}")),
        ],
    );
}
