//! Access on a real `weir serve`: tokens with roles on every route, 401 and
//! 403 as documented with nothing changed on a refusal, the audit log of a
//! scripted session across a kill -9, and the API over TLS.

mod serve_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use serve_support::*;

fn message(a: &Answer) -> String {
    a.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// What refusals must leave as it was: runs, tokens, graphs (paused or
/// not), breakers, dead letters.
fn state_of(s: &Served) -> Vec<Value> {
    [
        "/api/v1/runs",
        "/api/v1/tokens",
        "/api/v1/graphs",
        "/api/v1/breakers",
        "/api/v1/queue/dead",
    ]
    .iter()
    .map(|p| {
        let mut v = s.http().get(p).json();
        // A graph's next firing moves with the clock; the rest may not.
        if let Some(gs) = v.as_array_mut() {
            for g in gs {
                if let Some(o) = g.as_object_mut() {
                    o.remove("next_firing");
                    o.remove("next_firing_ms");
                }
            }
        }
        v
    })
    .collect()
}

fn is_stream(path: &str) -> bool {
    path.ends_with("/events") || path.ends_with("/logs")
}

#[test]
fn every_route_with_every_role_and_with_no_revoked_or_expired_token() {
    let (_dir, s) = served("g");
    let viewer = s.token("dash", "viewer", None);
    let operator = s.token("oncall", "operator", None);
    let admin = s.token("lead", "admin", None);
    let revoked = s.token("gone", "admin", None);
    s.ok(&["token", "revoke", "gone"]);
    let expired = s.token("brief", "admin", Some("1s"));
    std::thread::sleep(Duration::from_millis(1_200));
    let routes = weir::serve::routes_with_roles();
    assert!(routes.len() > 30, "{}", routes.len());
    let before = state_of(&s);

    // No token, a wrong, a revoked and an expired one: 401 everywhere.
    let mut anon = s.http();
    anon.token = None;
    let wrong = s.http_as(&format!("weir_{}", "0".repeat(64)));
    let refused_401 = [
        ("no token", anon, "Bearer"),
        ("a wrong token", wrong, "not one of this engine's"),
        (
            "a revoked token",
            s.http_as(&revoked),
            "\"gone\" was revoked",
        ),
        ("an expired token", s.http_as(&expired), "\"brief\" expired"),
    ];
    for (what, client, says) in &refused_401 {
        for (method, path, _) in &routes {
            let a = client.send(&method.to_uppercase(), &concrete(path), Some(b"{}"), &[]);
            assert_eq!(a.status, 401, "{method} {path} with {what}: {a:?}");
            assert!(
                message(&a).contains(says),
                "{method} {path} with {what}: {a:?}"
            );
        }
    }
    // Each role below a route's: 403 naming the role needed.
    let holders = [
        ("dash", "viewer", &viewer),
        ("oncall", "operator", &operator),
    ];
    for (name, role, secret) in holders {
        let client = s.http_as(secret);
        let held: weir::serve::access::Role = role.parse().unwrap();
        for (method, path, needed) in &routes {
            if held.allows(*needed) {
                continue;
            }
            let a = client.send(&method.to_uppercase(), &concrete(path), Some(b"{}"), &[]);
            assert_eq!(a.status, 403, "{method} {path} as {role}: {a:?}");
            let m = message(&a);
            assert!(
                m.contains(&format!("needs the {needed} role")) && m.contains(name),
                "{method} {path} as {role}: {m}"
            );
        }
    }
    assert_eq!(state_of(&s), before, "a refusal changed something");

    // Each role at or above a route's passes the access check: whatever
    // the handler answers (404 for names nothing has, 400 for an empty
    // body), it is not 401 or 403.
    for (role, secret) in [
        ("viewer", &viewer),
        ("operator", &operator),
        ("admin", &admin),
    ] {
        let client = s.http_as(secret);
        let held: weir::serve::access::Role = role.parse().unwrap();
        for (method, path, needed) in &routes {
            if !held.allows(*needed) || is_stream(path) || path.contains("/reload") {
                continue;
            }
            let a = client.send(&method.to_uppercase(), &concrete(path), Some(b"{}"), &[]);
            assert!(
                a.status != 401 && a.status != 403,
                "{method} {path} as {role}: {a:?}"
            );
        }
    }
    // The file token is the first admin's.
    let a = s.http().get("/api/v1/tokens");
    assert_eq!(a.status, 200, "{a:?}");
    let listed = a.json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"admin"), "{names:?}");
}

#[test]
fn the_api_document_states_each_routes_role() {
    let doc: Value = serde_json::from_str(weir::serve::openapi::DOCUMENT).unwrap();
    for (method, path, role) in weir::serve::routes_with_roles() {
        let stated = &doc["paths"][path][method]["x-weir-role"];
        assert_eq!(stated, role.name(), "{method} {path}");
        let described = doc["paths"][path][method]["description"]
            .as_str()
            .unwrap_or("");
        assert!(
            described.starts_with(&format!("Needs the {role} role")),
            "{method} {path}: {described:?}"
        );
        assert!(
            doc["paths"][path][method]["responses"]["403"].is_object(),
            "{method} {path} documents no 403"
        );
    }
}

#[test]
fn tokens_are_stored_hashed_and_a_secret_is_shown_once() {
    let (_dir, s) = served("g");
    let secret = s.token("grafana", "viewer", Some("90d"));
    assert!(
        secret.starts_with("weir_") && secret.len() == 69,
        "{secret}"
    );
    let list = s.ok(&["token", "list"]);
    assert!(
        list.contains("grafana") && list.contains("viewer") && !list.contains(&secret),
        "{list}"
    );
    // A live name cannot be taken twice; a revoked one can.
    let again = s.cli(&["token", "create", "--name", "grafana", "--role", "admin"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("revoke it first"));
    let bad = s.cli(&["token", "create", "--name", "x", "--role", "root"]);
    assert!(String::from_utf8_lossy(&bad.stderr).contains("role \"root\""));
    s.ok(&["token", "revoke", "grafana"]);
    assert_eq!(s.http_as(&secret).get("/api/v1/graphs").status, 401);
    let renewed = s.token("grafana", "operator", None);
    assert_ne!(renewed, secret);
    assert_eq!(s.http_as(&renewed).get("/api/v1/graphs").status, 200);
    // Stop the engine (kill -9: what is in the store is all there is);
    // no file of the data directory holds a secret.
    let data = s.data.clone();
    drop(s);
    for entry in walk(&data) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        for sec in [&secret, &renewed] {
            assert!(
                !bytes.windows(sec.len()).any(|w| w == sec.as_bytes()),
                "{} holds a token's secret",
                entry.display()
            );
        }
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn audit(s: &Served) -> Vec<Value> {
    s.json(&["audit"]).as_array().unwrap().clone()
}

#[test]
fn a_scripted_session_is_in_the_audit_log_across_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let data = dir.path().join("data");
    let s = start(&["serve"], &defs, &data);
    let op = s.token("oncall", "operator", None);
    let viewer = s.token("dash", "viewer", None);
    let start_body = json!({"partitions": ["2026-11-02"]}).to_string();
    let a = s.http_as(&op).send(
        "POST",
        "/api/v1/graphs/g/runs",
        Some(start_body.as_bytes()),
        &[],
    );
    assert_eq!(a.status, 200, "{a:?}");
    s.wait_run("g", "2026-11-02", "complete");
    let a = s
        .http_as(&viewer)
        .send("POST", "/api/v1/graphs/g/pause", Some(b"{}"), &[]);
    assert_eq!(a.status, 403);
    let a = s.http_as(&op).send(
        "POST",
        "/api/v1/graphs/g/runs/2026-11-02/nodes/b/rerun",
        Some(br#"{"downstream": true}"#),
        &[],
    );
    assert!(a.status < 300, "{a:?}");
    // A body with a secret-looking field keeps it out of the log.
    let a = s.http_as(&op).send(
        "POST",
        "/api/v1/graphs/g/keys/k1/signal",
        Some(br#"{"api_token": "hunter2-hunter2"}"#),
        &[],
    );
    assert!(a.status >= 400, "g is not keyed: {a:?}");
    drop(s); // kill -9
             // With no engine running, `weir audit` reads the store.
    let o = weir()
        .args(["audit", "--json", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let offline: Vec<Value> = serde_json::from_slice(&o.stdout).unwrap();
    let s = start(&["serve"], &defs, &data);
    let log = audit(&s);
    assert_eq!(offline, log, "the store's log is the engine's");
    let rows: Vec<(String, String, String, String)> = log
        .iter()
        .map(|e| {
            (
                e["who"].as_str().unwrap().to_string(),
                format!(
                    "{} {}",
                    e["method"].as_str().unwrap(),
                    e["route"].as_str().unwrap()
                ),
                e["outcome"].as_str().unwrap().to_string(),
                e["status"].to_string(),
            )
        })
        .collect();
    let want = [
        ("admin", "POST /api/v1/tokens", "ok", "200"),
        ("admin", "POST /api/v1/tokens", "ok", "200"),
        ("oncall", "POST /api/v1/graphs/{graph}/runs", "ok", "200"),
        (
            "dash",
            "POST /api/v1/graphs/{graph}/pause",
            "refused",
            "403",
        ),
        (
            "oncall",
            "POST /api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/rerun",
            "ok",
            "200",
        ),
        (
            "oncall",
            "POST /api/v1/graphs/{graph}/keys/{key}/signal",
            "refused",
            "",
        ),
    ];
    assert_eq!(rows.len(), want.len(), "{rows:#?}");
    for (i, (got, want)) in rows.iter().zip(want).enumerate() {
        assert_eq!(got.0, want.0, "#{i}: {got:?}");
        assert_eq!(got.1, want.1, "#{i}: {got:?}");
        assert_eq!(got.2, want.2, "#{i}: {got:?}");
        if !want.3.is_empty() {
            assert_eq!(got.3, want.3, "#{i}: {got:?}");
        }
    }
    assert!(log[2]["params"].as_str().unwrap().contains("2026-11-02"));
    assert!(log[3]["error"]
        .as_str()
        .unwrap()
        .contains("needs the operator role"));
    assert!(log[4]["path"].as_str().unwrap().ends_with("/nodes/b/rerun"));
    assert!(log
        .iter()
        .all(|e| e["client"].as_str().unwrap().starts_with("127.0.0.1:")));
    let text = serde_json::to_string(&log).unwrap();
    assert!(!text.contains("hunter2"), "a secret reached the audit log");
    assert!(
        !text.contains("weir_"),
        "a token's secret reached the audit log"
    );
    // Filters.
    let only = s.json(&["audit", "--who", "dash"]);
    assert_eq!(only.as_array().unwrap().len(), 1);
    let none = s.json(&["audit", "--since", "2099-01-01T00:00:00Z"]);
    assert!(none.as_array().unwrap().is_empty());
    // Reading the audit log is an admin's.
    assert_eq!(s.http_as(&op).get("/api/v1/audit").status, 403);
}

/// Starts come in while the engine is killed at an arbitrary moment: after
/// the restart, every run has its audit entry (no change without one),
/// every start that was answered has its run and an entry that says so
/// (nothing acknowledged is lost), an entry without outcome reads
/// `interrupted`, and no request is recorded twice.
#[test]
fn a_kill_between_a_change_and_its_audit_outcome_loses_neither() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let data = dir.path().join("data");
    let mut answered: BTreeMap<String, u16> = BTreeMap::new();
    let mut day = 0u32;
    for round in 0..3u64 {
        let s = start(&["serve"], &defs, &data);
        let http = s.http();
        let got: Arc<Mutex<Vec<(String, u16)>>> = Arc::default();
        let first = day;
        let sender = {
            let got = got.clone();
            std::thread::spawn(move || {
                for d in first..first + 400 {
                    let p = partition_of(d);
                    let body = json!({ "partitions": [p] }).to_string();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        http.send("POST", "/api/v1/graphs/g/runs", Some(body.as_bytes()), &[])
                    }));
                    match r {
                        Ok(a) => got.lock().unwrap().push((p, a.status)),
                        Err(_) => return,
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300 + 170 * round));
        drop(s); // kill -9, mid-stream
        let _ = sender.join();
        for (p, st) in got.lock().unwrap().iter() {
            answered.insert(p.clone(), *st);
        }
        day += 400;
    }
    let s = start(&["serve"], &defs, &data);
    let log = audit(&s);
    let mut entries: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for e in &log {
        if e["route"] == "/api/v1/graphs/{graph}/runs" {
            let params: Value = serde_json::from_str(e["params"].as_str().unwrap()).unwrap();
            let p = params["partitions"][0].as_str().unwrap().to_string();
            entries.entry(p).or_default().push(e.clone());
        }
    }
    let mut runs: Vec<String> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["runs", "--graph", "g", "--limit", "1000"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = s.json(&args);
        runs.extend(
            page["runs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["partition"].as_str().unwrap().to_string()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert!(
        !answered.is_empty(),
        "no start was answered before the kills"
    );
    for p in &runs {
        assert!(entries.contains_key(p), "run {p} has no audit entry");
    }
    let interrupted = entries
        .values()
        .filter(|es| es[0]["outcome"] == "interrupted")
        .count();
    eprintln!(
        "{} starts answered, {} audited, {} runs, {interrupted} interrupted",
        answered.len(),
        entries.len(),
        runs.len()
    );
    for (p, es) in &entries {
        assert_eq!(es.len(), 1, "{p} recorded {} times", es.len());
        let e = &es[0];
        match answered.get(p) {
            Some(200) => {
                assert_eq!(e["outcome"], "ok", "{p}: {e}");
                assert!(runs.contains(p), "{p} was answered but has no run");
            }
            Some(_) => {}
            None => assert!(
                e["outcome"] == "interrupted" || e["outcome"] == "ok",
                "{p}: an unanswered start reads {}",
                e["outcome"]
            ),
        }
    }
}

fn partition_of(d: u32) -> String {
    let base = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
    (base + chrono::Days::new(u64::from(d)))
        .format("%Y-%m-%d")
        .to_string()
}

#[test]
fn the_api_over_tls_with_a_private_ca_and_a_plain_client_refused() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let data = dir.path().join("data");
    let (ca, cert, key) = tls_files(dir.path());
    let s = start(
        &[
            "serve",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
        &defs,
        &data,
    );
    assert!(s.url.starts_with("https://127.0.0.1:"), "{}", s.url);
    assert_eq!(s.ca.as_deref(), Some(ca.as_path()));
    // The CLI with the CA ($WEIR_CA here; --ca F is the same).
    s.ok(&["start", "g", "2026-11-03"]);
    s.wait_run("g", "2026-11-03", "complete");
    let o = weir()
        .args([
            "status",
            "--data",
            data.to_str().unwrap(),
            "--ca",
            ca.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Without it, the system roots do not know the private CA: said so,
    // with what to pass (tests/cli_tls.rs has every cause).
    let o = weir()
        .args(["status", "--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unknown issuer") && err.contains("--ca FILE") && err.contains(&s.url),
        "{err}"
    );
    // A plain-HTTP client gets a clear refusal, not a broken handshake.
    let a = s.http().get("/api/v1/graphs");
    assert_eq!(a.status, 400, "{a:?}");
    assert!(a.body.contains("serves HTTPS only"), "{a:?}");
    let plain_url = s.url.replace("https://", "http://");
    let o = weir()
        .args([
            "status",
            "--data",
            data.to_str().unwrap(),
            "--engine",
            &plain_url,
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("HTTPS only"));
    // The UI's session cookie is Secure under TLS.
    let pem = std::fs::read(&ca).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (set_cookie, body) = rt.block_on(async {
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
            .build()
            .unwrap();
        let r = http
            .post(format!("{}/ui-session/login", s.url))
            .json(&json!({ "token": s.token }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
        (cookie, r.json::<Value>().await.unwrap())
    });
    assert!(
        set_cookie.contains("; Secure") && set_cookie.contains("HttpOnly"),
        "{set_cookie}"
    );
    assert_eq!(body["name"], "admin");
    assert_eq!(body["role"], "admin");
}

#[test]
fn a_non_loopback_address_needs_tls_or_insecure_http() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let token = data.join("token");
    std::fs::write(&token, format!("{}\n", "t".repeat(40))).unwrap();
    let o = weir()
        .arg("serve")
        .arg(&defs)
        .args([
            "--listen",
            "0.0.0.0:0",
            "--token-file",
            token.to_str().unwrap(),
        ])
        .arg("--data")
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--tls-cert") && err.contains("--insecure-http"),
        "{err}"
    );
    let s = start_on(
        &[
            "serve",
            "--token-file",
            token.to_str().unwrap(),
            "--insecure-http",
        ],
        &defs,
        &data,
        "0.0.0.0:0",
    );
    assert_eq!(s.http().get("/api/v1/graphs").status, 200);
}
