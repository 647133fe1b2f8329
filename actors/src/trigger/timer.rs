//! The trigger's clock and its writes: one timer armed for the earliest
//! instant anything falls due, a wake soon after a change, and the durable
//! writes of its records (flushed before anything they decide is done).

use std::time::Duration;

use ractor::ActorRef;
use serde::Serialize;

use crate::msg::trigger::TriggerMsg;
use crate::store::StoreError;

use super::keyed::sched_key;
use super::state::{Res, TriggerState};

impl TriggerState {
    pub(super) fn wake_soon(&mut self, myself: &ActorRef<TriggerMsg>) {
        if !self.wake_queued {
            self.wake_queued = true;
            let _ = myself.cast(TriggerMsg::Wake);
        }
    }

    /// One pass: reload the inventory if due, handle cron firings, repair,
    /// start what has room, write changed schedules, re-arm the timer.
    pub(super) async fn tick(&mut self, myself: &ActorRef<TriggerMsg>) -> Res<()> {
        let now = self.clock.now_ms();
        if let Some(k) = &self.keyed {
            if !k.loading && now >= k.next_refresh_ms {
                self.start_load(myself);
            }
        }
        if !self.paused {
            self.fire_cron(now).await?;
            self.prepare_cron(now).await?;
        }
        let repair_due = self.repair_now
            || now
                >= self
                    .last_repair_ms
                    .saturating_add(self.settings.repair_interval_ms);
        if repair_due {
            self.repair(now).await?;
        }
        if self.paused {
            self.waiting_for_room = false;
        } else if self.retry_at_ms.is_none_or(|at| now >= at) {
            self.retry_at_ms = None;
            self.start_due(myself, now).await?;
        }
        self.flush().await?;
        self.arm(myself);
        Ok(())
    }

    /// Re-arms the timer at the earliest instant something is due.
    pub(super) fn arm(&mut self, myself: &ActorRef<TriggerMsg>) {
        let now = self.clock.now_ms();
        let mut at: Option<u64> = None;
        let mut consider = |t: u64| at = Some(at.map_or(t, |a| a.min(t)));
        let paused = self.paused;
        if let Some(c) = self.cron.as_ref().filter(|_| !paused) {
            if let Some(next) = c.schedule.next_after(c.record.last_firing_ms.max(now)) {
                consider(next);
            }
        }
        if let Some(next) = self.cron_to_prepare(now).filter(|_| !paused) {
            consider(next.saturating_sub(self.settings.prepare_ahead_ms));
        }
        if let Some(k) = &self.keyed {
            if !k.loading {
                consider(k.next_refresh_ms);
            }
            if let Some(t) = k.keys.next_claimable().filter(|_| !paused) {
                // Prepared ahead of the instant; keys due with no room wait
                // for a settle (or the repair).
                let t = t.saturating_sub(self.settings.prepare_ahead_ms);
                if !(self.waiting_for_room && t <= now) {
                    consider(t);
                }
            }
            if k.keys.any_leased() {
                consider(
                    self.last_repair_ms
                        .saturating_add(self.settings.repair_interval_ms),
                );
            }
        }
        if self.waiting_for_room {
            consider(now.saturating_add(self.settings.repair_interval_ms));
        }
        if let Some(t) = self.retry_at_ms {
            consider(t);
        }
        let Some(at) = at else {
            if let Some((_, t)) = self.timer.take() {
                t.abort();
            }
            return;
        };
        if let Some((armed, t)) = &self.timer {
            if *armed == at && !t.is_finished() {
                return;
            }
        }
        if let Some((_, t)) = self.timer.take() {
            t.abort();
        }
        let delay = Duration::from_millis(at.saturating_sub(now));
        self.timer = Some((at, myself.send_after(delay, || TriggerMsg::Wake)));
    }

    /// Writes the key schedules that changed, in batches of at most
    /// `write_batch_max` (one durable sync each).
    pub(super) async fn flush(&mut self) -> Res<()> {
        let Some(k) = self.keyed.as_mut() else {
            return Ok(());
        };
        if !k.keys.has_changes() {
            return Ok(());
        }
        let store = self.store.clone();
        let (puts, deletes) = k.keys.take_changes(|r| store.encode("key schedule", r))?;
        let graph = self.graph.to_string();
        let batch_max = self.settings.write_batch_max.max(1);
        crate::blocking::run(move || {
            let mut puts = puts.into_iter();
            let mut deletes = deletes.into_iter();
            loop {
                let p: Vec<(String, Vec<u8>)> = puts
                    .by_ref()
                    .take(batch_max)
                    .map(|(k, v)| (sched_key(&graph, &k), v))
                    .collect();
                let d: Vec<String> = deletes
                    .by_ref()
                    .take(batch_max - p.len())
                    .map(|k| sched_key(&graph, &k))
                    .collect();
                if p.is_empty() && d.is_empty() {
                    break;
                }
                store.put_batch(&p, &d)?;
            }
            Ok::<_, StoreError>(())
        })
        .await??;
        Ok(())
    }

    pub(super) async fn put<T: Serialize>(&self, key: &str, value: &T) -> Res<()> {
        let bytes = self.store.encode(key, value)?;
        let store = self.store.clone();
        let key = key.to_string();
        crate::blocking::run(move || store.put_batch(&[(key, bytes)], &[])).await??;
        Ok(())
    }
}
