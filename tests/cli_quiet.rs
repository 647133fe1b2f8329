//! `weir run` is quiet by default: the ETL example (whose source fails
//! each day's first try, so every run retries) prints its summary and no
//! log line; `-v` shows each state change, every record on one line.

use std::path::Path;
use std::process::Command;

fn run(data: &Path, extra: &[&str]) -> (String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .env_remove("RUST_LOG")
        .arg("run")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/etl"))
        .arg("--data")
        .arg(data)
        .args([
            "--backfill",
            "2026-11-01..2026-11-02",
            "--until-idle",
            "--durability",
            "flush",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    (
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

/// Whether `line` is a log record (`2026-…Z  INFO target: …`).
fn is_record(line: &str) -> bool {
    line.len() > 30 && line.as_bytes()[4] == b'-' && line[..30].contains('T') && {
        let rest = &line[27..];
        ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
            .iter()
            .any(|l| rest.trim_start().starts_with(l))
    }
}

#[test]
fn run_prints_no_log_line_by_default_and_one_line_records_with_v() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, stderr) = run(&dir.path().join("quiet"), &[]);
    assert!(stdout.contains("retries 2"), "{stdout}");
    let records: Vec<&str> = stderr.lines().filter(|l| is_record(l)).collect();
    assert!(records.is_empty(), "log lines by default: {records:#?}");
    let (_, stderr) = run(&dir.path().join("verbose"), &["-v"]);
    assert!(
        stderr
            .lines()
            .any(|l| is_record(l) && l.contains("attempt failed; ticket requeued")),
        "{stderr}"
    );
    // Every line is a record or weir's own one-line notes: a failed
    // attempt's output tails stay inside their record.
    for l in stderr.lines() {
        assert!(
            is_record(l) || l.starts_with("weir: "),
            "a line outside any record: {l:?}"
        );
    }
}
