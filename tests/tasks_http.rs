//! HTTP nodes against a local server: the body is the output; 5xx retries;
//! 429 waits for its Retry-After; 404 fails without retry; secrets come
//! from the engine's environment and never reach the store; templates of
//! params, windows and upstream outputs fill the URL (percent-encoded),
//! headers and body.

mod serve_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use serde_json::{json, Value};
use serve_support::{weir, write_def};

#[derive(Clone, Default)]
struct Hits {
    flaky: Arc<AtomicUsize>,
    busy: Arc<Mutex<Vec<Instant>>>,
    missing: Arc<AtomicUsize>,
}

async fn serve() -> (String, Hits) {
    let hits = Hits::default();
    let app = axum::Router::new()
        .route(
            "/ok",
            get(
                |Query(q): Query<std::collections::BTreeMap<String, String>>| async move {
                    axum::Json(json!({"ok": true, "p": q.get("p")}))
                },
            ),
        )
        .route(
            "/flaky",
            get(|State(h): State<Hits>| async move {
                if h.flaky.fetch_add(1, Ordering::SeqCst) == 0 {
                    (StatusCode::INTERNAL_SERVER_ERROR, "try again").into_response()
                } else {
                    "recovered".into_response()
                }
            }),
        )
        .route(
            "/busy",
            get(|State(h): State<Hits>| async move {
                let mut v = h.busy.lock().unwrap();
                v.push(Instant::now());
                if v.len() == 1 {
                    (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "2")],
                        "slow down",
                    )
                        .into_response()
                } else {
                    "served".into_response()
                }
            }),
        )
        .route(
            "/missing",
            get(|State(h): State<Hits>| async move {
                h.missing.fetch_add(1, Ordering::SeqCst);
                (StatusCode::NOT_FOUND, "no such thing").into_response()
            }),
        )
        .route(
            "/secret",
            get(|headers: HeaderMap| async move {
                let ok = headers
                    .get("authorization")
                    .is_some_and(|v| v == "Bearer s3cret-value-42");
                if ok {
                    (StatusCode::OK, "let in").into_response()
                } else {
                    (StatusCode::UNAUTHORIZED, "who are you").into_response()
                }
            }),
        )
        .route(
            "/echo/{*rest}",
            axum::routing::put(
                |uri: axum::http::Uri, headers: HeaderMap, body: String| async move {
                    axum::Json(json!({
                        "uri": uri.to_string(),
                        "count": headers.get("x-count").and_then(|v| v.to_str().ok()),
                        "traceparent": headers.get("traceparent").and_then(|v| v.to_str().ok()),
                        "body": body,
                    }))
                },
            ),
        )
        .with_state(hits.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (format!("http://{addr}"), hits)
}

fn node(name: &str, http: &str, extra: &str) -> String {
    format!("\n[[nodes]]\nname = \"{name}\"\nhttp = {http}\n{extra}\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_nodes_retry_wait_fail_and_keep_secrets_out_of_the_store() {
    let (base, hits) = serve().await;
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let mut d = String::from("name = \"calls\"\npartitioning = \"daily\"\n");
    let fast = "retry = { attempts = 3, initial = \"100ms\" }";
    d += &node(
        "ok",
        &format!("{{ url = \"{base}/ok?p={{partition}}\" }}"),
        fast,
    );
    d += &node("flaky", &format!("{{ url = \"{base}/flaky\" }}"), fast);
    d += &node("busy", &format!("{{ url = \"{base}/busy\" }}"), fast);
    d += &node("missing", &format!("{{ url = \"{base}/missing\" }}"), fast);
    d += &node(
        "secret",
        &format!(
            "{{ url = \"{base}/secret\", headers = {{ Authorization = \"Bearer ${{env:WEIR_TEST_SECRET}}\" }} }}"
        ),
        fast,
    );
    let file = write_def(&defs, "calls", &d);
    let data = tmp.path().join("data");
    let out = tokio::task::spawn_blocking({
        let (file, data) = (file.clone(), data.clone());
        move || {
            weir()
                .args(["run", "--until-idle", "--partition", "2026-11-01", "--data"])
                .arg(&data)
                .arg(&file)
                .env("WEIR_TEST_SECRET", "s3cret-value-42")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // missing fails: the run fails.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let o = weir()
        .args(["status", "calls", "2026-11-01", "--json", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    let n = |name: &str| -> Value {
        run["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .unwrap()
            .clone()
    };
    // The body is the output; {partition} reached the query.
    assert_eq!(n("ok")["state"], "succeeded");
    assert_eq!(n("ok")["output"], json!({"ok": true, "p": "2026-11-01"}));
    // A 500, then a 200: retried.
    assert_eq!(n("flaky")["state"], "succeeded");
    assert_eq!(n("flaky")["attempts"], 2);
    assert_eq!(n("flaky")["output_text"], "recovered");
    // A 429 with Retry-After: 2 — the next attempt waited for it, not for
    // the policy's 100 ms.
    assert_eq!(n("busy")["state"], "succeeded");
    let busy = hits.busy.lock().unwrap().clone();
    assert_eq!(busy.len(), 2);
    let waited = busy[1] - busy[0];
    assert!(
        waited.as_millis() >= 1_900,
        "the retry came {waited:?} after the 429"
    );
    // A 404 fails without retry.
    assert_eq!(n("missing")["state"], "failed");
    assert_eq!(n("missing")["attempts"], 1);
    assert_eq!(hits.missing.load(Ordering::SeqCst), 1);
    let err = n("missing")["error"].as_str().unwrap().to_string();
    assert!(
        err.contains("status 404") && err.contains("no such thing"),
        "{err}"
    );
    // The secret came from the environment, and no file of the data
    // directory holds it.
    assert_eq!(n("secret")["state"], "succeeded", "{run}");
    assert_eq!(n("secret")["output_text"], "let in");
    let mut stack = vec![data.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !bytes.windows(15).any(|w| w == b"s3cret-value-42"),
                    "{} holds the secret",
                    p.display()
                );
            }
        }
    }
    // Each attempt has a log (#31 item 7): the request as written, the
    // status and timing, the body's head; credentials left out.
    let logs = |node: &str| {
        let o = weir()
            .args(["logs", "calls", "2026-11-01", node, "--data"])
            .arg(&data)
            .output()
            .unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let ok = logs("ok");
    assert!(
        ok.contains(&format!("> GET {base}/ok?p={{partition}}"))
            && ok.contains("< 200 in ")
            && ok.contains("\"ok\":true"),
        "{ok}"
    );
    let secret = logs("secret");
    assert!(
        secret.contains("> Authorization: (not logged)") && !secret.contains("s3cret"),
        "{secret}"
    );
    let missing = logs("missing");
    assert!(
        missing.contains("< 404 in ") && missing.contains("status 404"),
        "{missing}"
    );
}

#[test]
fn validate_names_each_fault_of_an_http_node() {
    let tmp = tempfile::tempdir().unwrap();
    let d = "name = \"bad\"\n\n[[nodes]]\nname = \"a\"\nhttp = { method = \"G T\", url = \"ftp://x/\", expect = [300, 200] }\n\n[[nodes]]\nname = \"b\"\nhttp = { url = \"https://x/\" }\ncommand = [\"true\"]\n";
    let file = write_def(tmp.path(), "bad", d);
    let o = weir().arg("validate").arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_ne!(o.status.code(), Some(0), "{err}");
    for want in [
        "method \"G T\" is not an HTTP method",
        "the scheme is ftp",
        "expect [300, 200]",
        "give one of command, task or http",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert!(err.contains("bad.toml:"), "names the file and line: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn templates_fill_the_url_headers_and_body() {
    let (base, _) = serve().await;
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let mut d = String::from(
        "name = \"hx\"\npartitioning = \"daily\"\n\n[params]\nbucket = \"orders 2026\"\n",
    );
    // A command node whose JSON output the call reads.
    d += "\n[[nodes]]\nname = \"src\"\n";
    d += r#"command = ["sh", "-c", "echo '{\"name\": \"a b/c\", \"count\": 7}' > \"$WEIR_OUTPUT\""]"#;
    d += "\n";
    d += &node(
        "put",
        &format!(
            "{{ method = \"PUT\", url = \"{base}/echo/{{params.bucket}}/{{upstream.src.output.name}}?from={{partition.start}}\", headers = {{ X-Count = \"{{upstream.src.output.count}}\" }}, body = \"{{upstream.src.output}}\" }}"
        ),
        "upstreams = [\"src\"]",
    );
    let file = write_def(&defs, "hx", &d);
    let data = tmp.path().join("data");
    let out = tokio::task::spawn_blocking({
        let (file, data) = (file.clone(), data.clone());
        move || {
            weir()
                .args(["run", "--until-idle", "--partition", "2026-11-01", "--data"])
                .arg(&data)
                .arg(&file)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let o = weir()
        .args(["status", "hx", "2026-11-01", "--json", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let run: Value = serde_json::from_slice(&o.stdout).unwrap();
    let put = run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "put")
        .unwrap()
        .clone();
    assert_eq!(
        put["output"],
        json!({
            "uri": "/echo/orders%202026/a%20b%2Fc?from=2026-11-01T00%3A00%3A00Z",
            "count": "7",
            // The attempt's span in the run's trace.
            "traceparent": weir::trace::ids::traceparent("hx", "2026-11-01", "hx/2026-11-01/put/0", 1),
            "body": "{\"name\": \"a b/c\", \"count\": 7}",
        }),
        "{run}"
    );
}
