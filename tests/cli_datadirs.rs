//! The data directory a client command reads when several examples were
//! run from one folder (issue #31 item 1): each `weir run` is remembered
//! with its graphs, a command naming a graph reads the store that holds
//! it, and one naming none (or a graph none holds) is refused with the
//! list instead of reading a guess.

mod serve_support;

use std::path::Path;
use std::process::{Command, Output};

fn weir(cwd: &Path, state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "warn")
        .env("XDG_STATE_HOME", state)
        .env_remove("WEIR_DATA_DIR")
        .current_dir(cwd);
    c
}

fn explain(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn graph(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!("name = \"{name}\"\n\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n"),
    )
    .unwrap();
}

#[test]
fn each_graph_is_read_from_the_store_that_holds_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    let state = tmp.path().join("state");
    graph(&root.join("one"), "first");
    graph(&root.join("two"), "second");
    for folder in ["one", "two"] {
        let o = weir(&root, &state)
            .args(["run", folder, "--until-idle", "--durability", "flush"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    }
    // Each graph from its own store, though `two` ran last.
    for (g, folder) in [("first", "one"), ("second", "two")] {
        let o = weir(&root, &state)
            .args(["status", g, "none", "--json"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{g}: {}", explain(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["graph"], g, "{folder}");
        assert_eq!(v["state"], "complete", "{v}");
    }
    // No graph named: refused, naming both.
    let o = weir(&root, &state).args(["runs"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    assert!(
        err.contains("2 data directories were used from")
            && err.contains("(graphs first)")
            && err.contains("(graphs second)")
            && err.contains("--data"),
        "{err}"
    );
    // A graph neither holds: refused too.
    let o = weir(&root, &state)
        .args(["status", "third", "none"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    assert!(err.contains("graph \"third\" is in none"), "{err}");
    // --data still decides.
    let o = weir(&root, &state)
        .args(["runs", "--data"])
        .arg(root.join("one/.weir"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("first"));
}

/// A daily graph `etl` of one node that prints a line, in `dir`.
fn daily(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("etl.toml"),
        "name = \"etl\"\npartitioning = \"daily\"\n\n[[nodes]]\nname = \"a\"\ncommand = [\"sh\", \"-c\", \"echo done $WEIR_PARTITION\"]\n",
    )
    .unwrap();
}

/// Runs a command `weir run` printed, as printed, through `sh` from `cwd`
/// (its `weir` the binary under test).
fn as_printed(cwd: &Path, state: &Path, line: &str) -> Output {
    let cmd = line
        .strip_prefix("weir ")
        .unwrap_or_else(|| panic!("not a weir command: {line:?}"));
    std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("\"$WEIR_BIN\" {cmd}"))
        .env("WEIR_BIN", env!("CARGO_BIN_EXE_weir"))
        .env("RUST_LOG", "warn")
        .env("XDG_STATE_HOME", state)
        .env_remove("WEIR_DATA_DIR")
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// Issue #43 item 2: once a second data directory has run the same graph,
/// plain commands from the folder go to the one whose engine runs (they
/// were all refused), are refused while none or both run, and every
/// command `weir run` prints works as printed: with `--data` (quoted) when
/// the plain command would read another data directory.
#[test]
fn the_data_directory_whose_engine_runs_is_the_one_read() {
    let tmp = tempfile::tempdir().unwrap();
    // A space in the folder: printed paths must survive a shell.
    let root = tmp.path().join("my repo");
    let state = tmp.path().join("state");
    let other = tmp.path().join("other");
    daily(&root.join("etl"));
    let run = |extra: &[&str]| {
        let o = weir(&root, &state)
            .args(["run", "etl", "--until-idle", "--durability", "flush"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
        o
    };
    run(&["--partition", "2026-11-01"]);
    run(&[
        "--partition",
        "2026-11-02",
        "--data",
        other.to_str().unwrap(),
    ]);
    // No engine runs: refused, naming both.
    let o = weir(&root, &state)
        .args(["status", "etl", "2026-11-02"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    assert!(
        err.contains("graph \"etl\" is in 2 of the data directories")
            && err.contains("no engine runs on any of them"),
        "{err}"
    );

    // An engine serves `other`: plain commands go to it.
    let log = std::fs::File::create(tmp.path().join("serve.stderr")).unwrap();
    let mut serve = weir(&root, &state)
        .args([
            "serve",
            "etl",
            "--listen",
            "127.0.0.1:0",
            "--durability",
            "flush",
        ])
        .arg("--data")
        .arg(&other)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = serve.id();
    let serve = Kill(&mut serve);
    serve_support::wait_for(
        "the engine on `other`",
        std::time::Duration::from_secs(60),
        || serve_support::engine_url(&other, pid),
    );
    let status = |partition: &str| {
        weir(&root, &state)
            .args(["status", "etl", partition, "--json"])
            .output()
            .unwrap()
    };
    let o = status("2026-11-02");
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["state"], "complete", "{v}");
    // 2026-11-01 ran in the other data directory: not read here.
    let o = status("2026-11-01");
    assert_eq!(o.status.code(), Some(2), "{}", explain(&o));
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("data directories"),
        "{}",
        explain(&o)
    );
    // A command naming no graph, and one that changes something.
    let o = weir(&root, &state)
        .args(["runs", "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));
    let runs = String::from_utf8_lossy(&o.stdout);
    assert!(
        runs.contains("2026-11-02") && !runs.contains("2026-11-01"),
        "{runs}"
    );
    let o = weir(&root, &state)
        .args(["start", "etl", "2026-11-03"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", explain(&o));

    // A run into `etl/.weir` while `other` serves: the commands it prints
    // (at its start, both engines run; at its end, `other`'s) carry
    // `--data`, quoted, and work as printed.
    let o = run(&["--partition", "2026-11-04"]);
    let mine = root.join("etl/.weir");
    let quoted = format!("--data '{}'", mine.display());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("work while this runs, given {quoted}")),
        "{}",
        explain(&o)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let hints: Vec<&str> = out
        .lines()
        .filter_map(|l| l.split_once(": weir ").map(|(_, c)| c))
        .collect();
    assert!(hints.len() >= 2, "results and see-more hints: {out}");
    for hint in hints {
        assert!(hint.ends_with(&quoted), "{hint:?}");
        let o = as_printed(&root, &state, &format!("weir {hint}"));
        assert_eq!(o.status.code(), Some(0), "{hint}: {}", explain(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("2026-11-04"),
            "{hint}: {}",
            explain(&o)
        );
    }
    drop(serve);
}
