//! Assets: named data a node produces (`produces = ["sales.daily"]`) and
//! graphs start on (`[trigger] assets = ["sales.daily"]`), across graphs
//! (Dagster's asset sensors, swale's asset nodes).
//!
//! When a producing node succeeds for a partition, that is a
//! *materialization* of each asset it produces; every graph that triggers
//! on the asset starts the run of the partition the materialization
//! falls in ([`consumer_partitions`]): the same partition when both
//! graphs partition alike, the window that contains it when the consumer
//! has coarser windows (an hour of `hourly` starts its day of `daily`),
//! every window it covers when the consumer's are finer (a day starts its
//! 24 hours, at most [`CONSUMER_PARTITIONS_MAX`]), the window that holds a
//! keyed run's due instant for a time-partitioned consumer, and the one
//! run of an unpartitioned consumer. A partition with no instant (an
//! unpartitioned producer, a key without its due instant) maps to no time
//! window and a time window maps to no key: such a materialization starts
//! nothing in that consumer, and says why.
//!
//! A run exists at most once per (graph, partition), so a materialization
//! delivered twice (after a crash) starts nothing the second time, and a
//! later materialization of a partition whose consumer run exists starts
//! nothing either: rerun the consumer for new data.

use crate::partition::{Partition, Partitioning};
use crate::zone::Zone;

/// The most consumer runs one materialization starts (a month of a
/// monthly producer in an hourly consumer is 744).
pub const CONSUMER_PARTITIONS_MAX: usize = 744;
/// The most assets one node produces, and one graph triggers on.
pub const ASSETS_MAX: usize = 64;

/// Why a materialization starts nothing in a consumer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    /// The producer's partition has no instant to place in a time window.
    #[error("partition {partition} of the producer has no instant, so it falls in no {consumer:?} window")]
    NoInstant {
        /// The producer's partition.
        partition: String,
        /// The consumer's partitioning.
        consumer: Partitioning,
    },
    /// A keyed consumer needs a key, which the producer's partition lacks.
    #[error("partition {partition} of the producer has no key for a keyed consumer")]
    NoKey {
        /// The producer's partition.
        partition: String,
    },
    /// More windows than [`CONSUMER_PARTITIONS_MAX`].
    #[error("partition {partition} covers {count} {consumer:?} windows, over the limit of {max}")]
    TooMany {
        /// The producer's partition.
        partition: String,
        /// The consumer's partitioning.
        consumer: Partitioning,
        /// The windows it covers.
        count: usize,
        /// The limit.
        max: usize,
    },
}

/// The partitions of a consumer partitioned by `consumer` in
/// `consumer_zone` that the materialization of `producer` (a partition of a
/// graph in `producer_zone`) starts, oldest first: the consumer's windows
/// that overlap the producer's, compared as instants.
pub fn consumer_partitions(
    producer: &Partition,
    producer_zone: Zone,
    consumer: Partitioning,
    consumer_zone: Zone,
) -> Result<Vec<Partition>, MappingError> {
    let no_instant = || MappingError::NoInstant {
        partition: producer.to_string(),
        consumer,
    };
    match consumer {
        Partitioning::None => Ok(vec![Partition::NONE]),
        Partitioning::Keyed => match producer.partitioning() {
            Partitioning::Keyed => Ok(vec![producer.clone()]),
            _ => Err(MappingError::NoKey {
                partition: producer.to_string(),
            }),
        },
        time => {
            let z = consumer_zone;
            let (start, end) = match (
                producer.start_ms(producer_zone),
                producer.end_ms(producer_zone),
                producer.at_ms(),
            ) {
                (Some(s), Some(e), _) => (s, e),
                (_, _, Some(at)) => (at, at.saturating_add(1)),
                _ => return Err(no_instant()),
            };
            let first = Partition::of_time(time, start, z).ok_or_else(no_instant)?;
            let mut out = vec![first];
            loop {
                let last = out.last().expect("one window at least");
                let Some(next) = last.next(z) else { break };
                match next.start_ms(z) {
                    Some(s) if s < end => {}
                    _ => break,
                }
                if out.len() == CONSUMER_PARTITIONS_MAX {
                    // Count what a full walk would give, for the message.
                    let mut count = out.len();
                    let mut w = next;
                    while w.start_ms(z).is_some_and(|s| s < end) {
                        count += 1;
                        match w.next(z) {
                            Some(n) => w = n,
                            None => break,
                        }
                    }
                    return Err(MappingError::TooMany {
                        partition: producer.to_string(),
                        consumer,
                        count,
                        max: CONSUMER_PARTITIONS_MAX,
                    });
                }
                out.push(next);
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Partition {
        s.parse().unwrap()
    }

    /// One row a case: the producer's partition, the consumer's
    /// partitioning, the partitions started (or the error's words).
    #[test]
    fn consumer_partitions_table() {
        use Partitioning::*;
        type Row<'a> = (&'a str, Partitioning, Result<&'a [&'a str], &'a str>);
        let cases: &[Row] = &[
            ("2026-11-29", Daily, Ok(&["2026-11-29"])),
            ("2026-11-29T05", Daily, Ok(&["2026-11-29"])),
            ("2026-11-29T05", Hourly, Ok(&["2026-11-29T05"])),
            ("2026-11-29", Monthly, Ok(&["2026-11"])),
            ("2026-11-29", Weekly, Ok(&["2026-W48"])),
            (
                "2026-11",
                Weekly,
                Ok(&[
                    "2026-W44", "2026-W45", "2026-W46", "2026-W47", "2026-W48", "2026-W49",
                ]),
            ),
            ("2026-11-29", None, Ok(&["none"])),
            ("none", None, Ok(&["none"])),
            ("none", Daily, Err("has no instant")),
            ("key=db1", Daily, Err("has no instant")),
            (
                "key=db1@2026-11-29T10:00:00.000Z",
                Daily,
                Ok(&["2026-11-29"]),
            ),
            (
                "key=db1@2026-11-29T10:00:00.000Z",
                Keyed,
                Ok(&["key=db1@2026-11-29T10:00:00.000Z"]),
            ),
            ("key=db1@2026-11-29T10:00:00.000Z", None, Ok(&["none"])),
            ("2026-11-29", Keyed, Err("has no key")),
        ];
        for (i, (from, to, want)) in cases.iter().enumerate() {
            let got = consumer_partitions(&p(from), Zone::UTC, *to, Zone::UTC)
                .map(|v| v.iter().map(ToString::to_string).collect::<Vec<_>>())
                .map_err(|e| e.to_string());
            match want {
                Ok(w) => assert_eq!(
                    got,
                    Ok(w.iter().map(|s| s.to_string()).collect()),
                    "#{i}: {from} into {to:?}"
                ),
                Err(w) => assert!(
                    got.as_ref().is_err_and(|e| e.contains(w)),
                    "#{i}: {from} into {to:?}: got {got:?}, want {w:?}"
                ),
            }
        }
        // A day covers 24 hours; a month of hours is within the limit, a
        // longer span is not possible from one window.
        assert_eq!(
            consumer_partitions(&p("2026-11-29"), Zone::UTC, Hourly, Zone::UTC)
                .unwrap()
                .len(),
            24
        );
        assert_eq!(
            consumer_partitions(&p("2026-12"), Zone::UTC, Hourly, Zone::UTC)
                .unwrap()
                .len(),
            744
        );
    }
}
