//! The deployment files (Dockerfile, compose, Kubernetes, systemd) all run
//! `deploy/weir-member.sh`, configured by environment variables. No
//! container runtime here reaches an image registry, so this test runs
//! that script as the manifests do — three members named by host
//! (`localhost` standing in for `weir-0.weir`), their ids from a
//! StatefulSet pod's hostname, mutual TLS between them, and a worker —
//! and checks that every manifest sets only variables the script reads
//! and probes the routes a member serves: the files cannot drift from the
//! flags weir takes.

mod replica_support;
mod serve_support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use replica_support::{chain_defs, days, free_port, request};
use serde_json::json;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The `WEIR_*` variables the script reads.
fn script_vars() -> BTreeSet<String> {
    vars_in(&read("deploy/weir-member.sh"))
}

/// Every `WEIR_NAME` word in `text`.
fn vars_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("WEIR_") {
        let start = i + at;
        let mut end = start + 5;
        while end < bytes.len()
            && (bytes[end].is_ascii_uppercase()
                || bytes[end] == b'_'
                || bytes[end].is_ascii_digit())
        {
            end += 1;
        }
        let before = start.checked_sub(1).map(|b| bytes[b]);
        if before.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_')) && end > start + 5 {
            out.insert(text[start..end].to_string());
        }
        i = end;
    }
    out
}

/// The script, run as a container's entrypoint would: `weir` on PATH,
/// only the environment given.
fn member_script(env: &[(&str, String)], log: &Path) -> Child {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_weir"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("sh");
    cmd.arg(root().join("deploy/weir-member.sh"))
        .env_clear()
        .env("PATH", path)
        .env("RUST_LOG", "info,openraft=warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn the_member_script_runs_a_group_as_the_manifests_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let defs = chain_defs(dir, "0");
    std::fs::write(dir.join("cookie"), "the-members-cookie-0123456789\n").unwrap();
    let token = "the-shared-admin-token-0123456789abcdef";
    std::fs::write(dir.join("token"), format!("{token}\n")).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in ["cookie", "token"] {
            std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    // The members are named `localhost`: their certificate says so.
    let peer_tls = dir.join("peer-tls");
    std::fs::create_dir_all(&peer_tls).unwrap();
    let (ca, cert, key) = serve_support::tls_files_for(&peer_tls, &["localhost", "127.0.0.1"]);
    let raft: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let api: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let cluster: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    // As the StatefulSet's: 1=weir-0.weir:7501,… with `localhost`.
    let peers = (0..3)
        .map(|i| format!("{}=localhost:{}", i + 1, raft[i]))
        .collect::<Vec<_>>()
        .join(",");
    let path = |p: &Path| p.display().to_string();
    let mut children = Killed(Vec::new());
    for i in 0..3 {
        children.0.push(member_script(
            &[
                // No WEIR_RAFT_ID: the pod's ordinal says it.
                ("HOSTNAME", format!("weir-{i}")),
                ("WEIR_RAFT_PEERS", peers.clone()),
                ("WEIR_DEFS", path(&defs)),
                ("WEIR_DATA", path(&dir.join(format!("weir-{i}")))),
                ("WEIR_LISTEN", api[i].clone()),
                ("WEIR_CLUSTER", cluster[i].clone()),
                ("WEIR_TOKEN_FILE", path(&dir.join("token"))),
                ("WEIR_COOKIE_FILE", path(&dir.join("cookie"))),
                ("WEIR_PEER_CA", path(&ca)),
                ("WEIR_PEER_CERT", path(&cert)),
                ("WEIR_PEER_KEY", path(&key)),
                ("WEIR_ELECTION_TIMEOUT_MS", "600".into()),
            ],
            &dir.join(format!("weir-{i}.log")),
        ));
    }
    children.0.push(member_script(
        &[
            ("WEIR_ROLE", "worker".into()),
            ("HOSTNAME", "weir-worker-abc12".into()),
            ("WEIR_JOIN", cluster.join(",")),
            ("WEIR_COOKIE_FILE", path(&dir.join("cookie"))),
            ("WEIR_POOLS", "default=4".into()),
        ],
        &dir.join("worker.log"),
    ));
    let logs = || {
        ["weir-0", "weir-1", "weir-2", "worker"]
            .iter()
            .map(|n| {
                format!(
                    "--- {n}\n{}",
                    std::fs::read_to_string(dir.join(format!("{n}.log"))).unwrap_or_default()
                )
            })
            .collect::<String>()
    };
    // The readiness probe of a member: the leader, or a follower that
    // hears it; the API Service sends to those.
    let t0 = Instant::now();
    let ready = loop {
        let ready: Vec<usize> = (0..3)
            .filter(|i| {
                request(&api[*i], "", "GET", "/readyz", None, Duration::from_secs(2))
                    .is_ok_and(|r| r.status == 200)
            })
            .collect();
        if ready.len() == 3 {
            break ready;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "members not ready: {ready:?}\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // Ids from the ordinals: weir-0 is member 1.
    for i in ready {
        let r = request(&api[i], "", "GET", "/healthz", None, Duration::from_secs(2)).unwrap();
        assert_eq!(r.json()["member"], json!(i + 1), "{}", r.body);
    }
    let parts = days(3);
    // As a client does: 503 while the leader opens its engine.
    let t0 = Instant::now();
    let r = loop {
        let r = request(
            &api[0],
            token,
            "POST",
            "/api/v1/graphs/chain/backfills",
            Some(&json!({"from": parts[0], "to": parts[2]})),
            Duration::from_secs(10),
        )
        .unwrap();
        if r.status != 503 || t0.elapsed() > Duration::from_secs(20) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(r.status, 202, "{}", r.body);
    let t0 = Instant::now();
    loop {
        let r = request(
            &api[1],
            token,
            "GET",
            "/api/v1/runs?graph=chain",
            None,
            Duration::from_secs(5),
        )
        .unwrap();
        let complete = r.json()["runs"].as_array().map_or(0, |runs| {
            runs.iter().filter(|x| x["state"] == "complete").count()
        });
        if complete == parts.len() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}\n{}",
            r.body,
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The worker joins the group through the script.
    let t0 = Instant::now();
    loop {
        let r = request(
            &api[2],
            token,
            "GET",
            "/api/v1/workers",
            None,
            Duration::from_secs(5),
        )
        .unwrap();
        if r.body.contains("weir-worker-abc12") {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{}\n{}",
            r.body,
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn every_manifest_runs_the_script_with_variables_it_reads() {
    let known = script_vars();
    for must in [
        "WEIR_RAFT_PEERS",
        "WEIR_RAFT_ID",
        "WEIR_PEER_CA",
        "WEIR_JOIN",
        "WEIR_ROLE",
        "WEIR_TOKEN_FILE",
    ] {
        assert!(known.contains(must), "the script reads {must}: {known:?}");
    }
    for file in [
        "Dockerfile",
        "deploy/k8s/weir.yaml",
        "deploy/compose/compose.yaml",
        "deploy/systemd/weir.service",
        "deploy/systemd/weir.env",
    ] {
        let text = read(file);
        let unknown: Vec<String> = vars_in(&text).difference(&known).cloned().collect();
        assert!(
            unknown.is_empty(),
            "{file} sets variables the script does not read: {unknown:?}"
        );
    }
    // Each runs the script: the image's entrypoint, the unit's ExecStart.
    assert!(read("Dockerfile").contains("COPY deploy/weir-member.sh /usr/local/bin/weir-member"));
    assert!(read("Dockerfile").contains(r#"ENTRYPOINT ["tini", "--", "weir-member"]"#));
    assert!(read("deploy/systemd/weir.service").contains("ExecStart=/usr/local/bin/weir-member"));
    let k8s = read("deploy/k8s/weir.yaml");
    assert!(
        !k8s.contains("command:") && !k8s.contains("args:"),
        "the pods run the image's entrypoint"
    );
    // The probes ask routes a member serves.
    for route in ["/healthz", "/readyz"] {
        assert!(
            k8s.contains(&format!("path: {route}")),
            "k8s probes {route}"
        );
        assert!(
            weir::serve::routes_served().contains(&("get", route)),
            "{route} is served"
        );
    }
    // The peers list names the StatefulSet's pods through its headless
    // Service, ids from the ordinals, as the script derives them.
    assert!(k8s.contains("replicas: 3") && k8s.contains("serviceName: weir"));
    assert!(k8s.contains(r#"value: "1=weir-0.weir:7501,2=weir-1.weir:7501,3=weir-2.weir:7501""#));
    assert!(k8s.contains(r#"value: "weir-0.weir:7451,weir-1.weir:7451,weir-2.weir:7451""#));
    assert!(k8s.contains("publishNotReadyAddresses: true"));
    assert!(k8s.contains("kind: PodDisruptionBudget") && k8s.contains("maxUnavailable: 1"));
    // Every --raft-peers value in the files parses as weir parses it.
    for file in [
        "deploy/k8s/weir.yaml",
        "deploy/compose/compose.yaml",
        "deploy/systemd/weir.env",
    ] {
        let text = read(file);
        for line in text.lines().filter(|l| l.contains("WEIR_RAFT_PEERS")) {
            let after = &line[line.find("WEIR_RAFT_PEERS").unwrap()..];
            let from = after.find("1=").unwrap_or_else(|| panic!("{file}: {line}"));
            let peers: String = after[from..]
                .chars()
                .take_while(|c| !matches!(c, '"' | '}' | ' '))
                .collect();
            assert!(
                weir::replica::ReplicaSettings::parse_peers(&peers).is_ok_and(|p| p.len() == 3),
                "{file}: {peers:?}"
            );
        }
    }
    // The script is POSIX sh, as the image's /bin/sh is dash.
    let o = Command::new("sh")
        .args(["-n"])
        .arg(root().join("deploy/weir-member.sh"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
