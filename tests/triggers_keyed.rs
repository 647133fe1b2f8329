//! Keyed graphs end to end: the inventory (file and command) adds and
//! removes key schedules, a failing reload keeps the keys, the first load
//! must succeed at adopt; each key runs on its interval, failures retry on
//! the retry interval with the failures counted; runs that settled while
//! the trigger was down are repaired on restart.

mod triggers_support;

use std::time::Duration;

use triggers_support::*;
use weir::{EngineEvent, InventorySource};

fn write(path: &std::path::Path, keys: &[&str]) {
    std::fs::write(path, keys.join("\n") + "\n").unwrap();
}

async fn keys(engine: &weir::Engine, graph: &str) -> Vec<String> {
    engine
        .schedules(graph)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.key)
        .collect()
}

/// glazed's inventory refresh: new keys are due within the jitter, keys
/// gone lose their schedule, a failed reload keeps the previous keys and
/// says so.
#[tokio::test(start_paused = true)]
async fn inventory_adds_removes_and_survives_a_failing_reload() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("keys.txt");
    write(&inv, &["a", "b", "# a comment", "", "c"]);
    let script = Script::default();
    let engine = open(&dir.path().join("db"), T0, 8, 1_000, &script).await;
    let mut events = engine.subscribe();
    engine
        .adopt(keyed("inv", &inv, |s| s.schedule.jitter_ms = 30 * S))
        .await
        .unwrap();
    assert_eq!(keys(&engine, "inv").await, ["a", "b", "c"]);
    for s in engine.schedules("inv").await.unwrap() {
        assert!(
            s.due_at_ms >= T0 && s.due_at_ms <= T0 + 30 * S,
            "{s:?}: due within the jitter"
        );
        assert_eq!(s.due_reason, "inventory");
    }
    advance(MIN).await;
    for k in ["a", "b", "c"] {
        let runs = script.runs_of(k);
        assert_eq!(runs.len(), 1, "{k}: {runs:?}");
        let s = schedule_of(&engine, "inv", k).await;
        assert_eq!(s.due_reason, "schedule", "{s:?}");
        let finished = s.last_finished_at_ms.unwrap();
        assert!(
            s.due_at_ms >= finished + H && s.due_at_ms <= finished + H + 30 * S,
            "{s:?}: next due after interval + jitter"
        );
        assert_eq!(s.lease_owner, None);
    }

    // b goes, d comes.
    write(&inv, &["a", "c", "d"]);
    let change = engine.reload_inventory("inv").await.unwrap();
    assert_eq!((change.keys, change.added, change.removed), (3, 1, 1));
    assert_eq!(keys(&engine, "inv").await, ["a", "c", "d"]);
    advance(MIN).await;
    assert_eq!(script.runs_of("d").len(), 1, "the new key ran");
    assert_eq!(
        script.runs_of("b").len(),
        1,
        "the removed key did not run again"
    );

    // The file goes away: the reload fails, naming graph and file, and the
    // keys stay.
    std::fs::remove_file(&inv).unwrap();
    let e = engine
        .reload_inventory("inv")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("graph inv") && e.contains("keys.txt"), "{e}");
    assert_eq!(keys(&engine, "inv").await, ["a", "c", "d"]);
    let mut failed = None;
    while let Ok(ev) = events.try_recv() {
        if let EngineEvent::InventoryFailed {
            error, keys_kept, ..
        } = ev
        {
            failed = Some((error, keys_kept));
        }
    }
    let (error, kept) = failed.expect("an InventoryFailed event");
    assert!(error.contains("keys.txt"), "{error}");
    assert_eq!(kept, 3);
    // The periodic refresh fails too and still keeps them; runs go on.
    advance(H + 10 * MIN).await;
    assert_eq!(keys(&engine, "inv").await, ["a", "c", "d"]);
    assert_eq!(script.runs_of("a").len(), 2, "a ran again on its interval");
    // The file comes back with a new key: the next refresh picks it up.
    write(&inv, &["a", "c", "d", "e"]);
    advance(11 * MIN).await;
    assert_eq!(keys(&engine, "inv").await, ["a", "c", "d", "e"]);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// The first load must succeed: adopt refuses the graph, naming it and the
/// source; nothing is adopted.
#[tokio::test(start_paused = true)]
async fn first_load_failure_refuses_the_adopt() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir.path().join("db"), T0, 2, 0, &Script::default()).await;
    let missing = dir.path().join("missing.txt");
    let e = engine
        .adopt(keyed("first", &missing, |_| {}))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("graph \"first\"")
            && e.contains("missing.txt")
            && e.contains("first inventory load"),
        "{e}"
    );
    let e = engine.schedules("first").await.unwrap_err().to_string();
    assert!(e.contains("no adopted definition"), "{e}");
    // A bad key is named by line.
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "ok\nhas/slash\n").unwrap();
    let e = engine
        .adopt(keyed("bad", &bad, |_| {}))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.txt") && e.contains("line 2"), "{e}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A command inventory (argv, no shell of ours): its stdout lists keys; a
/// failing command and one past its timeout are errors naming the command.
/// Real time: paused time would jump past the timeout while the child runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_inventory_lists_keys_and_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let settings = weir::TriggerSettings {
        inventory_timeout_ms: 500,
        ..weir::TriggerSettings::default()
    };
    let engine = open_with(
        &dir.path().join("db"),
        T0,
        2,
        0,
        &Script::default(),
        settings,
        weir::Durability::Flush,
    )
    .await;
    let list = |argv: &[&str]| {
        let mut g = keyed("cmd", std::path::Path::new("unused"), |_| {});
        g.keyed.as_mut().unwrap().inventory =
            InventorySource::Command(argv.iter().map(|s| s.to_string()).collect());
        g
    };
    engine
        .adopt(list(&["sh", "-c", "printf 'x\\ny\\n\\nx\\n'"]))
        .await
        .unwrap();
    assert_eq!(keys(&engine, "cmd").await, ["x", "y"]);
    let e = engine
        .adopt(list(&["sh", "-c", "echo nope >&2; exit 3"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("graph \"cmd\"") && e.contains("exit status: 3") && e.contains("nope"),
        "{e}"
    );
    let e = engine
        .adopt(list(&["sleep", "5"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"sleep\"") && e.contains("500 ms"), "{e}");
    let e = engine
        .adopt(list(&["/no/such/program"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/no/such/program") && e.contains("could not start"),
        "{e}"
    );
    // The refused adopts left the working definition in place.
    assert_eq!(keys(&engine, "cmd").await, ["x", "y"]);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// glazed `Policy.completed`: a failed run is retried after the retry
/// interval, failures count up with the last error kept, and a success
/// resets them and returns to the interval.
#[tokio::test(start_paused = true)]
async fn failures_retry_on_the_retry_interval() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("keys.txt");
    write(&inv, &["good", "bad"]);
    let script = Script::default();
    script.fail_key("bad");
    let engine = open(&dir.path().join("db"), T0, 4, 1_000, &script).await;
    engine.adopt(keyed("r", &inv, |_| {})).await.unwrap();
    advance(10 * S).await;
    let s = schedule_of(&engine, "r", "bad").await;
    assert_eq!(s.consecutive_failures, 1, "{s:?}");
    assert_eq!(s.due_reason, "retry");
    assert!(
        s.last_error
            .as_deref()
            .unwrap()
            .contains("scripted failure"),
        "{s:?}"
    );
    assert_eq!(s.due_at_ms, s.last_finished_at_ms.unwrap() + 5 * MIN);
    // Two more retries, 5 minutes apart.
    advance(5 * MIN + 10 * S).await;
    advance(5 * MIN).await;
    let runs = script.runs_of("bad");
    assert_eq!(runs.len(), 3, "{runs:?}");
    for pair in runs.windows(2) {
        let gap = pair[1].1 - pair[0].1;
        assert!(
            (5 * MIN..5 * MIN + 5 * S).contains(&gap),
            "retry gap {gap} ms: {runs:?}"
        );
    }
    assert_eq!(
        schedule_of(&engine, "r", "bad").await.consecutive_failures,
        3
    );
    // good ran once: its next run is an hour out.
    assert_eq!(script.runs_of("good").len(), 1);
    script.heal();
    advance(5 * MIN).await;
    let s = schedule_of(&engine, "r", "bad").await;
    assert_eq!(s.consecutive_failures, 0, "{s:?}");
    assert_eq!(s.last_error, None);
    assert_eq!(s.due_reason, "schedule");
    assert_eq!(s.due_at_ms, s.last_finished_at_ms.unwrap() + H);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Runs that settle while the engine is down are completed by the repair
/// when it reopens: the lease is released and the next run scheduled,
/// without a second run of the same due instant.
#[tokio::test(start_paused = true)]
async fn settles_missed_while_down_are_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("keys.txt");
    write(&inv, &["k1", "k2"]);
    let script = Script::default();
    let db = dir.path().join("db");
    let engine = open(&db, T0, 4, 0, &script).await;
    engine.adopt(keyed("rep", &inv, |_| {})).await.unwrap();
    advance(10 * S).await;
    assert_eq!(script.runs_of("k1").len(), 1);
    // Fake a lost settle: put k1's lease back as if its run's end had not
    // been seen, then reopen.
    let store = engine.store().clone();
    let key = "sched/rep/k1";
    let mut r: weir::actors::trigger::keyed::KeyRecord = store.get(key).unwrap().unwrap();
    let (run_at, _) = script.runs_of("k1")[0].clone();
    r.run_at_ms = Some(due_of(&run_at));
    r.schedule.lease_owner = Some("trigger:rep".into());
    r.schedule.lease_until_ms = Some(T0 + H);
    r.schedule.due_at_ms = due_of(&run_at);
    store
        .put_batch(&[(key.to_string(), store.encode("k", &r).unwrap())], &[])
        .unwrap();
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    drop(store);
    let engine = open(&db, T0 + MIN, 4, 0, &script).await;
    advance(10 * S).await;
    let s = schedule_of(&engine, "rep", "k1").await;
    assert_eq!(s.lease_owner, None, "{s:?}: repaired");
    assert_eq!(s.due_reason, "schedule");
    assert!(s.due_at_ms >= T0 + MIN + H, "{s:?}");
    assert_eq!(script.runs_of("k1").len(), 1, "not run twice");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
