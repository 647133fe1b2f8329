//! Recovery at open: snapshot plus journal tail through weir-core's `step`.
//!
//! Every value read is decoded; one that does not decode stops the open
//! with an error naming the tree, the key and the sequence. Journal
//! sequences after the snapshot must be contiguous: a gap means an entry
//! was lost, and replaying past it would build a state that never was.
//! Records are checked to be well-formed envelopes too, so a corrupt store
//! fails at open rather than at some later read.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::IgnoredAny;
use weir_core::codec::{self, CodecError};
use weir_core::cold::ColdError;
use weir_core::queue::{QueueState, TicketId};

use super::carried::CarriedRecords;
use super::cold::StoreCold;
use super::journal::JournalEntry;
use super::layout::{CHUNK_PREFIX, LAYOUT_INDEXED, META_KEY, OLD_TICKET_PREFIX};
use super::snapshot::{read_meta, SnapshotMeta};
use super::{printable, Store, StoreError, JOURNAL, RECORDS, SNAPSHOT};

/// What recovery rebuilt.
#[derive(Debug)]
pub struct Recovered {
    /// The queue state: snapshot plus journal tail.
    pub state: QueueState,
    /// The snapshot it started from.
    pub snapshot: SnapshotMeta,
    /// Tickets the snapshot holds (read in or left in the store).
    pub snapshot_tickets: u64,
    /// Journal entries (values) replayed.
    pub entries_replayed: u64,
    /// Ops replayed.
    pub ops_replayed: u64,
    /// Time taken by the whole recovery.
    pub elapsed: Duration,
}

/// Decodes one journal value and applies its ops to `state` through
/// weir-core's `step`, adding the tickets they changed to `changed`;
/// returns how many ops it held. The part of recovery that reads stored
/// bytes: the `envelope` fuzz target feeds it arbitrary ones (it must
/// return an error, never panic, and leave a state whose invariants hold).
#[doc(hidden)]
pub fn apply_journal_value(
    state: &mut QueueState,
    value: &[u8],
    changed: &mut BTreeSet<TicketId>,
) -> Result<u64, CodecError> {
    let entry: JournalEntry = codec::decode(value)?;
    for op in &entry.ops {
        changed.extend(state.step(op).changed());
    }
    Ok(entry.ops.len() as u64)
}

/// What the snapshot and the journal tail rebuilt.
struct Replayed {
    state: QueueState,
    meta: SnapshotMeta,
    snapshot_tickets: u64,
    changed: BTreeSet<TicketId>,
    last: u64,
    entries: u64,
    ops: u64,
    bytes: u64,
    /// The records the journal's last value carries, if it carries any.
    last_carried: Option<CarriedRecords>,
}

pub(crate) fn recover(store: &Store) -> Result<Recovered, StoreError> {
    let started = Instant::now();
    let inner = &store.inner;
    let dir = store.dir().to_path_buf();
    // The check of every record is independent of the queue's replay and
    // takes as long on a store of many records: it runs beside it, on a
    // thread of its own. A panic there (sled on a damaged file) goes on
    // into the open's guard, as it would on this thread; the replay's
    // error, when both fail, is the one reported, as before.
    let (replayed, records) = std::thread::scope(|s| {
        let records = s.spawn(|| check_records(store));
        let replayed = replay(store);
        let records = records
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (replayed, records)
    });
    let Replayed {
        state,
        meta,
        snapshot_tickets,
        changed,
        last,
        entries,
        ops,
        bytes,
        last_carried,
    } = replayed?;
    records?;
    // A crash may have cut the last commit short after its journal value:
    // its records are written again from the value (see `carried`).
    if let Some(carried) = &last_carried {
        store.reapply_last(last, carried)?;
    }

    *inner.tail_changed.lock().unwrap_or_else(|p| p.into_inner()) = changed;
    inner.last_seq.store(last, Ordering::Release);
    inner.snapshot_seq.store(meta.seq, Ordering::Release);
    inner.ops_since_snapshot.store(ops, Ordering::Relaxed);
    inner.bytes_since_snapshot.store(bytes, Ordering::Relaxed);
    // Entries the snapshot covers may remain after a crash between the
    // snapshot and their removal; they are dead, so remove them now.
    store.remove_journal_upto(meta.seq)?;

    let recovered = Recovered {
        state,
        snapshot: meta,
        snapshot_tickets,
        entries_replayed: entries,
        ops_replayed: ops,
        elapsed: started.elapsed(),
    };
    tracing::info!(
        dir = %dir.display(),
        snapshot_seq = meta.seq,
        snapshot_tickets,
        entries_replayed = entries,
        ops_replayed = ops,
        elapsed_ms = recovered.elapsed.as_millis() as u64,
        "store recovered"
    );
    Ok(recovered)
}

/// The queue's state from the snapshot and the journal tail after it.
fn replay(store: &Store) -> Result<Replayed, StoreError> {
    let inner = &store.inner;
    let dir = store.dir().to_path_buf();
    let stored_meta = read_meta(store)?;
    let mut meta = stored_meta.unwrap_or_default();
    if let Some(item) = inner.snapshot.scan_prefix([OLD_TICKET_PREFIX]).next() {
        let (k, _) = item.map_err(|e| store.sled_err(e))?;
        return Err(StoreError::Inconsistent {
            dir: dir.clone(),
            tree: SNAPSHOT,
            what: format!(
                "key {} is a ticket of the one-ticket-a-key layout, which this weir does not read",
                printable(&k)
            ),
        });
    }
    if meta.layout < LAYOUT_INDEXED {
        // Written before the ticket indexes: build them once. The meta
        // says so only after they are written.
        if inner.snapshot.scan_prefix([CHUNK_PREFIX]).next().is_some() {
            let built = store.build_indexes()?;
            tracing::info!(dir = %dir.display(), tickets = built, "snapshot indexes built");
        }
        meta.layout = LAYOUT_INDEXED;
        if stored_meta.is_some() {
            let bytes = store.encode("snapshot meta", &meta)?;
            store.write_sled("snapshot meta", || {
                inner.snapshot.insert(META_KEY, bytes.clone())
            })?;
            store.sync()?;
        }
    }
    store.load_key_runs()?;
    let window = inner.settings.window_tickets;
    let cold = StoreCold::new(store);
    let running = store.running_tickets(&cold)?;
    let counts = store.read_counts()?;
    let snapshot_tickets = running.len() as u64 + counts.levels.iter().map(|l| l.2).sum::<u64>();
    if snapshot_tickets != meta.tickets {
        return Err(StoreError::Inconsistent {
            dir: dir.clone(),
            tree: SNAPSHOT,
            what: format!(
                "its meta counts {} tickets, its indexes {} running and {} pending",
                meta.tickets,
                running.len(),
                snapshot_tickets - running.len() as u64
            ),
        });
    }
    let levels = counts
        .levels
        .into_iter()
        .map(|(pool, priority, n)| (Arc::<str>::from(pool), priority, n));
    let inconsistent = |what: String| StoreError::Inconsistent {
        dir: dir.clone(),
        tree: SNAPSHOT,
        what,
    };
    let cold_err = |e: ColdError<StoreError>| match e {
        ColdError::Store(e) => e,
        ColdError::Inconsistent(what) => inconsistent(what),
    };
    let mut state =
        QueueState::restore_cold(meta.next_id, running, levels).map_err(inconsistent)?;
    state.refill(&cold, window).map_err(cold_err)?;

    let mut changed = BTreeSet::new();
    let mut last = meta.seq;
    let mut entries = 0u64;
    let mut ops = 0u64;
    let mut bytes = 0u64;
    let mut last_carried = None;
    let start = meta.seq.saturating_add(1).to_be_bytes();
    for item in inner.journal.range(start.as_slice()..) {
        let (k, v) = item.map_err(|e| store.sled_err(e))?;
        let seq = <[u8; 8]>::try_from(k.as_ref())
            .map(u64::from_be_bytes)
            .map_err(|_| StoreError::Inconsistent {
                dir: dir.clone(),
                tree: JOURNAL,
                what: format!("key {} is not a sequence number", printable(&k)),
            })?;
        if seq != last + 1 {
            return Err(StoreError::Inconsistent {
                dir: dir.clone(),
                tree: JOURNAL,
                what: format!(
                    "sequence {seq} follows {last}: entries {}..{seq} are missing",
                    last + 1
                ),
            });
        }
        let entry: JournalEntry = codec::decode(&v).map_err(|source| StoreError::Corrupt {
            dir: dir.clone(),
            tree: JOURNAL,
            key: format!("sequence {seq}"),
            source,
        })?;
        for op in &entry.ops {
            state.prepare(op, &cold).map_err(cold_err)?;
            changed.extend(state.step(op).changed());
            state.refill(&cold, window).map_err(cold_err)?;
        }
        ops += entry.ops.len() as u64;
        bytes += v.len() as u64;
        entries += 1;
        last = seq;
        last_carried = entry.records;
    }
    // `restore` checked the snapshot's tickets, and `step` keeps every
    // invariant by construction; the full check is another pass over every
    // ticket (seconds at a million), so it runs in debug builds, as after
    // every step.
    #[cfg(debug_assertions)]
    state.assert_invariants();

    Ok(Replayed {
        state,
        meta,
        snapshot_tickets,
        changed,
        last,
        entries,
        ops,
        bytes,
        last_carried,
    })
}

/// Every record decodes as an envelope: a corrupt one stops the open,
/// named, rather than some later read.
fn check_records(store: &Store) -> Result<(), StoreError> {
    let dir = store.dir();
    for item in store.inner.records.iter() {
        let (k, v) = item.map_err(|e| store.sled_err(e))?;
        codec::decode::<IgnoredAny>(&v).map_err(|source| StoreError::Corrupt {
            dir: dir.to_path_buf(),
            tree: RECORDS,
            key: printable(&k),
            source,
        })?;
    }

    Ok(())
}
