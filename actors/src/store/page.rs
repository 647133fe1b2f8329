//! Pages of records in reverse key order, for listings that show the newest
//! first (`run/<graph>/<partition>` sorts by window) without reading every
//! record: the API's run list reads one page, not 100k runs.

use serde::de::DeserializeOwned;
use weir_core::codec;

use super::{Store, StoreError, RECORDS};

impl Store {
    /// Records whose key starts with `prefix` and lies in
    /// `[lower, upper)` (either bound optional, both full keys), in
    /// reverse key order; at most `limit` of those `keep` accepts. Returns
    /// them and whether more may follow (a key was left unread).
    pub fn scan_rev<T: DeserializeOwned>(
        &self,
        prefix: &str,
        lower: Option<&str>,
        upper: Option<&str>,
        limit: usize,
        mut keep: impl FnMut(&str, &T) -> bool,
    ) -> Result<(Vec<(String, T)>, bool), StoreError> {
        let start: Vec<u8> = match lower {
            Some(l) if l.as_bytes() > prefix.as_bytes() => l.as_bytes().to_vec(),
            _ => prefix.as_bytes().to_vec(),
        };
        let prefix_end = super::kv::prefix_end(prefix.as_bytes());
        let end: Option<Vec<u8>> = match (upper, prefix_end) {
            (Some(u), Some(p)) => Some(std::cmp::min(u.as_bytes().to_vec(), p)),
            (Some(u), None) => Some(u.as_bytes().to_vec()),
            (None, p) => p,
        };
        let iter = match end {
            Some(end) => {
                if end <= start {
                    return Ok((Vec::new(), false));
                }
                self.inner.records.range(start..end)
            }
            None => self.inner.records.range(start..),
        };
        let mut out = Vec::new();
        for item in iter.rev() {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            if !k.starts_with(prefix.as_bytes()) {
                continue;
            }
            if out.len() == limit {
                return Ok((out, true));
            }
            let key = String::from_utf8_lossy(&k).into_owned();
            let value: T = codec::decode(&v).map_err(|source| StoreError::Corrupt {
                dir: self.dir().to_path_buf(),
                tree: RECORDS,
                key: key.clone(),
                source,
            })?;
            if keep(&key, &value) {
                out.push((key, value));
            }
        }
        Ok((out, false))
    }
}
