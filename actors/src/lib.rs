//! weir-actors: the ractor actors of weir and its sled store.
//!
//! `store` is the durable half (journal, snapshots, records, expiry); the
//! actors journal weir-core's decisions through it and apply them:
//!
//! ```text
//! Supervisor ─┬─ Queue            owns the journal; group commit; hands tickets to pools
//!             ├─ Pool(name, i)    bounded slots; runs tasks
//!             └─ Breaker(target)  one per target, spawned on first use
//! ```
//!
//! | sender | receiver | message | effect |
//! | --- | --- | --- | --- |
//! | engine | queue | Enqueue | journaled; answered when durable |
//! | pool | queue | Credit | the queue may hand it that many tickets |
//! | queue | pool | Run(Grant) | after the Select is durable |
//! | pool | breaker | Admit | Allowed / Probe / Denied(until) |
//! | pool | queue | Defer | breaker said no: pending again, no attempt spent |
//! | pool | queue | Report | Complete (+ done record) or Requeue, journaled |
//! | queue | pool | Acked | the report is durable; forget it |
//! | queue | scheduler | Completed | after the done record is durable |
//! | supervisor | queue | WorkerGone | a pool died: requeue its attempts |
//! | supervisor | pool | QueueRestarted | re-grant credit, resend reports |

pub mod assets;
pub mod attempt;
pub mod blocking;
pub mod breaker;
pub mod clock;
pub mod cluster;
pub mod due_starts;
pub mod event_channel;
pub mod events;
pub mod measure;
pub mod msg;
pub mod names;
pub mod notify;
pub mod pool;
pub mod protocol;
pub mod queue;
pub mod records;
pub mod scheduler;
pub mod store;
pub mod supervisor;
pub mod task;
pub mod trigger;
pub mod views;

// The done records' old path, kept for the crate's users.
pub use records::done;
