//! Telling a job's `notify` actor that its ticket ended.
//!
//! The name is looked up in ractor's registry at each notice, so a
//! scheduler that restarted (a new actor under the same name) is found. A
//! notice to a name nobody holds is dropped: the scheduler's reconciler
//! reads the done records and repairs what a lost notice left undone.

use std::sync::Arc;

use ractor::ActorRef;

use crate::queue::Completion;
use crate::scheduler::SchedulerMsg;

/// Sends `completion` to the actor named `name`, if it is alive.
pub fn completion(name: &Arc<str>, completion: Completion) {
    match ActorRef::<SchedulerMsg>::where_is(name.as_ref()) {
        Some(actor) => {
            if actor.cast(SchedulerMsg::Completed(completion)).is_err() {
                tracing::debug!(notify = %name, "notice dropped: actor stopping");
            }
        }
        None => tracing::debug!(notify = %name, "notice dropped: no actor of that name"),
    }
}
