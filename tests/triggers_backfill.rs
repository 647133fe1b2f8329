//! Backfills end to end, under paused time: every window of a range runs
//! once, never more than max_active_runs at a time, in the order asked
//! for; windows with a run are skipped; a trigger killed mid-backfill
//! resumes from its stored cursor without starting any window twice.
//!
//! The normal suite backfills 100 daily windows; `WEIR_SOAK=1` backfills
//! 1,000.

mod triggers_support;

use std::time::Duration;

use triggers_support::*;
use weir::actors::supervisor::Role;
use weir::core::zone::Zone;
use weir::{BackfillOrder, Partition, PartitionRange, Partitioning, RunState};

fn daily(name: &str, max_active_runs: u32) -> weir::GraphDef {
    let mut g = graph(name);
    g.partitioning = Partitioning::Daily;
    g.max_active_runs = max_active_runs;
    g
}

fn windows() -> usize {
    if std::env::var("WEIR_SOAK").is_ok_and(|v| v == "1") {
        1_000
    } else {
        100
    }
}

/// A range of `n` days ending 2026-11-28.
fn range(n: usize) -> PartitionRange {
    let to: Partition = "2026-11-28".parse().unwrap();
    let from = Partition::of_time(
        Partitioning::Daily,
        to.start_ms(Zone::UTC).unwrap() - (n as u64 - 1) * DAY,
        Zone::UTC,
    )
    .unwrap();
    PartitionRange { from, to }
}

async fn wait_backfills_done(engine: &weir::Engine, graph: &str) {
    for _ in 0..100_000 {
        if engine
            .trigger_status(graph)
            .await
            .unwrap()
            .backfills
            .is_empty()
        {
            return;
        }
        advance(100).await;
    }
    panic!("backfill did not finish");
}

/// DESIGN §5: a backfill starts every window of the range at a bounded
/// rate (max active runs per graph), oldest first by default.
#[tokio::test(start_paused = true)]
async fn backfill_runs_every_window_with_at_most_4_active() {
    let n = windows();
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 16, 250, &script).await;
    let w = watch(&engine, "bf");
    engine.adopt(daily("bf", 4)).await.unwrap();
    // One window already has a run: it is skipped, not run again.
    let existing: Partition = "2026-11-20".parse().unwrap();
    engine.start_run("bf", existing.clone()).await.unwrap();
    let b = engine
        .backfill("bf", range(n), BackfillOrder::Oldest)
        .await
        .unwrap();
    assert_eq!(b.windows, n as u64);
    wait_backfills_done(&engine, "bf").await;
    let all = range(n).windows(Partitioning::Daily, n, Zone::UTC).unwrap();
    let states = engine
        .wait_settled("bf", &all, Duration::from_secs(600))
        .await
        .unwrap();
    assert!(states.iter().all(|s| *s == RunState::Complete));
    {
        let w = w.lock().unwrap();
        assert!(!w.lagged, "the watcher saw every event");
        assert!(
            w.active_max <= 4,
            "at most 4 active at once, saw {}",
            w.active_max
        );
        assert_eq!(w.active_max, 4, "the backfill used its room");
        assert_eq!(w.started.len(), n, "every window started");
        assert!(
            w.started.values().all(|&c| c == 1),
            "no window started twice"
        );
        // Oldest first: the order of first runs follows the range.
        let ran: Vec<String> = script.ran();
        assert_eq!(ran.len(), n, "one task per window: {}", ran.len());
        let first = &ran[1]; // ran[0] is the manually started window
        assert!(
            first.starts_with(&format!("bf/{}/", range(n).from)),
            "{first}"
        );
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn newest_first_starts_the_newest_window_first() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, 100, &script).await;
    engine.adopt(daily("nf", 2)).await.unwrap();
    engine
        .backfill("nf", range(10), BackfillOrder::Newest)
        .await
        .unwrap();
    wait_backfills_done(&engine, "nf").await;
    advance(10 * S).await;
    let ran = script.ran();
    assert_eq!(ran.len(), 10);
    assert!(
        ran[0].starts_with("nf/2026-11-28/") || ran[1].starts_with("nf/2026-11-28/"),
        "{ran:?}"
    );
    assert!(
        ran[9].starts_with("nf/2026-11-19/") || ran[8].starts_with("nf/2026-11-19/"),
        "{ran:?}"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A backfill larger than allowed, or of the wrong partitioning, is refused
/// with the graph and the range named.
#[tokio::test(start_paused = true)]
async fn bad_backfills_are_refused_naming_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), T0, 4, 0, &Script::default()).await;
    engine.adopt(daily("d", 2)).await.unwrap();
    let hourly: PartitionRange = "2026-11-01T00..2026-11-01T05".parse().unwrap();
    let e = engine
        .backfill("d", hourly, BackfillOrder::Oldest)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("graph d") && e.contains("2026-11-01T00"), "{e}");
    let e = engine
        .backfill("nope", range(3), BackfillOrder::Oldest)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("\"nope\" has no adopted definition"), "{e}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// The trigger killed again and again in the middle of a backfill resumes
/// from its stored cursor and starts no window twice.
#[tokio::test(start_paused = true)]
async fn killed_trigger_resumes_the_backfill_without_repeats() {
    let n = 60;
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 16, 500, &script).await;
    let w = watch(&engine, "k");
    engine.adopt(daily("k", 3)).await.unwrap();
    engine
        .backfill("k", range(n), BackfillOrder::Oldest)
        .await
        .unwrap();
    let mut kills = 0;
    for round in 0..1_000 {
        if engine
            .trigger_status("k")
            .await
            .unwrap()
            .backfills
            .is_empty()
        {
            break;
        }
        advance(1_100 + (round % 7) * 100).await;
        let children = engine.children().await.unwrap();
        if let Some((_, cell)) = children
            .iter()
            .find(|(r, _)| matches!(r, Role::Trigger(g) if g.as_str() == "k"))
        {
            cell.kill();
            kills += 1;
        }
        // Let the supervisor respawn it (backoff 10 ms doubling).
        advance(100).await;
    }
    assert!(kills >= 5, "killed {kills} times");
    let all = range(n).windows(Partitioning::Daily, n, Zone::UTC).unwrap();
    let states = engine
        .wait_settled("k", &all, Duration::from_secs(600))
        .await
        .unwrap();
    assert!(states.iter().all(|s| *s == RunState::Complete));
    {
        let w = w.lock().unwrap();
        assert_eq!(w.started.len(), n);
        assert!(
            w.started.values().all(|&c| c == 1),
            "no window started twice: {:?}",
            w.started
        );
        assert!(w.active_max <= 3, "at most 3 active, saw {}", w.active_max);
        let mut ran = script.ran();
        ran.sort();
        ran.dedup();
        assert_eq!(ran.len(), n, "one task per window");
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Issue #13 item 4: a backfill is identified by (graph, range). A `weir
/// run --backfill` restarted again and again asks for the same range each
/// time; every ask resumes the backfill in progress, so none leaks and
/// the limit of backfills in progress is never reached.
#[tokio::test(start_paused = true)]
async fn asking_again_for_a_covered_range_resumes_the_backfill() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(dir.path(), T0, 4, 0, &Script::default()).await;
    engine.adopt(daily("d", 1)).await.unwrap();
    let first = engine
        .backfill("d", range(30), BackfillOrder::Oldest)
        .await
        .unwrap();
    for i in 0..150 {
        let again = engine
            .backfill("d", range(30), BackfillOrder::Oldest)
            .await
            .unwrap();
        assert_eq!(again.id, first.id, "ask #{i} made a new backfill");
    }
    let inside = engine
        .backfill("d", range(5), BackfillOrder::Newest)
        .await
        .unwrap();
    assert_eq!(inside.id, first.id, "a covered range resumes it too");
    assert_eq!(engine.trigger_status("d").await.unwrap().backfills.len(), 1);
    wait_backfills_done(&engine, "d").await;
    let runs = engine.list_runs("d", None).unwrap();
    assert_eq!(runs.len(), 30, "every window once");
    // Once finished, the same range is a new backfill (its runs exist, so
    // it skips them all).
    let later = engine
        .backfill("d", range(30), BackfillOrder::Oldest)
        .await
        .unwrap();
    assert_ne!(later.id, first.id);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
