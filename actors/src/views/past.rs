//! The past of a run, for `depends_on_past`: what the store knows of the
//! previous partition's run ([`weir_core::past::Previous`]), which the
//! scheduler's gate and the run view decide on with
//! [`weir_core::past::gate`].
//!
//! The previous partition is the window before this one in the graph's
//! zone, or the run of the same key due before this one. A run is the
//! first of its graph (it waits for nothing) when the window before it is
//! before the graph's `start`, or when no run of the graph sorts before it
//! at all.

use std::sync::Arc;

use weir_core::graph::{Graph, NodeDef};
use weir_core::partition::{Partition, Partitioning};
use weir_core::past::Previous;
use weir_core::readiness::{current_records, node_states};

use crate::records::graph::GraphRunRecord;
use crate::records::keys::{def_key, run_key, runs_prefix};
use crate::store::{Store, StoreError};

use super::run::latest_node_records;

/// Gives the indexed definition of a hash, if it is stored.
pub type LoadDef<'a> = dyn FnMut(&str) -> Result<Option<Arc<Graph>>, StoreError> + 'a;

/// What node `node` of the run of `graph` at `partition` (whose definition
/// is `g`) waits on in the previous partition. `load` gives the indexed
/// definition of a hash (a caller's cache).
pub fn previous_of(
    store: &Store,
    g: &Graph,
    partition: &Partition,
    node: &NodeDef,
    load: &mut LoadDef<'_>,
) -> Result<Previous, StoreError> {
    let graph = g.name().as_str();
    let def = g.def();
    let prev = match partition.partitioning() {
        Partitioning::None => return Ok(Previous::First),
        Partitioning::Keyed => {
            let (Some(key), Some(_)) = (partition.key(), partition.at_ms()) else {
                return Ok(Previous::First);
            };
            // The newest run of the same key due before this one.
            let prefix = format!("{}key={}@", runs_prefix(graph), key.as_str());
            let upper = run_key(graph, partition);
            let (rows, _) =
                store.scan_rev::<GraphRunRecord>(&prefix, None, Some(&upper), 1, |k, _| {
                    k[runs_prefix(graph).len()..]
                        .parse::<Partition>()
                        .is_ok_and(|p| p.key() == Some(key))
                })?;
            match rows.into_iter().next() {
                Some((k, _)) => match k[runs_prefix(graph).len()..].parse::<Partition>() {
                    Ok(p) => p,
                    Err(_) => return Ok(Previous::First),
                },
                None => return Ok(Previous::First),
            }
        }
        _ => {
            let zone = def.zone();
            let Some(prev) = partition.prev(zone) else {
                return Ok(Previous::First);
            };
            if let Some(start) = def.start_ms {
                let first = Partition::of_time(def.partitioning, start, zone)
                    .and_then(|w| w.start_ms(zone))
                    .unwrap_or(start);
                if prev.start_ms(zone).is_none_or(|s| s < first) {
                    return Ok(Previous::First);
                }
            }
            if store
                .get::<GraphRunRecord>(&run_key(graph, &prev))?
                .is_none()
            {
                // No run of the window before: this is the first run unless
                // some run sorts before it.
                let (rows, _) = store.scan_rev::<GraphRunRecord>(
                    &runs_prefix(graph),
                    None,
                    Some(&run_key(graph, partition)),
                    1,
                    |_, _| true,
                )?;
                return Ok(if rows.is_empty() {
                    Previous::First
                } else {
                    Previous::Missing(prev)
                });
            }
            prev
        }
    };
    let Some(record) = store.get::<GraphRunRecord>(&run_key(graph, &prev))? else {
        return Ok(Previous::First);
    };
    let Some(pg) = load(&record.definition)? else {
        return Err(StoreError::Inconsistent {
            dir: store.dir().to_path_buf(),
            tree: "records",
            what: format!(
                "run {graph}/{prev} names definition {} which is not stored",
                record.definition
            ),
        });
    };
    let latest = latest_node_records(store, &pg, &prev)?;
    let current = current_records(&record.expected_reruns, &latest);
    let states = node_states(&pg, &current);
    // The node, and with wait_for_downstream its direct downstreams (as
    // this run's definition names them), as the previous run has them; a
    // node the previous definition lacks is nothing to wait for.
    let mut names = vec![node.name.as_str()];
    if node.wait_for_downstream {
        if let Some(i) = g.index_of(node.name.as_str()) {
            names.extend(g.downstreams(i).iter().map(|&d| g.node_at(d).name.as_str()));
        }
    }
    let wanted = names
        .iter()
        .filter_map(|n| pg.index_of(n))
        .map(|i| states[i])
        .collect();
    Ok(Previous::Run(prev, wanted))
}

/// The partition node `node` of the run at `partition` waits for
/// ([`previous_of`] decided by [`weir_core::past::gate`]); `None` when it
/// may start.
pub fn waiting_for(
    store: &Store,
    g: &Graph,
    partition: &Partition,
    node: &NodeDef,
    load: &mut LoadDef<'_>,
) -> Result<Option<Partition>, StoreError> {
    Ok(
        match weir_core::past::gate(previous_of(store, g, partition, node, load)?) {
            weir_core::past::PastGate::Wait(p) => Some(p),
            weir_core::past::PastGate::Go => None,
        },
    )
}

/// [`previous_of`]'s `load` reading definitions from the store (no cache).
pub fn load_def(store: &Store) -> impl FnMut(&str) -> Result<Option<Arc<Graph>>, StoreError> + '_ {
    move |hash: &str| {
        let Some(def) = store.get::<weir_core::graph::GraphDef>(&def_key(hash))? else {
            return Ok(None);
        };
        def.validate()
            .map(|g| Some(Arc::new(g)))
            .map_err(|e| StoreError::Inconsistent {
                dir: store.dir().to_path_buf(),
                tree: "records",
                what: format!("definition {hash}: {e}"),
            })
    }
}
