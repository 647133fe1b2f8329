//! Inventory loads: a load runs on its own task and reports back; the
//! first load must succeed, a later failure keeps the previous keys and is
//! reported; the change becomes the keys' schedules, durably.

use ractor::ActorRef;
use rand::Rng;
use weir_core::names::Key;

use crate::events::EngineEvent;
use crate::msg::trigger::TriggerMsg;

use super::keyed::{inventory_key, InventoryRecord};
use super::state::{Res, TriggerState};

impl TriggerState {
    /// Spawns an inventory load, unless one runs; its result comes back as
    /// `InventoryLoaded`.
    pub(super) fn start_load(&mut self, myself: &ActorRef<TriggerMsg>) {
        let Some(k) = self.keyed.as_mut() else {
            return;
        };
        if k.loading {
            return;
        }
        k.loading = true;
        let source = k.keys.spec.inventory.clone();
        let limits = self.settings.inventory_limits();
        let me = myself.clone();
        let graph = self.graph.clone();
        tokio::spawn(async move {
            let r = super::inventory::load(&source, &limits)
                .await
                .map_err(|e| format!("graph {graph}: {e}"));
            let _ = me.cast(TriggerMsg::InventoryLoaded(r));
        });
    }

    pub(super) async fn inventory_loaded(&mut self, result: Result<Vec<Key>, String>) -> Res<()> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_mut() else {
            return Ok(());
        };
        let waiters = std::mem::take(&mut k.waiters);
        let refresh = k.keys.spec.refresh_ms.max(1);
        match result {
            Ok(keys) => {
                // Keys no longer listed whose prepared runs wait: withdrawn
                // first, so a removed key does not run at its instant.
                let listed: std::collections::HashSet<&Key> = keys.iter().collect();
                let removed: Vec<Key> = k
                    .keys
                    .waiting(now, None)
                    .into_iter()
                    .map(|(key, _)| key)
                    .filter(|key| !listed.contains(key))
                    .collect();
                drop(listed);
                if let Err(e) = self.withdraw_keys(Some(&removed)).await? {
                    tracing::warn!(graph = %self.graph, error = %e, keys = removed.len(), "prepared runs of keys removed from the inventory not withdrawn; they run as started ones would");
                }
                let k = self.keyed.as_mut().expect("checked above");
                let rng = &mut self.rng;
                let change = k.keys.apply_inventory(keys, now, || rng.gen());
                k.loaded_at_ms = Some(now);
                k.next_refresh_ms = now.saturating_add(refresh);
                self.flush().await?;
                let record = InventoryRecord {
                    loaded_at_ms: now,
                    keys: change.keys as u64,
                };
                self.put(&inventory_key(self.graph.as_str()), &record)
                    .await?;
                if change.added > 0 || change.removed > 0 {
                    tracing::info!(graph = %self.graph, keys = change.keys, added = change.added, removed = change.removed, "inventory changed");
                }
                let _ = self.events.send(EngineEvent::InventoryLoaded {
                    graph: self.graph.to_string(),
                    keys: change.keys,
                    added: change.added,
                    removed: change.removed,
                });
                for w in waiters {
                    let _ = w.send(Ok(change.clone()));
                }
            }
            Err(error) => {
                // A failed reload must not stop scheduled runs: the keys
                // of the last good load stay. Before any good load there
                // are none, so it is tried again sooner.
                let kept = k.keys.len();
                let retry = if k.loaded_at_ms.is_some() {
                    refresh
                } else {
                    self.settings.inventory_retry_ms.clamp(1, refresh)
                };
                k.next_refresh_ms = now.saturating_add(retry);
                tracing::error!(graph = %self.graph, error = %error, keys_kept = kept, "inventory load failed; keeping the previous keys");
                let _ = self.events.send(EngineEvent::InventoryFailed {
                    graph: self.graph.to_string(),
                    error: error.clone(),
                    keys_kept: kept,
                });
                for w in waiters {
                    let _ = w.send(Err(error.clone()));
                }
            }
        }
        Ok(())
    }
}
