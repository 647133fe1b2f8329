//! The audit log's gaps (#43 item 10), on a real `weir serve`: a changing
//! request no route or method takes is recorded when its token is valid; a
//! secret in a query string or quoted by an error text is left out; and a
//! caller's refusals are written within a budget, the rest counted.

mod serve_support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_support::*;
use weir::serve::access::refusals::{AUDIT_REFUSALS_BURST, AUDIT_REFUSAL_REFILL_MS};

fn audit(s: &Served) -> Vec<Value> {
    s.http()
        .get("/api/v1/audit")
        .json()
        .as_array()
        .unwrap()
        .clone()
}

/// A POST to no route (404) and a DELETE of a route that takes only GET
/// (405), with a valid token, are in the log, naming the caller; the same
/// without a token, and a GET to no route (it changes nothing), are not.
#[test]
fn unrouted_changing_requests_with_a_valid_token_are_recorded() {
    let (_dir, s) = served("g");
    let op = s.token("oncall", "operator", None);
    let mut anon = s.http();
    anon.token = None;
    // (client, method, path, want status, recorded)
    let cases = [
        (s.http_as(&op), "POST", "/api/v1/nope", 404, true),
        (s.http_as(&op), "DELETE", "/api/v1/graphs", 405, true),
        (s.http_as(&op), "PUT", "/nope/at/all?x=1", 404, true),
        (s.http_as(&op), "GET", "/api/v1/nope", 404, false),
        (anon, "POST", "/api/v1/unknown-anon", 404, false),
    ];
    for (i, (client, method, path, status, _)) in cases.iter().enumerate() {
        let a = client.send(method, path, Some(b"{}"), &[]);
        assert_eq!(a.status, *status, "#{i}: {method} {path}: {a:?}");
    }
    let log = audit(&s);
    let mine: Vec<&Value> = log.iter().filter(|e| e["who"] == "oncall").collect();
    let want: Vec<(&str, &str, u16)> = cases
        .iter()
        .filter(|c| c.4)
        .map(|c| (c.1, c.2, c.3))
        .collect();
    assert_eq!(mine.len(), want.len(), "{mine:#?}");
    for (i, (e, (method, path, status))) in mine.iter().zip(want).enumerate() {
        assert_eq!(e["method"], method, "#{i}: {e}");
        assert_eq!(e["path"], path, "#{i}: {e}");
        assert_eq!(e["status"], status, "#{i}: {e}");
        assert_eq!(e["outcome"], "refused", "#{i}: {e}");
        assert_eq!(e["route"], "", "#{i}: no route: {e}");
        assert!(
            e["error"]
                .as_str()
                .unwrap()
                .contains(path.split('?').next().unwrap()),
            "#{i}: the error names the path: {e}"
        );
    }
    assert!(
        !log.iter().any(|e| e["path"] == "/api/v1/unknown-anon"),
        "a request naming nobody is not recorded: {log:#?}"
    );
}

/// `?password=…` and a secret body field quoted back by the error text
/// (serde's `invalid type: integer `12345678``) stay out of the log.
#[test]
fn secrets_in_query_strings_and_error_texts_are_left_out() {
    let (_dir, s) = served("g");
    let http = s.http();
    let a = http.send(
        "POST",
        "/api/v1/graphs/g/pause?password=hunter2hunter2&api_token=t0k3n",
        Some(b"{}"),
        &[],
    );
    assert_eq!(a.status, 200, "{a:?}");
    let a = http.post(
        "/api/v1/graphs/g/runs",
        &json!({"partitions": ["2026-11-01"], "params": {"secret_stuff": 12345678}}),
    );
    assert_eq!(a.status, 400, "{a:?}");
    assert!(
        a.body.contains("12345678"),
        "the caller is told its own value: {a:?}"
    );
    let a = http.post(
        "/api/v1/graphs/g/runs",
        &json!({"partitions": ["2026-11-01"], "params": {"db_password": ["sw0rdfish"]}}),
    );
    assert_eq!(a.status, 400, "{a:?}");
    // And an unrouted one.
    let a = http.send("POST", "/api/v1/nope?secret=opensesame", None, &[]);
    assert_eq!(a.status, 404, "{a:?}");
    let log = audit(&s);
    let text = serde_json::to_string(&log).unwrap();
    for secret in [
        "hunter2hunter2",
        "t0k3n",
        "12345678",
        "sw0rdfish",
        "opensesame",
    ] {
        assert!(!text.contains(secret), "{secret} reached the log: {log:#?}");
    }
    assert_eq!(
        log[0]["path"], "/api/v1/graphs/g/pause?password=(left out)&api_token=(left out)",
        "{log:#?}"
    );
    assert!(
        log[1]["error"]
            .as_str()
            .unwrap()
            .contains("params.secret_stuff: invalid type: integer `(left out)`"),
        "the error still says what was wrong: {}",
        log[1]
    );
}

/// A viewer posting where it may not, 300 times as fast as it can: the
/// log takes the burst and one more per refill, the rest are counted; the
/// next refusal written after a pause carries the count, so written and
/// counted add up to every refusal. `weir audit` says so, and the metric
/// counts the dropped.
#[test]
fn refusals_are_written_within_a_budget_and_the_rest_counted() {
    let (_dir, s) = served("g");
    let viewer = s.token("dash", "viewer", None);
    let http = s.http_as(&viewer);
    const SENT: usize = 300;
    let t0 = Instant::now();
    for i in 0..SENT {
        let a = http.send("POST", "/api/v1/graphs/g/pause", Some(b"{}"), &[]);
        assert_eq!(a.status, 403, "#{i}: {a:?}");
    }
    let took_ms = t0.elapsed().as_millis() as u64;
    // A pause refills the bucket: the next refusal is written.
    std::thread::sleep(Duration::from_millis(AUDIT_REFUSAL_REFILL_MS + 200));
    let a = http.send("POST", "/api/v1/graphs/g/pause", Some(b"{}"), &[]);
    assert_eq!(a.status, 403, "{a:?}");
    let log = audit(&s);
    let refused: Vec<&Value> = log.iter().filter(|e| e["who"] == "dash").collect();
    let written = refused.len() as u64;
    let counted: u64 = refused
        .iter()
        .map(|e| e["refusals_dropped"].as_u64().unwrap())
        .sum();
    assert_eq!(
        written + counted,
        SENT as u64 + 1,
        "every refusal is written or counted: {written} written, {counted} counted"
    );
    let ceiling = u64::from(AUDIT_REFUSALS_BURST) + took_ms / AUDIT_REFUSAL_REFILL_MS + 2;
    assert!(
        written <= ceiling,
        "{written} entries for {SENT} refusals in {took_ms} ms (at most {ceiling})"
    );
    assert!(
        refused
            .iter()
            .all(|e| e["status"] == 403 && e["outcome"] == "refused"),
        "{refused:#?}"
    );
    let last = refused.last().unwrap();
    assert!(
        last["refusals_dropped"].as_u64().unwrap() > 0,
        "the refusal after the pause carries the count: {last}"
    );
    let table = s.ok(&["audit", "--who", "dash"]);
    assert!(
        table.contains("more refused before, not logged"),
        "weir audit says so: {table}"
    );
    let metrics = s.http().get("/metrics").body;
    let dropped: u64 = metrics
        .lines()
        .find(|l| l.starts_with("weir_audit_refusals_dropped_total") && l.contains("who=\"dash\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no dropped count for dash in /metrics:\n{metrics}"));
    assert_eq!(dropped, counted, "the metric counts the dropped");
    // Another caller's refusals are not held back by dash's.
    let other = s.token("wall", "viewer", None);
    let a = s
        .http_as(&other)
        .send("POST", "/api/v1/graphs/g/pause", Some(b"{}"), &[]);
    assert_eq!(a.status, 403);
    let log = audit(&s);
    let wall: Vec<&Value> = log.iter().filter(|e| e["who"] == "wall").collect();
    assert_eq!(wall.len(), 1, "{wall:#?}");
    assert_eq!(wall[0]["refusals_dropped"], 0);
}
