//! `weir simulate`: what-if runs of definitions in virtual time.
//!
//! The real engine (supervisor, queue, schedulers, triggers, pools and
//! breakers) runs on a throw-away store, on a current-thread tokio runtime
//! whose clock is paused, so a week passes in seconds: time jumps to the
//! next timer whenever every actor is idle. No command or HTTP request is
//! executed: the simulated task ([`task`]) sleeps the duration the
//! scenario's models draw and ends as its failures say. Randomness comes
//! from one seed — the attempts' draws ([`draw`]) are functions of the seed
//! and the attempt, the actors' jitter of the seeded clock — so the same
//! definitions, scenario and seed give the same report.
//!
//! Parts: [`scenario`] (the file's types) and [`resolve`] (reading it and
//! checking it against the definitions), [`history`] (the recorded
//! durations `from_history` models draw from), [`driver`] (the engine and the
//! span), [`scratch`] (its throw-away store), [`collect`] and [`runs`]
//! (what the span did, as running aggregates), [`report`] (figures, table,
//! HTML), [`cli`] (the command). The pure parts — duration models, `--check`
//! expressions, statistics — are in `weir_core::simulate`.

pub mod cli;
pub mod collect;
pub mod draw;
pub mod driver;
pub mod history;
pub mod report;
pub mod resolve;
pub mod runs;
pub mod scenario;
pub mod scratch;
pub mod task;
