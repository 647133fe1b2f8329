//! Signals end to end (glazed `Policy.signal` and `Policy.completed`, the
//! trailing debounce of DESIGN §5), under paused time: each row signals a
//! key at given offsets and checks the runs that follow, by their due
//! instant (the partition) and the time their task started.

mod triggers_support;

use std::time::Duration;

use triggers_support::*;

/// How long the task of a run takes.
const WORK: u64 = 20 * S;

struct Row {
    name: &'static str,
    /// Signals: (ms after the base instant, immediate).
    signals: Vec<(u64, bool)>,
    /// Due instants of the runs after the base, in ms after it.
    want: Vec<u64>,
    /// The reason of the first of them.
    reason: &'static str,
    /// The base is this long before the key's scheduled run (else 5 min
    /// after the first run).
    before_scheduled: Option<u64>,
}

#[tokio::test(start_paused = true)]
async fn debounce_cases_end_to_end() {
    let rows = [
        Row {
            name: "delay: due 60 s after the signal",
            signals: vec![(0, false)],
            want: vec![MIN],
            reason: "signal:ci",
            before_scheduled: None,
        },
        Row {
            name: "trailing: due 60 s after the latest signal",
            signals: vec![(0, false), (30 * S, false), (50 * S, false)],
            want: vec![110 * S],
            reason: "signal:ci",
            before_scheduled: None,
        },
        Row {
            name: "max_wait caps a stream of signals at 600 s after the first",
            signals: (0..12).map(|i| (i * 50 * S, false)).collect(),
            want: vec![10 * MIN],
            reason: "signal:ci",
            before_scheduled: None,
        },
        Row {
            name: "immediate: due at the signal",
            signals: vec![(0, true)],
            want: vec![0],
            reason: "signal:ci",
            before_scheduled: None,
        },
        Row {
            name: "an earlier scheduled run is kept",
            signals: vec![(0, false)],
            want: vec![30 * S],
            reason: "schedule",
            before_scheduled: Some(30 * S),
        },
        Row {
            name: "a signal while running makes the next run due as it asked",
            signals: vec![(0, true), (10 * S, false)],
            // The first run ends at +20 s; the next is due at +70 s, not an
            // interval later.
            want: vec![0, 70 * S],
            reason: "signal:ci",
            before_scheduled: None,
        },
    ];
    for (i, row) in rows.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let inv = dir.path().join("keys.txt");
        std::fs::write(&inv, "k\n").unwrap();
        let script = Script::default();
        let engine = open(&dir.path().join("db"), T0, 4, WORK, &script).await;
        engine.adopt(keyed("s", &inv, |_| {})).await.unwrap();
        // The inventory run, at T0.
        advance(WORK + S).await;
        assert_eq!(script.runs_of("k").len(), 1, "#{i}: the inventory run");
        let scheduled = schedule_of(&engine, "s", "k").await.due_at_ms;
        let base = match row.before_scheduled {
            Some(before) => scheduled - before,
            None => T0 + 5 * MIN,
        };
        let mut reasons = Vec::new();
        for &(at, immediate) in &row.signals {
            advance(base + at - engine.now_ms()).await;
            let v = engine.signal("s", "k", "ci", immediate).await.unwrap();
            reasons.push(v.due_reason);
        }
        advance(base + 15 * MIN - engine.now_ms()).await;
        let after: Vec<(u64, u64)> = script
            .runs_of("k")
            .into_iter()
            .map(|(p, started)| (due_of(&p), started))
            .filter(|(due, _)| *due >= base)
            .map(|(due, started)| (due - base, started.saturating_sub(base)))
            .collect();
        let dues: Vec<u64> = after.iter().map(|(d, _)| *d).collect();
        assert_eq!(
            dues, row.want,
            "#{i}: {}: runs after the base {after:?}",
            row.name
        );
        for (due, started) in &after {
            assert!(
                started >= due && *started <= due + S,
                "#{i}: {}: due +{due} ms, started +{started} ms",
                row.name
            );
        }
        assert_eq!(
            reasons.last().map(String::as_str),
            Some(if row.want.len() > 1 {
                "signal:ci"
            } else {
                row.reason
            }),
            "#{i}: {}: reason after the last signal",
            row.name
        );
        engine.shutdown(Duration::from_secs(5)).await.unwrap();
    }
}

/// 10,000 signals for one key within one debounce window start one run.
#[tokio::test(start_paused = true)]
async fn ten_thousand_signals_start_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let inv = dir.path().join("keys.txt");
    std::fs::write(&inv, "k\nother\n").unwrap();
    let script = Script::default();
    // No flush per signal: this is about the debounce, not durability, and
    // 10,000 flushes would take seconds.
    let engine = open_with(
        &dir.path().join("db"),
        T0,
        4,
        S,
        &script,
        weir::TriggerSettings::default(),
        weir::Durability::None,
    )
    .await;
    engine.adopt(keyed("burst", &inv, |_| {})).await.unwrap();
    advance(10 * S).await;
    let base = engine.now_ms();
    // 10,000 signals, 5 ms apart: 50 s, inside the 60 s delay of each.
    for n in 0..10_000u64 {
        if n > 0 {
            advance(5).await;
        }
        engine.signal("burst", "k", "storm", false).await.unwrap();
    }
    let last = engine.now_ms();
    advance(15 * MIN).await;
    let runs: Vec<u64> = script
        .runs_of("k")
        .into_iter()
        .map(|(p, _)| due_of(&p))
        .filter(|due| *due >= base)
        .collect();
    assert_eq!(
        runs,
        vec![last + MIN],
        "one run, 60 s after the last signal"
    );
    assert_eq!(script.runs_of("other").len(), 1, "other keys are untouched");
    let s = schedule_of(&engine, "burst", "k").await;
    assert_eq!(s.due_reason, "schedule", "{s:?}");
    assert_eq!(
        s.signal_window_started_at_ms, None,
        "the run answered the window"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
