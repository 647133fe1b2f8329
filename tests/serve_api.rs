//! The HTTP API of a real `weir serve` on an ephemeral loopback port: the
//! token, the OpenAPI document against the router, metrics, malformed
//! requests, reload on SIGHUP.

mod serve_support;

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};
use serve_support::*;

#[test]
fn every_route_but_healthz_needs_the_token() {
    let (_dir, s) = served("g");
    let mut anon = s.http();
    anon.token = None;
    assert_eq!(anon.get("/healthz").status, 200);
    for path in [
        "/api/v1/graphs",
        "/metrics",
        "/api/v1/runs",
        "/api/v1/events",
        "/api/v1/openapi.json",
    ] {
        let a = anon.get(path);
        assert_eq!(a.status, 401, "{path} without a token: {a:?}");
        assert!(a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Bearer"));
    }
    let mut wrong = s.http();
    wrong.token = Some("0".repeat(64));
    assert_eq!(wrong.get("/api/v1/graphs").status, 401);
    let a = s.http().get("/api/v1/graphs");
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(a.json()[0]["name"], "g");
    // The token and engine files are private.
    for f in ["token", "engine.json"] {
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(s.data.join(f)).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "{f}");
    }
}

/// The document's component schemas are those the body types derive
/// (faults #18), but the hand-written `Error`: the document cannot drift
/// from what the API serializes. `WEIR_WRITE_OPENAPI=1` rewrites them.
#[test]
fn openapi_components_are_the_body_types_schemas() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/serve/openapi.json");
    let mut doc: Value = serde_json::from_str(weir::serve::openapi::DOCUMENT).unwrap();
    let mut want = weir::serve::schemas::components();
    let have = doc["components"]["schemas"].as_object().unwrap().clone();
    want.insert("Error".into(), have["Error"].clone());
    if std::env::var_os("WEIR_WRITE_OPENAPI").is_some() {
        doc["components"]["schemas"] = Value::Object(want);
        let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        std::fs::write(&path, text).unwrap();
        return;
    }
    let names = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        names(&have),
        names(&want),
        "the components differ from the types' schemas: WEIR_WRITE_OPENAPI=1 cargo test --test serve_api openapi"
    );
    for (name, schema) in &want {
        assert_eq!(
            &have[name], schema,
            "component {name} differs from its type's schema: WEIR_WRITE_OPENAPI=1 cargo test --test serve_api openapi"
        );
    }
}

#[test]
fn openapi_document_lists_exactly_the_routes_served() {
    let (_dir, s) = served("g");
    let doc = s.http().get("/api/v1/openapi.json").json();
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for m in ops.as_object().unwrap().keys() {
            documented.push((m.clone(), path.clone()));
        }
    }
    documented.sort();
    let served: Vec<(String, String)> = weir::serve::routes_served()
        .into_iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    for r in &served {
        assert!(
            documented.contains(r),
            "served but not in the OpenAPI document: {r:?}"
        );
    }
    for r in &documented {
        assert!(
            served.contains(r),
            "in the OpenAPI document but not served: {r:?}"
        );
    }
    // And the live router answers each documented route: a 404 or 400
    // there comes from the handler (a JSON error naming the unknown
    // thing), never from a missing route.
    for (method, path) in &documented {
        if path.ends_with("/events") || path.ends_with("/logs") || path.contains("/reload") {
            continue; // streams, and a reload that would re-adopt
        }
        let a = s
            .http()
            .send(&method.to_uppercase(), &concrete(path), Some(b"{}"), &[]);
        assert_ne!(a.status, 405, "{method} {path}: {a:?}");
        if a.status == 404 {
            assert!(
                a.body.contains("\"error\""),
                "{method} {path} is not routed: {a:?}"
            );
        }
    }
}

#[test]
fn metrics_scrape_parses_and_counts_completions() {
    let (_dir, s) = served("g");
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "complete");
    let text = s.http().get("/metrics").body;
    let mut samples: Vec<(String, f64)> = Vec::new();
    for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not a sample: {line:?}"));
        let v: f64 = value
            .parse()
            .unwrap_or_else(|e| panic!("{line:?}: value {value:?}: {e}"));
        if let Some(open) = name.find('{') {
            assert!(name.ends_with('}'), "labels of {line:?}");
            for pair in name[open + 1..name.len() - 1].split("\",") {
                let (k, v) = pair
                    .split_once("=\"")
                    .unwrap_or_else(|| panic!("label {pair:?} in {line:?}"));
                assert!(!k.is_empty() && !v.contains('\n'));
            }
        }
        samples.push((name.to_string(), v));
    }
    let get = |n: &str| samples.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    for node in ["a", "b", "c"] {
        let name =
            format!("weir_completions_total{{graph=\"g\",node=\"{node}\",status=\"succeeded\"}}");
        assert_eq!(get(&name), Some(1.0), "{name} in\n{text}");
    }
    assert_eq!(
        get("weir_queue_running{pool=\"default\"}"),
        Some(0.0),
        "{text}"
    );
    assert!(get("weir_queue_pending{pool=\"default\"}").is_some());
    let durations: f64 = samples
        .iter()
        .filter(|(k, _)| k.starts_with("weir_attempt_duration_seconds_count{graph=\"g\""))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(durations, 3.0, "one attempt duration per node: {text}");
    assert!(
        samples
            .iter()
            .any(|(k, _)| k.starts_with("weir_commit_batch_ops")),
        "commit batch sizes: {text}"
    );
    assert_eq!(
        get("weir_runs_settled_total{graph=\"g\",state=\"complete\"}"),
        Some(1.0)
    );
    // Every metric has its help line (faults #21), and a counter without
    // labels is there at 0 before its first increment.
    let typed: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(typed.len() > 10, "{text}");
    for name in typed {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has no # HELP in\n{text}"
        );
    }
    assert_eq!(get("weir_workers_lost_total"), Some(0.0), "{text}");
    // Labelled counters are there at 0 from their node's first ticket, or
    // their graph's first run, not from their first increment (#21).
    for counter in [
        "weir_retries_total",
        "weir_attempt_failures_total",
        "weir_deferrals_total",
        "weir_dead_letters_total",
    ] {
        let name = format!("{counter}{{graph=\"g\",node=\"a\"}}");
        assert_eq!(get(&name), Some(0.0), "{name} in\n{text}");
    }
    assert_eq!(
        get("weir_runs_settled_total{graph=\"g\",state=\"failed\"}"),
        Some(0.0),
        "{text}"
    );
}

/// Requests that are wrong in every way a client can be wrong.
fn malformed() -> impl Strategy<Value = (String, String, Vec<u8>, Vec<(String, String)>)> {
    let junk_segment = prop_oneof![
        Just("..".to_string()),
        Just("%00".to_string()),
        Just("%FF%FE".to_string()),
        Just("key=%3Cscript%3E".to_string()),
        // Never the one graph and node that exist: a well-formed request
        // for them is not malformed (a GET of graph "g" answers 200).
        "[a-zA-Z0-9%._~-]{0,40}".prop_filter("an existing name", |s| s != "g" && s != "b"),
    ];
    let junk_body = prop_oneof![
        Just(b"{".to_vec()),
        Just(b"[]".to_vec()),
        Just(b"null".to_vec()),
        Just(b"{\"unknown_field\": 1}".to_vec()),
        Just(b"{\"partitions\": 7}".to_vec()),
        Just(b"{\"partitions\": [\"not-a-partition\"]}".to_vec()),
        Just(b"{\"from\": \"x\", \"to\": \"y\"}".to_vec()),
        Just(b"{\"state\": \"maybe\"}".to_vec()),
        Just(b"{\"downstream\": \"yes\"}".to_vec()),
        prop::collection::vec(any::<u8>(), 1..200),
    ];
    let query = prop_oneof![
        Just("?limit=abc".to_string()),
        Just("?limit=0".to_string()),
        Just("?limit=99999999".to_string()),
        Just("?state=bogus".to_string()),
        Just("?from=yesterday".to_string()),
        Just("?cursor=%FF".to_string()),
        Just("?nosuchparam=1".to_string()),
        Just("?attempt=-1".to_string()),
    ];
    let target =
        (0usize..12, junk_segment.clone(), junk_segment, query).prop_map(|(i, a, b, q)| match i {
            0 => ("GET".into(), format!("/api/v1/runs{q}")),
            1 => ("GET".into(), format!("/api/v1/graphs/{a}")),
            2 => ("POST".into(), "/api/v1/graphs/g/runs".into()),
            3 => ("POST".into(), "/api/v1/graphs/g/backfills".into()),
            4 => (
                "POST".into(),
                format!("/api/v1/graphs/g/runs/{a}/nodes/b/rerun"),
            ),
            5 => (
                "POST".into(),
                format!("/api/v1/graphs/g/runs/2026-11-01/nodes/{b}/mark"),
            ),
            6 => ("GET".into(), format!("/api/v1/graphs/g/runs/{a}")),
            7 => ("GET".into(), format!("/api/v1/queue/dead{q}")),
            8 => ("POST".into(), format!("/api/v1/graphs/{a}/keys/{b}/signal")),
            9 => ("DELETE".into(), "/api/v1/graphs".into()),
            10 => (
                "GET".into(),
                format!("/api/v1/graphs/g/runs/2026-11-01/nodes/a/logs{q}"),
            ),
            _ => ("POST".into(), format!("/api/v1/breakers/{a}/reset")),
        });
    let headers = prop_oneof![
        Just(vec![]),
        Just(vec![("Content-Type".to_string(), "text/plain".to_string())]),
        Just(vec![(
            "Content-Type".to_string(),
            "application/json; charset=latin1".to_string()
        )]),
    ];
    (target, junk_body, headers).prop_map(|((m, p), b, h)| (m, p, b, h))
}

#[test]
fn a_thousand_malformed_requests_get_4xx_and_the_engine_keeps_serving() {
    let (_dir, s) = served("g");
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "complete");
    let http = s.http();
    let mut runner = TestRunner::new(Config {
        cases: 1000,
        failure_persistence: None,
        ..Config::default()
    });
    let seen = std::cell::RefCell::new(std::collections::BTreeMap::<u16, usize>::new());
    runner
        .run(&malformed(), |(method, path, body, headers)| {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let a = http.send(&method, &path, Some(&body), &h);
            *seen.borrow_mut().entry(a.status).or_default() += 1;
            prop_assert!(
                (400..500).contains(&a.status),
                "{method} {path} with {:?}: {} {}",
                String::from_utf8_lossy(&body),
                a.status,
                a.body
            );
            Ok(())
        })
        .unwrap();
    // A body past the limit is 413.
    let big = vec![b' '; 100 * 1024];
    let a = http.send("POST", "/api/v1/graphs/g/runs", Some(&big), &[]);
    assert_eq!(a.status, 413, "{a:?}");
    // Its body was not read: the connection is closed, and says so, so a
    // client's pool does not send its next request into it.
    assert!(
        a.headers.to_ascii_lowercase().contains("connection: close"),
        "{a:?}"
    );
    // Still serving, and nothing changed: one run, complete.
    assert_eq!(http.get("/healthz").status, 200);
    let runs = http.get("/api/v1/runs").json();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    let seen = seen.into_inner();
    assert!(seen.len() > 1, "several kinds of refusal: {seen:?}");
}

#[test]
fn sighup_adopts_a_changed_file_and_refuses_a_broken_one() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    let file = write_def(&defs, "g", &chain_def("g"));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let http = s.http();
    let before = http.get("/api/v1/graphs/g").json();
    let h0 = before["summary"]["definition"]
        .as_str()
        .unwrap()
        .to_string();
    // A run started now keeps its definition.
    s.ok(&["start", "g", "2026-11-01"]);
    let changed = chain_def("g").replace("max_active_runs = 2", "max_active_runs = 3");
    std::fs::write(&file, changed).unwrap();
    unsafe { libc::kill(s.child.id() as i32, libc::SIGHUP) };
    let h1 = wait_for("the new definition", Duration::from_secs(20), || {
        let v = http.get("/api/v1/graphs/g").json();
        let h = v["summary"]["definition"].as_str().unwrap().to_string();
        (h != h0).then_some(v)
    });
    let hist: Vec<&str> = h1["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["hash"].as_str().unwrap())
        .collect();
    assert_eq!(hist.len(), 2, "{h1}");
    assert_eq!(hist[1], h0, "newest first: {h1}");
    s.wait_run("g", "2026-11-01", "complete");
    let run = http.get("/api/v1/graphs/g/runs/2026-11-01").json();
    assert_eq!(
        run["definition"],
        h0.as_str(),
        "the run kept the definition it started with"
    );
    // A broken file is refused; the graph keeps its definition.
    std::fs::write(&file, "name = \"g\"\n[[nodes]]\nname = 3\n").unwrap();
    let o = s.cli(&["reload"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("refused") && out.contains("g.toml"), "{out}");
    unsafe { libc::kill(s.child.id() as i32, libc::SIGHUP) };
    wait_for("the refusal logged", Duration::from_secs(20), || {
        s.stderr().contains("refused").then_some(())
    });
    let after = http.get("/api/v1/graphs/g").json();
    assert_eq!(after["summary"]["definition"], h1["summary"]["definition"]);
    assert_eq!(http.get("/healthz").status, 200);
}

#[test]
fn events_stream_resumes_from_its_last_id() {
    let (_dir, s) = served("g");
    let http = s.http();
    s.ok(&["start", "g", "2026-11-01"]);
    s.wait_run("g", "2026-11-01", "complete");
    // From the start of the ring: every event of the run, numbered.
    let first = http.events(
        "/api/v1/events",
        Some(&format!("{}-0", epoch(&s))),
        8,
        Duration::from_secs(10),
    );
    assert!(first.len() >= 8, "{first:?}");
    let ids: Vec<u64> = first
        .iter()
        .map(|e| e.id.rsplit('-').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "in order, none missing"
    );
    assert!(first.iter().any(|e| e.event == "run_started"), "{first:?}");
    // One naming (faults #21): the data is one object, its kind in
    // snake_case beside its fields, with no Rust variant names.
    for e in &first {
        let v: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(v["kind"], e.event.as_str(), "{v}");
        assert!(v["seq"].is_u64(), "{v}");
        assert!(
            v.as_object()
                .unwrap()
                .keys()
                .all(|k| k.chars().all(|c| c.is_ascii_lowercase() || c == '_')),
            "snake_case keys only: {v}"
        );
    }
    let started = first.iter().find(|e| e.event == "run_started").unwrap();
    let v: Value = serde_json::from_str(&started.data).unwrap();
    assert_eq!(
        (&v["graph"], &v["partition"]),
        (&json!("g"), &json!("2026-11-01")),
        "{v}"
    );
    // Resume after the third: the fourth comes first.
    let again = http.events(
        "/api/v1/events",
        Some(&first[2].id),
        2,
        Duration::from_secs(10),
    );
    assert_eq!(again[0].id, first[3].id);
    assert_eq!(again[0].data, first[3].data);
    // An id of another engine: reset.
    let other = http.events("/api/v1/events", Some("1-5"), 1, Duration::from_secs(10));
    assert_eq!(other[0].event, "reset", "{other:?}");
    // Live: a new run's events arrive on an open stream.
    let live = std::thread::scope(|sc| {
        let h = sc.spawn(|| http.events("/api/v1/events", None, 1, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(300));
        s.ok(&["start", "g", "2026-11-02"]);
        h.join().unwrap()
    });
    assert!(!live.is_empty(), "a live event arrived");
}

/// The engine epoch of `s` (its ids' first part).
fn epoch(s: &Served) -> u64 {
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(s.data.join("engine.json")).unwrap())
            .unwrap();
    let _ = json!({});
    v["started_at_ms"].as_u64().unwrap()
}

#[test]
fn tickets_are_listed_by_state_and_a_public_address_needs_a_token_file() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "slow",
        r#"name = "slow"
[pools]
default = 1
[[nodes]]
name = "one"
command = ["sleep", "20"]
[[nodes]]
name = "two"
command = ["sleep", "20"]
"#,
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    s.ok(&["start", "slow", "none"]);
    let http = s.http();
    let running = wait_for("a running ticket", Duration::from_secs(20), || {
        let v = http.get("/api/v1/queue/tickets?state=running").json();
        (v.as_array().unwrap().len() == 1).then_some(v)
    });
    let pending = http
        .get("/api/v1/queue/tickets?state=pending&pool=default")
        .json();
    assert_eq!(
        pending.as_array().unwrap().len(),
        1,
        "one slot: the other waits: {pending}"
    );
    let keys: Vec<&str> = [&running[0], &pending[0]]
        .iter()
        .map(|t| t["key"].as_str().unwrap())
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(sorted, ["slow/none/one/0", "slow/none/two/0"]);
    assert_eq!(http.get("/api/v1/queue/tickets?state=done").status, 400);
    let one = http.get(&format!(
        "/api/v1/queue/tickets/{}",
        keys[0].replace('/', "%2F")
    ));
    assert_eq!(one.status, 200, "{one:?}");
    // Binding a public address without a token file is refused at start.
    let o = weir()
        .arg("serve")
        .arg(&defs)
        .arg("--data")
        .arg(dir.path().join("other"))
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--token-file"),
        "{o:?}"
    );
}

/// The API's contract points (faults #20, #21): an unknown route answers
/// 404 and a wrong method 405, each with the documented JSON error body;
/// the bearer scheme is matched without regard to case (RFC 7235); an
/// empty `Last-Event-ID` is no id (the stream starts live), not a reset.
#[test]
fn unknown_routes_wrong_methods_and_header_forms_answer_as_documented() {
    let (_dir, s) = served("g");
    let http = s.http();
    for (method, path, status) in [
        ("GET", "/api/v1/nope", 404),
        ("GET", "/nope/at/all", 404),
        ("DELETE", "/api/v1/graphs", 405),
        ("POST", "/api/v1/graphs", 405),
    ] {
        let a = http.send(method, path, None, &[]);
        assert_eq!(a.status, status, "{method} {path}: {a:?}");
        assert!(
            a.headers
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "{method} {path}: a JSON body: {a:?}"
        );
        let e = &a.json()["error"];
        assert_eq!(e["status"], status, "{method} {path}: {a:?}");
        assert!(
            !e["message"].as_str().unwrap_or("").is_empty(),
            "{method} {path}: the error says what: {a:?}"
        );
    }
    // The bearer scheme in any case.
    let mut anon = s.http();
    anon.token = None;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let a = anon.send(
            "GET",
            "/api/v1/graphs",
            None,
            &[("Authorization", &format!("{scheme} {}", s.token))],
        );
        assert_eq!(a.status, 200, "scheme {scheme:?}: {a:?}");
    }
    // An empty Last-Event-ID: no reset, the stream starts live.
    let got = std::thread::scope(|sc| {
        let h = sc.spawn(|| http.events("/api/v1/events", Some(""), 1, Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(300));
        s.ok(&["start", "g", "2026-11-01"]);
        h.join().unwrap()
    });
    assert!(!got.is_empty(), "an event arrived");
    assert_ne!(got[0].event, "reset", "an empty id is no id: {got:?}");
}

/// Validates a real answer against the document: its status must be
/// listed for the operation, and its body must match that status's schema.
struct Contract {
    doc: Value,
}

impl Contract {
    fn check(&self, method: &str, template: &str, a: &Answer) -> Value {
        let op = &self.doc["paths"][template][method];
        assert!(op.is_object(), "{method} {template} is not documented");
        let resp = &op["responses"][a.status.to_string()];
        assert!(
            resp.is_object(),
            "{method} {template} answered {} which the document does not list: {}",
            a.status,
            a.body
        );
        let schema = &resp["content"]["application/json"]["schema"];
        let body = a.json();
        let mut root = schema.clone();
        root["components"] = self.doc["components"].clone();
        let v = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&root)
            .unwrap_or_else(|e| panic!("{method} {template}: schema does not compile: {e}"));
        let errors: Vec<String> = v
            .iter_errors(&body)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {template} ({}): the body does not match the document:\n{}\nbody: {}",
            a.status,
            errors.join("\n"),
            a.body
        );
        body
    }
}

/// Real responses of every route match the document (faults #18, #19):
/// each status is listed for its operation, each body matches the named
/// schema of its status (arrays as arrays), over graphs of every kind
/// (daily, keyed, mapped, with a breaker and a dead letter).
#[test]
fn every_route_s_real_responses_match_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    std::fs::write(defs.join("hosts.txt"), "web-1\nweb-2\n").unwrap();
    write_def(
        &defs,
        "h",
        "name = \"h\"\npartitioning = \"keyed\"\n[keyed]\ninventory = { file = \"hosts.txt\" }\n\
         refresh = \"1h\"\ninterval = \"1h\"\nretry_interval = \"1h\"\njitter = \"0s\"\n\
         [[nodes]]\nname = \"check\"\ncommand = [\"true\"]\n",
    );
    write_def(
        &defs,
        "b",
        "name = \"b\"\n[targets.api]\nfailures = 1\ncooldown = \"1h\"\n[[nodes]]\nname = \"call\"\n\
         target = \"api\"\nretry = { attempts = 1 }\ncommand = [\"false\"]\n",
    );
    write_def(
        &defs,
        "m",
        "name = \"m\"\npartitioning = \"daily\"\ncron = \"0 3 * * *\"\n[[nodes]]\nname = \"each\"\nitems = [1, 2]\n\
         command = [\"sh\", \"-c\", \"echo member $WEIR_MEMBER\"]\n",
    );
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let http = s.http();
    let c = Contract {
        doc: http.get("/api/v1/openapi.json").json(),
    };
    let get = |t: &str, path: &str| c.check("get", t, &http.get(path));
    let post = |t: &str, path: &str, body: Value| c.check("post", t, &http.post(path, &body));

    // Runs: one complete, one failed (b), a mapped one.
    let started = post(
        "/api/v1/graphs/{graph}/runs",
        "/api/v1/graphs/g/runs",
        json!({"partitions": ["2026-11-01"]}),
    );
    assert!(started.is_array(), "{started}");
    post(
        "/api/v1/graphs/{graph}/runs",
        "/api/v1/graphs/b/runs",
        json!({"partitions": ["none"]}),
    );
    post(
        "/api/v1/graphs/{graph}/runs",
        "/api/v1/graphs/m/runs",
        json!({"partitions": ["2026-11-01"]}),
    );
    let bf = post(
        "/api/v1/graphs/{graph}/backfills",
        "/api/v1/graphs/g/backfills",
        json!({"from": "2026-11-02", "to": "2026-11-03"}),
    );
    assert!(bf.is_object(), "{bf}");
    s.wait_run("g", "2026-11-01", "complete");
    s.wait_run("b", "none", "failed");
    s.wait_run("m", "2026-11-01", "complete");
    s.wait_run("g", "2026-11-03", "complete");

    // Reads.
    get("/api/v1/engine", "/api/v1/engine");
    assert!(get("/api/v1/graphs", "/api/v1/graphs").is_array());
    get("/api/v1/graphs/{graph}", "/api/v1/graphs/g");
    get("/api/v1/graphs/{graph}", "/api/v1/graphs/h");
    get(
        "/api/v1/graphs/{graph}/grid",
        "/api/v1/graphs/g/grid?limit=10",
    );
    get(
        "/api/v1/graphs/{graph}/backfills",
        "/api/v1/graphs/g/backfills",
    );
    get(
        "/api/v1/graphs/{graph}/backfills",
        "/api/v1/graphs/h/backfills",
    );
    assert!(get("/api/v1/graphs/{graph}/keys", "/api/v1/graphs/h/keys").is_array());
    get("/api/v1/graphs/{graph}/keys", "/api/v1/graphs/g/keys"); // 400: not keyed
    get("/api/v1/runs", "/api/v1/runs?limit=100");
    get("/api/v1/runs", "/api/v1/runs?state=failed&limit=1");
    for (g, p) in [("g", "2026-11-01"), ("b", "none"), ("m", "2026-11-01")] {
        get(
            "/api/v1/graphs/{graph}/runs/{partition}",
            &format!("/api/v1/graphs/{g}/runs/{p}"),
        );
    }
    get(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}",
        "/api/v1/graphs/g/runs/2026-11-01/nodes/a",
    );
    get(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}",
        "/api/v1/graphs/b/runs/none/nodes/call",
    );
    get(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/logs",
        "/api/v1/graphs/g/runs/2026-11-01/nodes/a/logs",
    );
    get(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/logs",
        "/api/v1/graphs/m/runs/2026-11-01/nodes/each/logs?member=1",
    );
    // A run without artifacts lists none; a name it lacks is a 404 (the
    // bytes of one are checked in tests/artifacts_api.rs).
    let none = get(
        "/api/v1/graphs/{graph}/runs/{partition}/artifacts",
        "/api/v1/graphs/g/runs/2026-11-01/artifacts?node=a",
    );
    assert_eq!(none["artifacts"], json!([]), "{none}");
    get(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/artifacts/{*name}",
        "/api/v1/graphs/g/runs/2026-11-01/nodes/a/artifacts/reports/a.html",
    );
    get("/api/v1/queue/pools", "/api/v1/queue/pools");
    assert!(get("/api/v1/queue/tickets", "/api/v1/queue/tickets?limit=5").is_array());
    let run = get(
        "/api/v1/graphs/{graph}/runs/{partition}",
        "/api/v1/graphs/g/runs/2026-11-01",
    );
    let key = run["nodes"][0]["run_id"].as_str().unwrap().to_string();
    let enc = |k: &str| k.replace('/', "%2F");
    get(
        "/api/v1/queue/tickets/{key}",
        &format!("/api/v1/queue/tickets/{}", enc(&key)),
    );
    let dead = get("/api/v1/queue/dead", "/api/v1/queue/dead?limit=10");
    assert!(get("/api/v1/breakers", "/api/v1/breakers").is_array());
    assert!(get("/api/v1/workers", "/api/v1/workers").is_array());
    assert!(get("/api/v1/assets", "/api/v1/assets").is_array());

    // Actions.
    post(
        "/api/v1/graphs/{graph}/pause",
        "/api/v1/graphs/g/pause",
        json!({}),
    );
    post(
        "/api/v1/graphs/{graph}/unpause",
        "/api/v1/graphs/g/unpause",
        json!({}),
    );
    post(
        "/api/v1/graphs/{graph}/trigger",
        "/api/v1/graphs/m/trigger",
        json!({}),
    );
    post(
        "/api/v1/graphs/{graph}/reconcile",
        "/api/v1/graphs/g/reconcile",
        json!({}),
    );
    post(
        "/api/v1/graphs/{graph}/keys/{key}/signal",
        "/api/v1/graphs/h/keys/web-1/signal",
        json!({"immediate": true}),
    );
    post(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/rerun",
        "/api/v1/graphs/g/runs/2026-11-01/nodes/c/rerun",
        json!({}),
    );
    s.wait_run("g", "2026-11-01", "complete");
    post(
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/mark",
        "/api/v1/graphs/g/runs/2026-11-02/nodes/c/mark",
        json!({"state": "succeeded"}),
    );
    // A cancel of a settled run: 409 with its answer.
    post(
        "/api/v1/graphs/{graph}/runs/{partition}/cancel",
        "/api/v1/graphs/g/runs/2026-11-03/cancel",
        json!({}),
    );
    let dead_key = dead["letters"][0]["key"]
        .as_str()
        .expect("b's failure is a dead letter")
        .to_string();
    post(
        "/api/v1/queue/dead/{key}/requeue",
        &format!("/api/v1/queue/dead/{}/requeue", enc(&dead_key)),
        json!({}),
    );
    assert!(post(
        "/api/v1/queue/dead/requeue",
        "/api/v1/queue/dead/requeue",
        json!({})
    )
    .is_array());
    post(
        "/api/v1/breakers/{target}/reset",
        "/api/v1/breakers/api/reset",
        json!({}),
    );
    assert!(post(
        "/api/v1/graphs/{graph}/runs/{partition}/clear",
        "/api/v1/graphs/g/runs/2026-11-03/clear",
        json!({}),
    )
    .is_array());
    post("/api/v1/reload", "/api/v1/reload", json!({}));
    // Errors: each is documented for its route, as the Error schema.
    get("/api/v1/graphs/{graph}", "/api/v1/graphs/nosuch");
    get("/api/v1/runs", "/api/v1/runs?limit=0");
    let wrong = http.send("DELETE", "/api/v1/graphs", None, &[]);
    c.check("get", "/api/v1/graphs", &wrong);
    let text = http.send(
        "POST",
        "/api/v1/graphs/g/runs",
        Some(b"partitions=x"),
        &[("Content-Type", "text/plain")],
    );
    c.check("post", "/api/v1/graphs/{graph}/runs", &text);
}
