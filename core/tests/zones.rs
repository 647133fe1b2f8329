//! Windows and cron in a graph's zone, across both DST transitions of 2026,
//! checked against a table of the transitions written out here by hand
//! from the IANA database (the independent reference) and against
//! identities any correct answer satisfies (a local day lasts 24 h minus
//! the change of offset across it; no firing is skipped or doubled).

use chrono::{NaiveDate, NaiveDateTime, TimeZone};
use proptest::prelude::*;
use weir_core::cron::Schedule;
use weir_core::partition::{Partition, PartitionError, Partitioning};
use weir_core::zone::Zone;

const MIN: u64 = 60_000;
const H: u64 = 3_600_000;

/// The zones the issue names: a whole-hour shift each way of the equator's
/// north, a 30-minute shift, and a +05:45 zone with no DST.
const ZONES: [&str; 4] = [
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
];

/// Every change of offset in 2026: (zone, instant UTC, offset before,
/// offset after), offsets in minutes. From the tz database's rules:
/// the EU changes at 01:00 UTC on the last Sundays of March and October;
/// the US at 02:00 local on the second Sunday of March and the first of
/// November; Lord Howe at 02:00 local on the first Sundays of April (to
/// +10:30) and October (to +11); Kathmandu not at all.
/// (zone, UTC instant as (y, m, d, h, min), offset before, offset after).
type Transition = (&'static str, (i32, u32, u32, u32, u32), i32, i32);

const TRANSITIONS_2026: &[Transition] = &[
    ("Europe/Berlin", (2026, 3, 29, 1, 0), 60, 120),
    ("Europe/Berlin", (2026, 10, 25, 1, 0), 120, 60),
    ("America/New_York", (2026, 3, 8, 7, 0), -300, -240),
    ("America/New_York", (2026, 11, 1, 6, 0), -240, -300),
    ("Australia/Lord_Howe", (2026, 4, 4, 15, 0), 660, 630),
    ("Australia/Lord_Howe", (2026, 10, 3, 15, 30), 630, 660),
];

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> u64 {
    NaiveDate::from_ymd_opt(y, mo, d)
        .unwrap()
        .and_hms_opt(h, mi, 0)
        .unwrap()
        .and_utc()
        .timestamp_millis() as u64
}

fn zone(name: &str) -> Zone {
    Zone::parse(name).unwrap()
}

fn p(s: &str) -> Partition {
    s.parse().unwrap()
}

fn year_2026() -> (u64, u64) {
    (utc(2026, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0))
}

/// The crate's database agrees with the table: scanning 2026 by quarter
/// hours finds exactly the listed changes, at the listed instants.
#[test]
fn the_tz_database_has_the_2026_transitions_of_the_table() {
    let (from, to) = year_2026();
    for name in ZONES {
        let z = zone(name);
        let mut found = Vec::new();
        let mut t = from;
        while t < to {
            let (a, b) = (z.offset_s(t), z.offset_s(t + 15 * MIN));
            if a != b {
                // Pin it to the minute.
                let mut m = t;
                while z.offset_s(m + MIN) == a {
                    m += MIN;
                }
                found.push((m + MIN, a / 60, b / 60));
            }
            t += 15 * MIN;
        }
        let want: Vec<(u64, i32, i32)> = TRANSITIONS_2026
            .iter()
            .filter(|(n, ..)| *n == name)
            .map(|(_, (y, mo, d, h, mi), a, b)| (utc(*y, *mo, *d, *h, *mi), *a, *b))
            .collect();
        assert_eq!(found, want, "{name}");
    }
    assert_eq!(weir_core::zone::TZDB_VERSION.len(), 5);
}

/// Local days, by name: their instants and their lengths around each
/// transition.
#[test]
fn local_days_table() {
    // (zone, day, start UTC, hours long)
    let cases: &[(&str, &str, u64, f64)] = &[
        ("Europe/Berlin", "2026-03-28", utc(2026, 3, 27, 23, 0), 24.0),
        ("Europe/Berlin", "2026-03-29", utc(2026, 3, 28, 23, 0), 23.0),
        ("Europe/Berlin", "2026-03-30", utc(2026, 3, 29, 22, 0), 24.0),
        (
            "Europe/Berlin",
            "2026-10-25",
            utc(2026, 10, 24, 22, 0),
            25.0,
        ),
        (
            "America/New_York",
            "2026-03-08",
            utc(2026, 3, 8, 5, 0),
            23.0,
        ),
        (
            "America/New_York",
            "2026-11-01",
            utc(2026, 11, 1, 4, 0),
            25.0,
        ),
        (
            "Australia/Lord_Howe",
            "2026-04-05",
            utc(2026, 4, 4, 13, 0),
            24.5,
        ),
        (
            "Australia/Lord_Howe",
            "2026-10-04",
            utc(2026, 10, 3, 13, 30),
            23.5,
        ),
        (
            "Asia/Kathmandu",
            "2026-03-29",
            utc(2026, 3, 28, 18, 15),
            24.0,
        ),
    ];
    for (name, day, start, hours) in cases {
        let z = zone(name);
        let w = p(day);
        assert_eq!(w.start_ms(z), Some(*start), "{name} {day} start");
        let len = w.end_ms(z).unwrap() - w.start_ms(z).unwrap();
        assert_eq!(len as f64 / H as f64, *hours, "{name} {day} length");
        // The instant names the same day back.
        assert_eq!(
            Partition::of_time(Partitioning::Daily, *start, z),
            Some(w.clone())
        );
        assert_eq!(
            Partition::of_time(Partitioning::Daily, start - 1, z),
            w.prev(z)
        );
    }
}

/// Local hours around each transition, by the instants they start and
/// their names: the repeated hour of a fall-back is two windows named
/// apart by their offsets; Lord Howe's half-hour shifts make 90- and
/// 30-minute-free windows of 90 minutes.
#[test]
fn local_hours_table() {
    // (zone, instant UTC inside, name, minutes long)
    let cases: &[(&str, u64, &str, u64)] = &[
        (
            "Europe/Berlin",
            utc(2026, 3, 29, 0, 30),
            "2026-03-29T01:00+01:00",
            60,
        ),
        (
            "Europe/Berlin",
            utc(2026, 3, 29, 1, 0),
            "2026-03-29T03:00+02:00",
            60,
        ),
        (
            "Europe/Berlin",
            utc(2026, 10, 25, 0, 30),
            "2026-10-25T02:00+02:00",
            60,
        ),
        (
            "Europe/Berlin",
            utc(2026, 10, 25, 1, 30),
            "2026-10-25T02:00+01:00",
            60,
        ),
        (
            "America/New_York",
            utc(2026, 11, 1, 5, 59),
            "2026-11-01T01:00-04:00",
            60,
        ),
        (
            "America/New_York",
            utc(2026, 11, 1, 6, 0),
            "2026-11-01T01:00-05:00",
            60,
        ),
        (
            "Australia/Lord_Howe",
            utc(2026, 4, 4, 15, 10),
            "2026-04-05T01:00+11:00",
            90,
        ),
        (
            "Australia/Lord_Howe",
            utc(2026, 10, 3, 15, 0),
            "2026-10-04T01:00+10:30",
            90,
        ),
        (
            "Asia/Kathmandu",
            utc(2026, 3, 29, 1, 20),
            "2026-03-29T07:00+05:45",
            60,
        ),
    ];
    for (name, at, label, minutes) in cases {
        let z = zone(name);
        let w = Partition::of_time(Partitioning::Hourly, *at, z).unwrap();
        assert_eq!(w.to_string(), *label, "{name} at {at}");
        assert_eq!(p(label), w, "{label} parses back");
        let len = w.end_ms(z).unwrap() - w.start_ms(z).unwrap();
        assert_eq!(len / MIN, *minutes, "{label} length");
        assert_eq!(w.in_zone(z), Ok(w.clone()));
    }
}

/// An hour named without its offset is resolved in the graph's zone, or
/// refused with the names to use.
#[test]
fn hours_without_offsets_resolve_in_the_zone() {
    let berlin = zone("Europe/Berlin");
    assert_eq!(
        p("2026-10-25T01").in_zone(berlin).unwrap().to_string(),
        "2026-10-25T01:00+02:00"
    );
    match p("2026-10-25T02").in_zone(berlin) {
        Err(e @ PartitionError::AmbiguousHour { .. }) => {
            let m = e.to_string();
            assert!(
                m.contains("2026-10-25T02:00+02:00 or 2026-10-25T02:00+01:00"),
                "{m}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        p("2026-03-29T02").in_zone(berlin),
        Err(PartitionError::NotInZone { .. })
    ));
    // An offset the zone does not use then.
    assert!(matches!(
        p("2026-07-01T10:00+01:00").in_zone(berlin),
        Err(PartitionError::NotInZone { .. })
    ));
    // In UTC the plain name stays, and +00:00 is that name.
    assert_eq!(
        p("2026-07-01T10:00+00:00")
            .in_zone(Zone::UTC)
            .unwrap()
            .to_string(),
        "2026-07-01T10"
    );
    // A day needs nothing.
    assert_eq!(p("2026-03-29").in_zone(berlin), Ok(p("2026-03-29")));
}

/// A backfill over Berlin's spring-forward: three daily windows of 24, 23
/// and 24 hours; and the hours of a fall-back night, the repeat included.
#[test]
fn backfill_windows_across_transitions() {
    let berlin = zone("Europe/Berlin");
    let days = Partition::windows(
        Partitioning::Daily,
        &p("2026-03-28"),
        &p("2026-03-30"),
        10,
        berlin,
    )
    .unwrap();
    let hours: Vec<u64> = days
        .iter()
        .map(|d| (d.end_ms(berlin).unwrap() - d.start_ms(berlin).unwrap()) / H)
        .collect();
    assert_eq!(hours, [24, 23, 24]);
    let night = Partition::windows(
        Partitioning::Hourly,
        &p("2026-10-25T01"),
        &p("2026-10-25T04"),
        10,
        berlin,
    )
    .unwrap();
    let names: Vec<String> = night.iter().map(ToString::to_string).collect();
    assert_eq!(
        names,
        [
            "2026-10-25T01:00+02:00",
            "2026-10-25T02:00+02:00",
            "2026-10-25T02:00+01:00",
            "2026-10-25T03:00+01:00",
            "2026-10-25T04:00+01:00",
        ]
    );
    // The bound counts the windows actually built.
    assert!(matches!(
        Partition::windows(
            Partitioning::Hourly,
            &p("2026-10-25T01"),
            &p("2026-10-25T04"),
            4,
            berlin
        ),
        Err(PartitionError::TooMany { .. })
    ));
}

/// The case: `30 2 * * *` in Berlin across 2026-03-29 fires once,
/// at 03:00+02:00, for the window of the 28th; across the fall-back it
/// fires once, at the first 02:30.
#[test]
fn cron_at_the_transitions_of_berlin() {
    let berlin = zone("Europe/Berlin");
    let s = Schedule::parse("30 2 * * *").unwrap().in_zone(berlin);
    let firings = s.firings_between(utc(2026, 3, 27, 12, 0), utc(2026, 3, 30, 12, 0), 10);
    let shown: Vec<String> = firings.iter().map(|&f| berlin.rfc3339(f)).collect();
    assert_eq!(
        shown,
        [
            "2026-03-28T02:30:00+01:00",
            "2026-03-29T03:00:00+02:00",
            "2026-03-30T02:30:00+02:00",
        ]
    );
    assert_eq!(
        s.window_closed_by(Partitioning::Daily, firings[1])
            .map(|w| w.to_string()),
        Some("2026-03-28".into())
    );
    let autumn = s.firings_between(utc(2026, 10, 24, 12, 0), utc(2026, 10, 26, 12, 0), 10);
    let shown: Vec<String> = autumn.iter().map(|&f| berlin.rfc3339(f)).collect();
    assert_eq!(
        shown,
        ["2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    );
    // Backwards gives the same firings.
    assert_eq!(s.prev_before(autumn[1]), Some(autumn[0]));
    assert_eq!(s.prev_before(autumn[0]), Some(utc(2026, 10, 24, 0, 30)));
    // From inside the repeated hour, the next firing is the next day's.
    assert_eq!(s.next_after(utc(2026, 10, 25, 1, 40)), Some(autumn[1]));
    // An hourly expression fires at the first 02:00 only, and its firing
    // at 03:00 starts both 02:00 hours.
    let hourly = Schedule::parse("0 * * * *").unwrap().in_zone(berlin);
    let f = hourly.next_after(utc(2026, 10, 25, 0, 0)).unwrap();
    assert_eq!(berlin.rfc3339(f), "2026-10-25T03:00:00+01:00");
    let started: Vec<String> = hourly
        .windows_closed_by(Partitioning::Hourly, f)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        started,
        ["2026-10-25T02:00+02:00", "2026-10-25T02:00+01:00"]
    );
}

/// The zone names are checked, with a hint for a wrong case.
#[test]
fn zone_names_are_checked() {
    assert!(Zone::parse("Europe/Berlin").is_ok());
    let e = Zone::parse("europe/berlin").unwrap_err().to_string();
    assert!(e.contains("did you mean \"Europe/Berlin\""), "{e}");
    let e = Zone::parse("Mars/Olympus").unwrap_err().to_string();
    assert!(e.contains("not an IANA zone name"), "{e}");
}

// ---- properties -------------------------------------------------------------

fn any_zone() -> impl Strategy<Value = Zone> {
    prop::sample::select(ZONES.to_vec()).prop_map(zone)
}

/// Instants of 2026, biased to the days around the transitions.
fn instant_2026() -> impl Strategy<Value = u64> {
    let (from, to) = year_2026();
    let near: Vec<u64> = TRANSITIONS_2026
        .iter()
        .map(|(_, (y, mo, d, h, mi), ..)| utc(*y, *mo, *d, *h, *mi))
        .collect();
    prop_oneof![
        from..to,
        (prop::sample::select(near), 0..(4 * 24 * H)).prop_map(|(t, d)| t - 2 * 24 * H + d),
    ]
}

/// The wall-clock time at `ms`, read with chrono-tz directly.
fn wall(z: &str, ms: u64) -> NaiveDateTime {
    let tz: chrono_tz::Tz = z.parse().unwrap();
    chrono::DateTime::from_timestamp_millis(ms as i64)
        .unwrap()
        .with_timezone(&tz)
        .naive_local()
}

fn offset_min(z: Zone, ms: u64) -> i64 {
    i64::from(z.offset_s(ms)) / 60
}

/// Whether the reference says the minute `t` is a firing of `s` in zone
/// `z`: its wall time matches and this is that wall time's first
/// occurrence, or a gap ends at `t` and a wall time inside it matches.
fn fires_at(cron: &croner::Cron, z: &str, t: u64) -> bool {
    let tz: chrono_tz::Tz = z.parse().unwrap();
    let w = wall(z, t);
    let matching = |n: NaiveDateTime| cron.is_time_matching(&n.and_utc()).unwrap();
    let first = match tz.from_local_datetime(&w) {
        chrono::LocalResult::Single(_) => true,
        chrono::LocalResult::Ambiguous(a, b) => a.min(b).timestamp_millis() as u64 == t,
        chrono::LocalResult::None => false,
    };
    if first && matching(w) {
        return true;
    }
    let before = wall(z, t - MIN);
    if w - before > chrono::Duration::minutes(1) {
        // A gap: the walls strictly between `before` and `w`.
        let mut n = before + chrono::Duration::minutes(1);
        while n < w {
            if matching(n) {
                return true;
            }
            n += chrono::Duration::minutes(1);
        }
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// A local day holds its instants, starts at a midnight (or the gap's
    /// end), lasts 24 h minus the change of offset across it, and the
    /// next day starts where it ends.
    #[test]
    fn local_days_tile_time(z in any_zone(), ms in instant_2026()) {
        let w = Partition::of_time(Partitioning::Daily, ms, z).unwrap();
        let (start, end) = (w.start_ms(z).unwrap(), w.end_ms(z).unwrap());
        prop_assert!(start <= ms && ms < end);
        let shift_min = offset_min(z, end) - offset_min(z, start);
        prop_assert_eq!((end - start) as i64, 24 * H as i64 - shift_min * MIN as i64);
        prop_assert_eq!(w.to_string(), wall(z.name(), ms).date().to_string());
        prop_assert_eq!(w.next(z).unwrap().start_ms(z), Some(end));
        prop_assert_eq!(w.next(z).unwrap().prev(z), Some(w.clone()));
    }

    /// A local hour holds its instants, starts at a whole hour of the wall
    /// clock, no whole hour is shown inside it, its name parses back, and
    /// the next hour starts where it ends.
    #[test]
    fn local_hours_tile_time(z in any_zone(), ms in instant_2026()) {
        let w = Partition::of_time(Partitioning::Hourly, ms, z).unwrap();
        let (start, end) = (w.start_ms(z).unwrap(), w.end_ms(z).unwrap());
        prop_assert!(start <= ms && ms < end, "{} holds {}", w, ms);
        let whole = |t: u64| wall(z.name(), t).format("%M:%S").to_string() == "00:00";
        prop_assert!(whole(start));
        let mut t = start + MIN;
        while t < end {
            prop_assert!(!whole(t), "{} shows a whole hour at {}", w, t);
            t += MIN;
        }
        prop_assert!(whole(end));
        prop_assert_eq!(p(&w.to_string()), w.clone());
        prop_assert_eq!(w.in_zone(z), Ok(w.clone()));
        prop_assert_eq!(w.next(z).unwrap().start_ms(z), Some(end));
        prop_assert_eq!(w.next(z).unwrap().prev(z), Some(w.clone()));
    }

    /// `next_after` and `prev_before` find exactly the firings the
    /// reference names, minute by minute, with none between them.
    #[test]
    fn cron_in_a_zone_matches_the_reference(
        z in any_zone(),
        ms in instant_2026(),
        expr in prop::sample::select(vec!["30 2 * * *", "0 * * * *", "*/15 * * * *", "45 1 * * *", "0 3 * * 0"]),
    ) {
        let cron = croner::Cron::new(expr).parse().unwrap();
        let s = Schedule::parse(expr).unwrap().in_zone(z);
        let next = s.next_after(ms).unwrap();
        prop_assert!(next > ms);
        prop_assert!(fires_at(&cron, z.name(), next), "{} in {}: {} is not a firing", expr, z, z.rfc3339(next));
        let prev = s.prev_before(ms + 1).unwrap();
        prop_assert!(prev <= ms);
        prop_assert!(fires_at(&cron, z.name(), prev), "{} in {}: {} is not a firing", expr, z, z.rfc3339(prev));
        prop_assert_eq!(s.next_after(prev), Some(next));
        prop_assert_eq!(s.prev_before(next), Some(prev));
        // No firing of the reference between them.
        let mut t = prev - prev % MIN + MIN;
        while t < next {
            prop_assert!(!fires_at(&cron, z.name(), t), "{} in {}: skipped {}", expr, z, z.rfc3339(t));
            t += MIN;
        }
    }
}
