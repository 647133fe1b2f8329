//! Partitions: the slice of the world one graph run covers.
//!
//! A graph run exists at most once per (graph, partition), so a partition is
//! an identity: it is written into store keys and run ids, shown to
//! operators and typed back on the command line. Its text form is therefore
//! the canonical one, and `Display` and `FromStr` round-trip exactly:
//!
//! | partitioning | text                               | covers                           |
//! | ------------ | ---------------------------------- | -------------------------------- |
//! | none         | `none`                             | everything, once                 |
//! | hourly       | `2026-11-29T13`                    | one UTC hour                     |
//! | daily        | `2026-11-29`                       | one UTC day                      |
//! | weekly       | `2026-W48`                         | one ISO week, Monday to Sunday   |
//! | monthly      | `2026-11`                          | one UTC month                    |
//! | keyed        | `key=db1`                          | one key of an inventory          |
//! | keyed        | `key=db1@2026-11-29T13:05:00.000Z` | one run of a key, by due instant |
//!
//! Time windows are half-open, `[start_ms, end_ms)`. Only windows that
//! start at or after the Unix epoch and carry a year up to 9999 exist, so
//! every label has a fixed width and every start fits a `u64` of ms (the
//! one casualty is `1970-W01`, which starts on 1969-12-29).
//!
//! **Keyed runs.** A keyed graph runs each key again and again (every
//! interval, on every signal), so `key=db1` alone cannot identify a run: a
//! keyed run's partition is the key plus the instant its run was due,
//! `key=K@INSTANT`, with the instant in UTC to the millisecond,
//! `YYYY-MM-DDTHH:MM:SS.mmmZ` (parsing also takes it without `.mmm`).
//! Keys may themselves hold `@`, so the text is split at the *last* `@`,
//! and only when what follows has the shape of an instant:
//! `key=a@b@2026-11-29T13:05:00.000Z` is key `a@b`, due at that instant,
//! and `key=user@host` is the plain key `user@host`. For this to stay
//! unambiguous a plain `key=K` partition refuses a key that itself ends in
//! `@` and an instant's shape ([`PartitionError::KeyLooksDue`]); a keyed
//! run accepts any key. The instant to use is the schedule record's
//! `due_at_ms` at claim time: a claim that is lost and taken again then
//! maps to the same graph run, which is what an idempotent start wants.
//!
//! Nothing here reads a clock: [`Partition::of_time`] is given the instant.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, NaiveDate, Timelike, Weekday};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::names::{Key, NameError};
use crate::zone::{offset_text, Zone};

/// How a graph's runs are partitioned.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    /// One run at most per graph: the partition is `none`.
    #[default]
    None,
    /// UTC hours: `2026-11-29T13`.
    Hourly,
    /// UTC days: `2026-11-29`.
    Daily,
    /// ISO weeks starting on Monday, UTC: `2026-W48`.
    Weekly,
    /// UTC months: `2026-11`.
    Monthly,
    /// Keys of an inventory: `key=db1`.
    Keyed,
}

const HOUR_MS: u64 = 3_600_000;
const DAY_MS: u64 = 24 * HOUR_MS;
const WEEK_MS: u64 = 7 * DAY_MS;

/// The first instant that no partition covers or names: 10000-01-01T00:00Z.
/// Windows and due instants lie before it, so years print as four digits.
pub const INSTANT_MS_END: u64 = 253_402_300_800_000;

/// The earliest and latest year of a time window's label.
const YEAR_MIN: u32 = 1970;
const YEAR_MAX: u32 = 9999;

/// A sensible bound for the windows of one backfill, for callers that have
/// no setting of their own: a little over a year of hours.
pub const WINDOWS_MAX_DEFAULT: usize = 10_000;

/// Why a string or a range is not a partition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartitionError {
    /// The text has none of the partition shapes.
    #[error(
        "partition {input:?}: not a partition; expected none, 2026-11-29T13 (hour), 2026-11-29 (day), \
         2026-W48 (ISO week), 2026-11 (month), key=K or key=K@2026-11-29T13:05:00.000Z"
    )]
    Malformed {
        /// The text.
        input: String,
    },
    /// A field of a date or instant is outside its range.
    #[error("partition {input:?}: {field} {value} is out of range ({min}..={max})")]
    OutOfRange {
        /// The text.
        input: String,
        /// The field: year, month, day, hour, minute, second or week.
        field: &'static str,
        /// Its value.
        value: u32,
        /// The smallest value allowed.
        min: u32,
        /// The largest value allowed.
        max: u32,
    },
    /// The window starts before the Unix epoch (only `1970-W01` does).
    #[error("partition {input:?}: starts on {starts}, before the Unix epoch")]
    BeforeEpoch {
        /// The text.
        input: String,
        /// The day the window starts.
        starts: String,
    },
    /// The key of a keyed partition is not a valid key.
    #[error("partition {input:?}: {source}")]
    Key {
        /// The text.
        input: String,
        /// Why the key is not valid.
        source: NameError,
    },
    /// A plain key ends with what would read as a due instant.
    #[error(
        "key {key:?} ends with '@' and an instant, so `key={key}` would read as a keyed run due at \
         that instant; give the due instant explicitly"
    )]
    KeyLooksDue {
        /// The key.
        key: String,
    },
    /// A due instant is at or after year 10000.
    #[error("due instant {at_ms} ms is after the last instant a partition can name ({INSTANT_MS_END} ms)")]
    InstantOutOfRange {
        /// The instant, in ms since the epoch.
        at_ms: u64,
    },
    /// An hour a fall-back shows twice, named without its offset.
    #[error("partition {partition} is shown twice in {zone}; name one: {}", choices.join(" or "))]
    AmbiguousHour {
        /// The partition.
        partition: Partition,
        /// The graph's zone.
        zone: &'static str,
        /// The names of both hours.
        choices: Vec<String>,
    },
    /// A window that the graph's zone does not have: an hour in a
    /// spring-forward gap, or an offset the zone does not use then.
    #[error("partition {partition} is not a window in {zone} (an hour its clocks skip, or another offset)")]
    NotInZone {
        /// The partition.
        partition: Partition,
        /// The graph's zone.
        zone: &'static str,
    },
    /// A range is not `FROM..TO`.
    #[error("partition range {input:?}: expected FROM..TO, e.g. 2026-11-01..2026-11-30")]
    RangeMalformed {
        /// The text.
        input: String,
    },
    /// An end of a range is not a time window.
    #[error(
        "partition {partition} is not a time window; ranges are of hours, days, weeks or months"
    )]
    NotTimeWindow {
        /// The partition.
        partition: Partition,
    },
    /// An end of a range is of another partitioning than the graph's.
    #[error("partition {partition} is {}, but the range is of {} partitions", kind_name(*got), kind_name(*want))]
    Mismatch {
        /// The partition.
        partition: Partition,
        /// Its partitioning.
        got: Partitioning,
        /// The partitioning asked for.
        want: Partitioning,
    },
    /// The range ends before it starts.
    #[error("partition range {from}..{to} ends before it starts")]
    Backwards {
        /// The first window.
        from: Partition,
        /// The last window.
        to: Partition,
    },
    /// The range holds more windows than allowed.
    #[error("partition range {from}..{to} holds {count} windows, over the limit of {count_max}")]
    TooMany {
        /// The first window.
        from: Partition,
        /// The last window.
        to: Partition,
        /// Windows in the range.
        count: u64,
        /// The limit.
        count_max: usize,
    },
}

/// A partition: `none`, a UTC time window, a key, or a key with the instant
/// its run was due. Built only through [`Partition::of_time`],
/// [`Partition::keyed`], [`Partition::keyed_at`], [`Partition::NONE`] and
/// parsing, so a time window is always aligned and in range.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Partition(Repr);

// Ordering: none, then time windows by partitioning and start (so windows of
// one graph sort chronologically), then keys, then keyed runs.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Repr {
    None,
    /// `start_ms` is the window's wall-clock start read as UTC (its instant
    /// in UTC); a local hour (`offset_s` set) holds its instant instead, so
    /// the two hours a fall-back repeats sort in the order they happen.
    Time {
        partitioning: Partitioning,
        start_ms: u64,
        offset_s: Option<i32>,
    },
    Key(Key),
    KeyAt {
        key: Key,
        at_ms: u64,
    },
}

impl Default for Partition {
    fn default() -> Self {
        Partition::NONE
    }
}

impl Partition {
    /// The partition of an unpartitioned graph.
    pub const NONE: Partition = Partition(Repr::None);

    /// The partition of a key, without a due instant.
    pub fn keyed(key: Key) -> Result<Partition, PartitionError> {
        if let Some(at) = key.as_str().rfind('@') {
            if instant_shaped(&key.as_str()[at + 1..]) {
                return Err(PartitionError::KeyLooksDue {
                    key: key.as_str().to_string(),
                });
            }
        }
        Ok(Partition(Repr::Key(key)))
    }

    /// The partition of the run of `key` due at `at_ms`.
    pub fn keyed_at(key: Key, at_ms: u64) -> Result<Partition, PartitionError> {
        if at_ms >= INSTANT_MS_END {
            return Err(PartitionError::InstantOutOfRange { at_ms });
        }
        Ok(Partition(Repr::KeyAt { key, at_ms }))
    }

    /// The window of `partitioning` in `zone` that contains the instant
    /// `ms`: [`Partition::NONE`] for an unpartitioned graph; `None` for a
    /// keyed one (a key is not a function of time), and for an instant
    /// outside the range of windows (at or after year 10000, or in a window
    /// that starts before the epoch).
    pub fn of_time(partitioning: Partitioning, ms: u64, zone: Zone) -> Option<Partition> {
        if ms >= INSTANT_MS_END {
            return match partitioning {
                Partitioning::None => Some(Partition::NONE),
                _ => None,
            };
        }
        if partitioning == Partitioning::Hourly && !zone.is_utc() {
            // A local hour is named by its wall time and offset, which tells
            // the two 02:00 hours of a fall-back apart.
            let start_ms = zone.hour_start(ms)?;
            return Some(Partition(Repr::Time {
                partitioning,
                start_ms,
                offset_s: Some(zone.offset_s(start_ms)),
            }));
        }
        // Every other window is named by its wall-clock start: in UTC that
        // is its instant, elsewhere the local date it begins.
        let wall = ms_of_wall(zone.wall(ms)?)?;
        let start_ms = match partitioning {
            Partitioning::None => return Some(Partition::NONE),
            Partitioning::Keyed => return None,
            Partitioning::Hourly => wall - wall % HOUR_MS,
            Partitioning::Daily => wall - wall % DAY_MS,
            Partitioning::Weekly => {
                // Day 0 (1970-01-01) is a Thursday, 3 days after a Monday.
                let day = wall / DAY_MS;
                let since_monday = (day + 3) % 7;
                day.checked_sub(since_monday)? * DAY_MS
            }
            Partitioning::Monthly => {
                let date = date_of(wall)?;
                ms_of_date(NaiveDate::from_ymd_opt(date.year(), date.month(), 1)?)?
            }
        };
        let window = Partition(Repr::Time {
            partitioning,
            start_ms,
            offset_s: None,
        });
        // A window that starts before the epoch (1970-01-01 east of UTC)
        // has no start instant: it does not exist.
        window.start_ms(zone)?;
        Some(window)
    }

    /// How this partition partitions: the kind of window, key or none.
    pub fn partitioning(&self) -> Partitioning {
        match &self.0 {
            Repr::None => Partitioning::None,
            Repr::Time { partitioning, .. } => *partitioning,
            Repr::Key(_) | Repr::KeyAt { .. } => Partitioning::Keyed,
        }
    }

    /// Whether this is the partition of an unpartitioned graph.
    pub fn is_none(&self) -> bool {
        matches!(self.0, Repr::None)
    }

    /// The first instant of a time window in `zone`, in ms since the epoch.
    /// A local hour (`2026-10-25T02:00+01:00`) names its instant itself; a
    /// day, week or month starts at the first instant of its first local
    /// day (after the gap, where a zone skips midnight).
    pub fn start_ms(&self, zone: Zone) -> Option<u64> {
        match self.0 {
            Repr::Time {
                start_ms,
                offset_s: Some(_),
                ..
            } => Some(start_ms),
            Repr::Time { start_ms, .. } if zone.is_utc() => Some(start_ms),
            Repr::Time { start_ms, .. } => zone.at_wall(wall_of_ms(start_ms)?),
            _ => None,
        }
    }

    /// The first instant after a time window in `zone`, in ms since the
    /// epoch: windows are `[start_ms, end_ms)`. A local day is 23 hours
    /// long on the day of a spring-forward and 25 on a fall-back.
    pub fn end_ms(&self, zone: Zone) -> Option<u64> {
        let Repr::Time {
            partitioning,
            start_ms,
            offset_s,
        } = self.0
        else {
            return None;
        };
        let wall_end = match partitioning {
            Partitioning::Hourly if offset_s.is_some() => return Some(zone.hour_end(start_ms)),
            Partitioning::Hourly => start_ms + HOUR_MS,
            Partitioning::Daily => start_ms + DAY_MS,
            Partitioning::Weekly => start_ms + WEEK_MS,
            Partitioning::Monthly => {
                let date = date_of(start_ms)?;
                let (year, month) = if date.month() == 12 {
                    (date.year() + 1, 1)
                } else {
                    (date.year(), date.month() + 1)
                };
                ms_of_date(NaiveDate::from_ymd_opt(year, month, 1)?)?
            }
            Partitioning::None | Partitioning::Keyed => return None,
        };
        if zone.is_utc() {
            return Some(wall_end);
        }
        zone.at_wall(wall_of_ms(wall_end)?)
    }

    /// Whether the instant `ms` lies in this time window in `zone`.
    pub fn contains(&self, ms: u64, zone: Zone) -> bool {
        match (self.start_ms(zone), self.end_ms(zone)) {
            (Some(start), Some(end)) => start <= ms && ms < end,
            _ => false,
        }
    }

    /// This partition as a graph in `zone` names it, or why it names no
    /// window there. A local hour needs its offset where the zone is not
    /// UTC: `2026-10-25T01` becomes `2026-10-25T01:00+02:00`, and
    /// `2026-10-25T02` (shown twice in Berlin) is refused with both names.
    /// A named offset must be the zone's at that hour. Other partitions
    /// pass unchanged.
    pub fn in_zone(&self, zone: Zone) -> Result<Partition, PartitionError> {
        let Repr::Time {
            partitioning: Partitioning::Hourly,
            start_ms,
            offset_s,
        } = self.0
        else {
            return Ok(self.clone());
        };
        let not_in_zone = || PartitionError::NotInZone {
            partition: self.clone(),
            zone: zone.name(),
        };
        match offset_s {
            None if zone.is_utc() => Ok(self.clone()),
            Some(0) if zone.is_utc() => Ok(Partition(Repr::Time {
                partitioning: Partitioning::Hourly,
                start_ms,
                offset_s: None,
            })),
            Some(_) if zone.is_utc() => Err(not_in_zone()),
            Some(offset) => {
                let at = Partition::of_time(Partitioning::Hourly, start_ms, zone);
                if zone.offset_s(start_ms) != offset || at.as_ref() != Some(self) {
                    return Err(not_in_zone());
                }
                Ok(self.clone())
            }
            None => {
                let wall = wall_of_ms(start_ms).ok_or_else(not_in_zone)?;
                let named: Vec<Partition> = zone
                    .instants(wall)
                    .into_iter()
                    .filter_map(|t| Partition::of_time(Partitioning::Hourly, t, zone))
                    .filter(|p| p.start_ms(zone).is_some_and(|s| zone.wall(s) == Some(wall)))
                    .collect();
                match named.as_slice() {
                    [one] => Ok(one.clone()),
                    [] => Err(not_in_zone()),
                    several => Err(PartitionError::AmbiguousHour {
                        partition: self.clone(),
                        zone: zone.name(),
                        choices: several.iter().map(|p| p.to_string()).collect(),
                    }),
                }
            }
        }
    }

    /// The key of a keyed partition.
    pub fn key(&self) -> Option<&Key> {
        match &self.0 {
            Repr::Key(key) | Repr::KeyAt { key, .. } => Some(key),
            _ => None,
        }
    }

    /// The due instant of a keyed run, in ms since the epoch.
    pub fn at_ms(&self) -> Option<u64> {
        match self.0 {
            Repr::KeyAt { at_ms, .. } => Some(at_ms),
            _ => None,
        }
    }

    /// The time window right after this one; `None` for other partitions and
    /// after the last window.
    pub fn next(&self, zone: Zone) -> Option<Partition> {
        Partition::of_time(self.time_partitioning()?, self.end_ms(zone)?, zone)
    }

    /// The time window right before this one; `None` for other partitions
    /// and before the first window.
    pub fn prev(&self, zone: Zone) -> Option<Partition> {
        Partition::of_time(
            self.time_partitioning()?,
            self.start_ms(zone)?.checked_sub(1)?,
            zone,
        )
    }

    /// Every window of `partitioning` in `zone` from `from` to `to`, both
    /// included, oldest first, for a backfill. Refuses ends that are not
    /// windows of `partitioning` in `zone`, a range that runs backwards, and
    /// one of more than `count_max` windows (counted before anything is
    /// built).
    pub fn windows(
        partitioning: Partitioning,
        from: &Partition,
        to: &Partition,
        count_max: usize,
        zone: Zone,
    ) -> Result<Vec<Partition>, PartitionError> {
        let from = &from.in_zone(zone)?;
        let to = &to.in_zone(zone)?;
        for end in [from, to] {
            let got = end
                .time_partitioning()
                .ok_or_else(|| PartitionError::NotTimeWindow {
                    partition: end.clone(),
                })?;
            if got != partitioning {
                return Err(PartitionError::Mismatch {
                    partition: end.clone(),
                    got,
                    want: partitioning,
                });
            }
        }
        let start = |p: &Partition| {
            p.start_ms(zone).ok_or_else(|| PartitionError::NotInZone {
                partition: p.clone(),
                zone: zone.name(),
            })
        };
        let (from_ms, to_ms) = (start(from)?, start(to)?);
        if to_ms < from_ms {
            return Err(PartitionError::Backwards {
                from: from.clone(),
                to: to.clone(),
            });
        }
        // Counted on wall-clock starts (local days and months are whole
        // numbers of them); local hours counted by instants, with a margin
        // for the hour a fall-back repeats and the one a spring-forward
        // skips, checked exactly once built.
        let (from_wall, to_wall) = (from.wall_start_ms(), to.wall_start_ms());
        let count = match partitioning {
            Partitioning::Hourly => (to_ms - from_ms) / HOUR_MS + 1,
            Partitioning::Daily => (to_wall - from_wall) / DAY_MS + 1,
            Partitioning::Weekly => (to_wall - from_wall) / WEEK_MS + 1,
            _ => month_index(to_wall) - month_index(from_wall) + 1,
        };
        if count > count_max as u64 {
            return Err(PartitionError::TooMany {
                from: from.clone(),
                to: to.clone(),
                count,
                count_max,
            });
        }
        let mut out = Vec::with_capacity(count as usize);
        let mut window = from.clone();
        loop {
            let last = window == *to;
            out.push(window.clone());
            if last {
                break;
            }
            if out.len() >= count_max {
                return Err(PartitionError::TooMany {
                    from: from.clone(),
                    to: to.clone(),
                    count: out.len() as u64 + 1,
                    count_max,
                });
            }
            window = window
                .next(zone)
                .filter(|w| w.start_ms(zone).is_some_and(|s| s <= to_ms))
                .ok_or_else(|| PartitionError::NotInZone {
                    partition: to.clone(),
                    zone: zone.name(),
                })?;
        }
        debug_assert!(
            partitioning == Partitioning::Hourly || out.len() as u64 == count,
            "window count of {from}..{to}"
        );
        Ok(out)
    }

    /// The wall-clock start of a time window, as if it were UTC.
    pub(crate) fn wall_start_ms(&self) -> u64 {
        match self.0 {
            Repr::Time {
                start_ms,
                offset_s: Some(off),
                ..
            } => start_ms.saturating_add_signed(i64::from(off) * 1000),
            Repr::Time { start_ms, .. } => start_ms,
            _ => 0,
        }
    }

    fn time_partitioning(&self) -> Option<Partitioning> {
        match self.0 {
            Repr::Time { partitioning, .. } => Some(partitioning),
            _ => None,
        }
    }
}

/// An inclusive range of time windows, `FROM..TO` (`2026-11-01..2026-11-30`),
/// as a backfill names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionRange {
    /// The first window.
    pub from: Partition,
    /// The last window, included.
    pub to: Partition,
}

impl PartitionRange {
    /// Every window of the range; see [`Partition::windows`].
    pub fn windows(
        &self,
        partitioning: Partitioning,
        count_max: usize,
        zone: Zone,
    ) -> Result<Vec<Partition>, PartitionError> {
        Partition::windows(partitioning, &self.from, &self.to, count_max, zone)
    }
}

impl fmt::Display for PartitionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.from, self.to)
    }
}

impl FromStr for PartitionRange {
    type Err = PartitionError;

    /// Splits at the first `..` (no time window holds one) and parses both
    /// ends; both must be time windows of the same partitioning.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((from, to)) = s.split_once("..") else {
            return Err(PartitionError::RangeMalformed {
                input: s.to_string(),
            });
        };
        let from: Partition = from.parse()?;
        let to: Partition = to.parse()?;
        for end in [&from, &to] {
            if end.time_partitioning().is_none() {
                return Err(PartitionError::NotTimeWindow {
                    partition: end.clone(),
                });
            }
        }
        if from.partitioning() != to.partitioning() {
            return Err(PartitionError::Mismatch {
                partition: to.clone(),
                got: to.partitioning(),
                want: from.partitioning(),
            });
        }
        Ok(PartitionRange { from, to })
    }
}

// ---- text -----------------------------------------------------------------

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::None => f.write_str("none"),
            Repr::Key(key) => write!(f, "key={key}"),
            Repr::KeyAt { key, at_ms } => {
                write!(f, "key={key}@")?;
                write_instant(f, *at_ms)
            }
            Repr::Time {
                partitioning: Partitioning::Hourly,
                start_ms,
                offset_s: Some(offset),
            } => {
                let wall = start_ms.saturating_add_signed(i64::from(*offset) * 1000);
                let Some(start) = DateTime::from_timestamp_millis(wall as i64) else {
                    unreachable!("a window starts before year 10000");
                };
                write!(
                    f,
                    "{:04}-{:02}-{:02}T{:02}:{:02}{}",
                    start.year(),
                    start.month(),
                    start.day(),
                    start.hour(),
                    start.minute(),
                    offset_text(*offset)
                )
            }
            Repr::Time {
                partitioning,
                start_ms,
                ..
            } => {
                let Some(start) = DateTime::from_timestamp_millis(*start_ms as i64) else {
                    unreachable!("a window starts before year 10000");
                };
                let (y, m, d, h) = (start.year(), start.month(), start.day(), start.hour());
                match partitioning {
                    Partitioning::Hourly => write!(f, "{y:04}-{m:02}-{d:02}T{h:02}"),
                    Partitioning::Daily => write!(f, "{y:04}-{m:02}-{d:02}"),
                    Partitioning::Weekly => {
                        let week = start.iso_week();
                        write!(f, "{:04}-W{:02}", week.year(), week.week())
                    }
                    Partitioning::Monthly => write!(f, "{y:04}-{m:02}"),
                    Partitioning::None | Partitioning::Keyed => {
                        unreachable!("not a time partitioning")
                    }
                }
            }
        }
    }
}

impl fmt::Debug for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Partition({self})")
    }
}

impl FromStr for Partition {
    type Err = PartitionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let malformed = || PartitionError::Malformed {
            input: s.to_string(),
        };
        if s == "none" {
            return Ok(Partition::NONE);
        }
        if let Some(rest) = s.strip_prefix("key=") {
            return parse_keyed(s, rest);
        }
        let b = s.as_bytes();
        let field = |range: std::ops::Range<usize>| digits(&s[range]).ok_or_else(malformed);
        if (b.len() == 22 || b.len() == 25) && b.len() > 16 && matches!(b[16], b'+' | b'-') {
            return parse_local_hour(s);
        }
        // Every time shape starts with `YYYY-`; checking the separators by
        // byte first keeps the slicing below on character boundaries.
        if b.len() < 7 || b[4] != b'-' {
            return Err(malformed());
        }
        let (partitioning, date, hour) = match b.len() {
            7 => (Partitioning::Monthly, (field(0..4)?, field(5..7)?, 1), 0),
            8 if b[5] == b'W' => {
                let (year, week) = (field(0..4)?, field(6..8)?);
                return week_start(s, year, week);
            }
            10 if b[7] == b'-' => (
                Partitioning::Daily,
                (field(0..4)?, field(5..7)?, field(8..10)?),
                0,
            ),
            13 if b[7] == b'-' && b[10] == b'T' => (
                Partitioning::Hourly,
                (field(0..4)?, field(5..7)?, field(8..10)?),
                field(11..13)?,
            ),
            _ => return Err(malformed()),
        };
        let day = checked_date(s, date)?;
        in_range(s, "hour", hour, 0, 23)?;
        let start_ms =
            ms_of_date(day).expect("a checked date is after the epoch") + u64::from(hour) * HOUR_MS;
        Ok(Partition(Repr::Time {
            partitioning,
            start_ms,
            offset_s: None,
        }))
    }
}

/// `2026-10-25T02:00+01:00`: a local hour, its wall time and offset (an
/// offset may carry seconds, `+00:19:32`, as a few zones' did before 1972).
fn parse_local_hour(s: &str) -> Result<Partition, PartitionError> {
    let malformed = || PartitionError::Malformed {
        input: s.to_string(),
    };
    let b = s.as_bytes();
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd";
    let shaped = SHAPE.iter().zip(b).all(|(want, got)| {
        if *want == b'd' {
            got.is_ascii_digit()
        } else {
            want == got
        }
    });
    let offset_shaped = b[19] == b':' && (b.len() == 22 || b[22] == b':');
    if !shaped || !offset_shaped {
        return Err(malformed());
    }
    let n = |r: std::ops::Range<usize>| digits(&s[r]).ok_or_else(malformed);
    let day = checked_date(s, (n(0..4)?, n(5..7)?, n(8..10)?))?;
    let (hour, minute) = (n(11..13)?, n(14..16)?);
    in_range(s, "hour", hour, 0, 23)?;
    in_range(s, "minute", minute, 0, 59)?;
    let (oh, om) = (n(17..19)?, n(20..22)?);
    let os = if b.len() == 25 { n(23..25)? } else { 0 };
    in_range(s, "offset hour", oh, 0, 23)?;
    in_range(s, "offset minute", om, 0, 59)?;
    in_range(s, "offset second", os, 0, 59)?;
    let magnitude = (oh * 3600 + om * 60 + os) as i32;
    let offset_s = if b[16] == b'-' { -magnitude } else { magnitude };
    let wall = ms_of_date(day).expect("a checked date is after the epoch")
        + u64::from(hour) * HOUR_MS
        + u64::from(minute) * 60_000;
    let start_ms = wall
        .checked_add_signed(-i64::from(offset_s) * 1000)
        .ok_or_else(|| PartitionError::BeforeEpoch {
            input: s.to_string(),
            starts: s[..16].to_string(),
        })?;
    Ok(Partition(Repr::Time {
        partitioning: Partitioning::Hourly,
        start_ms,
        offset_s: Some(offset_s),
    }))
}

impl Serialize for Partition {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A partition travels as its text (`none`, `2026-11-29`, `key=db1`…).
impl schemars::JsonSchema for Partition {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Partition".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A partition: `none`, a time window (`2026-11-29T13`, `2026-11-29`, `2026-W48`, `2026-11`) or a key (`key=db1`, or `key=db1@<due instant>` for a keyed run)",
        })
    }
}

impl<'de> Deserialize<'de> for Partition {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

fn parse_keyed(input: &str, rest: &str) -> Result<Partition, PartitionError> {
    let key_error = |source| PartitionError::Key {
        input: input.to_string(),
        source,
    };
    if let Some(at) = rest.rfind('@') {
        let instant = &rest[at + 1..];
        if instant_shaped(instant) {
            let at_ms = parse_instant(input, instant)?;
            let key = Key::new(&rest[..at]).map_err(key_error)?;
            return Partition::keyed_at(key, at_ms);
        }
    }
    Partition::keyed(Key::new(rest).map_err(key_error)?)
}

/// Whether `s` has the shape `YYYY-MM-DDTHH:MM:SSZ` or
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, digits and separators only: the suffix that
/// makes `key=K@…` a keyed run.
fn instant_shaped(s: &str) -> bool {
    const SHAPE: &[u8] = b"dddd-dd-ddTdd:dd:dd";
    let b = s.as_bytes();
    let tail_ok = match b.len() {
        20 => b[19] == b'Z',
        24 => b[19] == b'.' && b[20..23].iter().all(u8::is_ascii_digit) && b[23] == b'Z',
        _ => false,
    };
    tail_ok
        && SHAPE.iter().zip(b).all(|(want, got)| {
            if *want == b'd' {
                got.is_ascii_digit()
            } else {
                want == got
            }
        })
}

/// Reads an instant-shaped string (see [`instant_shaped`]) as ms since the
/// epoch, naming the field that is out of range.
fn parse_instant(input: &str, s: &str) -> Result<u64, PartitionError> {
    let n = |r: std::ops::Range<usize>| digits(&s[r]).expect("instant_shaped checked the digits");
    let day = checked_date(input, (n(0..4), n(5..7), n(8..10)))?;
    let (hour, minute, second) = (n(11..13), n(14..16), n(17..19));
    in_range(input, "hour", hour, 0, 23)?;
    in_range(input, "minute", minute, 0, 59)?;
    in_range(input, "second", second, 0, 59)?;
    let millis = if s.len() == 24 { n(20..23) } else { 0 };
    let seconds = u64::from(hour) * 3600 + u64::from(minute) * 60 + u64::from(second);
    Ok(ms_of_date(day).expect("a checked date is after the epoch")
        + seconds * 1000
        + u64::from(millis))
}

fn write_instant(f: &mut fmt::Formatter<'_>, at_ms: u64) -> fmt::Result {
    let Some(t) = DateTime::from_timestamp_millis(at_ms as i64) else {
        unreachable!("a due instant is before year 10000");
    };
    write!(
        f,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        at_ms % 1000
    )
}

/// ASCII digits only: `str::parse` would also take a leading `+`.
fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn in_range(
    input: &str,
    field: &'static str,
    value: u32,
    min: u32,
    max: u32,
) -> Result<(), PartitionError> {
    if value < min || value > max {
        return Err(PartitionError::OutOfRange {
            input: input.to_string(),
            field,
            value,
            min,
            max,
        });
    }
    Ok(())
}

fn checked_date(
    input: &str,
    (year, month, day): (u32, u32, u32),
) -> Result<NaiveDate, PartitionError> {
    in_range(input, "year", year, YEAR_MIN, YEAR_MAX)?;
    in_range(input, "month", month, 1, 12)?;
    let first =
        NaiveDate::from_ymd_opt(year as i32, month, 1).expect("year and month are in range");
    let next = first
        .checked_add_months(chrono::Months::new(1))
        .expect("year 10000 is a date");
    let days = (next - first).num_days() as u32;
    in_range(input, "day", day, 1, days)?;
    Ok(first.with_day(day).expect("day is in range"))
}

fn week_start(input: &str, year: u32, week: u32) -> Result<Partition, PartitionError> {
    in_range(input, "year", year, YEAR_MIN, YEAR_MAX)?;
    // ISO years have 53 weeks when 28 December falls in week 53.
    let weeks = NaiveDate::from_ymd_opt(year as i32, 12, 28)
        .expect("year is in range")
        .iso_week()
        .week();
    in_range(input, "week", week, 1, weeks)?;
    let monday =
        NaiveDate::from_isoywd_opt(year as i32, week, Weekday::Mon).expect("week is in range");
    let start_ms = ms_of_date(monday).ok_or_else(|| PartitionError::BeforeEpoch {
        input: input.to_string(),
        starts: monday.to_string(),
    })?;
    Ok(Partition(Repr::Time {
        partitioning: Partitioning::Weekly,
        start_ms,
        offset_s: None,
    }))
}

fn kind_name(partitioning: Partitioning) -> &'static str {
    match partitioning {
        Partitioning::None => "unpartitioned",
        Partitioning::Hourly => "hourly",
        Partitioning::Daily => "daily",
        Partitioning::Weekly => "weekly",
        Partitioning::Monthly => "monthly",
        Partitioning::Keyed => "keyed",
    }
}

fn date_of(ms: u64) -> Option<NaiveDate> {
    Some(DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)?.date_naive())
}

/// A wall-clock time read as UTC, in ms; `None` before the epoch.
fn ms_of_wall(wall: chrono::NaiveDateTime) -> Option<u64> {
    u64::try_from(wall.and_utc().timestamp_millis()).ok()
}

/// The wall-clock time that `ms` (a wall-clock start read as UTC) stands for.
fn wall_of_ms(ms: u64) -> Option<chrono::NaiveDateTime> {
    Some(DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)?.naive_utc())
}

/// Midnight UTC of `date` in ms, or `None` before the epoch.
fn ms_of_date(date: NaiveDate) -> Option<u64> {
    let ms = date.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis();
    u64::try_from(ms).ok()
}

/// Months since year 0 of the month that holds `ms`.
fn month_index(ms: u64) -> u64 {
    let date = date_of(ms).expect("a window starts before year 10000");
    date.year() as u64 * 12 + u64::from(date.month0())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// ms since the epoch of a UTC date and time, for tables.
    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> u64 {
        let t = NaiveDate::from_ymd_opt(y, mo, d)
            .unwrap()
            .and_hms_opt(h, mi, s)
            .unwrap();
        t.and_utc().timestamp_millis() as u64
    }

    fn p(s: &str) -> Partition {
        s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    #[test]
    fn end_constant_is_year_10000() {
        assert_eq!(INSTANT_MS_END, utc(9999, 12, 31, 0, 0, 0) + DAY_MS);
    }

    /// Canonical texts of each kind: parse, then display gives the text
    /// back; the partitioning and window bounds are as labelled.
    #[test]
    fn round_trip_table() {
        use Partitioning::*;
        // (text, partitioning, window bounds)
        type Row = (&'static str, Partitioning, Option<(u64, u64)>);
        let cases: &[Row] = &[
            ("none", None, Option::None),
            (
                "2026-11-29T13",
                Hourly,
                Some((utc(2026, 11, 29, 13, 0, 0), utc(2026, 11, 29, 14, 0, 0))),
            ),
            (
                "2026-11-29T00",
                Hourly,
                Some((utc(2026, 11, 29, 0, 0, 0), utc(2026, 11, 29, 1, 0, 0))),
            ),
            (
                "2026-12-31T23",
                Hourly,
                Some((utc(2026, 12, 31, 23, 0, 0), utc(2027, 1, 1, 0, 0, 0))),
            ),
            ("1970-01-01T00", Hourly, Some((0, HOUR_MS))),
            (
                "2026-11-29",
                Daily,
                Some((utc(2026, 11, 29, 0, 0, 0), utc(2026, 11, 30, 0, 0, 0))),
            ),
            (
                "2024-02-29",
                Daily,
                Some((utc(2024, 2, 29, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0))),
            ),
            (
                "9999-12-31",
                Daily,
                Some((utc(9999, 12, 31, 0, 0, 0), INSTANT_MS_END)),
            ),
            (
                "2026-W48",
                Weekly,
                Some((utc(2026, 11, 23, 0, 0, 0), utc(2026, 11, 30, 0, 0, 0))),
            ),
            (
                "2026-W53",
                Weekly,
                Some((utc(2026, 12, 28, 0, 0, 0), utc(2027, 1, 4, 0, 0, 0))),
            ),
            (
                "2025-W01",
                Weekly,
                Some((utc(2024, 12, 30, 0, 0, 0), utc(2025, 1, 6, 0, 0, 0))),
            ),
            (
                "1970-W02",
                Weekly,
                Some((utc(1970, 1, 5, 0, 0, 0), utc(1970, 1, 12, 0, 0, 0))),
            ),
            (
                "2026-11",
                Monthly,
                Some((utc(2026, 11, 1, 0, 0, 0), utc(2026, 12, 1, 0, 0, 0))),
            ),
            (
                "2026-12",
                Monthly,
                Some((utc(2026, 12, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0))),
            ),
            (
                "2024-02",
                Monthly,
                Some((utc(2024, 2, 1, 0, 0, 0), utc(2024, 3, 1, 0, 0, 0))),
            ),
            ("key=db1", Keyed, Option::None),
            ("key=user@host:5432", Keyed, Option::None),
            ("key=a=b", Keyed, Option::None),
            ("key=db1@2026-11-29T13:05:00.000Z", Keyed, Option::None),
            (
                "key=user@host@2026-11-29T13:05:00.250Z",
                Keyed,
                Option::None,
            ),
            (
                "key=x@2026-11-29T13:05:00Z@1970-01-01T00:00:00.001Z",
                Keyed,
                Option::None,
            ),
        ];
        for (i, (text, want_kind, want_bounds)) in cases.iter().enumerate() {
            let got = p(text);
            assert_eq!(got.to_string(), *text, "#{i}: {text:?} displays as {got}");
            assert_eq!(got.partitioning(), *want_kind, "#{i}: {text:?}");
            let bounds = got.start_ms(Zone::UTC).zip(got.end_ms(Zone::UTC));
            assert_eq!(
                bounds, *want_bounds,
                "#{i}: {text:?}: got {bounds:?}, want {want_bounds:?}"
            );
            let json = serde_json::to_string(&got).unwrap();
            assert_eq!(json, format!("{text:?}"), "#{i}: serde as the text");
            assert_eq!(
                serde_json::from_str::<Partition>(&json).unwrap(),
                got,
                "#{i}: serde round-trip"
            );
        }
    }

    #[test]
    fn keyed_parts() {
        let run = p("key=user@host@2026-11-29T13:05:00.250Z");
        assert_eq!(run.key().map(Key::as_str), Some("user@host"));
        assert_eq!(run.at_ms(), Some(utc(2026, 11, 29, 13, 5, 0) + 250));
        // Seconds without milliseconds are read, and shown with them.
        let short = p("key=db1@2026-11-29T13:05:00Z");
        assert_eq!(short.to_string(), "key=db1@2026-11-29T13:05:00.000Z");
        assert_eq!(short.at_ms(), Some(utc(2026, 11, 29, 13, 5, 0)));
        // A suffix without an instant's shape is part of the key.
        for text in [
            "key=db1@tuesday",
            "key=db1@2026-11-29",
            "key=a@",
            "key=a@2026-11-29T13:05:00.0Z",
        ] {
            let got = p(text);
            assert_eq!(got.at_ms(), None, "{text}");
            assert_eq!(got.key().unwrap().as_str(), &text[4..], "{text}");
        }
        let key = Key::new("db1@2026-11-29T13:05:00Z").unwrap();
        let e = Partition::keyed(key.clone()).unwrap_err();
        assert!(matches!(e, PartitionError::KeyLooksDue { .. }), "{e}");
        // ...but it can be the key of a keyed run.
        let run = Partition::keyed_at(key, 5).unwrap();
        assert_eq!(p(&run.to_string()), run);
        assert!(Partition::keyed_at(Key::new("k").unwrap(), INSTANT_MS_END).is_err());
    }

    /// Malformed and out-of-range texts, with the words the error must hold.
    #[test]
    fn parse_errors_table() {
        let cases: &[(&str, &[&str])] = &[
            ("", &["not a partition"]),
            ("None", &["not a partition"]),
            (
                "2026-13-01",
                &["\"2026-13-01\"", "month 13 is out of range (1..=12)"],
            ),
            ("2026-02-29", &["day 29 is out of range (1..=28)"]),
            ("2024-02-30", &["day 30 is out of range (1..=29)"]),
            ("2026-04-31", &["day 31 is out of range (1..=30)"]),
            ("2026-00", &["month 0"]),
            ("2026-11-29T24", &["hour 24 is out of range (0..=23)"]),
            ("2026-W54", &["week 54 is out of range (1..=53)"]),
            ("2025-W53", &["week 53 is out of range (1..=52)"]),
            ("2026-W00", &["week 0"]),
            ("1970-W01", &["starts on 1969-12-29, before the Unix epoch"]),
            ("1969-12-31", &["year 1969 is out of range (1970..=9999)"]),
            ("1969-12", &["year 1969"]),
            ("+026-11", &["not a partition"]),
            ("2026-+1", &["not a partition"]),
            ("2026-1", &["not a partition"]),
            ("2026-11-29T1", &["not a partition"]),
            ("2026-11-29 13", &["not a partition"]),
            ("2026-w48", &["not a partition"]),
            ("20261129", &["not a partition"]),
            ("2026-é1", &["not a partition"]),
            ("key=", &["key is empty"]),
            ("key=a/b", &["'/'"]),
            ("key=@2026-11-29T13:05:00Z", &["key is empty"]),
            ("key=db1@2026-13-29T13:05:00Z", &["month 13"]),
            (
                "key=db1@2026-11-29T13:60:00Z",
                &["minute 60 is out of range (0..=59)"],
            ),
            ("key=db1@2026-11-29T13:00:60.000Z", &["second 60"]),
        ];
        for (i, (text, words)) in cases.iter().enumerate() {
            let got = text.parse::<Partition>();
            let Err(e) = got else {
                panic!("#{i}: {text:?}: got {got:?}, want an error");
            };
            let msg = e.to_string();
            for w in words.iter() {
                assert!(
                    msg.contains(w),
                    "#{i}: {text:?}: message {msg:?} lacks {w:?}"
                );
            }
        }
    }

    /// The window containing an instant, at the edges that calendars get
    /// wrong: leap days, ISO weeks across new year, month ends, hour edges.
    #[test]
    fn of_time_table() {
        use Partitioning::*;
        let cases: &[(Partitioning, u64, Option<&str>)] = &[
            (None, 12_345, Some("none")),
            (Keyed, 12_345, Option::None),
            (Hourly, utc(2026, 11, 29, 13, 0, 0), Some("2026-11-29T13")),
            (
                Hourly,
                utc(2026, 11, 29, 13, 0, 0) - 1,
                Some("2026-11-29T12"),
            ),
            (
                Hourly,
                utc(2026, 11, 29, 13, 59, 59) + 999,
                Some("2026-11-29T13"),
            ),
            (Hourly, 0, Some("1970-01-01T00")),
            (Daily, utc(2024, 2, 29, 0, 0, 0), Some("2024-02-29")),
            (Daily, utc(2024, 2, 29, 23, 59, 59), Some("2024-02-29")),
            (Daily, utc(2024, 3, 1, 0, 0, 0) - 1, Some("2024-02-29")),
            (Daily, utc(2024, 3, 1, 0, 0, 0), Some("2024-03-01")),
            (Daily, INSTANT_MS_END - 1, Some("9999-12-31")),
            (Daily, INSTANT_MS_END, Option::None),
            (Daily, u64::MAX, Option::None),
            (Weekly, utc(2026, 12, 31, 12, 0, 0), Some("2026-W53")),
            (Weekly, utc(2027, 1, 1, 0, 0, 0), Some("2026-W53")),
            (Weekly, utc(2027, 1, 3, 23, 59, 59), Some("2026-W53")),
            (Weekly, utc(2027, 1, 4, 0, 0, 0), Some("2027-W01")),
            (Weekly, utc(2024, 12, 30, 0, 0, 0), Some("2025-W01")),
            (Weekly, utc(2024, 12, 29, 23, 0, 0), Some("2024-W52")),
            (Weekly, utc(2026, 11, 29, 13, 0, 0), Some("2026-W48")),
            (Weekly, utc(2026, 11, 30, 0, 0, 0), Some("2026-W49")),
            (Weekly, utc(2024, 2, 29, 0, 0, 0), Some("2024-W09")),
            (Weekly, 0, Option::None),
            (Weekly, utc(1970, 1, 5, 0, 0, 0) - 1, Option::None),
            (Weekly, utc(1970, 1, 5, 0, 0, 0), Some("1970-W02")),
            (Monthly, utc(2024, 2, 29, 23, 59, 59), Some("2024-02")),
            (Monthly, utc(2024, 3, 1, 0, 0, 0), Some("2024-03")),
            (Monthly, utc(2026, 12, 31, 23, 59, 59), Some("2026-12")),
            (Monthly, utc(2027, 1, 1, 0, 0, 0), Some("2027-01")),
            (Monthly, utc(2026, 4, 30, 12, 0, 0), Some("2026-04")),
            (Monthly, 0, Some("1970-01")),
        ];
        for (i, (kind, ms, want)) in cases.iter().enumerate() {
            let got = Partition::of_time(*kind, *ms, Zone::UTC).map(|p| p.to_string());
            assert_eq!(
                got.as_deref(),
                *want,
                "#{i}: {kind:?} at {ms}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn next_and_prev_table() {
        let cases: &[(&str, Option<&str>, Option<&str>)] = &[
            (
                "2026-12-31T23",
                Some("2027-01-01T00"),
                Some("2026-12-31T22"),
            ),
            ("2024-02-28", Some("2024-02-29"), Some("2024-02-27")),
            ("2024-02-29", Some("2024-03-01"), Some("2024-02-28")),
            ("2026-W52", Some("2026-W53"), Some("2026-W51")),
            ("2026-W53", Some("2027-W01"), Some("2026-W52")),
            ("2026-12", Some("2027-01"), Some("2026-11")),
            ("2026-03", Some("2026-04"), Some("2026-02")),
            ("1970-01-01T00", Some("1970-01-01T01"), None),
            ("1970-01", Some("1970-02"), None),
            ("1970-W02", Some("1970-W03"), None),
            ("9999-12-31T23", None, Some("9999-12-31T22")),
            ("9999-12", None, Some("9999-11")),
            ("9999-W52", None, Some("9999-W51")),
            ("none", None, None),
            ("key=db1", None, None),
        ];
        for (i, (text, next, prev)) in cases.iter().enumerate() {
            let part = p(text);
            let got = (
                part.next(Zone::UTC).map(|p| p.to_string()),
                part.prev(Zone::UTC).map(|p| p.to_string()),
            );
            let want = (next.map(String::from), prev.map(String::from));
            assert_eq!(
                got, want,
                "#{i}: {text}: (next, prev) got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn windows_table() {
        use Partitioning::*;
        // (partitioning, range, count_max, windows or words of the error)
        type Row = (
            Partitioning,
            &'static str,
            usize,
            Result<&'static [&'static str], &'static str>,
        );
        let cases: &[Row] = &[
            (
                Daily,
                "2024-02-27..2024-03-01",
                10,
                Ok(&["2024-02-27", "2024-02-28", "2024-02-29", "2024-03-01"]),
            ),
            (Daily, "2026-11-29..2026-11-29", 1, Ok(&["2026-11-29"])),
            (
                Hourly,
                "2026-12-31T22..2027-01-01T01",
                4,
                Ok(&[
                    "2026-12-31T22",
                    "2026-12-31T23",
                    "2027-01-01T00",
                    "2027-01-01T01",
                ]),
            ),
            (
                Weekly,
                "2026-W52..2027-W02",
                100,
                Ok(&["2026-W52", "2026-W53", "2027-W01", "2027-W02"]),
            ),
            (
                Monthly,
                "2026-11..2027-02",
                4,
                Ok(&["2026-11", "2026-12", "2027-01", "2027-02"]),
            ),
            (
                Monthly,
                "2026-11..2027-02",
                3,
                Err("holds 4 windows, over the limit of 3"),
            ),
            (
                Hourly,
                "1970-01-01T00..9999-12-31T23",
                1_000,
                Err("holds 70389528 windows, over the limit of 1000"),
            ),
            (
                Daily,
                "2026-11-30..2026-11-29",
                10,
                Err("ends before it starts"),
            ),
            (
                Hourly,
                "2026-11-29..2026-11-30",
                10,
                Err("partition 2026-11-29 is daily, but the range is of hourly partitions"),
            ),
        ];
        for (i, (kind, range, count_max, want)) in cases.iter().enumerate() {
            let got = range
                .parse::<PartitionRange>()
                .and_then(|r| r.windows(*kind, *count_max, Zone::UTC))
                .map(|ws| ws.iter().map(|w| w.to_string()).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            match (want, &got) {
                (Ok(want), Ok(got)) => assert_eq!(got, want, "#{i}: {kind:?} {range}"),
                (Err(words), Err(msg)) => assert!(
                    msg.contains(words),
                    "#{i}: {range}: {msg:?} lacks {words:?}"
                ),
                _ => panic!("#{i}: {kind:?} {range} max {count_max}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn range_parse_errors() {
        let cases: &[(&str, &str)] = &[
            ("2026-11-29", "expected FROM..TO"),
            ("2026-11-29...2026-11-30", "not a partition"),
            ("none..none", "is not a time window"),
            ("key=a..key=b", "is not a time window"),
            (
                "2026-11..2026-11-30",
                "is daily, but the range is of monthly",
            ),
            ("2026-11-29..2026-13-01", "month 13"),
        ];
        for (i, (text, words)) in cases.iter().enumerate() {
            let got = text.parse::<PartitionRange>();
            let msg = got.as_ref().map_err(|e| e.to_string());
            assert!(
                matches!(&msg, Err(m) if m.contains(words)),
                "#{i}: {text:?}: got {got:?}, want {words:?}"
            );
        }
        let r: PartitionRange = "2026-W01..2026-W10".parse().unwrap();
        assert_eq!(r.to_string(), "2026-W01..2026-W10");
    }

    #[test]
    fn windows_refuse_other_partitions() {
        let day = p("2026-11-29");
        let e = Partition::windows(Partitioning::Daily, &Partition::NONE, &day, 10, Zone::UTC)
            .unwrap_err();
        assert!(e.to_string().contains("none is not a time window"), "{e}");
        let key = p("key=db1");
        let e = Partition::windows(Partitioning::Keyed, &key, &key, 10, Zone::UTC).unwrap_err();
        assert!(matches!(e, PartitionError::NotTimeWindow { .. }), "{e}");
    }

    #[test]
    fn order_is_chronological_within_a_kind() {
        let mut ws = vec![p("2027-01"), p("2026-12"), p("2026-02")];
        ws.sort();
        assert_eq!(ws, vec![p("2026-02"), p("2026-12"), p("2027-01")]);
    }

    fn time_kind() -> impl Strategy<Value = Partitioning> {
        prop_oneof![
            Just(Partitioning::Hourly),
            Just(Partitioning::Daily),
            Just(Partitioning::Weekly),
            Just(Partitioning::Monthly),
        ]
    }

    fn any_partition() -> impl Strategy<Value = Partition> {
        prop_oneof![
            Just(Partition::NONE),
            (time_kind(), 0..INSTANT_MS_END).prop_filter_map("before 1970-W02", |(k, ms)| {
                Partition::of_time(k, ms, Zone::UTC)
            }),
            "[^/\\p{Cc}]{1,40}".prop_filter_map("key ends in an instant", |k| Partition::keyed(
                Key::new(k).ok()?
            )
            .ok()),
            ("[^/\\p{Cc}]{1,40}", 0..INSTANT_MS_END).prop_map(|(k, ms)| Partition::keyed_at(
                Key::new(k).unwrap(),
                ms
            )
            .unwrap()),
            // Keys made of the characters the grammar gives meaning to.
            ("[@0-9:TZ.=-]{1,30}", 0..INSTANT_MS_END).prop_map(|(k, ms)| Partition::keyed_at(
                Key::new(k).unwrap(),
                ms
            )
            .unwrap()),
        ]
    }

    proptest! {
        #[test]
        fn parse_never_panics(s in ".*") {
            let _ = s.parse::<Partition>().map(|p| p.to_string());
            let _ = s.parse::<PartitionRange>();
        }

        #[test]
        fn parse_of_near_misses_never_panics(s in "(key=)?[0-9Wé@T:.Z-]{0,30}") {
            if let Ok(part) = s.parse::<Partition>() {
                prop_assert_eq!(part.to_string().parse::<Partition>().unwrap(), part);
            }
        }

        #[test]
        fn display_parse_round_trips(part in any_partition()) {
            let text = part.to_string();
            let back: Partition = text.parse().map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
            prop_assert_eq!(back, part);
        }

        #[test]
        fn window_contains_its_instants(kind in time_kind(), ms in 0..INSTANT_MS_END) {
            if let Some(w) = Partition::of_time(kind, ms, Zone::UTC) {
                let (start, end) = (w.start_ms(Zone::UTC).unwrap(), w.end_ms(Zone::UTC).unwrap());
                prop_assert!(start <= ms && ms < end, "{} = [{}, {}) lacks {}", w, start, end, ms);
                prop_assert_eq!(Partition::of_time(kind, start, Zone::UTC), Some(w.clone()));
                if let Some(next) = w.next(Zone::UTC) {
                    prop_assert_eq!(next.start_ms(Zone::UTC), Some(end));
                    prop_assert_eq!(next.prev(Zone::UTC), Some(w.clone()));
                }
            }
        }
    }
}
