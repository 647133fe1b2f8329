//! `weir bench SCENARIO [--quick]`: every figure an issue asks for, printed
//! beside the limit or peer measured in the same run. The last line is
//! `RESULT scenario=NAME key=value ...` in plain units (ms, us, per_s,
//! bytes).

mod api;
mod artifacts;
mod backup;
mod ceiling;
mod child;
mod client;
mod cluster;
mod core;
mod crash;
pub mod drain;
mod failover;
mod floor;
pub mod graphs;
mod growth;
pub mod keys;
mod latency;
mod mapped;
mod perf;
mod procs;
mod prom;
pub mod readiness;
mod recovery;
mod replicated;
mod report;
mod serve_group;
mod simulate;
mod soak;
mod store;
pub mod torture;
pub mod validate;
mod wake_floor;

pub use report::{result_line, BenchError, SCENARIOS};

/// Runs a scenario at its quick, default or `--full` size (the last for
/// `recovery` only).
pub fn run_sized(scenario: &str, quick: bool, full: bool) -> Result<(), BenchError> {
    if full {
        return match scenario {
            "recovery" => recovery::run_pending(10_000_000),
            other => Err(BenchError::Failed(format!(
                "scenario {other} has no --full size (recovery has)"
            ))),
        };
    }
    run(scenario, quick)
}

/// Runs a scenario.
pub fn run(scenario: &str, quick: bool) -> Result<(), BenchError> {
    match scenario {
        "api" => api::run(quick),
        "cluster" => cluster::run(quick),
        "core" => core::run(quick),
        "store" => store::run(quick),
        "backup" => backup::run(quick),
        "artifacts" => artifacts::run(quick),
        "drain" => drain::run(quick),
        "keys" => keys::run(quick),
        "chain" => graphs::run_chain(quick),
        "fanout" => graphs::run_fanout(quick),
        "mapped" => mapped::run(quick),
        "latency" => latency::run_latency(quick),
        "sweep" => latency::run_sweep(quick),
        "recovery" => recovery::run(quick),
        "crash" => crash::run(quick),
        "validate" => validate::run(quick),
        "growth" => growth::run(quick),
        "torture" => torture::run(quick),
        "soak" => soak::run(quick),
        "failover" => failover::run(quick),
        "client" => client::run(quick),
        "simulate" => simulate::run(quick),
        "replicated" => replicated::run(quick),
        "ceiling" => ceiling::run(quick),
        "perf" => perf::run(quick),
        other => Err(BenchError::Unknown(other.to_string())),
    }
}
