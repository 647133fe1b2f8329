//! Operator control of a graph's triggers, under paused time on an
//! anchored clock: pausing stops cron firings (and the pause survives a
//! restart; on unpause the missed windows follow the catch-up rule),
//! "trigger now" for daily, unpartitioned and keyed graphs, and signals
//! with a membership check.

mod triggers_support;

use std::time::Duration;

use triggers_support::*;
use weir::{EngineError, EngineEvent, Partitioning};

fn hourly(name: &str) -> weir::GraphDef {
    let mut g = graph(name);
    g.partitioning = Partitioning::Hourly;
    g.cron = Some("0 * * * *".into());
    g.catchup = false;
    g
}

fn windows(engine: &weir::Engine, graph: &str) -> Vec<String> {
    engine
        .list_runs(graph, None)
        .unwrap()
        .into_iter()
        .map(|r| r.partition)
        .collect()
}

fn write(path: &std::path::Path, keys: &[&str]) {
    std::fs::write(path, keys.join("\n") + "\n").unwrap();
}

#[tokio::test(start_paused = true)]
async fn pause_stops_cron_firings_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, 0, &script).await;
    engine.adopt(hourly("h")).await.unwrap();
    advance(2 * H + MIN).await;
    assert_eq!(windows(&engine, "h"), ["2026-11-29T00", "2026-11-29T01"]);

    let mut events = engine.subscribe();
    assert!(!engine.is_paused("h").unwrap());
    assert!(engine.set_paused("h", true).await.unwrap());
    assert!(!engine.set_paused("h", true).await.unwrap(), "no change");
    assert!(engine.is_paused("h").unwrap());
    let mut pauses = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let EngineEvent::GraphPaused { graph, paused } = e {
            pauses.push((graph, paused));
        }
    }
    assert_eq!(
        pauses,
        [("h".to_string(), true)],
        "one event, for the change"
    );
    // Three firings pass; none starts a run.
    advance(3 * H).await;
    assert_eq!(windows(&engine, "h"), ["2026-11-29T00", "2026-11-29T01"]);
    // An explicit start still works on a paused graph.
    let p: weir::Partition = "2026-11-28T23".parse().unwrap();
    assert!(engine.start_run("h", p).await.unwrap().started);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();

    // Restarted later: still paused, readable without an engine too.
    {
        let (store, _) = weir::actors::store::open_for_inspection(dir.path()).unwrap();
        assert!(weir::actors::trigger::paused(&store, "h").unwrap());
    }
    let engine = open(dir.path(), T0 + 5 * H + 30 * MIN, 4, 0, &script).await;
    assert!(engine.is_paused("h").unwrap());
    advance(2 * H).await;
    let paused_windows = ["2026-11-28T23", "2026-11-29T00", "2026-11-29T01"];
    assert_eq!(windows(&engine, "h"), paused_windows);

    // Unpaused at 07:30 with catch-up off: only the newest missed window
    // (closed by the 07:00 firing) starts, then the next firing's.
    assert!(engine.set_paused("h", false).await.unwrap());
    assert!(!engine.is_paused("h").unwrap());
    advance(MIN).await;
    let mut want: Vec<&str> = paused_windows.to_vec();
    want.push("2026-11-29T06");
    assert_eq!(windows(&engine, "h"), want);
    advance(H).await;
    want.push("2026-11-29T07");
    assert_eq!(windows(&engine, "h"), want);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Daily without cron: the last whole day; unpartitioned: `none`; a
/// second trigger finds the run existing.
#[tokio::test(start_paused = true)]
async fn trigger_now_daily_and_unpartitioned() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0 + 10 * H, 4, 0, &script).await;
    let mut daily = graph("daily");
    daily.partitioning = Partitioning::Daily;
    engine.adopt(daily).await.unwrap();
    engine.adopt(graph("plain")).await.unwrap();

    let out = engine.trigger_now("daily").await.unwrap();
    assert_eq!(out.started, ["2026-11-28"]);
    assert!(out.existing.is_empty() && out.keys_signalled.is_empty());
    let again = engine.trigger_now("daily").await.unwrap();
    assert!(again.started.is_empty());
    assert_eq!(again.existing, ["2026-11-28"]);

    let out = engine.trigger_now("plain").await.unwrap();
    assert_eq!(out.started, ["none"]);
    until(10 * S, "both runs to complete", || {
        engine
            .list_runs("daily", Some(weir::RunState::Complete))
            .unwrap()
            .len()
            == 1
            && engine
                .list_runs("plain", Some(weir::RunState::Complete))
                .unwrap()
                .len()
                == 1
    })
    .await;
    // Unknown graphs are refused.
    assert!(matches!(
        engine.trigger_now("nope").await,
        Err(EngineError::NotFound(_))
    ));
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A daily cron firing at 01:00: at 10:30 its newest closed window is the
/// day before.
#[tokio::test(start_paused = true)]
async fn trigger_now_with_cron_starts_the_newest_closed_window() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0 + 10 * H + 30 * MIN, 4, 0, &script).await;
    let mut g = graph("d");
    g.partitioning = Partitioning::Daily;
    g.cron = Some("0 1 * * *".into());
    engine.adopt(g).await.unwrap();
    let out = engine.trigger_now("d").await.unwrap();
    assert_eq!(out.started, ["2026-11-28"]);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Keyed: every key is signalled to run now, and each runs again.
#[tokio::test(start_paused = true)]
async fn trigger_now_keyed_runs_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("keys.txt");
    write(&inv, &["a", "b"]);
    let script = Script::default();
    let engine = open(&dir.path().join("db"), T0, 4, 0, &script).await;
    engine.adopt(keyed("k", &inv, |_| {})).await.unwrap();
    advance(MIN).await;
    assert_eq!(script.runs_of("a").len(), 1);
    assert_eq!(script.runs_of("b").len(), 1);

    let out = engine.trigger_now("k").await.unwrap();
    assert_eq!(out.keys_signalled, ["a", "b"]);
    assert!(out.started.is_empty());
    for k in ["a", "b"] {
        let s = schedule_of(&engine, "k", k).await;
        assert_eq!(s.due_reason, "signal:trigger", "{s:?}");
    }
    advance(MIN).await;
    assert_eq!(script.runs_of("a").len(), 2);
    assert_eq!(script.runs_of("b").len(), 2);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A key the inventory does not list is refused, naming the graph and the
/// key, unless added; an added key gets a schedule.
#[tokio::test(start_paused = true)]
async fn signal_key_checks_membership() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("keys.txt");
    write(&inv, &["a"]);
    let script = Script::default();
    let engine = open(&dir.path().join("db"), T0, 4, 0, &script).await;
    engine.adopt(keyed("k", &inv, |_| {})).await.unwrap();

    let err = engine
        .signal_key("k", "stranger", "api", true, false)
        .await
        .unwrap_err();
    assert!(matches!(err, EngineError::Graph(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("\"k\"") || msg.contains("graph k"), "{msg}");
    assert!(msg.contains("stranger"), "{msg}");
    assert!(engine
        .schedules("k")
        .await
        .unwrap()
        .iter()
        .all(|s| s.key != "stranger"));

    let known = engine
        .signal_key("k", "a", "api", false, false)
        .await
        .unwrap();
    assert_eq!(known.key, "a");
    let added = engine
        .signal_key("k", "stranger", "api", true, true)
        .await
        .unwrap();
    assert_eq!(added.key, "stranger");
    assert_eq!(added.due_reason, "signal:api");
    advance(MIN).await;
    assert_eq!(script.runs_of("stranger").len(), 1);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
