//! Hand-outs ahead of their instant (`QueueSettings::hand_out_ahead_ms`):
//! a ticket due soon goes to a pool of the engine's process while its slot
//! is free, and its task starts no earlier than its instant; a cancel in
//! between stops it unstarted; a hand-out lost with its process (kill -9)
//! before its instant spends no attempt and still runs at its instant.
//!
//! The crash test re-executes this test binary, running only
//! `ahead_child` with `WEIR_AHEAD_CHILD_DIR` set: the child enqueues one
//! job due 8 s later, allowed one attempt, prints `due <ms>` and then
//! `handed <key>` once the ticket is running (its hand-out is durable),
//! and waits to be killed.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir::actors::clock::Clock;
use weir::{
    Cancelled, DoneStatus, Durability, Engine, EngineEvent, Job, QueueSettings, RetryPolicy,
    TicketView,
};

const DIR_VAR: &str = "WEIR_AHEAD_CHILD_DIR";

/// A horizon wide enough that the tests' hand-outs happen at once, however
/// slow the machine: the assertions below are about order, not time.
const AHEAD_MS: u64 = 10_000;

/// How far ahead the tests' jobs are due: time enough, on a loaded
/// machine, for what each test does before the instant (each checks it did).
const DUE_IN_MS: u64 = 5_000;

/// When each attempt's task started (engine clock) and its attempt number.
type Starts = Arc<Mutex<Vec<(u64, u32)>>>;

fn builder(dir: &std::path::Path, clock: &Clock, starts: &Starts) -> weir::EngineBuilder {
    let (c, s) = (clock.clone(), starts.clone());
    Engine::builder(dir)
        .durability(Durability::Flush)
        .clock(clock.clone())
        .pool("p", 2)
        .queue_settings(QueueSettings {
            hand_out_ahead_ms: AHEAD_MS,
            ..QueueSettings::default()
        })
        .task_fn("work", move |ctx| {
            s.lock().unwrap().push((c.now_ms(), ctx.attempt));
            async move { Ok(Vec::new()) }
        })
}

fn job_due(key: &str, due_ms: u64) -> Job {
    let mut j = Job::new(key, "work", "p");
    j.due_ms = due_ms;
    j.policy = RetryPolicy::once();
    j
}

/// An engine on `dir` with the tests' settings, its clock and the starts
/// its task records.
async fn open(dir: &std::path::Path) -> (Engine, Clock, Starts) {
    let clock = Clock::system();
    let starts: Starts = Arc::default();
    let engine = builder(dir, &clock, &starts).open().await.unwrap();
    (engine, clock, starts)
}

/// Polls `key`'s ticket until `pick` takes it, `limit_s` at most.
async fn until<T>(
    engine: &Engine,
    key: &str,
    what: &str,
    limit_s: u64,
    pick: impl Fn(Option<TicketView>) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(limit_s);
    while Instant::now() < deadline {
        if let Some(found) = pick(engine.ticket(key).await.unwrap()) {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!(
        "{key}: {what} within {limit_s} s: {:?}",
        engine.ticket(key).await
    );
}

/// Waits until `key`'s ticket is running (handed out); its start.
async fn running(engine: &Engine, key: &str) -> Option<u64> {
    until(engine, key, "not handed out", 10, |t| match t {
        Some(TicketView::Live {
            running: true,
            started_ms,
            ..
        }) => Some(started_ms),
        _ => None,
    })
    .await
}

async fn done(engine: &Engine, key: &str) -> weir::DoneRecord {
    until(engine, key, "not done", 30, |t| match t {
        Some(TicketView::Done(r)) => Some(r),
        _ => None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ticket_due_soon_is_handed_out_ahead_and_starts_at_its_instant() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, clock, starts) = open(dir.path()).await;
    let mut events = engine.subscribe();
    let due = clock.now_ms() + DUE_IN_MS;
    engine.enqueue(job_due("soon", due)).await.unwrap();

    // Handed out before its instant, and shown as starting at it.
    let started_ms = running(&engine, "soon").await;
    let seen_ms = clock.now_ms();
    assert!(
        seen_ms < due,
        "the ticket runs {} ms before its instant: handed out ahead",
        due - seen_ms
    );
    assert_eq!(started_ms, Some(due), "a grant ahead starts at its instant");
    assert!(
        starts.lock().unwrap().is_empty(),
        "no task starts before its instant"
    );

    // Its task starts at the instant, not before; so does its event.
    let started_event_ms = loop {
        match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
            Ok(Ok(EngineEvent::Started { key, .. })) if key.as_ref() == "soon" => {
                break clock.now_ms()
            }
            Ok(Ok(_)) => continue,
            other => panic!("no Started event: {other:?}"),
        }
    };
    assert!(
        started_event_ms >= due,
        "the Started event came {} ms before the instant",
        due - started_event_ms
    );
    let record = done(&engine, "soon").await;
    assert_eq!(record.status, DoneStatus::Succeeded);
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1, "one attempt: {starts:?}");
    assert!(
        starts[0].0 >= due,
        "the task started {} ms before its instant",
        due - starts[0].0
    );
    assert_eq!(starts[0].1, 1);
    assert_eq!(record.started_ms.map(|s| s >= due), Some(true));
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_before_the_instant_stops_the_grant_unstarted() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, clock, starts) = open(dir.path()).await;
    let due = clock.now_ms() + DUE_IN_MS;
    engine.enqueue(job_due("gone", due)).await.unwrap();
    engine.enqueue(job_due("kept", due)).await.unwrap();
    running(&engine, "gone").await;
    running(&engine, "kept").await;
    assert!(matches!(
        engine.cancel("gone").await.unwrap(),
        Cancelled::Cancelled(_)
    ));
    assert!(clock.now_ms() < due, "the cancel came before the instant");
    assert_eq!(done(&engine, "kept").await.status, DoneStatus::Succeeded);
    assert_eq!(done(&engine, "gone").await.status, DoneStatus::Cancelled);
    let starts = starts.lock().unwrap().clone();
    assert_eq!(
        starts.len(),
        1,
        "only the kept ticket's task ran: {starts:?}"
    );
    // Its slot came back: a job due now runs.
    engine
        .enqueue(job_due("after", clock.now_ms()))
        .await
        .unwrap();
    assert_eq!(done(&engine, "after").await.status, DoneStatus::Succeeded);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// A pause calls back a grant waiting for its instant (a stopping engine
/// pauses first: a leader that steps down leaves no grant to start after
/// it); resumed, the ticket is handed out again and runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_calls_back_the_grants_waiting_for_their_instant() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, clock, starts) = open(dir.path()).await;
    let due = clock.now_ms() + DUE_IN_MS;
    engine.enqueue(job_due("paused", due)).await.unwrap();
    running(&engine, "paused").await;
    engine.pause(true).unwrap();
    let (deferrals, at_ms) = until(&engine, "paused", "not called back", 10, |t| match t {
        Some(TicketView::Live {
            running: false,
            deferrals,
            at_ms,
            ..
        }) => Some((deferrals, at_ms)),
        _ => None,
    })
    .await;
    assert_eq!(deferrals, 1);
    assert_eq!(at_ms, due, "pending again at its instant");
    assert!(clock.now_ms() < due, "called back before the instant");
    engine.pause(false).unwrap();
    let record = done(&engine, "paused").await;
    assert_eq!(record.status, DoneStatus::Succeeded);
    assert_eq!((record.failures, record.deferrals), (0, 1));
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1, "one start: {starts:?}");
    assert!(starts[0].0 >= due);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

/// The child: runs only when the parent sets `WEIR_AHEAD_CHILD_DIR`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ahead_child() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        return;
    };
    let (engine, clock, _starts) = open(std::path::Path::new(&dir)).await;
    let due = clock.now_ms() + 8_000;
    engine.enqueue(job_due("once", due)).await.unwrap();
    println!("due {due}");
    running(&engine, "once").await;
    // The queue shows the hand-out as it applies it, before its batch is
    // durable. An enqueue is answered once durable, in that batch or a
    // later one: after its answer the hand-out survives the kill. (Due in
    // an hour: it is never handed out here.)
    engine
        .enqueue(job_due("mark", clock.now_ms() + 3_600_000))
        .await
        .unwrap();
    println!("handed once");
    // Killed here, long before the instant.
    tokio::time::sleep(Duration::from_secs(60)).await;
    panic!("the child was not killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hand_out_ahead_lost_with_its_process_spends_no_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ahead_child", "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut due = None;
    let mut handed = false;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        // libtest's "test ahead_child ... " may lead the first line.
        if let Some((_, ms)) = line.split_once("due ") {
            due = Some(ms.trim().parse::<u64>().unwrap());
        }
        if line.ends_with("handed once") {
            handed = true;
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(handed, "the child did not hand the ticket out");
    let due = due.expect("the child printed its due instant");

    let clock = Clock::system();
    assert!(
        clock.now_ms() < due,
        "the reopen must come before the instant for this test to mean anything"
    );
    let starts: Starts = Arc::default();
    let engine = builder(dir.path(), &clock, &starts).open().await.unwrap();
    let record = done(&engine, "once").await;
    assert_eq!(
        record.status,
        DoneStatus::Succeeded,
        "a hand-out lost before its instant never ran: its one attempt is left ({record:?})"
    );
    assert_eq!(record.failures, 0);
    assert_eq!(
        record.deferrals, 1,
        "the lost hand-out came back as a deferral: it was durable before the kill"
    );
    let starts = starts.lock().unwrap().clone();
    assert_eq!(starts.len(), 1, "one start: {starts:?}");
    assert!(
        starts[0].0 >= due,
        "the task started {} ms before its instant",
        due - starts[0].0
    );
    assert_eq!(starts[0].1, 1, "the task sees attempt 1");
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
