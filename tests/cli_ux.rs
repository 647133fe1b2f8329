//! `weir run` as a new user meets it (issue 14): the summary of a failed
//! run names the node, its stderr tail and the commands to see more;
//! `--until-idle` with nothing to start exits 2 with the reason; output
//! that is not a terminal holds no escape codes; a keyed graph whose key
//! failed once and then recovered exits 0.

use std::path::Path;
use std::process::{Command, Output};

fn weir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "warn");
    c.env(
        "XDG_STATE_HOME",
        std::env::temp_dir().join("weir-cli-ux-state"),
    );
    c
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn write(dir: &Path, name: &str, body: &str) {
    std::fs::write(dir.join(name), body).unwrap();
}

const FAILING: &str = r#"
name = "fails"

[[nodes]]
name = "first"
command = ["sh", "-c", "echo fine"]

[[nodes]]
name = "broken"
upstreams = ["first"]
command = ["sh", "-c", "echo 'line one of the trouble' >&2; echo 'disk is full at /mnt/x' >&2; exit 3"]
retry = { attempts = 1 }
"#;

#[test]
fn a_failed_run_names_its_node_its_stderr_and_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "fails.toml", FAILING);
    let data = dir.path().join("data");
    // -v: the state changes are logged (quiet by default).
    let o = weir()
        .env_remove("RUST_LOG")
        .args(["run", "-v", "--until-idle", "--data"])
        .arg(&data)
        .arg(dir.path().join("fails.toml"))
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("failed nodes:"), "stdout:\n{out}");
    assert!(
        out.contains("fails none broken: exit 3"),
        "the node and its exit code; stdout:\n{out}"
    );
    assert!(
        out.contains("| disk is full at /mnt/x"),
        "its stderr tail; stdout:\n{out}"
    );
    assert!(
        out.contains(&format!(
            "more: weir logs fails none broken --data {}",
            data.display()
        )),
        "the logs command; stdout:\n{out}"
    );
    assert!(
        out.contains(&format!("data in {}", data.display())),
        "the data directory; stdout:\n{out}"
    );
    assert!(
        out.contains("see more: weir status fails none"),
        "stdout:\n{out}"
    );
    // The stderr tail is in the queue's line about the attempt, once: the
    // command's own line gives its first line only.
    let attempts = err.matches("command failed").count();
    assert!(attempts >= 1, "stderr:\n{err}");
    assert_eq!(
        err.matches("stderr (tail):").count(),
        attempts,
        "one tail per attempt; stderr:\n{err}"
    );
    // Not a terminal: no escape codes anywhere.
    assert!(!out.contains("\x1b["), "escape codes in stdout:\n{out:?}");
    assert!(!err.contains("\x1b["), "escape codes in stderr:\n{err:?}");
}

#[test]
fn until_idle_with_nothing_to_start_exits_2_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let etl = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/etl");
    let o = weir()
        .args(["run", "--until-idle", "--data"])
        .arg(dir.path().join("data"))
        .arg(&etl)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        err.contains("graph etl is partitioned daily: pass --partition or --backfill"),
        "stderr:\n{err}"
    );
    assert!(
        err.contains("fires next at"),
        "the next cron firing; stderr:\n{err}"
    );
    assert!(!err.contains("\x1b["), "escape codes in stderr:\n{err:?}");
}

#[test]
fn a_run_of_the_etl_says_where_its_report_is() {
    let dir = tempfile::tempdir().unwrap();
    let etl = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/etl");
    let data = dir.path().join("data");
    let o = weir()
        .args(["run", "--until-idle", "--partition", "2026-11-01", "--data"])
        .arg(&data)
        .arg(&etl)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("weir logs etl 2026-11-01 report"),
        "where the report is; stdout:\n{out}"
    );
    assert!(!out.contains("\x1b["), "escape codes in stdout:\n{out:?}");
    assert!(!err.contains("\x1b["), "escape codes in stderr:\n{err:?}");
}

#[test]
fn a_keyed_graph_whose_key_recovered_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "keys.txt", "k1\n");
    // The first run of k1 fails, every later one succeeds.
    write(
        dir.path(),
        "keyed.toml",
        r#"
name = "keyed"
partitioning = "keyed"

[keyed]
inventory = { file = "keys.txt" }
refresh = "10s"
interval = "1s"
retry_interval = "300ms"
jitter = "0s"

[[nodes]]
name = "check"
command = ["sh", "-c", "if [ -e seen ]; then echo ok; else touch seen; echo 'first try fails' >&2; exit 1; fi"]
retry = { attempts = 1 }
"#,
    );
    let o = weir()
        .current_dir(dir.path())
        .args(["run", "--for", "4s", "--grace-secs", "5", "--data"])
        .arg(dir.path().join("data"))
        .arg(dir.path().join("keyed.toml"))
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(
        out.contains("recovered: keyed k1: 1 failed run(s)"),
        "the recovery is said; stdout:\n{out}\nstderr:\n{err}"
    );
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
}

const DEFERRED: &str = r#"
name = "br"

[targets.api]
failures = 1
cooldown = "1s"
probes = 1

[[nodes]]
name = "fail"
target = "api"
retry = { attempts = 1 }
command = ["sh", "-c", "exit 1"]

[[nodes]]
name = "held"
upstreams = ["fail"]
trigger_rule = "all_done"
target = "api"
command = ["sh", "-c", "echo ran"]
"#;

#[test]
fn status_shows_deferrals_apart_from_attempts() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "br.toml", DEFERRED);
    let data = dir.path().join("data");
    let o = weir()
        .args(["run", "--until-idle", "--data"])
        .arg(&data)
        .arg(dir.path().join("br.toml"))
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{out}\nstderr:\n{err}");
    let o = weir()
        .args(["status", "br", "none", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "stdout:\n{out}\nstderr:\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.contains("NODE"))
        .unwrap_or_else(|| panic!("no table:\n{out}"));
    let cols: Vec<&str> = lines[head].split_whitespace().collect();
    assert_eq!(
        &cols[..5],
        ["NODE", "STATE", "RERUN", "ATTEMPTS", "DEFERRED"],
        "{out}"
    );
    let held: Vec<&str> = lines
        .iter()
        .find(|l| l.trim_start().starts_with("held"))
        .unwrap_or_else(|| panic!("no held row:\n{out}"))
        .split_whitespace()
        .collect();
    // held was handed out while the breaker was open: deferred (not an
    // attempt), then run once by the probe after the cooldown.
    assert_eq!(held[1], "succeeded", "{out}");
    assert_eq!(held[3], "1", "one attempt: {out}");
    assert!(held[4].parse::<u32>().unwrap() >= 1, "deferred: {out}");
}
