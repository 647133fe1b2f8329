//! The snapshot's key index: every ticket's key → its id, as a few
//! immutable sorted runs (finite state transducers, the `fst` crate)
//! instead of one sled entry per key.
//!
//! An entry per key cost each ticket that lived through a snapshot two
//! sled writes, one when it came and one when it left: with a backlog,
//! most of a snapshot's writes and a drain at 0.7x of the same drain
//! without them. A run holds the key changes of one snapshot, sorted, as
//! one value (`K` + run number, big-endian), a removed key marked with
//! [`TOMBSTONE`]; a lookup asks the runs newest first and the first that
//! knows the key answers. Runs are merged as they pile up: the newest are
//! merged while together they are at least half the size of the next older
//! one ([`merge_count`]), so a key is rewritten a logarithmic number of
//! times and there are few runs; a merge that takes in the oldest run
//! drops the tombstones, and a snapshot with no ticket left drops every
//! run. The runs change in the snapshot's own atomic batch, so they are
//! exactly the keys of the snapshot's tickets whenever its meta is; the
//! store keeps them decoded in memory (loaded at open), a few bytes a key.

use std::collections::BTreeMap;

use fst::{Map, MapBuilder, Streamer};
use weir_core::queue::TicketId;

/// The prefix of the keys of runs.
pub(crate) const RUN_PREFIX: u8 = b'K';
/// The value of a key a run removes (no ticket id is this large: ids are
/// counted up from zero).
pub(crate) const TOMBSTONE: u64 = u64::MAX;
/// Runs at most: past this many, older ones are merged in whatever their
/// sizes, so a lookup asks at most this many.
pub(crate) const RUNS_MAX: usize = 12;

/// One run, as stored.
pub(crate) struct KeyRun {
    pub(super) id: u64,
    pub(super) map: Map<Vec<u8>>,
}

/// The snapshot's runs, oldest first.
#[derive(Default)]
pub(crate) struct KeyRuns {
    pub(super) runs: Vec<KeyRun>,
}

/// What one snapshot does to the runs: the runs it writes and the ones it
/// removes, applied to the store's batch first and to memory once the
/// batch has landed.
pub(crate) struct RunChange {
    written: Vec<(u64, Vec<u8>)>,
    removed: Vec<u64>,
}

pub(crate) fn run_key(id: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = RUN_PREFIX;
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

/// How many of the newest runs to merge into one, given the entries of
/// each run oldest first (the new run last): 0 for none, else at least 2.
/// The newest take in the next older one while together they hold at
/// least half as many entries as it, or while there would be more than
/// `runs_max` runs.
pub(crate) fn merge_count(entries: &[u64], runs_max: usize) -> usize {
    let len = entries.len();
    if len < 2 {
        return 0;
    }
    let mut n = 1;
    let mut total = entries[len - 1];
    while n < len {
        let older = entries[len - 1 - n];
        if total.saturating_mul(2) >= older || len - n >= runs_max {
            total = total.saturating_add(older);
            n += 1;
        } else {
            break;
        }
    }
    if n >= 2 {
        n
    } else {
        0
    }
}

/// A run being written from sorted keys. With `bottom` (nothing older
/// remains for them to hide) its tombstones are dropped.
struct RunBuilder {
    builder: MapBuilder<Vec<u8>>,
    entries: u64,
    bottom: bool,
}

impl RunBuilder {
    fn new(bottom: bool) -> Self {
        RunBuilder {
            builder: MapBuilder::memory(),
            entries: 0,
            bottom,
        }
    }

    fn push(&mut self, key: &[u8], value: u64) -> Result<(), fst::Error> {
        if self.bottom && value == TOMBSTONE {
            return Ok(());
        }
        self.entries += 1;
        self.builder.insert(key, value)
    }

    /// The run's bytes; `None` when it holds nothing.
    fn finish(self) -> Result<Option<Vec<u8>>, fst::Error> {
        if self.entries == 0 {
            return Ok(None);
        }
        self.builder.into_inner().map(Some)
    }
}

/// Builds a run from sorted (key, value) pairs.
fn build<'k>(
    pairs: impl IntoIterator<Item = (&'k [u8], u64)>,
    bottom: bool,
) -> Result<Option<Vec<u8>>, fst::Error> {
    let mut run = RunBuilder::new(bottom);
    for (k, v) in pairs {
        run.push(k, v)?;
    }
    run.finish()
}

/// Merges `runs` (oldest first) into one run: for a key in several, the
/// newest value.
fn merge(runs: &[&Map<Vec<u8>>], bottom: bool) -> Result<Option<Vec<u8>>, fst::Error> {
    let mut op = fst::map::OpBuilder::new();
    for m in runs {
        op = op.add(m.stream());
    }
    let mut union = op.union();
    let mut run = RunBuilder::new(bottom);
    while let Some((key, values)) = union.next() {
        let newest = values
            .iter()
            .max_by_key(|v| v.index)
            .expect("a key of the union is in some run")
            .value;
        run.push(key, newest)?;
    }
    run.finish()
}

/// A run of sorted, unique (key, id) pairs, as a map (`None` for no
/// pairs): the index build's, merged at its end by [`RunChange::merged`].
pub(crate) fn sorted_run<'k>(
    pairs: impl IntoIterator<Item = (&'k [u8], u64)>,
) -> Result<Option<Map<Vec<u8>>>, fst::Error> {
    build(pairs, true)?.map(Map::new).transpose()
}

impl KeyRuns {
    /// The id of the ticket holding `key`, if any.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<TicketId> {
        for run in self.runs.iter().rev() {
            if let Some(v) = run.map.get(key) {
                return (v != TOMBSTONE).then_some(v);
            }
        }
        None
    }

    /// Runs held.
    pub(crate) fn len(&self) -> usize {
        self.runs.len()
    }

    /// Entries over all runs (tombstones included).
    pub(crate) fn entries(&self) -> u64 {
        self.runs.iter().map(|r| r.map.len() as u64).sum()
    }

    fn next_id(&self) -> u64 {
        self.runs.last().map_or(0, |r| r.id + 1)
    }

    /// Plans a snapshot's change: `changes` maps each key whose ticket
    /// changed to its new id, or to [`TOMBSTONE`] when it has none;
    /// `empty` says the snapshot holds no ticket (every run can go).
    pub(crate) fn plan(
        &self,
        changes: &BTreeMap<Vec<u8>, u64>,
        empty: bool,
    ) -> Result<RunChange, fst::Error> {
        if empty {
            return Ok(RunChange {
                written: Vec::new(),
                removed: self.runs.iter().map(|r| r.id).collect(),
            });
        }
        if changes.is_empty() {
            return Ok(RunChange {
                written: Vec::new(),
                removed: Vec::new(),
            });
        }
        let id = self.next_id();
        let pairs = changes.iter().map(|(k, &v)| (k.as_slice(), v));
        let mut entries: Vec<u64> = self.runs.iter().map(|r| r.map.len() as u64).collect();
        entries.push(changes.len() as u64);
        let n = merge_count(&entries, RUNS_MAX);
        if n == 0 {
            // With nothing older, a lone run's tombstones hide nothing.
            let written = build(pairs, self.runs.is_empty())?;
            return Ok(RunChange {
                written: written.map(|b| vec![(id, b)]).unwrap_or_default(),
                removed: Vec::new(),
            });
        }
        let fresh = build(pairs, false)?
            .expect("changes are not empty, and none is dropped above the bottom");
        let fresh = Map::new(fresh)?;
        let older = &self.runs[self.runs.len() + 1 - n..];
        let mut maps: Vec<&Map<Vec<u8>>> = older.iter().map(|r| &r.map).collect();
        maps.push(&fresh);
        let merged = merge(&maps, n == entries.len())?;
        Ok(RunChange {
            written: merged.map(|b| vec![(id, b)]).unwrap_or_default(),
            removed: older.iter().map(|r| r.id).collect(),
        })
    }

    /// Installs a change whose batch has landed.
    pub(crate) fn install(&mut self, change: RunChange) -> Result<(), fst::Error> {
        self.runs.retain(|r| !change.removed.contains(&r.id));
        for (id, bytes) in change.written {
            debug_assert!(
                self.runs.last().is_none_or(|r| r.id < id),
                "runs are installed in order"
            );
            self.runs.push(KeyRun {
                id,
                map: Map::new(bytes)?,
            });
        }
        Ok(())
    }
}

impl RunChange {
    /// Writes the change into a snapshot batch.
    pub(crate) fn write(&self, batch: &mut super::WriteBatch) {
        for &id in &self.removed {
            batch.remove(run_key(id));
        }
        for (id, bytes) in &self.written {
            batch.insert(run_key(*id), bytes.as_slice());
        }
    }

    /// A change writing `runs` (of disjoint keys, no tombstones) merged
    /// into one, and removing the runs `removed`: the index build's.
    pub(crate) fn merged(
        id: u64,
        runs: &[Map<Vec<u8>>],
        removed: Vec<u64>,
    ) -> Result<RunChange, fst::Error> {
        let maps: Vec<&Map<Vec<u8>>> = runs.iter().collect();
        let written = merge(&maps, true)?;
        Ok(RunChange {
            written: written.map(|b| vec![(id, b)]).unwrap_or_default(),
            removed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(pairs: &[(&str, u64)]) -> BTreeMap<Vec<u8>, u64> {
        pairs
            .iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), *v))
            .collect()
    }

    fn apply(runs: &mut KeyRuns, pairs: &[(&str, u64)], empty: bool) {
        let change = runs.plan(&changes(pairs), empty).unwrap();
        runs.install(change).unwrap();
    }

    #[test]
    fn the_newest_run_that_knows_a_key_answers() {
        let mut runs = KeyRuns::default();
        apply(&mut runs, &[("a", 1), ("b", 2)], false);
        apply(&mut runs, &[("a", TOMBSTONE), ("c", 3)], false);
        apply(&mut runs, &[("a", 7)], false);
        assert_eq!(runs.lookup(b"a"), Some(7));
        assert_eq!(runs.lookup(b"b"), Some(2));
        assert_eq!(runs.lookup(b"c"), Some(3));
        assert_eq!(runs.lookup(b"d"), None);
        apply(&mut runs, &[("b", TOMBSTONE)], false);
        assert_eq!(runs.lookup(b"b"), None);
    }

    #[test]
    fn merges_keep_runs_few_and_drop_tombstones_at_the_bottom() {
        let mut runs = KeyRuns::default();
        // A thousand snapshots of 100 new keys each, then each key removed.
        for s in 0..1_000u64 {
            let keys: Vec<(String, u64)> = (0..100)
                .map(|i| (format!("k{s:04}-{i:03}"), s * 100 + i))
                .collect();
            let pairs: Vec<(&str, u64)> = keys.iter().map(|(k, v)| (k.as_str(), *v)).collect();
            apply(&mut runs, &pairs, false);
            assert!(runs.len() <= RUNS_MAX, "{} runs after {s}", runs.len());
        }
        assert_eq!(runs.lookup(b"k0500-050"), Some(50_050));
        for s in 0..1_000u64 {
            let keys: Vec<String> = (0..100).map(|i| format!("k{s:04}-{i:03}")).collect();
            let pairs: Vec<(&str, u64)> = keys.iter().map(|k| (k.as_str(), TOMBSTONE)).collect();
            apply(&mut runs, &pairs, false);
            assert!(runs.len() <= RUNS_MAX);
            assert_eq!(runs.lookup(keys[7].as_bytes()), None);
        }
        // Every key is gone; merges that reached the bottom dropped their
        // tombstones, so far fewer entries remain than were written.
        assert!(runs.entries() < 100_000, "{} entries", runs.entries());
        apply(&mut runs, &[], true);
        assert_eq!(runs.len(), 0);
    }

    #[test]
    fn the_merge_count_follows_sizes_and_the_cap() {
        assert_eq!(merge_count(&[], 12), 0);
        assert_eq!(merge_count(&[5], 12), 0);
        // A small new run beside a large one stays apart.
        assert_eq!(merge_count(&[1_000, 10], 12), 0);
        // Two equal runs merge, and their sum takes in the next.
        assert_eq!(merge_count(&[300, 100, 100], 12), 3);
        assert_eq!(merge_count(&[1_000, 100, 100], 12), 2);
        // The cap merges whatever the sizes.
        assert_eq!(merge_count(&[1_000, 900, 250, 10], 3), 2);
    }
}
