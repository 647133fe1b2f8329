//! The data directory a client command reads when several examples were
//! run from one folder (issue #31 item 1): each `weir run` is remembered
//! with its graphs, a command naming a graph reads the store that holds
//! it, and one naming none (or a graph none holds) is refused with the
//! list instead of reading a guess.

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
