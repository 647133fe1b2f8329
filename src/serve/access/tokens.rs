//! API tokens: named secrets with a role, stored hashed in the engine's
//! records (`token/NAME`), never in plain text.
//!
//! A secret is 256 random bits (`weir_` and 64 hex digits), shown once when
//! it is made. The store keeps its blake3 hash: a secret that random needs
//! no slow hash, and a stolen store yields no token. A request's secret is
//! hashed and compared with every live token's hash in constant time.
//!
//! The token of `DATA/token` is the first admin's (named `admin`): it is
//! not in the records, so a data directory made before tokens existed keeps
//! working, and losing the records never locks its owner out. A revoked
//! token stays listed (the audit log names it); its name may be taken
//! again by a new token, and the record it replaces stays listed too, as
//! history (`token/NAME@<created_ms>-<hash>`, at most [`TOKEN_HISTORY_MAX`] a
//! name, the oldest dropped first).
//!
//! Names are compared without regard to case when a token is made: a name
//! that differs from a stored one (or from `admin`) only by case is
//! refused, so `ADMIN` cannot stand beside `admin` in a listing or in the
//! audit log. A token lives at most [`TOKEN_LIFETIME_MAX_MS`].

use serde::{Deserialize, Serialize};
use weir_actors::store::{Store, StoreError};

use super::role::Role;
use crate::serve::discovery::{new_token, token_eq};

/// The records' key prefix.
pub const TOKEN_PREFIX: &str = "token/";
/// The name of `DATA/token`'s holder.
pub const FILE_TOKEN_NAME: &str = "admin";
/// The prefix of every secret weir makes.
pub const SECRET_PREFIX: &str = "weir_";
/// Token names one engine holds at most (revoked ones included).
pub const TOKENS_MAX: usize = 1_000;
/// Earlier records (revoked or expired tokens whose name was taken again)
/// kept per name; the oldest is dropped first.
pub const TOKEN_HISTORY_MAX: usize = 10;
/// The longest a token may live: 10 years (`expires` at most `3650d`).
/// Longer is refused rather than saturated to an instant no calendar
/// holds.
pub const TOKEN_LIFETIME_MAX_MS: u64 = 3_650 * 86_400_000;
/// Separates a name from the creation instant in a history record's key;
/// never in a name (names are `[A-Za-z0-9_.-]`).
const HISTORY_MARK: char = '@';

/// A stored token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// Its name, e.g. `grafana`.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The blake3 hash of its secret, as hex (the secret is not stored).
    pub hash: String,
    /// When it was made (ms since the epoch).
    pub created_ms: u64,
    /// Who made it (a token's name).
    pub created_by: String,
    /// When it stops working, if ever.
    pub expires_ms: Option<u64>,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<u64>,
    /// Who revoked it.
    pub revoked_by: Option<String>,
}

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name.
    pub name: String,
    /// Its role.
    pub role: Role,
    /// Its secret's hash: the UI session's values derive from it.
    pub hash: String,
}

impl Caller {
    /// The holder of `DATA/token`: the first admin.
    fn of_file_token(file_token: &str) -> Caller {
        Caller {
            name: FILE_TOKEN_NAME.to_string(),
            role: Role::Admin,
            hash: hash_secret(file_token),
        }
    }
}

impl From<TokenRecord> for Caller {
    fn from(r: TokenRecord) -> Caller {
        Caller {
            name: r.name,
            role: r.role,
            hash: r.hash,
        }
    }
}

/// Why a secret opens nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No token has this secret.
    #[error("the token is not one of this engine's")]
    Unknown,
    /// The token was revoked.
    #[error("token {name:?} was revoked")]
    Revoked {
        /// Its name.
        name: String,
    },
    /// The token expired.
    #[error("token {name:?} expired")]
    Expired {
        /// Its name.
        name: String,
    },
}

/// Why a token cannot be made or revoked.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The request is wrong (a 400 or 409).
    #[error("{0}")]
    Invalid(String),
    /// No such token (a 404).
    #[error("no token named {0:?}")]
    NotFound(String),
    /// A token of that name is live (a 409).
    #[error("a token named {0:?} exists and is live: revoke it first")]
    Exists(String),
    /// The name differs from a stored one only by case (a 409).
    #[error("name {name:?} differs only by case from token {existing:?}: names are told apart without regard to case; choose another name")]
    CaseClash {
        /// The name asked for.
        name: String,
        /// The name already held.
        existing: String,
    },
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The hash of a secret, as stored.
pub fn hash_secret(secret: &str) -> String {
    blake3::hash(secret.as_bytes()).to_hex().to_string()
}

fn key(name: &str) -> String {
    format!("{TOKEN_PREFIX}{name}")
}

/// The key of an earlier record `r`: its name, its creation instant (so
/// a name's records sort oldest first) and the head of its hash (two made
/// in one millisecond stay two).
fn history_key(r: &TokenRecord) -> String {
    let head = r.hash.get(..16).unwrap_or(&r.hash);
    format!(
        "{TOKEN_PREFIX}{}{HISTORY_MARK}{:016}-{head}",
        r.name, r.created_ms
    )
}

/// Whether a record key is an earlier record's (kept as history).
fn is_history_key(key: &str) -> bool {
    key.contains(HISTORY_MARK)
}

impl TokenRecord {
    /// Whether it opens anything at `now_ms`.
    pub fn refusal(&self, now_ms: u64) -> Option<Refusal> {
        if self.revoked_ms.is_some() {
            return Some(Refusal::Revoked {
                name: self.name.clone(),
            });
        }
        if self.expires_ms.is_some_and(|at| at <= now_ms) {
            return Some(Refusal::Expired {
                name: self.name.clone(),
            });
        }
        None
    }
}

/// Every stored token, by name, each name's records oldest first: the
/// current record of a name and the earlier ones it replaced.
pub fn list(store: &Store) -> Result<Vec<TokenRecord>, StoreError> {
    let mut out: Vec<TokenRecord> = store
        .scan::<TokenRecord>(TOKEN_PREFIX)?
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    out.sort_by(|a, b| (&a.name, a.created_ms).cmp(&(&b.name, b.created_ms)));
    // A crash while a name was taken again can leave a record both current
    // and as history: it is one token, listed once.
    out.dedup_by(|a, b| a.name == b.name && a.created_ms == b.created_ms && a.hash == b.hash);
    Ok(out)
}

/// The caller a secret stands for at `now_ms`: the file token's holder,
/// or a live stored token.
pub fn authenticate(
    store: &Store,
    file_token: &str,
    secret: &str,
    now_ms: u64,
) -> Result<Caller, AuthError> {
    if token_eq(secret, file_token) {
        return Ok(Caller::of_file_token(file_token));
    }
    let hash = hash_secret(secret);
    // Every record is compared, so the time taken does not say which one
    // matched or how much of a hash did.
    let mut found = None;
    for r in list(store)? {
        if token_eq(&r.hash, &hash) {
            found = Some(r);
        }
    }
    let r = found.ok_or(AuthError::Refused(Refusal::Unknown))?;
    match r.refusal(now_ms) {
        Some(why) => Err(AuthError::Refused(why)),
        None => Ok(Caller::from(r)),
    }
}

/// The caller a UI session names (by token name), if that token is live.
pub fn by_name(
    store: &Store,
    file_token: &str,
    name: &str,
    now_ms: u64,
) -> Result<Option<Caller>, StoreError> {
    if name == FILE_TOKEN_NAME {
        return Ok(Some(Caller::of_file_token(file_token)));
    }
    if weir_core::names::Name::new(name).is_err() {
        return Ok(None);
    }
    Ok(store
        .get::<TokenRecord>(&key(name))?
        .filter(|r| r.refusal(now_ms).is_none())
        .map(Caller::from))
}

/// Why a request has no caller.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The secret opens nothing.
    #[error(transparent)]
    Refused(Refusal),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A token just made: its record and its secret (shown once).
#[derive(Debug, Clone)]
pub struct Made {
    /// The record as stored.
    pub record: TokenRecord,
    /// The secret, which is nowhere else.
    pub secret: String,
}

/// Makes a token `name` with `role`, valid until `expires_ms`; `by` is the
/// maker's name. Durable before it returns.
pub fn create(
    store: &Store,
    name: &str,
    role: Role,
    expires_ms: Option<u64>,
    by: &str,
    now_ms: u64,
) -> Result<Made, TokenError> {
    weir_core::names::Name::new(name).map_err(|e| TokenError::Invalid(format!("name: {e}")))?;
    if name.eq_ignore_ascii_case(FILE_TOKEN_NAME) {
        return Err(TokenError::Invalid(format!(
            "name: {name:?} is (or differs only by case from) {FILE_TOKEN_NAME:?}, DATA/token's holder; choose another name"
        )));
    }
    if expires_ms.is_some_and(|at| at <= now_ms) {
        return Err(TokenError::Invalid(
            "expires: the token would be expired already".into(),
        ));
    }
    if expires_ms.is_some_and(|at| at - now_ms > TOKEN_LIFETIME_MAX_MS) {
        return Err(TokenError::Invalid(format!(
            "expires: at most {} (a token lives at most that long)",
            weir_core::duration::human_ms(TOKEN_LIFETIME_MAX_MS)
        )));
    }
    let keys = store.scan_keys(TOKEN_PREFIX)?;
    let names: Vec<&str> = keys
        .iter()
        .filter(|k| !is_history_key(k))
        .map(|k| &k[TOKEN_PREFIX.len()..])
        .collect();
    if let Some(existing) = names
        .iter()
        .find(|n| **n != name && n.eq_ignore_ascii_case(name))
    {
        return Err(TokenError::CaseClash {
            name: name.to_string(),
            existing: (*existing).to_string(),
        });
    }
    let existing = store.get_with_raw::<TokenRecord>(&key(name))?;
    if let Some((r, _)) = &existing {
        if r.revoked_ms.is_none() && r.refusal(now_ms).is_none() {
            return Err(TokenError::Exists(name.to_string()));
        }
    } else if names.len() >= TOKENS_MAX {
        return Err(TokenError::Invalid(format!(
            "this engine holds {TOKENS_MAX} token names, the most it keeps: revoke and reuse a name"
        )));
    }
    let secret = format!(
        "{SECRET_PREFIX}{}",
        new_token().map_err(|e| TokenError::Invalid(format!("cannot make a secret: {e}")))?
    );
    let record = TokenRecord {
        name: name.to_string(),
        role,
        hash: hash_secret(&secret),
        created_ms: now_ms,
        created_by: by.to_string(),
        expires_ms,
        revoked_ms: None,
        revoked_by: None,
    };
    let bytes = store.encode("token", &record)?;
    let expected = existing.as_ref().map(|(_, raw)| raw.as_slice());
    // The record replaced stays listed, as history, written before it is
    // replaced: a crash between the two leaves it in both places (listed
    // once), never gone. Its key is fixed by its name and creation, so two
    // makers write the same history record.
    let history = match &existing {
        Some((old, raw)) => Some(keep_as_history(store, &keys, old, raw)?),
        None => None,
    };
    // Compare-and-put: two makers of one name cannot both win.
    if !store.compare_and_put(&key(name), expected, Some(&bytes), &[], &[])? {
        if let (Some(h), Some((old, _))) = (&history, &existing) {
            // Another maker replaced it (and wrote the same history record),
            // or a revoker changed it: then that token is still the current
            // record, not history.
            let now: Option<TokenRecord> = store.get(&key(name))?;
            if now.is_some_and(|r| r.created_ms == old.created_ms && r.hash == old.hash) {
                store.put_batch(&[], std::slice::from_ref(h))?;
            }
        }
        return Err(TokenError::Exists(name.to_string()));
    }
    tracing::info!(token = name, role = %role, by, "token created");
    Ok(Made { record, secret })
}

/// Writes `old` (stored as `raw`) as a history record of its name, and
/// drops that name's oldest history records past [`TOKEN_HISTORY_MAX`];
/// `keys` are the token keys stored now. Returns the history key.
fn keep_as_history(
    store: &Store,
    keys: &[String],
    old: &TokenRecord,
    raw: &[u8],
) -> Result<String, StoreError> {
    let h = history_key(old);
    let prefix = format!("{TOKEN_PREFIX}{}{HISTORY_MARK}", old.name);
    // Keys sort by creation instant (fixed-width digits): oldest first.
    let mut earlier: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with(&prefix) && **k != h)
        .collect();
    earlier.sort();
    let excess = (earlier.len() + 1).saturating_sub(TOKEN_HISTORY_MAX);
    let dropped: Vec<String> = earlier.into_iter().take(excess).cloned().collect();
    store.put_batch(&[(h.clone(), raw.to_vec())], &dropped)?;
    if !dropped.is_empty() {
        tracing::info!(token = %old.name, dropped = dropped.len(), "oldest token history dropped");
    }
    Ok(h)
}

/// Revokes token `name`; `by` is the revoker's name. Revoking a revoked
/// token changes nothing and says so (`false`).
pub fn revoke(store: &Store, name: &str, by: &str, now_ms: u64) -> Result<bool, TokenError> {
    if name == FILE_TOKEN_NAME {
        return Err(TokenError::Invalid(format!(
            "{FILE_TOKEN_NAME:?} is DATA/token's holder: replace that file (and restart) to change it"
        )));
    }
    weir_core::names::Name::new(name).map_err(|e| TokenError::Invalid(format!("name: {e}")))?;
    let Some((mut r, raw)) = store.get_with_raw::<TokenRecord>(&key(name))? else {
        return Err(TokenError::NotFound(name.to_string()));
    };
    if r.revoked_ms.is_some() {
        return Ok(false);
    }
    r.revoked_ms = Some(now_ms);
    r.revoked_by = Some(by.to_string());
    let bytes = store.encode("token", &r)?;
    if !store.compare_and_put(&key(name), Some(&raw), Some(&bytes), &[], &[])? {
        // Changed under us (made again or revoked): say what is there now.
        return Err(TokenError::Invalid(format!(
            "token {name:?} changed while it was being revoked; try again"
        )));
    }
    tracing::info!(token = name, by, "token revoked");
    Ok(true)
}
