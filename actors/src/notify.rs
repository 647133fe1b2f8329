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

use crate::names::Names;
use crate::queue::Completion;
use crate::scheduler::SchedulerMsg;

/// Sends `completion` to the actor named `name` among `names`, if it is
/// alive.
pub fn completion(names: &Names, name: &Arc<str>, completion: Completion) {
    let name = names.rebase(name);
    match ActorRef::<SchedulerMsg>::where_is(&*name) {
        Some(actor) => {
            if actor.cast(SchedulerMsg::Completed(completion)).is_err() {
                tracing::debug!(notify = %name, "notice dropped: actor stopping");
            }
        }
        None => tracing::debug!(notify = %name, "notice dropped: no actor of that name"),
    }
}
