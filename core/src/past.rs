//! `depends_on_past`: whether a node may start, given the same node of the
//! previous partition (Airflow's rule).
//!
//! A node that depends on its past starts only once the same node of the
//! previous partition has succeeded or been skipped (with
//! `wait_for_downstream`, that node's direct downstreams too). The previous
//! partition is the time window before this one, or the run of the same key
//! before this one. The first partition of a graph, one whose previous
//! window is before the graph's `start` or that is the earliest run there
//! is, does not wait. The actor gathers those facts from the store; this
//! module decides.

use crate::partition::Partition;
use crate::readiness::NodeState;

/// What is known of the previous partition of a run, for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    /// This is the first partition: nothing to wait for.
    First,
    /// The previous partition has no run yet.
    Missing(Partition),
    /// The previous partition's run, with the states of the node (and of
    /// its direct downstreams, with `wait_for_downstream`) there.
    Run(Partition, Vec<NodeState>),
}

/// Whether the node may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PastGate {
    /// It may.
    Go,
    /// It waits for this partition.
    Wait(Partition),
}

/// Decides: the first partition goes; a missing previous run is waited
/// for; a previous run lets the node go once every state given is
/// succeeded or skipped (a failed one is waited on until it is rerun or
/// marked).
pub fn gate(previous: Previous) -> PastGate {
    match previous {
        Previous::First => PastGate::Go,
        Previous::Missing(p) => PastGate::Wait(p),
        Previous::Run(p, states) => {
            let done = states
                .iter()
                .all(|s| matches!(s, NodeState::Succeeded | NodeState::Skipped));
            if done {
                PastGate::Go
            } else {
                PastGate::Wait(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_table() {
        let p: Partition = "2026-11-02".parse().unwrap();
        use NodeState as S;
        let cases: &[(Previous, bool)] = &[
            (Previous::First, true),
            (Previous::Missing(p.clone()), false),
            (Previous::Run(p.clone(), vec![S::Succeeded]), true),
            (Previous::Run(p.clone(), vec![S::Skipped]), true),
            (Previous::Run(p.clone(), vec![S::Failed]), false),
            (Previous::Run(p.clone(), vec![S::UpstreamFailed]), false),
            (Previous::Run(p.clone(), vec![S::Cancelled]), false),
            (Previous::Run(p.clone(), vec![S::Ready]), false),
            (Previous::Run(p.clone(), vec![S::Pending]), false),
            // With its downstreams: every one must be done.
            (
                Previous::Run(p.clone(), vec![S::Succeeded, S::Succeeded, S::Skipped]),
                true,
            ),
            (
                Previous::Run(p.clone(), vec![S::Succeeded, S::Ready]),
                false,
            ),
        ];
        for (i, (prev, go)) in cases.iter().enumerate() {
            let got = gate(prev.clone());
            let want = if *go {
                PastGate::Go
            } else {
                PastGate::Wait(p.clone())
            };
            assert_eq!(got, want, "#{i}: {prev:?}");
        }
    }
}
