//! Run traces against a real OTLP/HTTP receiver on 127.0.0.1: a
//! `weir serve --otlp-endpoint` runs a 3-node graph whose middle node
//! fails once and is retried, and the receiver (an axum server decoding
//! the protobuf with `opentelemetry-proto`) gets the span tree: the run,
//! three nodes under it, four attempts under their nodes, the retry as an
//! event, and the `TRACEPARENT` the command saw naming its attempt's span.

mod cluster_support;
mod serve_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serve_support::*;

type Received = Arc<Mutex<Vec<(String, Span)>>>;

/// An OTLP/HTTP receiver: every span of every `POST /v1/traces`, with the
/// service name of its resource.
async fn receiver() -> (String, Received) {
    let got: Received = Arc::default();
    let state = got.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |body: axum::body::Bytes| {
            let got = state.clone();
            async move {
                let req = ExportTraceServiceRequest::decode(body).expect("an OTLP protobuf body");
                for rs in req.resource_spans {
                    let service = rs
                        .resource
                        .iter()
                        .flat_map(|r| r.attributes.iter())
                        .find(|kv| kv.key == "service.name")
                        .and_then(|kv| kv.value.as_ref())
                        .map(|v| format!("{:?}", v.value))
                        .unwrap_or_default();
                    for ss in rs.scope_spans {
                        for s in ss.spans {
                            got.lock().unwrap().push((service.clone(), s));
                        }
                    }
                }
                (
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (url, got)
}

fn attr(s: &Span, key: &str) -> Option<String> {
    s.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| match &v.value {
            Some(opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s)) => {
                Some(s.clone())
            }
            _ => None,
        })
}

/// The spans as an indented tree (printed for the reader of the test's
/// output): name, duration, events, status.
fn tree(spans: &[Span]) -> String {
    fn walk(spans: &[Span], parent: &[u8], depth: usize, out: &mut String) {
        let mut children: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == parent)
            .collect();
        children.sort_by_key(|s| s.start_time_unix_nano);
        for s in children {
            let ms = (s.end_time_unix_nano - s.start_time_unix_nano) as f64 / 1e6;
            let events: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
            let error = s
                .status
                .as_ref()
                .filter(|st| st.code == 2)
                .map(|st| format!(" error: {}", st.message));
            out.push_str(&format!(
                "{}{} ({ms:.1} ms){}{}\n",
                "  ".repeat(depth),
                s.name,
                if events.is_empty() {
                    String::new()
                } else {
                    format!(" events: {}", events.join(", "))
                },
                error.unwrap_or_default()
            ));
            walk(spans, &s.span_id, depth + 1, out);
        }
    }
    let mut out = String::new();
    walk(spans, &[], 0, &mut out);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const DEF: &str = r#"name = "t"
partitioning = "none"
[pools]
default = 2

[[nodes]]
name = "a"
command = ["sh", "-c", "true"]

[[nodes]]
name = "b"
upstreams = ["a"]
retry = { attempts = 2, initial = "10ms" }
command = ["sh", "-c", "echo \"$WEIR_ATTEMPT $TRACEPARENT\" >> traceparents.log; if [ ! -e tried ]; then touch tried; echo boom >&2; exit 1; fi"]

[[nodes]]
name = "c"
upstreams = ["b"]
command = ["sh", "-c", "true"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_a_retry_exports_its_span_tree() {
    let (url, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "t", DEF);
    let data = dir.path().join("data");
    let s = tokio::task::spawn_blocking({
        let (defs, data, url) = (defs.clone(), data.clone(), url.clone());
        move || start(&["serve", "--otlp-endpoint", &url], &defs, &data)
    })
    .await
    .unwrap();
    let (spans, s) = tokio::task::spawn_blocking({
        let got = got.clone();
        move || {
            s.ok(&["start", "t", "none"]);
            s.wait_run("t", "none", "complete");
            let spans = wait_for("8 spans at the receiver", Duration::from_secs(30), || {
                let g = got.lock().unwrap();
                (g.len() >= 8).then(|| g.clone())
            });
            (spans, s)
        }
    })
    .await
    .unwrap();
    assert_eq!(spans.len(), 8, "{spans:#?}");
    eprintln!(
        "{}",
        tree(&spans.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>())
    );
    assert!(
        spans.iter().all(|(svc, _)| svc.contains("weir")),
        "service.name"
    );
    let spans: Vec<Span> = spans.into_iter().map(|(_, s)| s).collect();
    let trace = spans[0].trace_id.clone();
    assert!(spans.iter().all(|s| s.trace_id == trace), "one trace");
    let by_name = |n: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == n).collect() };
    let run = by_name("run t none");
    assert_eq!(run.len(), 1);
    let run = run[0];
    assert!(run.parent_span_id.is_empty(), "the run's span is the root");
    assert_eq!(attr(run, "weir.state").as_deref(), Some("complete"));
    let mut nodes = Vec::new();
    for n in ["a", "b", "c"] {
        let found = by_name(&format!("node {n}"));
        assert_eq!(found.len(), 1, "node {n}");
        assert_eq!(
            found[0].parent_span_id, run.span_id,
            "node {n} under the run"
        );
        assert!(found[0].start_time_unix_nano >= run.start_time_unix_nano);
        assert!(found[0].end_time_unix_nano <= run.end_time_unix_nano);
        nodes.push(found[0]);
    }
    // Attempts under their nodes: b has two, the first failed.
    let attempts_of = |node: &Span| -> Vec<&Span> {
        let mut a: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == node.span_id)
            .collect();
        a.sort_by_key(|s| s.start_time_unix_nano);
        a
    };
    assert_eq!(attempts_of(nodes[0]).len(), 1);
    assert_eq!(attempts_of(nodes[2]).len(), 1);
    let b = attempts_of(nodes[1]);
    assert_eq!(
        b.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["attempt 1", "attempt 2"]
    );
    let code = |s: &Span| s.status.as_ref().map_or(0, |st| st.code);
    assert_eq!(code(b[0]), 2, "the failed attempt has an error status");
    assert_ne!(code(b[1]), 2);
    assert_eq!(attr(b[0], "process.exit.code").as_deref(), Some("1"));
    // The retry, the queue wait: events on b's span.
    let events: Vec<&str> = nodes[1].events.iter().map(|e| e.name.as_str()).collect();
    assert!(
        events.contains(&"retry") && events.contains(&"queued"),
        "{events:?}"
    );
    let retry = nodes[1].events.iter().find(|e| e.name == "retry").unwrap();
    assert_eq!(retry.time_unix_nano, b[1].start_time_unix_nano);
    // The command saw its attempt's span as TRACEPARENT.
    let seen = std::fs::read_to_string(defs.join("traceparents.log")).unwrap();
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(lines.len(), 2, "{seen}");
    for (line, span) in lines.iter().zip(&b) {
        assert_eq!(
            *line,
            format!(
                "{} 00-{}-{}-01",
                &span.name[8..],
                hex(&trace),
                hex(&span.span_id)
            ),
            "{seen}"
        );
    }
    // A rerun of c settles the run again: the receiver gets c's new
    // instance and its attempt, and the run's span again (same id), but
    // no span it had already.
    let first: Vec<Vec<u8>> = spans.iter().map(|s| s.span_id.clone()).collect();
    let again = tokio::task::spawn_blocking({
        let got = got.clone();
        move || {
            s.ok(&["rerun", "t", "none", "c"]);
            wait_for("11 spans at the receiver", Duration::from_secs(30), || {
                let g = got.lock().unwrap();
                (g.len() >= 11).then(|| g[8..].iter().map(|(_, s)| s.clone()).collect::<Vec<_>>())
            })
        }
    })
    .await
    .unwrap();
    let mut names: Vec<&str> = again.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["attempt 1", "node c", "run t none"], "{again:#?}");
    for sp in &again {
        assert_eq!(sp.trace_id, trace);
        assert_eq!(
            first.contains(&sp.span_id),
            sp.name == "run t none",
            "{}: only the run's span is sent twice",
            sp.name
        );
    }
    assert_eq!(got.lock().unwrap().len(), 11);
}

/// A mapped node's members are spans under the node, each with its
/// attempt, and each member's command sees its own attempt's span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mapped_nodes_members_are_spans_under_it() {
    let (url, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "m",
        r#"name = "m"
partitioning = "none"
[pools]
default = 2

[[nodes]]
name = "each"
items = ["one", "two"]
command = ["sh", "-c", "echo \"$1 $TRACEPARENT\" >> traceparents.log", "sh", "{item}"]
"#,
    );
    let data = dir.path().join("data");
    let spans = tokio::task::spawn_blocking({
        let (defs, data, url, got) = (defs.clone(), data.clone(), url.clone(), got.clone());
        move || {
            let s = start(&["serve", "--otlp-endpoint", &url], &defs, &data);
            s.ok(&["start", "m", "none"]);
            s.wait_run("m", "none", "complete");
            wait_for("6 spans", Duration::from_secs(30), || {
                let g = got.lock().unwrap();
                (g.len() >= 6).then(|| g.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>())
            })
        }
    })
    .await
    .unwrap();
    eprintln!("{}", tree(&spans));
    assert_eq!(spans.len(), 6, "{}", tree(&spans));
    let node = spans.iter().find(|s| s.name == "node each").unwrap();
    let mut members: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id == node.span_id)
        .collect();
    members.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(
        members.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["member 0", "member 1"]
    );
    let seen = std::fs::read_to_string(defs.join("traceparents.log")).unwrap();
    for (m, item) in members.iter().zip(["one", "two"]) {
        let shown = attr(m, "weir.item").unwrap_or_default();
        assert!(shown.contains(item), "{}: item {shown:?}", m.name);
        let attempts: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id == m.span_id)
            .collect();
        assert_eq!(attempts.len(), 1, "{}", m.name);
        let want = format!(
            "{item} 00-{}-{}-01",
            hex(&node.trace_id),
            hex(&attempts[0].span_id)
        );
        assert!(seen.lines().any(|l| l == want), "{want} not in\n{seen}");
    }
}

/// `weir run --until-idle` exits right after its last run settles: that
/// run's trace is sent before it exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weir_run_sends_its_last_runs_trace_before_it_exits() {
    let (url, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    let file = write_def(
        &defs,
        "one",
        "name = \"one\"\npartitioning = \"none\"\n[[nodes]]\nname = \"only\"\ncommand = [\"true\"]\n",
    );
    let data = dir.path().join("data");
    let out = tokio::task::spawn_blocking(move || {
        weir()
            .arg("run")
            .arg(&file)
            .args([
                "--partition",
                "none",
                "--until-idle",
                "--otlp-endpoint",
                &url,
                "--data",
            ])
            .arg(&data)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans: Vec<Span> = got.lock().unwrap().iter().map(|(_, s)| s.clone()).collect();
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["attempt 1", "node only", "run one none"],
        "{}",
        tree(&spans)
    );
}

/// The span context crosses processes: a node run by a worker process
/// gets its attempt's span as `TRACEPARENT` there, and the node's span
/// names the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_on_a_worker_joins_its_attempts_span() {
    let (url, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let defs = root.join("defs");
    let log = root.join("traceparent.log");
    write_def(
        &defs,
        "w",
        &format!(
            "name = \"w\"\npartitioning = \"none\"\n[pools]\ndefault = 2\n[[nodes]]\nname = \"remote\"\ncommand = [\"sh\", \"-c\", \"echo $TRACEPARENT >> {}\"]\n",
            log.display()
        ),
    );
    let spans = tokio::task::spawn_blocking(move || {
        let c = cluster_support::start(
            &root,
            &defs,
            cluster_support::free_port(),
            5_000,
            &["--otlp-endpoint", &url],
        );
        let _w = c.worker("w1", &["default=2"]);
        c.wait_joined(&["w1"]);
        c.served.ok(&["start", "w", "none"]);
        c.served.wait_run("w", "none", "complete");
        wait_for("3 spans", Duration::from_secs(30), || {
            let g = got.lock().unwrap();
            (g.len() >= 3).then(|| g.iter().map(|(_, s)| s.clone()).collect::<Vec<_>>())
        })
    })
    .await
    .unwrap();
    let node = spans.iter().find(|s| s.name == "node remote").unwrap();
    assert_eq!(
        attr(node, "weir.worker").as_deref(),
        Some("w1"),
        "{}",
        tree(&spans)
    );
    let attempt = spans
        .iter()
        .find(|s| s.parent_span_id == node.span_id)
        .unwrap();
    let seen = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        seen.trim(),
        format!("00-{}-{}-01", hex(&node.trace_id), hex(&attempt.span_id))
    );
}
