//! The breaker of a target, end to end (resilience4j semantics, see
//! weir-core's breaker): `failures_max` consecutive failures open it; while
//! open it Defers tickets, which spends no attempt; the first admit after
//! the cooldown half-opens it and admits one probe; the probe's success
//! closes it. Real time with a short cooldown: tokio's paused clock needs
//! its `test-util` feature, which this crate does not enable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir::core::breaker::BreakerState;
use weir::{
    BreakerSettings, DoneRecord, DoneStatus, Durability, Engine, EngineEvent, Job, RetryPolicy,
    TicketView,
};

const COOLDOWN_MS: u64 = 400;

fn job(key: &str) -> Job {
    let mut j = Job::new(key, "call", "p");
    j.target = Some(Arc::from("api"));
    // One attempt: a deferral that spent one would fail the job.
    j.policy = RetryPolicy {
        attempts_max: 1,
        ..RetryPolicy::default()
    };
    j
}

async fn done(engine: &Engine, key: &str) -> DoneRecord {
    match engine.ticket(key).await.unwrap() {
        Some(TicketView::Done(r)) => r,
        other => panic!("{key}: not done: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breaker_opens_defers_half_opens_and_closes() {
    let dir = tempfile::tempdir().unwrap();
    let down = Arc::new(AtomicBool::new(true));
    let d = down.clone();
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        // One slot: attempts run one after another, so the breaker hears
        // each outcome before the next admit.
        .pool("p", 1)
        .target(
            "api",
            BreakerSettings {
                failures_max: 3,
                cooldown_ms: COOLDOWN_MS,
                probes: 1,
                probe_wait_ms: 50,
                ..BreakerSettings::default()
            },
        )
        .task_fn("call", move |_ctx| {
            let d = d.clone();
            async move {
                if d.load(Ordering::SeqCst) {
                    Err(weir::TaskError::Retryable("api is down".into()))
                } else {
                    Ok(b"ok".to_vec())
                }
            }
        })
        .open()
        .await
        .unwrap();
    let mut events = engine.subscribe();
    assert!(
        engine.breaker("api").await.unwrap().is_none(),
        "not used yet"
    );

    // Three failures open it.
    for i in 0..3 {
        engine.enqueue(job(&format!("fail-{i}"))).await.unwrap();
    }
    engine
        .drain_until_idle(Duration::from_secs(60))
        .await
        .unwrap();
    for i in 0..3 {
        let r = done(&engine, &format!("fail-{i}")).await;
        assert_eq!(
            (r.status, r.attempts, r.failures),
            (DoneStatus::Failed, 1, 1)
        );
    }
    let b = engine.breaker("api").await.unwrap().unwrap();
    let BreakerState::Open { since_ms, until_ms } = b.state else {
        panic!("after 3 failures: {:?}", b.state);
    };
    assert_eq!(until_ms - since_ms, COOLDOWN_MS);

    // The target recovers, but the breaker is open: tickets are deferred
    // until the cooldown ends, with no attempt spent.
    down.store(false, Ordering::SeqCst);
    for i in 0..3 {
        engine.enqueue(job(&format!("held-{i}"))).await.unwrap();
    }
    // Let the deferrals happen, well within the cooldown.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
    loop {
        let mut pending = 0;
        for i in 0..3 {
            if let Some(TicketView::Live {
                running: false,
                at_ms,
                ..
            }) = engine.ticket(&format!("held-{i}")).await.unwrap()
            {
                pending += usize::from(at_ms == until_ms);
            }
        }
        if pending == 3 || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for i in 0..3 {
        let key = format!("held-{i}");
        match engine.ticket(&key).await.unwrap() {
            Some(TicketView::Live {
                running: false,
                failures: 0,
                attempts,
                deferrals,
                at_ms,
                ..
            }) => {
                assert_eq!(
                    at_ms, until_ms,
                    "{key}: deferred to the end of the cooldown"
                );
                assert_eq!(
                    (attempts, deferrals),
                    (0, 1),
                    "{key}: a deferral is no attempt"
                );
            }
            other => panic!("{key}: not deferred: {other:?}"),
        }
    }

    // After the cooldown: one probe, its success closes it, the rest run.
    engine
        .drain_until_idle(Duration::from_secs(30))
        .await
        .unwrap();
    assert!(engine.now_ms() >= until_ms, "ran before the cooldown ended");
    for i in 0..3 {
        let r = done(&engine, &format!("held-{i}")).await;
        // With one attempt allowed, a deferral that spent one would have
        // failed the job. Deferrals are counted apart from attempts: each
        // held job ran exactly once, after at least one deferral.
        assert_eq!(
            (r.status, r.attempts, r.failures, r.error.as_deref()),
            (DoneStatus::Succeeded, 1, 0, None),
            "held-{i}: {r:?}"
        );
        assert!(r.deferrals >= 1, "held-{i}: deferred, and counted: {r:?}");
    }
    for i in 0..3 {
        let r = done(&engine, &format!("fail-{i}")).await;
        assert_eq!(r.deferrals, 0, "fail-{i} ran when handed out: {r:?}");
    }
    let b = engine.breaker("api").await.unwrap().unwrap();
    assert!(
        matches!(b.state, BreakerState::Closed { .. }),
        "after a good probe: {:?}",
        b.state
    );

    // The events tell the same story, in order.
    let mut story: Vec<String> = Vec::new();
    let mut deferred = std::collections::BTreeSet::new();
    while let Ok(e) = events.try_recv() {
        match e {
            EngineEvent::Breaker { target, state } => {
                assert_eq!(&*target, "api");
                story.push(state);
            }
            EngineEvent::Deferred { key, .. } => {
                deferred.insert(key.to_string());
                if story.last().map(String::as_str) != Some("deferred") {
                    story.push("deferred".into());
                }
            }
            _ => {}
        }
    }
    assert_eq!(
        deferred,
        (0..3).map(|i| format!("held-{i}")).collect(),
        "every held job was deferred"
    );
    // Between half-open and closed, the probe runs while the others are
    // denied again (all probes out), hence a possible second "deferred".
    let head: Vec<&str> = story.iter().take(3).map(String::as_str).collect();
    assert_eq!(head, ["open", "deferred", "half_open"], "story {story:?}");
    assert_eq!(
        story.last().map(String::as_str),
        Some("closed"),
        "story {story:?}"
    );
    assert_eq!(
        story.iter().filter(|s| *s == "open").count(),
        1,
        "story {story:?}"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// The attempt a task sees is the attempt as users count it (faults #3):
/// a hand-out its breaker deferred spends no attempt, so the only run of a
/// ticket deferred once is attempt 1 (`WEIR_ATTEMPT`, `{attempt}` and its
/// log), as its record says — not the hand-out number 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_hand_out_is_not_an_attempt_the_task_sees() {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("p", 1)
        .target(
            "api",
            BreakerSettings {
                failures_max: 1,
                cooldown_ms: COOLDOWN_MS,
                probes: 1,
                probe_wait_ms: 50,
                ..BreakerSettings::default()
            },
        )
        .task_fn("call", move |ctx| {
            let s = s.clone();
            async move {
                if ctx.key.as_ref() == "trip" {
                    return Err(weir::TaskError::Retryable("api is down".into()));
                }
                s.lock().unwrap().push(ctx.attempt);
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap();
    // One failure opens the breaker; the next ticket is deferred until the
    // cooldown ends, then runs once as the probe.
    engine.enqueue(job("trip")).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(
        engine.breaker("api").await.unwrap().unwrap().state,
        BreakerState::Open { .. }
    ));
    engine.enqueue(job("observe")).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(60))
        .await
        .unwrap();
    let r = done(&engine, "observe").await;
    assert_eq!(r.status, DoneStatus::Succeeded);
    assert!(r.deferrals >= 1, "it was deferred first: {r:?}");
    assert_eq!(r.attempts, 1, "{r:?}");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![1],
        "the task ran once, and saw attempt 1 (deferrals {})",
        r.deferrals
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
