//! A pool handed a ticket it has no free slot for gives it back as a
//! bounce, not as a breaker's deferral (faults #2): the two are logged
//! and counted apart, and neither spends an attempt.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use weir_actors::clock::Clock;
use weir_actors::msg::cluster::LinkMsg;
use weir_actors::msg::pool::PoolMsg;
use weir_actors::msg::work::{DeferCause, Grant, PoolUp};
use weir_actors::pool::{PoolActor, PoolArgs, Uplink};
use weir_actors::task::TaskRegistry;
use weir_core::queue::Job;

/// Stands in for a worker's link: keeps what the pool says.
struct Link;

impl Actor for Link {
    type Msg = LinkMsg;
    type State = Arc<Mutex<Vec<PoolUp>>>;
    type Arguments = Arc<Mutex<Vec<PoolUp>>>;

    async fn pre_start(
        &self,
        _: ActorRef<LinkMsg>,
        said: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(said)
    }

    async fn handle(
        &self,
        _: ActorRef<LinkMsg>,
        msg: LinkMsg,
        said: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let LinkMsg::FromPool { up, .. } = msg {
            said.lock().unwrap().push(up);
        }
        Ok(())
    }
}

async fn until(said: &Arc<Mutex<Vec<PoolUp>>>, what: &str, f: impl Fn(&PoolUp) -> bool) -> PoolUp {
    for _ in 0..500 {
        if let Some(up) = said.lock().unwrap().iter().find(|u| f(u)) {
            return up.clone();
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the pool never said {what}: {:?}", said.lock().unwrap());
}

#[tokio::test]
async fn a_grant_with_no_free_slot_is_a_bounce_not_a_breaker_deferral() {
    let said = Arc::new(Mutex::new(Vec::new()));
    let (link, _) = Actor::spawn(None, Link, said.clone()).await.unwrap();
    let (pool, _) = Actor::spawn(
        None,
        PoolActor,
        PoolArgs {
            pool: Arc::from("p"),
            worker_id: Arc::from("w.p.0"),
            capacity: 1,
            tasks: TaskRegistry::default(),
            uplink: Uplink::Remote { link: link.clone() },
            clock: Clock::system(),
            output_bytes_max: 1 << 20,
        },
    )
    .await
    .unwrap();
    pool.cast(PoolMsg::QueueRestarted).unwrap();
    until(&said, "its credit", |u| {
        matches!(u, PoolUp::Credit { slots: 1 })
    })
    .await;
    // The pool shrinks to nothing; a grant made on the old credit arrives.
    pool.cast(PoolMsg::Resize(0)).unwrap();
    pool.cast(PoolMsg::Run(Grant {
        id: 7,
        attempt: 1,
        job: Job::new("k", "t", "p"),
        lease_until_ms: u64::MAX,
        task_attempt: 1,
        not_before_ms: None,
    }))
    .unwrap();
    let up = until(&said, "the ticket back", |u| {
        matches!(u, PoolUp::Defer { .. })
    })
    .await;
    assert!(
        matches!(
            up,
            PoolUp::Defer {
                id: 7,
                attempt: 1,
                cause: DeferCause::NoSlot,
                ..
            }
        ),
        "{up:?}"
    );
    assert!(
        !said
            .lock()
            .unwrap()
            .iter()
            .any(|u| matches!(u, PoolUp::Report(_))),
        "nothing ran"
    );
    pool.stop(None);
    link.stop(None);
}
