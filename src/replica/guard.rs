//! What a member accepts from a peer before openraft sees it: terms and
//! log indexes the group could have reached, and entries in the shape
//! Raft sends them. openraft trusts its peers: a vote carrying term
//! `u64::MAX` made the member that took it overflow its next term and
//! panic, and the vote it had saved broke every later election of the
//! group. A request outside these bounds is refused (400) and logged; the
//! same bounds apply to what a peer answers.
//!
//! The bounds, and why they cost a healthy group nothing:
//! - a term at most [`TERM_AHEAD_MAX`] past this member's: every election
//!   adds one, and a member cut off alone stands at most once per election
//!   timeout (400 ms by default), so a peer is that far ahead only after
//!   about five days alone. Refused, it still makes the leader step down
//!   when it answers an append with its term, and the next election is
//!   held past it: the group comes back in one election;
//! - no term or index at or past [`TERM_MAX`] / [`INDEX_MAX`] (2^62), so
//!   no `+ 1` of openraft's can overflow;
//! - an append's entries follow its `prev_log_id` one index at a time,
//!   with terms that never fall and never pass the sender's.
//!
//! Pure: the caller passes the member's current term.

use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{LogId, Vote};

use super::types::TypeConfig;

/// How far past this member's term a peer's term may be.
pub const TERM_AHEAD_MAX: u64 = 1 << 20;
/// No term reaches this.
pub const TERM_MAX: u64 = 1 << 62;
/// No log index reaches this.
pub const INDEX_MAX: u64 = 1 << 62;

fn term(what: &str, t: u64, current: u64) -> Result<(), String> {
    if t >= TERM_MAX {
        return Err(format!(
            "{what}: term {t} is past the largest a group reaches ({TERM_MAX})"
        ));
    }
    if t > current.saturating_add(TERM_AHEAD_MAX) {
        return Err(format!(
            "{what}: term {t} is more than {TERM_AHEAD_MAX} past this member's ({current})"
        ));
    }
    Ok(())
}

fn vote(what: &str, v: &Vote<u64>, current: u64) -> Result<(), String> {
    term(what, v.leader_id().term, current)
}

fn log_id(what: &str, id: &Option<LogId<u64>>, vote_term: u64) -> Result<(), String> {
    let Some(id) = id else { return Ok(()) };
    if id.index >= INDEX_MAX {
        return Err(format!("{what}: index {} is past {INDEX_MAX}", id.index));
    }
    if id.leader_id.term > vote_term {
        return Err(format!(
            "{what}: a log id of term {} in a request of term {vote_term}",
            id.leader_id.term
        ));
    }
    Ok(())
}

/// Checks a vote request against this member's `current` term.
pub fn check_vote(req: &VoteRequest<u64>, current: u64) -> Result<(), String> {
    vote("vote", &req.vote, current)?;
    log_id(
        "vote's last log id",
        &req.last_log_id,
        req.vote.leader_id().term,
    )
}

/// Checks an append against this member's `current` term: its vote, its
/// previous and committed log ids, and its entries' order.
pub fn check_append(req: &AppendEntriesRequest<TypeConfig>, current: u64) -> Result<(), String> {
    let vote_term = req.vote.leader_id().term;
    vote("append", &req.vote, current)?;
    log_id("append's previous log id", &req.prev_log_id, vote_term)?;
    log_id("append's committed log id", &req.leader_commit, vote_term)?;
    // The previous log id is within bounds (checked above): no overflow.
    let first = req.prev_log_id.map_or(0, |p| p.index + 1);
    let mut last_term = req.prev_log_id.map_or(0, |p| p.leader_id.term);
    for (next, e) in (first..).zip(req.entries.iter()) {
        let id = e.log_id;
        if id.index != next {
            return Err(format!(
                "append: entry of index {} where {next} comes next",
                id.index
            ));
        }
        log_id("append's entry", &Some(id), vote_term)?;
        if id.leader_id.term < last_term {
            return Err(format!(
                "append: entry {} of term {} after one of term {last_term}",
                id.index, id.leader_id.term
            ));
        }
        last_term = id.leader_id.term;
    }
    Ok(())
}

/// Checks a snapshot chunk against this member's `current` term.
pub fn check_snapshot(
    req: &InstallSnapshotRequest<TypeConfig>,
    current: u64,
) -> Result<(), String> {
    let vote_term = req.vote.leader_id().term;
    vote("snapshot", &req.vote, current)?;
    log_id("snapshot's last log id", &req.meta.last_log_id, vote_term)
}

/// Checks a peer's answer to a vote.
pub fn check_vote_answer(resp: &VoteResponse<u64>, current: u64) -> Result<(), String> {
    vote("vote's answer", &resp.vote, current)?;
    let Some(id) = &resp.last_log_id else {
        return Ok(());
    };
    if id.index >= INDEX_MAX || id.leader_id.term >= TERM_MAX {
        return Err(format!(
            "vote's answer: last log id {id} is past the bounds"
        ));
    }
    Ok(())
}

/// Checks a peer's answer to an append.
pub fn check_append_answer(resp: &AppendEntriesResponse<u64>, current: u64) -> Result<(), String> {
    match resp {
        AppendEntriesResponse::HigherVote(v) => vote("append's answer", v, current),
        AppendEntriesResponse::Success
        | AppendEntriesResponse::PartialSuccess(_)
        | AppendEntriesResponse::Conflict => Ok(()),
    }
}

/// Checks a peer's answer to a snapshot chunk.
pub fn check_snapshot_answer(
    resp: &InstallSnapshotResponse<u64>,
    current: u64,
) -> Result<(), String> {
    vote("snapshot's answer", &resp.vote, current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, Entry, EntryPayload};

    fn id(term: u64, index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn entry(term: u64, index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: id(term, index),
            payload: EntryPayload::Blank,
        }
    }

    fn append(
        vote_term: u64,
        prev: Option<LogId<u64>>,
        entries: Vec<Entry<TypeConfig>>,
    ) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(vote_term, 1),
            prev_log_id: prev,
            entries,
            leader_commit: prev,
        }
    }

    #[test]
    fn votes_by_term() {
        // (request term, last log id, member's term, accepted)
        let table: &[(u64, Option<LogId<u64>>, u64, bool)] = &[
            (5, None, 4, true),
            (5, Some(id(5, 10)), 4, true),
            (4 + TERM_AHEAD_MAX, None, 4, true),
            (5 + TERM_AHEAD_MAX, None, 4, false),
            (u64::MAX, None, 4, false),
            (u64::MAX, None, u64::MAX - 1, false),
            (TERM_MAX, None, TERM_MAX, false),
            (3, None, 4, true),
            (5, Some(id(6, 10)), 4, false),
            (5, Some(id(5, INDEX_MAX)), 4, false),
        ];
        for (i, (t, last, current, want)) in table.iter().enumerate() {
            let req = VoteRequest::new(Vote::new(*t, 2), *last);
            let got = check_vote(&req, *current);
            assert_eq!(
                got.is_ok(),
                *want,
                "#{i}: term {t}, last {last:?}, current {current}: got {got:?}"
            );
        }
    }

    #[test]
    fn appends_by_shape() {
        let table: Vec<(&str, AppendEntriesRequest<TypeConfig>, bool)> = vec![
            ("heartbeat", append(3, Some(id(3, 9)), vec![]), true),
            (
                "first entries",
                append(1, None, vec![entry(1, 0), entry(1, 1)]),
                true,
            ),
            (
                "after prev",
                append(3, Some(id(2, 9)), vec![entry(2, 10), entry(3, 11)]),
                true,
            ),
            ("gap", append(3, Some(id(2, 9)), vec![entry(3, 11)]), false),
            (
                "backwards",
                append(3, Some(id(2, 9)), vec![entry(3, 10), entry(3, 10)]),
                false,
            ),
            (
                "term falls",
                append(3, Some(id(2, 9)), vec![entry(3, 10), entry(2, 11)]),
                false,
            ),
            (
                "entry past vote",
                append(3, Some(id(2, 9)), vec![entry(4, 10)]),
                false,
            ),
            ("prev past vote", append(3, Some(id(4, 9)), vec![]), false),
            (
                "huge index",
                append(3, Some(id(3, INDEX_MAX)), vec![]),
                false,
            ),
            ("huge term", append(u64::MAX, None, vec![]), false),
        ];
        for (i, (what, req, want)) in table.iter().enumerate() {
            let got = check_append(req, 3);
            assert_eq!(got.is_ok(), *want, "#{i} {what}: got {got:?}");
        }
    }

    #[test]
    fn answers_by_term() {
        let higher = AppendEntriesResponse::HigherVote(Vote::new(u64::MAX, 2));
        assert!(check_append_answer(&higher, 7).is_err());
        let higher = AppendEntriesResponse::HigherVote(Vote::new(8, 2));
        assert!(check_append_answer(&higher, 7).is_ok());
        assert!(check_append_answer(&AppendEntriesResponse::Conflict, 7).is_ok());
        let v = VoteResponse::new(Vote::new(u64::MAX, 2), None, false);
        assert!(check_vote_answer(&v, 7).is_err());
        let v = VoteResponse::new(Vote::new(7, 2), Some(id(7, 3)), true);
        assert!(check_vote_answer(&v, 7).is_ok());
    }
}
