//! A run's artifacts seen and fetched through a real `weir serve`: the
//! CLI lists them and fetches one (bytes and blake3 hash equal to the
//! stored object's), the API streams it with its size, file name and
//! hash, a viewer's token reads both routes, unknown names answer 404
//! (exit 2), a damaged or missing object fails the fetch (exit 3, no file
//! left), with the engine stopped the CLI reads the store and the default
//! artifact folder, and a replicated member's front passes a download on
//! whole.

mod artifacts_support;
mod replica_support;
mod serve_support;

use std::path::Path;
use std::time::Duration;

use artifacts_support::fan_graph;
use replica_support::Group;
use serde_json::{json, Value};
use serve_support::{start, wait_for, write_def, Served};

/// Bytes `make` writes into `data.bin`.
const BYTES: usize = 100_000;
/// Past `WHOLE_CHECK_BYTES_MAX`: streamed.
const BIG_BYTES: usize = 3 << 20;
const P: &str = "2026-11-01";

/// A raw answer: status, header block (lower case), body bytes as they
/// came (a cut body is short).
struct Raw {
    status: u16,
    headers: String,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "not JSON ({e}): {} {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

/// GET `path` with `token`, the body kept as bytes (the shared client
/// reads text).
fn get_raw(addr: &str, token: &str, path: &str) -> Raw {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    // A connection the server cuts mid-body ends the read with what came.
    let _ = s.read_to_end(&mut raw);
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer to {path}: {raw:?}"));
    let headers = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    Raw {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

fn addr(s: &Served) -> String {
    s.url.trim_start_matches("http://").to_string()
}

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The object a hash names in the engine's default folder store.
fn object(data: &Path, hash: &str) -> std::path::PathBuf {
    data.join("artifacts/artifacts/blake3").join(hash)
}

fn code(o: &std::process::Output) -> Option<i32> {
    o.status.code()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The fan graph (make → m0, m1 → join) served, its run complete.
fn served_fan(dir: &Path) -> Served {
    let defs = dir.join("defs");
    write_def(&defs, "fan", &fan_graph("fan", 2, BYTES, ""));
    let s = start(&["serve"], &defs, &dir.join("data"));
    s.ok(&["start", "fan", P]);
    s.wait_run("fan", P, "complete");
    s
}

#[test]
fn the_cli_and_the_api_list_and_fetch_a_runs_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let s = served_fan(dir.path());

    // The list: make's two, each middle node's part; join has none.
    let listed = s.json(&["artifacts", "fan", P]);
    assert_eq!(listed["graph"], "fan");
    assert_eq!(listed["partition"], P);
    let rows: Vec<(String, u64, String, u64)> = listed["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["node"].as_str().unwrap().to_string(),
                a["rerun"].as_u64().unwrap(),
                a["name"].as_str().unwrap().to_string(),
                a["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    // data.bin, then p.txt, then the node's index and a newline.
    let part = (BYTES + P.len() + 1 + 2) as u64;
    assert_eq!(
        rows,
        [
            ("make".into(), 0, "data.bin".into(), BYTES as u64),
            ("make".into(), 0, "logs/p.txt".into(), (P.len() + 1) as u64),
            ("m0".into(), 0, "part.bin".into(), part),
            ("m1".into(), 0, "part.bin".into(), part),
        ]
    );
    // Each hash is the stored object's.
    for a in listed["artifacts"].as_array().unwrap() {
        let hash = a["hash"].as_str().unwrap();
        let bytes = std::fs::read(object(&s.data, hash)).unwrap();
        assert_eq!(blake3_hex(&bytes), hash, "{a}");
    }
    let data_hash = listed["artifacts"][0]["hash"].as_str().unwrap().to_string();
    let data_bin = std::fs::read(object(&s.data, &data_hash)).unwrap();

    // One node's; the table.
    let made = s.json(&["artifacts", "fan", P, "make"]);
    assert_eq!(made["artifacts"].as_array().unwrap().len(), 2, "{made}");
    let table = s.ok(&["artifacts", "fan", P]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 5, "{table}");
    assert!(
        lines[0].trim_start().starts_with("NODE") && lines[0].contains("HASH"),
        "{table}"
    );
    assert!(
        lines[1].contains("make")
            && lines[1].contains("data.bin")
            && lines[1].contains("97.7 KiB")
            && lines[1].contains(&data_hash),
        "{table}"
    );
    assert_eq!(
        s.ok(&["artifacts", "fan", P, "join"]).trim(),
        "node join of run fan 2026-11-01 has no artifacts"
    );

    // The CLI fetches into a file (its name on stdout) and to stdout.
    let out = dir.path().join("got/data.bin");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let said = s.ok(&[
        "artifacts",
        "get",
        "fan",
        P,
        "make",
        "data.bin",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(said.trim(), out.to_str().unwrap());
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), BYTES);
    assert_eq!(got, data_bin);
    assert_eq!(blake3_hex(&got), data_hash);
    assert_eq!(
        s.ok(&["artifacts", "get", "fan", P, "make", "logs/p.txt"]),
        format!("{P}\n")
    );
    // Nothing but the file is left beside it.
    let beside: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(beside, ["data.bin"]);

    // The API streams it: size, type, file name, hash.
    let a = get_raw(
        &addr(&s),
        &s.token,
        &format!("/api/v1/graphs/fan/runs/{P}/nodes/make/artifacts/data.bin"),
    );
    assert_eq!(a.status, 200, "{}", a.headers);
    assert_eq!(a.header("content-length"), Some(BYTES.to_string()));
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("application/octet-stream")
    );
    assert!(
        a.header("content-disposition")
            .is_some_and(|d| d.starts_with("attachment; filename=\"data.bin\"")),
        "{}",
        a.headers
    );
    assert_eq!(a.header("x-weir-blake3"), Some(data_hash.clone()));
    assert_eq!(a.header("etag"), Some(format!("\"{data_hash}\"")));
    assert_eq!(a.body, data_bin);
    // A name with a folder: as path segments, or one escaped segment.
    for path in ["logs/p.txt", "logs%2Fp.txt"] {
        let a = get_raw(
            &addr(&s),
            &s.token,
            &format!("/api/v1/graphs/fan/runs/{P}/nodes/make/artifacts/{path}"),
        );
        assert_eq!(a.status, 200, "{path}: {}", a.headers);
        assert_eq!(a.body, format!("{P}\n").as_bytes(), "{path}");
        assert!(
            a.header("content-disposition")
                .is_some_and(|d| d.contains("filename=\"logs_p.txt\"")),
            "{}",
            a.headers
        );
    }

    // A viewer reads both routes.
    let viewer = s.token("reader", "viewer", None);
    let l = get_raw(
        &addr(&s),
        &viewer,
        &format!("/api/v1/graphs/fan/runs/{P}/artifacts?node=m1"),
    );
    assert_eq!(l.status, 200);
    assert_eq!(l.json()["artifacts"][0]["name"], "part.bin");
    let m1_hash = l.json()["artifacts"][0]["hash"]
        .as_str()
        .unwrap()
        .to_string();
    let d = get_raw(
        &addr(&s),
        &viewer,
        &format!("/api/v1/graphs/fan/runs/{P}/nodes/m1/artifacts/part.bin"),
    );
    assert_eq!(d.status, 200);
    assert_eq!(blake3_hex(&d.body), m1_hash);
    assert!(d.body.starts_with(&data_bin) && d.body.ends_with(b"2026-11-01\n1\n"));
    // A bad token reads neither.
    assert_eq!(
        get_raw(
            &addr(&s),
            "nope",
            &format!("/api/v1/graphs/fan/runs/{P}/nodes/m1/artifacts/part.bin")
        )
        .status,
        401
    );
}

#[test]
fn unknown_names_are_404_and_a_damaged_object_fails_the_fetch() {
    let dir = tempfile::tempdir().unwrap();
    // Beside the fan, a graph whose file is past the size a download
    // checks whole before it answers: its check ends the stream.
    let defs = dir.path().join("defs");
    write_def(&defs, "big", &fan_graph("big", 1, BIG_BYTES, ""));
    let s = served_fan(dir.path());
    s.ok(&["start", "big", P]);
    s.wait_run("big", P, "complete");
    let listed = s.json(&["artifacts", "fan", P]);
    let hash_of = |node: &str| {
        listed["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["node"] == node)
            .unwrap()["hash"]
            .as_str()
            .unwrap()
            .to_string()
    };

    // 404s name what is missing; the CLI exits 2 and writes no file.
    for (path, says) in [
        (
            format!("/api/v1/graphs/fan/runs/{P}/nodes/make/artifacts/nosuch.bin"),
            "has no artifact \"nosuch.bin\": it has data.bin, logs/p.txt",
        ),
        (
            format!("/api/v1/graphs/fan/runs/{P}/nodes/join/artifacts/part.bin"),
            "names none",
        ),
        (
            format!("/api/v1/graphs/fan/runs/{P}/nodes/nosuch/artifacts/a"),
            "graph \"fan\" has no node \"nosuch\"",
        ),
        (
            "/api/v1/graphs/fan/runs/2026-11-02/nodes/make/artifacts/data.bin".into(),
            "graph \"fan\" has no run for partition 2026-11-02",
        ),
        (
            format!("/api/v1/graphs/nosuch/runs/{P}/artifacts"),
            "graph \"nosuch\" has no run",
        ),
        (
            format!("/api/v1/graphs/fan/runs/{P}/artifacts?node=nosuch"),
            "graph \"fan\" has no node \"nosuch\"",
        ),
    ] {
        let a = get_raw(&addr(&s), &s.token, &path);
        assert_eq!(
            a.status,
            404,
            "{path}: {}",
            String::from_utf8_lossy(&a.body)
        );
        let m = a.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(m.contains(says), "{path}: {m}");
    }
    let out = dir.path().join("out.bin");
    let o_out = ["-o", out.to_str().unwrap()];
    for args in [
        [
            &["artifacts", "get", "fan", P, "make", "nosuch.bin"][..],
            &o_out,
        ]
        .concat(),
        [
            &["artifacts", "get", "fan", P, "nosuch", "data.bin"][..],
            &o_out,
        ]
        .concat(),
        vec!["artifacts", "nosuch", P],
        vec!["artifacts", "fan", P, "nosuch"],
    ] {
        let o = s.cli(&args);
        assert_eq!(code(&o), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!out.exists(), "{args:?}");
    }

    // m1's object damaged (same size): the fetch fails, exit 3, no file;
    // the API says so (checked whole before the answer).
    let m1 = object(&s.data, &hash_of("m1"));
    let mut bytes = std::fs::read(&m1).unwrap();
    bytes[10] ^= 0xff;
    std::fs::write(&m1, &bytes).unwrap();
    let o = s.cli(&[
        "artifacts",
        "get",
        "fan",
        P,
        "m1",
        "part.bin",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), Some(3), "{}", stderr(&o));
    assert!(!out.exists());
    let beside: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("out.bin"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
    let a = get_raw(
        &addr(&s),
        &s.token,
        &format!("/api/v1/graphs/fan/runs/{P}/nodes/m1/artifacts/part.bin"),
    );
    assert_eq!(a.status, 500);
    let m = a.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(
        m.contains("damaged or replaced") && m.contains("\"m1\""),
        "{m}"
    );

    // A big object damaged: streamed, its body ends short of its length.
    let big = s.json(&["artifacts", "big", P]);
    let data_bin = big["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["node"] == "make" && a["name"] == "data.bin")
        .unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_string();
    let path = object(&s.data, &data_bin);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), BIG_BYTES);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let a = get_raw(
        &addr(&s),
        &s.token,
        &format!("/api/v1/graphs/big/runs/{P}/nodes/make/artifacts/data.bin"),
    );
    assert_eq!(a.status, 200);
    let length: usize = a.header("content-length").unwrap().parse().unwrap();
    assert_eq!(length, BIG_BYTES);
    assert!(a.body.len() < length, "a damaged object's body is cut");
    assert_ne!(a.body, bytes, "the damaged bytes never arrive whole");

    // m0's object gone: an error naming the store by its URL.
    std::fs::remove_file(object(&s.data, &hash_of("m0"))).unwrap();
    let a = get_raw(
        &addr(&s),
        &s.token,
        &format!("/api/v1/graphs/fan/runs/{P}/nodes/m0/artifacts/part.bin"),
    );
    assert_eq!(a.status, 500);
    let m = a.json()["error"]["message"].as_str().unwrap().to_string();
    let store_url = format!("file://{}", s.data.join("artifacts").display());
    assert!(
        m.contains("is missing from the object store") && m.contains(&store_url),
        "{m}"
    );
    let o = s.cli(&[
        "artifacts",
        "get",
        "fan",
        P,
        "m0",
        "part.bin",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains(&store_url), "{}", stderr(&o));
    assert!(!out.exists());
}

#[test]
fn with_no_engine_the_cli_reads_the_store_and_the_artifact_folder() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = served_fan(dir.path());
    let live = s.json(&["artifacts", "fan", P]);
    // A clean stop: engine.json goes, the store is let go.
    unsafe {
        libc::kill(s.child.id() as i32, libc::SIGTERM);
    }
    wait_for("the engine to stop", Duration::from_secs(30), || {
        s.child.try_wait().unwrap()
    });
    assert_eq!(s.json(&["artifacts", "fan", P]), live);
    let hash = live["artifacts"][0]["hash"].as_str().unwrap();
    let out = dir.path().join("data.bin");
    s.ok(&[
        "artifacts",
        "get",
        "fan",
        P,
        "make",
        "data.bin",
        "-o",
        out.to_str().unwrap(),
    ]);
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), BYTES);
    assert_eq!(blake3_hex(&got), hash);
    let o = s.cli(&["artifacts", "get", "fan", P, "make", "nosuch"]);
    assert_eq!(code(&o), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("it has data.bin, logs/p.txt"),
        "{}",
        stderr(&o)
    );
}

/// A follower's front passes the request to the leader's, which passes it
/// to its engine: the answer comes back through both, streamed, with its
/// length and hash headers and every byte.
#[test]
fn a_replicated_members_front_passes_a_download_on_whole() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "fan", &fan_graph("fan", 2, BYTES, ""));
    let shared = dir.path().join("shared-artifacts");
    let url = format!("file://{}", shared.display());
    let g = Group::start(&dir.path().join("group"), &defs, 3, &["--artifacts", &url]);
    let wait = Duration::from_secs(30);
    let started = g.api(
        "POST",
        "/api/v1/graphs/fan/runs",
        Some(&json!({"partitions": [P]})),
        wait,
    );
    assert_eq!(started.status, 200, "{}", started.body);
    g.wait("fan's run", Duration::from_secs(60), || {
        let r = g.api("GET", &format!("/api/v1/graphs/fan/runs/{P}"), None, wait);
        (r.json()["state"] == "complete").then_some(())
    });
    let listed = g
        .api(
            "GET",
            &format!("/api/v1/graphs/fan/runs/{P}/artifacts?node=make"),
            None,
            wait,
        )
        .json();
    let hash = listed["artifacts"][0]["hash"].as_str().unwrap().to_string();
    let stored = std::fs::read(shared.join("artifacts/blake3").join(&hash)).unwrap();
    assert_eq!(stored.len(), BYTES);
    let leader = g.leader().unwrap();
    for id in [leader, (1..=3).find(|i| *i != leader).unwrap()] {
        let a = get_raw(
            &g.members[&id].api,
            &g.token,
            &format!("/api/v1/graphs/fan/runs/{P}/nodes/make/artifacts/data.bin"),
        );
        assert_eq!(a.status, 200, "member {id}: {}", a.headers);
        assert_eq!(
            a.header("content-length"),
            Some(BYTES.to_string()),
            "member {id}"
        );
        assert_eq!(a.header("x-weir-blake3"), Some(hash.clone()), "member {id}");
        assert!(
            a.header("content-disposition")
                .is_some_and(|d| d.contains("filename=\"data.bin\"")),
            "member {id}: {}",
            a.headers
        );
        assert_eq!(a.body, stored, "member {id}");
    }
}
