//! The content digest a clean close leaves in the mark (see the `damage`
//! module), checked by the next open.
//!
//! sled 0.34.7 checks every message of its log, but its recovery treats a
//! damaged message in the stable part of the log like the end of a freed
//! segment: it skips the rest of that segment and goes on (`LogIter::next`
//! with `last_stage`). The pages whose newest version was there fall back
//! to an older one, silently — a flipped byte in the middle of `sled/db`
//! can drop acknowledged records while the journal's tail, and so the
//! mark's sequence, is intact. What sled recovered is therefore compared
//! with what it held: the number of entries, their bytes and a CRC-32
//! of every tree's name, keys and values, in order. A CRC, not a
//! cryptographic hash: it is there to catch damage, not an adversary, and
//! it adds about half to sled's own iteration where BLAKE3 tripled it
//! (500k entries of 600 bytes: 170 ms to iterate, 270 ms with the CRC,
//! 640 ms with BLAKE3).
//!
//! The digest describes the store only until its next write, so an open
//! that finds one checks it and writes the mark back without it before
//! anything writes (see [`super::damage::check_content`]); a crash later
//! leaves a mark without a digest, and only the sequence is checked.

use std::fmt;

/// What a store held: its entries, their size, and a checksum of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Content {
    /// Entries in every tree but sled's own default one.
    pub(crate) entries: u64,
    /// The bytes of their keys and values.
    pub(crate) bytes: u64,
    /// CRC-32 of each non-empty tree's name, then its keys and values,
    /// each prefixed with its length, trees in name order.
    pub(crate) crc: u32,
}

impl Content {
    /// Reads every tree of `db`: as long as a scan of the whole store.
    pub(crate) fn of(db: &sled::Db) -> Result<Content, sled::Error> {
        let mut names: Vec<sled::IVec> = db.tree_names();
        names.sort();
        let mut hasher = crc32fast::Hasher::new();
        let mut entries = 0u64;
        let mut bytes = 0u64;
        for name in names {
            // sled's default tree holds its own bookkeeping, not weir's.
            if name.as_ref() == b"__sled__default" {
                continue;
            }
            let tree = db.open_tree(&name)?;
            let mut items = tree.iter().peekable();
            if items.peek().is_none() {
                // An empty tree and a missing one are the same store: an
                // open creates the trees it uses.
                continue;
            }
            update(&mut hasher, &name);
            for item in items {
                let (k, v) = item?;
                update(&mut hasher, &k);
                update(&mut hasher, &v);
                entries += 1;
                bytes += (k.len() + v.len()) as u64;
            }
        }
        Ok(Content {
            entries,
            bytes,
            crc: hasher.finalize(),
        })
    }

    /// Parses the form [`fmt::Display`] writes: `ENTRIES BYTES CRC_HEX`.
    pub(crate) fn parse(text: &str) -> Option<Content> {
        let (entries, bytes, crc) = parse_count_bytes_crc(text)?;
        Some(Content {
            entries,
            bytes,
            crc,
        })
    }
}

/// `COUNT BYTES CRC_HEX` (the CRC in 8 hex digits), the form of the mark's
/// content and of the files' digest.
pub(crate) fn parse_count_bytes_crc(text: &str) -> Option<(u64, u64, u32)> {
    let mut words = text.split_whitespace();
    let count = words.next()?.parse().ok()?;
    let bytes = words.next()?.parse().ok()?;
    let crc = words.next()?;
    if crc.len() != 8 || words.next().is_some() {
        return None;
    }
    Some((count, bytes, u32::from_str_radix(crc, 16).ok()?))
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {:08x}", self.entries, self.bytes, self.crc)
    }
}

fn update(hasher: &mut crc32fast::Hasher, bytes: &[u8]) {
    hasher.update(&(bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_reads_back_as_written_and_sees_a_changed_value() {
        let db = sled::Config::new().temporary(true).open().unwrap();
        let t = db.open_tree("records").unwrap();
        t.insert("a", "1").unwrap();
        t.insert("b", "2").unwrap();
        db.open_tree("empty").unwrap();
        let before = Content::of(&db).unwrap();
        assert_eq!(before.entries, 2);
        assert_eq!(Content::parse(&before.to_string()), Some(before));
        t.insert("b", "3").unwrap();
        let after = Content::of(&db).unwrap();
        assert_eq!((after.entries, after.bytes), (before.entries, before.bytes));
        assert_ne!(after.crc, before.crc);
        t.remove("b").unwrap();
        assert_eq!(Content::of(&db).unwrap().entries, 1);
        assert_eq!(Content::parse("2 4 zz"), None);
        assert_eq!(Content::parse("2 4"), None);
        assert_eq!(Content::parse("x 4 0000000a"), None);
        assert_eq!(Content::parse("2 4 0000000a 1"), None);
    }

    #[test]
    fn a_key_moved_between_trees_changes_the_hash() {
        let one = sled::Config::new().temporary(true).open().unwrap();
        one.open_tree("a").unwrap().insert("k", "v").unwrap();
        let two = sled::Config::new().temporary(true).open().unwrap();
        two.open_tree("b").unwrap().insert("k", "v").unwrap();
        assert_ne!(Content::of(&one).unwrap(), Content::of(&two).unwrap());
    }
}
