//! What operators ask of a trigger: signals (one key, or every key in one
//! durable write), pause and unpause, and backfills.

use weir_core::names::Key;
use weir_core::partition::PartitionRange;
use weir_core::schedule::Signal;

use crate::events::EngineEvent;
use crate::msg::trigger::{Backfill, BackfillOrder, KeyScheduleView};

use super::backfill::backfill_key;
use super::state::{Res, TriggerState};

impl TriggerState {
    pub(super) async fn signal(
        &mut self,
        key: &Key,
        signal: &Signal,
    ) -> Res<Result<KeyScheduleView, String>> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_mut() else {
            return Ok(Err(format!(
                "graph {} is not keyed: signals need a keyed graph",
                self.graph
            )));
        };
        // A signal that moves a prepared run's instant takes the run back
        // first; one that finds it begun applies to a running key.
        if k.keys.signal_moves(key, signal, now).is_some() {
            if let Err(e) = self.withdraw_keys(Some(std::slice::from_ref(key))).await? {
                return Ok(Err(e));
            }
        }
        let k = self.keyed.as_mut().expect("checked above");
        let view = KeyScheduleView::from(k.keys.signal(key, signal, now));
        // Acknowledged only once durable.
        self.flush().await?;
        Ok(Ok(view))
    }

    /// Signals every key with a schedule; durable before it answers.
    pub(super) async fn signal_all(&mut self, signal: &Signal) -> Res<Result<Vec<String>, String>> {
        let now = self.clock.now_ms();
        let Some(k) = self.keyed.as_mut() else {
            return Ok(Err(format!(
                "graph {} is not keyed: signals need a keyed graph",
                self.graph
            )));
        };
        let keys = k.keys.keys();
        let moved: Vec<Key> = keys
            .iter()
            .filter(|key| k.keys.signal_moves(key, signal, now).is_some())
            .cloned()
            .collect();
        if let Err(e) = self.withdraw_keys(Some(&moved)).await? {
            return Ok(Err(e));
        }
        let k = self.keyed.as_mut().expect("checked above");
        for key in &keys {
            k.keys.signal(key, signal, now);
        }
        self.flush().await?;
        tracing::info!(graph = %self.graph, keys = keys.len(), source = %signal.source, immediate = signal.immediate, "every key signalled");
        Ok(Ok(keys.into_iter().map(|k| k.to_string()).collect()))
    }

    /// Pauses or unpauses: the record is durable before the answer.
    /// Returns whether it changed.
    pub(super) async fn set_paused(&mut self, paused: bool) -> Res<Result<bool, String>> {
        if self.paused == paused {
            return Ok(Ok(false));
        }
        if paused {
            // Runs prepared for instants still ahead are taken back: a
            // paused graph starts nothing by itself. Their keys are due as
            // before and are prepared again once unpaused.
            if let Err(e) = self.withdraw_prepared().await? {
                return Ok(Err(e));
            }
        }
        let record = crate::records::pause::PauseRecord {
            paused,
            changed_at_ms: self.clock.now_ms(),
        };
        self.put(
            &crate::records::pause::pause_key(self.graph.as_str()),
            &record,
        )
        .await?;
        self.paused = paused;
        tracing::info!(graph = %self.graph, paused, "graph triggers paused or unpaused");
        let _ = self.events.send(EngineEvent::GraphPaused {
            graph: self.graph.to_string(),
            paused,
        });
        Ok(Ok(true))
    }

    pub(super) async fn add_backfill(
        &mut self,
        range: PartitionRange,
        order: BackfillOrder,
    ) -> Res<Result<Backfill, String>> {
        let Some(def) = self.def.clone() else {
            return Ok(Err(format!(
                "graph {} has no adopted definition",
                self.graph
            )));
        };
        // A graph whose nodes wait for their past runs a backfill oldest
        // first: newest first would fill max_active_runs with runs waiting
        // on windows not started yet.
        let order = if order == BackfillOrder::Newest && def.nodes.iter().any(|n| n.depends_on_past)
        {
            tracing::info!(graph = %self.graph, range = %range, "backfill runs oldest first: the graph depends on its past");
            BackfillOrder::Oldest
        } else {
            order
        };
        // A backfill is identified by (graph, range): asking again for a
        // range that an unfinished backfill covers resumes that one. A
        // `weir run --backfill` restarted after a crash asks again every
        // time; each ask must not leak a backfill.
        let covers = |b: &Backfill| {
            let z = def.zone();
            let (Some(bf), Some(bt), Some(rf), Some(rt)) = (
                b.from.start_ms(z),
                b.to.start_ms(z),
                range.from.start_ms(z),
                range.to.start_ms(z),
            ) else {
                return b.from == range.from && b.to == range.to;
            };
            b.from.partitioning() == range.from.partitioning() && bf <= rf && rt <= bt
        };
        if let Some(b) = self.backfills.backfills.iter().find(|b| covers(b)) {
            tracing::info!(graph = %self.graph, backfill = b.id, range = %range, "backfill asked for again; resuming the one in progress");
            return Ok(Ok(b.clone()));
        }
        if self.backfills.backfills.len() >= self.settings.backfills_max {
            return Ok(Err(format!(
                "graph {}: {} backfills are in progress, the most allowed",
                self.graph, self.settings.backfills_max
            )));
        }
        // Ends named as the graph's zone names them (`2026-10-25T01` in
        // Berlin is `2026-10-25T01:00+02:00`), so a backfill is identified
        // by one text whatever way it was asked for.
        let range = match (range.from.in_zone(def.zone()), range.to.in_zone(def.zone())) {
            (Ok(from), Ok(to)) => PartitionRange { from, to },
            (Err(e), _) | (_, Err(e)) => {
                return Ok(Err(format!("graph {}: backfill {range}: {e}", self.graph)))
            }
        };
        let windows = match range.windows(
            def.partitioning,
            self.settings.backfill_windows_max,
            def.zone(),
        ) {
            Ok(w) => w.len() as u64,
            Err(e) => return Ok(Err(format!("graph {}: backfill {range}: {e}", self.graph))),
        };
        self.backfills.next_id += 1;
        let b = Backfill {
            id: self.backfills.next_id,
            from: range.from,
            to: range.to,
            order,
            windows,
            cursor: 0,
            started: 0,
            skipped: 0,
            requested_at_ms: self.clock.now_ms(),
        };
        self.backfills.backfills.push(b.clone());
        let record = self.backfills.clone();
        self.put(&backfill_key(self.graph.as_str()), &record)
            .await?;
        tracing::info!(graph = %self.graph, backfill = b.id, range = %b.range(), order = ?order, windows, "backfill asked for");
        Ok(Ok(b))
    }
}
