//! Runs that settled, routed to their graph's trigger: one subscription to
//! the engine's events for all the triggers of an engine.
//!
//! A trigger learns that a run of its graph settled from the engine's
//! `RunSettled` events. When each trigger subscribed to the engine's
//! broadcast itself, every event of the engine (enqueues, starts,
//! completions, node changes, a dozen per attempt) was cloned into every
//! trigger's forwarding task and woke it, to be dropped there unless it was
//! a settle of that graph: with a hundred graphs, a hundred wake-ups per
//! event, a fifth of a simulation's time. The hub reads the engine's events
//! once and hands each settle to the one graph it names, on a small
//! broadcast channel per graph that the graph's trigger subscribes to.
//!
//! What the trigger sees is unchanged: every settle of its graph sent after
//! it subscribed (a settle sent a moment before may also arrive; handling
//! one twice is harmless), and a lag when it missed some — its own channel
//! lagged, or the hub's subscription did, which the hub passes on to every
//! graph as [`Settled::Lagged`]. Either way the trigger repairs from the
//! store. The hub's task ends when the engine's event channel closes or the
//! hub is dropped (with its supervisor).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use crate::event_channel::EventSender;
use crate::events::EngineEvent;

/// Settles held for one graph's trigger before it lags (and repairs).
pub const SETTLED_PER_GRAPH_MAX: usize = 1_024;

/// What a graph's trigger hears from the hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// A run of the graph settled.
    Run {
        /// The partition.
        partition: String,
        /// complete, failed or cancelled.
        state: String,
    },
    /// The hub missed engine events: some settles may be lost.
    Lagged,
}

type Routes = Arc<Mutex<HashMap<String, broadcast::Sender<Settled>>>>;

/// The router of an engine's settles (see the module doc).
pub struct SettledHub {
    routes: Routes,
    router: JoinHandle<()>,
}

impl SettledHub {
    /// Subscribes to `events` now and routes its settles from then on.
    /// Must be called within a tokio runtime (it spawns the router).
    pub fn new(events: &EventSender) -> SettledHub {
        let mut rx = events.subscribe();
        let routes = Routes::default();
        let table = routes.clone();
        let router = tokio::spawn(async move {
            loop {
                let settled = match rx.recv().await {
                    Ok(EngineEvent::RunSettled {
                        graph,
                        partition,
                        state,
                    }) => Some((graph, Settled::Run { partition, state })),
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "settle router missed engine events");
                        None
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let table = table.lock().unwrap_or_else(|p| p.into_inner());
                match settled {
                    Some((graph, s)) => {
                        if let Some(tx) = table.get(&graph) {
                            // No receiver (its trigger is down) is fine:
                            // a trigger repairs from the store at start.
                            let _ = tx.send(s);
                        }
                    }
                    None => {
                        for tx in table.values() {
                            let _ = tx.send(Settled::Lagged);
                        }
                    }
                }
            }
        });
        SettledHub { routes, router }
    }

    /// The settles of `graph` from now on.
    pub fn subscribe(&self, graph: &str) -> broadcast::Receiver<Settled> {
        let mut table = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        table
            .entry(graph.to_string())
            .or_insert_with(|| broadcast::channel(SETTLED_PER_GRAPH_MAX).0)
            .subscribe()
    }
}

impl Drop for SettledHub {
    fn drop(&mut self) {
        self.router.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled(graph: &str, partition: &str) -> EngineEvent {
        EngineEvent::RunSettled {
            graph: graph.into(),
            partition: partition.into(),
            state: "complete".into(),
        }
    }

    #[tokio::test]
    async fn each_graph_hears_only_its_settles() {
        let events = EventSender::new(16);
        let hub = SettledHub::new(&events);
        let mut a = hub.subscribe("a");
        let mut b = hub.subscribe("b");
        events
            .send(EngineEvent::Restarted {
                role: "queue".into(),
                error: "x".into(),
            })
            .unwrap();
        events.send(settled("b", "p1")).unwrap();
        events.send(settled("a", "p2")).unwrap();
        events.send(settled("c", "p3")).unwrap();
        let run = |p: &str| Settled::Run {
            partition: p.into(),
            state: "complete".into(),
        };
        assert_eq!(a.recv().await.unwrap(), run("p2"));
        assert_eq!(b.recv().await.unwrap(), run("p1"));
        drop(events);
        tokio::task::yield_now().await;
        assert!(a.try_recv().is_err(), "a heard nothing else");
    }

    #[tokio::test]
    async fn a_lagged_hub_tells_every_graph() {
        let events = EventSender::new(2);
        let hub = SettledHub::new(&events);
        let mut a = hub.subscribe("a");
        // Three sends before the router runs: it lags by one.
        for p in ["p1", "p2", "p3"] {
            events.send(settled("a", p)).unwrap();
        }
        assert_eq!(a.recv().await.unwrap(), Settled::Lagged);
    }
}
