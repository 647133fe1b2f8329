//! `weir bench client`: the Python client (`clients/python`) against a
//! live engine, beside raw HTTP and the CLI in the same run.
//!
//! Figures:
//! - 1,000 runs (200 with `--quick`) of a one-node graph started and
//!   waited for, four ways in turn against one `weir serve` process, each
//!   on its own partitions: raw `http.client` (one keep-alive connection,
//!   one request per start, then polling the list of active runs), the
//!   sync client (`start` per run, then `wait_all` on the event stream),
//!   the async client (two starts in flight per core, then `wait_all`)
//!   and the CLI (`weir start` per run, then `weir runs --state active`
//!   until none), after 100 untimed runs that warm the engine up;
//!   `async_vs_raw` and `sync_vs_raw` are the clients' total times over
//!   raw's (goal: async within 1.5x);
//! - `runs_iter_rss_bytes`: the Python process's resident-set growth while
//!   `client.runs()` iterates 100,000 runs (10,000 with `--quick`), served
//!   from a store filled as `weir bench api` fills it; flat means it pages
//!   (goal: under 64 MiB, and at most 8 MiB more at the end than after the
//!   first 10,000).
//!
//! The Python side is `clients/python/bench/client_bench.py`, run with the
//! interpreter of `target/pyenv` (made, with httpx installed, when absent)
//! and the client's source on `PYTHONPATH`, so the bench measures this
//! tree's client.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::drain::tempfile_dir;
use super::report::{result_line, BenchError};

/// The graph the starts run.
const GRAPH: &str = "b";
/// The goal for the async client's total over raw HTTP's.
const ASYNC_GOAL: f64 = 1.5;
/// The goal for `runs()`'s resident-set growth.
const RSS_GOAL_BYTES: u64 = 64 << 20;
/// The most the last 90% of `runs()` may add to its resident set.
const RSS_TAIL_BYTES: u64 = 8 << 20;
/// The token of the in-process server.
const TOKEN: &str = "weir-bench-client-token-0123456789";

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// The repository (where `clients/python` is).
fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's interpreter, with httpx importable: `target/pyenv`, made
/// when absent.
fn python() -> Result<PathBuf, BenchError> {
    let venv = repo().join("target").join("pyenv");
    let py = venv.join("bin").join("python");
    let has_httpx = |py: &Path| {
        Command::new(py)
            .args(["-c", "import httpx"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if py.exists() && has_httpx(&py) {
        return Ok(py);
    }
    println!(
        "making the venv {} (python3 -m venv; pip install httpx)",
        venv.display()
    );
    let ok = |c: &mut Command, what: &str| -> Result<(), BenchError> {
        let s = c.status().map_err(|e| failed(format!("{what}: {e}")))?;
        if s.success() {
            Ok(())
        } else {
            Err(failed(format!("{what}: {s}")))
        }
    };
    ok(
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
        "python3 -m venv",
    )?;
    ok(
        Command::new(venv.join("bin").join("pip"))
            .args(["install", "-q"])
            .arg(repo().join("clients").join("python")),
        "pip install ./clients/python",
    )?;
    Ok(py)
}

/// Runs the Python side with `args`; its last stdout line, parsed.
fn bench_py(py: &Path, args: &[String]) -> Result<Value, BenchError> {
    let script = repo().join("clients/python/bench/client_bench.py");
    let out = Command::new(py)
        .arg(&script)
        .args(args)
        .env("PYTHONPATH", repo().join("clients").join("python"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(failed)?;
    if !out.status.success() {
        return Err(failed(format!(
            "{} {args:?}: {}",
            script.display(),
            out.status
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or_default();
    serde_json::from_str(last).map_err(|e| failed(format!("client_bench.py said {last:?}: {e}")))
}

/// A `weir serve` process of this binary.
struct Served {
    child: std::process::Child,
    url: String,
    token_file: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_process(dir: &Path) -> Result<Served, BenchError> {
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).map_err(failed)?;
    std::fs::write(
        defs.join(format!("{GRAPH}.toml")),
        format!(
            "name = \"{GRAPH}\"\npartitioning = \"daily\"\nmax_active_runs = 256\n[pools]\ndefault = 32\n\
             [[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n"
        ),
    )
    .map_err(failed)?;
    let data = dir.join("data");
    let child = Command::new(std::env::current_exe().map_err(failed)?)
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--durability", "flush"])
        .env("RUST_LOG", "off")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(failed)?;
    let pid = child.id();
    let mut served = Served {
        child,
        url: String::new(),
        token_file: data.join("token"),
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(info) = std::fs::read(data.join("engine.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .filter(|v| v["pid"].as_u64() == Some(u64::from(pid)))
        {
            served.url = info["url"].as_str().unwrap_or_default().to_string();
            return Ok(served);
        }
        if let Ok(Some(s)) = served.child.try_wait() {
            return Err(failed(format!("weir serve exited with {s}")));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(failed("weir serve did not write its engine file in 60 s"))
}

fn ms(v: &Value, way: &str, key: &str) -> Result<f64, BenchError> {
    v[way][key]
        .as_f64()
        .ok_or_else(|| failed(format!("no {way}.{key} in {v}")))
}

fn row(figure: &str, value: String, goal: &str, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "",
    };
    println!("  {figure:<44} {value:>14}   {goal:<24} {verdict}");
}

/// `client.runs()` over `runs` runs served in process: the Python
/// side's figures.
async fn iterate(dir: &Path, py: PathBuf, runs: usize) -> Result<Value, BenchError> {
    let data = dir.join("iter");
    let filled = Instant::now();
    let engine = super::api::open_engine(&data).await?;
    let template = super::api::reference_run(&engine).await?;
    let store = engine.store().clone();
    tokio::task::spawn_blocking(move || super::api::fill(&store, &template, runs))
        .await
        .map_err(failed)??;
    engine
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    println!(
        "filled {runs} settled runs in {:.1} s",
        filled.elapsed().as_secs_f64()
    );
    let engine = Arc::new(super::api::open_engine(&data).await?);
    let server = super::api::serve_on(engine.clone(), &data, TOKEN).await?;
    let token_file = dir.join("iter-token");
    std::fs::write(&token_file, TOKEN).map_err(failed)?;
    let args = vec![
        "iter".to_string(),
        server.url(),
        token_file.display().to_string(),
    ];
    let got = tokio::task::spawn_blocking(move || bench_py(&py, &args))
        .await
        .map_err(failed)?;
    server.stop().await;
    super::api::take_back(engine)
        .await?
        .shutdown(Duration::from_secs(30))
        .await
        .map_err(failed)?;
    got
}

/// Runs `weir bench client`.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let n = if quick { 200 } else { 1_000 };
    let iter_runs = if quick { 10_000 } else { 100_000 };
    let py = python()?;
    let dir = tempfile_dir()?;
    let result = measure(&dir, &py, n, iter_runs);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn measure(dir: &Path, py: &Path, n: usize, iter_runs: usize) -> Result<(), BenchError> {
    let served = serve_process(dir)?;
    println!("weir serve at {}; {n} runs each way", served.url);
    let exe = std::env::current_exe().map_err(failed)?;
    let starts = bench_py(
        py,
        &[
            "starts".to_string(),
            served.url.clone(),
            served.token_file.display().to_string(),
            exe.display().to_string(),
            GRAPH.to_string(),
            n.to_string(),
        ],
    )?;
    drop(served);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    let iter = rt.block_on(iterate(dir, py.to_path_buf(), iter_runs))?;

    let raw = ms(&starts, "raw", "total_ms")?;
    let (sync, asy, cli) = (
        ms(&starts, "sync", "total_ms")?,
        ms(&starts, "async", "total_ms")?,
        ms(&starts, "cli", "total_ms")?,
    );
    let async_vs_raw = asy / raw;
    let sync_vs_raw = sync / raw;
    for way in ["raw", "sync", "async", "cli"] {
        row(
            &format!("{way}: {n} starts / starts + waits"),
            format!(
                "{:.0} / {:.0} ms",
                ms(&starts, way, "start_ms")?,
                ms(&starts, way, "total_ms")?
            ),
            "",
            None,
        );
    }
    row(
        "async client / raw http.client (total)",
        format!("{async_vs_raw:.2}x"),
        &format!("<= {ASYNC_GOAL}x"),
        Some(async_vs_raw <= ASYNC_GOAL),
    );
    row(
        "sync client / raw http.client (total)",
        format!("{sync_vs_raw:.2}x"),
        "",
        None,
    );
    let count = iter["count"].as_u64().unwrap_or(0);
    if count != iter_runs as u64 {
        return Err(failed(format!(
            "runs() gave {count} runs of the {iter_runs} held"
        )));
    }
    let before = iter["rss_before"].as_u64().unwrap_or(0);
    let grew = iter["rss_peak"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(before);
    let grew_tenth = iter["rss_tenth"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(before);
    // Flat: what the last 90% of the runs added is small beside what
    // holding them would cost (a decoded run is about 1 KiB: 100,000 of
    // them, some 100 MiB); one page's worth and the allocator's slack.
    let flat = grew <= RSS_GOAL_BYTES && grew.saturating_sub(grew_tenth) <= RSS_TAIL_BYTES;
    row(
        &format!("runs() over {iter_runs} runs: RSS growth"),
        format!("{:.1} MiB", grew as f64 / f64::from(1 << 20)),
        "< 64 MiB, flat",
        Some(flat),
    );
    row(
        "  after the first 10,000",
        format!("{:.1} MiB", grew_tenth as f64 / f64::from(1 << 20)),
        "",
        None,
    );
    row(
        "  runs() rate",
        format!(
            "{:.0} runs/s",
            count as f64 / iter["seconds"].as_f64().unwrap_or(1.0).max(1e-9)
        ),
        "",
        None,
    );
    println!(
        "{}",
        result_line(
            "client",
            &[
                ("runs", n.to_string()),
                ("async_vs_raw", format!("{async_vs_raw:.2}")),
                ("sync_vs_raw", format!("{sync_vs_raw:.2}")),
                ("runs_iter_rss_bytes", grew.to_string()),
                ("raw_ms", format!("{raw:.0}")),
                ("sync_ms", format!("{sync:.0}")),
                ("async_ms", format!("{asy:.0}")),
                ("cli_ms", format!("{cli:.0}")),
                ("iter_runs", iter_runs.to_string()),
            ]
        )
    );
    Ok(())
}
