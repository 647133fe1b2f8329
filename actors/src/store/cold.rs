//! The snapshot's indexes of its tickets, so an open reads a window of the
//! pending ones instead of all of them (see weir-core's `cold` module).
//!
//! Beside the ticket chunks, the snapshot tree holds, for the tickets of
//! the snapshot:
//! - `l` + pool length (u16) + pool + priority (i32, sign flipped) + the
//!   earliest due instant (u64) + chunk (u64), all big-endian, valued with
//!   the level's last `(due, id)` in the chunk and how many it holds: one
//!   entry per chunk and level with pending tickets, in order of their
//!   first due instant;
//! - `w` + chunk: every chunk holding a running ticket (all are read at
//!   open: each is an orphan of the process that died);
//! - the key index, every ticket's key → id, as runs under `K` (see the
//!   `keys` module);
//! - `n`: the pending tickets per (pool, priority), so an open knows how
//!   many stay in the store without counting them.
//!
//! An entry per chunk rather than per ticket: a backlog's tickets share
//! their chunks (ids are given in order), so a snapshot writes a sixteenth
//! of the pending entries; one per ticket made a 100k backlog drain at
//! 0.42x. A scan still answers the exact first tickets of a level after a
//! point: every ticket of an entry lies at or after its earliest due and
//! its chunk's first id, which bounds all entries after it, so the scan
//! stops once it holds enough tickets before that bound; an entry whose
//! last ticket is not past the point is skipped without reading its chunk.
//!
//! They change in the snapshot's own batch, from the stored chunk a change
//! rewrites to the chunk it writes (only what differs), so they are
//! exactly the snapshot's tickets whenever its meta is. A store written
//! before them (meta `layout` below 2) has them built once at open.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_core::cold::ColdTickets;
use weir_core::queue::{Place, Ticket, TicketId};

use super::keys::{sorted_run, RunChange, TOMBSTONE};
use super::layout::{
    chunk_key, decode_chunk, prefixed_number, run_error, CHUNK_PREFIX, COUNTS_KEY,
    TICKETS_PER_CHUNK,
};
use super::TreeId;
use super::{printable, Store, StoreError, SNAPSHOT};

const LEVEL_PREFIX: u8 = b'l';
const RUNNING_PREFIX: u8 = b'w';
/// Layout 1's per-ticket pending and running entries and layout 2's
/// per-key entries, removed when a store of those layouts is indexed
/// again.
const OLD_PREFIXES: [u8; 3] = [b'p', b'r', b'k'];
/// Keys a run of the index build holds at most before the next begins
/// (they are merged into one at the end).
const BUILD_RUN_KEYS: usize = 100_000;
/// Decoded chunks a reader keeps (16 tickets each): a scan reads the
/// chunks of a window and the window's tickets are read from them next.
const CHUNK_CACHE_MAX: usize = 512;

/// Pending tickets of the snapshot per (pool, priority).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LevelCounts {
    pub(crate) levels: Vec<(String, i32, u64)>,
}

impl LevelCounts {
    pub(crate) fn to_map(&self) -> BTreeMap<(String, i32), u64> {
        self.levels
            .iter()
            .map(|(p, pr, n)| ((p.clone(), *pr), *n))
            .collect()
    }

    pub(crate) fn from_map(map: &BTreeMap<(String, i32), u64>) -> LevelCounts {
        LevelCounts {
            levels: map
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|((p, pr), n)| (p.clone(), *pr, *n))
                .collect(),
        }
    }
}

fn level_prefix(pool: &str, priority: i32) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + 2 + pool.len() + 4 + 16);
    k.push(LEVEL_PREFIX);
    // Pools are names (short); one longer than u16 would not pass
    // validation, and is cut here rather than wrapped.
    let len = pool.len().min(u16::MAX as usize);
    k.extend_from_slice(&(len as u16).to_be_bytes());
    k.extend_from_slice(&pool.as_bytes()[..len]);
    k.extend_from_slice(&((priority as u32) ^ 0x8000_0000).to_be_bytes());
    k
}

fn level_key(pool: &str, priority: i32, first_due_ms: u64, chunk: u64) -> Vec<u8> {
    let mut k = level_prefix(pool, priority);
    k.extend_from_slice(&first_due_ms.to_be_bytes());
    k.extend_from_slice(&chunk.to_be_bytes());
    k
}

fn running_key(chunk: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = RUNNING_PREFIX;
    k[1..].copy_from_slice(&chunk.to_be_bytes());
    k
}

/// One level's pending tickets in one chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LevelSpan {
    first_due_ms: u64,
    last: (u64, TicketId),
    count: u32,
}

impl LevelSpan {
    fn value(&self) -> [u8; 20] {
        let mut v = [0u8; 20];
        v[..8].copy_from_slice(&self.last.0.to_be_bytes());
        v[8..16].copy_from_slice(&self.last.1.to_be_bytes());
        v[16..].copy_from_slice(&self.count.to_be_bytes());
        v
    }
}

/// What the indexes say of one chunk's tickets.
#[derive(Debug, Default)]
struct ChunkIndex<'t> {
    levels: BTreeMap<(&'t str, i32), LevelSpan>,
    running: bool,
    keys: BTreeSet<(&'t str, TicketId)>,
}

impl<'t> ChunkIndex<'t> {
    fn of(tickets: impl IntoIterator<Item = &'t Ticket>) -> ChunkIndex<'t> {
        let mut out = ChunkIndex::default();
        for t in tickets {
            out.keys.insert((&t.job.key, t.id));
            match t.place {
                Place::Running { .. } => out.running = true,
                Place::Pending { due_ms } => {
                    let span =
                        out.levels
                            .entry((&t.job.pool, t.job.priority))
                            .or_insert(LevelSpan {
                                first_due_ms: due_ms,
                                last: (due_ms, t.id),
                                count: 0,
                            });
                    span.first_due_ms = span.first_due_ms.min(due_ms);
                    span.last = span.last.max((due_ms, t.id));
                    span.count += 1;
                }
            }
        }
        out
    }
}

/// The index writes of a snapshot batch. Key changes are kept apart, for
/// the snapshot's key index run: a key may pass from a ticket that left
/// to a new one in another chunk, so all key removals go in before all
/// key insertions.
#[derive(Default)]
pub(crate) struct IndexWrites {
    key_removals: Vec<Vec<u8>>,
    key_insertions: Vec<(Vec<u8>, TicketId)>,
}

impl IndexWrites {
    /// Writes into `batch` and `counts` what changes in the indexes when
    /// chunk `chunk` holding `old` comes to hold `new`. Level and running
    /// entries are the chunk's own and go in at once; key entries wait
    /// for [`IndexWrites::finish`].
    pub(crate) fn chunk<'t>(
        &mut self,
        batch: &mut super::WriteBatch,
        counts: &mut BTreeMap<(String, i32), u64>,
        chunk: u64,
        old: impl IntoIterator<Item = &'t Ticket>,
        new: impl IntoIterator<Item = &'t Ticket>,
    ) {
        let old = ChunkIndex::of(old);
        let new = ChunkIndex::of(new);
        for (&(pool, priority), span) in &old.levels {
            let kept = new.levels.get(&(pool, priority));
            if kept.is_none_or(|n| n.first_due_ms != span.first_due_ms) {
                batch.remove(level_key(pool, priority, span.first_due_ms, chunk));
            }
            let n = counts.entry((pool.to_string(), priority)).or_default();
            *n = n.saturating_sub(u64::from(span.count));
        }
        for (&(pool, priority), span) in &new.levels {
            if old.levels.get(&(pool, priority)) != Some(span) {
                batch.insert(
                    level_key(pool, priority, span.first_due_ms, chunk),
                    span.value(),
                );
            }
            *counts.entry((pool.to_string(), priority)).or_default() += u64::from(span.count);
        }
        match (old.running, new.running) {
            (true, false) => batch.remove(running_key(chunk)),
            (false, true) => batch.insert(running_key(chunk), &[] as &[u8]),
            _ => {}
        }
        for (key, _) in old.keys.difference(&new.keys) {
            self.key_removals.push(key.as_bytes().to_vec());
        }
        for &(key, id) in new.keys.difference(&old.keys) {
            self.key_insertions.push((key.as_bytes().to_vec(), id));
        }
    }

    /// The key changes: each key whose ticket changed → its new id, or
    /// [`TOMBSTONE`] when no ticket holds it any more.
    pub(crate) fn finish(self) -> BTreeMap<Vec<u8>, TicketId> {
        let mut changes = BTreeMap::new();
        for k in self.key_removals {
            changes.insert(k, TOMBSTONE);
        }
        for (k, id) in self.key_insertions {
            changes.insert(k, id);
        }
        changes
    }
}

impl Store {
    pub(crate) fn read_counts(&self) -> Result<LevelCounts, StoreError> {
        match self
            .inner
            .snapshot
            .get(COUNTS_KEY)
            .map_err(|e| self.sled_err(e))?
        {
            None => Ok(LevelCounts::default()),
            Some(bytes) => weir_core::codec::decode(&bytes).map_err(|source| StoreError::Corrupt {
                dir: self.dir().to_path_buf(),
                tree: SNAPSHOT,
                key: "n".into(),
                source,
            }),
        }
    }

    /// The running tickets of the snapshot, by id.
    pub(crate) fn running_tickets(&self, cold: &StoreCold<'_>) -> Result<Vec<Ticket>, StoreError> {
        let mut out = Vec::new();
        for item in self.inner.snapshot.scan_prefix([RUNNING_PREFIX]) {
            let (k, _) = item.map_err(|e| self.sled_err(e))?;
            let chunk = prefixed_number(&k).ok_or_else(|| {
                self.index_fault(format!(
                    "running index key {} is not a chunk",
                    printable(&k)
                ))
            })?;
            let before = out.len();
            out.extend(
                cold.chunk(chunk)?
                    .iter()
                    .filter(|t| matches!(t.place, Place::Running { .. }))
                    .cloned(),
            );
            if out.len() == before {
                return Err(self.index_fault(format!(
                    "the running index names chunk {chunk}, which holds no running ticket"
                )));
            }
        }
        Ok(out)
    }

    pub(crate) fn index_fault(&self, what: String) -> StoreError {
        StoreError::Inconsistent {
            dir: self.dir().to_path_buf(),
            tree: SNAPSHOT,
            what,
        }
    }

    /// Builds the indexes of a snapshot written before them: removes
    /// earlier layouts' entries and what an interrupted build left, then
    /// reads every chunk once and writes its entries, in batches, then the
    /// key index as one run and the counts. The caller writes the layout
    /// after, so a crash midway builds them again (the entries are the
    /// same each time).
    pub(crate) fn build_indexes(&self) -> Result<u64, StoreError> {
        const BATCH_ITEMS: usize = 50_000;
        let inner = &self.inner;
        // A build is a migration of this node's files at open, before any
        // write is replicated: it writes sled (the same entries on every
        // node that opens the same store).
        let flush = |batch: &mut super::WriteBatch| {
            let full = std::mem::replace(batch, super::WriteBatch::local(TreeId::Snapshot));
            self.write_sled("snapshot index build", || {
                inner.snapshot.apply_batch(full.into_local())
            })
        };
        let mut batch = super::WriteBatch::local(TreeId::Snapshot);
        let mut in_batch = 0usize;
        for prefix in OLD_PREFIXES {
            for k in inner.snapshot.scan_prefix([prefix]).keys() {
                batch.remove(k.map_err(|e| self.sled_err(e))?);
                in_batch += 1;
                if in_batch >= BATCH_ITEMS {
                    flush(&mut batch)?;
                    in_batch = 0;
                }
            }
        }
        let mut counts: BTreeMap<(String, i32), u64> = BTreeMap::new();
        let mut tickets = 0u64;
        // The keys, sorted a run at a time (one sort of every key would
        // hold them all at once), merged into one run at the end.
        let mut pending_keys: Vec<(Vec<u8>, TicketId)> = Vec::new();
        let mut built_runs: Vec<fst::Map<Vec<u8>>> = Vec::new();
        let seal = |keys: &mut Vec<(Vec<u8>, TicketId)>,
                    runs: &mut Vec<fst::Map<Vec<u8>>>|
         -> Result<(), StoreError> {
            keys.sort_unstable();
            let run = sorted_run(keys.iter().map(|(k, id)| (k.as_slice(), *id)))
                .map_err(|e| run_error(self, e))?;
            runs.extend(run);
            keys.clear();
            Ok(())
        };
        for item in inner.snapshot.scan_prefix([CHUNK_PREFIX]) {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            let chunk = prefixed_number(&k).ok_or_else(|| {
                self.index_fault(format!("chunk key {} is not a chunk", printable(&k)))
            })?;
            let stored = decode_chunk(self, &k, &v)?.tickets;
            let mut writes = IndexWrites::default();
            writes.chunk(&mut batch, &mut counts, chunk, [], stored.iter());
            pending_keys.extend(writes.finish());
            if pending_keys.len() >= BUILD_RUN_KEYS {
                seal(&mut pending_keys, &mut built_runs)?;
            }
            tickets += stored.len() as u64;
            in_batch += 2;
            if in_batch >= BATCH_ITEMS {
                flush(&mut batch)?;
                in_batch = 0;
            }
        }
        if !pending_keys.is_empty() {
            seal(&mut pending_keys, &mut built_runs)?;
        }
        let change = RunChange::merged(0, &built_runs, self.key_run_ids()?)
            .map_err(|e| run_error(self, e))?;
        change.write(&mut batch);
        let bytes = self.encode("snapshot level counts", &LevelCounts::from_map(&counts))?;
        batch.insert(COUNTS_KEY, bytes);
        flush(&mut batch)?;
        Ok(tickets)
    }
}

/// [`ColdTickets`] over a store's snapshot. Keeps the chunks it decoded
/// (up to [`CHUNK_CACHE_MAX`]): a scan reads a window's chunks, and the
/// window's tickets are read from them next. While it lives, no snapshot
/// lands (it holds the store's cold gate shared): everything it reads is
/// of one snapshot, however many reads it takes. Make one per operation
/// (a refill, a fault-in), never two at once on one thread.
pub struct StoreCold<'a> {
    store: &'a Store,
    chunks: RefCell<HashMap<u64, Arc<Vec<Ticket>>>>,
    _one_snapshot: parking_lot::RwLockReadGuard<'a, ()>,
}

impl<'a> StoreCold<'a> {
    /// Reads from `store`'s snapshot.
    pub fn new(store: &'a Store) -> Self {
        StoreCold {
            store,
            chunks: RefCell::new(HashMap::new()),
            _one_snapshot: store.inner.cold_gate.read(),
        }
    }

    /// The stored tickets of `chunk`, in id order (none when it is not
    /// stored).
    fn chunk(&self, chunk: u64) -> Result<Arc<Vec<Ticket>>, StoreError> {
        if let Some(t) = self.chunks.borrow().get(&chunk) {
            return Ok(t.clone());
        }
        let key = chunk_key(chunk);
        let tickets = match self
            .store
            .inner
            .snapshot
            .get(key)
            .map_err(|e| self.store.sled_err(e))?
        {
            Some(bytes) => Arc::new(decode_chunk(self.store, &key, &bytes)?.tickets),
            None => Arc::new(Vec::new()),
        };
        let mut chunks = self.chunks.borrow_mut();
        if chunks.len() >= CHUNK_CACHE_MAX {
            chunks.clear();
        }
        chunks.insert(chunk, tickets.clone());
        Ok(tickets)
    }

    fn read(&self, id: TicketId) -> Result<Option<Ticket>, StoreError> {
        let tickets = self.chunk(id / TICKETS_PER_CHUNK)?;
        Ok(tickets
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .map(|i| tickets[i].clone()))
    }
}

impl ColdTickets for StoreCold<'_> {
    type Error = StoreError;

    fn scan(
        &self,
        pool: &str,
        priority: i32,
        after: Option<(u64, TicketId)>,
        n: usize,
    ) -> Result<Vec<(u64, TicketId)>, StoreError> {
        if n == 0 {
            return Ok(Vec::new());
        }
        let prefix = level_prefix(pool, priority);
        let store = self.store;
        // The first `n` tickets past `after` seen so far, the last on top.
        let mut best: BinaryHeap<(u64, TicketId)> = BinaryHeap::with_capacity(n.min(4096) + 1);
        for item in store.inner.snapshot.scan_prefix(&prefix) {
            let (k, v) = item.map_err(|e| store.sled_err(e))?;
            let tail = &k[prefix.len()..];
            let (Ok(head), Ok(value)) = (<[u8; 16]>::try_from(tail), <[u8; 20]>::try_from(&v[..]))
            else {
                return Err(store.index_fault(format!(
                    "level index entry {} is not a due instant and a chunk valued with a ticket and a count",
                    printable(&k)
                )));
            };
            let first_due_ms = u64::from_be_bytes(head[..8].try_into().expect("8 bytes"));
            let chunk = u64::from_be_bytes(head[8..].try_into().expect("8 bytes"));
            // Every ticket of this entry and of those after it lies at or
            // past (first due, the chunk's first id).
            let floor = (first_due_ms, chunk.saturating_mul(TICKETS_PER_CHUNK));
            if best.len() >= n && best.peek().is_some_and(|&top| floor > top) {
                break;
            }
            let last = (
                u64::from_be_bytes(value[..8].try_into().expect("8 bytes")),
                u64::from_be_bytes(value[8..16].try_into().expect("8 bytes")),
            );
            let count = u32::from_be_bytes(value[16..].try_into().expect("4 bytes"));
            if after.is_some_and(|a| last <= a) {
                continue;
            }
            let mut held = 0u32;
            for t in self.chunk(chunk)?.iter() {
                let Place::Pending { due_ms } = t.place else {
                    continue;
                };
                if *t.job.pool != *pool || t.job.priority != priority {
                    continue;
                }
                held += 1;
                let entry = (due_ms, t.id);
                if after.is_some_and(|a| entry <= a) {
                    continue;
                }
                if best.len() < n {
                    best.push(entry);
                } else if best.peek().is_some_and(|&top| entry < top) {
                    best.pop();
                    best.push(entry);
                }
            }
            if held != count {
                return Err(store.index_fault(format!(
                    "the level index of pool {pool:?} at priority {priority} counts {count} pending tickets in chunk {chunk}, which holds {held}"
                )));
            }
        }
        Ok(best.into_sorted_vec())
    }

    fn ticket(&self, id: TicketId) -> Result<Option<Ticket>, StoreError> {
        self.read(id)
    }

    fn key_id(&self, key: &str) -> Result<Option<TicketId>, StoreError> {
        Ok(self.store.key_runs().lookup(key.as_bytes()))
    }
}

impl Store {
    /// Calls `f` with every ticket of the snapshot, in id order, until it
    /// returns `false` or an error. It reads every chunk it walks: for
    /// operators' views and the one-time index build, not a hot path.
    pub fn for_each_stored_ticket(
        &self,
        mut f: impl FnMut(Ticket) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        for item in self.inner.snapshot.scan_prefix([CHUNK_PREFIX]) {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            for t in decode_chunk(self, &k, &v)?.tickets {
                if !f(t)? {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
