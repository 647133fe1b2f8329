//! Node outputs kept out of sled (issue #13 item 2): an output at the
//! documented limit, and a fan-in whose upstream outputs add up past the
//! journal's entry limit, both reach their downstreams; 40 outputs of 1 MB
//! leave sled small; a damaged blob is reported with its path; expiry
//! removes the blobs no record names and keeps shared ones; a process
//! killed while it writes outputs loses no acknowledged output and leaves
//! no record naming a missing blob.

mod graphs_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use graphs_support::node;
use weir::actors::done::{done_key, DoneRecord, DONE_PREFIX};
use weir::actors::store::{BLOBS_DIR, BLOB_INLINE_BYTES_MAX};
use weir::core::codec;
use weir::task::command::OUTPUT_BYTES_MAX;
use weir::{
    DoneStatus, Durability, Engine, EngineEvent, GraphDef, NodeDef, Partition, RunState, TaskError,
    TaskInput, TicketView,
};
use weir_core::names::Name;

/// `n` bytes that depend on `seed`: each output of a test is told from
/// the others, and a downstream can check what it was handed.
fn pattern(seed: &str, n: usize) -> Vec<u8> {
    let mut x: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes() {
        x = (x ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A node running `sized`: its output is `pattern(seed, bytes)`, the seed
/// being [`seed`] of the node unless given.
fn sized(name: &str, bytes: usize, seed: Option<&str>) -> NodeDef {
    let mut n = node(name, &[], "sized");
    n.task.config = serde_json::json!({ "bytes": bytes, "seed": seed });
    n
}

/// The default seed of a node's output: every node of every partition
/// makes its own.
fn seed(node: &str, partition: &str) -> String {
    format!("{node}@{partition}")
}

/// A node running `check` after `ups`: its output lists each upstream with
/// its size and whether it is the pattern its name makes.
fn check(name: &str, ups: &[&str]) -> NodeDef {
    node(name, ups, "check")
}

fn check_output(ups: &[(&str, usize)]) -> String {
    ups.iter()
        .map(|(u, n)| format!("{u}:{n}:ok"))
        .collect::<Vec<_>>()
        .join(",")
}

fn builder(dir: &Path, durability: Durability, slots: u32) -> weir::EngineBuilder {
    Engine::builder(dir)
        .durability(durability)
        .pool("default", slots)
        .task_fn("sized", |ctx| async move {
            let input: TaskInput =
                codec::decode(&ctx.payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
            let bytes = input.config["bytes"].as_u64().unwrap_or(0) as usize;
            let seed = match input.config["seed"].as_str() {
                Some(s) => s.to_string(),
                None => seed(&input.node, &input.partition),
            };
            Ok(pattern(&seed, bytes))
        })
        .task_fn("check", |ctx| async move {
            let input: TaskInput =
                codec::decode(&ctx.payload).map_err(|e| TaskError::Permanent(e.to_string()))?;
            let mut parts = Vec::new();
            for (name, up) in &input.upstreams {
                let want = pattern(&seed(name, &input.partition), up.output.len());
                let fine = up.output_blob.is_none() && up.output == want;
                parts.push(format!(
                    "{name}:{}:{}",
                    up.output.len(),
                    if fine { "ok" } else { "WRONG" }
                ));
            }
            Ok(parts.join(",").into_bytes())
        })
}

async fn engine(dir: &Path) -> Engine {
    builder(dir, Durability::Flush, 4).open().await.unwrap()
}

/// The output of a done ticket, read back whole.
async fn output(engine: &Engine, key: &str) -> Vec<u8> {
    match engine.ticket(key).await.unwrap() {
        Some(TicketView::Done(d)) => {
            assert_eq!(d.status, DoneStatus::Succeeded, "{key}: {d:?}");
            d.output
        }
        other => panic!("{key}: {other:?}"),
    }
}

async fn run_one(engine: &Engine, def: GraphDef, p: &Partition) -> RunState {
    let graph = def.name.to_string();
    engine.adopt(def).await.unwrap();
    engine.start_run(&graph, p.clone()).await.unwrap();
    let states = engine
        .wait_settled(&graph, std::slice::from_ref(p), Duration::from_secs(60))
        .await
        .unwrap();
    states[0]
}

/// Bytes of the files under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let Ok(m) = e.metadata() else { continue };
            total += if m.is_dir() {
                dir_bytes(&e.path())
            } else {
                m.len()
            };
        }
    }
    total
}

/// Files under `DATA/blobs`.
fn blob_files(data: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(data.join(BLOBS_DIR))
        .into_iter()
        .flatten()
        .flatten()
    {
        for f in std::fs::read_dir(shard.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            out.push(f.path());
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_at_the_documented_limit_reaches_its_downstream() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path()).await;
    let limit = OUTPUT_BYTES_MAX as usize;
    let def = GraphDef::new(
        Name::new("big").unwrap(),
        vec![sized("a", limit, None), check("b", &["a"])],
    );
    let p = Partition::NONE;
    assert_eq!(run_one(&engine, def, &p).await, RunState::Complete);
    assert_eq!(
        String::from_utf8(output(&engine, "big/none/b/0").await).unwrap(),
        check_output(&[("a", limit)])
    );
    assert_eq!(
        output(&engine, "big/none/a/0").await,
        pattern(&seed("a", "none"), limit)
    );
    // The record holds a reference, not the megabyte.
    let rec: DoneRecord = engine
        .store()
        .get(&done_key("big/none/a/0"))
        .unwrap()
        .unwrap();
    assert!(rec.output.is_empty(), "{} bytes inline", rec.output.len());
    assert_eq!(
        rec.output_blob.as_ref().map(|b| b.bytes),
        Some(limit as u64)
    );
    // The API's view shows it, cut at its inline limit.
    let detail = weir::serve::views::run_detail(engine.store(), "big", &p, 64 << 10)
        .unwrap()
        .unwrap();
    let a = detail.nodes.iter().find(|n| n.node == "a").unwrap();
    assert_eq!(a.output_bytes, limit);
    assert!(a.output_truncated);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_in_past_the_entry_limit_completes() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path()).await;
    let each = 600 << 10;
    let def = GraphDef::new(
        Name::new("fanin").unwrap(),
        vec![
            sized("u1", each, None),
            sized("u2", each, None),
            sized("u3", each, None),
            // One small upstream stays inline beside the blobs.
            sized("u4", BLOB_INLINE_BYTES_MAX, None),
            check("m", &["u1", "u2", "u3", "u4"]),
        ],
    );
    let p = Partition::NONE;
    assert_eq!(run_one(&engine, def, &p).await, RunState::Complete);
    assert_eq!(
        String::from_utf8(output(&engine, "fanin/none/m/0").await).unwrap(),
        check_output(&[
            ("u1", each),
            ("u2", each),
            ("u3", each),
            ("u4", BLOB_INLINE_BYTES_MAX)
        ])
    );
    let u4: DoneRecord = engine
        .store()
        .get(&done_key("fanin/none/u4/0"))
        .unwrap()
        .unwrap();
    assert_eq!(
        u4.output.len(),
        BLOB_INLINE_BYTES_MAX,
        "at the threshold: inline"
    );
    assert!(u4.output_blob.is_none());
    assert_eq!(blob_files(dir.path()).len(), 3);
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_outputs_of_a_megabyte_leave_sled_small() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path()).await;
    let (count, each) = (40, 1_000_000);
    let mut nodes: Vec<NodeDef> = (0..count)
        .map(|i| sized(&format!("n{i:02}"), each, None))
        .collect();
    let names: Vec<String> = (0..count).map(|i| format!("n{i:02}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    nodes.push(check("all", &refs));
    let def = GraphDef::new(Name::new("forty").unwrap(), nodes);
    let p = Partition::NONE;
    assert_eq!(run_one(&engine, def, &p).await, RunState::Complete);
    let want: Vec<(&str, usize)> = refs.iter().map(|n| (*n, each)).collect();
    assert_eq!(
        String::from_utf8(output(&engine, "forty/none/all/0").await).unwrap(),
        check_output(&want)
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
    let outputs = (count * each) as u64;
    let sled = dir_bytes(&dir.path().join("sled"));
    let blobs = dir_bytes(&dir.path().join(BLOBS_DIR));
    let store = sled + blobs;
    eprintln!(
        "40 x 1 MB outputs: sled {sled} bytes, blobs {blobs} bytes, store/outputs {:.3}",
        store as f64 / outputs as f64
    );
    assert!(sled < 8 << 20, "sled holds {sled} bytes");
    assert_eq!(blobs, outputs, "one file per output, nothing else");
    assert!(
        (store as f64) < 1.2 * outputs as f64,
        "store {store} bytes for {outputs} bytes of outputs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_blob_is_reported_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let engine = engine(&data).await;
    let def = GraphDef::new(
        Name::new("g").unwrap(),
        vec![sized("a", 64 << 10, None), check("b", &["a"])],
    );
    let p: Partition = "2026-11-29".parse().unwrap();
    assert_eq!(run_one(&engine, def, &p).await, RunState::Complete);
    let rec: DoneRecord = engine
        .store()
        .get(&done_key("g/2026-11-29/a/0"))
        .unwrap()
        .unwrap();
    let path = engine.store().blob_path(rec.output_blob.as_ref().unwrap());
    let shown = path.display().to_string();
    // Flip one byte in the middle.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[32 << 10] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    let err = engine
        .ticket("g/2026-11-29/a/0")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(&shown) && err.contains("damaged"), "{err}");
    let err = weir::serve::views::run_detail(engine.store(), "g", &p, 64 << 10)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&shown), "{err}");
    // A downstream started now fails, naming the file, rather than run on
    // a wrong input.
    engine.rerun_node("g", p.clone(), "b", true).await.unwrap();
    let states = engine
        .wait_settled("g", std::slice::from_ref(&p), Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(states, vec![RunState::Failed]);
    let view = engine.graph_run("g", &p).unwrap().unwrap();
    let b = view.nodes.iter().find(|n| n.node == "b").unwrap();
    let error = b.error.clone().unwrap_or_default();
    assert!(
        b.state == "failed" && error.contains(&shown) && error.contains("upstream a"),
        "{b:?}"
    );
    engine.shutdown(Duration::from_secs(5)).await.unwrap();

    // `weir status` with no engine: a storage failure, exit 3, the path named.
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "off")
        .args(["status", "--json", "--data"])
        .arg(&data)
        .args(["g", "2026-11-29"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "stderr: {stderr}");
    assert!(stderr.contains(&shown), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_removes_unreferenced_blobs_and_keeps_shared_ones() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builder(dir.path(), Durability::Flush, 4)
        .expiry_interval_ms(25)
        .open()
        .await
        .unwrap();
    let shared = 10 << 10;
    let mut short = GraphDef::new(
        Name::new("short").unwrap(),
        vec![
            sized("x", shared, Some("shared")),
            sized("y", 20 << 10, None),
        ],
    );
    short.retention_ms = 300;
    let long = GraphDef::new(
        Name::new("long").unwrap(),
        vec![sized("x", shared, Some("shared"))],
    );
    let p = Partition::NONE;
    assert_eq!(run_one(&engine, long, &p).await, RunState::Complete);
    assert_eq!(run_one(&engine, short, &p).await, RunState::Complete);
    let blob_of = |key: &str| {
        let rec: DoneRecord = engine.store().get(&done_key(key)).unwrap().unwrap();
        engine.store().blob_path(rec.output_blob.as_ref().unwrap())
    };
    let shared_path = blob_of("long/none/x/0");
    assert_eq!(
        blob_of("short/none/x/0"),
        shared_path,
        "same content, one blob"
    );
    let y_path = blob_of("short/none/y/0");
    assert_eq!(blob_files(dir.path()), {
        let mut v = vec![shared_path.clone(), y_path.clone()];
        v.sort();
        v
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while engine.graph_run("short", &p).unwrap().is_some() {
        assert!(Instant::now() < deadline, "the short run never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        blob_files(dir.path()),
        vec![shared_path],
        "y's blob went with its run"
    );
    assert_eq!(
        output(&engine, "long/none/x/0").await,
        pattern("shared", shared)
    );
    // No index record of the expired run is left behind.
    let index: Vec<String> = engine
        .store()
        .scan_keys("blob")
        .unwrap()
        .into_iter()
        .filter(|k| k.contains("short/"))
        .collect();
    assert!(index.is_empty(), "{index:?}");
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}

const CHILD_DIR_VAR: &str = "WEIR_OUTPUTS_CHILD_DIR";
const CRASH_NODES: usize = 40;
const CRASH_BYTES: usize = 256 << 10;
const CRASH_PARTITIONS: [&str; 3] = ["2026-11-01", "2026-11-02", "2026-11-03"];

fn crash_graph() -> GraphDef {
    let names: Vec<String> = (0..CRASH_NODES).map(|i| format!("n{i:02}")).collect();
    let mut nodes: Vec<NodeDef> = names.iter().map(|n| sized(n, CRASH_BYTES, None)).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    nodes.push(check("all", &refs));
    // An attempt the kill cut counts as one: leave room for a retry.
    for n in &mut nodes {
        n.retry = weir::RetryPolicy {
            attempts_max: 3,
            initial_ms: 10,
            multiplier: 2.0,
            max_ms: 100,
            jitter: 0.0,
            deadline_ms: None,
        };
    }
    GraphDef::new(Name::new("crash").unwrap(), nodes)
}

fn crash_partitions() -> Vec<Partition> {
    CRASH_PARTITIONS
        .iter()
        .map(|p| p.parse().unwrap())
        .collect()
}

/// The child: runs only when the parent sets `WEIR_OUTPUTS_CHILD_DIR`.
/// Prints `done <key>` for each completion it was told of (the record is
/// durable by then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_crash_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_VAR) else {
        return;
    };
    let engine = builder(Path::new(&dir), Durability::Fsync, 4)
        .open()
        .await
        .unwrap();
    let mut events = engine.subscribe();
    tokio::spawn(async move {
        while let Ok(e) = events.recv().await {
            if let EngineEvent::Completed {
                key,
                status: DoneStatus::Succeeded,
                ..
            } = e
            {
                println!("done {key}");
            }
        }
    });
    engine.adopt(crash_graph()).await.unwrap();
    engine
        .start_runs("crash", crash_partitions())
        .await
        .unwrap();
    // Not reached in the test: the parent kills the child long before.
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

/// Runs the child until it has reported `kill_after` completions, kills it
/// with SIGKILL, and returns the keys it reported.
fn run_child(dir: &Path, kill_after: usize) -> BTreeSet<String> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "outputs_crash_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_DIR_VAR, dir)
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut done = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while done.len() < kill_after && Instant::now() < deadline {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                if let Some(k) = line.strip_prefix("done ") {
                    done.insert(k.to_string());
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let killed = child.kill().is_ok();
    // What it printed before it died was acknowledged too.
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(5)) {
        if let Some(k) = line.strip_prefix("done ") {
            done.insert(k.to_string());
        }
    }
    let status = child.wait().unwrap();
    assert!(
        killed && !status.success(),
        "the child ended by itself: {status:?}"
    );
    done
}

/// Every done record of the store whose output is in a blob reads back
/// whole (its hash checked); the distinct blobs they name.
fn check_every_record(engine: &Engine) -> BTreeMap<String, PathBuf> {
    let store = engine.store();
    let mut named = BTreeMap::new();
    for (key, rec) in store.scan::<DoneRecord>(DONE_PREFIX).unwrap() {
        if let Some(b) = &rec.output_blob {
            if let Err(e) = rec.load_output(store) {
                panic!("{key}: {e}");
            }
            named.insert(b.hash.clone(), store.blob_path(b));
        }
    }
    named
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_writing_outputs_loses_no_acknowledged_output() {
    let rounds: usize = std::env::var("WEIR_SOAK").map_or(2, |_| 10);
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        // A different point each round, always before the 123 nodes end.
        let kill_after = 10 + (25 * round) % 100;
        let t0 = Instant::now();
        let acked = run_child(dir.path(), kill_after);
        eprintln!(
            "round {round}: killed after {} completions, {:?}",
            acked.len(),
            t0.elapsed()
        );
        assert!(
            acked.len() >= kill_after,
            "round {round}: only {} completions before the kill",
            acked.len()
        );
        let engine = builder(dir.path(), Durability::Fsync, 4)
            .open()
            .await
            .unwrap();
        // Nothing acknowledged is lost, and every output reads back as the
        // task made it.
        for key in &acked {
            let parts: Vec<&str> = key.split('/').collect();
            let want = if parts[2] == "all" {
                // The fan-in's output is checked below, with the rest.
                continue;
            } else {
                pattern(&seed(parts[2], parts[1]), CRASH_BYTES)
            };
            assert_eq!(output(&engine, key).await, want, "round {round}: {key}");
        }
        // No record names a missing or damaged blob (the sweep at open
        // removed only unreferenced ones).
        check_every_record(&engine);
        engine.adopt(crash_graph()).await.unwrap();
        // The child's tickets name its scheduler by its engine's prefix
        // (`weir0.scheduler.crash`), which this process's engine may not
        // have: their completion notices are dropped and the reconciler
        // repairs it, once a minute by default. Reconcile on the way
        // instead of waiting for it.
        let t1 = Instant::now();
        let states = loop {
            match engine
                .wait_settled("crash", &crash_partitions(), Duration::from_millis(500))
                .await
            {
                Ok(states) => break states,
                Err(weir::EngineError::Timeout(..)) => {
                    assert!(t1.elapsed() < Duration::from_secs(120), "round {round}");
                    engine.reconcile("crash").await.unwrap();
                }
                Err(e) => panic!("round {round}: {e}"),
            }
        };
        eprintln!("round {round}: settled after reopen in {:?}", t1.elapsed());
        assert!(
            states.iter().all(|s| *s == RunState::Complete),
            "round {round}: {states:?}"
        );
        let want: Vec<(String, usize)> = (0..CRASH_NODES)
            .map(|i| (format!("n{i:02}"), CRASH_BYTES))
            .collect();
        let want: Vec<(&str, usize)> = want.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        for p in CRASH_PARTITIONS {
            assert_eq!(
                String::from_utf8(output(&engine, &format!("crash/{p}/all/0")).await).unwrap(),
                check_output(&want),
                "round {round}: {p}"
            );
        }
        let named = check_every_record(&engine);
        engine.shutdown(Duration::from_secs(5)).await.unwrap();
        // One file per distinct output: no leaked blob or temporary file.
        let files = blob_files(dir.path());
        let want_files: Vec<PathBuf> = named.into_values().collect();
        assert_eq!(files, want_files, "round {round}");
    }
}

/// The command path end to end: `weir run` with commands that write
/// exactly the documented limit to WEIR_OUTPUT, a fan-in of three 600 KiB
/// outputs reading them from WEIR_UPSTREAMS, and `weir status --json`
/// showing the outputs afterwards.
#[test]
fn commands_at_the_limit_and_a_fan_in_run_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let limit = OUTPUT_BYTES_MAX;
    let each = 600 << 10;
    let write = |n: u64, ch: char| -> String {
        format!("head -c {n} /dev/zero | tr '\\0' '{ch}' > \"$WEIR_OUTPUT\"")
    };
    // The fan-in prints each upstream's size and whether it is all one
    // letter, then exits 1 if any is not.
    let check = r#"import json, os, sys
ups = json.load(open(os.environ["WEIR_UPSTREAMS"]))
ok = True
out = []
for name, u in sorted(ups.items()):
    good = u["output"] == u["output"][:1] * u["output_bytes"]
    ok = ok and good
    out.append("%s:%d:%s" % (name, u["output_bytes"], "ok" if good else "WRONG"))
open(os.environ["WEIR_OUTPUT"], "w").write(",".join(out))
sys.exit(0 if ok else 1)
"#;
    let def = format!(
        r#"
name = "cli"

[[nodes]]
name = "big"
command = ["sh", "-c", {big:?}]

[[nodes]]
name = "after_big"
upstreams = ["big"]
command = ["python3", "-c", {check:?}]

[[nodes]]
name = "u1"
command = ["sh", "-c", {u1:?}]

[[nodes]]
name = "u2"
command = ["sh", "-c", {u2:?}]

[[nodes]]
name = "u3"
command = ["sh", "-c", {u3:?}]

[[nodes]]
name = "merge"
upstreams = ["u1", "u2", "u3"]
command = ["python3", "-c", {check:?}]
"#,
        big = write(limit, 'b'),
        u1 = write(each, 'x'),
        u2 = write(each, 'y'),
        u3 = write(each, 'z'),
        check = check,
    );
    std::fs::write(dir.path().join("cli.toml"), def).unwrap();
    let data = dir.path().join("data");
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "warn")
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .args(["run", "--until-idle", "--durability", "flush", "--data"])
        .arg(&data)
        .arg(dir.path().join("cli.toml"))
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "off")
        .args(["status", "--json", "--data"])
        .arg(&data)
        .args(["cli", "none"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let nodes: BTreeMap<String, serde_json::Value> = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["node"].as_str().unwrap().to_string(), n.clone()))
        .collect();
    assert_eq!(
        nodes["after_big"]["output_text"].as_str(),
        Some(format!("big:{limit}:ok").as_str()),
        "{:?}",
        nodes["after_big"]
    );
    assert_eq!(
        nodes["merge"]["output_text"].as_str(),
        Some(format!("u1:{each}:ok,u2:{each}:ok,u3:{each}:ok").as_str())
    );
    // The big output shows, cut at the view's inline limit.
    assert_eq!(nodes["big"]["output_bytes"].as_u64(), Some(limit));
    assert_eq!(nodes["big"]["output_truncated"].as_bool(), Some(true));
    assert!(nodes["big"]["output_text"]
        .as_str()
        .unwrap()
        .starts_with("bbbb"));
}

/// A plain job's output blob goes when its done record expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_jobs_blob_expires_with_its_done_record() {
    let dir = tempfile::tempdir().unwrap();
    let engine = builder(dir.path(), Durability::Flush, 2)
        .expiry_interval_ms(25)
        .task_fn("plain", |_ctx| async { Ok(pattern("plain", 50_000)) })
        .open()
        .await
        .unwrap();
    let mut job = weir::Job::new("p1", "plain", "default");
    // Long enough for the output to be read back before it expires on a
    // loaded machine (200 ms was not, once in a full parallel test run).
    job.retention_ms = Some(2_000);
    engine.enqueue(job).await.unwrap();
    engine
        .drain_until_idle(Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(output(&engine, "p1").await, pattern("plain", 50_000));
    assert_eq!(blob_files(dir.path()).len(), 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while engine.ticket("p1").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the done record never expired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The blob goes once the record's deletion is durable: just after.
    while !blob_files(dir.path()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the blob outlived its record: {:?}",
            blob_files(dir.path())
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    engine.shutdown(Duration::from_secs(5)).await.unwrap();
}
