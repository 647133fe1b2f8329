//! `weir validate PATH`: checks definitions and prints each graph, nodes in
//! topological order with their rules, pools and targets.

use std::path::Path;

use super::Failure;
use crate::definition;

/// Runs the command.
pub fn run(path: &Path) -> Result<u8, Failure> {
    let defs = definition::load(path).map_err(|e| Failure::input(e.to_string()))?;
    for loaded in &defs.graphs {
        let g = &loaded.graph;
        let d = g.def();
        println!("graph {} ({})", g.name(), loaded.file.display());
        println!("  definition {}", g.hash());
        let mut line = format!("  partitioning {:?}", d.partitioning).to_lowercase();
        if let Some(c) = &d.cron {
            line.push_str(&format!(", cron \"{c}\", catchup {}", d.catchup));
        }
        if d.keyed.is_some() {
            line.push_str(", keyed");
        }
        println!(
            "{line}, max_active_runs {}, retention {} ms",
            d.max_active_runs, d.retention_ms
        );
        for &i in g.topological_order() {
            let n = g.node_at(i);
            let ups: Vec<&str> = n.upstreams.iter().map(|u| u.as_str()).collect();
            println!(
                "  {:<24} rule {:<28} pool {:<10} target {:<12} task {:<10} upstreams [{}]",
                n.name.as_str(),
                n.trigger_rule.to_string(),
                n.pool.as_str(),
                n.target.as_ref().map_or("-", |t| t.as_str()),
                n.task.task.as_str(),
                ups.join(", ")
            );
        }
    }
    println!("{} graph(s) valid", defs.graphs.len());
    Ok(0)
}
