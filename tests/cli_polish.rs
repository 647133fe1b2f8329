//! The small frictions of a first hour with the CLI (issue #43 item 7),
//! each with real `weir` processes or the repository's own files: `weir
//! logs` of a node that printed nothing says so (from the store and from
//! an engine); `weir validate` prints `depends_on_past`, `sla` and
//! `run_timeout` where they are set; `--backfill` may be given more than
//! once to `weir run`; the files the README's walkthroughs write into the
//! repository root are ignored by git; and docs/operations.md's run with
//! its own params is not a day the README's walkthrough backfills into the
//! same data directory.

mod serve_support;

use std::path::Path;
use std::process::Output;

use serve_support::{start, weir, write_def};

fn explain(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn repo_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// One node prints nothing, one prints a line.
const QUIET: &str = r#"name = "q"

[[nodes]]
name = "silent"
command = ["true"]

[[nodes]]
name = "talks"
upstreams = ["silent"]
command = ["sh", "-c", "echo hello"]
"#;

#[test]
fn logs_of_a_node_that_printed_nothing_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "q", QUIET);
    let data = dir.path().join("data");
    let o = weir()
        .arg("run")
        .arg(&defs)
        .args(["--until-idle", "--durability", "flush", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let logs = |node: &str, extra: &[&str]| {
        weir()
            .args(["logs", "q", "none", node, "--data"])
            .arg(&data)
            .args(extra)
            .output()
            .unwrap()
    };
    // No engine runs: read from the store.
    let o = logs("silent", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    assert!(o.stdout.is_empty(), "{}", explain(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("q none silent: attempt 1 printed nothing (no line on stdout or stderr)"),
        "{}",
        explain(&o)
    );
    let o = logs("talks", &[]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("hello")
            && !String::from_utf8_lossy(&o.stderr).contains("printed nothing"),
        "{}",
        explain(&o)
    );
    // From an engine, plain and followed.
    let s = start(&["serve"], &defs, &data);
    for extra in [&[][..], &["--follow"]] {
        let o = s.cli(
            &["logs", "q", "none", "silent"]
                .iter()
                .chain(extra)
                .copied()
                .collect::<Vec<_>>(),
        );
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", explain(&o));
        assert!(o.stdout.is_empty(), "{extra:?}: {}", explain(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr)
                .contains("q none silent: its newest attempt printed nothing"),
            "{extra:?}: {}",
            explain(&o)
        );
    }
}

#[test]
fn validate_prints_depends_on_past_sla_and_run_timeout_where_set() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_def(
        dir.path(),
        "late",
        r#"name = "late"
partitioning = "daily"
run_timeout = "2h"
sla = "1h"
on_sla_miss = ["sh", "-c", "cat > /dev/null"]

[[nodes]]
name = "first"
command = ["true"]
depends_on_past = true
sla = "30m"

[[nodes]]
name = "second"
upstreams = ["first"]
command = ["true"]
wait_for_downstream = true

[[nodes]]
name = "plain"
command = ["true"]
"#,
    );
    let o = weir().arg("validate").arg(&file).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let line = |start: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(start))
            .unwrap_or_else(|| panic!("no line starting {start:?}:\n{out}"))
            .to_string()
    };
    let graph = line("partitioning daily");
    assert!(
        graph.contains("run_timeout 2h") && graph.contains("sla 1h"),
        "{graph}"
    );
    assert!(line("on_sla_miss").contains("cat > /dev/null"), "{out}");
    let first = line("first ");
    assert!(
        first.contains(" depends_on_past") && first.contains(" sla 30m"),
        "{first}"
    );
    // wait_for_downstream implies depends_on_past.
    let second = line("second ");
    assert!(
        second.contains(" depends_on_past") && second.contains(" wait_for_downstream"),
        "{second}"
    );
    // Where unset, nothing is said.
    let plain = line("plain ");
    assert!(
        !plain.contains("depends_on_past") && !plain.contains(" sla "),
        "{plain}"
    );
}

#[test]
fn backfill_may_be_given_more_than_once() {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(
        &defs,
        "d",
        "name = \"d\"\npartitioning = \"daily\"\n\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let data = dir.path().join("data");
    let o = weir()
        .arg("run")
        .arg(&defs)
        .args([
            "--backfill",
            "2026-11-01..2026-11-02",
            "--backfill",
            "2026-11-05..2026-11-05",
            "--until-idle",
            "--durability",
            "flush",
            "--data",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("3 run(s): 3 settled"), "{out}");
    let o = weir()
        .args(["runs", "--graph", "d", "--json", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    let runs = String::from_utf8_lossy(&o.stdout);
    for p in ["2026-11-01", "2026-11-02", "2026-11-05"] {
        assert!(runs.contains(p), "{p}: {runs}");
    }
    for p in ["2026-11-03", "2026-11-04"] {
        assert!(!runs.contains(p), "{p}: {runs}");
    }
}

/// The file names the README's shell blocks write with `> NAME` (no
/// folder: into the repository root, where the walkthroughs run).
fn files_the_readme_writes() -> Vec<String> {
    let readme = repo_file("README.md");
    let mut names = Vec::new();
    let mut in_sh = false;
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        for (i, _) in line.match_indices("> ") {
            let name: String = line[i + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "._-".contains(*c))
                .collect();
            if !name.is_empty() && !name.starts_with('.') && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

#[test]
fn the_files_the_readme_walkthroughs_write_are_ignored_by_git() {
    let written = files_the_readme_writes();
    for f in ["cookie", "token"] {
        assert!(written.iter().any(|w| w == f), "{f} in {written:?}");
    }
    let ignore = repo_file(".gitignore");
    for f in &written {
        let root_only = format!("/{f}");
        assert!(
            ignore
                .lines()
                .map(str::trim)
                .any(|l| l == f || l == root_only),
            ".gitignore does not ignore {f:?}, which the README's walkthrough writes"
        );
    }
}

/// `(from, to)` of every `backfill etl FROM..TO` in `text` run without
/// `--data` (into the example's own data directory).
fn etl_backfills(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.contains("--data"))
        .filter_map(|l| l.split_once("-- backfill etl ").map(|(_, r)| r))
        .filter_map(|r| r.split_whitespace().next()?.split_once(".."))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn the_params_example_is_a_day_no_walkthrough_backfills() {
    let readme = repo_file("README.md");
    let ops = repo_file("docs/operations.md");
    let mut ranges = etl_backfills(&readme);
    ranges.extend(etl_backfills(&ops));
    assert!(
        ranges.iter().any(|(a, _)| a == "2026-11-08"),
        "the README's backfill of the second week: {ranges:?}"
    );
    let starts: Vec<&str> = ops
        .lines()
        .filter(|l| !l.contains("--data"))
        .filter_map(|l| l.split_once("-- start etl ").map(|(_, r)| r))
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert!(!starts.is_empty(), "docs/operations.md starts a run of etl");
    for day in starts {
        for (a, b) in &ranges {
            assert!(
                !(a.as_str() <= day && day <= b.as_str()),
                "docs/operations.md starts etl {day}, which a walkthrough backfills ({a}..{b}) into the same data directory: the run exists already"
            );
        }
    }
}
