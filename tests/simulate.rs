//! `weir simulate` end to end: the real engine in virtual time over
//! definitions and scenarios written here. Each failure kind of a scenario
//! (durations, node failures with and without a permanent exit code, a
//! target down), each input (backfill, start, signal, inventory), the
//! `--check` exit codes (0, 1, 2), errors in a scenario naming file, line
//! and field, and the HTML report.

mod simulate_support;

use simulate_support::*;
use weir::simulate::report;

const SPAN6H: &str = "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T06:00:00Z\"\n";

/// A fixed duration is each run's lateness (its window ends at the firing
/// that starts it); a 5 min SLA is missed by every 10 min run.
#[test]
fn durations_make_lateness_and_sla_misses() {
    let case = Case::new(
        &hourly("sla = \"5m\"", ""),
        &format!("{SPAN6H}[[durations]]\nfixed = \"10m\"\n"),
    );
    let r = case.report(1);
    let f = &r.graphs["hourly"].figures;
    // Firings at 01:00 … 05:00 inside the span.
    assert_eq!(f.runs_started, 5, "{f:?}");
    assert_eq!(f.runs_completed, 5, "{f:?}");
    assert_eq!(f.attempts, 5);
    assert!(
        (10 * MIN..10 * MIN + 1_000).contains(&f.lateness_p50),
        "{f:?}"
    );
    assert_eq!(f.lateness_p50, f.lateness_max);
    assert_eq!(f.sla_misses, 5);
    // The pool was busy 10 min an hour with 1 of 2 slots.
    let pool = &r.pools["default"];
    assert!((0.06..0.08).contains(&pool.utilisation_mean), "{pool:?}");

    // A uniform model keeps every lateness within its bounds.
    let case = Case::new(
        &hourly("", ""),
        &format!("{SPAN6H}[[durations]]\ngraph = \"hourly\"\nuniform = [\"2m\", \"4m\"]\n"),
    );
    let f = case.report(3).totals;
    assert!(
        f.lateness_p50 >= 2 * MIN && f.lateness_max <= 4 * MIN + 1_000,
        "{f:?}"
    );
}

/// A node failing every attempt is retried to its budget (3 attempts),
/// then dead-lettered; with an exit code the node lists as permanent it is
/// not retried at all; with another code it is.
#[test]
fn node_failures_retry_then_dead_letter() {
    let cases = [
        ("", 15, 10),
        ("exit_code = 7\n", 5, 0),
        ("exit_code = 3\n", 15, 10),
    ];
    for (i, (extra, attempts, retries)) in cases.iter().enumerate() {
        let case = Case::new(
            &hourly("", ""),
            &format!(
                "{SPAN6H}[[failures]]\nkind = \"node\"\ngraph = \"hourly\"\nnode = \"work\"\nprobability = 1.0\n{extra}"
            ),
        );
        let f = case.report(1).totals;
        assert_eq!(
            (f.runs_failed, f.dead, f.attempts, f.retries),
            (5, 5, *attempts, *retries),
            "#{i}: {extra:?}: {f:?}"
        );
    }
    // A probability of 0.3 fails some attempts, not all.
    let case = Case::new(
        &hourly("", ""),
        "from = \"2026-11-02T00:00:00Z\"\ndays = 2\n[[failures]]\nkind = \"node\"\ngraph = \"hourly\"\nnode = \"work\"\nprobability = 0.3\n",
    );
    let f = case.report(5).totals;
    assert!(f.retries > 0 && f.retries < f.attempts / 2, "{f:?}");
}

/// A target down for 30 min fails the attempts that start then; its
/// breaker opens (within the outage, for its 30 s cooldown) and defers
/// work; the runs before and after complete.
#[test]
fn a_target_down_opens_its_breaker() {
    let case = Case::new(
        &hourly("", "target = \"db\""),
        &format!(
            "{SPAN6H}[[durations]]\nfixed = \"1m\"\n[[failures]]\nkind = \"target_down\"\ntarget = \"db\"\nat = \"+2h59m\"\nfor = \"30m\"\n"
        ),
    );
    let r = case.report(1);
    assert!(!r.breakers.is_empty(), "{:?}", r.totals);
    let down = r.from_ms + 179 * MIN;
    for b in &r.breakers {
        assert_eq!(b.target, "db");
        assert!(
            b.from_ms >= down && b.until_ms <= down + 30 * MIN + 30_000,
            "{b:?}"
        );
        assert!(b.until_ms - b.from_ms <= 30_000, "{b:?}");
    }
    let f = &r.totals;
    assert!(f.deferrals > 0, "{f:?}");
    assert_eq!(
        f.runs_completed, 4,
        "the runs of 01, 02, 04 and 05 h: {f:?}"
    );
    assert_eq!(f.runs_failed, 1, "{f:?}");
}

/// A backfill and a start at instants start their runs.
#[test]
fn backfill_and_start_inputs() {
    let case = Case::new(
        &hourly("", ""),
        &format!(
            "{SPAN6H}[[inputs]]\nkind = \"backfill\"\nat = \"+10m\"\ngraph = \"hourly\"\nfrom = \"2026-11-01T00\"\nto = \"2026-11-01T05\"\n\
             [[inputs]]\nkind = \"start\"\nat = \"+20m\"\ngraph = \"hourly\"\npartition = \"2026-10-30T07\"\n"
        ),
    );
    let r = case.report(1);
    let g = &r.graphs["hourly"];
    assert_eq!(g.figures.runs_started, 5 + 6 + 1, "{:?}", g.figures);
    assert_eq!(g.figures.runs_completed, 12, "{:?}", g.figures);
    let started_at = |p: &str| g.runs.iter().find(|r| r.partition == p).unwrap().started_ms;
    assert_eq!(started_at("2026-10-30T07"), r.from_ms + 20 * MIN);
    assert!(started_at("2026-11-01T00") >= r.from_ms + 10 * MIN);
    assert!(r.refused.is_empty(), "{:?}", r.refused);
}

const KEYED: &str = r#"name = "keys"
partitioning = "keyed"

[keyed]
inventory = { command = ["sh", "-c", "echo a"] }
refresh = "1m"
interval = "1h"
retry_interval = "5m"
jitter = "0s"
debounce = { delay = "1m", max_wait = "5m" }

[[nodes]]
name = "n"
command = ["true"]
"#;

/// Keys come from the scenario (an inventory command is never run); a
/// signal starts its key's run at once; keys added by an inventory change
/// start their runs after it.
#[test]
fn keyed_inputs_signal_and_inventory() {
    let case = Case::new(
        KEYED,
        "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T03:00:00Z\"\n[keys]\nkeys = [\"a\", \"b\"]\n\
         [[inputs]]\nkind = \"signal\"\nat = \"+20m\"\ngraph = \"keys\"\nkey = \"b\"\nimmediate = true\n\
         [[inputs]]\nkind = \"inventory\"\nat = \"+90m\"\ngraph = \"keys\"\nkeys = [\"a\", \"b\", \"c\"]\n",
    );
    let r = case.report(1);
    let runs = &r.graphs["keys"].runs;
    let starts = |k: &str| -> Vec<u64> {
        runs.iter()
            .filter(|x| x.partition.starts_with(&format!("key={k}@")))
            .map(|x| x.started_ms - r.from_ms)
            .collect()
    };
    assert!(starts("b").contains(&(20 * MIN)), "b: {:?}", starts("b"));
    assert!(!starts("a").contains(&(20 * MIN)), "a: {:?}", starts("a"));
    let c = starts("c");
    assert!(
        !c.is_empty() && c.iter().all(|&t| t >= 90 * MIN),
        "c: {c:?}"
    );

    // Without the scenario's keys, the inventory command is refused.
    let case = Case::new(
        KEYED,
        "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T03:00:00Z\"\n",
    );
    let o = case.weir(&[]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("[keys]"), "{}", stderr(&o));
}

/// `--check`: 0 when every check holds, 1 when one fails (saying which),
/// 2 for a malformed check, an unknown figure or graph (naming it), before
/// any simulation.
#[test]
fn check_exit_codes() {
    let case = Case::new(
        &hourly("sla = \"5m\"", ""),
        &format!("{SPAN6H}[[durations]]\nfixed = \"10m\"\n"),
    );
    let o = case.weir(&[
        "--check",
        "dead == 0",
        "lateness_p99 < 11m",
        "--check",
        "hourly.runs_completed >= 5",
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o).matches(": ok").count(), 3, "{}", stdout(&o));
    // A lateness is shown as a duration.
    let shown = stdout(&o);
    let is = shown
        .lines()
        .find(|l| l.starts_with("check lateness_p99 < 11m: ok (is "))
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(
        is.trim_end_matches(')').ends_with('s') || is.trim_end_matches(')').ends_with('m'),
        "{is}"
    );

    let o = case.weir(&["--check", "dead == 0", "sla_misses == 0"]);
    assert_eq!(code(&o), 1, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("check sla_misses == 0: FAILED (is 5)"),
        "{}",
        stdout(&o)
    );

    // Under --json the checks go to stderr; stdout stays one JSON document.
    let o = case.weir(&["--json", "--check", "sla_misses == 0"]);
    assert_eq!(code(&o), 1);
    serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap();
    assert!(stderr(&o).contains("FAILED"), "{}", stderr(&o));

    for (bad, names) in [
        ("dead =", "dead ="),
        ("dead == lots", "lots"),
        ("bogus == 1", "bogus"),
        ("nograph.dead == 0", "nograph"),
    ] {
        let o = case.weir(&["--check", bad]);
        assert_eq!(code(&o), 2, "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains(names), "{bad}: {}", stderr(&o));
    }
}

/// A scenario's faults name the file, the line and the field; exit 2.
#[test]
fn bad_scenarios_name_file_line_and_field() {
    let defs = hourly("", "target = \"db\"");
    let cases: &[(&str, &str, &[&str])] = &[
        ("from = \"2026-11-02\"\ndays = \n", "scenario.toml:2", &[]),
        ("from = \"2026-11-02\"\n", "scenario.toml:1", &["no end"]),
        ("from = \"yesterday\"\ndays = 1\n", "scenario.toml:1", &["from", "yesterday"]),
        (
            "from = \"2026-11-02\"\ndays = 1\n\n[[failures]]\nkind = \"node\"\ngraph = \"nope\"\nnode = \"work\"\n",
            "scenario.toml:4",
            &["graph \"nope\"", "failures"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"node\"\ngraph = \"hourly\"\nnode = \"wrok\"\n",
            "scenario.toml:3",
            &["node \"wrok\""],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"node\"\ngraph = \"hourly\"\nnode = \"work\"\nprobabilty = 0.5\n",
            "scenario.toml:",
            &["probabilty"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"target_down\"\ntarget = \"dbb\"\nfor = \"1h\"\n",
            "scenario.toml:3",
            &["target \"dbb\""],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[durations]]\nuniform = [\"5m\", \"1m\"]\n",
            "scenario.toml:3",
            &["uniform", "min"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[durations]]\npool = \"big\"\nfixed = \"1m\"\n",
            "scenario.toml:3",
            &["pool \"big\""],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"leader_lost\"\n",
            "scenario.toml:3",
            &["leader_lost needs at"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"leader_lost\"\nat = \"+1h\"\nelection_timeout = [\"600ms\", \"400ms\"]\n",
            "scenario.toml:3",
            &["election_timeout", "600 ms"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"leader_lost\"\nat = \"+1h\"\nelection_timeout = [\"soon\", \"400ms\"]\n",
            "scenario.toml:3",
            &["election_timeout", "soon"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"leader_lost\"\nat = \"+1h\"\ndown = \"1s\"\n",
            "scenario.toml:3",
            &["leader_lost takes election_timeout", "not down"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[failures]]\nkind = \"engine_restart\"\nat = \"+1h\"\nelection_timeout = [\"1s\", \"2s\"]\n",
            "scenario.toml:3",
            &["election_timeout is for leader_lost"],
        ),
        (
            "from = \"2026-11-02\"\ndays = 1\n[[inputs]]\nkind = \"signal\"\nat = \"+1h\"\ngraph = \"hourly\"\nkey = \"a\"\n",
            "scenario.toml:3",
            &["keyed"],
        ),
    ];
    for (i, (scenario, at, words)) in cases.iter().enumerate() {
        let case = Case::new(&defs, scenario);
        let o = case.weir(&[]);
        let e = stderr(&o);
        assert_eq!(code(&o), 2, "#{i}: {e}");
        assert!(e.contains(at), "#{i}: want {at}: {e}");
        for w in *words {
            assert!(e.contains(w), "#{i}: want {w:?}: {e}");
        }
    }
}

/// --report writes one self-contained HTML page (inline SVG: a Gantt of
/// the runs, the breakers, the queue and each pool; no script, nothing
/// fetched) and the JSON that --json prints.
#[test]
fn html_report_is_self_contained() {
    let case = Case::new(
        &hourly("", "target = \"db\""),
        &format!(
            "{SPAN6H}[[failures]]\nkind = \"target_down\"\ntarget = \"db\"\nat = \"+2h59m\"\nfor = \"30m\"\n"
        ),
    );
    let out = case.dir.path().join("report");
    let o = case.weir(&["--json", "--report", out.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.starts_with("<!doctype html>"));
    assert!(
        html.matches("<svg").count() >= 4,
        "runs, breakers, queue, pool"
    );
    assert!(html.contains("hourly — runs"));
    assert!(html.contains("breakers open"));
    assert!(!html.contains("<script"));
    for src in ["src=", "href="] {
        assert!(!html.contains(src), "nothing is fetched: {src}");
    }
    let json = std::fs::read_to_string(out.join("report.json")).unwrap();
    assert_eq!(json, stdout(&o));
}

/// An engine restart and a lost worker each interrupt the attempt under
/// way at 02:05: it counts as an attempt, runs again, and its run settles
/// later than the others. A crashed queue does not: the pool's attempt goes
/// on and reports to the restarted queue. Every run completes.
#[test]
fn restarts_lost_workers_and_crashes() {
    let faults = [
        ("kind = \"engine_restart\"\ndown = \"2m\"\n", true),
        ("kind = \"worker_lost\"\npool = \"default\"\n", true),
        ("kind = \"actor_crash\"\nactor = \"queue\"\n", false),
    ];
    for (i, (fault, repeats)) in faults.iter().enumerate() {
        let case = Case::new(
            &hourly("", ""),
            &format!(
                "{SPAN6H}[[durations]]\nfixed = \"10m\"\n[[failures]]\nat = \"+2h5m\"\n{fault}"
            ),
        );
        let r = case.report(1);
        let f = &r.totals;
        assert_eq!(f.runs_completed, 5, "#{i}: {f:?}");
        assert_eq!(f.runs_unsettled, 0, "#{i}: {f:?}");
        assert!(f.lateness_p50 < 11 * MIN, "#{i}: the others: {f:?}");
        if *repeats {
            assert_eq!(f.attempts, 6, "#{i}: one attempt ran again: {f:?}");
            assert!(
                f.lateness_max > 15 * MIN,
                "#{i}: the interrupted run: {f:?}"
            );
        } else {
            assert_eq!(f.attempts, 5, "#{i}: {f:?}");
            assert!(f.lateness_max < 11 * MIN, "#{i}: {f:?}");
        }
        if i == 0 {
            assert_eq!(r.engine_restarts, 1);
        } else {
            assert!(r.actor_restarts >= 1, "#{i}");
        }
    }
}

/// A replicated engine's leader lost at 02:05: the attempt under way is
/// interrupted (it counts as an attempt and runs again under the new
/// leader), its run settles later by about the failover, drawn from the
/// election timeout range; every acknowledged ticket completes, once; the
/// report counts the loss and its failover. The default range is the one
/// `weir serve` members use.
#[test]
fn a_lost_leader_fails_over() {
    let cases = [
        ("election_timeout = [\"400ms\", \"600ms\"]\n", 400..600),
        ("election_timeout = [\"3m\", \"3m\"]\n", 180_000..180_001),
        (
            "",
            weir::replica::ELECTION_MIN_MS_DEFAULT..weir::replica::ELECTION_MAX_MS_DEFAULT,
        ),
    ];
    for (i, (range, want)) in cases.iter().enumerate() {
        let case = Case::new(
            &hourly("", ""),
            &format!(
                "{SPAN6H}[[durations]]\nfixed = \"10m\"\n[[failures]]\nkind = \"leader_lost\"\nat = \"+2h5m\"\n{range}"
            ),
        );
        let (sc, obs) = simulate_audited(&case.defs(), &case.scenario(), 1)
            .unwrap_or_else(|e| panic!("#{i}: {e}"));
        let audit = obs.tally.audit.clone().unwrap();
        // The run prepared for the firing at the span's end waits for it.
        let waiting = format!("hourly/{}/", "2026-11-02T05");
        let due: Vec<&String> = audit
            .enqueued
            .iter()
            .filter(|k| !k.starts_with(&waiting))
            .collect();
        assert_eq!(due.len(), 5, "#{i}: {:?}", audit.enqueued);
        for key in due {
            assert_eq!(audit.completed.get(key), Some(&1), "#{i}: {key}");
        }
        let r = report::build(&obs, &sc, 1);
        assert_eq!(r.leader_losses, 1, "#{i}");
        assert_eq!(r.engine_restarts, 0, "#{i}: a leader loss is not a restart");
        assert!(want.contains(&r.failover_ms), "#{i}: {} ms", r.failover_ms);
        let f = &r.totals;
        assert_eq!(
            (f.runs_completed, f.runs_unsettled, f.dead),
            (5, 0, 0),
            "#{i}: {f:?}"
        );
        assert_eq!(f.attempts, 6, "#{i}: one attempt ran again: {f:?}");
        // The run of 02:00 ran 5 min, lost its attempt, waited out the
        // failover, then ran its 10 min again.
        let late = r.graphs["hourly"]
            .runs
            .iter()
            .map(|x| x.settled_ms.unwrap() - x.started_ms)
            .max()
            .unwrap();
        assert!(late >= 15 * MIN + r.failover_ms, "#{i}: {late} ms");
        assert!(f.lateness_p50 < 11 * MIN, "#{i}: the others: {f:?}");
        // The table says so; --check knows both figures.
        let table = report::table::render(&r);
        assert!(table.contains("leader lost 1 time: "), "#{i}: {table}");
        let o = case.weir(&["--check", "leader_losses == 1", "failover_ms >= 400"]);
        assert_eq!(code(&o), 0, "#{i}: {}{}", stdout(&o), stderr(&o));
    }
}
