//! The snapshot tree's layout, shared by the snapshot, the cold-ticket
//! index and the key index: its key prefixes, the chunk of tickets a value
//! holds, and the errors that name a damaged entry.

use serde::{Deserialize, Serialize};
use weir_core::codec;
use weir_core::queue::Ticket;

use super::{printable, Store, StoreError, SNAPSHOT};

/// The key of the snapshot's meta record.
pub(crate) const META_KEY: &[u8] = b"meta";

/// The prefix of the keys of ticket chunks.
pub(crate) const CHUNK_PREFIX: u8 = b'c';

/// The prefix of one-ticket keys of the first layout; a store holding any
/// is refused at open rather than read half.
pub(crate) const OLD_TICKET_PREFIX: u8 = b't';

/// Tickets per chunk, by id.
pub(crate) const TICKETS_PER_CHUNK: u64 = 16;

/// One snapshot value: the live tickets of a chunk, in id order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TicketChunk {
    pub(crate) tickets: Vec<Ticket>,
}

/// A [`TicketChunk`] of borrowed tickets, encoded the same way.
#[derive(Serialize)]
pub(crate) struct TicketChunkRef<'a> {
    pub(crate) tickets: Vec<&'a Ticket>,
}

pub(crate) fn chunk_key(chunk: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = CHUNK_PREFIX;
    k[1..].copy_from_slice(&chunk.to_be_bytes());
    k
}

/// The tickets of one snapshot chunk value, as recovery reads them (the
/// `envelope` fuzz target feeds it arbitrary bytes).
#[doc(hidden)]
pub fn decode_ticket_chunk(bytes: &[u8]) -> Result<Vec<Ticket>, codec::CodecError> {
    codec::decode::<TicketChunk>(bytes).map(|c| c.tickets)
}

/// Decodes a chunk value, naming its key when it does not decode.
pub(crate) fn decode_chunk(
    store: &Store,
    key: &[u8],
    bytes: &[u8],
) -> Result<TicketChunk, StoreError> {
    decode_ticket_chunk(bytes)
        .map(|tickets| TicketChunk { tickets })
        .map_err(|source| StoreError::Corrupt {
            dir: store.dir().to_path_buf(),
            tree: SNAPSHOT,
            key: printable(key),
            source,
        })
}

/// The snapshot layout with these indexes (2: the key index as an entry
/// per key under `k`; 1: an entry per pending and running ticket; 0: no
/// indexes).
pub(crate) const LAYOUT_INDEXED: u32 = 3;

/// The key of the per-level counts.
pub(crate) const COUNTS_KEY: &[u8] = b"n";

/// The number after a key's one-byte prefix (a chunk's or a key index
/// run's), if the rest of the key is one.
pub(crate) fn prefixed_number(k: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(k.get(1..)?)
        .ok()
        .map(u64::from_be_bytes)
}

/// An fst error as a store error of the snapshot tree.
pub(crate) fn run_error(store: &Store, e: fst::Error) -> StoreError {
    StoreError::Inconsistent {
        dir: store.dir().to_path_buf(),
        tree: SNAPSHOT,
        what: format!("key index run: {e}"),
    }
}
