//! `weir-bench-peers`: the peers of `benches/compare.sh`, driven on weir's
//! scenarios, each durable by its documented setting. Prints `RESULT`
//! lines in the units `weir bench` uses.
//!
//! ```text
//! weir-bench-peers taquba drain|latency|chain|recovery DIR ARG
//! weir-bench-peers apalis drain|latency|chain|recovery DIR ARG
//! weir-bench-peers swale chain|fanout DIR NODES PROGRAM
//! weir-bench-peers swale crash DIR WIDTH
//! weir-bench-peers limits DIR JOBS OPS_PER_COMMIT
//! ```

mod apalis_peer;
mod figures;
mod limits;
mod open_loop;
mod swale_peer;
mod taquba_peer;

use std::time::Duration;

/// A boxed error.
pub type Error = Box<dyn std::error::Error + Send + Sync>;

/// The value at quantile `q` of `sorted`, in microseconds.
pub fn pct_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i].as_secs_f64() * 1e6
}

/// Peak resident set size of this process, in bytes.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A `RESULT` line.
pub fn result(scenario: &str, pairs: &[(&str, String)]) {
    let mut line = format!("RESULT scenario={scenario}");
    for (k, v) in pairs {
        line.push_str(&format!(" {k}={v}"));
    }
    println!("{line}");
}

/// Resident set size of this process now, in bytes.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// The recovering child's figures, for [`recovery_child`] to read.
pub fn print_child(opened: Duration, first: Duration) {
    println!(
        "CHILD open_ms={:.1} first_dispatch_ms={:.1} rss_bytes={}",
        opened.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3,
        rss_bytes()
    );
}

/// Runs `PEER recovery-open DIR` in a fresh process and prints the
/// recovery's RESULT line from its figures.
pub fn recovery_child(peer: &str, dir: &std::path::Path, pending: u64) -> Result<(), Error> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([peer, "recovery-open"])
        .arg(dir)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("CHILD "))
        .ok_or_else(|| {
            format!(
                "the recovering {peer} printed no figures: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
    let field = |k: &str| -> String {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")).map(str::to_string))
            .unwrap_or_default()
    };
    println!(
        "{peer} recovery of {pending} pending jobs: open {} ms, first dispatch {} ms, RSS {} bytes",
        field("open_ms"),
        field("first_dispatch_ms"),
        field("rss_bytes")
    );
    result(
        "recovery",
        &[
            ("pending", pending.to_string()),
            ("open_ms", field("open_ms")),
            ("first_dispatch_ms", field("first_dispatch_ms")),
            ("rss_bytes", field("rss_bytes")),
        ],
    );
    Ok(())
}

/// A fresh directory.
pub fn fresh(dir: &std::path::Path) -> Result<(), Error> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Result<&str, Error> {
        args.get(i)
            .map(String::as_str)
            .ok_or_else(|| format!("missing argument {i}; see the module doc").into())
    };
    let num = |i: usize| -> Result<u64, Error> { Ok(arg(i)?.parse()?) };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let dir = std::path::PathBuf::from(arg(2)?);
    rt.block_on(async {
        match (arg(0)?, arg(1)?) {
            ("taquba", "drain") => taquba_peer::drain(&dir, num(3)?, num(4)?).await,
            ("taquba", "latency") => taquba_peer::latency(&dir, num(3)?).await,
            ("taquba", "chain") => taquba_peer::chain(&dir, num(3)?).await,
            ("apalis", "drain") => apalis_peer::drain(&dir, num(3)?, num(4)?).await,
            ("apalis", "latency") => apalis_peer::latency(&dir, num(3)?).await,
            ("apalis", "recovery") => apalis_peer::recovery(&dir, num(3)?).await,
            ("apalis", "recovery-open") => apalis_peer::recovery_open(&dir).await,
            ("taquba", "recovery") => taquba_peer::recovery(&dir, num(3)?).await,
            ("taquba", "recovery-open") => taquba_peer::recovery_open(&dir).await,
            ("apalis", "chain") => apalis_peer::chain(&dir, num(3)?).await,
            ("swale", "chain") => swale_peer::chain(&dir, num(3)?, arg(4)?).await,
            ("swale", "fanout") => swale_peer::fanout(&dir, num(3)?, arg(4)?).await,
            ("swale", "crash") => swale_peer::crash(&dir, num(3)?).await,
            ("swale", "crash-child") => swale_peer::crash_child(&dir, num(3)?).await,
            ("limits", "drain") => limits::drain(&dir, num(3)?, num(4)?).await,
            (peer, scenario) => Err(format!("unknown: {peer} {scenario}").into()),
        }
    })?;
    // Background tasks of a peer may hold the runtime; the figures are out.
    std::process::exit(0);
}
