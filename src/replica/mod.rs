//! A replicated engine (DESIGN §7a): three (or five) `weir serve` members
//! replicate the store's writes over Raft (openraft 0.9); the leader runs
//! the actor tree, followers apply. This module is the member's half that
//! does not depend on the engine: the Raft node on the member's store, its
//! transport, and the [`Replicator`] the store proposes through. The CLI's
//! `serve` runs the engine on the leader (see `cli::replicated`).

mod front;
mod front_audit;
mod guard;
mod log_store;
mod machine;
mod members;
mod network;
mod node;
mod proposer;
mod recover;
mod rpc;
mod runtime;
mod settings;
mod stream;
mod tls;
mod types;

pub use front::Front;
pub use guard::{INDEX_MAX, TERM_AHEAD_MAX, TERM_MAX};
pub use members::{MemberView, MembersView, CATCHING_UP_LAG_ENTRIES};
pub use network::COOKIE_HEADER;
pub use node::{Health, Replica, READY_LAG_ENTRIES};
pub use recover::{force_new_group, Forgotten};
pub use rpc::MemberInfo;
pub use settings::{
    check_host_port, snapshot_entries, RaftTimers, ReplicaSettings, ELECTION_MAX_MS_DEFAULT,
    ELECTION_MIN_MS_DEFAULT, ENV_SNAPSHOT_ENTRIES, HEARTBEAT_MS_DEFAULT, SNAPSHOT_ENTRIES_DEFAULT,
};
pub use tls::{PeerTls, PeerTlsFiles};
pub(crate) use types::wall_ms;
pub use types::{Member, Raft, TypeConfig};
