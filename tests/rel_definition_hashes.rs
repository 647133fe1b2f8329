//! Hashes of definitions, pinned: a definition's content hash identifies
//! it in every store that adopted it (a run keeps the hash it started
//! with; adoption compares hashes), so no change to how the hash is
//! computed may change the hash of an existing definition. The values
//! below were computed by the first implementation (canonical JSON through
//! `serde_json::Value`), before the hash was written straight from the
//! definition (issue 13, validation speed).
//!
//! Definitions are parsed with `/` as their folder, so a command's
//! absolute `cwd` (part of what is hashed) is the same on every machine.

use std::path::Path;

use weir::definition;

fn hash_of(what: &str, text: &str) -> String {
    let (graph, _, _) = definition::parse(text, Path::new("pinned.toml"), Path::new("/"))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    graph.hash().to_string()
}

/// A definition using every field: cron with a start, targets with a
/// failure rate and probes, pools, retries with floats, timeouts, trigger
/// rules, an HTTP node, a command with env, and a task node whose config
/// nests tables, arrays, floats, booleans and escaped strings.
const RICH: &str = r#"
name = "rich.v2"
partitioning = "hourly"
cron = "15 * * * *"
catchup = true
start = "2026-01-01"
retention = "3d"
max_active_runs = 7

[pools]
default = 3
io = 2

[targets.api]
failure_rate = 0.25
window = 8
min_calls = 4
cooldown = "45s"
probes = 3
probe_failures = 2

[targets.db]
failures = 4

[[nodes]]
name = "z-last"
command = ["sh", "-c", "echo {partition} \"quoted\" \\ back"]
env = { B = "2", A = "1 é" }
permanent_exit_codes = [3, 2]
timeout = "90s"
retry = { attempts = 0, initial = "150ms", multiplier = 1.5, max = "7s", jitter = 0.3, deadline = "2h" }

[[nodes]]
name = "a-first"
upstreams = ["z-last"]
trigger_rule = "one_failed"
pool = "io"
target = "db"
task = "custom"
config = { scale = 0.1, big = 9223372036854775807, neg = -7, on = true, list = [1, 2.5, "x", { k = "v" }], nested = { "b key" = [], a = { deep = "tab\tnl\n" } } }

[[nodes]]
name = "mid"
upstreams = ["z-last", "a-first"]
trigger_rule = "none_failed_min_one_success"
target = "api"
http = { method = "POST", url = "https://api.example.com/v1/{partition}", headers = { Authorization = "Bearer ${env:TOKEN}", Accept = "*/*" }, body = '{"day": "{partition}"}', expect = [200, 204] }
"#;

/// examples/etl/etl.toml as it was when the hashes were pinned (the example
/// has since gained params and templates, a new definition with a new hash).
const ETL_PINNED: &str = r#"
# A daily ETL: extract -> three transforms -> load -> report.
# Run it:  cargo run --release -- run examples/etl --backfill 2026-11-01..2026-11-07 --until-idle
name = "etl"
partitioning = "daily"
cron = "0 2 * * *"        # each day at 02:00 UTC, start yesterday's window
catchup = false
retention = "30d"
max_active_runs = 4

[pools]
default = 4

[targets.warehouse]
failures = 3
cooldown = "10s"

[[nodes]]
name = "extract"
command = ["python3", "etl.py", "extract", "{partition}"]
timeout = "1m"
retry = { attempts = 3, initial = "200ms", multiplier = 2.0, max = "5s" }

[[nodes]]
name = "clean"
upstreams = ["extract"]
command = ["python3", "etl.py", "clean", "{partition}"]
permanent_exit_codes = [2]

[[nodes]]
name = "enrich"
upstreams = ["extract"]
command = ["python3", "etl.py", "enrich", "{partition}"]
permanent_exit_codes = [2]

[[nodes]]
name = "aggregate"
upstreams = ["extract"]
command = ["python3", "etl.py", "aggregate", "{partition}"]
permanent_exit_codes = [2]

[[nodes]]
name = "load"
upstreams = ["clean", "enrich", "aggregate"]
target = "warehouse"
command = ["python3", "etl.py", "load", "{partition}"]
retry = { attempts = 5, initial = "500ms", max = "10s" }

[[nodes]]
name = "report"
upstreams = ["load"]
command = ["python3", "etl.py", "report", "{partition}"]
"#;

const KEYED: &str = r#"
name = "keys"
partitioning = "keyed"
[keyed]
inventory = { command = ["python3", "list.py", "--all"] }
refresh = "1m"
interval = "2h"
retry_interval = "10m"
jitter = "30s"
batch_size = 50
lease = "20m"
debounce = { delay = "5s", max_wait = "1m" }
[[nodes]]
name = "check"
command = ["true"]
"#;

#[test]
fn hashes_of_existing_definitions_never_change() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let read = |f: &str| std::fs::read_to_string(examples.join(f)).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "examples/etl/etl.toml as pinned",
            ETL_PINNED.to_string(),
            "c25f3a96e495388a576c83dc02ae38403261524cb5e9ee2ecceac77a9b6038b0",
        ),
        (
            "examples/fanout/fanout.toml",
            read("fanout/fanout.toml"),
            "2e8dab5f78aa3da1bd2c2884213e27f26464dad94fca19c92b2013447ac27128",
        ),
        (
            "rich",
            RICH.to_string(),
            "daf3272f7832e5f140add419d33e12c3739bb56912c90f723f89835664747cfa",
        ),
        (
            "keyed",
            KEYED.to_string(),
            "494dbe37464406dbc76ae7a39ae632828d57845717eb3680584676be8015ea1e",
        ),
        (
            "the validate bench's 2,000 nodes",
            weir::bench::validate::definition_text(2_000),
            "c45a1db01165097bdf70f339ecc50c611508b1dcfa0d1e7680f8c61369a5f282",
        ),
    ];
    for (i, (what, text, want)) in cases.iter().enumerate() {
        let got = hash_of(what, text);
        assert_eq!(&got, want, "#{i}: {what}: the hash changed");
    }
}
