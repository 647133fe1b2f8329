//! Artifacts on one node with the default folder: files pass through a
//! 1 → 20 → 1 graph, a rerun's downstreams see the new files, each record
//! names its artifacts by size and hash, the collector takes them with
//! their run's expiry (and spares content a live record still names), and
//! bad declarations are refused with their line.

mod artifacts_support;
mod graphs_support;

use std::time::Duration;

use artifacts_support::{fan_graph, folder_hashes, join_listing};
use graphs_support::{command_engine, from_toml, node_record, settled};
use weir::artifacts::{collect, ArtifactStore};
use weir::{Partition, RerunOutcome, RunState};

const WIDTH: usize = 20;
const BYTES: usize = 100_000;
/// Long enough for the reads between a settle and the next step under a
/// loaded machine (1 s expired runs under the test's feet), short enough
/// to wait for.
const RETENTION_S: u64 = 8;

fn record(engine: &weir::Engine, p: &Partition, node: &str) -> weir::DoneRecord {
    let run = engine.graph_run("fan", p).unwrap().unwrap();
    let n = run.nodes.iter().find(|n| n.node == node).unwrap();
    let id = weir::actors::scheduler::records::run_id("fan", p, node, n.rerun);
    engine
        .store()
        .get::<weir::DoneRecord>(&weir::actors::done::done_key(&id))
        .unwrap()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_pass_from_node_to_node_and_go_with_their_runs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let store_dir = data.join("artifacts");
    let engine = command_engine(&data, 8)
        .expiry_interval_ms(200)
        .open()
        .await
        .unwrap();
    let def = from_toml(
        dir.path(),
        &fan_graph(
            "fan",
            WIDTH,
            BYTES,
            &format!("retention = \"{RETENTION_S}s\""),
        ),
    );
    engine.adopt(def).await.unwrap();
    let p = "2026-11-01".parse::<Partition>().unwrap();
    engine.start_runs("fan", vec![p.clone()]).await.unwrap();
    assert_eq!(settled(&engine, "fan", &p).await, RunState::Complete);
    let (_, _, _, out) = node_record(&engine, "fan", &p, "join");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        join_listing(WIDTH, BYTES, "2026-11-01")
    );

    // make's record names its two artifacts (not the scratch file), each
    // by the size and hash of the object the store holds.
    let made = record(&engine, &p, "make");
    let names: Vec<&str> = made.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["data.bin", "logs/p.txt"]);
    for a in &made.artifacts {
        let bytes = std::fs::read(store_dir.join("artifacts/blake3").join(&a.hash)).unwrap();
        assert_eq!(bytes.len() as u64, a.bytes);
        assert_eq!(blake3::hash(&bytes).to_hex().to_string(), a.hash);
    }
    assert_eq!(made.artifacts[0].bytes, BYTES as u64);
    // Each middle node's part starts with make's file.
    let data_bin = std::fs::read(
        store_dir
            .join("artifacts/blake3")
            .join(&made.artifacts[0].hash),
    )
    .unwrap();
    let m7 = record(&engine, &p, "m7");
    let part = std::fs::read(
        store_dir
            .join("artifacts/blake3")
            .join(&m7.artifacts[0].hash),
    )
    .unwrap();
    assert!(part.starts_with(&data_bin));
    assert!(part.ends_with(b"2026-11-01\n7\n"));
    // 2 of make, 20 parts (each different), no half object.
    let first = folder_hashes(&store_dir);
    assert_eq!(first.len(), 2 + WIDTH, "{first:?}");

    // A rerun of make writes a new file; its downstreams see it.
    assert!(matches!(
        engine.rerun("fan", p.clone(), "make").await.unwrap(),
        RerunOutcome::Submitted(_)
    ));
    assert_eq!(settled(&engine, "fan", &p).await, RunState::Complete);
    let remade = record(&engine, &p, "make");
    assert_ne!(remade.artifacts[0].hash, made.artifacts[0].hash);
    // The small file's content did not change: one object stands for both.
    assert_eq!(remade.artifacts[1].hash, made.artifacts[1].hash);
    let new_bin = std::fs::read(
        store_dir
            .join("artifacts/blake3")
            .join(&remade.artifacts[0].hash),
    )
    .unwrap();
    let m7 = record(&engine, &p, "m7");
    let part = std::fs::read(
        store_dir
            .join("artifacts/blake3")
            .join(&m7.artifacts[0].hash),
    )
    .unwrap();
    assert!(part.starts_with(&new_bin) && !part.starts_with(&data_bin));

    // The collector keeps what live records name, here all of it: the
    // superseded records of the rerun stay until the run expires.
    let artifacts = ArtifactStore::in_folder(&store_dir).unwrap();
    let grace0 = std::sync::Arc::new(ArtifactStore::Store {
        objects: artifacts.store().unwrap(),
        grace_ms: 0,
    });
    let now = engine.now_ms() + 1;
    let pass = collect::pass(engine.store(), &grace0, now).await.unwrap();
    assert_eq!(pass.deleted, 0, "{pass:?}");

    // A second partition's run stays while the first expires: started half
    // a retention later, so that it outlives the first by that much (run at
    // once, it settled a fraction of a second after the first, and on a
    // loaded machine the wait below could see both expire).
    tokio::time::sleep(Duration::from_secs(RETENTION_S / 2)).await;
    let q = "2026-11-02".parse::<Partition>().unwrap();
    engine.start_runs("fan", vec![q.clone()]).await.unwrap();
    assert_eq!(settled(&engine, "fan", &q).await, RunState::Complete);
    let kept: std::collections::BTreeSet<String> = ["make", "m0", "m19"]
        .iter()
        .flat_map(|n| record(&engine, &q, n).artifacts.into_iter().map(|a| a.hash))
        .collect();
    // What q's records name, read now: q expires a run's length after p.
    let mut named = std::collections::BTreeSet::new();
    for n in std::iter::once("make".to_string()).chain((0..WIDTH).map(|i| format!("m{i}"))) {
        named.extend(
            record(&engine, &q, &n)
                .artifacts
                .into_iter()
                .map(|a| a.hash),
        );
    }
    // Expire the first run, then collect.
    let deadline = std::time::Instant::now() + Duration::from_secs(RETENTION_S + 60);
    while engine.graph_run("fan", &p).unwrap().is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run did not expire"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let now = engine.now_ms() + 1;
    let pass = collect::pass(engine.store(), &grace0, now).await.unwrap();
    assert!(pass.deleted > 0, "{pass:?}");
    assert!(
        engine.graph_run("fan", &q).unwrap().is_some(),
        "the second run expired before the pass: the wait took half a retention"
    );
    let left = folder_hashes(&store_dir);
    for h in &kept {
        assert!(
            left.contains(h),
            "a live record's artifact {h} was collected"
        );
    }
    // Everything left is named by q's records.
    assert_eq!(left, named);
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_limits_and_damaged_objects() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let store_dir = data.join("artifacts");
    let engine = command_engine(&data, 4).open().await.unwrap();
    let def = from_toml(
        dir.path(),
        r#"name = "mix"
partitioning = "daily"

[[nodes]]
name = "each"                   # a mapped node: every member has its own
items = ["a", "b", "c"]
command = ["sh", "-c", "echo {item} > \"$WEIR_ARTIFACTS_OUT/part.txt\""]
artifacts = ["part.txt"]

[[nodes]]
name = "gather"
upstreams = ["each"]
command = ["sh", "-c", "cat {upstream.each.artifact.2/part.txt} \"$WEIR_ARTIFACTS_IN\"/each/0/part.txt > \"$WEIR_OUTPUT\""]

[[nodes]]
name = "big"
command = ["sh", "-c", "head -c 2048 /dev/zero > \"$WEIR_ARTIFACTS_OUT/x.bin\""]
artifacts = ["x.bin"]
artifact_bytes_max = "1KiB"
retry = { attempts = 1 }

[[nodes]]
name = "missing"
command = ["true"]
artifacts = ["never.csv"]
retry = { attempts = 1 }
"#,
    );
    engine.adopt(def).await.unwrap();
    let p = "2026-11-01".parse::<Partition>().unwrap();
    engine.start_runs("mix", vec![p.clone()]).await.unwrap();
    assert_eq!(settled(&engine, "mix", &p).await, RunState::Failed);
    let (state, _, _, out) = node_record(&engine, "mix", &p, "gather");
    assert_eq!(state, "succeeded");
    assert_eq!(String::from_utf8(out).unwrap(), "c\na\n");
    let run = engine.graph_run("mix", &p).unwrap().unwrap();
    let each = run.nodes.iter().find(|n| n.node == "each").unwrap();
    let names: Vec<&str> = each.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["0/part.txt", "1/part.txt", "2/part.txt"]);
    // A file over its limit and a declared file never written fail the
    // node, naming the limit and the pattern.
    let (state, _, error, _) = node_record(&engine, "mix", &p, "big");
    assert_eq!(state, "failed");
    let error = error.unwrap_or_default();
    assert!(
        error.contains("artifact_bytes_max") && error.contains("1024"),
        "{error}"
    );
    let (_, _, error, _) = node_record(&engine, "mix", &p, "missing");
    assert!(error
        .unwrap_or_default()
        .contains("\"never.csv\" matched no file"));

    // An object damaged in the store is refused by the downstream that
    // fetches it, naming it; the run does not go on with wrong bytes.
    let hash = &each.artifacts[2].hash;
    std::fs::write(store_dir.join("artifacts/blake3").join(hash), b"tampered\n").unwrap();
    assert!(matches!(
        engine.rerun("mix", p.clone(), "gather").await.unwrap(),
        RerunOutcome::Submitted(_)
    ));
    assert_eq!(settled(&engine, "mix", &p).await, RunState::Failed);
    let (state, _, error, _) = node_record(&engine, "mix", &p, "gather");
    assert_eq!(state, "failed");
    let error = error.unwrap_or_default();
    assert!(
        error.contains("damaged or replaced") && error.contains(hash.as_str()),
        "{error}"
    );
    engine.shutdown(Duration::from_secs(10)).await.unwrap();
}
