//! Telling a job's `notify` actor that its ticket ended.
//!
//! The name is looked up in ractor's registry at each notice, so a
//! scheduler that restarted (a new actor under the same name) is found. A
//! ticket journaled by an earlier engine on the same data directory names
//! that engine's scheduler, whose prefix may differ from this one's (a
//! process that opened another engine first numbers its names on), so
//! the name is read in this engine's names ([`Names::rebase`]). A notice
//! to a name nobody holds is dropped: the scheduler's reconciler reads the
//! done records and repairs what a lost notice left undone.

use std::sync::Arc;

use ractor::ActorRef;

use crate::msg::queue::{Completion, EarlyCompletion, Enqueued};
use crate::msg::scheduler::SchedulerMsg;
use crate::names::Names;

/// Sends `completion` to the actor named `name` among `names`, if it is
/// alive.
pub fn completion(names: &Names, name: &Arc<str>, completion: Completion) {
    let name = names.rebase(name);
    match scheduler(&name) {
        Some(actor) => {
            if actor.cast(SchedulerMsg::Completed(completion)).is_err() {
                tracing::debug!(notify = %name, "notice dropped: actor stopping");
            }
        }
        None => tracing::debug!(notify = %name, "notice dropped: no actor of that name"),
    }
}

/// Tells the actor named `name` among `names`, if it is alive, of a
/// success that has entered the queue's open batch and is not durable yet
/// (see [`crate::queue::QueueSettings::successors_wait_us`]); returns
/// whether it was sent, so the queue waits for an answer only then.
pub fn completing(names: &Names, name: &Arc<str>, early: EarlyCompletion) -> bool {
    scheduler(&names.rebase(name))
        .is_some_and(|actor| actor.cast(SchedulerMsg::Completing(early)).is_ok())
}

/// Gives the actor named `name` among `names`, if it is alive, the
/// durable answers of the downstreams it submitted ahead of `key`'s
/// record. A lost one costs a second submit of the same keys (answered
/// `Live`) when the success's notice comes.
pub fn presubmitted(
    names: &Names,
    name: &Arc<str>,
    key: Arc<str>,
    answers: Vec<Result<Enqueued, String>>,
) {
    if let Some(actor) = scheduler(&names.rebase(name)) {
        let _ = actor.cast(SchedulerMsg::Presubmitted(key, answers));
    }
}

/// The scheduler under `name` (already rebased), if it is alive.
fn scheduler(name: &str) -> Option<ActorRef<SchedulerMsg>> {
    ActorRef::<SchedulerMsg>::where_is(name)
}
