//! Tokens' edges (#43 item 13), on a real `weir serve`: names told apart
//! without regard to case, a bounded lifetime, a revoked token still
//! listed once its name is taken again, and `--tls-cert` refused beside
//! `--insecure-http`.

mod serve_support;

use serde_json::{json, Value};
use serve_support::*;
use weir::serve::access::tokens::{TOKEN_HISTORY_MAX, TOKEN_LIFETIME_MAX_MS};

/// `ADMIN` cannot stand beside `admin` (DATA/token's holder), nor
/// `Grafana` beside `grafana`; the refusal names both.
#[test]
fn a_name_differing_only_by_case_is_refused() {
    let (_dir, s) = served("g");
    s.token("grafana", "viewer", None);
    // (name, the name it clashes with, as the refusal quotes it)
    let cases = [
        ("ADMIN", "\"admin\""),
        ("Admin", "\"admin\""),
        ("Grafana", "\"grafana\""),
        ("GRAFANA", "\"grafana\""),
    ];
    for (i, (name, names)) in cases.iter().enumerate() {
        let o = s.cli(&["token", "create", "--name", name, "--role", "admin"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "#{i}: {name}: {err}");
        assert!(
            err.contains(&format!("{name:?}")) && err.contains(names) && err.contains("case"),
            "#{i}: {name}: {err}"
        );
    }
    // Still revocable, a revoked clash stays a clash: the name is held.
    s.ok(&["token", "revoke", "grafana"]);
    let o = s.cli(&["token", "create", "--name", "GrafanA", "--role", "viewer"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let names: Vec<String> = s
        .http()
        .get("/api/v1/tokens")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["admin", "grafana"], "nothing was made");
}

/// `expires` is bounded (at most 3650d) instead of saturating to a year
/// no calendar holds; the limit itself is accepted.
#[test]
fn a_lifetime_over_the_maximum_is_refused() {
    let (_dir, s) = served("g");
    let max_days = TOKEN_LIFETIME_MAX_MS / 86_400_000;
    assert_eq!(max_days, 3650);
    let http = s.http();
    // (expires, want status)
    let cases = [
        ("999999999999d", 400),
        ("3651d", 400),
        ("11years", 400),
        ("", 400),
        ("3650d", 200),
        ("90d", 200),
    ];
    for (i, (expires, status)) in cases.iter().enumerate() {
        let a = http.post(
            "/api/v1/tokens",
            &json!({"name": format!("t{i}"), "role": "viewer", "expires": expires}),
        );
        assert_eq!(a.status, *status, "#{i}: expires {expires:?}: {a:?}");
        if *status == 400 {
            assert!(
                a.json()["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("expires"),
                "#{i}: the error names the field: {a:?}"
            );
        } else {
            let t = &a.json()["token"];
            let life = t["expires_ms"].as_u64().unwrap() - t["created_ms"].as_u64().unwrap();
            assert!(life <= TOKEN_LIFETIME_MAX_MS, "#{i}: {t}");
        }
    }
    let o = s.cli(&[
        "token",
        "create",
        "--name",
        "forever",
        "--role",
        "viewer",
        "--expires",
        "999999999999d",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("at most 3650d"), "{err}");
}

/// Taking a revoked name again keeps the revoked token listed (the audit
/// log names it; so does the list), the new one beside it; the old
/// secret opens nothing, the new one does.
#[test]
fn a_revoked_token_stays_listed_when_its_name_is_taken_again() {
    let (_dir, s) = served("g");
    let first = s.token("grafana", "viewer", None);
    s.ok(&["token", "revoke", "grafana"]);
    let second = s.token("grafana", "operator", None);
    s.ok(&["token", "revoke", "grafana"]);
    let third = s.token("grafana", "admin", None);
    let rows: Vec<Value> = s
        .http()
        .get("/api/v1/tokens")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "grafana")
        .cloned()
        .collect();
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|t| (t["role"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            ("viewer", "revoked"),
            ("operator", "revoked"),
            ("admin", "live")
        ],
        "oldest first: {rows:#?}"
    );
    assert!(rows[0]["revoked_by"] == "admin" && rows[0]["revoked_ms"].is_u64());
    let table = s.ok(&["token", "list"]);
    assert_eq!(
        table.matches("grafana").count(),
        3,
        "weir token list shows the history: {table}"
    );
    assert_eq!(s.http_as(&first).get("/api/v1/graphs").status, 401);
    assert_eq!(s.http_as(&second).get("/api/v1/graphs").status, 401);
    assert_eq!(s.http_as(&third).get("/api/v1/graphs").status, 200);
    // Revoking revokes the current one; the history is not touched.
    s.ok(&["token", "revoke", "grafana"]);
    assert_eq!(s.http_as(&third).get("/api/v1/graphs").status, 401);
    let states: Vec<String> = s
        .http()
        .get("/api/v1/tokens")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "grafana")
        .map(|t| t["state"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(states, ["revoked", "revoked", "revoked"]);
}

/// A name taken again and again keeps its newest earlier records, at most
/// TOKEN_HISTORY_MAX of them, the oldest dropped first.
#[test]
fn a_name_s_history_is_bounded() {
    let (_dir, s) = served("g");
    let http = s.http();
    let rounds = TOKEN_HISTORY_MAX + 3;
    for i in 0..rounds {
        let role = ["viewer", "operator", "admin"][i % 3];
        let a = http.post("/api/v1/tokens", &json!({"name": "bot", "role": role}));
        assert_eq!(a.status, 200, "#{i}: {a:?}");
        let a = http.post("/api/v1/tokens/bot/revoke", &json!({}));
        assert_eq!(a.status, 200, "#{i}: {a:?}");
    }
    let rows: Vec<Value> = http
        .get("/api/v1/tokens")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "bot")
        .cloned()
        .collect();
    assert_eq!(rows.len(), TOKEN_HISTORY_MAX + 1, "{rows:#?}");
    let created: Vec<u64> = rows
        .iter()
        .map(|t| t["created_ms"].as_u64().unwrap())
        .collect();
    let mut sorted = created.clone();
    sorted.sort();
    assert_eq!(created, sorted, "oldest first");
    // The two oldest were dropped: the first kept is the third made.
    let roles: Vec<&str> = rows.iter().map(|t| t["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles[0],
        ["viewer", "operator", "admin"][(rounds - TOKEN_HISTORY_MAX - 1) % 3]
    );
}

/// `--tls-cert` beside `--insecure-http` says two opposite things: exit 2
/// naming both, before anything starts (with a real certificate, which
/// would otherwise be served).
#[test]
fn tls_beside_insecure_http_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let (_ca, cert, key) = tls_files(dir.path());
    let mut child = weir()
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(dir.path().join("data"))
        .args(["--listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .arg("--insecure-http")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("weir serve started with --tls-cert and --insecure-http");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("--tls-cert") && err.contains("--insecure-http"),
        "{err}"
    );
    assert!(
        !dir.path().join("data").join("engine.json").exists(),
        "nothing started"
    );
}
