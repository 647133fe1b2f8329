//! Run timeouts (`run_timeout`): a run still active this long after it
//! started (its instant, for a run prepared ahead) fails. Its record is
//! written failed first, naming the timeout, then its live task instances
//! are cancelled: a crash between the two cancels them at the next start,
//! as for a cancelled run. One timer at a time, for the earliest deadline
//! of the active runs, re-armed after each pass and as runs start.

use weir_core::duration::human_ms;

use crate::msg::scheduler::SchedulerMsg;
use crate::records::graph::RunState;

use super::state::{ActiveRun, Res, SchedulerState};

/// The instant `run` times out, when its definition has a `run_timeout`.
fn deadline(run: &ActiveRun) -> Option<u64> {
    let timeout_ms = run.graph.def().run_timeout_ms?;
    Some(run.record.started_ms().saturating_add(timeout_ms))
}

impl SchedulerState {
    /// Arms the timer for the earliest deadline, unless one as early is
    /// armed already.
    pub(super) fn arm_run_timeouts(&mut self) {
        let Some(next) = self.runs.values().filter_map(deadline).min() else {
            return;
        };
        self.timeout_armed = self.arm_at(self.timeout_armed, next, || SchedulerMsg::RunTimeouts);
    }

    /// Fails every active run past its deadline, then arms the next.
    pub(super) async fn run_timeouts(&mut self) -> Res<()> {
        self.timeout_armed = None;
        let now = self.clock.now_ms();
        let due: Vec<(String, u64)> = self
            .runs
            .iter()
            .filter(|(_, run)| deadline(run).is_some_and(|at| at <= now))
            .filter_map(|(p, run)| Some((p.clone(), run.graph.def().run_timeout_ms?)))
            .collect();
        for (p, timeout_ms) in due {
            self.time_out(&p, timeout_ms).await?;
        }
        self.arm_run_timeouts();
        Ok(())
    }

    /// Fails run `p` for its timeout and cancels its live instances.
    async fn time_out(&mut self, p: &str, timeout_ms: u64) -> Res<()> {
        let failure = format!(
            "run_timeout: still active {} after it started",
            human_ms(timeout_ms)
        );
        let Some(run) = self.runs.get_mut(p) else {
            return Ok(());
        };
        run.record.failure = Some(failure.clone());
        if !self.write_settled(p, RunState::Failed, true).await? {
            // The record changed under the scheduler (it reloaded it): the
            // next pass decides again.
            return Ok(());
        }
        let run = self.runs.remove(p).expect("settled from the active runs");
        let cancelled = self.cancel_instances(&run).await?;
        tracing::warn!(graph = %self.graph, partition = p, cancelled, failure = %failure, "graph run timed out");
        Ok(())
    }
}
