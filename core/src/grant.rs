//! Whether a worker runs a grant that reached it.
//!
//! A grant travels on the worker's session. When the network between the
//! engine and a worker goes silent, the engine declares the worker lost
//! once a lease has passed without a word from it, and hands its tickets
//! to others. Bytes held in a buffer or a retransmission queue during the
//! silence still arrive afterwards: a grant sent at the instant of the cut
//! can reach the worker long after its ticket was handed elsewhere. The
//! worker judges a grant by what it knows on its own clock (clocks of two
//! machines are not compared): whether the session the grant came on is
//! still its session, and how long the engine was silent before the grant
//! arrived. An engine answers every heartbeat, so a silence past the lease
//! means the engine has, or soon will have, declared this worker lost.

/// What a worker does with a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantFate {
    /// Run it.
    Run,
    /// Refuse it: its ticket is, or will be, another worker's.
    Refuse(StaleGrant),
}

/// Why a grant is stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleGrant {
    /// The worker has no session with the engine now (it dropped the one
    /// the grant came on, or was told it was lost): the grant belongs to
    /// a session that ended.
    NoSession,
    /// It arrived after the engine had been silent for `silent_ms`, past
    /// the lease of `lease_ms`.
    AfterSilence {
        /// How long nothing came from the engine before the grant.
        silent_ms: u64,
        /// The lease the engine declares a worker lost after.
        lease_ms: u64,
    },
}

impl std::fmt::Display for StaleGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StaleGrant::NoSession => f.write_str("it came on a session that has ended"),
            StaleGrant::AfterSilence {
                silent_ms,
                lease_ms,
            } => write!(
                f,
                "it arrived after the engine was silent for {silent_ms} ms, past the lease of {lease_ms} ms"
            ),
        }
    }
}

/// The fate of a grant that arrived on a session (`joined`: the worker
/// holds a session now) after `silent_ms` with nothing from the engine,
/// under a lease of `lease_ms`.
pub fn grant_fate(joined: bool, silent_ms: u64, lease_ms: u64) -> GrantFate {
    if !joined {
        return GrantFate::Refuse(StaleGrant::NoSession);
    }
    if silent_ms > lease_ms {
        return GrantFate::Refuse(StaleGrant::AfterSilence {
            silent_ms,
            lease_ms,
        });
    }
    GrantFate::Run
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_on_a_live_session_runs() {
        assert_eq!(grant_fate(true, 0, 2_000), GrantFate::Run);
        // Exactly the lease is not past it.
        assert_eq!(grant_fate(true, 2_000, 2_000), GrantFate::Run);
    }

    #[test]
    fn a_grant_after_a_silence_past_the_lease_is_refused() {
        assert_eq!(
            grant_fate(true, 110_000, 2_000),
            GrantFate::Refuse(StaleGrant::AfterSilence {
                silent_ms: 110_000,
                lease_ms: 2_000
            })
        );
        assert_eq!(
            grant_fate(true, 2_001, 2_000),
            GrantFate::Refuse(StaleGrant::AfterSilence {
                silent_ms: 2_001,
                lease_ms: 2_000
            })
        );
    }

    #[test]
    fn a_grant_without_a_session_is_refused_however_fresh() {
        assert_eq!(
            grant_fate(false, 0, 2_000),
            GrantFate::Refuse(StaleGrant::NoSession)
        );
    }
}
