//! The keys of the records of graphs and jobs, and the run ids that are
//! both a task instance's queue key and its node record's key (see
//! [`super::graph`] for the whole key layout).

use weir_core::partition::Partition;

/// The key of a graph record.
pub fn graph_key(graph: &str) -> String {
    format!("graph/{graph}")
}

/// The prefix of graph records.
pub const GRAPH_PREFIX: &str = "graph/";

/// The key of a definition.
pub fn def_key(hash: &str) -> String {
    format!("def/{hash}")
}

/// The key of a graph run.
pub fn run_key(graph: &str, partition: &Partition) -> String {
    format!("run/{graph}/{partition}")
}

/// The prefix of a graph's runs.
pub fn runs_prefix(graph: &str) -> String {
    format!("run/{graph}/")
}

/// The run id (queue key) of a task instance.
pub fn run_id(graph: &str, partition: &Partition, node: &str, rerun: u32) -> String {
    format!("{graph}/{partition}/{node}/{rerun}")
}

/// The run id (queue key) of member `member` of generation `rerun` of a
/// mapped node.
pub fn member_id(
    graph: &str,
    partition: &Partition,
    node: &str,
    rerun: u32,
    member: u32,
) -> String {
    format!("{graph}/{partition}/{node}/{rerun}/{member}")
}

/// The key of a mapped node's ledger of generation `rerun`.
pub fn ledger_key(graph: &str, partition: &Partition, node: &str, rerun: u32) -> String {
    format!("{LEDGER_PREFIX}{graph}/{partition}/{node}/{rerun}")
}

/// The prefix of mapped nodes' ledgers.
pub const LEDGER_PREFIX: &str = "map/";

/// The prefix of a run's node records.
pub fn node_records_prefix(graph: &str, partition: &Partition) -> String {
    format!("{DONE_PREFIX}{graph}/{partition}/")
}

/// A parsed run id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunId {
    /// The graph.
    pub graph: String,
    /// The partition, as written.
    pub partition: String,
    /// The node.
    pub node: String,
    /// The rerun count.
    pub rerun: u32,
}

/// Parses a run id; `None` for a key that is not one.
pub fn parse_run_id(key: &str) -> Option<RunId> {
    let mut parts = key.split('/');
    let graph = parts.next()?;
    let partition = parts.next()?;
    let node = parts.next()?;
    let rerun = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some(RunId {
        graph: graph.to_string(),
        partition: partition.to_string(),
        node: node.to_string(),
        rerun,
    })
}

/// Parses the run id of a task instance (four parts) or of a mapped
/// node's member (five: the member's index last); `None` for any other
/// key.
pub fn parse_node_key(key: &str) -> Option<(RunId, Option<u32>)> {
    if let Some(id) = parse_run_id(key) {
        return Some((id, None));
    }
    let (head, member) = key.rsplit_once('/')?;
    if member.is_empty() || !member.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let id = parse_run_id(head)?;
    Some((id, Some(member.parse().ok()?)))
}

/// The prefix of done records.
pub const DONE_PREFIX: &str = "done/";

/// The record key of a ticket key.
pub fn done_key(key: &str) -> String {
    let mut k = String::with_capacity(DONE_PREFIX.len() + key.len());
    k.push_str(DONE_PREFIX);
    k.push_str(key);
    k
}

/// The prefix of dead letters.
pub const DEAD_PREFIX: &str = "dead/";

/// The dead-letter key of a ticket key.
pub fn dead_key(key: &str) -> String {
    let mut k = String::with_capacity(DEAD_PREFIX.len() + key.len());
    k.push_str(DEAD_PREFIX);
    k.push_str(key);
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_round_trip() {
        let p: Partition = "2026-11-29".parse().unwrap();
        let id = run_id("etl", &p, "load", 3);
        assert_eq!(id, "etl/2026-11-29/load/3");
        let parsed = parse_run_id(&id).unwrap();
        assert_eq!(
            parsed,
            RunId {
                graph: "etl".into(),
                partition: "2026-11-29".into(),
                node: "load".into(),
                rerun: 3
            }
        );
        let keyed: Partition = "key=a;b@c:d".parse().unwrap();
        let id = run_id("g", &keyed, "n", 0);
        assert_eq!(parse_run_id(&id).unwrap().partition, "key=a;b@c:d");
        assert_eq!(parse_run_id("no-slashes"), None);
        assert_eq!(parse_run_id("a/b/c/x"), None);
        assert_eq!(parse_run_id("a/b/c/1/extra"), None);
        let m = member_id("etl", &p, "load", 2, 17);
        assert_eq!(m, "etl/2026-11-29/load/2/17");
        assert_eq!(parse_run_id(&m), None, "a member is no task instance");
        let (id, member) = parse_node_key(&m).unwrap();
        assert_eq!((id.node.as_str(), id.rerun, member), ("load", 2, Some(17)));
        assert_eq!(parse_node_key("etl/2026-11-29/load/2").unwrap().1, None);
        for bad in ["a/b/c/1/x", "a/b/c/1/", "a/b/c/x/1", "a/b/c/1/2/3", "plain"] {
            assert_eq!(parse_node_key(bad), None, "{bad}");
        }
    }
}
