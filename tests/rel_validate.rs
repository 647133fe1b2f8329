//! Validation of a large definition stays linear and keeps its line
//! numbers exact (issue 13, item 6): a 20k-node chain validates in well
//! under the time the per-node rescan of the file took, and an error
//! planted at node 19,999 names that node's line, whichever stage finds it
//! (the TOML reader, the conversion into the model, the graph's checks).

use std::path::Path;
use std::time::{Duration, Instant};

use weir::definition;

/// Nodes of the generated chain.
const NODES: usize = 20_000;
/// The node an error is planted in (0-based index 19,998: the 19,999th).
const PLANTED: usize = NODES - 2;
/// Validating the chain must take less than this, even in a debug build.
/// The quadratic line lookup took minutes for this size in a debug build.
const VALIDATE_TIME_MAX: Duration = Duration::from_secs(20);

/// What is planted in node `PLANTED`.
#[derive(Debug, Clone, Copy, Default)]
struct Plant {
    /// Lines added at the end of its table.
    extra: &'static [&'static str],
    /// Its name instead of its own.
    name: Option<&'static str>,
    /// Its upstream instead of the node before it.
    upstream: Option<&'static str>,
}

/// A chain of `NODES` nodes in `[[nodes]]` tables, with `plant` in node
/// `PLANTED`. Returns the text and the line of the planted node's
/// `[[nodes]]` header and of its first extra line.
fn chain(plant: Plant) -> (String, usize, usize) {
    // Declared pools, so that a node's unknown pool is an error.
    let mut text = String::from("name = \"chain\"\n\n[pools]\ndefault = 2\n\n");
    let mut line = 6; // The next line to be written.
    let mut header = 0;
    let mut extra_line = 0;
    for i in 0..NODES {
        text.push_str("[[nodes]]\n");
        if i == PLANTED {
            header = line;
        }
        line += 1;
        let n = match plant.name {
            Some(n) if i == PLANTED => n.to_string(),
            _ => format!("n{i}"),
        };
        text.push_str(&format!("name = \"{n}\"\n"));
        line += 1;
        if i > 0 {
            let up = match plant.upstream {
                Some(u) if i == PLANTED => u.to_string(),
                _ => format!("n{}", i - 1),
            };
            text.push_str(&format!("upstreams = [\"{up}\"]\n"));
            line += 1;
        }
        text.push_str("command = [\"true\"]\n");
        line += 1;
        if i == PLANTED {
            extra_line = line;
            for e in plant.extra {
                text.push_str(e);
                text.push('\n');
                line += 1;
            }
        }
    }
    (text, header, extra_line)
}

/// Which line a case's error should name.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// The planted node's `[[nodes]]` header.
    Header,
    /// The first extra line.
    Extra,
}

#[test]
fn a_large_chain_validates_in_linear_time() {
    let (text, _, _) = chain(Plant::default());
    let started = Instant::now();
    let (graph, _, _) = definition::parse(&text, Path::new("chain.toml"), Path::new("."))
        .unwrap_or_else(|e| panic!("the chain is valid: {e}"));
    let took = started.elapsed();
    assert_eq!(graph.def().nodes.len(), NODES);
    assert!(
        took < VALIDATE_TIME_MAX,
        "validating {NODES} nodes took {took:?}, over {VALIDATE_TIME_MAX:?}"
    );
}

#[test]
fn an_error_at_node_19999_names_its_line() {
    let planted = format!("n{PLANTED}");
    // One row per stage that can find an error.
    let plant = |extra| Plant {
        extra,
        ..Plant::default()
    };
    let cases: &[(&str, Plant, Want, &str)] = &[
        (
            "toml: a field of the wrong type",
            plant(&["timeout = 5"]),
            Want::Extra,
            "invalid type",
        ),
        (
            "toml: an unknown field",
            plant(&["colour = \"red\""]),
            Want::Extra,
            "unknown field",
        ),
        (
            "conversion: a bad duration",
            plant(&["timeout = \"soon\""]),
            Want::Header,
            "field timeout",
        ),
        (
            "conversion: a bad trigger rule",
            plant(&["trigger_rule = \"whenever\""]),
            Want::Header,
            "field trigger_rule",
        ),
        (
            "graph: a pool the graph does not have",
            plant(&["pool = \"nowhere\""]),
            Want::Header,
            "pool \"nowhere\"",
        ),
        (
            "graph: an upstream that is not a node",
            Plant {
                upstream: Some("nowhere"),
                ..Plant::default()
            },
            Want::Header,
            "upstream \"nowhere\"",
        ),
        (
            "graph: a name declared twice (the second declaration)",
            Plant {
                name: Some("n7"),
                ..Plant::default()
            },
            Want::Header,
            "more than once",
        ),
    ];
    for (i, (what, plant, want, says)) in cases.iter().enumerate() {
        let (text, header, extra_line) = chain(*plant);
        let want_line = match want {
            Want::Header => header,
            Want::Extra => extra_line,
        };
        let err = match definition::parse(&text, Path::new("chain.toml"), Path::new(".")) {
            Ok(_) => panic!("#{i}: {what}: the definition was accepted"),
            Err(e) => e,
        };
        assert_eq!(
            err.line,
            Some(want_line),
            "#{i}: {what}: got line {:?}, want {want_line} ({err})",
            err.line
        );
        assert!(
            err.what.contains(says),
            "#{i}: {what}: message {:?} does not say {says:?}",
            err.what
        );
        if plant.name.is_none() && !matches!(want, Want::Extra) {
            assert!(
                err.what.contains(&planted),
                "#{i}: {what}: message {:?} does not name node {planted}",
                err.what
            );
        }
    }
}
