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
//! A changing request refused before any handler ran — beyond its
//! caller's role (403), on no route (404) or with a method its route does
//! not take (405), over the body limit (413) — changed nothing, so its
//! entry is written whole, once, and only while its caller's refusal
//! budget lasts ([`super::refusals`]): a token that hammers a route it may
//! not use cannot fill the log. The next entry written for it counts the
//! refusals left out (`refusals_dropped`), as does the metric
//! `weir_audit_refusals_dropped_total`.
//!
//! Entries are records `audit/<at_ms>-<boot_ms>-<seq>` (time-ordered keys)
//! with an expiry after the retention (default [`AUDIT_RETENTION_DEFAULT`]).
//! Parameters are the path, the query and the JSON body with every field
//! (and query parameter) whose name says it is a secret left out, cut at
//! [`PARAMS_BYTES_MAX`]; an error text that quotes such a value has it
//! left out too ([`scrub`]).

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
/// A secret value this long or longer is left out of an error text
/// wherever it stands; a shorter one only where quoted (`` `v` ``, `"v"`,
/// `'v'`), so that a digit of `line 1 column 62` is not taken for it.
pub const SCRUB_BARE_CHARS_MIN: usize = 4;

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
    /// The route, as the API document names it (`/api/v1/graphs/{graph}/runs`);
    /// empty when no route took the request.
    pub route: String,
    /// The request's path and query (secret query values left out).
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
    /// Refusals of the same caller left out of the log, over its budget,
    /// since the last one written (absent in entries written before the
    /// budget existed).
    #[serde(default)]
    pub refusals_dropped: u64,
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

/// Writes `entry`, whole (with its outcome), durably: a request refused
/// before any handler ran changed nothing, so one write says all.
pub fn write_whole(
    store: &Store,
    entry: AuditEntry,
    seq: u64,
    retention: Duration,
) -> Result<(), StoreError> {
    debug_assert!(entry.outcome.is_some(), "a whole entry has its outcome");
    begin(store, entry, seq, retention).map(|_| ())
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
    params_and_secrets(body).0
}

/// [`params_of`], and the secret values it left out (for [`scrub`]).
pub fn params_and_secrets(body: &[u8]) -> (String, Vec<String>) {
    if body.is_empty() {
        return (String::new(), Vec::new());
    }
    let mut secrets = Vec::new();
    let text = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(mut v) => {
            redact(&mut v, &mut secrets);
            v.to_string()
        }
        Err(_) => format!("({} bytes, not JSON)", body.len()),
    };
    (cut(text, PARAMS_BYTES_MAX), secrets)
}

/// A request's path and query as an entry keeps it: the value of each
/// query parameter named like a secret (`?password=…`) left out; and the
/// values left out (decoded, for [`scrub`]).
pub fn path_and_secrets(path_and_query: &str) -> (String, Vec<String>) {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return (path_and_query.to_string(), Vec::new());
    };
    let mut secrets = Vec::new();
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |t: &str| {
                percent_encoding::percent_decode_str(&t.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            if is_secret(&decode(name)) {
                secrets.push(decode(value));
                format!("{name}={LEFT_OUT}")
            } else {
                pair.to_string()
            }
        })
        .collect();
    (format!("{path}?{}", pairs.join("&")), secrets)
}

/// `message` with each of `secrets` left out: an error text that quotes a
/// value the request's parameters left out (serde's `params.api_secret:
/// invalid type: integer `12345678``) does not put it back in the log.
pub fn scrub(message: &str, secrets: &[String]) -> String {
    let mut values: Vec<&str> = secrets
        .iter()
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .collect();
    // Longest first: a secret that holds another is left out whole.
    values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let mut out = message.to_string();
    for v in values {
        // As Debug writes it (serde's `string "…"`, a handler's `{:?}`).
        out = out.replace(&format!("{v:?}"), &format!("{LEFT_OUT:?}"));
        if v.chars().count() >= SCRUB_BARE_CHARS_MIN {
            out = out.replace(v, LEFT_OUT);
        } else {
            for q in ['`', '"', '\''] {
                out = out.replace(&format!("{q}{v}{q}"), &format!("{q}{LEFT_OUT}{q}"));
            }
        }
    }
    out
}

fn is_secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["token", "secret", "password", "authorization", "credential", "key"]
        .iter()
        .any(|s| n.contains(s))
        // A job key or a key's name is not a secret.
        && !matches!(n.as_str(), "key" | "keys" | "job_key")
}

fn redact(v: &mut serde_json::Value, secrets: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if is_secret(k) {
                    leaves(x, secrets);
                    *x = serde_json::Value::String(LEFT_OUT.into());
                } else {
                    redact(x, secrets);
                }
            }
        }
        serde_json::Value::Array(xs) => xs.iter_mut().for_each(|x| redact(x, secrets)),
        _ => {}
    }
}

/// The strings and numbers under a secret field, as an error would quote
/// them (booleans and nulls tell nothing and would match every message).
fn leaves(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Number(n) => out.push(n.to_string()),
        serde_json::Value::Array(xs) => xs.iter().for_each(|x| leaves(x, out)),
        serde_json::Value::Object(m) => m.values().for_each(|x| leaves(x, out)),
        serde_json::Value::Bool(_) | serde_json::Value::Null => {}
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
    /// The route as the API document names it; empty when no route took
    /// the request.
    pub route: String,
    /// The path and query (secret query values left out).
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
    /// Refusals of the same caller left out of the log (over its refusal
    /// budget) since the last one written.
    pub refusals_dropped: u64,
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
            refusals_dropped: e.refusals_dropped,
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

    /// Secrets in a query string and in an error text (#43 item 10).
    #[test]
    fn query_secrets_and_quoted_secrets_in_errors_are_left_out() {
        // (path and query, want path, want secrets)
        let table: &[(&str, &str, &[&str])] = &[
            ("/a/b", "/a/b", &[]),
            ("/a?limit=5", "/a?limit=5", &[]),
            (
                "/a?password=hunter2&limit=5",
                "/a?password=(left out)&limit=5",
                &["hunter2"],
            ),
            (
                "/a?x=1&API_Token=s%20t+u&key=k1",
                "/a?x=1&API_Token=(left out)&key=k1",
                &["s t u"],
            ),
            ("/a?secret", "/a?secret=(left out)", &[""]),
        ];
        for (i, (given, want, want_secrets)) in table.iter().enumerate() {
            let (got, secrets) = path_and_secrets(given);
            assert_eq!(&got, want, "#{i}: {given}");
            assert_eq!(secrets, *want_secrets, "#{i}: {given}");
        }
        let body =
            br#"{"partitions":["x"],"params":{"secret_stuff":12345678,"db_password":"pw","n":7}}"#;
        let (params, mut secrets) = params_and_secrets(body);
        assert!(
            !params.contains("12345678") && !params.contains("\"pw\""),
            "{params}"
        );
        secrets.sort();
        assert_eq!(secrets, ["12345678", "pw"]);
        // (error text, want)
        let table: &[(&str, &str)] = &[
            (
                "body: params.secret_stuff: invalid type: integer `12345678`, expected a string at line 1 column 62",
                "body: params.secret_stuff: invalid type: integer `(left out)`, expected a string at line 1 column 62",
            ),
            (
                "params.db_password: invalid type: string \"pw\", expected u32",
                "params.db_password: invalid type: string \"(left out)\", expected u32",
            ),
            // A short value stands bare: it is not taken for a secret.
            ("at line 1 column pw", "at line 1 column pw"),
            ("value 12345678 refused", "value (left out) refused"),
        ];
        for (i, (given, want)) in table.iter().enumerate() {
            assert_eq!(scrub(given, &secrets), *want, "#{i}");
        }
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
