//! The snapshot's indexes of its tickets, so an open reads a window of the
//! pending ones instead of all of them (see weir-core's `cold` module).
//!
//! Beside the ticket chunks, the snapshot tree holds, for the tickets of
//! the snapshot:
//! - `p` + pool length (u16) + pool + priority (i32, sign flipped) + due
//!   (u64) + id (u64), all big-endian, empty value: every pending ticket,
//!   in hand-out order within a level;
//! - `r` + id: every running ticket (all are read at open: each is an
//!   orphan of the process that died);
//! - `k` + key → id: every ticket's key;
//! - `n`: the pending tickets per (pool, priority), so an open knows how
//!   many stay in the store without counting them.
//!
//! They change in the snapshot's own batch, from the stored ticket a
//! change replaces to the ticket it writes, so they are exactly the
//! snapshot's tickets whenever its meta is. A store written before the
//! indexes existed (meta `layout` 0) has them built once at open.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weir_core::cold::ColdTickets;
use weir_core::queue::{Place, Ticket, TicketId};

use super::snapshot::{chunk_key, decode_chunk, TICKETS_PER_CHUNK};
use super::{printable, Store, StoreError, SNAPSHOT};

/// The snapshot layout with these indexes.
pub(crate) const LAYOUT_INDEXED: u32 = 1;
/// The key of the per-level counts.
pub(crate) const COUNTS_KEY: &[u8] = b"n";
const PENDING_PREFIX: u8 = b'p';
const RUNNING_PREFIX: u8 = b'r';
const KEY_PREFIX: u8 = b'k';

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
    k.push(PENDING_PREFIX);
    // Pools are names (short); one longer than u16 would not pass
    // validation, and is cut here rather than wrapped.
    let len = pool.len().min(u16::MAX as usize);
    k.extend_from_slice(&(len as u16).to_be_bytes());
    k.extend_from_slice(&pool.as_bytes()[..len]);
    k.extend_from_slice(&((priority as u32) ^ 0x8000_0000).to_be_bytes());
    k
}

pub(crate) fn pending_key(pool: &str, priority: i32, due_ms: u64, id: TicketId) -> Vec<u8> {
    let mut k = level_prefix(pool, priority);
    k.extend_from_slice(&due_ms.to_be_bytes());
    k.extend_from_slice(&id.to_be_bytes());
    k
}

pub(crate) fn running_key(id: TicketId) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = RUNNING_PREFIX;
    k[1..].copy_from_slice(&id.to_be_bytes());
    k
}

pub(crate) fn key_key(key: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + key.len());
    k.push(KEY_PREFIX);
    k.extend_from_slice(key.as_bytes());
    k
}

/// The index entries of one stored ticket.
pub(crate) fn index_entries(t: &Ticket) -> (Vec<u8>, Vec<u8>) {
    let place = match t.place {
        Place::Pending { due_ms } => pending_key(&t.job.pool, t.job.priority, due_ms, t.id),
        Place::Running { .. } => running_key(t.id).to_vec(),
    };
    (place, key_key(&t.job.key))
}

/// Removes `old`'s entries from `batch` and its count from `counts`.
pub(crate) fn unindex(
    batch: &mut sled::Batch,
    counts: &mut BTreeMap<(String, i32), u64>,
    old: &Ticket,
) {
    let (place, key) = index_entries(old);
    batch.remove(place);
    batch.remove(key);
    if matches!(old.place, Place::Pending { .. }) {
        let n = counts
            .entry((old.job.pool.to_string(), old.job.priority))
            .or_default();
        *n = n.saturating_sub(1);
    }
}

/// Adds `new`'s entries to `batch` and its count to `counts`.
pub(crate) fn index(
    batch: &mut sled::Batch,
    counts: &mut BTreeMap<(String, i32), u64>,
    new: &Ticket,
) {
    let (place, key) = index_entries(new);
    batch.insert(place, &[] as &[u8]);
    batch.insert(key, &new.id.to_be_bytes());
    if matches!(new.place, Place::Pending { .. }) {
        *counts
            .entry((new.job.pool.to_string(), new.job.priority))
            .or_default() += 1;
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
            let id = <[u8; 8]>::try_from(&k[1..])
                .map(u64::from_be_bytes)
                .map_err(|_| {
                    self.index_fault(format!("running index key {} is not an id", printable(&k)))
                })?;
            match cold.read(id)? {
                Some(t) if matches!(t.place, Place::Running { .. }) => out.push(t),
                Some(t) => {
                    return Err(self.index_fault(format!(
                        "the running index names ticket {id}, stored as {:?}",
                        t.place
                    )))
                }
                None => {
                    return Err(self.index_fault(format!(
                        "the running index names ticket {id}, which is not stored"
                    )))
                }
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

    /// Builds the indexes of a snapshot written before they existed: every
    /// chunk read once, the entries written in batches, then the counts.
    /// The caller writes the layout after, so a crash midway builds them
    /// again (the entries are the same; nothing stale exists in layout 0).
    pub(crate) fn build_indexes(&self) -> Result<u64, StoreError> {
        const BATCH_TICKETS: usize = 50_000;
        let inner = &self.inner;
        let mut counts: BTreeMap<(String, i32), u64> = BTreeMap::new();
        let mut batch = sled::Batch::default();
        let mut in_batch = 0usize;
        let mut tickets = 0u64;
        self.for_each_stored_ticket(|t| {
            index(&mut batch, &mut counts, &t);
            in_batch += 1;
            tickets += 1;
            if in_batch >= BATCH_TICKETS {
                let full = std::mem::take(&mut batch);
                self.write_sled("snapshot index build", || inner.snapshot.apply_batch(full))?;
                in_batch = 0;
            }
            Ok(true)
        })?;
        let bytes = self.encode("snapshot level counts", &LevelCounts::from_map(&counts))?;
        batch.insert(COUNTS_KEY, bytes);
        self.write_sled("snapshot index build", || inner.snapshot.apply_batch(batch))?;
        Ok(tickets)
    }
}

/// [`ColdTickets`] over a store's snapshot. Keeps the last chunk it
/// decoded: a window reads tickets in hand-out order, which for a FIFO
/// backlog is id order, 16 to a chunk.
pub struct StoreCold<'a> {
    store: &'a Store,
    last: RefCell<Option<(u64, Arc<Vec<Ticket>>)>>,
}

impl<'a> StoreCold<'a> {
    /// Reads from `store`'s snapshot.
    pub fn new(store: &'a Store) -> Self {
        StoreCold {
            store,
            last: RefCell::new(None),
        }
    }

    fn read(&self, id: TicketId) -> Result<Option<Ticket>, StoreError> {
        let chunk = id / TICKETS_PER_CHUNK;
        let cached = self
            .last
            .borrow()
            .as_ref()
            .filter(|(c, _)| *c == chunk)
            .map(|(_, t)| t.clone());
        let tickets = match cached {
            Some(t) => t,
            None => {
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
                *self.last.borrow_mut() = Some((chunk, tickets.clone()));
                tickets
            }
        };
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
        let prefix = level_prefix(pool, priority);
        let start = match after {
            // Just past `after`: its key with a zero byte appended.
            Some((due, id)) => {
                let mut k = pending_key(pool, priority, due, id);
                k.push(0);
                k
            }
            None => prefix.clone(),
        };
        let mut end = prefix.clone();
        // The prefix's successor: no level prefix ends in 0xff bytes only
        // (the flipped priority's last byte would have to be, with the
        // whole pool too); bump its last byte.
        while let Some(last) = end.pop() {
            if last < 0xff {
                end.push(last + 1);
                break;
            }
        }
        let mut out = Vec::with_capacity(n.min(4096));
        let range = if end.is_empty() {
            self.store.inner.snapshot.range(start..)
        } else {
            self.store.inner.snapshot.range(start..end)
        };
        for item in range.keys().take(n) {
            let k = item.map_err(|e| self.store.sled_err(e))?;
            let tail = &k[prefix.len()..];
            if tail.len() != 16 {
                return Err(self.store.index_fault(format!(
                    "pending index key {} is not a due instant and an id",
                    printable(&k)
                )));
            }
            let due = u64::from_be_bytes(tail[..8].try_into().expect("8 bytes"));
            let id = u64::from_be_bytes(tail[8..].try_into().expect("8 bytes"));
            out.push((due, id));
        }
        Ok(out)
    }

    fn ticket(&self, id: TicketId) -> Result<Option<Ticket>, StoreError> {
        self.read(id)
    }

    fn key_id(&self, key: &str) -> Result<Option<TicketId>, StoreError> {
        let Some(v) = self
            .store
            .inner
            .snapshot
            .get(key_key(key))
            .map_err(|e| self.store.sled_err(e))?
        else {
            return Ok(None);
        };
        <[u8; 8]>::try_from(v.as_ref())
            .map(|b| Some(u64::from_be_bytes(b)))
            .map_err(|_| {
                self.store
                    .index_fault(format!("key index entry of {key:?} is not an id"))
            })
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
        for item in self
            .inner
            .snapshot
            .scan_prefix([super::snapshot::CHUNK_PREFIX])
        {
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
