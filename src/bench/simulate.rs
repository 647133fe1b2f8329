//! `weir bench simulate`: how much faster than real time `weir simulate`
//! runs a deployment. The examples are scaled to 100 graphs (25 copies
//! each of etl, fanout made hourly, orders made daily by cron, and hosts)
//! and 1,000 keys (40 per hosts copy, checked hourly instead of every 30 s
//! and their inventories reloaded every 10 min instead of 10 s: a week of
//! the example's own pace would be 20 million runs), over 7 virtual days,
//! with log-normal durations, a 2 h warehouse outage, failing checks and a
//! backfill (the hosts' checks take about a second: their timeout is 10 s).
//! `--quick`: a tenth of the graphs and keys over one day.
//!
//! RESULT keys: `virtual_days`, `wall_s`, `speedup` (virtual time over
//! wall time; the goal is at least 10,000), `cpu_s` (the process's user and
//! system time: less sensitive than `wall_s` to a busy machine), `events`
//! (engine events), `events_per_s`, `rss_bytes` (peak), `rss_half_bytes`
//! (peak when half the span had passed: the goal is memory flat across the
//! span, so `rss_bytes` close to it), `store_half_bytes` and `store_bytes`
//! (the throw-away store at half the span and at its last fourteenth: the
//! keys and values its trees hold in memory, and its folder's files),
//! `runs`, `graphs`, `keys`.
//!
//! Memory is sampled every fourteenth of the span and printed as a series.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use super::drain::{peak_rss_bytes, rss_bytes, tempfile_dir};
use super::report::{result_line, BenchError};
use super::store::dir_bytes;

/// Graphs of the full size.
pub const GRAPHS_FULL: usize = 100;
/// Keys of the full size.
pub const KEYS_FULL: usize = 1_000;
/// The goal: virtual time over wall time.
pub const SPEEDUP_GOAL: f64 = 10_000.0;

fn example(name: &str) -> Result<String, BenchError> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    std::fs::read_to_string(&path)
        .map_err(|e| BenchError::Failed(format!("{}: {e}", path.display())))
}

/// Writes the scaled definitions and the scenario into `dir`; returns the
/// definitions' folder and the scenario's path.
fn write_case(
    dir: &Path,
    graphs: usize,
    keys: usize,
    days: u64,
) -> Result<(std::path::PathBuf, std::path::PathBuf), BenchError> {
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).map_err(|e| BenchError::Failed(e.to_string()))?;
    let etl = example("etl/etl.toml")?;
    let fanout = example("fanout/fanout.toml")?.replace(
        "partitioning = \"none\"",
        "partitioning = \"hourly\"\ncron = \"0 * * * *\"",
    );
    let orders = example("orders/orders.toml")?.replace(
        "partitioning = \"daily\"",
        "partitioning = \"daily\"\ncron = \"0 1 * * *\"",
    );
    let hosts = example("hosts/hosts.toml")?
        .replace("interval = \"30s\"", "interval = \"1h\"")
        .replace("refresh = \"10s\"", "refresh = \"10m\"")
        .replace("jitter = \"2s\"", "jitter = \"10m\"");
    let per = graphs.div_ceil(4);
    let hosts_copies = per.max(1);
    let keys_each = keys.div_ceil(hosts_copies).max(1);
    let mut scenario = format!(
        "from = \"2026-11-02T00:00:00Z\"\ndays = {days}\n\n\
         [[durations]]\nlognormal = {{ p50 = \"20s\", p99 = \"3m\" }}\n\n\
         [[failures]]\nkind = \"target_down\"\ntarget = \"warehouse\"\nat = \"+{}h\"\nfor = \"2h\"\n\n",
        if days > 1 { 26 } else { 2 }
    );
    let mut written = 0;
    for i in 0..per {
        for (base, text) in [
            ("etl", &etl),
            ("fanout", &fanout),
            ("orders", &orders),
            ("hosts", &hosts),
        ] {
            if written == graphs {
                break;
            }
            let name = format!("{base}-{i:02}");
            // Each orders copy produces its own asset: an asset has one
            // producer.
            let body = text
                .replacen(
                    &format!("name = \"{base}\""),
                    &format!("name = \"{name}\""),
                    1,
                )
                .replace("\"orders.daily\"", &format!("\"orders.daily.{i:02}\""));
            std::fs::write(defs.join(format!("{name}.toml")), body)
                .map_err(|e| BenchError::Failed(e.to_string()))?;
            written += 1;
            match base {
                "orders" => {
                    let _ = write!(
                        scenario,
                        "[[outputs]]\ngraph = \"{name}\"\nnode = \"regions\"\njson = '[{{\"name\": \"eu\"}}, {{\"name\": \"us\"}}]'\n\n"
                    );
                }
                "hosts" => {
                    let _ = write!(
                        scenario,
                        "[keys]\n\"{name}\" = {keys_each}\n\n[[failures]]\nkind = \"node\"\ngraph = \"{name}\"\nnode = \"check\"\nprobability = 0.02\n\n\
                         [[durations]]\ngraph = \"{name}\"\nlognormal = {{ p50 = \"1s\", p99 = \"8s\" }}\n\n"
                    );
                }
                "etl" if i == 0 => {
                    let _ = write!(
                        scenario,
                        "[[inputs]]\nkind = \"backfill\"\nat = \"+1h\"\ngraph = \"{name}\"\nfrom = \"2026-10-26\"\nto = \"2026-11-01\"\n\n"
                    );
                }
                _ => {}
            }
        }
    }
    // TOML tables must not repeat: gather the [keys] lines into one table.
    let (mut keys_lines, mut rest) = (String::from("[keys]\n"), String::new());
    let mut in_keys = false;
    for line in scenario.lines() {
        if line == "[keys]" {
            in_keys = true;
            continue;
        }
        if in_keys && line.starts_with('"') {
            keys_lines.push_str(line);
            keys_lines.push('\n');
            continue;
        }
        in_keys = false;
        rest.push_str(line);
        rest.push('\n');
    }
    // The top-level keys first, then the [keys] table, then the arrays.
    let split = rest.find("[[").unwrap_or(rest.len());
    let text = format!("{}{keys_lines}\n{}", &rest[..split], &rest[split..]);
    let path = dir.join("scenario.toml");
    std::fs::write(&path, text).map_err(|e| BenchError::Failed(e.to_string()))?;
    Ok((defs, path))
}

/// Memory samples over the span.
const SAMPLES: u64 = 14;

/// This process's user and system time so far, in seconds.
fn cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given and reads nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(u.ru_utime) + s(u.ru_stime)
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let (graphs, keys, days) = if quick {
        (GRAPHS_FULL / 10, KEYS_FULL / 10, 1)
    } else {
        (GRAPHS_FULL, KEYS_FULL, 7)
    };
    let dir = tempfile_dir()?;
    let (defs, scenario) = write_case(&dir, graphs, keys, days)?;
    let started = Instant::now();
    let cpu_before = cpu_s();
    let span_ms = days * 86_400_000;
    // (time since the span's start, RSS now, peak RSS, store bytes)
    let mut samples: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut sample = |at: u64, engine: &crate::Engine| {
        let store = engine.store();
        if let Some(debug) = std::env::var_os("WEIR_BENCH_STORE_DEBUG") {
            // Records are grouped by as many levels of their keys as the
            // variable says (1 unless a number).
            let levels = debug.to_string_lossy().parse::<usize>().unwrap_or(1).max(1);
            let mut line = format!("store at {at}:");
            for t in ["journal", "snapshot", "records", "expiry"] {
                if let Some(tree) = store.raw_tree(t) {
                    let mut by: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
                    for kv in tree.iter().flatten() {
                        let k = String::from_utf8_lossy(&kv.0);
                        let p = if t == "records" {
                            k.split('/').take(levels).collect::<Vec<_>>().join("/")
                        } else {
                            t.to_string()
                        };
                        let e = by.entry(p).or_default();
                        e.0 += 1;
                        e.1 += (kv.0.len() + kv.1.len()) as u64;
                    }
                    for (p, (n, b)) in by {
                        let _ = write!(line, " {p}={n}/{}KB", b / 1024);
                    }
                }
            }
            println!("{line}");
        }
        // The trees held in memory (their keys and values), and the
        // folder's files (sled's, when the trees are there).
        let trees = match store.settings().memory {
            Some(ref m) => m.bytes(),
            None => 0,
        };
        samples.push((
            at,
            rss_bytes(),
            peak_rss_bytes(),
            trees + dir_bytes(store.dir()),
        ));
    };
    let probe = crate::simulate::driver::Probe {
        every_ms: span_ms / SAMPLES,
        call: &mut sample,
    };
    let report =
        crate::simulate::cli::simulate_files_probed(&defs, &scenario, Some(1), None, Some(probe))
            .map_err(|e| BenchError::Failed(e.message))?;
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = cpu_s() - cpu_before;
    let _ = std::fs::remove_dir_all(&dir);
    let virtual_s = (report.until_ms - report.from_ms) as f64 / 1e3;
    let speedup = virtual_s / wall_s.max(1e-9);
    let t = &report.totals;
    println!(
        "simulate: {graphs} graphs, {keys} keys, {days} virtual days in {wall_s:.1} s ({speedup:.0}x real time; goal {SPEEDUP_GOAL:.0}x): {} runs, {} attempts, {} events",
        t.runs_started, t.attempts, report.events
    );
    // Per example: what its copies did.
    let mut per: std::collections::BTreeMap<&str, (u64, u64, u64)> = Default::default();
    for (g, gr) in &report.graphs {
        let base = g.split('-').next().unwrap_or(g);
        let e = per.entry(base).or_default();
        e.0 += gr.figures.runs_started;
        e.1 += gr.figures.attempts;
        e.2 += gr.figures.sensor_checks;
    }
    for (base, (runs, attempts, checks)) in per {
        println!("  {base}: {runs} runs, {attempts} attempts, {checks} sensor checks");
    }
    let mb = |b: u64| b as f64 / 1e6;
    let mut series = String::from("  memory (at: RSS, peak RSS, store):");
    for (at, rss, peak, store) in &samples {
        let _ = write!(
            series,
            " +{:.1}h: {:.0}/{:.0}/{:.0} MB;",
            *at as f64 / 3_600_000.0,
            mb(*rss),
            mb(*peak),
            mb(*store)
        );
    }
    println!("{}", series.trim_end_matches(';'));
    let half = samples
        .iter()
        .find(|s| s.0 * 2 >= span_ms)
        .copied()
        .unwrap_or_default();
    let last = samples.last().copied().unwrap_or_default();
    println!(
        "{}",
        result_line(
            "simulate",
            &[
                ("virtual_days", days.to_string()),
                ("wall_s", format!("{wall_s:.2}")),
                ("speedup", format!("{speedup:.0}")),
                ("cpu_s", format!("{cpu_s:.2}")),
                ("events", report.events.to_string()),
                (
                    "events_per_s",
                    format!("{:.0}", report.events as f64 / wall_s.max(1e-9))
                ),
                ("rss_bytes", peak_rss_bytes().to_string()),
                ("rss_half_bytes", half.2.to_string()),
                ("store_half_bytes", half.3.to_string()),
                ("store_bytes", last.3.to_string()),
                ("runs", t.runs_started.to_string()),
                ("graphs", graphs.to_string()),
                ("keys", keys.to_string()),
            ],
        )
    );
    Ok(())
}
