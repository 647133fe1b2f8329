//! `weir bench simulate --quick` runs the scaled examples through `weir
//! simulate` and ends with its `RESULT` line, every key set.

use std::process::Command;

#[test]
fn bench_simulate_quick_prints_its_result_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["bench", "simulate", "--quick"])
        .output()
        .expect("run weir bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "weir bench simulate --quick failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    assert!(line.starts_with("RESULT scenario=simulate "), "{line:?}");
    let value = |k: &str| -> f64 {
        line.split_whitespace()
            .find_map(|kv| kv.split_once('=').filter(|(key, _)| *key == k))
            .unwrap_or_else(|| panic!("RESULT line {line:?} has no {k}="))
            .1
            .parse()
            .unwrap_or_else(|e| panic!("{k} in {line:?}: {e}"))
    };
    for k in ["wall_s", "speedup", "events", "events_per_s", "rss_bytes"] {
        assert!(value(k) > 0.0, "{k} in {line:?}");
    }
    assert_eq!(value("virtual_days"), 1.0);
    assert!(value("runs") > 100.0, "{line:?}");
}
