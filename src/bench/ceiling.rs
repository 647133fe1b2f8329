//! `weir bench ceiling`: where one leader saturates on this machine.
//!
//! An engine whose pools run on workers only (`weir serve … --cluster ADDR
//! --no-local-workers`, a single one or a group of three `--raft-id`
//! members) and [`WORKERS`] `weir worker --join` processes of
//! [`WORKER_SLOTS`] slots each, every command `true`:
//!
//! - runs/s: a backfill of N one-node runs (graph `flat`, up to 256 active
//!   runs), from the request to the latest `settled_at_ms` among them;
//! - node completions/s: a backfill of M runs of [`WIDE_NODES`]
//!   independent nodes each (graph `wide`), nodes over the same span.
//!
//! Each phase also reads, from `/proc`, the CPU time that the leader, the
//! followers and the workers (with the `true` commands they waited for)
//! used during it, and the machine's busy share (`/proc/stat`: the other
//! users of the machine count too): from those, CPU ms per run for each,
//! which says what bounds the rate.
//!
//! Configurations: single and replicated with the members free on every
//! core; without `--quick` also with the members pinned to core 0
//! (`taskset -c 0`) and the workers to the other cores, so that the engine
//! has one core to itself. Keys are `{single,replicated}_{N}c_…` where N is
//! the members' core count; `leader_ceiling_runs_per_s` and
//! `leader_ceiling_nodes_per_s` are the single engine's on every core.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::procs::Proc;
use super::report::{result_line, BenchError};
use super::serve_group::{cpu_ms, days, failed, now_ms, prepare_root, Api, Engine};

/// Worker processes.
pub const WORKERS: usize = 2;
/// Slots of each worker.
pub const WORKER_SLOTS: u32 = 32;
/// Independent nodes of a run of `wide`.
pub const WIDE_NODES: usize = 8;

fn write_defs(dir: &Path) -> Result<PathBuf, BenchError> {
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).map_err(failed)?;
    let slots = WORKERS as u32 * WORKER_SLOTS;
    let head = |name: &str, active: u32| {
        format!(
            "name = \"{name}\"\npartitioning = \"daily\"\nmax_active_runs = {active}\n[pools]\ndefault = {slots}\n"
        )
    };
    let mut flat = head("flat", 256);
    flat.push_str("[[nodes]]\nname = \"one\"\ncommand = [\"true\"]\n");
    let mut wide = head("wide", 64);
    for i in 0..WIDE_NODES {
        wide.push_str(&format!(
            "[[nodes]]\nname = \"w{i}\"\ncommand = [\"true\"]\n"
        ));
    }
    std::fs::write(defs.join("flat.toml"), flat).map_err(failed)?;
    std::fs::write(defs.join("wide.toml"), wide).map_err(failed)?;
    Ok(defs)
}

/// Busy and total jiffies of the whole machine (`/proc/stat`'s `cpu`
/// line: busy is all but idle and iowait).
fn machine_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// CPU ms of each process, and the machine's jiffies, at one instant.
struct Sample {
    leader: u64,
    followers: u64,
    workers: u64,
    machine: Option<(u64, u64)>,
}

fn sample(engine: &Engine, leader: u64, workers: &[Proc]) -> Sample {
    let mut s = Sample {
        leader: 0,
        followers: 0,
        workers: 0,
        machine: machine_jiffies(),
    };
    for (id, m) in &engine.members {
        let Some(p) = &m.2 else { continue };
        let ms = cpu_ms(p.0.id()).unwrap_or(0);
        if *id == leader {
            s.leader += ms;
        } else {
            s.followers += ms;
        }
    }
    s.workers = workers.iter().filter_map(|w| cpu_ms(w.0.id())).sum();
    s
}

/// What one phase measured.
#[derive(Debug, Clone, Copy)]
struct Phase {
    /// Runs (or nodes) per second.
    per_s: f64,
    /// CPU ms per run (or node): the leader's, the followers', the
    /// workers'.
    leader_ms: f64,
    followers_ms: f64,
    workers_ms: f64,
    /// The machine's busy share during it (0..1).
    busy: f64,
}

/// A backfill of `runs` runs of `graph` from `year`, each of `nodes`
/// nodes: its rate in nodes/s and its CPU per node.
fn phase(
    e: &Engine,
    api: &Api,
    workers: &[Proc],
    graph: &str,
    year: u32,
    runs: usize,
    nodes: usize,
) -> Result<Phase, BenchError> {
    let leader = e.wait_leader(api, Duration::from_secs(30))?;
    let parts = days(year, runs);
    let before = sample(e, leader, workers);
    let t0 = now_ms();
    e.call(
        api,
        "POST",
        &format!("/api/v1/graphs/{graph}/backfills"),
        Some(json!({"from": parts[0], "to": parts[runs - 1]})),
    )?;
    let last = e.wait_settled(
        api,
        graph,
        &parts,
        Duration::from_secs(900),
        Duration::from_millis(250),
    )?;
    let after = sample(e, leader, workers);
    let span_s = last.saturating_sub(t0).max(1) as f64 / 1e3;
    let done = (runs * nodes) as f64;
    let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / done;
    let busy = match (before.machine, after.machine) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => (b1 - b0) as f64 / (t1 - t0) as f64,
        _ => f64::NAN,
    };
    Ok(Phase {
        per_s: done / span_s,
        leader_ms: per(after.leader, before.leader),
        followers_ms: per(after.followers, before.followers),
        workers_ms: per(after.workers, before.workers),
        busy,
    })
}

/// Waits until `n` workers have joined the engine's leader.
fn wait_joined(e: &Engine, api: &Api, n: usize) -> Result<(), BenchError> {
    let t0 = Instant::now();
    loop {
        let v = e.call(api, "GET", "/api/v1/workers", None)?;
        let joined = v
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| w["state"] == "joined")
            .count();
        if joined >= n {
            return Ok(());
        }
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(failed(format!(
                "{}: {joined} of {n} workers joined within 60 s",
                e.name
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One configuration of the engine.
struct Config {
    /// Its data folders' prefix.
    name: &'static str,
    replicated: bool,
    /// The members' cores, the workers' cores (`None`: any).
    members_cpus: Option<String>,
    workers_cpus: Option<String>,
    /// How many cores the members may use.
    cores: usize,
}

/// The configurations to measure on a machine of `cores` cores.
fn configs(quick: bool, cores: usize, taskset: bool) -> Vec<Config> {
    let all = |name, replicated| Config {
        name,
        replicated,
        members_cpus: None,
        workers_cpus: None,
        cores,
    };
    let one = |name, replicated| Config {
        name,
        replicated,
        members_cpus: Some("0".to_string()),
        workers_cpus: Some(format!("1-{}", cores - 1)),
        cores: 1,
    };
    let mut out = Vec::new();
    if !quick && taskset && cores > 1 {
        out.push(one("single-1c", false));
    }
    out.push(all("single-all", false));
    if !quick && taskset && cores > 1 {
        out.push(one("replicated-1c", true));
    }
    out.push(all("replicated-all", true));
    out
}

/// Runs the scenario.
pub fn run(quick: bool) -> Result<(), BenchError> {
    let (runs, wide_runs) = if quick { (600, 100) } else { (3_000, 400) };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let taskset = std::process::Command::new("taskset")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    let exe = std::env::current_exe().map_err(failed)?;
    let root = prepare_root("ceiling")?;
    let defs = write_defs(root.path())?;
    let api = Api::new()?;
    let mut pairs: Vec<(String, String)> = vec![
        ("machine_cores".into(), cores.to_string()),
        ("workers".into(), WORKERS.to_string()),
        ("worker_slots".into(), WORKER_SLOTS.to_string()),
        ("runs".into(), runs.to_string()),
        ("wide_nodes".into(), (wide_runs * WIDE_NODES).to_string()),
    ];
    if !quick && !taskset {
        eprintln!("weir bench ceiling: no taskset here; the 1-core configurations are skipped");
    }
    for c in configs(quick, cores, taskset) {
        let n = if c.replicated { 3 } else { 1 };
        let e = Engine::start_on(
            &exe,
            &defs,
            root.path(),
            c.name,
            n,
            true,
            c.members_cpus.as_deref(),
        )?;
        e.wait_leader(&api, Duration::from_secs(60))?;
        let workers = (0..WORKERS)
            .map(|i| e.worker_on(&format!("w{i}"), WORKER_SLOTS, c.workers_cpus.as_deref()))
            .collect::<Result<Vec<Proc>, BenchError>>()?;
        wait_joined(&e, &api, WORKERS)?;
        // A warm-up, not counted: connections open, files grown.
        phase(&e, &api, &workers, "flat", 1990, 100, 1)?;
        let flat = phase(&e, &api, &workers, "flat", 2000, runs, 1)?;
        let wide = phase(&e, &api, &workers, "wide", 2000, wide_runs, WIDE_NODES)?;
        drop(workers);
        drop(e);
        let mode = if c.replicated { "replicated" } else { "single" };
        let pin = match &c.members_cpus {
            Some(cpus) => format!(
                "members on core {cpus}, workers on {}",
                c.workers_cpus.as_deref().unwrap_or("any")
            ),
            None => "members and workers on any core".into(),
        };
        println!(
            "{mode}, {} core(s) ({pin}): {:.0} runs/s (CPU ms per run: leader {:.2}, followers {:.2}, workers {:.2}; machine busy {:.0}%), {:.0} node completions/s in runs of {WIDE_NODES} (CPU ms per node: leader {:.2}, followers {:.2}, workers {:.2}; busy {:.0}%)",
            c.cores,
            flat.per_s,
            flat.leader_ms,
            flat.followers_ms,
            flat.workers_ms,
            flat.busy * 100.0,
            wide.per_s,
            wide.leader_ms,
            wide.followers_ms,
            wide.workers_ms,
            wide.busy * 100.0,
        );
        let key = |k: &str| {
            let cores = if c.members_cpus.is_some() {
                c.cores
            } else {
                cores
            };
            format!("{mode}_{cores}c_{k}")
        };
        for (k, v) in [
            ("runs_per_s", format!("{:.0}", flat.per_s)),
            ("nodes_per_s", format!("{:.0}", wide.per_s)),
            ("leader_cpu_ms_per_run", format!("{:.3}", flat.leader_ms)),
            (
                "followers_cpu_ms_per_run",
                format!("{:.3}", flat.followers_ms),
            ),
            ("workers_cpu_ms_per_run", format!("{:.3}", flat.workers_ms)),
            ("leader_cpu_ms_per_node", format!("{:.3}", wide.leader_ms)),
            ("busy", format!("{:.2}", flat.busy)),
        ] {
            pairs.push((key(k), v));
        }
        if c.members_cpus.is_none() {
            let prefix = if c.replicated { "replicated" } else { "leader" };
            pairs.push((
                format!("{prefix}_ceiling_runs_per_s"),
                format!("{:.0}", flat.per_s),
            ));
            pairs.push((
                format!("{prefix}_ceiling_nodes_per_s"),
                format!("{:.0}", wide.per_s),
            ));
        }
    }
    let borrowed: Vec<(&str, String)> =
        pairs.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    println!("{}", result_line("ceiling", &borrowed));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_measures_every_core_only_and_full_adds_one_core() {
        let names = |quick, cores, taskset| {
            configs(quick, cores, taskset)
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(names(true, 2, true), ["single-all", "replicated-all"]);
        assert_eq!(
            names(false, 2, true),
            ["single-1c", "single-all", "replicated-1c", "replicated-all"]
        );
        assert_eq!(names(false, 2, false), ["single-all", "replicated-all"]);
        assert_eq!(names(false, 1, true), ["single-all", "replicated-all"]);
        let one = configs(false, 4, true);
        assert_eq!(one[0].members_cpus.as_deref(), Some("0"));
        assert_eq!(one[0].workers_cpus.as_deref(), Some("1-3"));
        assert_eq!(one[0].cores, 1);
    }

    #[test]
    fn the_definitions_size_the_pool_to_the_workers_slots() {
        let dir = std::env::temp_dir().join(format!("weir-ceiling-test-{}", std::process::id()));
        let defs = write_defs(&dir).expect("written");
        let wide = std::fs::read_to_string(defs.join("wide.toml")).expect("wide");
        let flat = std::fs::read_to_string(defs.join("flat.toml")).expect("flat");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(wide.matches("[[nodes]]").count(), WIDE_NODES);
        assert!(!wide.contains("upstreams"), "wide's nodes are independent");
        let pool = format!("default = {}", WORKERS as u32 * WORKER_SLOTS);
        assert!(
            flat.contains(&pool) && wide.contains(&pool),
            "{flat}\n{wide}"
        );
    }
}
