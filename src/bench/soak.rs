//! `weir bench soak`: does a long-running engine hold its memory and its
//! disk steady under a steady load? A real `weir serve` process runs one
//! keyed graph: 300 keys, each due every 3 s, two `true` nodes, a pool of
//! 16 and a retention of 2 minutes (about 100 runs a second on this
//! machine). The bench samples the process's resident set (VmRSS) and the
//! data directory's size every 30 s.
//!
//! Figures:
//! - `rss_5m_bytes`: RSS at 5 minutes (once expiry has caught up: retention
//!   is 2 minutes);
//! - `rss_end_bytes` at the end (30 minutes; 8 with `--quick`) and
//!   `rss_growth` = end / 5 m, beside its goal of at most 1.2, and
//!   `rss_max_after_5m_bytes`, the highest sample after 5 minutes (the
//!   allocator returns memory in waves: one sample can sit on a crest);
//! - `data_bytes_end`: the data directory at the end;
//! - `log_files_per_1k_runs`, `log_dirs_per_1k_runs`,
//!   `log_bytes_per_1k_runs` and `log_disk_bytes_per_1k_runs`: the attempt
//!   logs' files, folders, bytes and the blocks they take on the disk per
//!   1,000 settled runs, taken at 1 minute, before anything has expired;
//! - `runs_per_s`: settled runs per second over the whole run;
//! - `rss_slope_mb_per_min`: the least-squares slope of RSS over the last
//!   hour of samples (over those after 5 minutes when the run is shorter
//!   than 65 minutes), beside its goal of 0.1 MB a minute
//!   (`rss_slope_from_s` says where its window starts). The issue's form
//!   is two hours: `WEIR_BENCH_SOAK_END_S=7200`.
//!
//! `WEIR_BENCH_SOAK_END_S` sets the length in seconds (for a look at a
//! shorter run; the 5-minute sample is skipped when it is shorter).
//! `WEIR_BENCH_SOAK_PRINT=1` makes each node print a line (`echo`), for
//! the attempt logs' figures of commands that print.
//! `WEIR_BENCH_SOAK_WEIR=PATH` serves with another build of weir (the
//! figures of an earlier commit beside this one's).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::procs::{free_addr, Proc, Root};
use super::report::{result_line, BenchError};

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// Keys of the inventory.
const KEYS: usize = 300;
/// Seconds between samples.
const SAMPLE_S: u64 = 30;
/// The sample that is the baseline: 5 minutes.
const BASELINE_S: u64 = 300;
/// The sample where the logs are counted: 1 minute, before expiry starts.
const LOGS_AT_S: u64 = 60;
/// The goal for RSS at the end over RSS at 5 minutes.
const GROWTH_GOAL: f64 = 1.2;
/// The window of the RSS slope: the last hour of the run.
const SLOPE_WINDOW_S: u64 = 3_600;
/// The goal for the RSS slope over that window, MB a minute.
const SLOPE_GOAL_MB_PER_MIN: f64 = 0.1;

/// Where the slope's window starts in a run of `end_s`: an hour before
/// its end, and never before the 5-minute baseline (expiry catching up).
fn slope_from_s(end_s: u64) -> u64 {
    end_s.saturating_sub(SLOPE_WINDOW_S).max(BASELINE_S)
}

/// The least-squares slope of `(seconds, bytes)` samples, in MB (1e6
/// bytes) a minute; `None` under two samples or when they share one
/// instant.
fn slope_mb_per_min(samples: &[(u64, u64)]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let n = samples.len() as f64;
    let xs = samples.iter().map(|(t, _)| *t as f64 / 60.0);
    let ys = samples.iter().map(|(_, b)| *b as f64 / 1e6);
    let (mx, my) = (xs.clone().sum::<f64>() / n, ys.clone().sum::<f64>() / n);
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (x, y) in xs.zip(ys) {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx) * (x - mx);
    }
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The graph the engine serves.
const GRAPH: &str = r#"name = "soak"
partitioning = "keyed"
retention = "2m"

[keyed]
inventory = { file = "keys.txt" }
refresh = "1m"
interval = "3s"
retry_interval = "3s"
jitter = "1s"

[pools]
default = 16

[[nodes]]
name = "a"
command = ["true"]

[[nodes]]
name = "b"
upstreams = ["a"]
command = ["true"]
"#;

/// The resident set of a process, from /proc.
fn rss_bytes(pid: u32) -> Result<u64, BenchError> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(failed)?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .ok_or_else(|| BenchError::Failed(format!("no VmRSS in /proc/{pid}/status")))?;
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| BenchError::Failed(format!("unreadable VmRSS line {line:?}")))?;
    Ok(kib * 1024)
}

/// What is under a directory (nothing when it does not exist yet).
fn tree_size(dir: &Path) -> Tree {
    use std::os::unix::fs::MetadataExt as _;
    let mut t = Tree::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            t.disk_bytes += meta.blocks() * 512;
            if meta.is_dir() {
                t.dirs += 1;
                stack.push(e.path());
            } else {
                t.files += 1;
                t.bytes += meta.len();
            }
        }
    }
    t
}

/// What a folder holds, below it.
#[derive(Debug, Default, Clone, Copy)]
struct Tree {
    files: u64,
    dirs: u64,
    /// The files' lengths.
    bytes: u64,
    /// The blocks files and folders take on the disk.
    disk_bytes: u64,
}

/// The sum of a counter's series (every label set) in a Prometheus text
/// page.
fn counter_sum(page: &str, name: &str) -> f64 {
    page.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.rsplit_once('}')?.1,
                None => rest,
            };
            value.trim().parse::<f64>().ok()
        })
        .sum()
}

/// Settled runs so far, from the engine's /metrics.
async fn runs_settled(
    client: &reqwest::Client,
    base: &str,
    token: &str,
) -> Result<f64, BenchError> {
    let page = client
        .get(format!("{base}/metrics"))
        .bearer_auth(token)
        .send()
        .await
        .map_err(failed)?
        .text()
        .await
        .map_err(failed)?;
    Ok(counter_sum(&page, "weir_runs_settled_total"))
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let end_s: u64 = match std::env::var("WEIR_BENCH_SOAK_END_S") {
        Ok(v) => v
            .parse()
            .map_err(|_| BenchError::Failed(format!("WEIR_BENCH_SOAK_END_S={v:?}: not seconds")))?,
        Err(_) if quick => 8 * 60,
        Err(_) => 30 * 60,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    rt.block_on(soak(end_s))
}

async fn soak(end_s: u64) -> Result<(), BenchError> {
    let root = Root(super::drain::tempfile_dir()?);
    let defs = root.path().join("defs");
    let data = root.path().join("data");
    std::fs::create_dir_all(&defs).map_err(failed)?;
    let print = std::env::var_os("WEIR_BENCH_SOAK_PRINT").is_some_and(|v| v == "1");
    let graph = if print {
        GRAPH.replace(r#"command = ["true"]"#, r#"command = ["echo", "done"]"#)
    } else {
        GRAPH.to_string()
    };
    std::fs::write(defs.join("soak.toml"), graph).map_err(failed)?;
    let keys: String = (0..KEYS).map(|k| format!("key-{k:03}\n")).collect();
    std::fs::write(defs.join("keys.txt"), keys).map_err(failed)?;
    let addr = free_addr()?;
    let exe = match std::env::var_os("WEIR_BENCH_SOAK_WEIR") {
        Some(path) => std::path::PathBuf::from(path),
        None => std::env::current_exe().map_err(failed)?,
    };
    let child = Command::new(exe)
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(&data)
        .arg("--listen")
        .arg(addr.to_string())
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(failed)?;
    let engine = Proc(child);
    let pid = engine.0.id();
    let base = format!("http://{addr}");
    let client = reqwest::Client::new();
    // The token file appears once the engine has opened its store.
    let token_path = data.join("token");
    let ready_by = Instant::now() + Duration::from_secs(60);
    let token = loop {
        if let Ok(t) = std::fs::read_to_string(&token_path) {
            if client.get(format!("{base}/healthz")).send().await.is_ok() {
                break t.trim().to_string();
            }
        }
        if Instant::now() > ready_by {
            return Err(BenchError::Failed(
                "the engine did not serve within 60 s".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "soak: {KEYS} keys every 3 s, two `{}` nodes, pool 16, retention 2m; {end_s} s; a sample every {SAMPLE_S} s",
        if print { "echo done" } else { "true" }
    );
    let started = Instant::now();
    let mut rss_5m = None;
    let mut rss_max_after = 0;
    let mut logs_per_1k = None;
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let mut t = 0;
    let (mut rss, mut data_bytes, mut settled) = (0, 0, 0.0);
    while t < end_s {
        t = (t + SAMPLE_S).min(end_s);
        let at = started + Duration::from_secs(t);
        tokio::time::sleep_until(at.into()).await;
        rss = rss_bytes(pid)?;
        data_bytes = tree_size(&data).bytes;
        settled = runs_settled(&client, &base, &token).await?;
        println!(
            "  {:>5} s: rss {:>7.1} MB, data {:>7.1} MB, {:>8.0} runs settled",
            t,
            rss as f64 / 1e6,
            data_bytes as f64 / 1e6,
            settled
        );
        if t == BASELINE_S {
            rss_5m = Some(rss);
        }
        if t >= slope_from_s(end_s) {
            samples.push((t, rss));
        }
        if t > BASELINE_S {
            rss_max_after = rss_max_after.max(rss);
        }
        if t == LOGS_AT_S && settled > 0.0 {
            let logs = tree_size(&data.join("logs"));
            let per_1k = |n: u64| n as f64 * 1_000.0 / settled;
            println!(
                "  attempt logs at {t} s: {} files in {} folders, {:.1} MB ({:.1} MB on disk) for {settled:.0} runs = {:.0} files, {:.0} folders, {:.0} bytes and {:.0} bytes on disk per 1,000 runs",
                logs.files,
                logs.dirs,
                logs.bytes as f64 / 1e6,
                logs.disk_bytes as f64 / 1e6,
                per_1k(logs.files),
                per_1k(logs.dirs),
                per_1k(logs.bytes),
                per_1k(logs.disk_bytes)
            );
            logs_per_1k = Some([
                per_1k(logs.files),
                per_1k(logs.dirs),
                per_1k(logs.bytes),
                per_1k(logs.disk_bytes),
            ]);
        }
    }
    let elapsed_s = started.elapsed().as_secs_f64();
    let mut pairs: Vec<(&str, String)> = Vec::new();
    if let Some(base_rss) = rss_5m {
        let growth = rss as f64 / base_rss as f64;
        println!(
            "rss: {:.1} MB at 5 min, {:.1} MB at {} min: growth {growth:.2} (goal <= {GROWTH_GOAL})",
            base_rss as f64 / 1e6,
            rss as f64 / 1e6,
            end_s / 60
        );
        pairs.push(("rss_5m_bytes", base_rss.to_string()));
        pairs.push(("rss_end_bytes", rss.to_string()));
        pairs.push(("rss_growth", format!("{growth:.3}")));
        pairs.push(("rss_growth_goal", GROWTH_GOAL.to_string()));
        pairs.push(("rss_max_after_5m_bytes", rss_max_after.to_string()));
    } else {
        pairs.push(("rss_end_bytes", rss.to_string()));
    }
    if let Some(slope) = slope_mb_per_min(&samples) {
        println!(
            "rss slope from {} to {} min: {slope:.3} MB a minute (goal <= {SLOPE_GOAL_MB_PER_MIN})",
            slope_from_s(end_s) / 60,
            end_s / 60
        );
        pairs.push(("rss_slope_mb_per_min", format!("{slope:.3}")));
        pairs.push((
            "rss_slope_goal_mb_per_min",
            SLOPE_GOAL_MB_PER_MIN.to_string(),
        ));
        pairs.push(("rss_slope_from_s", slope_from_s(end_s).to_string()));
    }
    pairs.push(("data_bytes_end", data_bytes.to_string()));
    if let Some([files, dirs, bytes, disk]) = logs_per_1k {
        pairs.push(("log_files_per_1k_runs", format!("{files:.0}")));
        pairs.push(("log_dirs_per_1k_runs", format!("{dirs:.0}")));
        pairs.push(("log_bytes_per_1k_runs", format!("{bytes:.0}")));
        pairs.push(("log_disk_bytes_per_1k_runs", format!("{disk:.0}")));
    }
    pairs.push(("runs_per_s", format!("{:.1}", settled / elapsed_s)));
    pairs.push(("end_s", end_s.to_string()));
    println!("{}", result_line("soak", &pairs));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_is_mb_a_minute_by_least_squares() {
        // 1 MB a minute exactly, sampled every 30 s.
        let line: Vec<(u64, u64)> = (0..10)
            .map(|i| (i * 30, 100_000_000 + i * 500_000))
            .collect();
        assert!((slope_mb_per_min(&line).unwrap() - 1.0).abs() < 1e-9);
        // A flat series with one crest in the middle: no slope.
        let mut flat: Vec<(u64, u64)> = (0..9).map(|i| (i * 30, 150_000_000)).collect();
        flat[4].1 = 160_000_000;
        assert!(slope_mb_per_min(&flat).unwrap().abs() < 1e-9);
        assert_eq!(slope_mb_per_min(&[(0, 1)]), None);
        assert_eq!(slope_mb_per_min(&[(60, 1), (60, 2)]), None);
    }

    #[test]
    fn the_window_is_the_last_hour_and_never_before_the_baseline() {
        assert_eq!(slope_from_s(7_200), 3_600);
        assert_eq!(slope_from_s(1_800), BASELINE_S);
        assert_eq!(slope_from_s(60), BASELINE_S);
    }
}
