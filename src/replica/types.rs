//! The replicated engine's Raft types: an entry's data, the member as the
//! membership names it, and small shared helpers.

use std::io::Cursor;

use openraft::ServerState;
use serde::{Deserialize, Serialize};
use weir_actors::store::WriteSet;

openraft::declare_raft_types!(
    /// The replicated engine's Raft types: an entry's data is one write set
    /// of the store; its answer, whether its guard held.
    pub TypeConfig:
        D = Vec<WriteSet>,
        R = Vec<bool>,
        NodeId = u64,
        Node = Member,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = super::runtime::RpcRuntime,
);

/// The Raft node.
pub type Raft = openraft::Raft<TypeConfig>;

/// A member as the group's membership names it: where its Raft listener is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// `HOST:PORT` of its Raft listener.
    pub raft: String,
}

/// A server state's name, as views show it.
pub(crate) trait ServerStateExt {
    fn name(&self) -> &'static str;
}

impl ServerStateExt for ServerState {
    fn name(&self) -> &'static str {
        match self {
            ServerState::Leader => "leader",
            ServerState::Follower => "follower",
            ServerState::Candidate => "candidate",
            ServerState::Learner => "learner",
            ServerState::Shutdown => "shutdown",
        }
    }
}

/// Milliseconds since the epoch.
pub(crate) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
