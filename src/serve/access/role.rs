//! Roles: what a token may do. Each is the one below it plus more, so a
//! route needs one role and every role above it passes.
//!
//! - `viewer` reads: graphs, runs, logs, the queue, metrics, events.
//! - `operator` also acts on work: start, backfill, rerun, clear, mark,
//!   cancel, pause, unpause, trigger, signal, reconcile, requeue.
//! - `admin` also changes the engine: reload definitions, reset breakers,
//!   manage tokens, read the audit log.

use serde::{Deserialize, Serialize};

/// A token's role. Ordered: `Viewer < Operator < Admin`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads only.
    Viewer,
    /// Reads, and acts on runs, keys and the dead letters.
    Operator,
    /// Everything, tokens and the audit log included.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    /// Its name, as written in commands and documents.
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    /// Whether a holder of this role may use a route that needs `needed`.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| format!("role {s:?}: write viewer, operator or admin"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_allows_itself_and_those_below() {
        // (holder, needed, allowed)
        let table = [
            (Role::Viewer, Role::Viewer, true),
            (Role::Viewer, Role::Operator, false),
            (Role::Viewer, Role::Admin, false),
            (Role::Operator, Role::Viewer, true),
            (Role::Operator, Role::Operator, true),
            (Role::Operator, Role::Admin, false),
            (Role::Admin, Role::Viewer, true),
            (Role::Admin, Role::Operator, true),
            (Role::Admin, Role::Admin, true),
        ];
        for (i, (holder, needed, want)) in table.into_iter().enumerate() {
            assert_eq!(
                holder.allows(needed),
                want,
                "#{i}: {holder} on a route needing {needed}"
            );
        }
    }

    #[test]
    fn names_round_trip_and_a_wrong_one_is_named() {
        for r in Role::ALL {
            assert_eq!(r.name().parse::<Role>().unwrap(), r);
        }
        let e = "root".parse::<Role>().unwrap_err();
        assert!(e.contains("\"root\"") && e.contains("viewer"), "{e}");
    }
}
