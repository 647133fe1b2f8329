//! Backups of a running engine and restores (DESIGN §7b): `weir backup`
//! under load holds every run acknowledged before it and none started
//! after; a cut, damaged or interrupted backup is refused whole; a
//! restored directory runs as a single engine and as a new group's first
//! member; a member of a group that lost its majority starts a new group.

mod replica_support;
mod s3_support;
mod serve_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use serve_support::{weir, write_def};

/// A daily graph of two quick nodes.
fn defs(dir: &Path) -> std::path::PathBuf {
    let defs = dir.join("defs");
    write_def(
        &defs,
        "pair",
        r#"name = "pair"
partitioning = "daily"
max_active_runs = 4
[pools]
default = 4
[[nodes]]
name = "a"
command = ["true"]
[[nodes]]
name = "b"
upstreams = ["a"]
command = ["true"]
"#,
    );
    defs
}

/// Runs of `pair` in a data directory with no engine: partition → state.
fn runs_in_store(data: &Path) -> BTreeMap<String, String> {
    let o = weir()
        .args([
            "runs", "--graph", "pair", "--limit", "1000", "--json", "--data",
        ])
        .arg(data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
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

/// The partitions of `pair`'s complete runs, as the running engine says.
fn complete(served: &serve_support::Served) -> Vec<String> {
    let v = served.json(&[
        "runs", "--graph", "pair", "--state", "complete", "--limit", "1000",
    ]);
    v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["partition"].as_str().unwrap().to_string())
        .collect()
}

fn restore(file: &Path, data: &Path) -> std::process::Output {
    weir()
        .arg("restore")
        .arg(file)
        .arg("--data")
        .arg(data)
        .output()
        .unwrap()
}

#[test]
fn a_backup_under_load_restores_every_run_acknowledged_before_it_and_none_after() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = defs(tmp.path());
    let data = tmp.path().join("data");
    let served = serve_support::start(&["serve"], &defs, &data);
    // Load: a backfill of a year of days, running while the backup is taken.
    served.ok(&["backfill", "pair", "2020-01-01..2020-12-31"]);
    serve_support::wait_for("some runs complete", Duration::from_secs(60), || {
        (complete(&served).len() >= 20).then_some(())
    });
    let acknowledged = complete(&served);
    let file = tmp.path().join("pair.wbk");
    let said = served.ok(&["backup", file.to_str().unwrap()]);
    assert!(said.contains("backup written to"), "{said}");
    assert!(file.exists() && !tmp.path().join("pair.wbk.partial").exists());
    // Started after the backup returned: must not be in it.
    served.ok(&["start", "pair", "2031-05-01"]);
    served.wait_run("pair", "2031-05-01", "complete");
    // A backup never overwrites a file.
    let again = served.cli(&["backup", file.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));

    let restored = tmp.path().join("restored");
    let o = restore(&file, &restored);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let runs = runs_in_store(&restored);
    for p in &acknowledged {
        assert_eq!(
            runs.get(p).map(String::as_str),
            Some("complete"),
            "{p} was complete before the backup"
        );
    }
    assert!(
        !runs.contains_key("2031-05-01"),
        "a run started after the backup"
    );
    // The restored directory is an engine's: it finishes the backfill.
    drop(served);
    let o = weir()
        .arg("run")
        .arg(&defs)
        .arg("--data")
        .arg(&restored)
        .args(["--backfill", "2020-01-01..2020-12-31", "--until-idle"])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let runs = runs_in_store(&restored);
    assert_eq!(runs.len(), 366, "every day of 2020");
    assert!(runs.values().all(|s| s == "complete"), "{runs:?}");
    // Restoring into a directory that holds anything is refused.
    let o = restore(&file, &restored);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not empty"));
}

#[test]
fn a_cut_damaged_or_interrupted_backup_is_refused_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = defs(tmp.path());
    let data = tmp.path().join("data");
    let served = serve_support::start(&["serve"], &defs, &data);
    served.ok(&["backfill", "pair", "2021-01-01..2021-03-31"]);
    serve_support::wait_for("the backfill", Duration::from_secs(60), || {
        (complete(&served).len() == 90).then_some(())
    });
    let file = tmp.path().join("b.wbk");
    served.ok(&["backup", file.to_str().unwrap()]);
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() > 10_000, "{} bytes", bytes.len());

    // Cut anywhere: refused, nothing made.
    for cut in [0, 7, 8, 100, bytes.len() / 2, bytes.len() - 1] {
        let f = tmp.path().join(format!("cut-{cut}.wbk"));
        std::fs::write(&f, &bytes[..cut]).unwrap();
        let target = tmp.path().join(format!("r-cut-{cut}"));
        let o = restore(&f, &target);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "cut at {cut}: {err}");
        assert!(
            err.contains("incomplete") || err.contains("not a weir backup"),
            "cut at {cut}: {err}"
        );
        assert!(!target.exists(), "cut at {cut}: nothing is made");
    }
    // A flipped byte anywhere: refused, the offset named, nothing made.
    // Where it lands decides which check sees it first: the checksum, a
    // frame's decoding, a length that runs past its frame, a tree or frame
    // kind that does not exist, the trailer's counts (CI once flipped a
    // tree byte, which a test of the middle byte alone did not expect).
    for i in 1..8 {
        let at = bytes.len() * i / 8;
        let mut flipped = bytes.clone();
        flipped[at] ^= 0x40;
        let f = tmp.path().join(format!("flipped-{i}.wbk"));
        std::fs::write(&f, &flipped).unwrap();
        let target = tmp.path().join(format!("r-flipped-{i}"));
        let o = restore(&f, &target);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "flip at {at}: {err}");
        assert!(err.contains("(at byte "), "flip at {at}: {err}");
        assert!(!target.exists(), "flip at {at}: nothing is made");
    }
    // The trailer's own bytes (its checksum) are checked too.
    let mut flipped = bytes.clone();
    let last = bytes.len() - 2;
    flipped[last] ^= 0x01;
    let f = tmp.path().join("flipped-trailer.wbk");
    std::fs::write(&f, &flipped).unwrap();
    let target = tmp.path().join("r-flipped-trailer");
    let o = restore(&f, &target);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("checksum mismatch") || err.contains("does not decode"),
        "{err}"
    );
    assert!(!target.exists());
    // No leftovers of the refused restores beside the targets.
    let left: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("restoring"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // kill -9 of `weir backup` mid-download: no file by the backup's name,
    // and what it left is refused.
    let slow = tmp.path().join("slow.wbk");
    let mut child = weir()
        .arg("backup")
        .arg(&slow)
        .args(["--max-kib-per-s", "8"])
        .arg("--data")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let partial = tmp.path().join("slow.wbk.partial");
    serve_support::wait_for("the download to start", Duration::from_secs(20), || {
        std::fs::metadata(&partial)
            .ok()
            .filter(|m| m.len() > 0)
            .map(|_| ())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!slow.exists(), "an interrupted backup has no backup's name");
    let o = restore(&partial, &tmp.path().join("r-partial"));
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("incomplete"));
    // The engine's writers did not wait for the slow download: work goes
    // on meanwhile.
    let t0 = Instant::now();
    served.ok(&["start", "pair", "2031-06-01"]);
    served.wait_run("pair", "2031-06-01", "complete");
    assert!(t0.elapsed() < Duration::from_secs(20));
}

#[test]
fn scheduled_backups_rotate_and_a_member_backup_starts_a_new_group() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = replica_support::chain_defs(dir, "0");
    let backups = dir.join("backups");
    let backups_arg = backups.display().to_string();
    let mut g = replica_support::Group::start(
        &dir.join("g"),
        &defs,
        3,
        &[
            "--backup-dir",
            &backups_arg,
            "--backup-every",
            "1s",
            "--backup-keep",
            "1h",
        ],
    );
    let leader = g.wait_leader(Duration::from_secs(30));
    let parts = replica_support::days(6);
    g.backfill_chain(&parts);
    g.wait_complete(&parts, Duration::from_secs(60));
    // Every member writes its own backups into the folder (the test gives
    // them one): complete files only, each restorable.
    serve_support::wait_for("scheduled backups", Duration::from_secs(20), || {
        let n = std::fs::read_dir(&backups)
            .ok()?
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".wbk"))
            })
            .count();
        (n >= 3).then_some(())
    });
    // A follower's backup through the CLI: its own store.
    let follower = *g.members.keys().find(|id| **id != leader).unwrap();
    let file = dir.join("member.wbk");
    let o = g.cli(follower, &["backup", file.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let restored = dir.join("new-1");
    let o = restore(&file, &restored);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    // The whole group is lost but member `follower`'s disk: it forgets
    // the group and leads a new one of itself.
    for id in g.running() {
        g.kill(id);
    }
    let survivor = g.members[&follower].data.clone();
    let refused = weir()
        .args(["members", "force-new-group", "--data"])
        .arg(&survivor)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "needs --yes");
    let o = weir()
        .args(["members", "force-new-group", "--yes", "--data"])
        .arg(&survivor)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for (name, data) in [("survivor", survivor), ("restored", restored)] {
        let api = format!("127.0.0.1:{}", serve_support::free_port());
        let raft = format!("127.0.0.1:{}", serve_support::free_port());
        let log = std::fs::File::create(dir.join(format!("{name}.log"))).unwrap();
        let mut child = weir()
            .arg("serve")
            .arg(&defs)
            .arg("--data")
            .arg(&data)
            .args(["--listen", &api, "--raft-id", "1"])
            .args(["--raft-peers", &format!("1={raft}")])
            .arg("--cookie-file")
            .arg(&g.cookie)
            .arg("--token-file")
            .arg(&g.token_file)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let runs = serve_support::wait_for(
            &format!("the {name} member to lead and serve its runs"),
            Duration::from_secs(30),
            || {
                let r = replica_support::request(
                    &api,
                    &g.token,
                    "GET",
                    "/api/v1/runs?graph=chain&limit=1000",
                    None,
                    Duration::from_secs(2),
                )
                .ok()?;
                (r.status == 200).then(|| r.json())
            },
        );
        let complete: Vec<&str> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["state"] == "complete")
            .map(|r| r["partition"].as_str().unwrap())
            .collect();
        assert_eq!(complete.len(), parts.len(), "{name}: {runs}");
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test]
fn backups_go_to_and_come_from_an_object_store() {
    let tmp = tempfile::tempdir().unwrap();
    let s3 = s3_support::S3Server::start(&tmp.path().join("s3"));
    let defs = defs(tmp.path());
    let data = tmp.path().join("data");
    let served = serve_support::start_env(
        &[
            "serve",
            "--backup-dir",
            &s3.url("scheduled"),
            "--backup-every",
            "1s",
            "--backup-keep",
            "1s",
        ],
        &defs,
        &data,
        "127.0.0.1:0",
        &[s3.env(), vec![("RUST_LOG".into(), "info".into())]].concat(),
    );
    served.ok(&["start", "pair", "2031-05-01"]);
    served.wait_run("pair", "2031-05-01", "complete");
    // On demand, into an object: checked, uploaded, never overwritten.
    let url = format!("{}/one.wbk", s3.url("manual"));
    let cli = |args: &[&str]| {
        weir()
            .args(args)
            .arg("--data")
            .arg(&data)
            .envs(s3.env())
            .output()
            .unwrap()
    };
    let o = cli(&["backup", &url]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(s3.objects("manual"), ["manual/one.wbk"]);
    let o = cli(&["backup", &url]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists"));
    // Restored from the object, it holds the run.
    let restored = tmp.path().join("restored");
    let o = weir()
        .args(["restore", &url, "--data"])
        .arg(&restored)
        .envs(s3.env())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        runs_in_store(&restored)
            .get("2031-05-01")
            .map(String::as_str),
        Some("complete")
    );
    // Scheduled backups arrive every second and the old ones go: a few
    // at most are ever kept, each whole.
    serve_support::wait_for("three scheduled backups", Duration::from_secs(60), || {
        let n = std::fs::read_to_string(&served.stderr)
            .unwrap_or_default()
            .matches("scheduled backup uploaded")
            .count();
        (n >= 3).then_some(())
    });
    let kept = s3.objects("scheduled");
    assert!(
        !kept.is_empty() && kept.len() <= 3,
        "scheduled backups kept: {kept:?}"
    );
    for k in &kept {
        let bytes = std::fs::read(s3.root.join(s3_support::BUCKET).join(k)).unwrap();
        weir_actors::store::backup::verify(&bytes[..], k).unwrap();
    }
    assert!(!data.join("backup-spool").read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .ends_with(".wbk")));
}
