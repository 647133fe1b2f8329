//! Key schedules of a keyed graph, in memory and in the store.
//!
//! Every key of the inventory has a record `sched/<graph>/<key>`: glazed's
//! schedule ([`KeySchedule`]) plus the due instant of the run its lease is
//! for, since a signal during a run moves `due_at_ms` and the run's
//! partition (`key=<key>@<due instant>`) must still be found. Every change
//! goes through weir-core's pure functions ([`schedule`]); this module keeps
//! the records in a map, keeps an index of when each key can next be
//! claimed, and collects the records that changed for the actor to write.
//!
//! A key can be claimed at its due instant, or, while a lease is held, at
//! the later of its due instant and the lease's end (an expired lease is
//! presumed lost and the key may be claimed again; its partition is the
//! same while `due_at_ms` is, so the start is a no-op).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use weir_core::keyed::KeyedSpec;
use weir_core::names::Key;
use weir_core::partition::Partition;
use weir_core::schedule::{self, Claim, DueReason, KeySchedule, Signal, Update};

// What the trigger's calls answer with lives in `msg`; the old paths stay.
pub use crate::msg::trigger::{InventoryChange, KeyScheduleView};

/// The prefix of a graph's key schedules.
/// Schedules to write (key, encoded record) and keys whose schedule goes.
pub type Changes = (Vec<(Key, Vec<u8>)>, Vec<Key>);

pub fn sched_prefix(graph: &str) -> String {
    format!("sched/{graph}/")
}

/// The key of one key's schedule.
pub fn sched_key(graph: &str, key: &Key) -> String {
    format!("sched/{graph}/{key}")
}

/// The key of a graph's inventory record.
pub fn inventory_key(graph: &str) -> String {
    format!("inv/{graph}")
}

/// What the last inventory load of a graph found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryRecord {
    /// When it loaded.
    pub loaded_at_ms: u64,
    /// Keys it listed.
    pub keys: u64,
}

/// A key's stored record.
///
/// Stored in a compact named form ([`StoredKey`]): short field names and
/// no empty fields, since a graph may hold 100,000 of them and their bytes
/// are what the store writes and caches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "StoredKey", from = "StoredKey")]
pub struct KeyRecord {
    /// glazed's schedule.
    pub schedule: KeySchedule,
    /// The due instant of the run the lease is for (its partition is
    /// `key=<key>@<run_at_ms>`); `None` without a lease.
    #[serde(default)]
    pub run_at_ms: Option<u64>,
    /// The lease is a prepared claim: taken ahead of its instant (the
    /// claim a claim at that instant would make), its run's first tickets
    /// waiting in the queue for it. Until the instant the run can be
    /// withdrawn, and signals see the key as not running.
    #[serde(default)]
    pub prepared: bool,
    /// For a prepared claim: the last run's claim instant before it, which
    /// the record shows again if the claim is withdrawn.
    #[serde(default)]
    pub prior_started_ms: Option<u64>,
}

/// The stored form of a [`KeyRecord`]: named (fields may be added with a
/// default), with absent values left out.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredKey {
    k: Key,
    due: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sched: Option<u64>,
    why: DueReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    started: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    failed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    fails: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run_at: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    prep: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prior: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl From<KeyRecord> for StoredKey {
    fn from(r: KeyRecord) -> Self {
        let s = r.schedule;
        StoredKey {
            k: s.key,
            due: s.due_at_ms,
            sched: s.scheduled_at_ms,
            why: s.due_reason,
            owner: s.lease_owner,
            until: s.lease_until_ms,
            started: s.last_started_at_ms,
            finished: s.last_finished_at_ms,
            failed: s.last_failed,
            error: s.last_error,
            fails: s.consecutive_failures,
            window: s.signal_window_started_at_ms,
            run_at: r.run_at_ms,
            prep: r.prepared,
            prior: r.prior_started_ms,
        }
    }
}

impl From<StoredKey> for KeyRecord {
    fn from(s: StoredKey) -> Self {
        KeyRecord {
            schedule: KeySchedule {
                key: s.k,
                due_at_ms: s.due,
                scheduled_at_ms: s.sched,
                due_reason: s.why,
                lease_owner: s.owner,
                lease_until_ms: s.until,
                last_started_at_ms: s.started,
                last_finished_at_ms: s.finished,
                last_failed: s.failed,
                last_error: s.error,
                consecutive_failures: s.fails,
                signal_window_started_at_ms: s.window,
            },
            run_at_ms: s.run_at,
            prepared: s.prep,
            prior_started_ms: s.prior,
        }
    }
}

impl KeyRecord {
    /// A record without a prepared claim.
    pub fn plain(schedule: KeySchedule, run_at_ms: Option<u64>) -> Self {
        KeyRecord {
            schedule,
            run_at_ms,
            prepared: false,
            prior_started_ms: None,
        }
    }

    /// The instant a prepared claim waits for, while it is still ahead of
    /// `now_ms` (the run can be withdrawn).
    pub fn waiting_at(&self, now_ms: u64) -> Option<u64> {
        if !self.prepared {
            return None;
        }
        self.schedule.last_started_at_ms.filter(|at| *at > now_ms)
    }

    /// The record as it was before its prepared claim: no lease, the last
    /// claim instant before it.
    fn unclaimed(&self) -> KeySchedule {
        let mut s = self.schedule.clone();
        s.lease_owner = None;
        s.lease_until_ms = None;
        s.last_started_at_ms = self.prior_started_ms;
        s
    }

    /// The partition of the run the lease is for.
    pub fn run_partition(&self) -> Option<Partition> {
        self.run_at_ms
            .and_then(|at| Partition::keyed_at(self.schedule.key.clone(), at).ok())
    }
}

impl From<&KeyRecord> for KeyScheduleView {
    fn from(r: &KeyRecord) -> Self {
        let s = &r.schedule;
        KeyScheduleView {
            key: s.key.to_string(),
            due_at_ms: s.due_at_ms,
            due_reason: match &s.due_reason {
                DueReason::Inventory => "inventory".to_string(),
                DueReason::Schedule => "schedule".to_string(),
                DueReason::Retry => "retry".to_string(),
                DueReason::Signal { source } => format!("signal:{source}"),
            },
            lease_owner: s.lease_owner.clone(),
            lease_until_ms: s.lease_until_ms,
            running: r.run_partition().map(|p| p.to_string()),
            last_started_at_ms: s.last_started_at_ms,
            last_finished_at_ms: s.last_finished_at_ms,
            last_error: s.last_error.clone(),
            consecutive_failures: s.consecutive_failures,
            signal_window_started_at_ms: s.signal_window_started_at_ms,
        }
    }
}

/// The key schedules of one keyed graph.
pub struct Keyed {
    /// The graph's keyed settings.
    pub spec: KeyedSpec,
    records: HashMap<Key, KeyRecord>,
    /// (claimable at, key) of every record.
    index: BTreeSet<(u64, Key)>,
    /// Keys whose record changed and is not written yet.
    dirty: BTreeSet<Key>,
    /// Keys whose record is to be deleted.
    deleted: BTreeSet<Key>,
}

/// When a record can next be claimed.
fn claimable_at(s: &KeySchedule) -> u64 {
    match s.lease_until_ms {
        Some(until) if s.lease_owner.is_some() => until.max(s.due_at_ms),
        _ => s.due_at_ms,
    }
}

impl Keyed {
    /// Schedules from stored records.
    pub fn new(spec: KeyedSpec, records: Vec<KeyRecord>) -> Self {
        let mut k = Keyed {
            spec,
            records: HashMap::with_capacity(records.len()),
            index: BTreeSet::new(),
            dirty: BTreeSet::new(),
            deleted: BTreeSet::new(),
        };
        for r in records {
            k.index
                .insert((claimable_at(&r.schedule), r.schedule.key.clone()));
            k.records.insert(r.schedule.key.clone(), r);
        }
        k
    }

    /// Keys with a schedule.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no key has a schedule.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// A key's record.
    pub fn get(&self, key: &Key) -> Option<&KeyRecord> {
        self.records.get(key)
    }

    /// Every key with a schedule, in key order.
    pub fn keys(&self) -> Vec<Key> {
        let mut keys: Vec<Key> = self.records.keys().cloned().collect();
        keys.sort();
        keys
    }

    /// Every record, by key.
    pub fn views(&self) -> Vec<KeyScheduleView> {
        let sorted: BTreeMap<&Key, &KeyRecord> = self.records.iter().collect();
        sorted.values().map(|r| KeyScheduleView::from(*r)).collect()
    }

    /// Replaces a key's record (and marks it to be written).
    fn put(&mut self, record: KeyRecord) {
        let key = record.schedule.key.clone();
        if let Some(old) = self.records.get(&key) {
            self.index
                .remove(&(claimable_at(&old.schedule), key.clone()));
        }
        self.index
            .insert((claimable_at(&record.schedule), key.clone()));
        self.deleted.remove(&key);
        self.dirty.insert(key.clone());
        self.records.insert(key, record);
    }

    fn remove(&mut self, key: &Key) {
        if let Some(old) = self.records.remove(key) {
            self.index
                .remove(&(claimable_at(&old.schedule), key.clone()));
        }
        self.dirty.remove(key);
        self.deleted.insert(key.clone());
    }

    /// The earliest instant a key can be claimed.
    pub fn next_claimable(&self) -> Option<u64> {
        self.index.first().map(|(at, _)| *at)
    }

    /// Applies a loaded inventory: new keys get a schedule due within the
    /// jitter (`draw` gives one random number per new key); keys no longer
    /// listed lose theirs (a run in progress finishes; its end then finds
    /// no schedule and changes nothing).
    pub fn apply_inventory(
        &mut self,
        keys: Vec<Key>,
        now_ms: u64,
        mut draw: impl FnMut() -> u64,
    ) -> InventoryChange {
        let listed: BTreeSet<Key> = keys.into_iter().collect();
        let gone: Vec<Key> = self
            .records
            .keys()
            .filter(|k| !listed.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            self.remove(k);
        }
        let mut added = 0;
        for k in &listed {
            if self.records.contains_key(k) {
                continue;
            }
            let s = schedule::discovered(k.clone(), now_ms, &self.spec.schedule, draw());
            self.put(KeyRecord::plain(s, None));
            added += 1;
        }
        InventoryChange {
            keys: listed.len(),
            added,
            removed: gone.len(),
        }
    }

    /// Leases at most `max` keys due at `now_ms` to `owner`; returns the
    /// partitions of their runs.
    pub fn claim_batch(&mut self, owner: &str, now_ms: u64, max: usize) -> Vec<Partition> {
        self.claim_until(owner, now_ms, now_ms, max)
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    /// Leases at most `max` keys that can be claimed by `until_ms` to
    /// `owner`, in the order they can: a key due at `now_ms` is claimed
    /// now; one due later is *prepared*, given the very claim a claim at
    /// its instant would make, to run at that instant. Returns each run's
    /// partition and the instant it may first start (at most `now_ms` for
    /// a claim of now).
    pub fn claim_until(
        &mut self,
        owner: &str,
        now_ms: u64,
        until_ms: u64,
        max: usize,
    ) -> Vec<(Partition, u64)> {
        let due: Vec<(u64, Key)> = self
            .index
            .iter()
            .take_while(|(at, _)| *at <= until_ms)
            .take(max)
            .cloned()
            .collect();
        let mut out = Vec::with_capacity(due.len());
        for (claimable, key) in due {
            let record = self.records.get(&key).expect("indexed keys have records");
            // A claim of now is taken at now; a prepared one at the instant
            // the key can be claimed, so the run is the one that instant
            // would start.
            let at = claimable.max(now_ms);
            match schedule::claim(&record.schedule, owner, at, self.spec.lease_ms) {
                Claim::Claimed(s) => {
                    let due_at = s.due_at_ms;
                    let Ok(p) = Partition::keyed_at(key.clone(), due_at) else {
                        // A due instant past year 9999 cannot name a run.
                        continue;
                    };
                    let prepared = at > now_ms;
                    let prior = record.schedule.last_started_at_ms;
                    self.put(KeyRecord {
                        schedule: s,
                        run_at_ms: Some(due_at),
                        prepared,
                        prior_started_ms: if prepared { prior } else { None },
                    });
                    out.push((p, at));
                }
                // The index said claimable: only an unexpired lease or a
                // future due instant can refuse, and the index orders by
                // both, so neither happens; re-index to be safe.
                Claim::NotDue | Claim::Leased => {
                    let r = record.clone();
                    self.index.remove(&(claimable_at(&r.schedule), key.clone()));
                    self.index
                        .insert((claimable_at(&r.schedule).max(at + 1), key));
                }
            }
        }
        out
    }

    /// The keys whose prepared run still waits for its instant at `now_ms`
    /// (all of them: `None`; or those of `keys`), with that run's
    /// partition.
    pub fn waiting(&self, now_ms: u64, keys: Option<&[Key]>) -> Vec<(Key, Partition)> {
        let of = |r: &KeyRecord| {
            r.waiting_at(now_ms)
                .and(r.run_partition())
                .map(|p| (r.schedule.key.clone(), p))
        };
        match keys {
            None => {
                let mut all: Vec<_> = self.records.values().filter_map(of).collect();
                all.sort();
                all
            }
            Some(keys) => keys
                .iter()
                .filter_map(|k| self.records.get(k).and_then(of))
                .collect(),
        }
    }

    /// The key's prepared run was withdrawn: its record is as it was before
    /// the claim (due at the same instant, so it is claimed or prepared
    /// again unless something moves it). `false` when the key's lease is
    /// not a prepared claim.
    pub fn unprepare(&mut self, key: &Key) -> bool {
        let Some(r) = self.records.get(key).filter(|r| r.prepared) else {
            return false;
        };
        let unclaimed = r.unclaimed();
        self.put(KeyRecord::plain(unclaimed, None));
        true
    }

    /// The key's prepared run was not withdrawn (one of its tickets was
    /// handed out): from now on its lease is a claim like any other.
    pub fn begun(&mut self, key: &Key) {
        if let Some(r) = self.records.get(key).filter(|r| r.prepared) {
            let r = KeyRecord::plain(r.schedule.clone(), r.run_at_ms);
            self.put(r);
        }
    }

    /// The partition of the key's prepared run, when a signal at `now_ms`
    /// would move the run's instant: that run must be withdrawn (or found
    /// begun) before [`Keyed::signal`] applies the signal.
    pub fn signal_moves(&self, key: &Key, signal: &Signal, now_ms: u64) -> Option<Partition> {
        let r = self.records.get(key)?;
        r.waiting_at(now_ms)?;
        let s = schedule::signal(
            Some(&r.unclaimed()),
            key,
            signal,
            now_ms,
            &self.spec.debounce,
        );
        if Some(s.due_at_ms) == r.run_at_ms {
            None
        } else {
            r.run_partition()
        }
    }

    /// Records the end of the run of `key` due at `run_at_ms` (`error` when
    /// it did not complete) and schedules the next. `false` when the key
    /// has no schedule, or its lease is not for that run or not `owner`'s.
    pub fn completed(
        &mut self,
        key: &Key,
        run_at_ms: u64,
        owner: &str,
        finished_at_ms: u64,
        error: Option<&str>,
        draw: u64,
    ) -> bool {
        let Some(record) = self.records.get(key) else {
            return false;
        };
        if record.run_at_ms != Some(run_at_ms) {
            return false;
        }
        match schedule::completed(
            &record.schedule,
            owner,
            finished_at_ms,
            error,
            &self.spec.schedule,
            draw,
        ) {
            Update::Applied(s) => {
                self.put(KeyRecord::plain(s, None));
                true
            }
            Update::NotOwner => false,
        }
    }

    /// Applies a signal (trailing debounce); returns the new record. A key
    /// whose prepared run waits for its instant is not running: the signal
    /// applies to the record as it was before the claim, and must leave its
    /// due instant where it is ([`Keyed::signal_moves`] says when it would
    /// not; the caller withdraws the run first); the claim stays.
    pub fn signal(&mut self, key: &Key, signal: &Signal, now_ms: u64) -> &KeyRecord {
        let current = self.records.get(key);
        let record = match current.filter(|r| r.waiting_at(now_ms).is_some()) {
            Some(r) => {
                let mut s = schedule::signal(
                    Some(&r.unclaimed()),
                    key,
                    signal,
                    now_ms,
                    &self.spec.debounce,
                );
                debug_assert_eq!(
                    Some(s.due_at_ms),
                    r.run_at_ms,
                    "key {key}: a signal moved a prepared run's instant"
                );
                s.lease_owner = r.schedule.lease_owner.clone();
                s.lease_until_ms = r.schedule.lease_until_ms;
                s.last_started_at_ms = r.schedule.last_started_at_ms;
                KeyRecord {
                    schedule: s,
                    ..r.clone()
                }
            }
            None => {
                let s = schedule::signal(
                    current.map(|r| &r.schedule),
                    key,
                    signal,
                    now_ms,
                    &self.spec.debounce,
                );
                let run_at_ms = current.and_then(|r| r.run_at_ms);
                let prepared = current.is_some_and(|r| r.prepared);
                let prior_started_ms = current.and_then(|r| r.prior_started_ms);
                KeyRecord {
                    schedule: s,
                    run_at_ms,
                    prepared,
                    prior_started_ms,
                }
            }
        };
        self.put(record);
        self.records.get(key).expect("just put")
    }

    /// The leased keys of `owner`, with the due instant their run is for
    /// and, for a prepared claim, the instant the run waits for.
    pub fn leased(&self, owner: &str) -> Vec<(Key, u64, Option<u64>)> {
        self.records
            .values()
            .filter(|r| r.schedule.lease_owner.as_deref() == Some(owner))
            .filter_map(|r| {
                let waits = r.schedule.last_started_at_ms.filter(|_| r.prepared);
                r.run_at_ms.map(|at| (r.schedule.key.clone(), at, waits))
            })
            .collect()
    }

    /// Whether any key is leased.
    pub fn any_leased(&self) -> bool {
        self.records
            .values()
            .any(|r| r.schedule.lease_owner.is_some())
    }

    /// The changes not written yet: records to put (encoded by the caller)
    /// and keys to delete. Clears them.
    pub fn take_changes<E>(
        &mut self,
        mut encode: impl FnMut(&KeyRecord) -> Result<Vec<u8>, E>,
    ) -> Result<Changes, E> {
        // Encoded from the map, in key order: no copy of the records, and
        // sled inserts sorted keys fastest.
        let mut puts = Vec::with_capacity(self.dirty.len());
        for k in std::mem::take(&mut self.dirty) {
            if let Some(r) = self.records.get(&k) {
                let bytes = encode(r)?;
                puts.push((k, bytes));
            }
        }
        let deletes = std::mem::take(&mut self.deleted).into_iter().collect();
        Ok((puts, deletes))
    }

    /// Whether changes wait to be written.
    pub fn has_changes(&self) -> bool {
        !self.dirty.is_empty() || !self.deleted.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The compact form round-trips every field and stays small.
    #[test]
    fn stored_form_round_trips_and_is_small() {
        let fresh = KeyRecord::plain(
            schedule::discovered(
                Key::new("key-0000001").unwrap(),
                1_795_910_400_000,
                &Default::default(),
                0,
            ),
            None,
        );
        let bytes = weir_core::codec::encode(&fresh).unwrap();
        assert!(bytes.len() <= 64, "{} bytes", bytes.len());
        assert_eq!(
            weir_core::codec::decode::<KeyRecord>(&bytes).unwrap(),
            fresh
        );
        let mut full = fresh.clone();
        full.run_at_ms = Some(5);
        full.schedule.lease_owner = Some("o".into());
        full.schedule.lease_until_ms = Some(9);
        full.schedule.last_started_at_ms = Some(1);
        full.schedule.last_finished_at_ms = Some(2);
        full.schedule.last_failed = true;
        full.schedule.last_error = Some("e".into());
        full.schedule.consecutive_failures = 3;
        full.schedule.signal_window_started_at_ms = Some(4);
        full.prepared = true;
        full.prior_started_ms = Some(6);
        full.schedule.due_reason = DueReason::Signal {
            source: "ci".into(),
        };
        let bytes = weir_core::codec::encode(&full).unwrap();
        assert_eq!(weir_core::codec::decode::<KeyRecord>(&bytes).unwrap(), full);
    }
}
