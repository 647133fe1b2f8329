//! Embedding weir in a ractor application: `cargo run --example embed`.
//!
//! The application has its own actor, `App`; the engine's supervisor is
//! linked under it (`EngineBuilder::supervised_by`), so the application
//! hears if the engine stops. Two pools: `io` runs calls to a flaky remote
//! API (target `flaky-api`, guarded by a breaker), `cpu` runs local work.
//! The API fails its first calls, which trips the breaker: tickets are
//! deferred (no attempt spent) until the cooldown ends, a probe succeeds,
//! the breaker closes, and retries finish the rest. Every engine event is
//! printed as a line, then a summary per job.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use weir::{
    BreakerSettings, DoneStatus, Durability, Engine, EngineEvent, Job, RetryPolicy, TaskError,
    TicketView,
};

/// The application's own actor: here it only watches the engine.
struct App;

impl Actor for App {
    type Msg = ();
    type State = ();
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<()>, _args: ()) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        event: SupervisionEvent,
        _state: &mut (),
    ) -> Result<(), ActorProcessingErr> {
        // The default would stop the app when the engine stops; an app
        // decides for itself (here: say so and carry on).
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                println!("app: engine {:?} stopped ({reason:?})", cell.get_name());
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                println!("app: engine {:?} failed: {err}", cell.get_name());
            }
            _ => {}
        }
        Ok(())
    }
}

fn line(e: &EngineEvent) -> String {
    match e {
        EngineEvent::Enqueued { key, pool, .. } => format!("enqueued   {key} on {pool}"),
        EngineEvent::Started { key, attempt, .. } => format!("started    {key} attempt {attempt}"),
        EngineEvent::Retrying {
            key,
            attempt,
            error,
            ..
        } => format!("retrying   {key} after attempt {attempt}: {error}"),
        EngineEvent::Deferred { key, .. } => format!("deferred   {key}: held back by its breaker"),
        EngineEvent::Completed {
            key,
            status,
            attempts,
            ..
        } => format!("completed  {key}: {status} after {attempts} attempt(s)"),
        EngineEvent::Breaker { target, state } => format!("breaker    {target} is {state}"),
        EngineEvent::Restarted { role, error } => format!("restarted  {role}: {error}"),
        EngineEvent::Stopped { error } => format!("stopped    {error}"),
        other => format!("{other:?}"),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (app, app_join) = Actor::spawn(Some("embed.app".into()), App, ()).await?;

    // The remote API fails its first 4 calls.
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let engine = Engine::builder(dir.path())
        .durability(Durability::Flush)
        .pool("io", 2)
        .pool("cpu", 2)
        .target(
            "flaky-api",
            BreakerSettings {
                failures_max: 3,
                cooldown_ms: 300,
                probes: 1,
                probe_wait_ms: 100,
                ..BreakerSettings::default()
            },
        )
        .task_fn("fetch", move |ctx| {
            let c = c.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(5)).await;
                if c.fetch_add(1, Ordering::SeqCst) < 4 {
                    Err(TaskError::Retryable("503 from flaky-api".into()))
                } else {
                    Ok(format!("page {}", ctx.key).into_bytes())
                }
            }
        })
        .task_fn("crunch", |ctx| async move {
            let n: u64 = std::str::from_utf8(&ctx.payload)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let sum: u64 = (1..=n).sum();
            Ok(sum.to_string().into_bytes())
        })
        .supervised_by(app.get_cell())
        .open()
        .await?;

    let mut events = engine.subscribe();
    let printer = tokio::spawn(async move {
        while let Ok(e) = events.recv().await {
            println!("{}", line(&e));
        }
    });

    let mut keys = Vec::new();
    for i in 0..4 {
        let mut job = Job::new(format!("fetch-{i}"), "fetch", "io");
        job.target = Some(Arc::from("flaky-api"));
        job.policy = RetryPolicy {
            attempts_max: 4,
            initial_ms: 50,
            multiplier: 2.0,
            max_ms: 400,
            jitter: 0.0,
            deadline_ms: None,
        };
        keys.push(job.key.to_string());
        engine.enqueue(job).await?;
    }
    for n in [10u64, 100, 1_000] {
        let mut job = Job::new(format!("crunch-{n}"), "crunch", "cpu");
        job.payload = n.to_string().into_bytes();
        keys.push(job.key.to_string());
        engine.enqueue(job).await?;
    }
    engine.drain_until_idle(Duration::from_secs(30)).await?;
    // Let the printer catch up with the last events.
    tokio::time::sleep(Duration::from_millis(50)).await;

    println!();
    println!("summary (API calls made: {})", calls.load(Ordering::SeqCst));
    let mut succeeded = 0;
    for key in &keys {
        match engine.ticket(key).await? {
            Some(TicketView::Done(r)) => {
                if r.status == DoneStatus::Succeeded {
                    succeeded += 1;
                }
                // A hand-out its breaker held back is a deferral, not an
                // attempt: the retry policy spent nothing on it.
                println!(
                    "  {key:<12} {:<9} attempts {} deferrals {} failures {} output {:?}",
                    r.status.to_string(),
                    r.attempts,
                    r.deferrals,
                    r.failures,
                    String::from_utf8_lossy(&r.output)
                );
            }
            other => println!("  {key:<12} {other:?}"),
        }
    }
    if let Some(b) = engine.breaker("flaky-api").await? {
        println!("  breaker flaky-api: {:?}", b.state);
    }
    println!("{succeeded} of {} jobs succeeded", keys.len());

    engine.shutdown(Duration::from_secs(5)).await?;
    printer.abort();
    app.stop(None);
    app_join.await?;
    Ok(())
}
