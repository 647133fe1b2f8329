//! The pure parts of `weir simulate`: duration models that turn random
//! draws into attempt durations ([`model`]), the `--check` expressions and
//! their evaluation against a report's figures ([`check`]), and the
//! statistics a report is made of ([`stats`]).
//!
//! Nothing here reads a clock or a random source: a model takes its draws
//! as arguments (uniform in `[0, 1)`), so the simulator decides where they
//! come from (a seed) and the same draws give the same durations.

pub mod check;
pub mod model;
pub mod stats;
