//! Exit codes, command by command (faults #12): the README's table says
//! what each command exits with; this test walks it. Each case runs a real
//! `weir` (against a `weir serve` on a loopback port, or on its own) and
//! checks the code it exits with; the README's table must list a code for
//! every case's command, and every command of the table must have a case.
//! A refusal exits 2 everywhere, with `--json` as without it.

mod serve_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serve_support::{chain_def, start, wait_for, weir, write_def};

/// The README's exit-code table: command name → the codes it may exit with.
fn readme_table() -> BTreeMap<String, Vec<u8>> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let start = readme
        .find("| command | 0 | 1 | 2 | 3 |")
        .expect("the README has the exit-code table");
    let mut table = BTreeMap::new();
    for line in readme[start..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 5, "a row of five cells: {line}");
        let codes: Vec<u8> = (0..4u8).filter(|&c| cells[1 + c as usize] != "—").collect();
        for name in cells[0].split('`').skip(1).step_by(2) {
            let word = name.split_whitespace().next().unwrap().to_string();
            table.insert(word, codes.clone());
        }
    }
    assert!(table.len() >= 10, "the table lists the commands: {table:?}");
    table
}

/// Runs `weir ARGS` (with `--data` when given) and returns its exit code.
fn code(args: &[&str], data: Option<&Path>, cwd: &Path) -> (u8, String) {
    let mut c = weir();
    c.current_dir(cwd).args(args);
    if let Some(d) = data {
        c.arg("--data").arg(d);
    }
    let out = c.output().unwrap();
    let text = format!(
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().expect("exited") as u8, text)
}

#[test]
fn every_command_exits_as_the_readme_says() {
    let table = readme_table();
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let served = start(&["serve"], &defs, &tmp.path().join("data"));
    let data = served.data.clone();
    let run_state = |p: &str| {
        let o = served.cli(&["status", "--json", "g", p]);
        serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .ok()
            .and_then(|v| v["state"].as_str().map(str::to_string))
    };
    let wait_settled = |p: &str| {
        wait_for(
            &format!("run g {p} to settle"),
            Duration::from_secs(60),
            || run_state(p).filter(|s| s == "complete" || s == "failed"),
        )
    };

    // (command, args, expected code); `--data` is the served engine's.
    let mut cases: Vec<(&str, Vec<String>, u8)> = Vec::new();
    let check = |name: &'static str, args: &[&str], want: u8, cases: &mut Vec<_>| {
        let (got, text) = code(args, Some(&data), &defs);
        assert_eq!(
            got, want,
            "weir {args:?}: want exit {want}, got {got}\n{text}"
        );
        cases.push((name, args.iter().map(|s| s.to_string()).collect(), want));
    };

    // A run that completes, and one where b fails.
    check("start", &["start", "g", "2026-11-01"], 0, &mut cases);
    assert_eq!(wait_settled("2026-11-01"), "complete");
    std::fs::write(defs.join("fail-b"), "").unwrap();
    check("start", &["start", "g", "2026-11-03"], 0, &mut cases);
    assert_eq!(wait_settled("2026-11-03"), "failed");
    std::fs::remove_file(defs.join("fail-b")).unwrap();

    check(
        "start",
        &["start", "g", "2026-11-02", "--param", "nope=1"],
        2,
        &mut cases,
    );
    check("status", &["status", "g", "2026-11-01"], 0, &mut cases);
    check("runs", &["runs", "--graph", "g"], 0, &mut cases);
    check("logs", &["logs", "g", "2026-11-01", "a"], 0, &mut cases);
    check("logs", &["logs", "g", "2026-11-01", "zz"], 2, &mut cases);
    check(
        "backfill",
        &["backfill", "g", "2026-11-10..2026-11-01"],
        2,
        &mut cases,
    );
    check(
        "mark",
        &["mark", "g", "2026-11-01", "a", "success"],
        0,
        &mut cases,
    );
    check("signal", &["signal", "g", "k"], 2, &mut cases);
    check("reconcile", &["reconcile", "g"], 0, &mut cases);
    check("reconcile", &["reconcile", "nope"], 2, &mut cases);
    // c is upstream_failed: not ready, a refusal with and without --json.
    check("rerun", &["rerun", "g", "2026-11-03", "c"], 2, &mut cases);
    check(
        "rerun",
        &["rerun", "--json", "g", "2026-11-03", "c"],
        2,
        &mut cases,
    );
    check("rerun", &["rerun", "g", "2026-11-03", "b"], 0, &mut cases);
    check("cancel", &["cancel", "g", "2026-11-01"], 2, &mut cases);
    check(
        "dead",
        &["dead", "--requeue", "no-such-letter"],
        2,
        &mut cases,
    );
    // A reload that refuses a file exits 2, with --json as without it.
    write_def(
        &defs,
        "broken",
        "name = \"broken\"\n[[nodes]]\nname = \"x\"\n",
    );
    check("reload", &["reload"], 2, &mut cases);
    check("reload", &["reload", "--json"], 2, &mut cases);
    std::fs::remove_file(defs.join("broken.toml")).unwrap();
    check("reload", &["reload"], 0, &mut cases);
    drop(served);

    // Commands that run on their own.
    let own = tmp.path().join("own");
    write_def(
        &own,
        "ok",
        "name = \"ok\"\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let bad = tmp.path().join("bad");
    write_def(
        &bad,
        "bad",
        "name = \"bad\"\n[[nodes]]\nname = \"a\"\nretry = { attempts = 1 }\ncommand = [\"false\"]\n",
    );
    let broken = tmp.path().join("broken");
    write_def(
        &broken,
        "x",
        "name = \"x\"\n[[nodes]]\nname = \"a\"\nupstreams = [\"zz\"]\ncommand = [\"true\"]\n",
    );
    let mut alone = |name: &'static str, args: Vec<String>, want: u8| {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let (got, text) = code(&refs, None, tmp.path());
        assert_eq!(
            got, want,
            "weir {args:?}: want exit {want}, got {got}\n{text}"
        );
        cases.push((name, args, want));
    };
    let p = |d: &Path| d.display().to_string();
    let data_of = |n: &str| p(&tmp.path().join(format!("data-{n}")));
    alone("validate", vec!["validate".into(), p(&own)], 0);
    alone("validate", vec!["validate".into(), p(&broken)], 2);
    for (dir, want, n) in [(&own, 0, "ok"), (&bad, 1, "bad"), (&broken, 2, "broken")] {
        alone(
            "run",
            vec![
                "run".into(),
                p(dir),
                "--data".into(),
                data_of(n),
                "--partition".into(),
                "none".into(),
                "--until-idle".into(),
            ],
            want,
        );
    }
    alone(
        "serve",
        vec![
            "serve".into(),
            p(&broken),
            "--data".into(),
            data_of("serve"),
        ],
        2,
    );
    alone("bench", vec!["bench".into(), "no-such-scenario".into()], 2);

    // Every case's code is one the README lists for its command, and every
    // command of the README has a case.
    for (name, args, want) in &cases {
        let listed = table
            .get(*name)
            .unwrap_or_else(|| panic!("the README's table lists no row for `{name}` ({args:?})"));
        assert!(
            listed.contains(want),
            "weir {args:?} exits {want}, which the README's row for `{name}` does not list ({listed:?})"
        );
    }
    for name in table.keys() {
        assert!(
            cases.iter().any(|(n, _, _)| n == name),
            "the README lists `{name}` but no case walks it"
        );
    }
}
