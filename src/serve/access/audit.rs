//! The audit log: who changed what, when, from where, and how it ended.
//!
//! Every request that may change something (every method but GET and
//! HEAD) gets an entry once its caller is known, written ahead: the entry
//! is durable before the handler runs, and its outcome (status, error)
//! is written, durably, before the answer leaves. So a change never exists
//! without its entry. A kill -9 between the two leaves an entry without
//! outcome; read back after the restart it says `interrupted` (the engine
//! stopped before answering; whether the change took effect is in the
//! change's own records: the run, the ticket). Nothing is acknowledged
//! that the log does not hold.
//!
//! Entries are records `audit/<at_ms>-<boot_ms>-<seq>` (time-ordered keys)
//! with an expiry after the retention (default [`AUDIT_RETENTION_DEFAULT`]).
//! Parameters are the path, the query and the JSON body with every field
//! whose name says it is a secret left out, cut at [`PARAMS_BYTES_MAX`].

use serde::{Deserialize, Serialize};
use std::time::Duration;
use weir_actors::store::{Expiring, Store, StoreError};

use super::role::Role;

/// The records' key prefix.
pub const AUDIT_PREFIX: &str = "audit/";
/// How long entries are kept unless told otherwise.
pub const AUDIT_RETENTION_DEFAULT: Duration = Duration::from_secs(90 * 24 * 3600);
/// An entry's parameters are cut at this many bytes.
pub const PARAMS_BYTES_MAX: usize = 4 * 1024;
/// Entries one read returns at most.
pub const AUDIT_LIST_MAX: usize = 10_000;
/// What replaces a secret's value.
pub const LEFT_OUT: &str = "(left out)";

/// One audited request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it arrived (ms since the epoch).
    pub at_ms: u64,
    /// The caller's token name.
    pub who: String,
    /// The caller's role.
    pub role: Role,
    /// The HTTP method.
    pub method: String,
    /// The route, as the API document names it (`/api/v1/graphs/{graph}/runs`).
    pub route: String,
    /// The request's path and query.
    pub path: String,
    /// The JSON body, secrets left out (empty when there was none).
    pub params: String,
    /// The client's address.
    pub client: String,
    /// How it ended; `None` while it runs (or if the engine stopped first).
    pub outcome: Option<Outcome>,
    /// The start time of the engine process that took the request: an entry
    /// without outcome from another process was interrupted.
    pub boot_ms: u64,
}

/// How an audited request ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The HTTP status answered.
    pub status: u16,
    /// The error's message, for a status of 400 and above.
    pub error: Option<String>,
    /// How long it took.
    pub took_ms: u64,
}

/// An entry written ahead of its request, waiting for the outcome.
pub struct Pending {
    key: String,
    raw: Vec<u8>,
    entry: AuditEntry,
}

/// Which entries to read.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Entries at or after this instant.
    pub since_ms: Option<u64>,
    /// Entries of this token name.
    pub who: Option<String>,
    /// At most this many, the newest (default and ceiling [`AUDIT_LIST_MAX`]).
    pub limit: Option<usize>,
}

/// Writes `entry` (without outcome) durably, to expire after `retention`.
pub fn begin(
    store: &Store,
    entry: AuditEntry,
    seq: u64,
    retention: Duration,
) -> Result<Pending, StoreError> {
    let key = format!(
        "{AUDIT_PREFIX}{:016}-{:016}-{seq:010}",
        entry.at_ms, entry.boot_ms
    );
    let raw = store.encode("audit entry", &entry)?;
    let expiring = Expiring {
        at_ms: entry
            .at_ms
            .saturating_add(retention.as_millis().min(u64::MAX as u128) as u64),
        key: key.clone(),
    };
    store.compare_and_put(&key, None, Some(&raw), &[expiring], &[])?;
    Ok(Pending { key, raw, entry })
}

/// Writes the outcome of a pending entry, durably.
pub fn finish(store: &Store, p: Pending, outcome: Outcome) -> Result<(), StoreError> {
    let mut entry = p.entry;
    entry.outcome = Some(outcome);
    let raw = store.encode("audit entry", &entry)?;
    // The entry may have expired meanwhile (a retention shorter than a
    // request): then there is nothing to finish.
    store.compare_and_put(&p.key, Some(&p.raw), Some(&raw), &[], &[])?;
    Ok(())
}

/// The entries `filter` asks for, oldest first.
pub fn list(store: &Store, filter: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
    let limit = filter.limit.unwrap_or(AUDIT_LIST_MAX).min(AUDIT_LIST_MAX);
    let mut out: Vec<AuditEntry> = store
        .scan::<AuditEntry>(AUDIT_PREFIX)?
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| filter.since_ms.is_none_or(|s| e.at_ms >= s))
        .filter(|e| filter.who.as_deref().is_none_or(|w| e.who == w))
        .collect();
    if out.len() > limit {
        out.drain(..out.len() - limit);
    }
    Ok(out)
}

/// A request's JSON body as an entry keeps it: fields named like secrets
/// left out, cut at [`PARAMS_BYTES_MAX`]. A body that is not JSON is
/// described by its size only.
pub fn params_of(body: &[u8]) -> String {
    if body.is_empty() {
        return String::new();
    }
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut v) => {
            redact(&mut v);
            v.to_string()
        }
        Err(_) => format!("({} bytes, not JSON)", body.len()),
    };
    cut(text, PARAMS_BYTES_MAX)
}

fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["token", "secret", "password", "authorization", "credential", "key"]
        .iter()
        .any(|s| n.contains(s))
        // A job key or a key's name is not a secret.
        && !matches!(n.as_str(), "key" | "keys" | "job_key")
}

fn redact(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if is_secret(k) {
                    *x = serde_json::Value::String(LEFT_OUT.into());
                } else {
                    redact(x);
                }
            }
        }
        serde_json::Value::Array(xs) => xs.iter_mut().for_each(redact),
        _ => {}
    }
}

fn cut(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut at = max;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
    s.push_str("…(cut)");
    s
}

/// An audit entry as read.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditView {
    /// When the request arrived (ms since the epoch).
    pub at_ms: u64,
    /// The caller's token name.
    pub who: String,
    /// The caller's role.
    pub role: Role,
    /// The HTTP method.
    pub method: String,
    /// The route as the API document names it.
    pub route: String,
    /// The path and query.
    pub path: String,
    /// The JSON body, secrets left out.
    pub params: String,
    /// The client's address.
    pub client: String,
    /// `ok`, `refused` (4xx), `failed` (5xx), `running`, or `interrupted`
    /// (the engine stopped before answering).
    pub outcome: String,
    /// The HTTP status answered, if it answered.
    pub status: Option<u16>,
    /// The error's message, for a refusal or failure.
    pub error: Option<String>,
    /// How long it took.
    pub took_ms: Option<u64>,
}

impl AuditView {
    /// The entry as read by the engine process that started at `boot_ms`.
    pub fn of(e: AuditEntry, boot_ms: u64) -> AuditView {
        let outcome = match &e.outcome {
            Some(o) if o.status < 400 => "ok",
            Some(o) if o.status < 500 => "refused",
            Some(_) => "failed",
            None if e.boot_ms == boot_ms => "running",
            None => "interrupted",
        };
        AuditView {
            at_ms: e.at_ms,
            who: e.who,
            role: e.role,
            method: e.method,
            route: e.route,
            path: e.path,
            params: e.params,
            client: e.client,
            outcome: outcome.to_string(),
            status: e.outcome.as_ref().map(|o| o.status),
            error: e.outcome.as_ref().and_then(|o| o.error.clone()),
            took_ms: e.outcome.as_ref().map(|o| o.took_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_left_out_at_any_depth_and_keys_are_kept() {
        let body = br#"{"name":"grafana","token":"s3cret","nested":{"api_secret":"x","list":[{"password":"p"}]},"key":"user-1"}"#;
        let p = params_of(body);
        assert!(
            !p.contains("s3cret") && !p.contains("\"x\"") && !p.contains("\"p\""),
            "{p}"
        );
        assert!(p.contains("grafana") && p.contains("user-1"), "{p}");
        assert_eq!(p.matches(LEFT_OUT).count(), 3, "{p}");
    }

    #[test]
    fn bodies_are_cut_and_non_json_is_described() {
        let long = format!("{{\"a\":\"{}\"}}", "é".repeat(PARAMS_BYTES_MAX));
        let p = params_of(long.as_bytes());
        assert!(
            p.len() <= PARAMS_BYTES_MAX + 10 && p.ends_with("…(cut)"),
            "{}",
            p.len()
        );
        assert_eq!(params_of(b"not json"), "(8 bytes, not JSON)");
        assert_eq!(params_of(b""), "");
    }
}
