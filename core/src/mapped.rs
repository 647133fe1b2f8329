//! Mapped nodes: a node that runs its task once per item of a list, as
//! *members*, and whose output is the members' outputs in item order
//! (Airflow's dynamic task mapping, swale's `each`).
//!
//! The items come from the definition (`items = [...]`) or from an
//! upstream's output, which must be a JSON array (`map_over = "NODE"`);
//! they are read once the node is ready, from records that are durable,
//! so the same run reads the same items again after a crash
//! ([`items_of_output`], [`check_items`]). Each member is a ticket of its
//! own — with the node's task, pool, target, retry policy, timeout and
//! priority, its item in its payload — so it queues, defers on a breaker
//! and runs on a remote worker like any ticket, keeps its own attempts,
//! logs and output, and at most `max_active_members` of a node are live at
//! once ([`Members::to_submit`]).
//!
//! A generation of members is the node's rerun count. Its [`Ledger`],
//! written before the first member of the generation is submitted, holds
//! the generation's fingerprint (of the items and of the upstreams'
//! records: [`fingerprint`]) and, for each member, the generation whose
//! record holds its outcome ([`plan_sources`]): a rerun with the same
//! fingerprint keeps the members that succeeded (their records stay
//! until the run expires) and runs only the others; a changed
//! fingerprint runs every member. Members are submitted in item order,
//! so after a restart the live ones are always among the first
//! `max_active_members` that have no record, which is what
//! [`Members::to_submit`] hands out first: no member is live twice and
//! the bound holds across a crash.
//!
//! The node settles once every member has a record ([`Members::settled`]):
//! it succeeds when each succeeded or was skipped (a skipped member's
//! output is `null`), and fails otherwise with "K of N members did not
//! succeed; member I is the first: …" and the counts. Everything here is
//! pure: the scheduler journals and applies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::names::Name;

/// The most members one mapped node may have.
pub const MEMBERS_MAX: usize = 100_000;
/// Members of one node live (queued or running) at once when the
/// definition does not say.
pub const MAX_ACTIVE_MEMBERS_DEFAULT: u32 = 256;
/// The largest item, as compact JSON: it travels in its member's payload.
pub const ITEM_BYTES_MAX: usize = 64 << 10;
/// The largest output of a mapped node (the JSON array of its members'
/// outputs): it is kept in a blob past the inline size, and travels to
/// the node's downstreams (and in grants to remote workers) whole.
pub const MAPPED_OUTPUT_BYTES_MAX: usize = 16 << 20;
/// The longest member error a node's error quotes.
pub const MEMBER_ERROR_BYTES_MAX: usize = 2 << 10;

fn max_active_default() -> u32 {
    MAX_ACTIVE_MEMBERS_DEFAULT
}

/// Where a mapped node's items come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MapSource {
    /// The output of this upstream, a JSON array.
    Upstream(Name),
    /// These items, as the definition lists them.
    Items(Vec<Value>),
}

/// A node's mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MapSpec {
    /// Where the items come from.
    pub over: MapSource,
    /// The most members live at once (≥ 1).
    #[serde(default = "max_active_default")]
    pub max_active_members: u32,
}

impl MapSpec {
    /// A mapping over `over` with the default bound.
    pub fn new(over: MapSource) -> MapSpec {
        MapSpec {
            over,
            max_active_members: MAX_ACTIVE_MEMBERS_DEFAULT,
        }
    }
}

/// Why the items (or the output) of a mapped node cannot be had. The
/// node fails with this message: the same records give the same fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// The upstream the node maps over did not succeed.
    #[error("map_over: upstream {upstream:?} ended {status}, so it has no items")]
    UpstreamNotSucceeded {
        /// The upstream.
        upstream: String,
        /// How it ended.
        status: String,
    },
    /// The upstream's output is not JSON.
    #[error("map_over: upstream {upstream:?}'s output is not JSON: {what}")]
    NotJson {
        /// The upstream.
        upstream: String,
        /// The parser's words.
        what: String,
    },
    /// The upstream's output is JSON but not an array.
    #[error("map_over: upstream {upstream:?}'s output is {kind}, not a JSON array of items")]
    NotArray {
        /// The upstream.
        upstream: String,
        /// What it is.
        kind: &'static str,
    },
    /// More items than [`MEMBERS_MAX`].
    #[error("{count} items, over the limit of {max} members")]
    TooMany {
        /// The items.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// An item is larger than [`ITEM_BYTES_MAX`].
    #[error("item {index} is {bytes} bytes of JSON, over the limit of {max}")]
    ItemTooLarge {
        /// Its index.
        index: usize,
        /// Its size.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The members' outputs make an array over [`MAPPED_OUTPUT_BYTES_MAX`].
    #[error("the members' outputs make {bytes} bytes of JSON, over the limit of {max} for a mapped node's output")]
    OutputTooLarge {
        /// The array's size so far.
        bytes: usize,
        /// The limit.
        max: usize,
    },
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks items against the limits: their count and each one's size.
pub fn check_items(items: &[Value]) -> Result<(), MapError> {
    if items.len() > MEMBERS_MAX {
        return Err(MapError::TooMany {
            count: items.len(),
            max: MEMBERS_MAX,
        });
    }
    for (index, item) in items.iter().enumerate() {
        let bytes = item.to_string().len();
        if bytes > ITEM_BYTES_MAX {
            return Err(MapError::ItemTooLarge {
                index,
                bytes,
                max: ITEM_BYTES_MAX,
            });
        }
    }
    Ok(())
}

/// The items in the output of `upstream`, which ended `status`
/// (`succeeded`, `failed`, …): its output must be a JSON array within the
/// limits.
pub fn items_of_output(
    upstream: &str,
    status: &str,
    output: &[u8],
) -> Result<Vec<Value>, MapError> {
    if status != "succeeded" {
        return Err(MapError::UpstreamNotSucceeded {
            upstream: upstream.to_string(),
            status: status.to_string(),
        });
    }
    let v: Value = serde_json::from_slice(output).map_err(|e| MapError::NotJson {
        upstream: upstream.to_string(),
        what: e.to_string(),
    })?;
    let Value::Array(items) = v else {
        return Err(MapError::NotArray {
            upstream: upstream.to_string(),
            kind: kind(&v),
        });
    };
    check_items(&items)?;
    Ok(items)
}

/// The fingerprint of a generation's inputs: its items and, for each
/// upstream, a token of its record (its status and the identity of its
/// output: a hash of it). Two generations with equal fingerprints give
/// every member the same input, so a succeeded member may be kept.
pub fn fingerprint(items: &[Value], upstreams: &BTreeMap<String, String>) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"weir.members.v1\n");
    for item in items {
        let text = item.to_string();
        h.update(&(text.len() as u64).to_le_bytes());
        h.update(text.as_bytes());
    }
    h.update(b"\nupstreams\n");
    for (name, token) in upstreams {
        for part in [name, token] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
    }
    h.finalize().to_hex().to_string()
}

/// The members of one generation of a mapped node, as written before any
/// of them is submitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// The generation: the node's rerun count.
    pub rerun: u32,
    /// The fingerprint of its inputs.
    pub fingerprint: String,
    /// For each member, in item order, the generation whose record holds
    /// its outcome: this one, or an earlier one whose member succeeded
    /// with the same fingerprint.
    pub sources: Vec<u32>,
}

impl Ledger {
    /// Members in all.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether the node has no member (its items are empty).
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The members kept from earlier generations.
    pub fn kept(&self) -> usize {
        self.sources.iter().filter(|&&s| s != self.rerun).count()
    }
}

/// The ledger of generation `rerun` with `count` members and
/// `fingerprint`, after the ledger `prev` of the generation before (if
/// any), whose members' outcomes `prev_succeeded` gives by index: with the
/// same fingerprint and count, each member that succeeded there keeps its
/// source; every other member runs in this generation.
pub fn plan_sources(
    rerun: u32,
    fingerprint: String,
    count: usize,
    prev: Option<&Ledger>,
    prev_succeeded: impl Fn(usize) -> bool,
) -> Ledger {
    let sources = match prev {
        Some(p) if p.fingerprint == fingerprint && p.len() == count && p.rerun < rerun => (0
            ..count)
            .map(|i| {
                if prev_succeeded(i) {
                    p.sources[i]
                } else {
                    rerun
                }
            })
            .collect(),
        _ => vec![rerun; count],
    };
    Ledger {
        rerun,
        fingerprint,
        sources,
    }
}

/// How a member ended, as its record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberStatus {
    /// It succeeded.
    Succeeded,
    /// Its retries are spent (or it failed permanently).
    Failed,
    /// It was cancelled.
    Cancelled,
    /// It ended skipped (a sensor member that timed out with
    /// `on_timeout = "skip"`).
    Skipped,
}

/// The counts of a mapped node's members.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct MemberCounts {
    /// Members in all.
    pub total: u32,
    /// Members that succeeded.
    pub succeeded: u32,
    /// Members that failed or were cancelled.
    pub failed: u32,
    /// Members that were skipped.
    #[serde(default)]
    pub skipped: u32,
}

/// Where a member is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    /// Not submitted yet.
    Waiting,
    /// Submitted: queued or running.
    Live,
    /// Ended, with its error when it did not succeed.
    Ended(MemberStatus, Option<String>),
}

/// What the scheduler writes when every member has ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    /// Whether the node succeeded: every member succeeded or was skipped.
    pub succeeded: bool,
    /// The counts.
    pub counts: MemberCounts,
    /// The first member (in item order) that did not succeed.
    pub first_failed: Option<usize>,
    /// The node's error when it failed.
    pub error: Option<String>,
}

/// The members of one generation while it runs: which are waiting, live
/// or ended. Built from the records found (after a restart, some ended
/// already), changed by submits and ends.
#[derive(Debug, Clone)]
pub struct Members {
    slots: Vec<Slot>,
    /// Every member before this index is live or ended.
    next: usize,
    live: usize,
    ended: usize,
    max_active: usize,
}

impl Members {
    /// `count` members of which those in `ended` have ended (by index),
    /// at most `max_active` live at once.
    pub fn new(
        count: usize,
        ended: impl IntoIterator<Item = (usize, MemberStatus, Option<String>)>,
        max_active: u32,
    ) -> Members {
        let mut slots = vec![Slot::Waiting; count];
        let mut n = 0;
        for (i, status, error) in ended {
            if let Some(s) = slots.get_mut(i) {
                if *s == Slot::Waiting {
                    n += 1;
                }
                *s = Slot::Ended(status, error);
            }
        }
        let mut m = Members {
            slots,
            next: 0,
            live: 0,
            ended: n,
            max_active: max_active.max(1) as usize,
        };
        m.skip_ended();
        m.assert_invariants();
        m
    }

    fn skip_ended(&mut self) {
        while matches!(self.slots.get(self.next), Some(Slot::Ended(..))) {
            self.next += 1;
        }
    }

    /// Members in all.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Members live now (submitted, not ended).
    pub fn live(&self) -> usize {
        self.live
    }

    /// Members ended.
    pub fn ended(&self) -> usize {
        self.ended
    }

    /// Whether member `i` is live.
    pub fn is_live(&self, i: usize) -> bool {
        matches!(self.slots.get(i), Some(Slot::Live))
    }

    /// The members to submit now, in item order: the first waiting ones,
    /// as many as keep the live members within the bound. They count as
    /// live from here on.
    #[must_use]
    pub fn to_submit(&mut self) -> Vec<usize> {
        let mut out = Vec::new();
        while self.live < self.max_active && self.next < self.slots.len() {
            if self.slots[self.next] == Slot::Waiting {
                self.slots[self.next] = Slot::Live;
                self.live += 1;
                out.push(self.next);
            }
            self.next += 1;
            self.skip_ended();
        }
        self.assert_invariants();
        out
    }

    /// Member `i` ended as `status` (with `error` when it did not
    /// succeed). `false` when it had ended already (a repeated notice) or
    /// is no member: nothing changes.
    pub fn end(&mut self, i: usize, status: MemberStatus, error: Option<String>) -> bool {
        let Some(slot) = self.slots.get_mut(i) else {
            return false;
        };
        match slot {
            Slot::Ended(..) => return false,
            Slot::Live => self.live -= 1,
            Slot::Waiting => {}
        }
        *slot = Slot::Ended(status, error);
        self.ended += 1;
        self.skip_ended();
        self.assert_invariants();
        true
    }

    /// The members that have not ended, in item order (what a cancel
    /// cancels).
    pub fn unended(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| !matches!(s, Slot::Ended(..)))
            .map(|(i, _)| i)
    }

    /// The status of each ended member, by index.
    pub fn status(&self, i: usize) -> Option<MemberStatus> {
        match self.slots.get(i) {
            Some(Slot::Ended(s, _)) => Some(*s),
            _ => None,
        }
    }

    /// The node's outcome once every member has ended; `None` before.
    pub fn settled(&self) -> Option<Settled> {
        if self.ended < self.slots.len() {
            return None;
        }
        let mut counts = MemberCounts {
            total: self.slots.len() as u32,
            ..MemberCounts::default()
        };
        let mut first: Option<(usize, Option<&String>, MemberStatus)> = None;
        for (i, slot) in self.slots.iter().enumerate() {
            let Slot::Ended(status, error) = slot else {
                unreachable!("every member has ended")
            };
            match status {
                MemberStatus::Succeeded => counts.succeeded += 1,
                MemberStatus::Skipped => counts.skipped += 1,
                MemberStatus::Failed | MemberStatus::Cancelled => {
                    counts.failed += 1;
                    if first.is_none() {
                        first = Some((i, error.as_ref(), *status));
                    }
                }
            }
        }
        let error = first.map(|(i, error, status)| {
            let why = match (error, status) {
                (Some(e), _) => head(e, MEMBER_ERROR_BYTES_MAX),
                (None, MemberStatus::Cancelled) => "cancelled".to_string(),
                (None, _) => "failed".to_string(),
            };
            format!(
                "{} of {} members did not succeed; member {i} is the first: {why}",
                counts.failed, counts.total
            )
        });
        Some(Settled {
            succeeded: first.is_none(),
            counts,
            first_failed: first.map(|(i, ..)| i),
            error,
        })
    }

    fn assert_invariants(&self) {
        if cfg!(debug_assertions) {
            let live = self.slots.iter().filter(|s| **s == Slot::Live).count();
            assert_eq!(live, self.live, "the live count is the live slots");
            let ended = self
                .slots
                .iter()
                .filter(|s| matches!(s, Slot::Ended(..)))
                .count();
            assert_eq!(ended, self.ended, "the ended count is the ended slots");
            assert!(
                self.slots[..self.next.min(self.slots.len())]
                    .iter()
                    .all(|s| *s != Slot::Waiting),
                "no member before the cursor waits"
            );
        }
    }
}

/// `text` cut to at most `max` bytes, on a char boundary.
fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}…", &text[..cut])
}

/// One member's output as an element of its node's output: `null` when
/// it has none (or was skipped), the JSON it holds, else its text
/// (trailing newlines removed, invalid UTF-8 replaced).
pub fn output_value(output: Option<&[u8]>) -> Value {
    let Some(bytes) = output.filter(|b| !b.is_empty()) else {
        return Value::Null;
    };
    match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(_) => Value::String(
            String::from_utf8_lossy(bytes)
                .trim_end_matches(['\n', '\r'])
                .to_string(),
        ),
    }
}

/// The node's output: the array of its members' outputs in item order,
/// as compact JSON, within [`MAPPED_OUTPUT_BYTES_MAX`].
pub fn output_array<'a>(
    outputs: impl IntoIterator<Item = Option<&'a [u8]>>,
) -> Result<Vec<u8>, MapError> {
    let mut out = Vec::from(&b"["[..]);
    for (i, o) in outputs.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, &output_value(o)).expect("a JSON value writes");
        if out.len() > MAPPED_OUTPUT_BYTES_MAX {
            return Err(MapError::OutputTooLarge {
                bytes: out.len(),
                max: MAPPED_OUTPUT_BYTES_MAX,
            });
        }
    }
    out.push(b']');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// Items from an upstream's output, one row a case.
    #[test]
    fn items_of_output_table() {
        let cases: &[(&str, &[u8], Result<usize, &str>)] = &[
            ("succeeded", br#"["a", {"k": 1}, 3]"#, Ok(3)),
            ("succeeded", b"[]", Ok(0)),
            ("succeeded", b" [1]\n", Ok(1)),
            (
                "failed",
                b"[1]",
                Err("map_over: upstream \"list\" ended failed, so it has no items"),
            ),
            ("succeeded", b"nope", Err("output is not JSON")),
            (
                "succeeded",
                br#"{"a": 1}"#,
                Err("output is an object, not a JSON array of items"),
            ),
            ("succeeded", b"", Err("output is not JSON")),
        ];
        for (i, (status, out, want)) in cases.iter().enumerate() {
            let got = items_of_output("list", status, out).map(|v| v.len());
            match want {
                Ok(n) => assert_eq!(got, Ok(*n), "#{i}"),
                Err(w) => assert!(
                    got.as_ref().is_err_and(|e| e.to_string().contains(w)),
                    "#{i}: got {got:?}, want {w:?}"
                ),
            }
        }
        let many = serde_json::to_vec(&vec![0; MEMBERS_MAX + 1]).unwrap();
        assert!(matches!(
            items_of_output("list", "succeeded", &many),
            Err(MapError::TooMany { .. })
        ));
        let big = serde_json::to_vec(&vec!["x".repeat(ITEM_BYTES_MAX)]).unwrap();
        assert!(matches!(
            items_of_output("list", "succeeded", &big),
            Err(MapError::ItemTooLarge { index: 0, .. })
        ));
    }

    #[test]
    fn fingerprints_change_with_items_and_upstreams() {
        let ups = BTreeMap::from([("list".to_string(), "succeeded:abc".to_string())]);
        let a = fingerprint(&[json!("a"), json!("b")], &ups);
        assert_eq!(a, fingerprint(&[json!("a"), json!("b")], &ups));
        assert_ne!(a, fingerprint(&[json!("b"), json!("a")], &ups));
        assert_ne!(a, fingerprint(&[json!("a")], &ups));
        assert_ne!(a, fingerprint(&[json!("ab")], &ups));
        assert_ne!(a, fingerprint(&[json!("a"), json!("b")], &BTreeMap::new()));
        let other = BTreeMap::from([("list".to_string(), "succeeded:abd".to_string())]);
        assert_ne!(a, fingerprint(&[json!("a"), json!("b")], &other));
    }

    /// Sources of a rerun, one row a case: the previous ledger (or none),
    /// which of its members succeeded, the new fingerprint and count, and
    /// the sources wanted.
    #[test]
    fn plan_sources_table() {
        let prev = Ledger {
            rerun: 1,
            fingerprint: "f".into(),
            sources: vec![0, 1, 1, 0],
        };
        type Row<'a> = (Option<&'a Ledger>, &'a [bool], &'a str, usize, &'a [u32]);
        let cases: &[Row] = &[
            // First generation: everything runs.
            (None, &[], "f", 3, &[2, 2, 2]),
            // Same inputs: succeeded members keep where they succeeded.
            (
                Some(&prev),
                &[true, false, true, false],
                "f",
                4,
                &[0, 2, 1, 2],
            ),
            (
                Some(&prev),
                &[true, true, true, true],
                "f",
                4,
                &[0, 1, 1, 0],
            ),
            // Changed items: every member runs.
            (
                Some(&prev),
                &[true, true, true, true],
                "g",
                4,
                &[2, 2, 2, 2],
            ),
            (Some(&prev), &[true, true, true, true], "f", 3, &[2, 2, 2]),
        ];
        for (i, (p, ok, f, n, want)) in cases.iter().enumerate() {
            let got = plan_sources(2, f.to_string(), *n, *p, |m| ok[m]);
            assert_eq!(got.sources, *want, "#{i}");
            assert_eq!(got.rerun, 2);
        }
        // A ledger of this generation or later is not a predecessor.
        let same = plan_sources(1, "f".into(), 4, Some(&prev), |_| true);
        assert_eq!(same.sources, vec![1; 4]);
    }

    #[test]
    fn members_are_bounded_and_settle_in_item_order() {
        let mut m = Members::new(5, [], 2);
        assert_eq!(m.to_submit(), vec![0, 1]);
        assert_eq!(m.to_submit(), Vec::<usize>::new(), "at the bound");
        assert!(m.end(1, MemberStatus::Succeeded, None));
        assert!(!m.end(1, MemberStatus::Succeeded, None), "a repeat");
        assert_eq!(m.to_submit(), vec![2]);
        assert!(m.end(0, MemberStatus::Failed, Some("exit 3".into())));
        assert!(m.end(2, MemberStatus::Succeeded, None));
        assert_eq!(m.to_submit(), vec![3, 4]);
        assert!(m.settled().is_none());
        assert!(m.end(4, MemberStatus::Cancelled, None));
        assert!(m.end(3, MemberStatus::Skipped, None));
        let s = m.settled().unwrap();
        assert!(!s.succeeded);
        assert_eq!(
            s.counts,
            MemberCounts {
                total: 5,
                succeeded: 2,
                failed: 2,
                skipped: 1
            }
        );
        assert_eq!(s.first_failed, Some(0));
        assert_eq!(
            s.error.as_deref(),
            Some("2 of 5 members did not succeed; member 0 is the first: exit 3")
        );
        let empty = Members::new(0, [], 4);
        assert!(empty.settled().unwrap().succeeded);
    }

    #[test]
    fn outputs_make_an_array_in_item_order() {
        let outs: Vec<Option<&[u8]>> = vec![
            Some(br#"{"a":1}"#),
            None,
            Some(b"plain\n"),
            Some(b""),
            Some(b"[1,2]"),
        ];
        let got: Value = serde_json::from_slice(&output_array(outs).unwrap()).unwrap();
        assert_eq!(got, json!([{"a": 1}, null, "plain", null, [1, 2]]));
        let quoted = format!("\"{}\"", "x".repeat(4 << 20)).into_bytes();
        let many: Vec<Option<&[u8]>> = (0..5).map(|_| Some(&quoted[..])).collect();
        assert!(matches!(
            output_array(many),
            Err(MapError::OutputTooLarge { .. })
        ));
        assert!(output_array([Some(&quoted[..])]).is_ok());
    }

    proptest! {
        /// Whatever order members end in, and wherever a restart rebuilds
        /// the set from the records found: never more than the bound live,
        /// no member submitted twice in one incarnation, every member
        /// submitted or ended, and the settle comes exactly when the last
        /// one ends.
        #[test]
        fn members_hold_their_bound_across_restarts(
            count in 0usize..40,
            max_active in 1u32..6,
            picks in prop::collection::vec((any::<prop::sample::Index>(), any::<bool>(), any::<bool>()), 0..120),
        ) {
            let mut m = Members::new(count, [], max_active);
            let mut ended: BTreeMap<usize, MemberStatus> = BTreeMap::new();
            let mut live: Vec<usize> = m.to_submit();
            let mut submitted_now: std::collections::BTreeSet<usize> = live.iter().copied().collect();
            for (pick, ok, restart) in picks {
                if live.is_empty() {
                    break;
                }
                let i = live.remove(pick.index(live.len()));
                let status = if ok { MemberStatus::Succeeded } else { MemberStatus::Failed };
                prop_assert!(m.end(i, status, None));
                ended.insert(i, status);
                if restart {
                    // A restart knows the records, not what was live; the
                    // live ones are re-submitted (the queue answers Live).
                    m = Members::new(count, ended.iter().map(|(&i, &s)| (i, s, None)), max_active);
                    let again = m.to_submit();
                    for i in &live {
                        prop_assert!(again.contains(i), "live member {} is among the first waiting", i);
                    }
                    submitted_now = again.iter().copied().collect();
                    live = again;
                } else {
                    for j in m.to_submit() {
                        prop_assert!(submitted_now.insert(j), "member {} submitted twice", j);
                        live.push(j);
                    }
                }
                prop_assert!(m.live() <= max_active as usize);
                prop_assert_eq!(m.live(), live.len());
                prop_assert_eq!(m.settled().is_some(), ended.len() == count);
            }
        }
    }
}
