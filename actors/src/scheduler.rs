//! The scheduler actor of a graph (being built): its message type is fixed
//! here because the queue notifies it of completions.

use crate::queue::Completion;

/// Messages of a graph's scheduler.
pub enum SchedulerMsg {
    /// A ticket of this graph ended.
    Completed(Completion),
}

impl ractor::Message for SchedulerMsg {}
