//! Artifacts across machines: three members and two workers on a real
//! S3-compatible server (s3s-fs on 127.0.0.1). Every node runs on a
//! worker, each with a scratch folder of its own, so a file reaches its
//! downstream only through the store. The leader is killed (-9)
//! mid-backfill: every run completes, each downstream received (and hash
//! checked) its upstreams' files, and the members refuse to start with a
//! store they cannot reach.

mod artifacts_support;
mod replica_support;
mod s3_support;
mod serve_support;

use std::time::{Duration, Instant};

use artifacts_support::{fan_graph, join_listing};
use replica_support::{days, Group};
use s3_support::S3Server;

const WIDTH: usize = 3;
const BYTES: usize = 300_000;

#[test]
fn the_leader_killed_mid_backfill_loses_no_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let s3 = S3Server::start(&dir.join("s3"));
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    // Runs expire a while after they settle: their artifacts then go.
    // Long enough that the first runs are still there when the last one
    // completes on a loaded machine (at 25 s, a failover that took a
    // minute of elections under load let every run expire first).
    std::fs::write(
        defs.join("fan.toml"),
        fan_graph("fan", WIDTH, BYTES, "retention = \"60s\""),
    )
    .unwrap();
    let url = s3.url("weir");
    let env: Vec<(String, String)> = s3.env();
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut g = Group::start_with(
        dir,
        &defs,
        3,
        &[
            "--no-local-workers",
            "--artifacts",
            &url,
            "--artifacts-grace",
            "1s",
        ],
        &env_refs,
    );
    let mut workers = Vec::new();
    for name in ["w1", "w2"] {
        let scratch = dir.join(format!("worker-{name}"));
        workers.push(g.worker_with(
            name,
            4,
            &[
                "--artifacts".into(),
                url.clone(),
                "--data".into(),
                scratch.display().to_string(),
            ],
            &env,
        ));
    }
    let parts = days(30);
    g.backfill("fan", &parts);
    let done_at_kill = g.wait("a tenth of the runs", Duration::from_secs(90), || {
        let done = g
            .runs_of("fan")
            .values()
            .filter(|s| *s == "complete")
            .count();
        (done >= 3).then_some(done)
    });
    assert!(
        done_at_kill < parts.len() / 2,
        "the kill came late: {done_at_kill} complete"
    );
    let old = g.leader().expect("a leader");
    g.kill(old);
    let new = g.wait_leader(Duration::from_secs(10));
    assert_ne!(new, old);
    g.spawn(old);
    let runs = g.wait_complete_of("fan", &parts, Duration::from_secs(180));
    assert_eq!(runs.len(), parts.len(), "{runs:?}");
    let mut named = std::collections::BTreeSet::new();
    for p in &parts {
        // join lists what it received: every part, whole.
        let r = g.api(
            "GET",
            &format!("/api/v1/graphs/fan/runs/{p}/nodes/join"),
            None,
            Duration::from_secs(20),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        let v = r.json();
        assert_eq!(
            v["output_text"].as_str().unwrap_or_default(),
            join_listing(WIDTH, BYTES, p),
            "{p}: {v}"
        );
        let run = g.api(
            "GET",
            &format!("/api/v1/graphs/fan/runs/{p}"),
            None,
            Duration::from_secs(20),
        );
        for n in run.json()["nodes"].as_array().unwrap() {
            // Every node ran on a worker.
            assert_ne!(n["worker"], "local", "{p}: {n}");
            for a in n["artifacts"].as_array().cloned().unwrap_or_default() {
                named.insert(a["hash"].as_str().unwrap().to_string());
            }
        }
    }
    // make (2 files) and each middle node (1) recorded their artifacts,
    // and the store holds every one of them.
    assert!(named.len() >= parts.len() * (1 + WIDTH), "{}", named.len());
    let stored: std::collections::BTreeSet<String> = s3
        .objects("weir/artifacts/blake3")
        .into_iter()
        .map(|k| k.rsplit('/').next().unwrap().to_string())
        .collect();
    let missing: Vec<&String> = named.difference(&stored).collect();
    assert!(missing.is_empty(), "recorded but not stored: {missing:?}");
    // Once every run expired, the leader's collector leaves nothing behind:
    // no artifact orphaned by the failover or by a re-run attempt.
    g.wait(
        "the runs to expire and their artifacts to go",
        Duration::from_secs(180),
        || (g.runs_of("fan").is_empty() && s3.objects("weir/artifacts").is_empty()).then_some(()),
    );
    for mut w in workers {
        let _ = w.kill();
        let _ = w.wait();
    }
}

#[test]
fn a_member_refuses_to_start_without_its_store() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut s3 = S3Server::start(&dir.join("s3"));
    let url = s3.url("weir");
    let env = s3.env();
    s3.stop();
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    std::fs::write(defs.join("fan.toml"), fan_graph("fan", 1, 10, "")).unwrap();
    let started = Instant::now();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(dir.join("m1"))
        .args(["--listen", "127.0.0.1:0", "--artifacts", &url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("s3://weir-test/weir") && err.contains("probe"),
        "{err}"
    );
    assert!(!err.contains(s3_support::SECRET_KEY), "{err}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // Wrong credentials: refused as well, without the secret shown.
    s3.resume();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("AWS_SECRET_ACCESS_KEY", "a-wrong-secret-value")
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(dir.join("m2"))
        .args(["--listen", "127.0.0.1:0", "--artifacts", &url])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("s3://weir-test/weir"), "{err}");
    assert!(!err.contains("a-wrong-secret-value"), "{err}");
    // A URL that is not one: exit 2, naming the flag.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(dir.join("m3"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--artifacts",
            "ftp://user:pw@host/x",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--artifacts") && !err.contains("pw@"), "{err}");
}
