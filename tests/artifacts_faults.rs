//! Artifacts under faults: the object store stopped mid-run (nodes fail
//! naming the store, retry per their policy, and the runs complete once
//! it is back) and the engine killed (-9) in the middle of an upload (no
//! half artifact is ever visible, the node runs again, and the staged
//! leftover is removed by the collector).

mod artifacts_support;
mod s3_support;
mod serve_support;

use std::path::Path;
use std::time::Duration;

use artifacts_support::{fan_graph, join_listing};
use s3_support::S3Server;
use serde_json::Value;
use serve_support::{start_env, wait_for, write_def, Served};

fn node(s: &Served, graph: &str, p: &str, node: &str) -> Value {
    let a = s
        .http()
        .get(&format!("/api/v1/graphs/{graph}/runs/{p}/nodes/{node}"));
    assert_eq!(a.status, 200, "{}", a.body);
    a.json()
}

fn runs(s: &Served, graph: &str) -> Vec<(String, String)> {
    let v: Value = s.json(&["runs", "--graph", graph, "--limit", "100"]);
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["partition"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_store_outage_fails_attempts_naming_it_and_the_runs_complete_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut s3 = S3Server::start(&dir.path().join("s3"));
    let defs = dir.path().join("defs");
    let def = fan_graph("out", 2, 20_000, "max_active_runs = 1").replace(
        r#"retry = { attempts = 3, initial = "100ms" }"#,
        r#"retry = { attempts = 30, initial = "250ms", multiplier = 1.0 }"#,
    );
    // Slow enough that the outage falls on running nodes.
    let def = def.replace("\"sh\", \"-c\", \"", "\"sh\", \"-c\", \"sleep 0.2 && ");
    write_def(&defs, "out", &def);
    let data = dir.path().join("data");
    let s = start_env(
        &["serve", "--artifacts", &s3.url("weir")],
        &defs,
        &data,
        "127.0.0.1:0",
        &s3.env(),
    );
    s.ok(&["backfill", "out", "2026-11-01..2026-11-08"]);
    wait_for("a first complete run", Duration::from_secs(60), || {
        runs(&s, "out")
            .iter()
            .any(|(_, st)| st == "complete")
            .then_some(())
    });
    s3.stop();
    std::thread::sleep(Duration::from_secs(3));
    let during = runs(&s, "out");
    assert!(
        during.iter().any(|(_, st)| st == "active"),
        "the outage came after the backfill: {during:?}"
    );
    s3.resume();
    wait_for("eight complete runs", Duration::from_secs(120), || {
        let r = runs(&s, "out");
        (r.len() == 8 && r.iter().all(|(_, st)| st == "complete")).then_some(())
    });
    // Attempts failed during the outage, each error naming the store (and
    // no secret), and were retried.
    let mut failed_on_store = 0;
    for d in 1..=8 {
        let p = format!("2026-11-{d:02}");
        let join = node(&s, "out", &p, "join");
        assert_eq!(
            join["output_text"].as_str().unwrap_or_default(),
            join_listing(2, 20_000, &p),
            "{join}"
        );
        for n in ["make", "m0", "m1"] {
            let v = node(&s, "out", &p, n);
            for a in v["attempt_log"].as_array().cloned().unwrap_or_default() {
                let e = a["error"].as_str().unwrap_or_default();
                assert!(!e.contains(s3_support::SECRET_KEY), "{e}");
                if e.contains("s3://weir-test/weir") {
                    failed_on_store += 1;
                }
            }
        }
    }
    assert!(
        failed_on_store > 0,
        "no attempt failed on the stopped store"
    );
}

fn staged(store: &Path) -> Vec<String> {
    std::fs::read_dir(store.join("artifacts/blake3"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains('#'))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn kill_9_mid_upload_leaves_no_half_artifact_and_the_node_runs_again() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    const BIG: u64 = 120 << 20;
    write_def(
        &defs,
        "big",
        &format!(
            r#"name = "big"
partitioning = "daily"

[[nodes]]
name = "make"
command = ["sh", "-c", "head -c {BIG} /dev/zero > \"$WEIR_ARTIFACTS_OUT/big.bin\""]
artifacts = ["big.bin"]
retry = {{ attempts = 3, initial = "100ms" }}

[[nodes]]
name = "size"
upstreams = ["make"]
command = ["sh", "-c", "wc -c < {{upstream.make.artifact.big.bin}} | tr -d ' \\n' > \"$WEIR_OUTPUT\""]
"#
        ),
    );
    let data = dir.path().join("data");
    let store = data.join("artifacts");
    let mut s = start_env(
        &["serve", "--artifacts-grace", "1s"],
        &defs,
        &data,
        "127.0.0.1:0",
        &[],
    );
    s.ok(&["start", "big", "2026-11-01"]);
    // The upload is staged beside its name, then renamed: kill the engine
    // while the staged file grows.
    wait_for("the upload to start", Duration::from_secs(60), || {
        (!staged(&store).is_empty()).then_some(())
    });
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    drop(s);
    let objects: Vec<String> = std::fs::read_dir(store.join("artifacts/blake3"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.contains('#'))
        .collect();
    assert!(objects.is_empty(), "a half upload is visible: {objects:?}");
    let s = start_env(
        &["serve", "--artifacts-grace", "1s"],
        &defs,
        &data,
        "127.0.0.1:0",
        &[],
    );
    s.wait_run_within("big", "2026-11-01", "complete", Duration::from_secs(120));
    let size = node(&s, "big", "2026-11-01", "size");
    assert_eq!(size["output"], Value::from(BIG), "{size}");
    let make = node(&s, "big", "2026-11-01", "make");
    assert_eq!(make["attempts"], 2, "the killed attempt counts: {make}");
    // The object is whole and named by its content's hash.
    let objects: Vec<std::fs::DirEntry> = std::fs::read_dir(store.join("artifacts/blake3"))
        .unwrap()
        .flatten()
        .filter(|e| !e.file_name().to_string_lossy().contains('#'))
        .collect();
    assert_eq!(objects.len(), 1);
    assert_eq!(objects[0].metadata().unwrap().len(), BIG);
    let zeros = vec![0u8; BIG as usize];
    assert_eq!(
        objects[0].file_name().to_string_lossy(),
        blake3::hash(&zeros).to_hex().as_str()
    );
    // The staged leftover of the killed upload goes with the next passes.
    wait_for(
        "the staged upload to be removed",
        Duration::from_secs(30),
        || staged(&store).is_empty().then_some(()),
    );
}
