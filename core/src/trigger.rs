//! Trigger rules: when the states of a node's upstreams let it run.
//!
//! The rule set and its semantics are Airflow's (`trigger_rule_dep.py`, as
//! the scheduler runs it with `flag_upstream_failed`): a rule is decided as
//! soon as its outcome is certain, not when the last upstream finishes. A
//! node whose rule can no longer be met becomes `skipped` or
//! `upstream_failed` at once, and a node whose rule is met is ready even
//! while other upstreams still run (`one_success`, `one_failed`,
//! `one_done`, `always`). A node without upstreams is ready under every
//! rule, as in Airflow, which evaluates no trigger rule for a root task.
//!
//! The decision is a function of counts ([`UpstreamCounts`]) so that the
//! readiness tracker can keep the counts of each node and decide in O(1)
//! when one upstream finishes; [`decide`] over a list of states is
//! implemented through the counts, so both forms agree by construction.
//!
//! A cancelled upstream counts as a failed one: a cancelled task did not
//! produce its output, so success rules must not run on it, and failure
//! handlers (`one_failed`, `all_failed`) should see it. Airflow has no
//! cancelled state; its nearest, a task marked failed by hand, is a failure.
//!
//! Decisions are monotonic as upstreams finish — a decided rule stays
//! decided — with one exception that Airflow shares: `all_success` decides
//! `skipped` on the first skipped upstream and `upstream_failed` on the first
//! failed one, so which of the two it takes depends on which upstream
//! finished first. Airflow writes the first decision to the task instance
//! and keeps it; weir does the same by recording every decision (see
//! `readiness`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// When a node may run, given the states of its upstreams (Airflow's names
/// and semantics).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TriggerRule {
    /// Every upstream succeeded. Upstream-failed on the first failure,
    /// skipped on the first skip.
    #[default]
    AllSuccess,
    /// Every upstream failed or was upstream-failed. Skipped on the first
    /// success or skip.
    AllFailed,
    /// Every upstream is done, whatever its outcome.
    AllDone,
    /// Every upstream was skipped. Skipped on the first upstream that
    /// finished otherwise.
    AllSkipped,
    /// At least one upstream succeeded; ready on the first success.
    OneSuccess,
    /// At least one upstream failed or was upstream-failed; ready on the
    /// first.
    OneFailed,
    /// At least one upstream succeeded or failed (upstream-failed and
    /// skipped do not count); ready on the first.
    OneDone,
    /// No upstream failed or was upstream-failed, and every one is done.
    /// Upstream-failed on the first failure.
    NoneFailed,
    /// As `none_failed`, and at least one upstream succeeded: skipped when
    /// every upstream was skipped.
    NoneFailedMinOneSuccess,
    /// No upstream was skipped, and every one is done. Skipped on the first
    /// skip.
    NoneSkipped,
    /// Ready at once, whatever the upstreams do.
    Always,
}

impl TriggerRule {
    /// Every rule, in declaration order.
    pub const ALL: [TriggerRule; 11] = [
        TriggerRule::AllSuccess,
        TriggerRule::AllFailed,
        TriggerRule::AllDone,
        TriggerRule::AllSkipped,
        TriggerRule::OneSuccess,
        TriggerRule::OneFailed,
        TriggerRule::OneDone,
        TriggerRule::NoneFailed,
        TriggerRule::NoneFailedMinOneSuccess,
        TriggerRule::NoneSkipped,
        TriggerRule::Always,
    ];

    /// Airflow's name of the rule.
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerRule::AllSuccess => "all_success",
            TriggerRule::AllFailed => "all_failed",
            TriggerRule::AllDone => "all_done",
            TriggerRule::AllSkipped => "all_skipped",
            TriggerRule::OneSuccess => "one_success",
            TriggerRule::OneFailed => "one_failed",
            TriggerRule::OneDone => "one_done",
            TriggerRule::NoneFailed => "none_failed",
            TriggerRule::NoneFailedMinOneSuccess => "none_failed_min_one_success",
            TriggerRule::NoneSkipped => "none_skipped",
            TriggerRule::Always => "always",
        }
    }

    /// Whether a node with this rule runs on the outputs of its succeeded
    /// upstreams, so that a rerun of an upstream must rerun it too
    /// (`all_success`, `one_success`, `none_failed`,
    /// `none_failed_min_one_success`). The other rules fire on completion
    /// (`all_done`, `one_done`, `none_skipped`, `always`), on failure
    /// (`all_failed`, `one_failed`) or on skips (`all_skipped`): a node with
    /// one of them keeps its record when an upstream reruns.
    pub fn follows_success(self) -> bool {
        matches!(
            self,
            TriggerRule::AllSuccess
                | TriggerRule::OneSuccess
                | TriggerRule::NoneFailed
                | TriggerRule::NoneFailedMinOneSuccess
        )
    }
}

impl fmt::Display for TriggerRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A string that is not the name of a trigger rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "trigger rule {0:?} is unknown; expected one of all_success, all_failed, all_done, \
     all_skipped, one_success, one_failed, one_done, none_failed, \
     none_failed_min_one_success, none_skipped, always"
)]
pub struct UnknownTriggerRule(pub String);

impl FromStr for TriggerRule {
    type Err = UnknownTriggerRule;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TriggerRule::ALL
            .into_iter()
            .find(|rule| rule.as_str() == s)
            .ok_or_else(|| UnknownTriggerRule(s.to_string()))
    }
}

/// The state of one upstream, as a trigger rule sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamState {
    /// The upstream succeeded.
    Success,
    /// The upstream failed.
    Failed,
    /// The upstream did not run because its own upstreams failed.
    UpstreamFailed,
    /// The upstream was skipped.
    Skipped,
    /// The upstream was cancelled; counted as failed (see the module doc).
    Cancelled,
    /// The upstream is not finished (waiting, ready or running).
    Pending,
}

impl UpstreamState {
    /// Whether the upstream is finished.
    pub fn is_done(self) -> bool {
        self != UpstreamState::Pending
    }
}

/// What a trigger rule decides for a node that has not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[must_use]
pub enum Decision {
    /// Not decided yet: an upstream that has not finished can still decide.
    Wait,
    /// The rule is met: run the node.
    Ready,
    /// The rule cannot be met, and no upstream failed in a way the rule
    /// cares about: the node is skipped.
    Skip,
    /// The rule cannot be met because an upstream failed: the node is
    /// upstream-failed.
    UpstreamFailed,
}

/// The finished upstreams of a node, by state, out of `total`.
///
/// A cancelled upstream is counted in `failed`. `total - done()` upstreams
/// are still pending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct UpstreamCounts {
    /// Upstreams in all.
    pub total: u32,
    /// Upstreams that succeeded.
    pub success: u32,
    /// Upstreams that failed or were cancelled.
    pub failed: u32,
    /// Upstreams that were upstream-failed.
    pub upstream_failed: u32,
    /// Upstreams that were skipped.
    pub skipped: u32,
}

impl UpstreamCounts {
    /// Counts of `total` upstreams, none finished.
    pub fn new(total: u32) -> Self {
        UpstreamCounts {
            total,
            ..UpstreamCounts::default()
        }
    }

    /// The counts of a list of upstream states.
    pub fn of(upstream: &[UpstreamState]) -> Self {
        let total = u32::try_from(upstream.len()).expect("upstream count fits in u32");
        let mut counts = UpstreamCounts::new(total);
        for state in upstream {
            counts.add(*state);
        }
        counts
    }

    /// Upstreams that are finished.
    pub fn done(&self) -> u32 {
        self.success + self.failed + self.upstream_failed + self.skipped
    }

    /// Counts one more upstream in `state`; a pending one changes nothing.
    pub fn add(&mut self, state: UpstreamState) {
        if let Some(count) = self.slot(state) {
            *count += 1;
        }
        debug_assert!(
            self.done() <= self.total,
            "more upstreams done than exist: {self:?}"
        );
    }

    /// Takes back one upstream in `state`, counted before by [`Self::add`].
    pub fn remove(&mut self, state: UpstreamState) {
        if let Some(count) = self.slot(state) {
            assert!(
                *count > 0,
                "removing a {state:?} upstream that was not counted: {self:?}"
            );
            *count -= 1;
        }
    }

    fn slot(&mut self, state: UpstreamState) -> Option<&mut u32> {
        match state {
            UpstreamState::Success => Some(&mut self.success),
            UpstreamState::Failed | UpstreamState::Cancelled => Some(&mut self.failed),
            UpstreamState::UpstreamFailed => Some(&mut self.upstream_failed),
            UpstreamState::Skipped => Some(&mut self.skipped),
            UpstreamState::Pending => None,
        }
    }
}

/// What `rule` decides for a node whose upstreams are in the states
/// `upstream` (in any order).
pub fn decide(rule: TriggerRule, upstream: &[UpstreamState]) -> Decision {
    decide_counts(rule, &UpstreamCounts::of(upstream))
}

/// What `rule` decides for a node whose upstreams are counted by `counts`.
///
/// As Airflow's `_evaluate_direct_relatives`: the early decisions (a new
/// state of skipped or upstream_failed) are checked before the rule's
/// condition to run, and win when both hold.
pub fn decide_counts(rule: TriggerRule, counts: &UpstreamCounts) -> Decision {
    use Decision::{Ready, Skip, UpstreamFailed, Wait};
    let c = counts;
    debug_assert!(c.done() <= c.total, "more upstreams done than exist: {c:?}");
    if c.total == 0 {
        return Ready;
    }
    let all_done = c.done() >= c.total;
    let failures = c.failed + c.upstream_failed;
    match rule {
        TriggerRule::AllSuccess => {
            if failures > 0 {
                UpstreamFailed
            } else if c.skipped > 0 {
                Skip
            } else if c.success == c.total {
                Ready
            } else {
                Wait
            }
        }
        TriggerRule::AllFailed => {
            if c.success > 0 || c.skipped > 0 {
                Skip
            } else if failures == c.total {
                Ready
            } else {
                Wait
            }
        }
        TriggerRule::AllDone => {
            if all_done {
                Ready
            } else {
                Wait
            }
        }
        TriggerRule::AllSkipped => {
            if c.success > 0 || failures > 0 {
                Skip
            } else if c.skipped == c.total {
                Ready
            } else {
                Wait
            }
        }
        TriggerRule::OneSuccess => {
            if c.success > 0 {
                Ready
            } else if !all_done {
                Wait
            } else if failures > 0 {
                UpstreamFailed
            } else {
                Skip
            }
        }
        TriggerRule::OneFailed => {
            if failures > 0 {
                Ready
            } else if all_done {
                Skip
            } else {
                Wait
            }
        }
        TriggerRule::OneDone => {
            if c.success > 0 || c.failed > 0 {
                Ready
            } else if all_done {
                Skip
            } else {
                Wait
            }
        }
        TriggerRule::NoneFailed => {
            if failures > 0 {
                UpstreamFailed
            } else if all_done {
                Ready
            } else {
                Wait
            }
        }
        TriggerRule::NoneFailedMinOneSuccess => {
            if failures > 0 {
                UpstreamFailed
            } else if !all_done {
                Wait
            } else if c.skipped == c.total {
                Skip
            } else {
                Ready
            }
        }
        TriggerRule::NoneSkipped => {
            if c.skipped > 0 {
                Skip
            } else if all_done {
                Ready
            } else {
                Wait
            }
        }
        TriggerRule::Always => Ready,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use Decision::{Ready, Skip, UpstreamFailed as Uf, Wait};
    use UpstreamState::{
        Cancelled as C, Failed as F, Pending as P, Skipped as S, Success as Ok_,
        UpstreamFailed as U,
    };

    fn check(table: &[(TriggerRule, &[UpstreamState], Decision)]) {
        for (i, (rule, ups, want)) in table.iter().enumerate() {
            let got = decide(*rule, ups);
            assert_eq!(
                got, *want,
                "#{i}: rule {rule}, upstream {ups:?}: got {got:?}, want {want:?}"
            );
        }
    }

    /// Airflow `trigger_rule_dep.py`, `_evaluate_direct_relatives`: each
    /// rule's early decision (`new_state` under `flag_upstream_failed`) and
    /// its condition to run.
    #[test]
    fn airflow_rules_table() {
        use TriggerRule::*;
        check(&[
            // No upstreams: ready under every rule (Airflow skips the dep).
            (AllSuccess, &[], Ready),
            (AllFailed, &[], Ready),
            (AllSkipped, &[], Ready),
            (OneSuccess, &[], Ready),
            (OneFailed, &[], Ready),
            (OneDone, &[], Ready),
            (NoneFailedMinOneSuccess, &[], Ready),
            // all_success: upstream_failed on failed/upstream_failed, skipped
            // on skipped, ready when all succeeded.
            (AllSuccess, &[P, P], Wait),
            (AllSuccess, &[Ok_, P], Wait),
            (AllSuccess, &[Ok_, Ok_], Ready),
            (AllSuccess, &[F, P], Uf),
            (AllSuccess, &[U, P], Uf),
            (AllSuccess, &[C, P], Uf),
            (AllSuccess, &[S, P], Skip),
            // Both early decisions hold: Airflow checks failures first.
            (AllSuccess, &[S, F], Uf),
            // all_failed: skipped on success or skip, ready when all failed.
            (AllFailed, &[F, P], Wait),
            (AllFailed, &[F, U], Ready),
            (AllFailed, &[C, F], Ready),
            (AllFailed, &[Ok_, P], Skip),
            (AllFailed, &[S, P], Skip),
            (AllFailed, &[F, Ok_], Skip),
            // all_done: ready when every upstream is done.
            (AllDone, &[Ok_, P], Wait),
            (AllDone, &[Ok_, F, U, S, C], Ready),
            // all_skipped: skipped on the first non-skipped terminal.
            (AllSkipped, &[S, P], Wait),
            (AllSkipped, &[S, S], Ready),
            (AllSkipped, &[Ok_, P], Skip),
            (AllSkipped, &[F, P], Skip),
            (AllSkipped, &[U, P], Skip),
            // one_success: ready on the first success; all done without one:
            // skipped when all skipped, else upstream_failed.
            (OneSuccess, &[P, Ok_], Ready),
            (OneSuccess, &[F, Ok_], Ready),
            (OneSuccess, &[F, P], Wait),
            (OneSuccess, &[S, S], Skip),
            (OneSuccess, &[S, F], Uf),
            (OneSuccess, &[U, U], Uf),
            // one_failed: ready on failed/upstream_failed; done without: skipped.
            (OneFailed, &[F, P], Ready),
            (OneFailed, &[U, P], Ready),
            (OneFailed, &[C, P], Ready),
            (OneFailed, &[Ok_, P], Wait),
            (OneFailed, &[Ok_, S], Skip),
            // one_done: success and failed count, upstream_failed does not.
            (OneDone, &[Ok_, P], Ready),
            (OneDone, &[F, P], Ready),
            (OneDone, &[U, P], Wait),
            (OneDone, &[S, P], Wait),
            (OneDone, &[U, S], Skip),
            // none_failed: upstream_failed on the first failure, ready when
            // all done (success or skipped).
            (NoneFailed, &[F, P], Uf),
            (NoneFailed, &[U, P], Uf),
            (NoneFailed, &[Ok_, P], Wait),
            (NoneFailed, &[S, S], Ready),
            (NoneFailed, &[Ok_, S], Ready),
            // none_failed_min_one_success: as none_failed, skipped when all
            // upstreams were skipped.
            (NoneFailedMinOneSuccess, &[F, P], Uf),
            (NoneFailedMinOneSuccess, &[S, P], Wait),
            (NoneFailedMinOneSuccess, &[S, S], Skip),
            (NoneFailedMinOneSuccess, &[S, Ok_], Ready),
            (NoneFailedMinOneSuccess, &[S, F], Uf),
            // none_skipped: skipped on the first skip, ready when all done.
            (NoneSkipped, &[S, P], Skip),
            (NoneSkipped, &[Ok_, P], Wait),
            (NoneSkipped, &[Ok_, F, U], Ready),
            // always: ready at once.
            (Always, &[P, P], Ready),
            (Always, &[F, S], Ready),
        ]);
    }

    #[test]
    fn names_round_trip() {
        for rule in TriggerRule::ALL {
            assert_eq!(rule.to_string().parse::<TriggerRule>(), Ok(rule));
            let json = serde_json::to_string(&rule).unwrap();
            assert_eq!(json, format!("\"{rule}\""));
            assert_eq!(serde_json::from_str::<TriggerRule>(&json).unwrap(), rule);
        }
        assert_eq!(TriggerRule::default(), TriggerRule::AllSuccess);
        let e = "all_sucess".parse::<TriggerRule>().unwrap_err().to_string();
        assert!(
            e.contains("\"all_sucess\"") && e.contains("none_skipped"),
            "{e}"
        );
    }

    fn state() -> impl Strategy<Value = UpstreamState> {
        prop_oneof![Just(Ok_), Just(F), Just(U), Just(S), Just(C), Just(P)]
    }

    fn terminal() -> impl Strategy<Value = UpstreamState> {
        prop_oneof![Just(Ok_), Just(F), Just(U), Just(S), Just(C)]
    }

    fn rule() -> impl Strategy<Value = TriggerRule> {
        proptest::sample::select(TriggerRule::ALL.to_vec())
    }

    proptest! {
        /// `decide` never panics and reads its upstreams as a multiset.
        #[test]
        fn order_independent(rule in rule(), (ups, shuffled) in
            prop::collection::vec(state(), 0..12).prop_flat_map(|v| (Just(v.clone()), Just(v).prop_shuffle())))
        {
            prop_assert_eq!(decide(rule, &ups), decide(rule, &shuffled));
        }

        /// Once every upstream is done, every rule decides.
        #[test]
        fn all_done_decides(rule in rule(), ups in prop::collection::vec(terminal(), 0..12)) {
            prop_assert_ne!(decide(rule, &ups), Wait, "rule {} upstream {:?}", rule, ups);
        }

        /// A decision stays as pending upstreams finish — except that
        /// `all_success` may turn from skipped to upstream_failed when a
        /// failure follows a skip (the module doc says why that is
        /// harmless: the first decision is recorded and kept).
        #[test]
        fn monotonic(rule in rule(),
            ups in prop::collection::vec(state(), 0..12),
            fill in prop::collection::vec(state(), 12))
        {
            let before = decide(rule, &ups);
            let later: Vec<UpstreamState> = ups
                .iter()
                .zip(&fill)
                .map(|(s, f)| if *s == P { *f } else { *s })
                .collect();
            let after = decide(rule, &later);
            let allowed = before == Wait
                || before == after
                || (rule == TriggerRule::AllSuccess && before == Skip && after == Uf);
            prop_assert!(allowed, "rule {} {:?} -> {:?}: {:?} -> {:?}", rule, ups, later, before, after);
        }
    }
}
