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
//! with what it held: the number of entries and a BLAKE3 hash of every
//! tree's name, keys and values, in order.
//!
//! The digest describes the store only until its next write, so an open
//! that finds one checks it and writes the mark back without it before
//! anything writes (see [`super::damage::check_content`]); a crash later
//! leaves a mark without a digest, and only the sequence is checked.

use std::fmt;

/// What a store held: its entries, and a hash of all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Content {
    /// Entries in every tree but sled's own default one.
    pub(crate) entries: u64,
    /// BLAKE3 of each non-empty tree's name, then its keys and values,
    /// each prefixed with its length, trees in name order.
    pub(crate) hash: [u8; 32],
}

impl Content {
    /// Reads every tree of `db`: as long as a scan of the whole store.
    pub(crate) fn of(db: &sled::Db) -> Result<Content, sled::Error> {
        let mut names: Vec<sled::IVec> = db.tree_names();
        names.sort();
        let mut hasher = blake3::Hasher::new();
        let mut entries = 0u64;
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
            }
        }
        Ok(Content {
            entries,
            hash: *hasher.finalize().as_bytes(),
        })
    }

    /// Parses the form [`fmt::Display`] writes: `ENTRIES HASH_HEX`.
    pub(crate) fn parse(text: &str) -> Option<Content> {
        let (entries, hex) = text.trim().split_once(' ')?;
        let entries = entries.parse().ok()?;
        let hex = hex.trim();
        if hex.len() != 64 {
            return None;
        }
        let mut hash = [0u8; 32];
        for (i, byte) in hash.iter_mut().enumerate() {
            *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Content { entries, hash })
    }
}

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.entries)?;
        for b in self.hash {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

fn update(hasher: &mut blake3::Hasher, bytes: &[u8]) {
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
        assert_eq!(after.entries, 2);
        assert_ne!(after.hash, before.hash);
        t.remove("b").unwrap();
        assert_eq!(Content::of(&db).unwrap().entries, 1);
        assert_eq!(Content::parse("2 zz"), None);
        assert_eq!(Content::parse("x 00"), None);
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
