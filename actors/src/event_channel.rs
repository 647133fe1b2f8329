//! The engine's events channel: every subscriber receives each
//! [`EngineEvent`], until it falls the channel's capacity behind and is
//! told how many it missed (`RecvError::Lagged`).
//!
//! tokio's broadcast channel makes all its slots when it is made. A slot
//! of the event itself (112 bytes, 144 with the slot's lock and counters)
//! made the engine's 65,536 slots 9.4 MB, written at every engine start
//! (15 % of a recovery's CPU samples, `weir bench recovery`). The channel
//! holds each event once behind an `Arc`, a slot of 40 bytes, 2.6 MB in
//! all: `weir run --until-idle` peaks 6.5 MiB lower, in the same wall
//! time. A subscriber still receives its own [`EngineEvent`], cloned out
//! as before.

use std::sync::Arc;

use tokio::sync::broadcast::{self, error::RecvError, error::TryRecvError};

use crate::events::EngineEvent;

/// The sending side, cloned by every actor that reports events.
#[derive(Debug, Clone)]
pub struct EventSender(broadcast::Sender<Arc<EngineEvent>>);

impl EventSender {
    /// A channel that keeps up to `capacity` events for its slowest
    /// subscriber.
    pub fn new(capacity: usize) -> EventSender {
        EventSender(broadcast::channel(capacity).0)
    }

    /// Sends `event` to every subscriber; the number of them, or an error
    /// when there is none (the event is dropped, as no one watches).
    pub fn send(
        &self,
        event: EngineEvent,
    ) -> Result<usize, broadcast::error::SendError<Arc<EngineEvent>>> {
        self.0.send(Arc::new(event))
    }

    /// A new subscriber: it receives the events sent from now on.
    pub fn subscribe(&self) -> EventReceiver {
        EventReceiver(self.0.subscribe())
    }

    /// Subscribers now.
    pub fn receiver_count(&self) -> usize {
        self.0.receiver_count()
    }
}

/// A subscriber.
#[derive(Debug)]
pub struct EventReceiver(broadcast::Receiver<Arc<EngineEvent>>);

impl EventReceiver {
    /// The next event; `Lagged(n)` when `n` were missed, `Closed` once
    /// every sender is gone. Cancel-safe, as tokio's.
    pub async fn recv(&mut self) -> Result<EngineEvent, RecvError> {
        self.0.recv().await.map(|e| EngineEvent::clone(&e))
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<EngineEvent, TryRecvError> {
        self.0.try_recv().map(|e| EngineEvent::clone(&e))
    }

    /// Another subscriber, from the events sent from now on.
    pub fn resubscribe(&self) -> EventReceiver {
        EventReceiver(self.0.resubscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(reason: &str) -> EngineEvent {
        EngineEvent::Stopped {
            error: reason.into(),
        }
    }

    #[tokio::test]
    async fn each_subscriber_receives_each_event_and_a_slow_one_is_told_what_it_missed() {
        let tx = EventSender::new(2);
        let mut a = tx.subscribe();
        let mut b = tx.subscribe();
        assert_eq!(tx.receiver_count(), 2);
        assert_eq!(tx.send(stopped("one")).unwrap(), 2);
        assert_eq!(a.recv().await.unwrap(), stopped("one"));
        for r in ["two", "three", "four"] {
            tx.send(stopped(r)).unwrap();
        }
        // `b` kept 2 of the 4: the oldest two are gone.
        assert!(matches!(b.recv().await, Err(RecvError::Lagged(2))));
        assert_eq!(b.recv().await.unwrap(), stopped("three"));
        assert_eq!(b.try_recv().unwrap(), stopped("four"));
        assert!(matches!(b.try_recv(), Err(TryRecvError::Empty)));
        drop(tx);
        assert!(matches!(b.recv().await, Err(RecvError::Closed)));
    }
}
