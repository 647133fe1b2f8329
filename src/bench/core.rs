//! `weir bench core`: the pure decisions, without I/O.
//!
//! Queue step throughput: enqueue, select and complete of 1M tickets across
//! 4 pools (3M ops), beside the same count of inserts and removes into a
//! plain `BTreeMap` (the floor of any ordered in-memory queue). Readiness:
//! the cost of one terminal event on a 10,000-node graph.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use weir_core::queue::{Applied, Job, Op, QueueState, Terminal};
use weir_core::retry::RetryPolicy;

use super::report::{result_line, BenchError};

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let tickets: u64 = if quick { 100_000 } else { 1_000_000 };
    // The first pass warms the allocator (fresh pages cost a kernel page
    // clear each); the second is measured.
    queue_throughput(tickets)?;
    let (ops_per_s, floor_per_s) = queue_throughput(tickets)?;
    println!(
        "queue: {tickets} tickets x 3 ops across 4 pools: {ops_per_s:.0} ops/s (BTreeMap insert+remove floor: {floor_per_s:.0} ops/s, ratio {:.2}); goal >= 2,000,000 ops/s",
        ops_per_s / floor_per_s
    );
    let event_us = super::readiness::event_cost_us(if quick { 1_000 } else { 10_000 })?;
    println!(
        "readiness: one terminal event on a 10,000-node graph: {event_us:.3} us; goal <= 5 us"
    );
    println!(
        "{}",
        result_line(
            "core",
            &[
                ("tickets", tickets.to_string()),
                ("ops_per_s", format!("{ops_per_s:.0}")),
                ("floor_ops_per_s", format!("{floor_per_s:.0}")),
                ("event_us", format!("{event_us:.3}")),
            ]
        )
    );
    Ok(())
}

fn queue_throughput(tickets: u64) -> Result<(f64, f64), BenchError> {
    let pools: Vec<Arc<str>> = (0..4).map(|i| Arc::from(format!("pool{i}"))).collect();
    let task: Arc<str> = Arc::from("noop");
    let worker: Arc<str> = Arc::from("bench");
    let jobs: Vec<Op> = (0..tickets)
        .map(|i| {
            Op::Enqueue(Job {
                key: Arc::from(format!("job-{i}")),
                task: task.clone(),
                pool: pools[(i % 4) as usize].clone(),
                target: None,
                due_ms: i,
                payload: Vec::new(),
                policy: RetryPolicy::default(),
                timeout_ms: None,
                notify: None,
                retention_ms: None,
                priority: 0,
                sensor: None,
                produces: Vec::new(),
            })
        })
        .collect();
    let mut q = QueueState::new();
    let started = Instant::now();
    for op in &jobs {
        if !matches!(q.step(op), Applied::Enqueued(_)) {
            return Err(BenchError::Failed("enqueue did not enqueue".into()));
        }
    }
    let mut selected = Vec::with_capacity(tickets as usize);
    for i in 0..tickets {
        let op = Op::Select {
            pool: pools[(i % 4) as usize].clone(),
            now_ms: tickets,
            worker: worker.clone(),
            lease_until_ms: tickets + 60_000,
        };
        match q.step(&op) {
            Applied::Selected(id) => selected.push(id),
            other => return Err(BenchError::Failed(format!("select gave {other:?}"))),
        }
    }
    for id in selected {
        let op = Op::Complete {
            id,
            terminal: Terminal::Succeeded,
        };
        if !matches!(q.step(&op), Applied::Completed(..)) {
            return Err(BenchError::Failed("complete did not complete".into()));
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    if !q.is_empty() {
        return Err(BenchError::Failed("tickets left after the run".into()));
    }
    let ops_per_s = (3 * tickets) as f64 / elapsed;

    // The floor: one ordered insert and one remove per ticket, plus a third
    // op (a lookup) so the count of ops matches.
    let started = Instant::now();
    let mut m = BTreeMap::new();
    for i in 0..tickets {
        m.insert((i, i), i);
    }
    for i in 0..tickets {
        black_box(m.get(&(i, i)));
    }
    for i in 0..tickets {
        m.remove(&(i, i));
    }
    let floor = (3 * tickets) as f64 / started.elapsed().as_secs_f64();
    Ok((ops_per_s, floor))
}
