//! What `weir members` and `GET /api/v1/members` show: each member, who
//! leads, the term, and — from the leader — how far each follower is
//! behind and when it last answered.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::node::Replica;
use super::types::{wall_ms, ServerStateExt};

/// One member.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// Its Raft id.
    pub id: u64,
    /// Its Raft address.
    pub raft: String,
    /// Its API's URL (absent when it did not answer).
    pub api_url: Option<String>,
    /// `leader`, `follower`, `learner` (not voting yet), `catching up`
    /// (more than [`CATCHING_UP_LAG_ENTRIES`] behind, in the leader's
    /// view), `under reserve` (its disk is under the store's reserve: it
    /// neither leads nor takes entries) or `unreachable` (it did not
    /// answer the asker now).
    pub role: String,
    /// Its data directory's free bytes, as it said.
    pub free_bytes: Option<u64>,
    /// The free bytes its store keeps at the least.
    pub reserve_bytes: Option<u64>,
    /// Whether it answered the member that made this view, now.
    pub reachable: bool,
    /// The last log index known replicated to it (the leader's view).
    pub matched_index: Option<u64>,
    /// Entries it is behind the leader's log (the leader's view).
    pub lag: Option<u64>,
    /// Milliseconds since it last answered the member that made this
    /// view (its Raft traffic, or the probe the view sends each member).
    pub last_contact_ms_ago: Option<u64>,
}

/// The group, as one member sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembersView {
    /// The member that answered.
    pub this: u64,
    /// Its state: leader, follower, candidate, learner.
    pub state: String,
    /// The leader it knows, if any.
    pub leader: Option<u64>,
    /// The current term.
    pub term: u64,
    /// Its last log index.
    pub last_log_index: Option<u64>,
    /// The last index applied to its store.
    pub applied_index: Option<u64>,
    /// The last index its latest snapshot of the store covers.
    pub snapshot_index: Option<u64>,
    /// The last index removed from its log (covered by a snapshot): a
    /// member that is behind it catches up from a snapshot.
    pub purged_index: Option<u64>,
    /// Elections it saw since it started.
    pub elections: u64,
    /// Milliseconds since a majority acknowledged it (a leader only).
    pub quorum_ack_ms_ago: Option<u64>,
    /// Milliseconds since it last took an append from the leader (a
    /// follower only).
    pub leader_contact_ms_ago: Option<u64>,
    /// Whether it hears a majority: a leader acknowledged by one within
    /// the election timeout, a follower that heard its leader within the
    /// election timeout's top. A member that does not may be cut off: its
    /// view of the group is stale.
    pub hears_majority: bool,
    /// Every member.
    pub members: Vec<MemberView>,
}

/// How long a member's `/raft/info` may take before the view goes without
/// its URL and calls it unreachable.
const INFO_TIMEOUT: Duration = Duration::from_millis(400);

/// A follower further behind the leader's log than this is `catching up`.
pub const CATCHING_UP_LAG_ENTRIES: u64 = 1_000;

impl Replica {
    /// The view of the group from this member.
    pub async fn members_view(&self) -> MembersView {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
        let mut members = Vec::new();
        let nodes: Vec<(u64, String)> = membership
            .nodes()
            .map(|(id, n)| (*id, n.raft.clone()))
            .collect();
        let infos = futures::future::join_all(nodes.iter().map(|(id, _)| async move {
            if *id == self.settings.id {
                return Some((self.settings.api_url.clone(), self.store.disk_room()));
            }
            tokio::time::timeout(INFO_TIMEOUT, self.info_of(*id))
                .await
                .ok()
                .and_then(Result::ok)
                .map(|i| (i.api_url, i.disk))
        }))
        .await;
        let now = wall_ms();
        let contacts = self
            .net
            .contacts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let leads = m.current_leader == Some(self.settings.id);
        for ((id, raft), info) in nodes.into_iter().zip(infos) {
            let (api_url, disk) = match info {
                Some((url, disk)) => (Some(url), disk),
                None => (None, None),
            };
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&id).cloned())
                .flatten()
                .map(|l| l.index);
            let lag = matched.map(|i| m.last_log_index.unwrap_or(0).saturating_sub(i));
            let reachable = api_url.is_some();
            let role = if !reachable {
                "unreachable"
            } else if disk.is_some_and(|d| d.under_reserve()) {
                "under reserve"
            } else if m.current_leader == Some(id) {
                "leader"
            } else if leads && lag.is_none_or(|l| l > CATCHING_UP_LAG_ENTRIES) {
                "catching up"
            } else if voters.contains(&id) {
                "follower"
            } else {
                "learner"
            };
            members.push(MemberView {
                id,
                raft,
                api_url,
                role: role.into(),
                free_bytes: disk.map(|d| d.free_bytes),
                reserve_bytes: disk.map(|d| d.reserve_bytes),
                reachable,
                matched_index: matched,
                lag,
                // This member, or one that answered the probe just now.
                last_contact_ms_ago: if reachable {
                    Some(0)
                } else {
                    contacts.get(&id).map(|at| now.saturating_sub(*at))
                },
            });
        }
        let leader_contact_ms_ago = self.leader_contact_ms_ago();
        let hears_majority = if leads {
            self.heard_majority(&m)
        } else {
            m.current_leader.is_some() && self.heard_leader(leader_contact_ms_ago)
        };
        MembersView {
            this: self.settings.id,
            state: m.state.name().into(),
            leader: m.current_leader,
            term: m.current_term,
            last_log_index: m.last_log_index,
            applied_index: m.last_applied.map(|l| l.index),
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            elections: self.elections(),
            quorum_ack_ms_ago: m.millis_since_quorum_ack,
            leader_contact_ms_ago: if leads { None } else { leader_contact_ms_ago },
            hears_majority,
            members,
        }
    }
}
