//! Tokens and the audit log: an admin's routes.

use axum::extract::State;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};

use super::extract::{blocking, Body, Path, Query};
pub use crate::serve::access::audit::AuditView;
use crate::serve::access::audit::{self, AuditFilter, AUDIT_LIST_MAX};
use crate::serve::access::tokens::{self, TokenError, TokenRecord};
use crate::serve::access::{Caller, Role};
use crate::serve::error::{ApiError, ApiResult};
use crate::serve::state::AppState;

/// A token as listed: never its secret or hash.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenView {
    /// Its name.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// `live`, `expired` or `revoked`.
    pub state: String,
    /// When it was made (ms since the epoch); 0 for DATA/token's.
    pub created_ms: u64,
    /// Who made it.
    pub created_by: String,
    /// When it stops working, if ever.
    pub expires_ms: Option<u64>,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<u64>,
    /// Who revoked it.
    pub revoked_by: Option<String>,
}

impl TokenView {
    fn of(r: TokenRecord, now_ms: u64) -> TokenView {
        let state = match r.refusal(now_ms) {
            None => "live",
            Some(tokens::Refusal::Expired { .. }) => "expired",
            Some(_) => "revoked",
        };
        TokenView {
            name: r.name,
            role: r.role,
            state: state.to_string(),
            created_ms: r.created_ms,
            created_by: r.created_by,
            expires_ms: r.expires_ms,
            revoked_ms: r.revoked_ms,
            revoked_by: r.revoked_by,
        }
    }
}

/// `POST /api/v1/tokens`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    /// Its name, e.g. `grafana`.
    name: String,
    /// `viewer`, `operator` or `admin`.
    role: String,
    /// How long it works, e.g. `90d` (default: until revoked); at most
    /// [`tokens::TOKEN_LIFETIME_MAX_MS`].
    #[serde(default, deserialize_with = "super::extract::present")]
    expires: Option<String>,
}

/// A token just made, with its secret: shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenMade {
    /// The token as listed.
    pub token: TokenView,
    /// The secret to send as `Authorization: Bearer SECRET`; weir keeps
    /// only its hash.
    pub secret: String,
}

/// A revocation's answer.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Revoked {
    /// The token's name.
    pub name: String,
    /// `false` when it was revoked already.
    pub revoked: bool,
}

fn token_error(e: TokenError) -> ApiError {
    match e {
        TokenError::Invalid(m) => ApiError::bad(m),
        TokenError::NotFound(_) => ApiError::not_found(e.to_string()),
        TokenError::Exists(_) | TokenError::CaseClash { .. } => ApiError::conflict(e.to_string()),
        TokenError::Store(s) => s.into(),
    }
}

/// Every token: DATA/token's admin first, then the stored ones by name,
/// each name's earlier (revoked or expired) records before its current one.
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Vec<TokenView>>> {
    let now_ms = s.engine.now_ms();
    let engine = s.engine.clone();
    let stored = blocking(move || Ok(tokens::list(engine.store())?)).await?;
    let mut out = vec![TokenView {
        name: tokens::FILE_TOKEN_NAME.to_string(),
        role: Role::Admin,
        state: "live".into(),
        created_ms: 0,
        created_by: "DATA/token".into(),
        expires_ms: None,
        revoked_ms: None,
        revoked_by: None,
    }];
    out.extend(stored.into_iter().map(|r| TokenView::of(r, now_ms)));
    Ok(Json(out))
}

/// Makes a token; the answer holds its secret, which nothing else will.
pub async fn create(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(b): Body<CreateBody>,
) -> ApiResult<Json<TokenMade>> {
    let role: Role = b.role.parse().map_err(ApiError::bad)?;
    let now_ms = s.engine.now_ms();
    let expires_ms = match b.expires.as_deref() {
        None => None,
        Some(text) => {
            let d = humantime::parse_duration(text).map_err(|e| {
                ApiError::bad(format!("expires {text:?}: {e} (write e.g. 90d or 12h)"))
            })?;
            Some(now_ms.saturating_add(d.as_millis().min(u64::MAX as u128) as u64))
        }
    };
    let engine = s.engine.clone();
    let made = blocking(move || {
        tokens::create(
            engine.store(),
            &b.name,
            role,
            expires_ms,
            &caller.name,
            now_ms,
        )
        .map_err(token_error)
    })
    .await?;
    Ok(Json(TokenMade {
        token: TokenView::of(made.record, now_ms),
        secret: made.secret,
    }))
}

/// Revokes a token: it opens nothing from now on, its UI sessions included.
pub async fn revoke(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<Json<Revoked>> {
    let now_ms = s.engine.now_ms();
    let engine = s.engine.clone();
    let n = name.clone();
    let revoked = blocking(move || {
        tokens::revoke(engine.store(), &n, &caller.name, now_ms).map_err(token_error)
    })
    .await?;
    Ok(Json(Revoked { name, revoked }))
}

/// The audit log's query string.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditParams {
    /// Entries at or after this instant (ms since the epoch).
    since_ms: Option<u64>,
    /// Only this token name's.
    who: Option<String>,
    /// The newest this many (default and most [`AUDIT_LIST_MAX`]).
    limit: Option<usize>,
}

/// The audit log, oldest first.
pub async fn audit(
    State(s): State<AppState>,
    Query(q): Query<AuditParams>,
) -> ApiResult<Json<Vec<AuditView>>> {
    if q.limit.is_some_and(|l| l == 0 || l > AUDIT_LIST_MAX) {
        return Err(ApiError::bad(format!("limit: give 1 to {AUDIT_LIST_MAX}")));
    }
    let filter = AuditFilter {
        since_ms: q.since_ms,
        who: q.who,
        limit: q.limit,
    };
    let engine = s.engine.clone();
    let boot_ms = s.started_at_ms;
    let entries = blocking(move || Ok(audit::list(engine.store(), &filter)?)).await?;
    Ok(Json(
        entries
            .into_iter()
            .map(|e| AuditView::of(e, boot_ms))
            .collect(),
    ))
}
