//! Shared setup of the artifact tests: a 1 → N → 1 graph whose nodes pass
//! files (a `make` node writes a random file and a small one under a
//! folder, each `m<i>` reads them through a template and
//! `$WEIR_ARTIFACTS_IN` and writes its own part, and `join` lists the
//! parts it received with their sizes), and what the store holds.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::Path;

/// The definition of graph `name` with `width` middle nodes; `make`
/// writes `bytes` random bytes. Extra TOML goes under the graph's keys.
pub fn fan_graph(name: &str, width: usize, bytes: usize, extra: &str) -> String {
    let mut t = format!(
        r#"name = "{name}"
partitioning = "daily"
{extra}
[pools]
default = 8

[[nodes]]
name = "make"
command = ["sh", "-c", "head -c {bytes} /dev/urandom > \"$WEIR_ARTIFACTS_OUT/data.bin\" && mkdir -p \"$WEIR_ARTIFACTS_OUT/logs\" && echo {{partition}} > \"$WEIR_ARTIFACTS_OUT/logs/p.txt\" && echo scratch > \"$WEIR_ARTIFACTS_OUT/not-an-artifact.tmp\""]
artifacts = ["data.bin", "logs/*.txt"]
retry = {{ attempts = 3, initial = "100ms" }}
"#
    );
    let mut ups = Vec::new();
    for i in 0..width {
        t.push_str(&format!(
            r#"
[[nodes]]
name = "m{i}"
upstreams = ["make"]
command = ["sh", "-c", "cat {{upstream.make.artifact.data.bin}} \"$WEIR_ARTIFACTS_IN/make/logs/p.txt\" > \"$WEIR_ARTIFACTS_OUT/part.bin\" && echo {i} >> \"$WEIR_ARTIFACTS_OUT/part.bin\""]
artifacts = ["part.bin"]
retry = {{ attempts = 3, initial = "100ms" }}
"#
        ));
        ups.push(format!("\"m{i}\""));
    }
    t.push_str(&format!(
        r#"
[[nodes]]
name = "join"
upstreams = [{}]
command = ["sh", "-c", "cd \"$WEIR_ARTIFACTS_IN\" && for f in */part.bin; do echo \"$f $(wc -c < $f)\"; done > \"$WEIR_OUTPUT\""]
retry = {{ attempts = 3, initial = "100ms" }}
"#,
        ups.join(", ")
    ));
    t
}

/// What `join` should list for a partition `p` when `make` wrote `bytes`.
pub fn join_listing(width: usize, bytes: usize, p: &str) -> String {
    let mut lines: Vec<(String, usize)> = (0..width)
        .map(|i| {
            (
                format!("m{i}/part.bin"),
                bytes + p.len() + 1 + i.to_string().len() + 1,
            )
        })
        .collect();
    // The shell's glob sorts as the C locale does.
    lines.sort();
    lines.iter().map(|(f, n)| format!("{f} {n}\n")).collect()
}

/// The content hashes a folder store holds (`artifacts/blake3/<hash>`
/// under it).
pub fn folder_hashes(store: &Path) -> BTreeSet<String> {
    std::fs::read_dir(store.join("artifacts/blake3"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.len() == 64)
                .collect()
        })
        .unwrap_or_default()
}
