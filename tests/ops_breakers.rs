//! Breakers as an operator sees them: listed with their state, and reset
//! to closed durably (the reset survives a restart).

mod ops_support;

use std::sync::Arc;
use std::time::Duration;

use ops_support::*;
use weir::{EngineEvent, Job, RetryPolicy};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_closes_an_open_breaker_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    script.fail(true);
    let engine = open(dir.path(), &script, None).await;
    // Nothing used a target yet.
    assert!(engine.breakers().await.unwrap().is_empty());
    let err = engine.reset_breaker("db").await.unwrap_err();
    assert!(err.to_string().contains("\"db\""), "{err}");

    let mut j = Job::new("call", "plain", "default");
    j.target = Some(Arc::from("db"));
    j.policy = RetryPolicy::once();
    engine.enqueue(j).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    let views = engine.breakers().await.unwrap();
    assert_eq!(views.len(), 1, "{views:?}");
    assert_eq!(views[0].target, "db");
    assert_eq!(views[0].state, "open");
    assert!(views[0].opened_at_ms.is_some());
    assert_eq!(views[0].cooldown_ms, 3_600_000);

    let mut events = engine.subscribe();
    let v = engine.reset_breaker("db").await.unwrap();
    assert_eq!(v.state, "closed");
    assert_eq!(v.consecutive_failures, 0);
    assert!(v.since_ms.is_some());
    let e = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Ok(EngineEvent::Breaker { target, state }) = events.recv().await {
                return (target.to_string(), state);
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(e, ("db".to_string(), "closed".to_string()));
    let views = engine.breakers().await.unwrap();
    assert_eq!(views[0].state, "closed");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();

    // With no engine running, and after a restart, it stays closed.
    {
        let (store, _) = weir::actors::store::open_for_inspection(dir.path()).unwrap();
        let views = weir::actors::breaker::persisted(&store).unwrap();
        assert_eq!(views.len(), 1);
        assert_eq!(views[0].state, "closed");
    }
    script.fail(false);
    let engine = open(dir.path(), &script, None).await;
    let views = engine.breakers().await.unwrap();
    assert_eq!(views[0].state, "closed");
    // And it admits: a job on the target runs now.
    let mut j = Job::new("call2", "plain", "default");
    j.target = Some(Arc::from("db"));
    engine.enqueue(j).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    assert!(script.plain_runs().contains(&"call2".to_string()));
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
