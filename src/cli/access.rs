//! `weir token create|list|revoke` and `weir audit`: an admin's commands,
//! through the API (tokens live in the engine's store).

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::client::{self, Conn, Source};
use super::control::{call, get, post, s};
use super::failure::Failure;
use super::output::out;
use super::table;
use crate::serve::access::audit::{self, AuditFilter, AuditView};

/// `weir token ...`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub command: TokenCommand,
    #[command(flatten)]
    pub conn: Conn,
}

/// What to do with tokens.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Makes a token and prints its secret, once (weir keeps only its hash).
    Create {
        /// Its name, e.g. grafana.
        #[arg(long)]
        name: String,
        /// viewer (reads), operator (also acts on runs) or admin (everything).
        #[arg(long)]
        role: String,
        /// How long it works, e.g. 90d (default: until revoked).
        #[arg(long)]
        expires: Option<String>,
    },
    /// Lists the tokens (never their secrets).
    List,
    /// Revokes a token: it opens nothing from now on.
    Revoke {
        /// Its name.
        name: String,
    },
}

/// Runs `weir token`.
pub fn token(a: TokenArgs) -> Result<u8, Failure> {
    match a.command {
        TokenCommand::Create {
            name,
            role,
            expires,
        } => {
            let mut body = json!({ "name": name, "role": role });
            if let Some(e) = expires {
                body["expires"] = json!(e);
            }
            call(
                &a.conn,
                post(&["api", "v1", "tokens"], body),
                |v: &Value| {
                    let t = &v["token"];
                    out(&format!(
                        "token {} ({}) made{}; its secret, shown this once:",
                        s(t, "name"),
                        s(t, "role"),
                        match t.get("expires_ms").and_then(Value::as_u64) {
                            Some(ms) => format!(", expires {}", table::time(Some(ms))),
                            None => String::new(),
                        }
                    ));
                    out(&s(v, "secret"));
                    Ok(0)
                },
            )
        }
        TokenCommand::List => call(
            &a.conn,
            get(&["api", "v1", "tokens"], vec![]),
            |rows: &Vec<Value>| {
                let mut t = table::new(&[
                    "name", "role", "state", "created", "by", "expires", "revoked",
                ]);
                for r in rows {
                    t.add_row(vec![
                        s(r, "name"),
                        s(r, "role"),
                        s(r, "state"),
                        match r.get("created_ms").and_then(Value::as_u64) {
                            Some(0) | None => "-".into(),
                            ms => table::time(ms),
                        },
                        s(r, "created_by"),
                        table::time(r.get("expires_ms").and_then(Value::as_u64)),
                        table::time(r.get("revoked_ms").and_then(Value::as_u64)),
                    ]);
                }
                table::print(&t);
                Ok(0)
            },
        ),
        TokenCommand::Revoke { name } => call(
            &a.conn,
            post(&["api", "v1", "tokens", &name, "revoke"], json!({})),
            |v: &Value| {
                if v.get("revoked").and_then(Value::as_bool) == Some(true) {
                    out(&format!("token {} revoked", s(v, "name")));
                } else {
                    out(&format!("token {} was revoked already", s(v, "name")));
                }
                Ok(0)
            },
        ),
    }
}

/// `weir audit`.
#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Entries since this long ago (e.g. 1h, 7d) or this instant (RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Only this token's entries.
    #[arg(long)]
    pub who: Option<String>,
    /// The newest this many.
    #[arg(long)]
    pub limit: Option<usize>,
    #[command(flatten)]
    pub conn: Conn,
}

/// `--since` as ms since the epoch: a duration ago, or an instant.
fn since_ms(text: &str, now_ms: u64) -> Result<u64, Failure> {
    if let Ok(d) = humantime::parse_duration(text) {
        return Ok(now_ms.saturating_sub(d.as_millis() as u64));
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis().max(0) as u64)
        .map_err(|_| {
            Failure::input(format!(
                "--since {text:?}: write a duration ago (1h, 7d) or an instant (2026-12-04T09:00:00Z)"
            ))
        })
}

/// Runs `weir audit`: from the engine's API, or, when no engine runs, from
/// its store (an entry without outcome then reads `interrupted`).
pub fn audit(a: AuditArgs) -> Result<u8, Failure> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let since_ms = a
        .since
        .as_deref()
        .map(|t| since_ms(t, now_ms))
        .transpose()?;
    let rows: Vec<Value> = match client::source(&a.conn)? {
        Source::Engine(c) => {
            let mut query = vec![];
            if let Some(ms) = since_ms {
                query.push(("since_ms", ms.to_string()));
            }
            if let Some(w) = &a.who {
                query.push(("who", w.clone()));
            }
            if let Some(l) = a.limit {
                query.push(("limit", l.to_string()));
            }
            client::block_on(async move {
                c.get::<Vec<Value>>(&["api", "v1", "audit"], &query).await
            })???
        }
        Source::Store(dir) => {
            let (store, _) = super::inspect::open(&dir)?;
            let filter = AuditFilter {
                since_ms,
                who: a.who.clone(),
                limit: a.limit,
            };
            audit::list(&store, &filter)
                .map_err(|e| Failure::store(e.to_string()))?
                .into_iter()
                // No engine runs: an entry without outcome was interrupted.
                .map(|e| serde_json::to_value(AuditView::of(e, 0)).unwrap_or(Value::Null))
                .collect()
        }
    };
    if a.conn.json {
        out(&serde_json::to_string_pretty(&rows).unwrap_or_default());
        return Ok(0);
    }
    if rows.is_empty() {
        out("no audit entries");
        return Ok(0);
    }
    let mut t = table::new(&["at", "who", "request", "params", "outcome", "client"]);
    for r in &rows {
        let outcome = match (r.get("status").and_then(Value::as_u64), s(r, "error")) {
            (Some(st), e) if e != "-" => format!("{} {st}: {e}", s(r, "outcome")),
            (Some(st), _) => format!("{} {st}", s(r, "outcome")),
            (None, _) => s(r, "outcome"),
        };
        // Refusals of this caller left out over its budget, before this one.
        let outcome = match r.get("refusals_dropped").and_then(Value::as_u64) {
            Some(n) if n > 0 => format!("{outcome} ({n} more refused before, not logged)"),
            _ => outcome,
        };
        t.add_row(vec![
            table::time(r.get("at_ms").and_then(Value::as_u64)),
            format!("{} ({})", s(r, "who"), s(r, "role")),
            format!("{} {}", s(r, "method"), s(r, "path")),
            s(r, "params"),
            outcome,
            s(r, "client"),
        ]);
    }
    table::print(&t);
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_duration_ago_or_an_instant() {
        let now = 1_800_000_000_000;
        assert_eq!(since_ms("1h", now).unwrap(), now - 3_600_000);
        assert_eq!(
            since_ms("2026-12-04T00:00:00Z", now).unwrap(),
            1_796_342_400_000
        );
        let e = since_ms("yesterday", now).unwrap_err();
        assert!(e.message.contains("--since \"yesterday\""), "{}", e.message);
    }
}

/// `weir ui`.
#[derive(Debug, Args)]
pub struct UiArgs {
    #[command(flatten)]
    pub conn: Conn,
}

/// Runs `weir ui`: prints a one-time login link for the UI, logged in as
/// the token this command uses (the admin's, unless `--token-file` or
/// `WEIR_TOKEN` says otherwise), as Jupyter prints its URL.
pub fn ui(a: UiArgs) -> Result<u8, Failure> {
    let c = client::engine(&a.conn)?;
    let code: crate::ui::code_routes::UiCode =
        client::block_on(async { c.post(&["api", "v1", "ui-codes"], &json!({})).await })???;
    let mut url = c.url(&["ui-session", "code"])?;
    url.query_pairs_mut().append_pair("c", &code.code);
    if a.conn.json {
        out(&serde_json::to_string_pretty(&json!({
            "url": url.as_str(),
            "expires_at_ms": code.expires_at_ms,
        }))
        .unwrap_or_default());
    } else {
        out(url.as_str());
        eprintln!(
            "open it within {} s: it logs a browser in once, as this command's token",
            crate::ui::codes::UI_CODE_TTL_MS / 1000
        );
    }
    Ok(0)
}
