//! A member's settings, and `--raft-peers` parsed.

use std::collections::BTreeMap;

/// A member's settings.
#[derive(Debug, Clone)]
pub struct ReplicaSettings {
    /// This member's id.
    pub id: u64,
    /// Every member's Raft address by id, this one's included.
    pub peers: BTreeMap<u64, String>,
    /// The cluster's cookie (peers prove it on every request).
    pub cookie: String,
    /// This member's API URL.
    pub api_url: String,
    /// Where workers join this member, if they may.
    pub cluster: Option<String>,
    /// Leader heartbeats, ms at most: the lease may need them more often
    /// (see [`RaftTimers`]).
    pub heartbeat_ms: u64,
    /// A follower that hears no leader for a random time in this range
    /// (ms) stands for election; a leader that has not heard a majority
    /// for its fence (a third of the range's top) stops its engine. See
    /// [`RaftTimers`].
    pub election_min_ms: u64,
    /// See `election_min_ms`.
    pub election_max_ms: u64,
    /// Entries between snapshots of the state machine (the log behind one
    /// is purged).
    pub snapshot_entries: u64,
    /// Mutual TLS between members (`--peer-ca`); plain HTTP without.
    pub tls: Option<super::tls::PeerTls>,
}

/// Heartbeat interval (ms) by default, at most: a quarter of the election
/// timeout (the lease makes them more frequent: see [`RaftTimers`]).
pub const HEARTBEAT_MS_DEFAULT: u64 = 100;
/// Election timeout range (ms) by default: on loopback or a LAN, six
/// heartbeats missed at least. A follower stands for election 400 to
/// 600 ms after the leader's last append (and the next tick of its
/// timer: see [`RaftTimers`]).
pub const ELECTION_MIN_MS_DEFAULT: u64 = 400;
/// See [`ELECTION_MIN_MS_DEFAULT`].
pub const ELECTION_MAX_MS_DEFAULT: u64 = 600;
/// The Raft timers a member runs with, all derived from its election
/// timeout range `[min, max)` (`--election-timeout-ms` gives `min`, and
/// `max` is half as much again).
///
/// openraft 0.9 has no pre-vote and no lease setting of its own: its
/// lease is its `election_timeout_max`, and a follower that heard the
/// leader stands only after that lease *and then* its own random timeout
/// in `[election_timeout_min, election_timeout_max)` — so openraft's
/// range given as the member's would have it stand 2.5 to 3 times the
/// election timeout after the leader's last append (1.0 to 1.2 s by
/// default). The member's range is therefore split between the two:
///
/// - `lease_ms` = max / 2 (300 ms by default), openraft's
///   `election_timeout_max`: a follower that took an append within it
///   refuses every vote (what pre-vote and check-quorum give etcd: a
///   member cut off and back cannot depose a leader the others hear).
///   Shorter, a leader stalled that long (a pause, a slow disk) loses
///   its followers' loyalty sooner; longer, a dead leader is replaced
///   later, and the stand range narrows.
/// - `raft_election_min_ms` = min − lease (100 ms): with the lease, a
///   follower stands `[min, max)` after the leader's last append, plus up
///   to one tick of openraft's timer (1.5 heartbeats; elections and
///   heartbeats both go on ticks). A narrower range would make split
///   votes more likely.
/// - `fence_ms` = lease × 2/3 (200 ms): a leader that has not heard a
///   majority acknowledge an append sent within it stops its engine. No
///   voter grants another candidate its vote within the lease of the
///   last append it took, and that append was sent no earlier than the
///   leader's last acknowledged one: the old engine stops before a new
///   leader can be elected, with the rest of the lease (100 ms) for the
///   lead check's period and the engine's stop. Shorter, a leader whose
///   acknowledgements are late (a loaded machine, large appends) stops
///   and reopens its engine more often.
/// - `heartbeat_ms` = fence × 2/9 (44 ms) at most: a tick every
///   fence / 3, so the leader is acknowledged about three times within
///   its fence. More heartbeats cost one small HTTP request a tick per
///   follower.
///
/// openraft also takes its heartbeat interval as the deadline of every
/// append, and its `election_timeout_min` as that of every vote: the
/// member's runtime keeps both at `min` at least (see
/// `runtime::RpcRuntime`), as long as before this split, so a follower's
/// slow fsync is not cut short and sent again without end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaftTimers {
    /// openraft's `heartbeat_interval`.
    pub heartbeat_ms: u64,
    /// openraft's `election_timeout_min`.
    pub raft_election_min_ms: u64,
    /// openraft's `election_timeout_max`: its leader lease too.
    pub lease_ms: u64,
    /// A leader without a majority's acknowledgement within this stops
    /// its engine.
    pub fence_ms: u64,
}

impl RaftTimers {
    /// The timers of a member whose election timeout range is
    /// `[election_min_ms, election_max_ms)` and whose heartbeats come
    /// every `heartbeat_ms` at most.
    pub fn of(heartbeat_ms: u64, election_min_ms: u64, election_max_ms: u64) -> RaftTimers {
        let lease_ms = (election_max_ms / 2).max(2);
        // openraft needs min < max; a range given narrower than this
        // config can honour keeps at least 1 ms of it.
        let raft_election_min_ms = election_min_ms
            .saturating_sub(lease_ms)
            .clamp(1, lease_ms - 1);
        let fence_ms = (lease_ms * 2 / 3).max(1);
        let heartbeat_ms = heartbeat_ms.min(fence_ms * 2 / 9).max(1);
        RaftTimers {
            heartbeat_ms,
            raft_election_min_ms,
            lease_ms,
            fence_ms,
        }
    }

    /// When a follower that took the leader's last append `0` ms ago
    /// stands at the soonest and at the latest (ms), its timer's tick
    /// included.
    pub fn stands_ms(&self) -> (u64, u64) {
        (
            self.lease_ms + self.raft_election_min_ms,
            2 * self.lease_ms + self.heartbeat_ms * 3 / 2,
        )
    }
}

impl ReplicaSettings {
    /// This member's Raft timers (see [`RaftTimers`]).
    pub fn timers(&self) -> RaftTimers {
        RaftTimers::of(
            self.heartbeat_ms,
            self.election_min_ms,
            self.election_max_ms,
        )
    }
}

/// Entries between snapshots by default.
pub const SNAPSHOT_ENTRIES_DEFAULT: u64 = 20_000;
/// Sets the entries between snapshots (tests make them frequent).
pub const ENV_SNAPSHOT_ENTRIES: &str = "WEIR_RAFT_SNAPSHOT_ENTRIES";

/// Entries between snapshots: [`ENV_SNAPSHOT_ENTRIES`], else the default.
pub fn snapshot_entries() -> u64 {
    std::env::var(ENV_SNAPSHOT_ENTRIES)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(SNAPSHOT_ENTRIES_DEFAULT)
}

impl ReplicaSettings {
    /// Parses `--raft-peers` (`1=HOST:PORT,2=HOST:PORT,…`); a host is an
    /// IP address (`[…]` around IPv6) or a name, resolved again on every
    /// connection (a member replaced under the same name is found).
    pub fn parse_peers(text: &str) -> Result<BTreeMap<u64, String>, String> {
        let mut peers = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (id, addr) = part.split_once('=').ok_or_else(|| {
                format!("--raft-peers: {part:?} is not ID=HOST:PORT (write e.g. 1=127.0.0.1:7501)")
            })?;
            let id: u64 = id
                .trim()
                .parse()
                .map_err(|e| format!("--raft-peers: id {id:?} in {part:?}: {e}"))?;
            if id == 0 {
                return Err(format!("--raft-peers: {part:?}: ids start at 1"));
            }
            let addr = addr.trim();
            check_host_port(addr)
                .map_err(|e| format!("--raft-peers: address {addr:?} of member {id}: {e}"))?;
            if peers.insert(id, addr.to_string()).is_some() {
                return Err(format!("--raft-peers: member {id} is named twice"));
            }
        }
        if peers.is_empty() {
            return Err("--raft-peers: no member (write e.g. 1=127.0.0.1:7501,2=…,3=…)".into());
        }
        Ok(peers)
    }
}

/// Checks `HOST:PORT`: an IPv4 address, an IPv6 address in brackets, or a
/// DNS name (letters, digits, `-` and `.`, labels of 1 to 63 characters,
/// at most 253 in all), and a port from 1 to 65535.
pub fn check_host_port(addr: &str) -> Result<(), String> {
    if addr.parse::<std::net::SocketAddr>().is_ok() {
        return Ok(());
    }
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or("no port (write HOST:PORT, e.g. weir-0.weir:7501)")?;
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(format!("port {port:?} is not 1 to 65535")),
    }
    if host.starts_with('[') || host.contains(':') {
        return Err(format!(
            "{host:?} is not an IPv6 address (write [ADDRESS]:PORT)"
        ));
    }
    if host.is_empty() || host.len() > 253 {
        return Err("a host name of 1 to 253 characters is needed".into());
    }
    for label in host.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ok {
            return Err(format!(
                "host {host:?}: label {label:?} is not a DNS label (letters, digits and '-', 1 to 63)"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raft_timers_keep_the_fence_inside_the_lease() {
        // (heartbeat, election min, election max): the timers wanted.
        // The first row is the default (400-600 ms), the second the
        // tests' (600-900 ms). Invariants checked on every row: the
        // fence leaves the lease room for the lead check (25 ms) and a
        // tick; a follower stands within [min, max) plus a tick.
        let table: &[((u64, u64, u64), RaftTimers)] = &[
            (
                (100, 400, 600),
                RaftTimers {
                    heartbeat_ms: 44,
                    raft_election_min_ms: 100,
                    lease_ms: 300,
                    fence_ms: 200,
                },
            ),
            (
                (150, 600, 900),
                RaftTimers {
                    heartbeat_ms: 66,
                    raft_election_min_ms: 150,
                    lease_ms: 450,
                    fence_ms: 300,
                },
            ),
            (
                (20, 400, 600),
                RaftTimers {
                    heartbeat_ms: 20,
                    raft_election_min_ms: 100,
                    lease_ms: 300,
                    fence_ms: 200,
                },
            ),
            (
                (25, 100, 150),
                RaftTimers {
                    heartbeat_ms: 11,
                    raft_election_min_ms: 25,
                    lease_ms: 75,
                    fence_ms: 50,
                },
            ),
        ];
        for (i, ((hb, min, max), want)) in table.iter().enumerate() {
            let got = RaftTimers::of(*hb, *min, *max);
            assert_eq!(
                got, *want,
                "#{i}: ({hb}, {min}, {max}): got {got:?}, want {want:?}"
            );
            let tick = got.heartbeat_ms * 3 / 2;
            assert!(
                got.raft_election_min_ms < got.lease_ms,
                "#{i}: openraft needs min < max: {got:?}"
            );
            assert!(
                got.fence_ms + tick <= got.lease_ms,
                "#{i}: the fence and a tick overrun the lease: {got:?}"
            );
            assert!(
                got.fence_ms >= 3 * tick,
                "#{i}: fewer than three ticks within the fence: {got:?}"
            );
            let (soonest, latest) = got.stands_ms();
            assert_eq!(soonest, *min, "#{i}: stands at the range's bottom: {got:?}");
            assert!(
                latest <= max + tick,
                "#{i}: stands by the range's top and a tick: {got:?}"
            );
        }
    }

    #[test]
    fn peers_by_ip_and_by_name() {
        // (text, accepted)
        let table: &[(&str, bool)] = &[
            ("1=127.0.0.1:7501", true),
            ("1=[::1]:7501", true),
            ("1=weir-0.weir.default.svc.cluster.local:7501", true),
            ("1=localhost:7501,2=m2:7502", true),
            ("1=localhost", false),
            ("1=localhost:0", false),
            ("1=localhost:70000", false),
            ("1=bad_name:7501", false),
            ("1=-lead.x:7501", false),
            ("1=a..b:7501", false),
            ("1=::1:7501", false),
            ("1=:7501", false),
            ("0=m:1", false),
        ];
        for (i, (text, want)) in table.iter().enumerate() {
            let got = ReplicaSettings::parse_peers(text);
            assert_eq!(got.is_ok(), *want, "#{i}: {text}: got {got:?}");
        }
    }
}
