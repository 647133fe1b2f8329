//! weir-core: the model of weir and every decision it takes, as pure code.
//!
//! Nothing in this crate reads a clock, draws a random number, spawns a
//! thread or touches a disk. Time is `u64` milliseconds since the Unix epoch
//! and randomness is a value (`draw`, a `u64` or a fraction) passed in by the
//! caller. That is what lets a journal replay take exactly the decisions the
//! live run took, lets property tests explore any op sequence, and lets a
//! test drive a day of cron in milliseconds.
//!
//! One concept a module: `names` (validated identifiers), `graph` (the
//! definition model), `trigger` (Airflow's trigger rules), `readiness` (node
//! states of a graph run), `partition` and `cron` (time windows), `queue`
//! (the durable queue's state machine) with `pending` (a pool's order of
//! waiting tickets: priority, due instant, id), `retry`, `breaker`, `pool`,
//! `grant` (whether a worker runs a grant that reached it late),
//! `schedule` (keyed schedules and debounced signals), `params` (a run's
//! named values), `template` (references to the partition, upstream
//! outputs and params in task configs), `mapped` (a node run once per
//! item), `sensor` (waiting for a condition without holding a slot),
//! `asset` (materializations across graphs) and `codec` (the versioned
//! envelope of everything stored).

pub mod artifact;
pub mod asset;
pub mod breaker;
pub mod canonical;
pub mod codec;
pub mod cold;
pub mod cron;
pub mod duration;
pub mod grant;
pub mod graph;
pub mod http;
pub mod keyed;
pub mod mapped;
pub mod names;
pub mod params;
pub mod partition;
pub mod past;
pub mod pending;
pub mod pool;
pub mod queue;
pub mod readiness;
pub mod retry;
pub mod schedule;
pub mod sensor;
pub mod simulate;
pub mod sla;
pub mod template;
pub mod trigger;
pub mod zone;
