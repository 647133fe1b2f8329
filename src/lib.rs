//! weir: a durable workflow and job orchestrator, built as a tree of ractor
//! actors over an embedded sled journal.
//!
//! `weir-core` decides, `weir-actors` journals and applies, and this crate
//! assembles them: the [`Engine`] that applications embed, the command line
//! and its benchmarks.

pub use weir_actors as actors;
pub use weir_core as core;

/// The README, whose Rust snippet (embedding an engine) is compiled by
/// `cargo test` as a doc test: it cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctest;

pub mod artifacts;
mod assets;
pub mod backup;
pub mod bench;
pub mod cli;
pub mod cluster_tasks;
pub mod definition;
mod engine;
pub mod exit;
#[doc(hidden)]
pub mod fuzzing;
mod graphs;
pub mod logs;
pub mod objects;
mod ops;
pub mod replica;
pub mod serve;
pub mod simulate;
pub mod task;
pub mod trace;
mod triggers;
pub mod ui;
pub mod worker;

pub use engine::{ClusterConfig, Engine, EngineBuilder, EngineError, CALL_TIMEOUT};
pub use graphs::AdoptOutcome;
pub use ops::{MarkAs, MarkOutcome, RequeueOutcome, TriggerNowOutcome};
pub use weir_actors::assets::records::AssetRecord;
pub use weir_actors::assets::view::{AssetView, Producer};
pub use weir_actors::breaker::BreakerView;
pub use weir_actors::cluster::{ClusterSettings, WorkerState, WorkerView};
pub use weir_actors::done::{DeadLetter, DeadLetterPage};
pub use weir_actors::done::{DoneRecord, DoneStatus};
pub use weir_actors::events::EngineEvent;
pub use weir_actors::queue::{
    Cancelled, Enqueued, LiveTicket, QueueSettings, QueueStatus, TicketFilter, TicketView,
};
pub use weir_actors::scheduler::records::{RunState, TaskInput, UpstreamRecord};
pub use weir_actors::scheduler::view::{GraphRunView, NodeView, RunSummary};
pub use weir_actors::scheduler::{ReconcileReport, RerunOutcome, SchedulerSettings, StartOutcome};
pub use weir_actors::store::{Durability, StoreSettings};
pub use weir_actors::supervisor::SupervisorSettings;
pub use weir_actors::task::{Task, TaskContext, TaskError, TaskRegistry, TaskResult};
pub use weir_actors::trigger::backfill::{Backfill, BackfillOrder};
pub use weir_actors::trigger::keyed::{InventoryChange, KeyScheduleView};
pub use weir_actors::trigger::{TriggerSettings, TriggerStatus};
pub use weir_core::breaker::BreakerSettings;
pub use weir_core::graph::{GraphDef, NodeDef, TaskSpec};
pub use weir_core::keyed::{InventorySource, KeyedSpec};
pub use weir_core::partition::PartitionRange;
pub use weir_core::partition::{Partition, Partitioning};
pub use weir_core::queue::Job;
pub use weir_core::retry::RetryPolicy;
pub use weir_core::schedule::{Debounce, ScheduleSettings};
pub use weir_core::trigger::TriggerRule;
