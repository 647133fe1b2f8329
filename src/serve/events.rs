//! The event stream the API serves: engine events numbered and kept in a
//! bounded ring, so a client that reconnects with `Last-Event-ID` gets what
//! it missed.
//!
//! Ids are `<epoch>-<seq>`: the epoch is the engine's start instant, so an
//! id from an earlier engine (or one that has left the ring) is recognised
//! and the client is told to `reset` (refetch its state) instead of being
//! silently given a gap.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::broadcast;

use crate::EngineEvent;
use weir_actors::event_channel::EventReceiver;

/// Events kept for resuming clients.
pub const EVENT_RING_MAX: usize = 10_000;
/// Events buffered per live subscriber before it lags (and is reset).
pub const EVENT_FANOUT_BUFFER: usize = 16_384;

/// One numbered event.
#[derive(Debug, Clone, Serialize)]
pub struct Numbered {
    /// Its sequence number within this engine's life.
    pub seq: u64,
    /// The event's kind (its variant name).
    pub kind: &'static str,
    /// The event.
    pub event: EngineEvent,
}

/// Numbers engine events and keeps the newest.
#[derive(Clone)]
pub struct EventHub {
    epoch: u64,
    inner: Arc<Mutex<Ring>>,
    tx: broadcast::Sender<Arc<Numbered>>,
}

struct Ring {
    next_seq: u64,
    events: VecDeque<Arc<Numbered>>,
}

/// What a resuming client gets first.
pub enum Resume {
    /// The events after its id, all still in the ring.
    Replay(Vec<Arc<Numbered>>),
    /// Its id is from another engine or has left the ring: refetch.
    Reset,
}

/// The name of an event's variant.
pub fn kind(e: &EngineEvent) -> &'static str {
    match e {
        EngineEvent::Enqueued { .. } => "enqueued",
        EngineEvent::Started { .. } => "started",
        EngineEvent::Retrying { .. } => "retrying",
        EngineEvent::Deferred { .. } => "deferred",
        EngineEvent::Poked { .. } => "poked",
        EngineEvent::Completed { .. } => "completed",
        EngineEvent::Breaker { .. } => "breaker",
        EngineEvent::Restarted { .. } => "restarted",
        EngineEvent::RunStarted { .. } => "run_started",
        EngineEvent::RunSettled { .. } => "run_settled",
        EngineEvent::SlaMissed { .. } => "sla_missed",
        EngineEvent::NodeChanged { .. } => "node_changed",
        EngineEvent::MemberEnded { .. } => "member_ended",
        EngineEvent::AssetMaterialized { .. } => "asset_materialized",
        EngineEvent::AssetTriggered { .. } => "asset_triggered",
        EngineEvent::Reconciled { .. } => "reconciled",
        EngineEvent::Expired { .. } => "expired",
        EngineEvent::InventoryLoaded { .. } => "inventory_loaded",
        EngineEvent::InventoryFailed { .. } => "inventory_failed",
        EngineEvent::CronFired { .. } => "cron_fired",
        EngineEvent::BackfillDone { .. } => "backfill_done",
        EngineEvent::GraphPaused { .. } => "graph_paused",
        EngineEvent::DeadRequeued { .. } => "dead_requeued",
        EngineEvent::WorkerJoined { .. } => "worker_joined",
        EngineEvent::WorkerLost { .. } => "worker_lost",
        EngineEvent::WorkerLeft { .. } => "worker_left",
        EngineEvent::ReportRefused { .. } => "report_refused",
        EngineEvent::Stopped { .. } => "stopped",
    }
}

impl EventHub {
    /// A hub for an engine that started at `epoch` (ms).
    pub fn new(epoch: u64) -> EventHub {
        let (tx, _) = broadcast::channel(EVENT_FANOUT_BUFFER);
        EventHub {
            epoch,
            inner: Arc::new(Mutex::new(Ring {
                next_seq: 1,
                events: VecDeque::with_capacity(1024),
            })),
            tx,
        }
    }

    /// The engine epoch in ids.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// An event's id.
    pub fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.epoch)
    }

    /// Numbers `event`, keeps it and sends it to live subscribers.
    pub fn push(&self, event: EngineEvent) {
        let numbered = {
            let mut ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let n = Arc::new(Numbered {
                seq: ring.next_seq,
                kind: kind(&event),
                event,
            });
            ring.next_seq += 1;
            if ring.events.len() == EVENT_RING_MAX {
                ring.events.pop_front();
            }
            ring.events.push_back(n.clone());
            n
        };
        let _ = self.tx.send(numbered);
    }

    /// Subscribes live, and says what to replay first for `last_id`. The
    /// subscription is taken before the ring is read, so nothing falls in
    /// between (an event in both is skipped by its sequence number).
    pub fn subscribe(&self, last_id: Option<&str>) -> (Resume, broadcast::Receiver<Arc<Numbered>>) {
        let rx = self.tx.subscribe();
        let ring = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some(last) = last_id else {
            return (Resume::Replay(Vec::new()), rx);
        };
        let parsed = last
            .split_once('-')
            .and_then(|(e, s)| Some((e.parse::<u64>().ok()?, s.parse::<u64>().ok()?)));
        let Some((epoch, seq)) = parsed else {
            return (Resume::Reset, rx);
        };
        if epoch != self.epoch || seq >= ring.next_seq {
            return (Resume::Reset, rx);
        }
        let oldest = ring.events.front().map_or(ring.next_seq, |e| e.seq);
        if seq + 1 < oldest {
            return (Resume::Reset, rx);
        }
        let replay = ring
            .events
            .iter()
            .filter(|e| e.seq > seq)
            .cloned()
            .collect();
        (Resume::Replay(replay), rx)
    }

    /// Feeds the hub from an engine subscription until it closes.
    pub fn pump(&self, mut rx: EventReceiver) -> tokio::task::JoinHandle<()> {
        let hub = self.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(e) => hub.push(e),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "event stream lagged behind the engine");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(n: usize) -> EngineEvent {
        EngineEvent::Expired { records: n }
    }

    #[test]
    fn an_event_serializes_flat_under_its_snake_case_kind() {
        let events = [
            ev(3),
            EngineEvent::RunStarted {
                graph: "g".into(),
                partition: "none".into(),
            },
            EngineEvent::Poked {
                key: "g/none/a/0".into(),
                id: 4,
                due_ms: 9,
                seen: "no file".into(),
            },
            EngineEvent::WorkerLost {
                worker: "w1".into(),
                reason: "silent".into(),
            },
        ];
        for e in events {
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["kind"], kind(&e), "{v}");
            let back: EngineEvent = serde_json::from_value(v).unwrap();
            assert_eq!(back, e);
        }
        let v = serde_json::to_value(ev(3)).unwrap();
        assert_eq!(v, serde_json::json!({"kind": "expired", "records": 3}));
    }

    #[test]
    fn resume_replays_what_was_missed_and_resets_otherwise() {
        let hub = EventHub::new(7);
        for i in 0..5 {
            hub.push(ev(i));
        }
        let (r, _) = hub.subscribe(Some("7-3"));
        match r {
            Resume::Replay(v) => assert_eq!(v.iter().map(|e| e.seq).collect::<Vec<_>>(), [4, 5]),
            Resume::Reset => panic!("id 7-3 is in the ring"),
        }
        assert!(
            matches!(hub.subscribe(Some("6-3")).0, Resume::Reset),
            "other epoch"
        );
        assert!(
            matches!(hub.subscribe(Some("7-99")).0, Resume::Reset),
            "future id"
        );
        assert!(matches!(hub.subscribe(Some("garbage")).0, Resume::Reset));
        for i in 0..EVENT_RING_MAX {
            hub.push(ev(i));
        }
        assert!(
            matches!(hub.subscribe(Some("7-1")).0, Resume::Reset),
            "left the ring"
        );
    }
}
