//! Cron schedules: when a cron trigger fires, in UTC or a graph's zone.
//!
//! [`Schedule`] wraps croner 2.2 and fixes the dialect weir speaks:
//!
//! - 5 fields (`minute hour day-of-month month day-of-week`), or 6 with
//!   seconds first; a 5-field expression fires at second 0. The nicknames
//!   `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily` and `@hourly`
//!   are read too.
//! - Day-of-month and day-of-week: when both are restricted, a day matches
//!   if *either* does (Vixie cron's OR rule, croner's default; croner's
//!   `with_dom_and_dow` would make it AND, and weir does not call it). A
//!   field counts as unrestricted only when it is exactly `*` or `?`, so
//!   `*/2` in day-of-month is a restriction.
//! - Sunday is both 0 and 7; names (`MON`, `JAN`) are accepted.
//! - Every instant is UTC, in ms since the epoch. [`Schedule::next_after`]
//!   is strictly after its argument and [`Schedule::prev_before`] strictly
//!   before, so a firing handled at T is not found again from T.
//!
//! croner 2.2 has no backward search, so `prev_before` walks back day by day
//! with croner's own field matchers (month, then day, then the latest
//! matching time of that day). The Gregorian calendar repeats every 400
//! years, so a schedule that fires at all fires within any 400 years; an
//! expression that never fires (`0 0 30 2 *`) is refused at parse.
//!
//! croner's forward search gives up once it reaches year 5000, so
//! `next_after` finds nothing after 5000-01-01.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use croner::Cron;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::partition::{Partition, Partitioning};
use crate::zone::Zone;

/// Field names in croner's order, seconds first.
const FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day-of-month",
    "month",
    "day-of-week",
];

/// Croner's nicknames, which stand for a whole expression.
const NICKNAMES: [&str; 6] = [
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@hourly",
];

/// How far back `prev_before` looks: one Gregorian cycle plus a day.
const DAYS_BACK_MAX: u32 = 146_097 + 1;

/// The longest expression accepted, in bytes: cron lines are short, and a
/// bound keeps a hostile definition file from making parse slow.
pub const EXPRESSION_BYTES_MAX: usize = 1024;

/// Why an expression is not a cron schedule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The expression is empty or blank.
    #[error("cron expression {expr:?} is empty")]
    Empty {
        /// The expression.
        expr: String,
    },
    /// The expression is longer than [`EXPRESSION_BYTES_MAX`].
    #[error("cron expression of {len} bytes is over the limit of {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The expression does not have 5 or 6 fields.
    #[error(
        "cron expression {expr:?} has {count} fields; expected 5 (minute hour day-of-month month \
         day-of-week) or 6 (second first)"
    )]
    FieldCount {
        /// The expression.
        expr: String,
        /// The fields it has.
        count: usize,
    },
    /// A `@` nickname that croner does not know.
    #[error("cron expression {expr:?}: unknown nickname; known: {}", NICKNAMES.join(", "))]
    Nickname {
        /// The expression.
        expr: String,
    },
    /// One field is not valid.
    #[error("cron expression {expr:?}: {field} field {value:?}: {reason}")]
    Field {
        /// The expression.
        expr: String,
        /// Which field.
        field: &'static str,
        /// The field's text.
        value: String,
        /// What croner found wrong, in its words.
        reason: String,
    },
    /// croner refused the expression and no single field is to blame.
    #[error("cron expression {expr:?}: {reason}")]
    Invalid {
        /// The expression.
        expr: String,
        /// What croner found wrong, in its words.
        reason: String,
    },
    /// Every field is valid but no date matches (the 30th of February).
    #[error("cron expression {expr:?} never fires: no date matches its day-of-month, month and day-of-week fields")]
    NeverFires {
        /// The expression.
        expr: String,
    },
}

/// A parsed cron expression, evaluated in UTC or in the zone given by
/// [`Schedule::in_zone`].
#[derive(Clone)]
pub struct Schedule {
    source: String,
    cron: Cron,
    zone: Zone,
}

impl Schedule {
    /// Parses `expr` (surrounding whitespace is dropped).
    pub fn parse(expr: &str) -> Result<Schedule, CronError> {
        if expr.len() > EXPRESSION_BYTES_MAX {
            return Err(CronError::TooLong {
                len: expr.len(),
                max: EXPRESSION_BYTES_MAX,
            });
        }
        let source = expr.trim();
        let owned = || source.to_string();
        if source.is_empty() {
            return Err(CronError::Empty {
                expr: expr.to_string(),
            });
        }
        let fields: Vec<&str> = source.split_whitespace().collect();
        if source.starts_with('@') {
            if fields.len() != 1 || !NICKNAMES.iter().any(|n| n.eq_ignore_ascii_case(source)) {
                return Err(CronError::Nickname { expr: owned() });
            }
        } else if !(5..=6).contains(&fields.len()) {
            return Err(CronError::FieldCount {
                expr: owned(),
                count: fields.len(),
            });
        } else if source.contains('@') {
            // '@' only starts a nickname; name the field that holds a stray one
            // rather than pass croner's generic complaint on.
            let at = fields
                .iter()
                .position(|f| f.contains('@'))
                .expect("one field holds '@'");
            return Err(field_error(
                source,
                &fields,
                at,
                "'@' is not allowed in a field".to_string(),
            ));
        }
        let cron = croner_parse(source).map_err(|e| {
            let reason = reason(&e);
            match blame(&fields) {
                Some(at) => field_error(source, &fields, at, reason),
                None => CronError::Invalid {
                    expr: owned(),
                    reason,
                },
            }
        })?;
        let schedule = Schedule {
            source: owned(),
            cron,
            zone: Zone::UTC,
        };
        // croner searches up to year 5000, past a whole 400-year Gregorian
        // cycle, so finding nothing after 1970 means it never fires.
        if schedule.next_after(0).is_none() {
            return Err(CronError::NeverFires { expr: owned() });
        }
        Ok(schedule)
    }

    /// The expression as written (trimmed).
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// This schedule, its fields read as wall-clock times in `zone`.
    ///
    /// The expression matches wall-clock times; each match fires at the
    /// instant [`Zone::at_wall`] gives it. So at a spring-forward gap every
    /// match inside the gap fires once, together, at the first instant
    /// after it (`30 2 * * *` fires at 03:00+02:00 in Berlin on
    /// 2026-03-29), and at a fall-back repeat a match fires once, at its
    /// first occurrence (`30 2 * * *` at 02:30+02:00 on 2026-10-25, not
    /// again at 02:30+01:00).
    pub fn in_zone(mut self, zone: Zone) -> Schedule {
        self.zone = zone;
        self
    }

    /// The zone the fields are read in.
    pub fn zone(&self) -> Zone {
        self.zone
    }

    /// The first firing strictly after `ms`, in ms since the epoch; `None`
    /// when croner finds none (it stops searching at year 5000).
    pub fn next_after(&self, ms: u64) -> Option<u64> {
        if !self.zone.is_utc() {
            return self.next_after_zoned(ms);
        }
        // Firings are whole seconds: search from the second that holds `ms`,
        // exclusive. croner keeps sub-second parts it was given, so they are
        // cut here.
        let start = DateTime::<Utc>::from_timestamp(i64::try_from(ms / 1000).ok()?, 0)?;
        let next = self.cron.find_next_occurrence(&start, false).ok()?;
        let next_ms = u64::try_from(next.timestamp_millis()).ok()?;
        debug_assert!(next_ms > ms, "{self}: next after {ms} is {next_ms}");
        Some(next_ms)
    }

    /// Matches are wall-clock times and map to instants monotonically, so
    /// the next firing after `ms` is the first match after the latest wall
    /// time the clock showed by `ms` (later than the wall time at `ms` just
    /// after a fall-back), at the instant it stands for.
    fn next_after_zoned(&self, ms: u64) -> Option<u64> {
        let floor_ms = ms - ms % 1000;
        let shown = self.zone.wall_max_until(floor_ms)?;
        let next = self
            .cron
            .find_next_occurrence(&shown.and_utc(), false)
            .ok()?
            .naive_utc();
        let at = self.zone.at_wall(next)?;
        debug_assert!(at > ms, "{self} in {}: next after {ms} is {at}", self.zone);
        (at > ms).then_some(at)
    }

    /// The last firing strictly before `ms`, in ms since the epoch; `None`
    /// when there is none since the epoch.
    pub fn prev_before(&self, ms: u64) -> Option<u64> {
        if !self.zone.is_utc() {
            // The last match at or before the latest wall time shown by the
            // last whole second before `ms` (see `next_after_zoned`).
            let limit_s = ms.div_ceil(1000).checked_sub(1)?;
            let shown = self.zone.wall_max_until(limit_s * 1000)?;
            let found = self.latest_at_or_before(shown)?;
            let at = self.zone.at_wall(found)?;
            debug_assert!(at < ms, "{self} in {}: prev before {ms} is {at}", self.zone);
            return (at < ms).then_some(at);
        }
        // The latest whole second s with s * 1000 < ms.
        let limit_s = ms.div_ceil(1000).checked_sub(1)?;
        let limit = DateTime::<Utc>::from_timestamp(i64::try_from(limit_s).ok()?, 0)?.naive_utc();
        let found = self.latest_at_or_before(limit)?;
        let found_ms = u64::try_from(found.and_utc().timestamp_millis()).ok()?;
        debug_assert!(found_ms < ms, "{self}: prev before {ms} is {found_ms}");
        Some(found_ms)
    }

    /// Every firing in `(after_ms, until_ms]`, oldest first, at most
    /// `count_max` of them (the oldest): the firings a catch-up replays. A
    /// result of `count_max` firings may have left some out.
    pub fn firings_between(&self, after_ms: u64, until_ms: u64, count_max: usize) -> Vec<u64> {
        let mut out = Vec::new();
        let mut at = after_ms;
        while out.len() < count_max {
            match self.next_after(at) {
                Some(next) if next <= until_ms => {
                    out.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        out
    }

    /// The time window that the firing at `firing_ms` starts a run of: the
    /// window of `partitioning` that contains the previous firing (a daily
    /// schedule firing at 01:00 on the 30th runs the 29th). `None` for a
    /// keyed partitioning and for the first firing after the epoch.
    pub fn window_closed_by(
        &self,
        partitioning: Partitioning,
        firing_ms: u64,
    ) -> Option<Partition> {
        Partition::of_time(partitioning, self.prev_before(firing_ms)?, self.zone)
    }

    /// Every window the firing at `firing_ms` starts: the one
    /// [`Schedule::window_closed_by`] names, and after it any window with
    /// the same wall-clock name that has ended by the firing. That is the
    /// second 02:00 hour of a fall-back, which no firing of `0 * * * *`
    /// falls in (a match fires at its first occurrence only) and which
    /// would otherwise never run.
    pub fn windows_closed_by(&self, partitioning: Partitioning, firing_ms: u64) -> Vec<Partition> {
        let Some(first) = self.window_closed_by(partitioning, firing_ms) else {
            return Vec::new();
        };
        let mut out = vec![first];
        while let Some(next) = out.last().and_then(|w| w.next(self.zone)) {
            let ended = next.end_ms(self.zone).is_some_and(|e| e <= firing_ms);
            if !ended || next.wall_start_ms() != out[0].wall_start_ms() {
                break;
            }
            out.push(next);
        }
        out
    }

    fn latest_at_or_before(&self, limit: NaiveDateTime) -> Option<NaiveDateTime> {
        let p = &self.cron.pattern;
        let epoch = NaiveDate::from_ymd_opt(1970, 1, 1)?;
        let mut day = limit.date();
        let mut bound = limit.time();
        for _ in 0..DAYS_BACK_MAX {
            if day < epoch {
                return None;
            }
            if !p.month_match(day.month()).ok()? {
                // Jump to the last day of the month before.
                day = day.with_day(1)?.pred_opt()?;
                bound = end_of_day();
                continue;
            }
            if p.day_match(day.year(), day.month(), day.day()).ok()? {
                if let Some(t) = self.latest_time(bound) {
                    return Some(day.and_time(t));
                }
            }
            day = day.pred_opt()?;
            bound = end_of_day();
        }
        None
    }

    /// The latest time of day at or before `bound` that matches the hour,
    /// minute and second fields.
    fn latest_time(&self, bound: NaiveTime) -> Option<NaiveTime> {
        let p = &self.cron.pattern;
        let matches = |r: Result<bool, croner::errors::CronError>| r.unwrap_or(false);
        for h in (0..=bound.hour())
            .rev()
            .filter(|&h| matches(p.hour_match(h)))
        {
            let m_max = if h == bound.hour() {
                bound.minute()
            } else {
                59
            };
            for m in (0..=m_max).rev().filter(|&m| matches(p.minute_match(m))) {
                let s_max = if h == bound.hour() && m == bound.minute() {
                    bound.second()
                } else {
                    59
                };
                if let Some(s) = (0..=s_max).rev().find(|&s| matches(p.second_match(s))) {
                    return NaiveTime::from_hms_opt(h, m, s);
                }
            }
        }
        None
    }
}

fn end_of_day() -> NaiveTime {
    NaiveTime::from_hms_opt(23, 59, 59).expect("a time of day")
}

fn croner_parse(source: &str) -> Result<Cron, croner::errors::CronError> {
    Cron::new(source).with_seconds_optional().parse()
}

/// The first field that croner refuses on its own (every other field `*`),
/// or `None` when each field passes alone.
fn blame(fields: &[&str]) -> Option<usize> {
    (0..fields.len()).find(|&i| {
        let alone: Vec<&str> = (0..fields.len())
            .map(|j| if j == i { fields[j] } else { "*" })
            .collect();
        croner_parse(&alone.join(" ")).is_err()
    })
}

fn field_error(source: &str, fields: &[&str], at: usize, reason: String) -> CronError {
    CronError::Field {
        expr: source.to_string(),
        field: FIELDS[6 - fields.len() + at],
        value: fields[at].to_string(),
        reason,
    }
}

/// croner's message, without its prefix and final period, in lower case.
fn reason(e: &croner::errors::CronError) -> String {
    use croner::errors::CronError as E;
    let text = match e {
        E::ComponentError(m) | E::InvalidPattern(m) | E::IllegalCharacters(m) => m.clone(),
        other => other.to_string(),
    };
    let text = text.trim_end_matches('.');
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Schedule({:?})", self.source)
    }
}

/// Two schedules are equal when written alike: `0 0 * * 0` and `0 0 * * 7`
/// fire together but are different text, and text is what a definition's
/// content hash covers.
impl PartialEq for Schedule {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Schedule {}

impl FromStr for Schedule {
    type Err = CronError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Schedule::parse(s)
    }
}

impl Serialize for Schedule {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Schedule::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// The window an operator's "trigger now" starts for a time-partitioned
/// graph at `now_ms`: with a cron expression, the window its latest firing
/// at or before `now_ms` started ([`Schedule::window_closed_by`]), the
/// newest window the expression has closed; without one, the
/// last whole window before `now_ms` (the one before the window holding
/// it). [`Partition::NONE`] for an unpartitioned graph, `None` for a keyed
/// one (keys are not a function of time) and where no window exists.
pub fn window_due_now(
    partitioning: Partitioning,
    schedule: Option<&Schedule>,
    now_ms: u64,
    zone: Zone,
) -> Option<Partition> {
    match (partitioning, schedule) {
        (Partitioning::None, _) => Some(Partition::NONE),
        (Partitioning::Keyed, _) => None,
        (_, Some(s)) => s.window_closed_by(partitioning, s.prev_before(now_ms.saturating_add(1))?),
        (_, None) => Partition::of_time(partitioning, now_ms, zone)?.prev(zone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> u64 {
        let t = NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, s)
            .unwrap();
        t.and_utc().timestamp_millis() as u64
    }

    fn show(ms: Option<u64>) -> String {
        match ms.and_then(|ms| DateTime::<Utc>::from_timestamp_millis(ms as i64)) {
            Some(t) => t.format("%Y-%m-%d %H:%M:%S%.3f %a").to_string(),
            None => "none".to_string(),
        }
    }

    fn sched(expr: &str) -> Schedule {
        Schedule::parse(expr).unwrap_or_else(|e| panic!("{expr:?}: {e}"))
    }

    /// next_after (strictly after) and prev_before (strictly before), each
    /// row (expression, from, next, prev). Semantics: Vixie cron in UTC,
    /// with the OR of day fields; 2026-11-29 is a Sunday.
    #[test]
    fn next_and_prev_table() {
        let t = utc;
        let cases: &[(&str, u64, Option<u64>, Option<u64>)] = &[
            // hourly
            (
                "0 * * * *",
                t(2026, 11, 29, 13, 30, 0),
                Some(t(2026, 11, 29, 14, 0, 0)),
                Some(t(2026, 11, 29, 13, 0, 0)),
            ),
            (
                "@hourly",
                t(2026, 12, 31, 23, 0, 1),
                Some(t(2027, 1, 1, 0, 0, 0)),
                Some(t(2026, 12, 31, 23, 0, 0)),
            ),
            // strictness: at an exact firing, next is the following one and
            // prev the one before.
            (
                "0 * * * *",
                t(2026, 11, 29, 13, 0, 0),
                Some(t(2026, 11, 29, 14, 0, 0)),
                Some(t(2026, 11, 29, 12, 0, 0)),
            ),
            (
                "0 * * * *",
                t(2026, 11, 29, 13, 0, 0) + 1,
                Some(t(2026, 11, 29, 14, 0, 0)),
                Some(t(2026, 11, 29, 13, 0, 0)),
            ),
            (
                "0 * * * *",
                t(2026, 11, 29, 13, 0, 0) - 1,
                Some(t(2026, 11, 29, 13, 0, 0)),
                Some(t(2026, 11, 29, 12, 0, 0)),
            ),
            // daily
            (
                "30 2 * * *",
                t(2026, 11, 29, 2, 30, 0),
                Some(t(2026, 11, 30, 2, 30, 0)),
                Some(t(2026, 11, 28, 2, 30, 0)),
            ),
            (
                "@daily",
                t(2024, 2, 28, 12, 0, 0),
                Some(t(2024, 2, 29, 0, 0, 0)),
                Some(t(2024, 2, 28, 0, 0, 0)),
            ),
            // weekly, Mondays
            (
                "0 0 * * 1",
                t(2026, 11, 29, 12, 0, 0),
                Some(t(2026, 11, 30, 0, 0, 0)),
                Some(t(2026, 11, 23, 0, 0, 0)),
            ),
            (
                "0 0 * * MON",
                t(2026, 11, 30, 0, 0, 0),
                Some(t(2026, 12, 7, 0, 0, 0)),
                Some(t(2026, 11, 23, 0, 0, 0)),
            ),
            // Sunday as 0, 7 and SUN
            (
                "0 0 * * 0",
                t(2026, 11, 25, 0, 0, 0),
                Some(t(2026, 11, 29, 0, 0, 0)),
                Some(t(2026, 11, 22, 0, 0, 0)),
            ),
            (
                "0 0 * * 7",
                t(2026, 11, 25, 0, 0, 0),
                Some(t(2026, 11, 29, 0, 0, 0)),
                Some(t(2026, 11, 22, 0, 0, 0)),
            ),
            (
                "0 0 * * sun",
                t(2026, 11, 25, 0, 0, 0),
                Some(t(2026, 11, 29, 0, 0, 0)),
                Some(t(2026, 11, 22, 0, 0, 0)),
            ),
            (
                "0 0 * * 6-7",
                t(2026, 11, 29, 0, 0, 0),
                Some(t(2026, 12, 5, 0, 0, 0)),
                Some(t(2026, 11, 28, 0, 0, 0)),
            ),
            // month ends: the 31st skips short months
            (
                "0 0 31 * *",
                t(2026, 3, 31, 0, 0, 0),
                Some(t(2026, 5, 31, 0, 0, 0)),
                Some(t(2026, 1, 31, 0, 0, 0)),
            ),
            (
                "0 0 31 * *",
                t(2026, 1, 31, 0, 0, 1),
                Some(t(2026, 3, 31, 0, 0, 0)),
                Some(t(2026, 1, 31, 0, 0, 0)),
            ),
            (
                "0 0 L * *",
                t(2024, 2, 15, 0, 0, 0),
                Some(t(2024, 2, 29, 0, 0, 0)),
                Some(t(2024, 1, 31, 0, 0, 0)),
            ),
            // leap days: every four years, and not in 2100
            (
                "0 0 29 2 *",
                t(2024, 2, 29, 0, 0, 0),
                Some(t(2028, 2, 29, 0, 0, 0)),
                Some(t(2020, 2, 29, 0, 0, 0)),
            ),
            (
                "0 0 29 2 *",
                t(2097, 1, 1, 0, 0, 0),
                Some(t(2104, 2, 29, 0, 0, 0)),
                Some(t(2096, 2, 29, 0, 0, 0)),
            ),
            (
                "0 0 29 2 *",
                t(1971, 1, 1, 0, 0, 0),
                Some(t(1972, 2, 29, 0, 0, 0)),
                None,
            ),
            // the OR rule: the 1st or a Monday
            (
                "0 0 1 * 1",
                t(2026, 11, 29, 0, 0, 0),
                Some(t(2026, 11, 30, 0, 0, 0)),
                Some(t(2026, 11, 23, 0, 0, 0)),
            ),
            (
                "0 0 1 * 1",
                t(2026, 11, 30, 0, 0, 0),
                Some(t(2026, 12, 1, 0, 0, 0)),
                Some(t(2026, 11, 23, 0, 0, 0)),
            ),
            (
                "0 0 1 * 1",
                t(2026, 12, 1, 0, 0, 0),
                Some(t(2026, 12, 7, 0, 0, 0)),
                Some(t(2026, 11, 30, 0, 0, 0)),
            ),
            // ...and with only one day field restricted, no OR
            (
                "0 0 13 * *",
                t(2026, 11, 29, 0, 0, 0),
                Some(t(2026, 12, 13, 0, 0, 0)),
                Some(t(2026, 11, 13, 0, 0, 0)),
            ),
            (
                "0 0 ? * 5",
                t(2026, 11, 29, 0, 0, 0),
                Some(t(2026, 12, 4, 0, 0, 0)),
                Some(t(2026, 11, 27, 0, 0, 0)),
            ),
            // six fields, seconds first
            (
                "*/15 * * * * *",
                t(2026, 11, 29, 13, 0, 7),
                Some(t(2026, 11, 29, 13, 0, 15)),
                Some(t(2026, 11, 29, 13, 0, 0)),
            ),
            (
                "30 0 12 * * *",
                t(2026, 11, 29, 12, 0, 30),
                Some(t(2026, 11, 30, 12, 0, 30)),
                Some(t(2026, 11, 28, 12, 0, 30)),
            ),
            (
                "* * * * * *",
                t(2026, 11, 29, 13, 0, 7) + 500,
                Some(t(2026, 11, 29, 13, 0, 8)),
                Some(t(2026, 11, 29, 13, 0, 7)),
            ),
            // the first instants
            ("* * * * *", 0, Some(60_000), None),
            ("* * * * * *", 1, Some(1_000), Some(0)),
            ("0 0 1 1 *", 0, Some(t(1971, 1, 1, 0, 0, 0)), None),
            // croner searches no further than the start of year 5000
            (
                "0 0 1 1 *",
                t(4999, 1, 1, 0, 0, 0),
                Some(t(5000, 1, 1, 0, 0, 0)),
                Some(t(4998, 1, 1, 0, 0, 0)),
            ),
            (
                "0 0 1 1 *",
                t(5000, 1, 1, 0, 0, 0),
                None,
                Some(t(4999, 1, 1, 0, 0, 0)),
            ),
        ];
        for (i, (expr, from, next, prev)) in cases.iter().enumerate() {
            let s = sched(expr);
            let got = (s.next_after(*from), s.prev_before(*from));
            assert_eq!(
                got,
                (*next, *prev),
                "#{i}: {expr:?} from {}: got (next {}, prev {}), want (next {}, prev {})",
                show(Some(*from)),
                show(got.0),
                show(got.1),
                show(*next),
                show(*prev),
            );
        }
    }

    #[test]
    fn firings_between_table() {
        let t = utc;
        let hourly = &["0 * * * *"][..];
        let cases: &[(&str, u64, u64, usize, &[u64])] = &[
            // (after, until]: a firing at `after` is not included, one at `until` is.
            (
                hourly[0],
                t(2026, 11, 29, 10, 0, 0),
                t(2026, 11, 29, 13, 0, 0),
                10,
                &[
                    t(2026, 11, 29, 11, 0, 0),
                    t(2026, 11, 29, 12, 0, 0),
                    t(2026, 11, 29, 13, 0, 0),
                ],
            ),
            (
                hourly[0],
                t(2026, 11, 29, 10, 0, 0),
                t(2026, 11, 29, 13, 0, 0),
                2,
                &[t(2026, 11, 29, 11, 0, 0), t(2026, 11, 29, 12, 0, 0)],
            ),
            (
                hourly[0],
                t(2026, 11, 29, 10, 0, 0),
                t(2026, 11, 29, 10, 59, 59),
                10,
                &[],
            ),
            (
                hourly[0],
                t(2026, 11, 29, 13, 0, 0),
                t(2026, 11, 29, 10, 0, 0),
                10,
                &[],
            ),
            (hourly[0], 0, u64::MAX, 0, &[]),
            (
                "0 0 29 2 *",
                t(2020, 1, 1, 0, 0, 0),
                t(2030, 1, 1, 0, 0, 0),
                10,
                &[
                    t(2020, 2, 29, 0, 0, 0),
                    t(2024, 2, 29, 0, 0, 0),
                    t(2028, 2, 29, 0, 0, 0),
                ],
            ),
        ];
        for (i, (expr, after, until, max, want)) in cases.iter().enumerate() {
            let got = sched(expr).firings_between(*after, *until, *max);
            assert_eq!(
                got, *want,
                "#{i}: {expr:?} in ({after}, {until}] max {max}: got {got:?}, want {want:?}"
            );
        }
    }

    /// DESIGN §2: a firing at T with previous occurrence P starts the
    /// window that contains P.
    #[test]
    fn window_due_now_table() {
        // 2026-11-29T10:30:00Z.
        let now = 1_795_910_400_000 + 10 * 3_600_000 + 30 * 60_000;
        let daily_1am = Schedule::parse("0 1 * * *").unwrap();
        let hourly = Schedule::parse("0 * * * *").unwrap();
        // (partitioning, cron, want)
        let cases: &[(Partitioning, Option<&Schedule>, Option<&str>)] = &[
            (Partitioning::Daily, None, Some("2026-11-28")),
            (Partitioning::Hourly, None, Some("2026-11-29T09")),
            // The 01:00 firing of the 29th closed the 28th.
            (Partitioning::Daily, Some(&daily_1am), Some("2026-11-28")),
            // The 10:00 firing closed hour 09; hour 10 is still open.
            (Partitioning::Hourly, Some(&hourly), Some("2026-11-29T09")),
            (Partitioning::None, None, Some("none")),
            (Partitioning::Keyed, None, None),
        ];
        for (i, (partitioning, cron, want)) in cases.iter().enumerate() {
            let got = window_due_now(*partitioning, *cron, now, Zone::UTC).map(|p| p.to_string());
            assert_eq!(
                got.as_deref(),
                *want,
                "#{i}: {partitioning:?} cron {:?}",
                cron.map(|c| c.as_str())
            );
        }
    }

    #[test]
    fn window_closed_by_table() {
        let t = utc;
        let cases: &[(&str, Partitioning, u64, Option<&str>)] = &[
            (
                "0 1 * * *",
                Partitioning::Daily,
                t(2026, 11, 30, 1, 0, 0),
                Some("2026-11-29"),
            ),
            (
                "5 * * * *",
                Partitioning::Hourly,
                t(2026, 11, 29, 14, 5, 0),
                Some("2026-11-29T13"),
            ),
            (
                "0 0 1 * *",
                Partitioning::Monthly,
                t(2027, 1, 1, 0, 0, 0),
                Some("2026-12"),
            ),
            (
                "0 0 * * 1",
                Partitioning::Weekly,
                t(2027, 1, 4, 0, 0, 0),
                Some("2026-W53"),
            ),
            (
                "0 0 * * *",
                Partitioning::None,
                t(2027, 1, 4, 0, 0, 0),
                Some("none"),
            ),
            (
                "0 0 * * *",
                Partitioning::Keyed,
                t(2027, 1, 4, 0, 0, 0),
                None,
            ),
            ("0 0 * * *", Partitioning::Daily, 0, None),
        ];
        for (i, (expr, kind, firing, want)) in cases.iter().enumerate() {
            let got = sched(expr)
                .window_closed_by(*kind, *firing)
                .map(|p| p.to_string());
            assert_eq!(
                got.as_deref(),
                *want,
                "#{i}: {expr:?} {kind:?} firing {}: got {got:?}, want {want:?}",
                show(Some(*firing))
            );
        }
    }

    #[test]
    fn parse_errors_table() {
        let cases: &[(&str, &[&str])] = &[
            ("", &["is empty"]),
            ("   ", &["is empty"]),
            ("* * * *", &["has 4 fields", "expected 5"]),
            ("* * * * * * *", &["has 7 fields"]),
            ("@often", &["unknown nickname", "@daily"]),
            ("@daily *", &["unknown nickname"]),
            ("0 0 * * 1@", &["day-of-week field \"1@\"", "'@'"]),
            (
                "60 * * * *",
                &["\"60 * * * *\"", "minute field \"60\"", "out of bounds"],
            ),
            ("0 24 * * *", &["hour field \"24\""]),
            ("0 0 32 * *", &["day-of-month field \"32\""]),
            ("0 0 0 * *", &["day-of-month field \"0\""]),
            ("0 0 * 13 *", &["month field \"13\""]),
            ("0 0 * * 8", &["day-of-week field \"8\""]),
            ("61 0 0 * * *", &["second field \"61\""]),
            (
                "0 */0 * * *",
                &["hour field \"*/0\"", "step cannot be zero"],
            ),
            ("0 5-1 * * *", &["hour field \"5-1\""]),
            ("x * * * *", &["minute field \"x\""]),
            ("0 0 30 2 *", &["never fires"]),
            ("0 0 31 4,6,9,11 *", &["never fires"]),
        ];
        for (i, (expr, words)) in cases.iter().enumerate() {
            let got = Schedule::parse(expr);
            let Err(e) = &got else {
                panic!("#{i}: {expr:?}: got {got:?}, want an error");
            };
            let msg = e.to_string();
            for w in words.iter() {
                assert!(
                    msg.contains(w),
                    "#{i}: {expr:?}: message {msg:?} lacks {w:?}"
                );
            }
        }
        let long = "0 ".repeat(EXPRESSION_BYTES_MAX);
        assert!(matches!(
            Schedule::parse(&long),
            Err(CronError::TooLong { .. })
        ));
    }

    #[test]
    fn display_and_serde_keep_the_source() {
        let s = sched("  0 0 * * MON  ");
        assert_eq!(s.to_string(), "0 0 * * MON");
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, "\"0 0 * * MON\"");
        assert_eq!(serde_json::from_str::<Schedule>(&json).unwrap(), s);
        assert!(serde_json::from_str::<Schedule>("\"0 0 30 2 *\"").is_err());
        assert_ne!(sched("0 0 * * 0"), sched("0 0 * * 7"));
    }

    fn cron_like() -> impl Strategy<Value = String> {
        let field = prop_oneof![
            Just("*".to_string()),
            Just("?".to_string()),
            (0u8..70).prop_map(|n| n.to_string()),
            (0u8..40, 0u8..40).prop_map(|(a, b)| format!("{a}-{b}")),
            (0u8..40, 0u8..12).prop_map(|(a, b)| format!("{a}/{b}")),
            (0u8..40, 0u8..8).prop_map(|(a, b)| format!("{a}#{b}")),
            "[0-9LlWw#/*?,-]{1,6}",
            "[a-zA-Z]{3}",
            (0u8..33).prop_map(|n| format!("{n}W")),
            (0u8..8).prop_map(|n| format!("{n}L")),
        ];
        prop::collection::vec(field, 4..8).prop_map(|fs| fs.join(" "))
    }

    fn valid_schedule() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just("* * * * *"),
            Just("0 * * * *"),
            Just("*/7 3-5 * * *"),
            Just("0 0 * * 1"),
            Just("0 0 31 * *"),
            Just("0 0 29 2 *"),
            Just("0 0 1 * 1"),
            Just("0 0 L * *"),
            Just("0 0 * * 5L"),
            Just("0 0 * * 1#2"),
            Just("0 0 15W * *"),
            Just("30 0 12 * * *"),
            Just("*/15 * * * * *"),
            Just("0 0 ? 2 5#5"),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,64}") {
            let _ = Schedule::parse(&s);
        }

        #[test]
        fn parse_of_cron_like_never_panics(s in cron_like(), from in 0u64..utc(2100, 1, 1, 0, 0, 0)) {
            if let Ok(sched) = Schedule::parse(&s) {
                let _ = sched.next_after(from);
                let _ = sched.prev_before(from);
            }
        }

        /// next and prev bracket `ms` with no firing between them, and both
        /// are firings; checked against croner's own matcher.
        #[test]
        fn next_and_prev_agree(expr in valid_schedule(), ms in 0u64..utc(2200, 1, 1, 0, 0, 0)) {
            let s = sched(expr);
            let next = s.next_after(ms).expect("fires before 2300");
            prop_assert!(next > ms);
            let matching = |at: u64| {
                let t = DateTime::<Utc>::from_timestamp_millis(at as i64).unwrap();
                s.cron.is_time_matching(&t).unwrap()
            };
            prop_assert!(matching(next), "{} next {} does not match", expr, show(Some(next)));
            // The last firing before `next` is the last one at or before `ms`.
            prop_assert_eq!(s.prev_before(next), s.prev_before(ms + 1));
            if let Some(prev) = s.prev_before(ms) {
                prop_assert!(prev < ms);
                prop_assert!(matching(prev), "{} prev {} does not match", expr, show(Some(prev)));
                let after_prev = s.next_after(prev).unwrap();
                prop_assert!(after_prev >= ms, "{}: firing {} between prev {} and {}", expr, show(Some(after_prev)), show(Some(prev)), show(Some(ms)));
                prop_assert_eq!(s.prev_before(after_prev), Some(prev));
            }
        }
    }
}
