//! A half-open window reopens as soon as it can no longer close (#43 item
//! 15, failsafe's rule), end to end: with 3 probes that need 3 successes
//! (`probe_failures_max = 1`), the first failed probe reopens the breaker
//! while the two other probes are still running, and their late successes
//! do not close it. Real time with a short cooldown, as in runner_breaker.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir::core::breaker::BreakerState;
use weir::{BreakerSettings, DoneStatus, Durability, Engine, Job, RetryPolicy, TicketView};

const COOLDOWN_MS: u64 = 300;
/// How long the test waits for a state it expects.
const WAIT_MS: u64 = 10_000;

fn job(key: &str) -> Job {
    let mut j = Job::new(key, "call", "p");
    j.target = Some(Arc::from("api"));
    j.policy = RetryPolicy {
        attempts_max: 1,
        ..RetryPolicy::default()
    };
    j
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_failed_probe_reopens_while_the_others_run() {
    let dir = tempfile::tempdir().unwrap();
    // Probes that started, and whether the slow ones may finish.
    let started = Arc::new(AtomicU32::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let (st, rel) = (started.clone(), release.clone());
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        // Three slots: the three probes run at once.
        .pool("p", 3)
        .target(
            "api",
            BreakerSettings {
                failures_max: 1,
                cooldown_ms: COOLDOWN_MS,
                probes: 3,
                probe_failures_max: 1,
                probe_wait_ms: 50,
                ..BreakerSettings::default()
            },
        )
        .task_fn("call", move |ctx| {
            let (st, rel) = (st.clone(), rel.clone());
            async move {
                match ctx.key.as_ref() {
                    "trip" => Err(weir::TaskError::Retryable("api is down".into())),
                    "bad" => {
                        st.fetch_add(1, Ordering::SeqCst);
                        // Fail only once all three probes are out.
                        while st.load(Ordering::SeqCst) < 3 {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Err(weir::TaskError::Retryable("still down".into()))
                    }
                    _ => {
                        st.fetch_add(1, Ordering::SeqCst);
                        while !rel.load(Ordering::SeqCst) {
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                        Ok(b"ok".to_vec())
                    }
                }
            }
        })
        .open()
        .await
        .unwrap();

    engine.enqueue(job("trip")).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(60))
        .await
        .unwrap();
    let b = engine.breaker("api").await.unwrap().unwrap();
    let BreakerState::Open { since_ms, .. } = b.state else {
        panic!("after the trip: {:?}", b.state);
    };

    // Deferred until the cooldown ends, then admitted as the 3 probes.
    for key in ["bad", "slow-0", "slow-1"] {
        engine.enqueue(job(key)).await.unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(WAIT_MS);
    let reopened_at_ms = loop {
        let b = engine.breaker("api").await.unwrap().unwrap();
        if let BreakerState::Open { since_ms: s, .. } = b.state {
            if s > since_ms {
                break s;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not reopened within {WAIT_MS} ms of the failed probe ({} probes started): {:?}",
            started.load(Ordering::SeqCst),
            b.state
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(started.load(Ordering::SeqCst), 3, "all three were probes");
    assert!(
        matches!(
            engine.ticket("bad").await.unwrap(),
            Some(TicketView::Done(ref r)) if r.status == DoneStatus::Failed
        ),
        "the failed probe reopened it"
    );
    for key in ["slow-0", "slow-1"] {
        assert!(
            matches!(
                engine.ticket(key).await.unwrap(),
                Some(TicketView::Live { running: true, .. })
            ),
            "{key}: still running when it reopened"
        );
    }

    // The probes still out succeed late: ignored while open.
    release.store(true, Ordering::SeqCst);
    for key in ["slow-0", "slow-1"] {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(WAIT_MS);
        loop {
            match engine.ticket(key).await.unwrap() {
                Some(TicketView::Done(r)) => {
                    assert_eq!(r.status, DoneStatus::Succeeded, "{key}: {r:?}");
                    break;
                }
                other => assert!(
                    tokio::time::Instant::now() < deadline,
                    "{key}: not done: {other:?}"
                ),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let b = engine.breaker("api").await.unwrap().unwrap();
    if engine.now_ms() < reopened_at_ms + COOLDOWN_MS {
        assert!(
            matches!(b.state, BreakerState::Open { since_ms, .. } if since_ms == reopened_at_ms),
            "late successes do not close a reopened breaker: {:?}",
            b.state
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
