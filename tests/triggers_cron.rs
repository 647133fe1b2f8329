//! Cron triggers end to end, under paused time on an anchored clock: an
//! hourly cron over a simulated day starts the 24 windows it closes, each
//! once; downtime with catch-up off starts only the newest missed window,
//! with catch-up on every missed one (and no more than the bound).

mod triggers_support;

use std::time::Duration;

use triggers_support::*;
use weir::{Partitioning, RunState, TriggerSettings};

fn hourly(name: &str, catchup: bool) -> weir::GraphDef {
    let mut g = graph(name);
    g.partitioning = Partitioning::Hourly;
    g.cron = Some("0 * * * *".into());
    g.catchup = catchup;
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

/// DESIGN §5: each firing starts the run of the window the firing closes
/// (the window containing the previous occurrence).
#[tokio::test(start_paused = true)]
async fn hourly_cron_over_a_day_starts_24_windows() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, 1_000, &script).await;
    let w = watch(&engine, "hourly");
    engine.adopt(hourly("hourly", false)).await.unwrap();
    // Just past the 24th firing (2026-11-30T00:00), plus time to finish.
    advance(DAY + MIN).await;
    let got = windows(&engine, "hourly");
    let want: Vec<String> = (0..24).map(|h| format!("2026-11-29T{h:02}")).collect();
    assert_eq!(got, want);
    let runs = engine
        .list_runs("hourly", Some(RunState::Complete))
        .unwrap();
    assert_eq!(runs.len(), 24, "every run completed");
    // Each run was prepared ahead of the firing that closed its window (at
    // most the preparation horizon before it), to start at the firing: its
    // task started at the firing, never before.
    let ahead = TriggerSettings::default().prepare_ahead_ms;
    let started: std::collections::HashMap<String, u64> = script
        .ran_at
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(id, at)| Some((id.split('/').nth(1)?.to_string(), *at)))
        .collect();
    for r in &runs {
        let p: weir::Partition = r.partition.parse().unwrap();
        let firing = p.end_ms(weir::core::zone::Zone::UTC).unwrap();
        assert_eq!(r.record.not_before_ms, Some(firing), "{}", r.partition);
        assert!(
            r.record.requested_at_ms + ahead >= firing && r.record.requested_at_ms < firing,
            "{}: requested at {} for a firing at {firing}",
            r.partition,
            r.record.requested_at_ms
        );
        let at = started[&r.partition];
        assert!(
            at >= firing && at - firing < S,
            "{}: its task started {at} for a firing at {firing}",
            r.partition
        );
    }
    {
        let w = w.lock().unwrap();
        assert!(w.started.values().all(|&n| n == 1), "{:?}", w.started);
    }
    assert_eq!(script.ran().len(), 24);
    let status = engine.trigger_status("hourly").await.unwrap();
    assert_eq!(status.cron_last_firing_ms, Some(T0 + DAY));
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// Catch-up table: (catchup, bound, downtime) → the windows started after
/// the engine reopens. The engine first runs from T0 to just past 02:00
/// (windows T00 and T01), then is down until `T0 + reopen`.
#[tokio::test(start_paused = true)]
async fn downtime_with_and_without_catchup() {
    struct Case {
        catchup: bool,
        bound: usize,
        reopen_ms: u64,
        want_after: &'static [&'static str],
    }
    let cases = [
        // Off: only the newest missed window (firing at 07:00 closes T06).
        Case {
            catchup: false,
            bound: 100,
            reopen_ms: 7 * H + 30 * MIN,
            want_after: &["2026-11-29T06"],
        },
        // On: every missed window, T02 to T06.
        Case {
            catchup: true,
            bound: 100,
            reopen_ms: 7 * H + 30 * MIN,
            want_after: &[
                "2026-11-29T02",
                "2026-11-29T03",
                "2026-11-29T04",
                "2026-11-29T05",
                "2026-11-29T06",
            ],
        },
        // On, past the bound: the newest 2.
        Case {
            catchup: true,
            bound: 2,
            reopen_ms: 7 * H + 30 * MIN,
            want_after: &["2026-11-29T05", "2026-11-29T06"],
        },
        // Down less than an hour past the last firing: nothing missed.
        Case {
            catchup: true,
            bound: 100,
            reopen_ms: 2 * H + 50 * MIN,
            want_after: &[],
        },
    ];
    for (i, case) in cases.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let script = Script::default();
        let engine = open(dir.path(), T0, 4, 0, &script).await;
        engine.adopt(hourly("h", case.catchup)).await.unwrap();
        advance(2 * H + MIN).await;
        let before = windows(&engine, "h");
        assert_eq!(
            before,
            ["2026-11-29T00", "2026-11-29T01"],
            "#{i}: before downtime"
        );
        engine.shutdown(Duration::from_secs(5)).await.unwrap();

        let settings = TriggerSettings {
            cron_catchup_max: case.bound,
            ..TriggerSettings::default()
        };
        let engine = weir::Engine::builder(dir.path())
            .durability(weir::Durability::Flush)
            .clock(weir::actors::clock::Clock::anchored(T0 + case.reopen_ms))
            .pool("default", 8)
            .task_fn("work", |_ctx| async { Ok(Vec::new()) })
            .trigger_settings(settings)
            .open()
            .await
            .unwrap();
        // Let the trigger wake and the runs finish, short of the next firing.
        advance(MIN).await;
        let after: Vec<String> = windows(&engine, "h")
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(
            after,
            case.want_after,
            "#{i}: catchup {}, bound {}, reopened at +{} min",
            case.catchup,
            case.bound,
            case.reopen_ms / MIN
        );
        let states = engine
            .wait_settled(
                "h",
                &windows(&engine, "h")
                    .iter()
                    .map(|p| p.parse().unwrap())
                    .collect::<Vec<_>>(),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        assert!(
            states.iter().all(|s| *s == RunState::Complete),
            "#{i}: {states:?}"
        );
        // Firings after the reopen go on from the expression: the next
        // firing (the hour after the reopen) closes the window before it.
        let next_hour = (T0 + case.reopen_ms) / H * H + H;
        let want_next = weir::Partition::of_time(
            Partitioning::Hourly,
            next_hour - H,
            weir::core::zone::Zone::UTC,
        )
        .unwrap()
        .to_string();
        advance(next_hour - (T0 + case.reopen_ms) - MIN + 10 * S).await;
        assert!(
            windows(&engine, "h").contains(&want_next),
            "#{i}: the firing at {next_hour} starts {want_next}"
        );
        engine.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

fn daily_at(name: &str, cron: &str) -> weir::GraphDef {
    let mut g = graph(name);
    g.partitioning = Partitioning::Daily;
    g.cron = Some(cron.into());
    g
}

/// The runs of `graph` that ran or wait to: partition, definition hash,
/// the instant they wait for (withdrawn preparations left out).
fn live_runs(engine: &weir::Engine, graph: &str) -> Vec<(String, String, Option<u64>)> {
    engine
        .list_runs(graph, None)
        .unwrap()
        .into_iter()
        .filter(|r| r.record.state != RunState::Withdrawn)
        .map(|r| (r.partition, r.record.definition, r.record.not_before_ms))
        .collect()
}

/// A cron changed in its file while the engine was stopped (02:00 to
/// 03:00), the engine started at 02:59:58 (faults #8): the definition is
/// adopted before any trigger fires, so the window starts at 03:00 under
/// the new hash. Before, the trigger started on the stored definition,
/// fired its missed 02:00 at once, and the window ran under the old hash.
#[tokio::test(start_paused = true)]
async fn a_cron_changed_while_stopped_is_adopted_before_it_fires() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, 0, &script).await;
    engine.adopt(daily_at("d", "0 2 * * *")).await.unwrap();
    advance(MIN).await;
    assert!(live_runs(&engine, "d").is_empty());
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    let reopen = T0 + 2 * H + 59 * MIN + 58 * S;
    let engine = builder(
        dir.path(),
        reopen,
        4,
        0,
        &script,
        TriggerSettings::default(),
        weir::Durability::Flush,
    )
    .hold_triggers()
    .open()
    .await
    .unwrap();
    // Held: nothing fires before the files are adopted.
    advance(S).await;
    assert!(
        live_runs(&engine, "d").is_empty(),
        "nothing fired while held"
    );
    let new = engine.adopt(daily_at("d", "0 3 * * *")).await.unwrap();
    assert!(new.changed);
    engine.start_triggers().await.unwrap();
    until(MIN, "the window to run at 03:00", || {
        !script.ran().is_empty()
    })
    .await;
    advance(10 * S).await;
    assert_eq!(
        live_runs(&engine, "d"),
        vec![("2026-11-28".to_string(), new.hash.clone(), Some(T0 + 3 * H))],
        "one run, under the new hash, at the new instant"
    );
    let ran_at = script.ran_at.lock().unwrap().clone();
    assert_eq!(ran_at.len(), 1, "{ran_at:?}");
    assert!(
        ran_at[0].1 >= T0 + 3 * H,
        "ran at {} before 03:00",
        ran_at[0].1
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// A reload that changes a cron takes back the window prepared ahead under
/// the old one (faults #8): prepared 3 s before 02:00, the cron moved to
/// 03:00; nothing runs at 02:00, and the window runs at 03:00 under the new
/// hash, once.
#[tokio::test(start_paused = true)]
async fn a_changed_cron_takes_back_the_window_prepared_under_the_old() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let engine = open(dir.path(), T0, 4, 0, &script).await;
    let old = engine.adopt(daily_at("d", "0 2 * * *")).await.unwrap();
    advance(2 * H - 3 * S).await;
    assert_eq!(
        live_runs(&engine, "d"),
        vec![("2026-11-28".to_string(), old.hash.clone(), Some(T0 + 2 * H))],
        "prepared ahead of 02:00"
    );
    let new = engine.adopt(daily_at("d", "0 3 * * *")).await.unwrap();
    advance(3 * S + MIN).await;
    assert!(script.ran().is_empty(), "nothing ran at 02:00");
    assert!(
        live_runs(&engine, "d").is_empty(),
        "the preparation was taken back: {:?}",
        live_runs(&engine, "d")
    );
    advance(H).await;
    assert_eq!(
        live_runs(&engine, "d"),
        vec![("2026-11-28".to_string(), new.hash.clone(), Some(T0 + 3 * H))],
        "one run, under the new hash, at 03:00"
    );
    assert_eq!(script.ran().len(), 1);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// ms since the epoch of a UTC time, for the zone tests.
fn at_utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> u64 {
    chrono::NaiveDate::from_ymd_opt(y, mo, d)
        .unwrap()
        .and_hms_opt(h, mi, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis() as u64
}

/// Cron firings seen: (firing, windows).
type Firings = std::sync::Arc<std::sync::Mutex<Vec<(u64, Vec<String>)>>>;

/// Every cron firing the engine announces for `graph`: (firing, windows).
fn firings(engine: &weir::Engine, graph: &str) -> Firings {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut rx = engine.subscribe();
    let (g, s) = (graph.to_string(), seen.clone());
    tokio::spawn(async move {
        while let Ok(e) = rx.recv().await {
            if let weir::EngineEvent::CronFired {
                graph,
                firing_ms,
                windows,
                ..
            } = e
            {
                if graph == g {
                    s.lock().unwrap().push((firing_ms, windows));
                }
            }
        }
    });
    seen
}

/// Issue #29: `30 2 * * *` in Europe/Berlin across the spring-forward of
/// 2026-03-29 (02:00 → 03:00), on a fake clock: 02:30 does not exist that
/// night, so the expression fires once, at 03:00+02:00 (01:00Z), for the
/// window of the 28th; the next night at 02:30+02:00, for the 29th, which
/// was 23 hours long.
#[tokio::test(start_paused = true)]
async fn a_daily_cron_in_berlin_fires_once_across_the_spring_forward() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let t0 = at_utc(2026, 3, 28, 12, 0);
    let engine = open(dir.path(), t0, 4, 1_000, &script).await;
    let seen = firings(&engine, "berlin");
    let mut g = graph("berlin");
    g.partitioning = Partitioning::Daily;
    g.cron = Some("30 2 * * *".into());
    g.timezone = Some(weir::core::zone::Zone::parse("Europe/Berlin").unwrap());
    engine.adopt(g).await.unwrap();
    // To a minute past 03:00+02:00 on the 29th.
    advance(at_utc(2026, 3, 29, 1, 1) - t0).await;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(at_utc(2026, 3, 29, 1, 0), vec!["2026-03-28".to_string()])],
        "one firing, at 03:00+02:00, for the 28th"
    );
    assert_eq!(windows(&engine, "berlin"), ["2026-03-28"]);
    // To a minute past 02:30+02:00 on the 30th.
    advance(at_utc(2026, 3, 30, 0, 31) - at_utc(2026, 3, 29, 1, 1)).await;
    let got = seen.lock().unwrap().clone();
    assert_eq!(
        got,
        vec![
            (at_utc(2026, 3, 29, 1, 0), vec!["2026-03-28".to_string()]),
            (at_utc(2026, 3, 30, 0, 30), vec!["2026-03-29".to_string()]),
        ]
    );
    until(10 * S, "both runs complete", || {
        engine
            .list_runs("berlin", Some(RunState::Complete))
            .unwrap()
            .len()
            == 2
    })
    .await;
    assert_eq!(script.ran().len(), 2, "each window ran once");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

/// An hourly cron in Berlin across the fall-back of 2026-10-25 (03:00 →
/// 02:00): `0 * * * *` fires at the first 02:00 only, and its firing at
/// 03:00+01:00 starts both 02:00 hours, so every hour of the night runs
/// once, named apart by its offset.
#[tokio::test(start_paused = true)]
async fn an_hourly_cron_in_berlin_runs_both_hours_of_the_fall_back() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::default();
    let t0 = at_utc(2026, 10, 24, 22, 30);
    let engine = open(dir.path(), t0, 4, 1_000, &script).await;
    let mut g = hourly("night", false);
    g.timezone = Some(weir::core::zone::Zone::parse("Europe/Berlin").unwrap());
    engine.adopt(g).await.unwrap();
    // To a minute past 04:00+01:00 (03:00Z).
    advance(at_utc(2026, 10, 25, 3, 1) - t0).await;
    until(10 * S, "every run complete", || {
        engine
            .list_runs("night", Some(RunState::Complete))
            .unwrap()
            .len()
            == 5
    })
    .await;
    let mut got = windows(&engine, "night");
    got.sort();
    assert_eq!(
        got,
        [
            "2026-10-25T00:00+02:00",
            "2026-10-25T01:00+02:00",
            "2026-10-25T02:00+01:00",
            "2026-10-25T02:00+02:00",
            "2026-10-25T03:00+01:00",
        ]
    );
    assert_eq!(script.ran().len(), 5);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
