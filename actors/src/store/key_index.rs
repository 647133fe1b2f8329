//! The key index in the store: loading its runs at open and listing their
//! ids (the runs themselves, built and merged, are the `keys` module's).

use fst::Map;

use super::keys::{KeyRun, KeyRuns, RUN_PREFIX};
use super::layout::prefixed_number;
use super::{printable, Store, StoreError, SNAPSHOT};

impl Store {
    /// Reads the snapshot's runs into memory, checking each (a run that
    /// does not read, or whose checksum fails, is refused by name).
    pub(crate) fn load_key_runs(&self) -> Result<(), StoreError> {
        let mut runs = Vec::new();
        for item in self.inner.snapshot.scan_prefix([RUN_PREFIX]) {
            let (k, v) = item.map_err(|e| self.sled_err(e))?;
            let bad = |what: String| StoreError::Inconsistent {
                dir: self.dir().to_path_buf(),
                tree: SNAPSHOT,
                what: format!("key index run {}: {what}", printable(&k)),
            };
            let id =
                prefixed_number(&k).ok_or_else(|| bad("its key is not a run number".into()))?;
            let map = Map::new(v.to_vec()).map_err(|e| bad(e.to_string()))?;
            map.as_fst()
                .verify()
                .map_err(|e| bad(format!("checksum: {e}")))?;
            runs.push(KeyRun { id, map });
        }
        let loaded = KeyRuns { runs };
        tracing::debug!(
            runs = loaded.len(),
            entries = loaded.entries(),
            "key index runs loaded"
        );
        *self.key_runs_mut() = loaded;
        Ok(())
    }

    pub(crate) fn key_runs(&self) -> std::sync::RwLockReadGuard<'_, KeyRuns> {
        self.inner
            .key_runs
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn key_runs_mut(&self) -> std::sync::RwLockWriteGuard<'_, KeyRuns> {
        self.inner
            .key_runs
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The numbers of the stored runs (the index build removes what an
    /// interrupted build left).
    pub(crate) fn key_run_ids(&self) -> Result<Vec<u64>, StoreError> {
        let mut ids = Vec::new();
        for k in self.inner.snapshot.scan_prefix([RUN_PREFIX]).keys() {
            let k = k.map_err(|e| self.sled_err(e))?;
            ids.extend(prefixed_number(&k));
        }
        Ok(ids)
    }
}
