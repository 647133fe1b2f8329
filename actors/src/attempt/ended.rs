//! Where a local pool's attempt tasks leave their outcomes.
//!
//! A burst of 10,000 tasks that each sent its outcome to the pool actor
//! paid ractor's message path 10,000 times (the message moved into the
//! mailbox, the current span looked up, the actor woken), on the cores the
//! burst's later starts were waiting for: 17 % of the CPU samples of a
//! prepared burst. A task now pushes its outcome here, and only the push
//! that finds the inbox empty sends the pool one [`PoolMsg::Ended`]; the
//! pool takes everything waiting when it handles it. Push and take hold
//! the same lock, so an outcome pushed after a take sends a message of its
//! own, and none waits without one on the way.

use std::sync::{Arc, Mutex};

use ractor::ActorRef;
use weir_core::artifact::ArtifactRef;
use weir_core::queue::TicketId;
use weir_core::retry::AttemptOutcome;

use crate::msg::pool::PoolMsg;
use crate::store::BlobRef;

/// How an attempt ended, as its task saw it.
#[derive(Debug)]
pub struct Ended {
    /// The ticket.
    pub id: TicketId,
    /// The attempt (the hand-out number).
    pub attempt: u32,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// Output on success (inline).
    pub output: Vec<u8>,
    /// Output on success, written to a blob (pinned).
    pub output_blob: Option<BlobRef>,
    /// The artifacts a success stored.
    pub artifacts: Vec<ArtifactRef>,
    /// Error on failure.
    pub error: Option<String>,
    /// The least wait before a retry (a server's `Retry-After`).
    pub retry_after_ms: Option<u64>,
    /// When it started.
    pub started_ms: u64,
}

impl Ended {
    /// An attempt that ended before its task ran, with `error`.
    pub fn unrun(
        id: TicketId,
        attempt: u32,
        outcome: AttemptOutcome,
        error: String,
        started_ms: u64,
    ) -> Ended {
        Ended {
            id,
            attempt,
            outcome,
            output: Vec::new(),
            output_blob: None,
            artifacts: Vec::new(),
            error: Some(error),
            retry_after_ms: None,
            started_ms,
        }
    }
}

/// The outcomes a pool has not taken yet.
#[derive(Clone, Default)]
pub struct EndedInbox {
    waiting: Arc<Mutex<Vec<Ended>>>,
}

impl EndedInbox {
    /// Leaves `ended` for the pool `pool`, telling it if nothing else
    /// waited. A pool that stopped drops the message, as it dropped a
    /// cast outcome before: the queue requeues its attempts.
    pub fn push(&self, ended: Ended, pool: &ActorRef<PoolMsg>) {
        let first = {
            let mut waiting = self.lock();
            waiting.push(ended);
            waiting.len() == 1
        };
        if first {
            let _ = pool.cast(PoolMsg::Ended);
        }
    }

    /// Everything waiting, in the order pushed.
    pub fn take(&self) -> Vec<Ended> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Ended>> {
        // Plain pushes and takes: a panic elsewhere leaves the list whole.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ractor::{Actor, ActorProcessingErr};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Takes the inbox at each message, as the pool does.
    struct Taker;

    struct Seen {
        inbox: EndedInbox,
        messages: Arc<AtomicUsize>,
        taken: Arc<Mutex<Vec<TicketId>>>,
    }

    impl Actor for Taker {
        type Msg = PoolMsg;
        type State = Seen;
        type Arguments = Seen;

        async fn pre_start(
            &self,
            _me: ActorRef<PoolMsg>,
            seen: Seen,
        ) -> Result<Seen, ActorProcessingErr> {
            Ok(seen)
        }

        async fn handle(
            &self,
            _me: ActorRef<PoolMsg>,
            msg: PoolMsg,
            seen: &mut Seen,
        ) -> Result<(), ActorProcessingErr> {
            if let PoolMsg::Ended = msg {
                seen.messages.fetch_add(1, Ordering::SeqCst);
                let ids = seen.inbox.take().into_iter().map(|e| e.id);
                seen.taken.lock().unwrap().extend(ids);
            }
            Ok(())
        }
    }

    /// A taker spawned over a fresh inbox, with what it saw.
    struct Fixture {
        inbox: EndedInbox,
        messages: Arc<AtomicUsize>,
        taken: Arc<Mutex<Vec<TicketId>>>,
        pool: ActorRef<PoolMsg>,
        join: tokio::task::JoinHandle<()>,
    }

    impl Fixture {
        async fn spawn() -> Fixture {
            let inbox = EndedInbox::default();
            let messages = Arc::new(AtomicUsize::new(0));
            let taken = Arc::new(Mutex::new(Vec::new()));
            let seen = Seen {
                inbox: inbox.clone(),
                messages: messages.clone(),
                taken: taken.clone(),
            };
            let (pool, join) = Actor::spawn(None, Taker, seen).await.unwrap();
            Fixture {
                inbox,
                messages,
                taken,
                pool,
                join,
            }
        }

        fn push(&self, id: TicketId) {
            let e = Ended::unrun(id, 1, AttemptOutcome::Success, String::new(), 0);
            self.inbox.push(e, &self.pool);
        }

        /// Waits until `n` outcomes were taken (10 s at most).
        async fn until_taken(&self, n: usize) {
            let t0 = std::time::Instant::now();
            while self.taken.lock().unwrap().len() < n {
                assert!(t0.elapsed().as_secs() < 10, "outcomes left untaken");
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }

        fn messages(&self) -> usize {
            self.messages.load(Ordering::SeqCst)
        }

        async fn stop(self) {
            self.pool.stop(None);
            self.join.await.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_outcome_pushed_from_many_tasks_is_taken_once() {
        let f = Fixture::spawn().await;
        // 4,000 tasks on two workers, pushing as they end.
        let tasks: Vec<_> = (0..4_000u64)
            .map(|id| {
                let (inbox, pool) = (f.inbox.clone(), f.pool.clone());
                tokio::spawn(async move {
                    let e = Ended::unrun(id, 1, AttemptOutcome::Success, String::new(), 0);
                    inbox.push(e, &pool);
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        f.until_taken(4_000).await;
        let mut ids = f.taken.lock().unwrap().clone();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 4_000, "each outcome taken once");
        assert!(f.messages() >= 1);
        assert!(f.inbox.take().is_empty());
        f.stop().await;
    }

    #[tokio::test]
    async fn outcomes_pushed_before_the_pool_runs_cost_one_message() {
        let f = Fixture::spawn().await;
        // One thread, no await between the pushes: the pool cannot run.
        for id in 0..100 {
            f.push(id);
        }
        f.until_taken(100).await;
        assert_eq!(f.messages(), 1);
        assert_eq!(
            *f.taken.lock().unwrap(),
            (0..100).collect::<Vec<_>>(),
            "in the order pushed"
        );
        f.stop().await;
    }

    #[tokio::test]
    async fn a_push_after_a_take_sends_again() {
        let f = Fixture::spawn().await;
        for id in 0..3 {
            f.push(id);
            f.until_taken(id as usize + 1).await;
        }
        assert_eq!(f.messages(), 3, "one message per empty inbox");
        f.stop().await;
    }
}
