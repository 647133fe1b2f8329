//! `weir trace GRAPH PARTITION` prints a settled run's span tree without a
//! collector — from the store when no engine runs, and from a running
//! engine — and an OTLP transport weir does not speak is refused at start,
//! naming the variable that asked for it.

mod serve_support;

use std::path::Path;

use serve_support::{start, weir};

fn etl() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/etl")
}

fn trace(data: &Path) -> String {
    let o = weir()
        .args(["trace", "etl", "2026-11-01", "--data"])
        .arg(data)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    String::from_utf8(o.stdout).unwrap()
}

/// The tree's shape: each span's name at its depth (times left out).
fn shape(tree: &str) -> Vec<String> {
    tree.lines()
        .skip(1)
        .map(|l| l.split("  +").next().unwrap().to_string())
        .collect()
}

#[test]
fn a_runs_span_tree_prints_from_the_store_and_from_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let o = weir()
        .arg("run")
        .arg(etl())
        .arg("--data")
        .arg(&data)
        .args([
            "--partition",
            "2026-11-01",
            "--until-idle",
            "--durability",
            "flush",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let offline = trace(&data);
    let lines = shape(&offline);
    assert_eq!(lines[0], "  run etl 2026-11-01", "{offline}");
    for node in ["extract", "clean", "enrich", "aggregate", "load", "report"] {
        assert!(
            lines.contains(&format!("    node {node}")),
            "{node}: {offline}"
        );
    }
    // extract's source fails each first try: two attempts, the first with
    // its error, the retry an event of the node's span.
    let extract = offline
        .lines()
        .find(|l| l.trim_start().starts_with("node extract"))
        .unwrap();
    assert!(extract.contains("[retry weir.attempt=2"), "{extract}");
    assert!(offline.contains("      attempt 1  +") && offline.contains("error: node extract"));
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.trim_start().starts_with("attempt"))
            .count(),
        7
    );
    // The same tree through a running engine's API.
    let served = start(&["serve"], &etl(), &data);
    let online = trace(&data);
    assert_eq!(shape(&online), lines, "{online}");
    drop(served);
    // No run there yet: exit 2, saying when a trace is made.
    let o = weir()
        .args(["trace", "etl", "2026-11-05", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("settles"));
}

#[test]
fn an_otlp_transport_weir_does_not_speak_is_refused_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let o = weir()
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .arg("run")
        .arg(etl())
        .arg("--data")
        .arg(dir.path().join("data"))
        .args([
            "--partition",
            "2026-11-01",
            "--until-idle",
            "--otlp-endpoint",
            "http://127.0.0.1:4317",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_PROTOCOL=\"grpc\""),
        "{err}"
    );
}
