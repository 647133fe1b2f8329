//! A start date with catch-up (swale's initial catch-up): once adopted, a
//! cron graph starts every window from its start date to the newest closed
//! one, paced by max_active_runs, once — a restart starts none again — and
//! never a window before the start.

mod serve_support;

use std::time::Duration;

use serde_json::Value;
use serve_support::{start, wait_for, write_def};

fn day(offset: i64) -> String {
    (chrono::Utc::now().date_naive() + chrono::Duration::days(offset))
        .format("%Y-%m-%d")
        .to_string()
}

fn runs(engine: &serve_support::Served) -> Vec<Value> {
    let v = engine
        .http()
        .get("/api/v1/runs?graph=caught&limit=100")
        .json();
    let mut r = v["runs"].as_array().unwrap().clone();
    r.reverse(); // oldest first
    r
}

#[test]
fn a_start_date_with_catchup_runs_every_window_from_it_once() {
    let tmp = tempfile::tempdir().unwrap();
    let defs = tmp.path().join("defs");
    let def = format!(
        "name = \"caught\"\npartitioning = \"daily\"\ncron = \"0 0 * * *\"\nstart = \"{}\"\ncatchup = true\nmax_active_runs = 1\n\n[[nodes]]\nname = \"a\"\ncommand = [\"sh\", \"-c\", \"sleep 0.2\"]\n",
        day(-3)
    );
    write_def(&defs, "caught", &def);
    let data = tmp.path().join("data");
    let engine = start(&["serve"], &defs, &data);
    let want = vec![day(-3), day(-2), day(-1)];
    let got = wait_for("three complete runs", Duration::from_secs(60), || {
        let r = runs(&engine);
        (r.len() == 3 && r.iter().all(|x| x["state"] == "complete")).then_some(r)
    });
    let parts: Vec<&str> = got
        .iter()
        .map(|r| r["partition"].as_str().unwrap())
        .collect();
    assert_eq!(parts, want, "every window from the start, none before");
    // Paced: one active at a time.
    for w in got.windows(2) {
        assert!(
            w[1]["requested_at_ms"].as_u64() >= w[0]["settled_at_ms"].as_u64(),
            "max_active_runs = 1: {} started before {} settled",
            w[1]["partition"],
            w[0]["partition"]
        );
    }
    let trig = engine.http().get("/api/v1/graphs/caught/backfills").json();
    assert_eq!(trig["backfills"].as_array().unwrap().len(), 0, "{trig}");
    drop(engine);

    // A restart starts nothing again.
    let engine = start(&["serve"], &defs, &data);
    std::thread::sleep(Duration::from_millis(1_500));
    let again = runs(&engine);
    assert_eq!(again.len(), 3, "{again:?}");
    let trig = engine.http().get("/api/v1/graphs/caught/backfills").json();
    assert_eq!(trig["backfills"].as_array().unwrap().len(), 0, "{trig}");
}

#[test]
fn a_start_date_needs_a_cron_and_a_date() {
    let tmp = tempfile::tempdir().unwrap();
    let f = write_def(
        tmp.path(),
        "bad",
        "name = \"bad\"\npartitioning = \"daily\"\nstart = \"yesterday\"\n\n[[nodes]]\nname = \"a\"\ncommand = [\"true\"]\n",
    );
    let o = serve_support::weir()
        .arg("validate")
        .arg(&f)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is neither a date"), "{err}");
    assert!(err.contains("a start date needs a cron"), "{err}");
}
