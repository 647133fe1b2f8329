//! What the artifact bench's parts share: its sizes, goals and helpers.

use std::time::Duration;

use crate::artifacts::TRANSFERS_IN_FLIGHT;
use crate::bench::report::BenchError;

/// Middle nodes of the fan-out.
pub const WIDTH: usize = 20;
/// The file each node of the fan-out passes.
pub const FILE_BYTES: u64 = 10 << 20;
/// The small artifact of the chain.
pub const SMALL_BYTES: usize = 1 << 10;
/// The files of the RSS comparison's small run, and of its big run
/// without `--quick` (with it, the 10 MiB rounds are the big run).
pub const RSS_SMALL_BYTES: u64 = 1 << 20;
pub const RSS_BIG_BYTES_FULL: u64 = 50 << 20;
/// Transfers in flight, raw and in the graph: its pool's slots, and the
/// join's fetch.
pub const IN_FLIGHT: usize = TRANSFERS_IN_FLIGHT;
/// Rounds of the fan-out (each: the graph, its baseline, raw from and to
/// files, raw from and to memory).
pub const ROUNDS_FULL: usize = 3;
pub const ROUNDS_QUICK: usize = 1;
/// Nodes of the small chain, and its runs (each beside a run of its
/// baseline and as many raw transfers).
pub const CHAIN_NODES: usize = 25;
pub const CHAIN_REPS_FULL: usize = 5;
pub const CHAIN_REPS_QUICK: usize = 2;
/// Single transfers of the step-by-step breakdown.
pub const STEP_REPS: usize = 5;
/// Goals.
pub const GOAL_RATIO: f64 = 0.8;
pub const GOAL_SMALL_OVERHEAD_MS: f64 = 2.0;
/// How long one run may take to settle.
pub const SETTLE_WAIT_S: u64 = 600;
/// The s3s-fs release the tests run too (tests/s3_support).
pub const S3S_FS_VERSION: &str = "0.14.1";
pub const BUCKET: &str = "weir-bench";
pub const ACCESS_KEY: &str = "weirbenchkey";
pub const SECRET_KEY: &str = "weir-bench-secret-0123456789";
/// s3s-fs does not set TCP_NODELAY on its sockets: a GET's body waits
/// for the ACK of its headers, which the client delays (Linux: 40 ms), in
/// a share of small GETs that varies from run to run, raw and artifact
/// GETs alike. The S3 half's small samples that took this long or longer
/// are counted, and compared with their like: the artifact attempts and
/// raw transfers that did not wait when both kinds hold STALL_FREE_MIN of
/// them, else those that did.
pub const STALL_MS: u128 = 30;
pub const STALL_FREE_MIN: usize = 10;
/// How long s3s-fs may take to listen.
pub const S3S_LISTEN_WAIT_S: u64 = 20;

pub fn failed<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> BenchError {
    move |e| BenchError::Failed(format!("{what}: {e}"))
}

pub const MIB: f64 = (1u64 << 20) as f64;

/// Writes every dirty page back, so one phase's writes are not flushed
/// during the next one's timing.
pub fn sync_disks() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// The median (upper, of an even count); `v` is not empty.
pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}
