//! Time zones: the IANA zone a graph's windows and cron expression live in.
//!
//! [`Zone`] wraps chrono-tz's `Tz`, which compiles the IANA tz database in
//! ([`TZDB_VERSION`]). Every conversion between an instant (ms since the
//! epoch, UTC) and a wall-clock time (a `NaiveDateTime`, what a clock on
//! the wall shows) goes through here, and this is where weir's two rules
//! for the instants a wall-clock time does not name exactly one of live:
//!
//! - **A gap** (spring forward: 02:00 → 03:00 in Berlin): a wall time inside
//!   the gap stands for the first instant after it (02:30 → 03:00+02:00).
//! - **A repeat** (fall back: 03:00 → 02:00): a wall time shown twice stands
//!   for its first occurrence (02:30 → 02:30+02:00).
//!
//! [`Zone::at_wall`] applies both, and it is monotone: a later wall time
//! never maps to an earlier instant, which is what lets a cron search run
//! on wall-clock times and map the result once.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Timelike};
use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The release of the IANA tz database compiled in (chrono-tz's).
pub const TZDB_VERSION: &str = chrono_tz::IANA_TZDB_VERSION;

/// The longest a gap or a repeat lasts in the tz database, with margin: the
/// bound of every search for a transition (real ones are at most 2 h).
const SHIFT_MS_MAX: u64 = 3 * 3_600_000;

const MINUTE_MS: u64 = 60_000;
const HOUR_MS: u64 = 3_600_000;

/// Why a name is not a zone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    /// Not an IANA zone name.
    #[error("timezone {name:?} is not an IANA zone name (e.g. Europe/Berlin, America/New_York, UTC){}", hint(.suggestion))]
    Unknown {
        /// The name.
        name: String,
        /// The zone whose name differs only in case, if any.
        suggestion: Option<String>,
    },
}

fn hint(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!("; did you mean {s:?}?"),
        None => String::new(),
    }
}

/// An IANA time zone. `Zone::UTC` is the default of every graph.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Zone(Tz);

impl Default for Zone {
    fn default() -> Self {
        Zone::UTC
    }
}

impl Zone {
    /// Coordinated Universal Time: no offset, no gap, no repeat.
    pub const UTC: Zone = Zone(Tz::UTC);

    /// The zone named `name`, exactly as the IANA database spells it.
    pub fn parse(name: &str) -> Result<Zone, ZoneError> {
        if let Ok(tz) = name.parse::<Tz>() {
            return Ok(Zone(tz));
        }
        Err(ZoneError::Unknown {
            name: name.to_string(),
            suggestion: chrono_tz::TZ_VARIANTS
                .iter()
                .find(|tz| tz.name().eq_ignore_ascii_case(name.trim()))
                .map(|tz| tz.name().to_string()),
        })
    }

    /// The IANA name.
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Whether this is UTC, whose windows keep their UTC names
    /// (`2026-11-29T13`).
    pub fn is_utc(&self) -> bool {
        matches!(self.0, Tz::UTC | Tz::Etc__UTC)
    }

    /// The offset from UTC at the instant `ms`, in seconds (east positive).
    pub fn offset_s(&self, ms: u64) -> i32 {
        let Some(t) = utc(ms) else { return 0 };
        self.0
            .offset_from_utc_datetime(&t.naive_utc())
            .fix()
            .local_minus_utc()
    }

    /// The wall-clock time at the instant `ms`.
    pub fn wall(&self, ms: u64) -> Option<NaiveDateTime> {
        Some(utc(ms)?.with_timezone(&self.0).naive_local())
    }

    /// Every instant the wall-clock time `wall` names: none in a gap, two
    /// in a repeat (earlier first), else one.
    pub fn instants(&self, wall: NaiveDateTime) -> Vec<u64> {
        use chrono::LocalResult as L;
        let ms = |t: DateTime<Tz>| u64::try_from(t.timestamp_millis()).ok();
        match self.0.from_local_datetime(&wall) {
            L::Single(t) => ms(t).into_iter().collect(),
            L::Ambiguous(a, b) => {
                let mut both: Vec<u64> = ms(a).into_iter().chain(ms(b)).collect();
                both.sort_unstable();
                both
            }
            L::None => Vec::new(),
        }
    }

    /// The instant `wall` stands for: its only instant, the first of two in
    /// a repeat, and the first instant after the gap for a time inside one.
    /// `None` before the epoch.
    pub fn at_wall(&self, wall: NaiveDateTime) -> Option<u64> {
        use chrono::LocalResult as L;
        let ms = |t: DateTime<Tz>| u64::try_from(t.timestamp_millis()).ok();
        match self.0.from_local_datetime(&wall) {
            L::Single(t) => ms(t),
            L::Ambiguous(a, b) => ms(a.min(b)),
            L::None => {
                // Inside a gap: walk by minutes (gaps are whole minutes) to
                // the first wall time after it, then back to the exact
                // instant the zone changed offset.
                let mut probe = wall;
                for _ in 0..(SHIFT_MS_MAX / MINUTE_MS) {
                    probe += chrono::Duration::minutes(1);
                    if let Some(&after) = self.instants(probe).first() {
                        return Some(self.transition_in(after.saturating_sub(SHIFT_MS_MAX), after));
                    }
                }
                None
            }
        }
    }

    /// The first instant in `(from_ms, to_ms]` whose offset is the one at
    /// `to_ms`, to the millisecond: where a change of offset happened.
    fn transition_in(&self, from_ms: u64, to_ms: u64) -> u64 {
        let target = self.offset_s(to_ms);
        let (mut lo, mut hi) = (from_ms, to_ms);
        // Invariant: offset(hi) == target; lo is before the change or is it.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.offset_s(mid) == target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        if self.offset_s(lo) == target {
            lo
        } else {
            hi
        }
    }

    /// The latest wall-clock time shown at any instant at or before `ms`:
    /// the wall time at `ms`, unless the clock was set back in the last
    /// hours and showed later times before it was.
    pub fn wall_max_until(&self, ms: u64) -> Option<NaiveDateTime> {
        let now = self.wall(ms)?;
        let from = ms.saturating_sub(SHIFT_MS_MAX);
        if self.offset_s(from) <= self.offset_s(ms) {
            // No setting back in the window (one change at most in 3 h).
            return Some(now);
        }
        let change = self.transition_in(from, ms);
        let before = self.wall(change.checked_sub(1)?)?;
        Some(now.max(before))
    }

    /// The end of the local hour window that starts at `start_ms`: the next
    /// instant the wall clock shows a whole hour. Usually an hour later; 30
    /// or 90 minutes around a half-hour shift (Australia/Lord_Howe), and
    /// the repeated hour of a fall-back is its own window.
    pub fn hour_end(&self, start_ms: u64) -> u64 {
        let plain = start_ms + HOUR_MS;
        if self.offset_s(plain) == self.offset_s(start_ms) {
            return plain;
        }
        let mut t = start_ms;
        for _ in 0..(SHIFT_MS_MAX / MINUTE_MS) {
            t += MINUTE_MS;
            if self
                .wall(t)
                .is_some_and(|w| w.minute() == 0 && w.second() == 0)
            {
                return t;
            }
        }
        plain
    }

    /// The start of the local hour window that holds `ms`: the latest
    /// instant at or before it at which the wall clock showed a whole hour.
    pub fn hour_start(&self, ms: u64) -> Option<u64> {
        let wall = self.wall(ms)?;
        let mut hour = wall.with_minute(0)?.with_second(0)?.with_nanosecond(0)?;
        for _ in 0..4 {
            if let Some(&t) = self.instants(hour).iter().rev().find(|&&t| t <= ms) {
                return Some(t);
            }
            hour -= chrono::Duration::hours(1);
        }
        None
    }

    /// `ms` as RFC 3339 in this zone: `2026-03-29T03:00:00+02:00`, and `Z`
    /// in UTC.
    pub fn rfc3339(&self, ms: u64) -> String {
        let Some(t) = utc(ms) else {
            return ms.to_string();
        };
        if self.is_utc() {
            return t.format("%Y-%m-%dT%H:%M:%SZ").to_string();
        }
        t.with_timezone(&self.0)
            .format("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    }
}

fn utc(ms: u64) -> Option<DateTime<chrono::Utc>> {
    DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)
}

/// An offset in seconds as `+HH:MM` (`+HH:MM:SS` when it has seconds).
pub fn offset_text(offset_s: i32) -> String {
    let sign = if offset_s < 0 { '-' } else { '+' };
    let a = offset_s.unsigned_abs();
    let (h, m, s) = (a / 3600, a / 60 % 60, a % 60);
    if s == 0 {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    }
}

/// Zones sort by name, so a map keyed by zone prints in a stable order.
impl Ord for Zone {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

impl PartialOrd for Zone {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name())
    }
}

impl FromStr for Zone {
    type Err = ZoneError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Zone::parse(s)
    }
}

impl Serialize for Zone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Zone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Zone::parse(&s).map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Zone {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Zone".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "An IANA time zone name: `UTC`, `Europe/Berlin`, `America/New_York`",
        })
    }
}
