//! The API document's looseness (#43 item 14), on a real `weir serve`:
//! each value the document now refuses (an empty cursor, `from` or
//! `expires`, control characters in a partition, an attempt past its
//! type, a `null` where a string is typed) is refused by its schema and by
//! the server alike, with a 400 naming the field; `/events` and
//! `/openapi.json` are described by what they are; and the CLI says why a
//! key of only dots cannot be sent instead of asking another route.

mod serve_support;

use std::time::Duration;

use serde_json::{json, Value};
use serve_support::*;

/// Whether `value` is valid under `schema` (its `$ref`s into the
/// document's components resolved).
fn valid(doc: &Value, schema: &Value, value: &Value) -> bool {
    let mut root = schema.clone();
    root["components"] = doc["components"].clone();
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&root)
        .unwrap_or_else(|e| panic!("schema {schema} does not compile: {e}"))
        .is_valid(value)
}

/// The schema of parameter `name` of `method template`.
fn param(doc: &Value, method: &str, template: &str, name: &str) -> Value {
    doc["paths"][template][method]["parameters"]
        .as_array()
        .unwrap_or_else(|| panic!("{method} {template} has no parameters"))
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{method} {template} has no parameter {name}"))["schema"]
        .clone()
}

/// The schema of body field `field` of `POST template`.
fn field(doc: &Value, template: &str, field: &str) -> Value {
    doc["paths"][template]["post"]["requestBody"]["content"]["application/json"]["schema"]
        ["properties"][field]
        .clone()
}

/// One looseness: what, its schema, a value it must refuse and one it
/// must take, the request carrying the bad value (method, path, body) and
/// the field the server's 400 must name.
type Row<'a> = (
    &'a str,
    Value,
    Value,
    Value,
    &'a str,
    &'a str,
    Option<Value>,
    &'a str,
);

/// Each looseness: the schema refuses the value (and takes a good one),
/// the server answers the request carrying it with 400 naming the field.
#[test]
fn what_the_document_refuses_the_server_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    let http = s.http();
    let doc = http.get("/api/v1/openapi.json").json();
    let logs = "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/logs";
    let part = "/api/v1/graphs/{graph}/runs/{partition}";
    let rows: Vec<Row> = vec![
        (
            "an empty run-list cursor",
            param(&doc, "get", "/api/v1/runs", "cursor"),
            json!(""),
            json!("c1"),
            "GET",
            "/api/v1/runs?cursor=",
            None,
            "cursor",
        ),
        (
            "an empty grid cursor",
            param(&doc, "get", "/api/v1/graphs/{graph}/grid", "cursor"),
            json!(""),
            json!("c1"),
            "GET",
            "/api/v1/graphs/g/grid?cursor=",
            None,
            "cursor",
        ),
        (
            "an empty dead-letter cursor",
            param(&doc, "get", "/api/v1/queue/dead", "cursor"),
            json!(""),
            json!("c1"),
            "GET",
            "/api/v1/queue/dead?cursor=",
            None,
            "cursor",
        ),
        (
            "an empty run-list from",
            param(&doc, "get", "/api/v1/runs", "from"),
            json!(""),
            json!("2026-11-01"),
            "GET",
            "/api/v1/runs?graph=g&from=",
            None,
            "from",
        ),
        (
            "an empty run-list to",
            param(&doc, "get", "/api/v1/runs", "to"),
            json!(""),
            json!("2026-11-01"),
            "GET",
            "/api/v1/runs?graph=g&to=",
            None,
            "to",
        ),
        (
            "a control character in a run-list from",
            param(&doc, "get", "/api/v1/runs", "from"),
            json!("2026-11-01\u{7}"),
            json!("2026-11-01"),
            "GET",
            "/api/v1/runs?graph=g&from=2026-11-01%07",
            None,
            "from",
        ),
        (
            "an empty backfill from",
            field(&doc, "/api/v1/graphs/{graph}/backfills", "from"),
            json!(""),
            json!("2026-11-01"),
            "POST",
            "/api/v1/graphs/g/backfills",
            Some(json!({"from": "", "to": "2026-11-02"})),
            "from",
        ),
        (
            "an empty token expiry",
            field(&doc, "/api/v1/tokens", "expires"),
            json!(""),
            json!("90d"),
            "POST",
            "/api/v1/tokens",
            Some(json!({"name": "x", "role": "viewer", "expires": ""})),
            "expires",
        ),
        (
            "a token name that is not a name",
            field(&doc, "/api/v1/tokens", "name"),
            json!("a b"),
            json!("grafana"),
            "POST",
            "/api/v1/tokens",
            Some(json!({"name": "a b", "role": "viewer"})),
            "name",
        ),
        (
            "a control character in a path's partition",
            param(&doc, "get", part, "partition"),
            json!("2026-11-01\u{1}"),
            json!("2026-11-01"),
            "GET",
            "/api/v1/graphs/g/runs/2026-11-01%01",
            None,
            "partition",
        ),
        (
            "a control character in a started partition",
            field(&doc, "/api/v1/graphs/{graph}/runs", "partitions"),
            json!(["2026-11-01\u{1b}"]),
            json!(["2026-11-01"]),
            "POST",
            "/api/v1/graphs/g/runs",
            Some(json!({"partitions": ["2026-11-01\u{1b}"]})),
            "partition",
        ),
        (
            "an attempt past its type",
            param(&doc, "get", logs, "attempt"),
            json!(4_294_967_296u64),
            json!(4_294_967_295u64),
            "GET",
            "/api/v1/graphs/g/runs/2026-11-01/nodes/a/logs?attempt=4294967296",
            None,
            "attempt",
        ),
        (
            "a null partition to reconcile",
            field(&doc, "/api/v1/graphs/{graph}/reconcile", "partition"),
            json!(null),
            json!("2026-11-01"),
            "POST",
            "/api/v1/graphs/g/reconcile",
            Some(json!({"partition": null})),
            "partition",
        ),
        (
            "an empty partition to reconcile",
            field(&doc, "/api/v1/graphs/{graph}/reconcile", "partition"),
            json!(""),
            json!("2026-11-01"),
            "POST",
            "/api/v1/graphs/g/reconcile",
            Some(json!({"partition": ""})),
            "partition",
        ),
        (
            "a null in a signal",
            field(&doc, "/api/v1/graphs/{graph}/keys/{key}/signal", "add"),
            json!(null),
            json!(true),
            "POST",
            "/api/v1/graphs/g/keys/k1/signal",
            Some(json!({"add": null})),
            "add",
        ),
    ];
    for (i, (what, schema, bad, good, method, path, body, named)) in rows.iter().enumerate() {
        assert!(
            !valid(&doc, schema, bad),
            "#{i} {what}: the document takes {bad} ({schema})"
        );
        assert!(
            valid(&doc, schema, good),
            "#{i} {what}: the document refuses the good {good} ({schema})"
        );
        let bytes = body.as_ref().map(|b| b.to_string().into_bytes());
        let a = http.send(method, path, bytes.as_deref(), &[]);
        assert_eq!(a.status, 400, "#{i} {what}: {method} {path}: {a:?}");
        let message = a.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(
            message.contains(named),
            "#{i} {what}: the error names {named}: {message}"
        );
    }
}

/// `/events` is described as a stream of Server-Sent Events, and a real
/// capture of it matches; `/openapi.json` as an OpenAPI 3.1 document, and
/// the served one matches while an empty object does not.
#[test]
fn streams_and_the_document_are_described_by_what_they_are() {
    let (_dir, s) = served("g");
    let http = s.http();
    let doc = http.get("/api/v1/openapi.json").json();
    let ok = |path: &str, media: &str| {
        doc["paths"][path]["get"]["responses"]["200"]["content"][media]["schema"].clone()
    };
    let events = ok("/api/v1/events", "text/event-stream");
    assert_ne!(events, json!({"type": "string"}), "not just any string");
    assert!(events["pattern"].is_string(), "{events}");
    let captured = capture_events(&s, Duration::from_secs(20));
    assert!(captured.contains("event: run_settled"), "{captured}");
    assert!(
        valid(&doc, &events, &json!(captured)),
        "a real stream matches its schema: {captured:?}"
    );
    assert!(!valid(&doc, &events, &json!("<html>not a stream</html>")));

    let document = ok("/api/v1/openapi.json", "application/json");
    assert_ne!(document, json!({"type": "object"}), "not just any object");
    assert!(valid(&doc, &document, &doc), "the served document matches");
    for bad in [
        json!({}),
        json!({"openapi": "3.1.0", "info": {}, "paths": {}}),
        json!({"openapi": "2.0", "info": {"title": "t", "version": "1"}, "paths": {}}),
    ] {
        assert!(!valid(&doc, &document, &bad), "{bad}");
    }
}

/// The raw text of `/api/v1/events` while a run starts and settles, cut at
/// the last whole event.
fn capture_events(s: &Served, timeout: Duration) -> String {
    use std::io::{Read, Write};
    let http = s.http();
    let mut c = std::net::TcpStream::connect(&http.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        c,
        "GET /api/v1/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\n\r\n",
        http.addr, s.token
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    s.ok(&["start", "g", "2026-11-01"]);
    let t0 = std::time::Instant::now();
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    while t0.elapsed() < timeout {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
        if String::from_utf8_lossy(&raw).contains("event: run_settled") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (_, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let body = dechunk(body);
    match body.rfind("\n\n") {
        Some(at) => body[..at + 2].to_string(),
        None => String::new(),
    }
}

/// A key of only dots cannot travel in a URL (every client resolves it as
/// a folder step): the CLI says so, naming the key, instead of asking
/// another route and printing its "no route".
#[test]
fn a_key_of_only_dots_is_refused_by_the_cli_with_its_reason() {
    let (_dir, s) = served("g");
    for key in ["..", "."] {
        let o = s.cli(&["signal", "--add", "g", key]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{key}: {err}");
        assert!(
            err.contains(&format!("{key:?}")) && err.contains("only dots"),
            "{key}: {err}"
        );
        assert!(!err.contains("no route"), "{key}: {err}");
    }
    // A key with dots and more goes through, escaped (the engine answers
    // for itself: g is not keyed).
    let o = s.cli(&["signal", "--add", "g", "..x"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("no route"), "{err}");
    assert!(err.contains("keyed"), "{err}");
}
