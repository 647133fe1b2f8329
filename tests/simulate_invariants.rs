//! The invariant mode: weir's own invariants under `weir simulate`'s
//! faults. Each seed draws a scenario — engine restarts (killed, reopened
//! on its store), a replicated engine's leader lost (a failover), lost
//! workers, crashed actors (queue, pool, breaker, scheduler, trigger), a
//! target flapping down and up (its breaker opening and closing), failing
//! attempts and log-normal durations — over a chain graph and a guarded
//! one, runs it, and checks, as the span runs (the driver's `audit`: a
//! violation stops it, naming its virtual instant):
//!
//! - no ticket completes twice: caught at its second completion;
//! - nothing acknowledged is lost: at the quiet instant after every fault
//!   and every `driver::AUDIT_EVERY_MS` of virtual time, every ticket
//!   enqueued and not completed is pending or leased in the queue (its
//!   state rebuilt from the store after a fault) or done in the store;
//!
//! and at the span's end:
//!
//! - nothing acknowledged is lost: every ticket enqueued completes;
//! - no node is recorded twice: no ticket completes twice;
//! - every run settles (the faults stop two hours before the span ends);
//! - the seed replays: a second run holds them too, and gives the same
//!   report (asserted for a seed asked for with `WEIR_SIM_SEED`; across a
//!   sweep a differing replay is printed: under load, what an injected
//!   crash interrupts can still depend on thread timing — about one seed
//!   in 200 per soak diverges, and replays identically alone).
//!
//! A failing seed is printed with its scenario; `WEIR_SIM_SEED=N` replays
//! one. `SEEDS_SHORT` seeds in `cargo test`, `SEEDS_SOAK` with
//! `WEIR_SOAK=1`.

mod simulate_support;

use std::fmt::Write as _;

use rand::{Rng, SeedableRng};
use simulate_support::*;
use weir::simulate::report;

const SEEDS_SHORT: u64 = 6;
const SEEDS_SOAK: u64 = 200;

const CHAIN: &str = r#"name = "chain"
partitioning = "hourly"
cron = "0 * * * *"

[[nodes]]
name = "a"
command = ["true"]
retry = { attempts = 5, initial = "5s" }

[[nodes]]
name = "b"
upstreams = ["a"]
command = ["true"]
retry = { attempts = 5, initial = "5s" }

[[nodes]]
name = "c"
upstreams = ["b"]
command = ["true"]
retry = { attempts = 5, initial = "5s" }
"#;

/// A scenario of 12 hours whose faults fall in the first ten.
fn scenario(seed: u64) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut s = String::from(
        "from = \"2026-11-02T00:00:00Z\"\nuntil = \"2026-11-02T12:00:00Z\"\n\
         [[durations]]\nlognormal = { p50 = \"30s\", p99 = \"4m\" }\n\
         [[failures]]\nkind = \"node\"\ngraph = \"chain\"\nnode = \"b\"\nprobability = 0.1\n",
    );
    let at = |rng: &mut rand::rngs::StdRng| format!("+{}s", rng.gen_range(60..10 * 3600));
    for _ in 0..rng.gen_range(1..=2) {
        let _ = write!(
            s,
            "[[failures]]\nkind = \"engine_restart\"\nat = \"{}\"\ndown = \"{}s\"\n",
            at(&mut rng),
            rng.gen_range(1..300)
        );
    }
    for _ in 0..rng.gen_range(0..=1) {
        let min_ms = rng.gen_range(100..2_000);
        let _ = write!(
            s,
            "[[failures]]\nkind = \"leader_lost\"\nat = \"{}\"\nelection_timeout = [\"{min_ms}ms\", \"{}ms\"]\n",
            at(&mut rng),
            min_ms + rng.gen_range(0..5_000)
        );
    }
    for _ in 0..rng.gen_range(1..=3) {
        let _ = write!(
            s,
            "[[failures]]\nkind = \"worker_lost\"\nat = \"{}\"\n",
            at(&mut rng)
        );
    }
    let actors = ["queue", "pool", "breaker", "scheduler", "trigger"];
    for _ in 0..rng.gen_range(1..=4) {
        let _ = write!(
            s,
            "[[failures]]\nkind = \"actor_crash\"\nactor = \"{}\"\nat = \"{}\"\n",
            actors[rng.gen_range(0..actors.len())],
            at(&mut rng)
        );
    }
    for _ in 0..rng.gen_range(1..=3) {
        let _ = write!(
            s,
            "[[failures]]\nkind = \"target_down\"\ntarget = \"db\"\nat = \"{}\"\nfor = \"{}s\"\n",
            at(&mut rng),
            rng.gen_range(10..600)
        );
    }
    s
}

/// Runs `seed`; the violations found, none when sound.
fn check(seed: u64) -> Result<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let defs_dir = dir.path().join("defs");
    std::fs::create_dir(&defs_dir).unwrap();
    std::fs::write(defs_dir.join("chain.toml"), CHAIN).unwrap();
    std::fs::write(
        defs_dir.join("guarded.toml"),
        hourly("", "target = \"db\"").replace("name = \"hourly\"", "name = \"guarded\""),
    )
    .unwrap();
    let text = scenario(seed);
    let path = dir.path().join("scenario.toml");
    std::fs::write(&path, &text).unwrap();
    let (sc, obs) = simulate_audited(&defs_dir, &path, seed)?;
    let audit = obs.tally.audit.clone().expect("audited");
    // Runs prepared ahead for the firing at the span's end wait for it.
    let waiting: std::collections::BTreeSet<String> = obs
        .runs
        .iter()
        .flat_map(|(g, runs)| {
            runs.iter()
                .filter(|r| r.record.started_ms() >= sc.until_ms)
                .map(move |r| format!("{g}/{}/", r.partition))
        })
        .collect();
    let mut bad = Vec::new();
    if audit.present_checked == 0 {
        bad.push("the checks during the span found no ticket to check".into());
    }
    for key in &audit.enqueued {
        if waiting.iter().any(|w| key.starts_with(w.as_str())) {
            continue;
        }
        match audit.completed.get(key) {
            None => bad.push(format!("acknowledged ticket {key} never completed")),
            Some(n) if *n > 1 => bad.push(format!("ticket {key} completed {n} times")),
            _ => {}
        }
    }
    let r = report::build(&obs, &sc, seed);
    if r.totals.runs_unsettled > 0 {
        bad.push(format!("{} runs never settled", r.totals.runs_unsettled));
    }
    if r.engine_restarts == 0 {
        bad.push("no engine restart happened".into());
    }
    if bad.is_empty() {
        Ok(weir::simulate::cli::to_json(&r))
    } else {
        Err(bad.join("\n"))
    }
}

#[test]
fn invariants_hold_under_faults() {
    let seeds: Vec<u64> = match std::env::var("WEIR_SIM_SEED") {
        Ok(s) => vec![s.parse().expect("WEIR_SIM_SEED is a number")],
        Err(_) if std::env::var_os("WEIR_SOAK").is_some() => (1..=SEEDS_SOAK).collect(),
        Err(_) => (1..=SEEDS_SHORT).collect(),
    };
    for seed in seeds {
        let first = check(seed).unwrap_or_else(|e| {
            panic!(
                "seed {seed} broke an invariant (replay: WEIR_SIM_SEED={seed} cargo test --test simulate_invariants):\n{e}\nscenario:\n{}",
                scenario(seed)
            )
        });
        let second = check(seed).unwrap_or_else(|e| panic!("seed {seed}, replayed: {e}"));
        // A replay that differs is a known gap after injected faults under
        // load (docs/simulate.md): printed, and a failure only when the seed
        // was asked for (WEIR_SIM_SEED), where exact replay is the point.
        let asked = std::env::var_os("WEIR_SIM_SEED").is_some();
        if first != second && !asked {
            eprintln!("seed {seed}: the replay differs (invariants held in both runs)");
        } else if first != second {
            let diff: Vec<String> = first
                .lines()
                .zip(second.lines())
                .filter(|(a, b)| a != b)
                .take(6)
                .map(|(a, b)| format!("  {a}\n  {b}"))
                .collect();
            panic!(
                "seed {seed} did not replay exactly (WEIR_SIM_SEED={seed}); first differences:\n{}\nscenario:\n{}",
                diff.join("\n"),
                scenario(seed)
            );
        }
    }
}
