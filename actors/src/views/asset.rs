//! Read-only views of assets, from the store alone: what `weir assets`
//! shows and the API's `GET /api/v1/assets` returns, with or without a
//! running engine. The lineage (who produces an asset, who starts on it)
//! comes from the adopted definitions; the last materialization from the
//! asset's record; the undelivered ones from the pending events.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use weir_core::graph::GraphDef;

use crate::records::asset::{AssetEvent, AssetRecord, ASSET_EVENT_PREFIX, ASSET_PREFIX};
use crate::records::graph::GraphRecord;
use crate::records::keys::{def_key, GRAPH_PREFIX};
use crate::store::{Store, StoreError};

/// A node that produces an asset.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Producer {
    /// Its graph.
    pub graph: String,
    /// The node.
    pub node: String,
}

/// An asset, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AssetView {
    /// Its name.
    pub asset: String,
    /// The nodes of adopted definitions that produce it.
    pub producers: Vec<Producer>,
    /// The adopted graphs that start on it.
    pub consumers: Vec<String>,
    /// Its last delivered materialization, if any.
    pub last: Option<AssetRecord>,
    /// Materializations not yet delivered.
    pub pending: usize,
}

/// Every asset an adopted definition names or the store has a record of,
/// by name.
pub fn assets(store: &Store) -> Result<Vec<AssetView>, StoreError> {
    let mut by: BTreeMap<String, AssetView> = BTreeMap::new();
    fn touch<'m>(by: &'m mut BTreeMap<String, AssetView>, a: &str) -> &'m mut AssetView {
        by.entry(a.to_string()).or_insert_with(|| AssetView {
            asset: a.to_string(),
            producers: Vec::new(),
            consumers: Vec::new(),
            last: None,
            pending: 0,
        })
    }
    for (key, record) in store.scan::<GraphRecord>(GRAPH_PREFIX)? {
        let graph = &key[GRAPH_PREFIX.len()..];
        let Some(def) = store.get::<GraphDef>(&def_key(&record.definition))? else {
            continue;
        };
        for n in &def.nodes {
            for a in &n.produces {
                touch(&mut by, a.as_str()).producers.push(Producer {
                    graph: graph.to_string(),
                    node: n.name.to_string(),
                });
            }
        }
        for a in &def.trigger_assets {
            touch(&mut by, a.as_str()).consumers.push(graph.to_string());
        }
    }
    for (key, record) in store.scan::<AssetRecord>(ASSET_PREFIX)? {
        let name = key[ASSET_PREFIX.len()..].to_string();
        touch(&mut by, &name).last = Some(record);
    }
    for (_, event) in store.scan::<AssetEvent>(ASSET_EVENT_PREFIX)? {
        touch(&mut by, &event.asset).pending += 1;
    }
    let mut out: Vec<AssetView> = by.into_values().collect();
    for a in &mut out {
        a.producers.sort();
        a.consumers.sort();
    }
    Ok(out)
}
