//! A backlog kept in the store: an open reads a window of it, not all of
//! it, and the queue still hands out every ticket once, in order, answers
//! for tickets it has not read in, and survives restarts mid-drain.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod runner_support;

use runner_support::wait_for;
use weir::actors::store::Store;
use weir::{
    Cancelled, DoneStatus, Durability, Engine, Enqueued, Job, StoreSettings, TicketFilter,
    TicketView,
};

const WINDOW: usize = 64;

fn settings() -> StoreSettings {
    StoreSettings {
        durability: Durability::Flush,
        window_tickets: WINDOW,
        // Snapshots every 500 ops: most of the backlog is in the snapshot,
        // not in the journal tail, as on a long-running engine.
        snapshot_ops: 500,
        ..StoreSettings::default()
    }
}

fn job(i: usize) -> Job {
    // One ticket in ten at priority 5: two levels to window.
    let mut j = Job::new(format!("k-{i:05}"), "work", "default");
    if i.is_multiple_of(10) {
        j.priority = 5;
    }
    j
}

struct Ran {
    starts: Mutex<Vec<String>>,
    gate: tokio::sync::Semaphore,
}

async fn open(dir: &std::path::Path, ran: &Arc<Ran>, slots: u32) -> Engine {
    let r = ran.clone();
    Engine::builder(dir)
        .store_settings(settings())
        .pool("default", slots)
        .task_fn("work", move |ctx| {
            let r = r.clone();
            async move {
                r.starts.lock().unwrap().push(ctx.key.to_string());
                r.gate.acquire().await.expect("gate open").forget();
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_opens_with_a_window_and_every_ticket_runs_once_in_order() {
    let n = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let ran = Arc::new(Ran {
        starts: Mutex::new(Vec::new()),
        gate: tokio::sync::Semaphore::new(0),
    });
    {
        let engine = open(dir.path(), &ran, 4).await;
        engine.pause(true).unwrap();
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let answers = engine
                .enqueue_many(chunk.iter().map(|&i| job(i)).collect())
                .await
                .unwrap();
            assert!(answers.iter().all(|a| matches!(a, Ok(Enqueued::New(_)))));
        }
        // Past each snapshot, the backlog beyond a window per level is in
        // the store only, in a running engine too: once the snapshots
        // written while the enqueues went on have landed, at most a
        // window per level and what came after the last one (under
        // `snapshot_ops`) is in memory.
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            let status = engine.status().await.unwrap();
            assert_eq!(status.live, n);
            if status.in_memory <= 2 * WINDOW + 500 || Instant::now() > deadline {
                break status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(
            status.in_memory <= 2 * WINDOW + 500,
            "{} of {n} tickets in memory",
            status.in_memory
        );
        engine.shutdown(Duration::from_secs(10)).await.unwrap();
    }
    assert!(ran.starts.lock().unwrap().is_empty(), "paused: nothing ran");

    // The open reads the journal tail and a window per level, not the
    // backlog.
    {
        let (_store, recovered) = Store::open(dir.path(), settings()).unwrap();
        let state = &recovered.state;
        assert_eq!(state.len(), n, "every ticket is live");
        assert!(
            state.hot_len() <= 2 * WINDOW + 500,
            "an open holds the tail and two windows, not {} tickets",
            state.hot_len()
        );
        assert!(state.cold_len() >= (n - 2 * WINDOW - 500) as u64);
    }

    let engine = open(dir.path(), &ran, 4).await;
    // Four are running and waiting on the gate; the rest are pending,
    // most of them in the store only.
    wait_for("four starts", Duration::from_secs(10), || {
        ran.starts.lock().unwrap().len() == 4
    })
    .await;
    let status = engine.status().await.unwrap();
    assert_eq!(status.live, n);
    assert_eq!(status.pools["default"].pending, n - 4);
    assert_eq!(status.pools["default"].due, n - 4, "{status:?}");
    // A key the queue has not read in: its view, a second enqueue, a
    // cancel, a listing.
    match engine.ticket("k-04999").await.unwrap() {
        Some(TicketView::Live { running: false, .. }) => {}
        other => panic!("k-04999: {other:?}"),
    }
    assert!(matches!(
        engine.enqueue(job(4_998)).await.unwrap(),
        Enqueued::Live(_)
    ));
    assert!(matches!(
        engine.cancel("k-04997").await.unwrap(),
        Cancelled::Cancelled(_)
    ));
    let listed = engine
        .tickets(TicketFilter {
            running: Some(false),
            pool: None,
            limit: 10_000,
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), n - 5, "every pending ticket is listed once");
    let mut ids: Vec<u64> = listed.iter().map(|t| t.id).collect();
    ids.dedup();
    assert_eq!(ids.len(), n - 5);

    // Half the backlog, then a restart mid-drain.
    ran.gate.add_permits(2_000);
    wait_for("2,000 completions", Duration::from_secs(60), || {
        ran.starts.lock().unwrap().len() >= 2_004
    })
    .await;
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
    ran.gate.add_permits(10_000);
    let engine = open(dir.path(), &ran, 4).await;
    engine
        .drain_until_idle(Duration::from_secs(120))
        .await
        .unwrap();

    // Every key but the cancelled one succeeded once.
    let mut done = 0;
    for i in 0..n {
        let key = format!("k-{i:05}");
        match engine.ticket(&key).await.unwrap() {
            Some(TicketView::Done(r)) if i == 4_997 => {
                assert_eq!(r.status, DoneStatus::Cancelled)
            }
            Some(TicketView::Done(r)) => {
                assert_eq!(r.status, DoneStatus::Succeeded, "{key}");
                done += 1;
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    assert_eq!(done, n - 1);
    let starts = ran.starts.lock().unwrap().clone();
    let mut per_key: HashMap<&str, u32> = HashMap::new();
    for k in &starts {
        *per_key.entry(k).or_default() += 1;
    }
    assert_eq!(per_key.len(), n - 1, "the cancelled key never ran");
    // A restart may run an attempt it cut again; at most the four slots.
    assert!(starts.len() <= n - 1 + 4, "{} starts", starts.len());
    // Priority 5 first, then FIFO: no priority-0 ticket started before the
    // last priority-5 one, give or take the four slots running at once.
    let last_hi = starts
        .iter()
        .rposition(|k| k[2..].parse::<usize>().unwrap() % 10 == 0)
        .unwrap();
    assert!(last_hi < n / 10 + 8, "last priority-5 start at {last_hi}");
    // Within priority 0, FIFO: each ticket's first start is within a few
    // places of its rank (four slots start at once, in any order), but for
    // the attempts a restart cut, which are due again at the restart.
    let mut seen = std::collections::HashSet::new();
    let lo: Vec<usize> = starts
        .iter()
        .map(|k| k[2..].parse::<usize>().unwrap())
        .filter(|i| i % 10 != 0 && seen.insert(*i))
        .collect();
    let mut sorted = lo.clone();
    sorted.sort_unstable();
    let displaced = lo
        .iter()
        .enumerate()
        .filter(|(at, i)| sorted.binary_search(i).unwrap().abs_diff(*at) > 8)
        .count();
    assert!(
        displaced <= 8,
        "{displaced} priority-0 starts far from FIFO order"
    );
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
