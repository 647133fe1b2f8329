//! The reconciler (swale's): every pass submits each ready node of every
//! active run and settles what is done, so a lost notice never wedges a
//! run; its report is logged and sent as an event.

use weir_core::partition::Partition;
use weir_core::readiness::{Change, NodeState};

use crate::events::EngineEvent;
use crate::msg::scheduler::ReconcileReport;
use crate::records::graph::RunState;

use super::state::{Res, SchedulerState};

impl SchedulerState {
    /// Advances every active run: submits ready nodes, records decisions a
    /// crash left unwritten, settles what is done.
    pub(super) async fn reconcile(&mut self, only: Option<&Partition>) -> Res<ReconcileReport> {
        let keys: Vec<String> = match only {
            // One run: the active run of that partition, if there is one.
            Some(p) => self
                .runs
                .contains_key(&p.to_string())
                .then(|| p.to_string())
                .into_iter()
                .collect(),
            None => self.runs.keys().cloned().collect(),
        };
        let mut report = ReconcileReport {
            active_runs: keys.len(),
            ..ReconcileReport::default()
        };
        for p in keys {
            // Rebuild the run from the store first. A record whose notice
            // was lost (the queue stopped between making it durable and
            // telling this scheduler) is in the store but not in the
            // tracker, which still holds the node ready: resubmitting it
            // would only answer Done, and its downstreams would never be
            // submitted. The pass costs a scan of the run's records, once
            // per reconcile interval, never per event.
            let Some(partition) = self.runs.get(&p).map(|r| r.partition.clone()) else {
                continue;
            };
            match self.load_run(&partition)? {
                Some(fresh) if fresh.record.state == RunState::Active => {
                    self.runs.insert(p.clone(), fresh);
                }
                _ => {
                    // Only this actor settles its runs, so a run that is
                    // gone or settled in the store is not active.
                    self.runs.remove(&p);
                    continue;
                }
            }
            let Some(run) = self.runs.get_mut(&p) else {
                continue;
            };
            // Decided nodes without a current record.
            let graph = run.graph.clone();
            let undecided: Vec<Change> = (0..graph.len())
                .filter(|&i| run.recorded[i].is_none())
                .filter(|&i| {
                    matches!(
                        run.tracker.state(i),
                        NodeState::Skipped | NodeState::UpstreamFailed
                    )
                })
                .map(|i| Change {
                    node: i,
                    state: run.tracker.state(i),
                })
                .collect();
            let ready: Vec<usize> = run.tracker.ready().collect();
            // Resubmit every ready node: the queue ignores live and done
            // run ids, so only a lost submit is new.
            for &i in &ready {
                run.submitted.remove(&i);
            }
            let mut changes = undecided;
            changes.extend(ready.iter().map(|&i| Change {
                node: i,
                state: NodeState::Ready,
            }));
            // Count only the submits that were new to the queue.
            report.submitted += self.apply_changes(&p, changes).await?;
            if self.settle_if_done(&p).await? {
                report.settled += 1;
            }
        }
        Ok(report)
    }

    pub(super) fn emit_report(&self, report: ReconcileReport) {
        tracing::info!(graph = %self.graph, active_runs = report.active_runs, submitted = report.submitted, settled = report.settled, cancelled = report.cancelled, "reconciled");
        let _ = self.events.send(EngineEvent::Reconciled {
            graph: self.graph.to_string(),
            active_runs: report.active_runs,
            submitted: report.submitted,
            settled: report.settled,
            cancelled: report.cancelled,
        });
    }
}
