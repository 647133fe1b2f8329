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
    /// Leader heartbeats, ms.
    pub heartbeat_ms: u64,
    /// A follower that hears no leader for a random time in this range
    /// (ms) stands for election; a leader that has not heard a majority for
    /// `election_min_ms` stops its engine.
    pub election_min_ms: u64,
    /// See `election_min_ms`.
    pub election_max_ms: u64,
    /// Entries between snapshots of the state machine (the log behind one
    /// is purged).
    pub snapshot_entries: u64,
    /// Mutual TLS between members (`--peer-ca`); plain HTTP without.
    pub tls: Option<super::tls::PeerTls>,
}

/// Heartbeat interval (ms) by default: a quarter of the election timeout.
pub const HEARTBEAT_MS_DEFAULT: u64 = 100;
/// Election timeout range (ms) by default: on loopback or a LAN, four
/// heartbeats missed at least. A follower stands for election once the
/// leader's lease (the range's top) and then its own timeout passed with
/// no heartbeat: 1.0 to 1.2 s after the leader's last one.
pub const ELECTION_MIN_MS_DEFAULT: u64 = 400;
/// See [`ELECTION_MIN_MS_DEFAULT`].
pub const ELECTION_MAX_MS_DEFAULT: u64 = 600;
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
