//! Commands answer in sentences (issue #31 items 4 and 5): `trigger`,
//! `mark`, `reload` and `backfill` print what they did, not the API's JSON
//! (which `--json` gives), a backfill over runs that exist says nothing
//! will start, and a bad partition is named as typed.

mod serve_support;

use serve_support::{start, write_def};

#[test]
fn control_commands_answer_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let def = "name = \"w\"\npartitioning = \"daily\"\n\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n\n[[nodes]]\nname = \"b\"\nupstreams = [\"a\"]\ncommand = [\"true\"]\n";
    write_def(&defs, "w", def);
    write_def(
        &defs,
        "mp",
        "name = \"mp\"\n\n[[nodes]]\nname = \"m\"\nitems = [\"x\", \"y\", \"z\"]\ncommand = [\"echo\", \"member {item}\"]\n",
    );
    let engine = start(&["serve"], &defs, &tmp.path().join("data"));

    let t = engine.ok(&["trigger", "w"]);
    assert!(t.starts_with("w: started the run of 20"), "{t}");
    assert!(!t.contains('{'), "{t}");
    let again = engine.ok(&["trigger", "w"]);
    assert!(
        again.contains("exists already (not started again"),
        "{again}"
    );

    engine.ok(&["backfill", "w", "2026-11-01..2026-11-02"]);
    engine.wait_run("w", "2026-11-02", "complete");
    engine.wait_run("w", "2026-11-01", "complete");
    let b = engine.ok(&["backfill", "w", "2026-11-01..2026-11-02"]);
    assert!(
        b.contains("all 2 windows of 2026-11-01..2026-11-02 exist already; nothing to start"),
        "{b}"
    );
    let b = engine.ok(&["backfill", "w", "2026-11-02..2026-11-04"]);
    assert!(
        b.contains("2 windows to start of 3") && b.contains("1 of which exist already"),
        "{b}"
    );

    let m = engine.ok(&["mark", "w", "2026-11-01", "a", "failed"]);
    assert!(
        m.starts_with("w 2026-11-01 a: marked failed (record w/2026-11-01/a/1)"),
        "{m}"
    );
    let m = engine.ok(&["mark", "w", "2026-11-01", "a", "failed"]);
    assert!(m.contains("failed already; nothing changed"), "{m}");
    let j = engine.ok(&["mark", "w", "2026-11-01", "a", "success", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&j).unwrap();
    assert_eq!(v["outcome"], "marked", "{j}");

    // A mark leaves a downstream that ran as it is; --downstream marks it.
    let states = engine.node_states("w", "2026-11-02");
    assert_eq!(states[1].1, "succeeded", "{states:?}");
    engine.ok(&["mark", "w", "2026-11-02", "a", "failed"]);
    let states = engine.node_states("w", "2026-11-02");
    assert_eq!(
        (states[0].1.as_str(), states[1].1.as_str()),
        ("failed", "succeeded"),
        "{states:?}"
    );
    let m = engine.ok(&["mark", "w", "2026-11-02", "a", "failed", "--downstream"]);
    assert!(m.contains("w 2026-11-02 b: marked failed"), "{m}");
    let states = engine.node_states("w", "2026-11-02");
    assert_eq!(
        (states[0].1.as_str(), states[1].1.as_str()),
        ("failed", "failed"),
        "{states:?}"
    );

    let r = engine.ok(&["reload"]);
    assert!(r.contains("unchanged w"), "{r}");
    write_def(
        &defs,
        "w",
        &def.replace("[\"true\"]\n\n[[nodes]]", "[\"true\", \"x\"]\n\n[[nodes]]"),
    );
    let r = engine.ok(&["reload"]);
    assert!(r.starts_with("adopted w (definition "), "{r}");
    assert!(!r.contains('['), "{r}");

    // A mapped node's logs are its members' (#31 item 7).
    engine.ok(&["start", "mp", "none"]);
    engine.wait_run("mp", "none", "complete");
    let o = engine.cli(&["logs", "mp", "none", "m"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("node \"m\" is mapped: its logs are its 3 members'")
            && err.contains("weir logs mp none m --member N` (N from 0 to 2)"),
        "{err}"
    );
    let member = engine.ok(&["logs", "mp", "none", "m", "--member", "1"]);
    assert!(member.contains("member y"), "{member}");

    let bad = engine.cli(&["start", "w", "yesterday"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains("partition \"yesterday\": not a partition") && !err.contains("partitions[]"),
        "{err}"
    );
}
