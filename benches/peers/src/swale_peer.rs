//! swale 0.3 through its library, wired as its `swale run` command wires
//! it (cli/store.rs and cli/run.rs of the crate): a directory store
//! (object_store's `LocalFileSystem` under taquba, whose durable
//! transitions await SlateDB's WAL flush; no fsync), pools of 8 steps, the
//! scheduler at `swale run`'s options. Each node runs the `subprocess`
//! operator: the chain and fan-out on the same no-op program as weir's
//! command nodes; the crash graph on `/bin/sh -c` scripts that log each
//! successful body and fail every tenth middle node's first attempt
//! with exit code 75, swale's transient error.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use swale::records::{
    self, graph_run_key, GraphRunRecord, GraphRunState, NodeRecord, RecordStatus,
};
use swale::{
    DefinitionStore, Graph, OperatorSet, Partition, Pools, RecordHook, Scheduler, SchedulerOptions,
    REQUESTS_QUEUE,
};
use taquba::object_store::local::LocalFileSystem;
use taquba::object_store::ObjectStore;
use taquba::{InboxOptions, OpenOptions, Queue};
use tokio_util::sync::CancellationToken;

use crate::{fresh, result, Error};

/// A running swale: `swale run`'s wiring over a directory store.
struct Swale {
    queue: Arc<Queue>,
    scheduler: Arc<Scheduler>,
    stop: CancellationToken,
    hash: String,
    graph: Arc<Graph>,
}

impl Swale {
    async fn open(store: &std::path::Path, text: &str) -> Result<Swale, Error> {
        std::fs::create_dir_all(store)?;
        let objects: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(store)?);
        let operators = Arc::new(OperatorSet::builtin());
        let definitions = Arc::new(DefinitionStore::new(objects.clone(), "", operators.clone()));
        let (hash, graph) = definitions.put(text).await?;
        let options = OpenOptions::default().inbox(InboxOptions::new([REQUESTS_QUEUE]));
        let queue = Arc::new(Queue::open_with_options(objects.clone(), "swale", options).await?);
        let hook = RecordHook::new(queue.clock());
        let pools = Pools::builder(queue.clone(), objects, operators, hook)
            .poll_interval(Duration::from_millis(100))
            .pool("default", 8)
            .build();
        let pools = Arc::new(pools);
        let scheduler = Arc::new(Scheduler::new(queue.clone(), definitions, pools.clone()));
        let stop = CancellationToken::new();
        let _pool_handles = pools.spawn(&stop);
        let _scheduler_handle = scheduler.clone().spawn(
            SchedulerOptions {
                concurrency: 2,
                poll_interval: Duration::from_millis(100),
                reconcile_interval: Duration::from_secs(10),
            },
            stop.clone().cancelled_owned(),
        );
        Ok(Swale {
            queue,
            scheduler,
            stop,
            hash,
            graph,
        })
    }

    /// Starts the run (or resumes it, as `swale run` does when it exists)
    /// and waits until it is no longer active.
    async fn run_to_end(&self, limit: Duration) -> Result<GraphRunState, Error> {
        let partition = Partition::none();
        self.scheduler.start_run(&self.hash, &partition).await?;
        let key = graph_run_key(self.graph.name(), &partition);
        let began = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if let Some(run) = records::read::<GraphRunRecord>(self.queue.view(), &key).await? {
                if run.state != GraphRunState::Active {
                    return Ok(run.state);
                }
            }
            if began.elapsed() > limit {
                return Err(format!("the swale run did not settle in {limit:?}").into());
            }
        }
    }

    /// Node name → its record's status.
    async fn statuses(&self) -> Result<HashMap<String, RecordStatus>, Error> {
        let partition = Partition::none();
        let mut out = HashMap::new();
        for node in self.graph.nodes() {
            let key = records::node_record_key(self.graph.name(), &partition, node);
            if let Some(r) = records::read::<NodeRecord>(self.queue.view(), &key).await? {
                out.insert(node.name().to_string(), r.status);
            }
        }
        Ok(out)
    }
}

fn node_toml(name: &str, after: &[String], retries: u32, argv: &[String]) -> String {
    let mut t = format!("\n[[node]]\nname = \"{name}\"\n");
    if !after.is_empty() {
        let list: Vec<String> = after.iter().map(|a| format!("\"{a}\"")).collect();
        t.push_str(&format!("after = [{}]\n", list.join(", ")));
    }
    if retries > 0 {
        t.push_str(&format!("retries = {retries}\n"));
    }
    let argv: Vec<String> = argv
        .iter()
        .map(|a| format!("\"{}\"", a.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    t.push_str(&format!(
        "operator = \"subprocess\"\n[node.params]\nargv = [{}]\n",
        argv.join(", ")
    ));
    t
}

/// A chain of `nodes` subprocess nodes running `program`.
pub async fn chain(dir: &std::path::Path, nodes: u64, program: &str) -> Result<(), Error> {
    fresh(dir)?;
    let mut text = String::from("[graph]\nname = \"chain\"\n");
    for i in 0..nodes {
        let after = if i > 0 {
            vec![format!("n{:04}", i - 1)]
        } else {
            Vec::new()
        };
        text.push_str(&node_toml(
            &format!("n{i:04}"),
            &after,
            0,
            &[program.to_string()],
        ));
    }
    let swale = Swale::open(dir, &text).await?;
    let began = Instant::now();
    let state = swale.run_to_end(Duration::from_secs(600)).await?;
    let total = began.elapsed();
    swale.stop.cancel();
    let edge_mean_us = total.as_secs_f64() * 1e6 / nodes as f64;
    println!(
        "swale chain of {nodes} subprocess nodes: {state}, {:.1} ms (mean {edge_mean_us:.0} us per node and edge)",
        total.as_secs_f64() * 1e3
    );
    result(
        "chain",
        &[
            ("nodes", nodes.to_string()),
            ("settle_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
            ("edge_mean_us", format!("{edge_mean_us:.0}")),
            ("state", state.to_string()),
        ],
    );
    Ok(())
}

fn fanout_text(width: u64, body: impl Fn(&str) -> (Vec<String>, u32)) -> String {
    let mut text = String::from("[graph]\nname = \"fanout\"\n");
    let (argv, retries) = body("root");
    text.push_str(&node_toml("root", &[], retries, &argv));
    let mids: Vec<String> = (0..width).map(|i| format!("m{i:05}")).collect();
    for m in &mids {
        let (argv, retries) = body(m);
        text.push_str(&node_toml(m, &["root".to_string()], retries, &argv));
    }
    let (argv, retries) = body("sink");
    text.push_str(&node_toml("sink", &mids, retries, &argv));
    text
}

/// A 1 → `width` → 1 graph of subprocess nodes running `program`.
pub async fn fanout(dir: &std::path::Path, width: u64, program: &str) -> Result<(), Error> {
    fresh(dir)?;
    let text = fanout_text(width, |_| (vec![program.to_string()], 0));
    let swale = Swale::open(dir, &text).await?;
    let began = Instant::now();
    let state = swale.run_to_end(Duration::from_secs(600)).await?;
    let total = began.elapsed();
    swale.stop.cancel();
    println!(
        "swale fan-out 1 -> {width} -> 1 of subprocess nodes, pool 8: {state}, {:.1} ms",
        total.as_secs_f64() * 1e3
    );
    result(
        "fanout",
        &[
            ("width", width.to_string()),
            ("settle_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
            ("state", state.to_string()),
        ],
    );
    Ok(())
}

/// The crash graph: 1 → `width` → 1, each body a shell script that appends
/// its node name to `ok.log` when it succeeds; every tenth middle node
/// fails its first attempt (a marker file remembers it) and has two
/// retries, as weir's flaky nodes have three attempts.
fn crash_text(dir: &std::path::Path, width: u64) -> String {
    let log = dir.join("ok.log");
    fanout_text(width, |node| {
        let flaky = node
            .strip_prefix('m')
            .and_then(|i| i.parse::<u64>().ok())
            .is_some_and(|i| i % 10 == 0);
        let mut script = String::new();
        if flaky {
            let marker = dir.join(format!("failed.{node}"));
            script.push_str(&format!(
                "if [ ! -e '{m}' ]; then : > '{m}'; exit 75; fi; ",
                m = marker.display()
            ));
        }
        script.push_str(&format!("echo {node} >> '{}'", log.display()));
        (
            vec!["/bin/sh".to_string(), "-c".to_string(), script],
            if flaky { 2 } else { 0 },
        )
    })
}

/// The child of [`crash`]: runs (or resumes) the crash graph to its end
/// and prints `STATE s` and one `NODE name status` line per record.
pub async fn crash_child(dir: &std::path::Path, width: u64) -> Result<(), Error> {
    let swale = Swale::open(&dir.join("store"), &crash_text(dir, width)).await?;
    let state = swale.run_to_end(Duration::from_secs(600)).await?;
    for (node, status) in swale.statuses().await? {
        println!("NODE {node} {}", status.as_str());
    }
    println!("STATE {state}");
    swale.stop.cancel();
    Ok(())
}

fn lines_of(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// 1 → `width` → 1 in a child process killed with SIGKILL once half of
/// the nodes' bodies succeeded, then run again to its end. Lost: a node
/// whose body succeeded before the kill, or any node, not recorded
/// succeeded at the end. Re-executed: bodies that succeeded twice.
pub async fn crash(dir: &std::path::Path, width: u64) -> Result<(), Error> {
    fresh(dir)?;
    let nodes = width + 2;
    let me = std::env::current_exe()?;
    let child = |dir: &std::path::Path| {
        Command::new(&me)
            .args(["swale", "crash-child"])
            .arg(dir)
            .arg(width.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
    };
    let log = dir.join("ok.log");
    let began = Instant::now();
    let mut first = child(dir)?;
    let half = (nodes / 2) as usize;
    let killed_after = loop {
        let n = lines_of(&log).len();
        if n >= half {
            break n;
        }
        if let Some(status) = first.try_wait()? {
            return Err(format!("the first swale process ended before the kill: {status}").into());
        }
        if began.elapsed() > Duration::from_secs(600) {
            let _ = first.kill();
            return Err("half of the nodes did not succeed in 600 s".into());
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    first.kill()?; // SIGKILL
    first.wait()?;
    let before: Vec<String> = lines_of(&log);
    let mut second = child(dir)?;
    let out = second.stdout.take().ok_or("no stdout of the child")?;
    let mut statuses: HashMap<String, String> = HashMap::new();
    let mut state = String::from("none");
    for line in BufReader::new(out).lines() {
        let line = line?;
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next(), parts.next()) {
            (Some("NODE"), Some(n), Some(s)) => {
                statuses.insert(n.to_string(), s.to_string());
            }
            (Some("STATE"), Some(s), _) => state = s.to_string(),
            _ => {}
        }
    }
    second.wait()?;
    let total = began.elapsed();
    let after = lines_of(&log);
    let mut succeeded_bodies: HashMap<&str, u32> = HashMap::new();
    for n in &after {
        *succeeded_bodies.entry(n.as_str()).or_default() += 1;
    }
    let reexecuted = succeeded_bodies.values().filter(|c| **c > 1).count();
    let all: Vec<String> = std::iter::once("root".to_string())
        .chain((0..width).map(|i| format!("m{i:05}")))
        .chain(std::iter::once("sink".to_string()))
        .collect();
    let lost = all
        .iter()
        .filter(|n| statuses.get(n.as_str()).map(String::as_str) != Some("succeeded"))
        .count();
    let lost_acked = before
        .iter()
        .filter(|n| statuses.get(n.as_str()).map(String::as_str) != Some("succeeded"))
        .count();
    println!(
        "swale crash: 1 -> {width} -> 1 subprocess nodes, 10% failing once; SIGKILL after {killed_after} bodies succeeded, restart: {state} after {:.1} ms",
        total.as_secs_f64() * 1e3
    );
    println!(
        "nodes not recorded succeeded at the end: {lost} (of them succeeded before the kill: {lost_acked}); bodies that succeeded twice: {reexecuted}"
    );
    result(
        "crash",
        &[
            ("nodes", nodes.to_string()),
            ("total_ms", format!("{:.1}", total.as_secs_f64() * 1e3)),
            ("killed_after", killed_after.to_string()),
            ("lost", lost.to_string()),
            ("reexecuted", reexecuted.to_string()),
            ("state", state),
        ],
    );
    Ok(())
}
