//! Determinism of `weir simulate`: the same definitions, scenario and seed
//! give a byte-identical JSON report. Checked on every scenario of the
//! examples (`examples/*/scenarios/*.toml`), and on a scenario with every
//! random element (log-normal durations, failures by probability, a target
//! down, a breaker) over many seeds: `SEEDS_SHORT` here, `SEEDS_SOAK` with
//! `WEIR_SOAK=1`. A seed whose replay differs is printed.

mod simulate_support;

use std::collections::BTreeSet;

use simulate_support::*;

const SEEDS_SHORT: u64 = 12;
const SEEDS_SOAK: u64 = 100;

fn replays(defs: &std::path::Path, scenario: &std::path::Path, seed: u64) -> String {
    let first = json(defs, scenario, seed);
    let second = json(defs, scenario, seed);
    if first != second {
        let (a, b) = (first.lines(), second.lines());
        let diff: Vec<String> = a
            .zip(b)
            .filter(|(x, y)| x != y)
            .take(5)
            .map(|(x, y)| format!("  {x}\n  {y}"))
            .collect();
        panic!(
            "seed {seed} of {} did not replay byte for byte; first differences:\n{}",
            scenario.display(),
            diff.join("\n")
        );
    }
    first
}

fn example(name: &str) {
    let scenarios: Vec<_> = example_scenarios()
        .into_iter()
        .filter(|(d, _)| d.ends_with(name))
        .collect();
    assert!(!scenarios.is_empty(), "examples/{name} has no scenario");
    for (defs, scenario) in scenarios {
        let out = replays(&defs, &scenario, 7);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(
            v["totals"]["runs_started"].as_u64().unwrap() > 0,
            "{}: no run started",
            scenario.display()
        );
        assert_eq!(v["events_lagged"], 0, "{}", scenario.display());
    }
}

#[test]
fn every_example_has_a_scenario() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let with: BTreeSet<_> = example_scenarios()
        .into_iter()
        .map(|(d, _)| d.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            assert!(
                with.contains(&name),
                "examples/{name} has no scenarios/*.toml"
            );
        }
    }
}

#[test]
fn example_etl_replays_byte_for_byte() {
    example("etl");
}

#[test]
fn example_fanout_replays_byte_for_byte() {
    example("fanout");
}

#[test]
fn example_hosts_replays_byte_for_byte() {
    example("hosts");
}

/// Two runs of the orders example are active at once, with a mapped node
/// under `max_active_members`: which member reaches the queue first used to
/// depend on how the scheduler's store writes, on a blocking thread,
/// interleaved with its other work. They run on the simulation's own thread
/// now (`weir_actors::blocking`), so it replays byte for byte too, over
/// several seeds.
#[test]
fn example_orders_replays_byte_for_byte() {
    example("orders");
    let scenarios: Vec<_> = example_scenarios()
        .into_iter()
        .filter(|(d, _)| d.ends_with("orders"))
        .collect();
    for (defs, scenario) in scenarios {
        for seed in [1, 2, 3] {
            replays(&defs, &scenario, seed);
        }
    }
}

/// Every seed replays exactly, and seeds differ: the draws come from them.
#[test]
fn random_seeds_replay_exactly() {
    let seeds = if std::env::var_os("WEIR_SOAK").is_some() {
        SEEDS_SOAK
    } else {
        SEEDS_SHORT
    };
    let case = Case::new(
        &hourly("sla = \"20m\"", "target = \"db\""),
        "from = \"2026-11-02T00:00:00Z\"\ndays = 1\n\
         [[durations]]\nlognormal = { p50 = \"5m\", p99 = \"40m\" }\n\
         [[failures]]\nkind = \"node\"\ngraph = \"hourly\"\nnode = \"work\"\nprobability = 0.3\n\
         [[failures]]\nkind = \"target_down\"\ntarget = \"db\"\nat = \"+6h\"\nfor = \"2h\"\n",
    );
    let mut distinct = BTreeSet::new();
    for seed in 1..=seeds {
        let out = replays(&case.defs(), &case.scenario(), seed);
        // The seed is in the report; the rest must vary with it too.
        distinct.insert(out.replace(&format!("\"seed\": {seed},"), ""));
    }
    assert!(
        distinct.len() as u64 > seeds / 2,
        "{} distinct reports of {seeds} seeds",
        distinct.len()
    );
}

/// A lost leader replays byte for byte, its failover drawn from the seed:
/// a few seeds, each run twice, and not every seed draws the same.
#[test]
fn a_lost_leader_replays_exactly() {
    let case = Case::new(
        &hourly("", "target = \"db\""),
        "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T08:00:00Z\"\n\
         [[durations]]\nlognormal = { p50 = \"5m\", p99 = \"20m\" }\n\
         [[failures]]\nkind = \"leader_lost\"\nat = \"+2h5m\"\n\
         [[failures]]\nkind = \"leader_lost\"\nat = \"+4h30m\"\nelection_timeout = [\"1s\", \"30s\"]\n",
    );
    let mut failovers = BTreeSet::new();
    for seed in 1..=4 {
        let out = replays(&case.defs(), &case.scenario(), seed);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["leader_losses"], 2, "seed {seed}");
        let ms = v["failover_ms"].as_u64().unwrap();
        assert!((1_400..30_600).contains(&ms), "seed {seed}: {ms} ms");
        failovers.insert(ms);
    }
    assert!(failovers.len() > 1, "every seed drew {failovers:?}");
}

/// The store's trees in memory (the default) and on sled's files give the
/// same report byte for byte, crashes and failovers included: what a
/// restarted engine replays from memory is what it replays from sled. An
/// unknown choice is refused, naming the variable.
#[test]
fn memory_and_sled_trees_give_the_same_report() {
    let case = Case::new(
        &hourly("sla = \"20m\"", "target = \"db\""),
        "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T10:00:00Z\"\n\
         [[durations]]\nlognormal = { p50 = \"5m\", p99 = \"40m\" }\n\
         [[failures]]\nkind = \"node\"\ngraph = \"hourly\"\nnode = \"work\"\nprobability = 0.3\n\
         [[failures]]\nkind = \"target_down\"\ntarget = \"db\"\nat = \"+3h\"\nfor = \"1h\"\n\
         [[failures]]\nkind = \"engine_restart\"\nat = \"+2h10m\"\n\
         [[failures]]\nkind = \"leader_lost\"\nat = \"+5h20m\"\n",
    );
    let mut cases: Vec<(std::path::PathBuf, std::path::PathBuf)> =
        vec![(case.defs(), case.scenario())];
    cases.extend(
        example_scenarios()
            .into_iter()
            .filter(|(d, _)| d.ends_with("orders")),
    );
    for (defs, scenario) in cases {
        let run = |store: &str| {
            let out = weir_simulate_env(
                &defs,
                &scenario,
                &["--seed", "5", "--json"],
                &[("WEIR_SIMULATE_STORE", store)],
            );
            assert!(
                matches!(code(&out), 0 | 1),
                "{} on {store}: {}",
                scenario.display(),
                stderr(&out)
            );
            (code(&out), stdout(&out))
        };
        let memory = run("memory");
        let sled = run("sled");
        assert!(memory.1.contains("runs_started"), "{}", memory.1);
        assert_eq!(
            memory,
            sled,
            "{}: memory and sled differ",
            scenario.display()
        );
    }
    let out = weir_simulate_env(
        &case.defs(),
        &case.scenario(),
        &["--seed", "5"],
        &[("WEIR_SIMULATE_STORE", "disk")],
    );
    assert_ne!(code(&out), 0);
    assert!(
        stderr(&out).contains("WEIR_SIMULATE_STORE=\"disk\""),
        "{}",
        stderr(&out)
    );
}
