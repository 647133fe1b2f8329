//! Runs prepared ahead of their instants (issue #17, item 4), under paused
//! time on an anchored clock: a key due within the horizon has its run
//! created and its ticket enqueued before its instant, and its task starts
//! at the instant, never before. What made it due changing before the
//! instant takes the run back: a signal that moves the instant (the key
//! runs at the new one, once), the key's removal from the inventory (it
//! does not run), a pause (nothing runs until unpaused; then the same
//! partition runs, once). A cron window is prepared and withdrawn alike.
//! And a process killed with SIGKILL between the preparation and the
//! instant runs every prepared key once, at its instant, after a reopen.
//!
//! The kill test re-executes this test binary, running only `kill_child`
//! with `WEIR_PREPARED_CHILD_DIR` set.

mod triggers_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use triggers_support::*;
use weir::actors::clock::Clock;
use weir::{Durability, Engine, RunState, TriggerSettings};

const DIR_VAR: &str = "WEIR_PREPARED_CHILD_DIR";

fn write(path: &std::path::Path, keys: &[&str]) {
    std::fs::write(path, keys.join("\n") + "\n").unwrap();
}

/// The run of `partition`, if the graph has one.
fn run_of(engine: &Engine, graph: &str, partition: &str) -> Option<weir::RunSummary> {
    engine
        .list_runs(graph, None)
        .unwrap()
        .into_iter()
        .find(|r| r.partition == partition)
}

/// A keyed graph over `keys` whose runs come a minute apart; it has run
/// each key once (at T0). Returns the engine and the instant key `a`'s
/// second run is due.
async fn after_first_runs(
    dir: &std::path::Path,
    name: &str,
    keys: &[&str],
    script: &Script,
) -> (Engine, std::path::PathBuf, u64) {
    let inv = dir.join("keys.txt");
    write(&inv, keys);
    let engine = open(&dir.join("db"), T0, 4, 0, script).await;
    engine
        .adopt(keyed(name, &inv, |s| s.schedule.interval_ms = MIN))
        .await
        .unwrap();
    until(10 * S, "every key's first run", || {
        keys.iter().all(|k| script.runs_of(k).len() == 1)
    })
    .await;
    advance(S).await;
    let due = schedule_of(&engine, name, "a").await.due_at_ms;
    assert!(due > T0 + MIN - S, "a is due a minute after its run: {due}");
    (engine, inv, due)
}

/// The key is prepared within the horizon and its task starts at the
/// instant, not before.
#[tokio::test(start_paused = true)]
async fn a_key_due_within_the_horizon_is_prepared_and_starts_at_its_instant() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, _, due) = after_first_runs(dir.path(), "g", &["a"], &script).await;
    let ahead = TriggerSettings::default().prepare_ahead_ms;
    // Before the horizon: nothing prepared.
    let now = engine.now_ms();
    advance(due - ahead - now - S).await;
    let p = format!("key=a@{}", label(due));
    assert!(
        run_of(&engine, "g", &p).is_none(),
        "not prepared before the horizon"
    );
    // Within it: the run exists, waits for the instant, the key is claimed.
    advance(2 * S).await;
    let r = run_of(&engine, "g", &p).expect("prepared within the horizon");
    assert_eq!(r.record.state, RunState::Active);
    assert_eq!(r.record.not_before_ms, Some(due));
    assert!(r.record.requested_at_ms < due);
    let s = schedule_of(&engine, "g", "a").await;
    assert_eq!(s.running.as_deref(), Some(p.as_str()), "{s:?}");
    assert_eq!(script.runs_of("a").len(), 1, "nothing ran early");
    // At the instant it starts.
    let now = engine.now_ms();
    advance(due - now - 10).await;
    assert_eq!(script.runs_of("a").len(), 1, "nothing ran early");
    advance(2 * S).await;
    let runs = script.runs_of("a");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[1].0, p);
    assert!(
        runs[1].1 >= due && runs[1].1 < due + 100,
        "{runs:?} for {due}"
    );
    until(5 * S, "the prepared run to complete", || {
        run_of(&engine, "g", &p).is_some_and(|r| r.record.state == RunState::Complete)
    })
    .await;
    // Views show it started at its instant, prepared earlier (issue #31
    // item 18): the list, the run, and a duration from the instant.
    let page = weir::serve::views::list_runs(
        engine.store(),
        &weir::serve::views::RunQuery {
            graph: Some("g".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let brief = page.runs.iter().find(|b| b.partition == p).unwrap();
    assert_eq!(brief.started_at_ms, due, "{brief:?}");
    assert!(brief.prepared_at_ms.is_some_and(|at| at < due), "{brief:?}");
    let pp: weir::Partition = p.parse().unwrap();
    let detail = weir::serve::views::run_detail(engine.store(), "g", &pp, 1024)
        .unwrap()
        .unwrap();
    assert_eq!(detail.started_at_ms, due);
    assert_eq!(detail.prepared_at_ms, brief.prepared_at_ms);
    assert!(
        detail.settled_at_ms.unwrap() - detail.started_at_ms < S,
        "{detail:?}"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A signal that moves a prepared key's instant withdraws its run: the key
/// runs at the signal's instant, once, and not at the prepared one. A
/// signal that leaves the instant where it is keeps the run.
#[tokio::test(start_paused = true)]
async fn a_signal_before_the_instant_moves_the_run_or_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, _, due) = after_first_runs(dir.path(), "g", &["a", "b"], &script).await;
    let now = engine.now_ms();
    advance(due - now - 3 * S).await;
    let pa = format!("key=a@{}", label(due));
    let due_b = schedule_of(&engine, "g", "b").await.due_at_ms;
    let pb = format!("key=b@{}", label(due_b));
    assert!(run_of(&engine, "g", &pa).is_some() && run_of(&engine, "g", &pb).is_some());
    // a: an immediate signal, due now, before the prepared instant.
    let s = engine.signal("g", "a", "ci", true).await.unwrap();
    assert!(s.due_at_ms < due, "{s:?}");
    assert_eq!(
        run_of(&engine, "g", &pa).unwrap().record.state,
        RunState::Withdrawn,
        "the prepared run is taken back"
    );
    // b: a signal whose debounce (60 s) ends after the prepared instant:
    // the scheduled run answers it, and stays prepared.
    let s = engine.signal("g", "b", "ci", false).await.unwrap();
    assert_eq!(s.due_at_ms, due_b, "{s:?}");
    assert_eq!(
        run_of(&engine, "g", &pb).unwrap().record.state,
        RunState::Active
    );
    advance(10 * S).await;
    let a = script.runs_of("a");
    assert_eq!(a.len(), 2, "a ran at the signal, once: {a:?}");
    assert_ne!(a[1].0, pa);
    assert!(a[1].1 < due, "{a:?}");
    assert_eq!(
        run_of(&engine, "g", &pa).unwrap().record.state,
        RunState::Withdrawn
    );
    let b = script.runs_of("b");
    assert_eq!(b.len(), 2, "b ran at its instant, once: {b:?}");
    assert_eq!(b[1].0, pb);
    assert!(b[1].1 >= due_b, "{b:?}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A key removed from the inventory before its prepared instant does not
/// run.
#[tokio::test(start_paused = true)]
async fn a_key_removed_from_the_inventory_before_its_instant_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, inv, due) = after_first_runs(dir.path(), "g", &["a", "b"], &script).await;
    let now = engine.now_ms();
    advance(due - now - 3 * S).await;
    let pa = format!("key=a@{}", label(due));
    assert_eq!(
        run_of(&engine, "g", &pa).unwrap().record.state,
        RunState::Active
    );
    write(&inv, &["b"]);
    let change = engine.reload_inventory("g").await.unwrap();
    assert_eq!(change.removed, 1);
    assert_eq!(
        run_of(&engine, "g", &pa).unwrap().record.state,
        RunState::Withdrawn
    );
    advance(10 * S).await;
    assert_eq!(script.runs_of("a").len(), 1, "a did not run again");
    assert_eq!(script.runs_of("b").len(), 2, "b ran at its instant");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A pause before the instant takes the prepared run back: nothing runs
/// while paused; once unpaused, the same partition runs, once, with a
/// fresh task instance.
#[tokio::test(start_paused = true)]
async fn a_pause_before_the_instant_withdraws_and_unpause_runs_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let (engine, _, due) = after_first_runs(dir.path(), "g", &["a"], &script).await;
    let now = engine.now_ms();
    advance(due - now - 3 * S).await;
    let pa = format!("key=a@{}", label(due));
    assert_eq!(
        run_of(&engine, "g", &pa).unwrap().record.state,
        RunState::Active
    );
    assert!(engine.set_paused("g", true).await.unwrap());
    assert_eq!(
        run_of(&engine, "g", &pa).unwrap().record.state,
        RunState::Withdrawn
    );
    let s = schedule_of(&engine, "g", "a").await;
    assert_eq!(
        (s.lease_owner.as_deref(), s.due_at_ms),
        (None, due),
        "{s:?}"
    );
    advance(MIN).await;
    assert_eq!(script.runs_of("a").len(), 1, "nothing ran while paused");
    assert!(engine.set_paused("g", false).await.unwrap());
    until(10 * S, "a's run after the unpause", || {
        script.runs_of("a").len() == 2
    })
    .await;
    advance(10 * S).await;
    let a = script.runs_of("a");
    assert_eq!(a.len(), 2, "{a:?}");
    assert_eq!(a[1].0, pa, "the same partition runs");
    let r = run_of(&engine, "g", &pa).unwrap();
    assert_eq!(r.record.state, RunState::Complete);
    assert_eq!(
        r.record.expected_reruns.get("work").copied(),
        Some(1),
        "a fresh task instance, one rerun past the withdrawn one"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A cron window is prepared before its firing and withdrawn by a pause;
/// unpaused after the firing, the window runs once.
#[tokio::test(start_paused = true)]
async fn a_cron_window_is_prepared_and_a_pause_withdraws_it() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, 0, &script).await;
    let mut g = graph("hourly");
    g.partitioning = weir::Partitioning::Hourly;
    g.cron = Some("0 * * * *".into());
    engine.adopt(g).await.unwrap();
    advance(H - 3 * S).await;
    let p = "2026-11-29T00";
    let r = run_of(&engine, "hourly", p).expect("prepared before its firing");
    assert_eq!(
        (r.record.state, r.record.not_before_ms),
        (RunState::Active, Some(T0 + H))
    );
    assert!(engine.set_paused("hourly", true).await.unwrap());
    assert_eq!(
        run_of(&engine, "hourly", p).unwrap().record.state,
        RunState::Withdrawn
    );
    advance(10 * S).await;
    assert!(script.ran().is_empty(), "nothing ran while paused");
    assert!(engine.set_paused("hourly", false).await.unwrap());
    advance(10 * S).await;
    assert_eq!(script.ran().len(), 1, "{:?}", script.ran());
    assert_eq!(
        run_of(&engine, "hourly", p).unwrap().record.state,
        RunState::Complete
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

fn label(at_ms: u64) -> String {
    weir::Partition::keyed_at(weir_core::names::Key::new("a").unwrap(), at_ms)
        .unwrap()
        .to_string()
        .split_once('@')
        .unwrap()
        .1
        .to_string()
}

/// Keys of the kill test.
const KILL_KEYS: usize = 20;
/// Their interval: the second run of each is due this long after its
/// first ends, within the preparation horizon at once.
const KILL_INTERVAL_MS: u64 = 4_000;

/// An engine on the real clock whose task appends `<run id> <start ms>`
/// to `ran.txt` in `dir` (appended before the task returns, so a line
/// survives the process's kill).
async fn kill_engine(dir: &std::path::Path) -> Engine {
    let clock = Clock::system();
    let c = clock.clone();
    let log = Arc::new(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("ran.txt"))
            .unwrap(),
    ));
    Engine::builder(dir.join("db"))
        .durability(Durability::Flush)
        .clock(clock)
        .pool("default", 64)
        .task_fn("work", move |ctx| {
            let line = format!("{} {}\n", ctx.key, c.now_ms());
            let log = log.clone();
            async move {
                log.lock().unwrap().write_all(line.as_bytes()).unwrap();
                Ok(Vec::new())
            }
        })
        .open()
        .await
        .unwrap()
}

/// The child: adopts the keyed graph, prints `prepared` once every key's
/// second run is prepared, then waits to be killed.
#[tokio::test]
async fn kill_child() {
    let Ok(dir) = std::env::var(DIR_VAR) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let inv = dir.join("keys.txt");
    let keys: Vec<String> = (0..KILL_KEYS).map(|i| format!("k{i:02}")).collect();
    std::fs::write(&inv, keys.join("\n") + "\n").unwrap();
    let engine = kill_engine(&dir).await;
    engine
        .adopt(keyed("kp", &inv, |s| {
            s.schedule.interval_ms = KILL_INTERVAL_MS
        }))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = engine.now_ms();
        let prepared = engine
            .list_runs("kp", Some(RunState::Active))
            .unwrap()
            .iter()
            .filter(|r| r.record.not_before_ms.is_some_and(|at| at > now + 500))
            .count();
        if prepared == KILL_KEYS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{prepared} of {KILL_KEYS} prepared"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A run record is listed as soon as it is written, before the sync
    // that makes its batch durable: the kill must come after that sync,
    // or the last batch of preparations can be lost (and prepared again
    // by the trigger's repair, after the parent has counted the runs).
    engine.store().sync().unwrap();
    println!("prepared");
    std::io::stdout().flush().unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

/// SIGKILL after every key's second run is prepared and before its
/// instant: after a reopen each of those runs starts once, at or after its
/// instant, and no run starts twice.
#[tokio::test]
async fn a_kill_between_preparation_and_the_instant_runs_each_once_at_its_instant() {
    if std::env::var(DIR_VAR).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "kill_child", "--nocapture", "--test-threads=1"])
        .env(DIR_VAR, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // libtest prints `test kill_child ... ` before the child's own line.
    let out = BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if line.trim_end().ends_with("prepared") {
                let _ = tx.send(());
                return;
            }
        }
    });
    let prepared = rx.recv_timeout(Duration::from_secs(90)).is_ok();
    if !prepared {
        let _ = child.kill();
    }
    assert!(prepared, "the child prepared every key's second run");
    child.kill().unwrap();
    child.wait().unwrap();
    // The prepared runs, as the killed process left them.
    let engine = kill_engine(dir.path()).await;
    let prepared: Vec<(String, u64)> = engine
        .list_runs("kp", Some(RunState::Active))
        .unwrap()
        .into_iter()
        .filter_map(|r| r.record.not_before_ms.map(|at| (r.partition, at)))
        .collect();
    assert_eq!(prepared.len(), KILL_KEYS, "{prepared:?}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let lines = loop {
        let text = std::fs::read_to_string(dir.path().join("ran.txt")).unwrap();
        let lines: Vec<(String, u64)> = text
            .lines()
            .map(|l| {
                let (id, at) = l.rsplit_once(' ').unwrap();
                (id.to_string(), at.parse().unwrap())
            })
            .collect();
        let done = prepared
            .iter()
            .all(|(p, _)| lines.iter().any(|(id, _)| id.contains(&format!("/{p}/"))));
        if done {
            break lines;
        }
        assert!(
            Instant::now() < deadline,
            "prepared runs did not all start: {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut ids: Vec<&String> = lines.iter().map(|(id, _)| id).collect();
    ids.sort();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "no task instance started twice: {lines:?}");
    for (p, at) in &prepared {
        let starts: Vec<u64> = lines
            .iter()
            .filter(|(id, _)| id.contains(&format!("/{p}/")))
            .map(|(_, s)| *s)
            .collect();
        assert_eq!(starts.len(), 1, "{p}: {starts:?}");
        assert!(
            starts[0] >= *at,
            "{p} started at {} before its instant {at}",
            starts[0]
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
