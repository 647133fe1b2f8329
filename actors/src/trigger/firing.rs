//! Cron firings: each firing starts the run of the window it closes
//! (after downtime, the newest missed one or every one, by the graph's
//! catch-up rule); the windows of a firing due within the preparation
//! horizon are prepared ahead.

use crate::events::EngineEvent;

use super::cron::cron_key;
use super::state::{start_window_ms, Res, TriggerState};

impl TriggerState {
    /// Handles the cron firings due at `now`: their windows join `pending`
    /// and the firing is recorded, in one write.
    pub(super) async fn fire_cron(&mut self, now: u64) -> Res<()> {
        let Some(def) = self.def.clone() else {
            return Ok(());
        };
        let Some(c) = self.cron.as_mut() else {
            return Ok(());
        };
        let due = super::cron::due_firings(
            &c.schedule,
            c.record.last_firing_ms,
            now,
            c.catchup,
            self.settings.cron_catchup_max,
        );
        let Some(&newest) = due.firings.last() else {
            return Ok(());
        };
        let mut windows = super::cron::windows_closed(&c.schedule, def.partitioning, &due.firings);
        if let Some(start) = def.start_ms {
            // No window before the start date, ever.
            windows.retain(|w| {
                w.start_ms(def.zone())
                    .is_some_and(|ms| ms >= start_window_ms(&def, start))
            });
        }
        if due.older_dropped {
            tracing::warn!(
                graph = %self.graph,
                catchup = c.catchup,
                "older missed cron firings were not started"
            );
        }
        tracing::info!(graph = %self.graph, firing_ms = newest, windows = windows.len(), "cron fired");
        for w in &windows {
            if !c.record.pending.contains(w) {
                c.record.pending.push(w.clone());
            }
        }
        c.record.last_firing_ms = newest;
        let record = c.record.clone();
        let _ = self.events.send(EngineEvent::CronFired {
            graph: self.graph.to_string(),
            firing_ms: newest,
            windows: windows.iter().map(|p| p.to_string()).collect(),
            older_dropped: due.older_dropped,
        });
        self.put(&cron_key(self.graph.as_str()), &record).await
    }

    /// The next cron firing, when it falls within the preparation horizon
    /// and is not prepared yet.
    pub(super) fn cron_to_prepare(&self, now: u64) -> Option<u64> {
        let c = self.cron.as_ref()?;
        if self.settings.prepare_ahead_ms == 0 {
            return None;
        }
        let next = c.schedule.next_after(c.record.last_firing_ms.max(now))?;
        let prepared = self
            .cron_prepared
            .as_ref()
            .is_some_and(|(at, _)| *at == next);
        (!prepared).then_some(next)
    }

    /// Prepares the windows the next cron firing closes, when it is within
    /// the horizon and the graph has room: at the firing they are started
    /// as always, which finds them prepared.
    pub(super) async fn prepare_cron(&mut self, now: u64) -> Res<()> {
        let Some(next) = self.cron_to_prepare(now) else {
            return Ok(());
        };
        if next > now.saturating_add(self.settings.prepare_ahead_ms) {
            return Ok(());
        }
        let (Some(def), Some(c)) = (self.def.clone(), self.cron.as_ref()) else {
            return Ok(());
        };
        let mut windows = super::cron::windows_closed(&c.schedule, def.partitioning, &[next]);
        if let Some(start) = def.start_ms {
            windows.retain(|w| {
                w.start_ms(def.zone())
                    .is_some_and(|ms| ms >= start_window_ms(&def, start))
            });
        }
        let Some(active) = self.active_runs().await else {
            return Ok(());
        };
        let room = (def.max_active_runs as usize).saturating_sub(active);
        if windows.len() > room {
            // Started at the firing, as they would be without preparation.
            self.cron_prepared = Some((next, Vec::new()));
            return Ok(());
        }
        let runs = windows.iter().map(|w| (w.clone(), next)).collect();
        if self.prepare(runs).await?.is_some() {
            tracing::debug!(graph = %self.graph, firing_ms = next, windows = windows.len(), "cron windows prepared");
            self.cron_prepared = Some((next, windows));
        }
        Ok(())
    }
}
