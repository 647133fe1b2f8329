//! `weir members`: a replicated engine's members — who leads, the term,
//! how far each follower is behind and when it last answered; and
//! `weir members add ID HOST:PORT` / `weir members remove ID` (admin).

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::client::Conn;
use super::control::{call, get, post, s};
use super::{out, table, Failure};

/// `weir members`.
#[derive(Debug, Args)]
pub struct MembersArgs {
    #[command(subcommand)]
    pub action: Option<MembersAction>,
    #[command(flatten)]
    pub conn: Conn,
}

/// What to do to the group.
#[derive(Debug, Subcommand)]
pub enum MembersAction {
    /// Adds a member (started with --raft-id ID and the group's
    /// --raft-peers plus its own): it catches up as a learner, from a
    /// snapshot when the log behind was compacted, then votes.
    Add {
        /// Its id.
        id: u64,
        /// Its Raft address, HOST:PORT.
        raft: String,
    },
    /// Removes a member from the group.
    Remove {
        /// Its id.
        id: u64,
    },
    /// On a stopped member whose group lost its majority for good: keeps
    /// its store, drops its Raft log, vote and membership, so that started
    /// with --raft-peers naming itself alone it leads a new group (then
    /// `weir members add` the others). Writes it had not received, or
    /// logged but not applied, are lost: pick the member that applied the
    /// most. Needs --yes.
    ForceNewGroup {
        /// Say that you accept the loss of what this member lacks.
        #[arg(long)]
        yes: bool,
    },
}

/// Runs `weir members`.
pub fn run(a: MembersArgs) -> Result<u8, Failure> {
    if let Some(MembersAction::ForceNewGroup { yes }) = &a.action {
        return force_new_group(&a.conn, *yes);
    }
    let req = match &a.action {
        None => get(&["api", "v1", "members"], vec![]),
        Some(MembersAction::Add { id, raft }) => {
            post(&["api", "v1", "members"], json!({"id": id, "raft": raft}))
        }
        Some(MembersAction::ForceNewGroup { .. }) => unreachable!("handled above"),
        Some(MembersAction::Remove { id }) => post(
            &["api", "v1", "members", &id.to_string(), "remove"],
            json!({}),
        ),
    };
    call(&a.conn, req, |v: &Value| {
        out(&format!(
            "term {}, leader {}; member {} answered ({}), log at {}, applied {}",
            s(v, "term"),
            s(v, "leader"),
            s(v, "this"),
            s(v, "state"),
            s(v, "last_log_index"),
            s(v, "applied_index"),
        ));
        if v.get("hears_majority").and_then(Value::as_bool) == Some(false) {
            let since = match (
                v.get("quorum_ack_ms_ago").and_then(Value::as_u64),
                v.get("leader_contact_ms_ago").and_then(Value::as_u64),
            ) {
                (Some(ms), _) => format!("no majority acknowledged it for {ms} ms"),
                (None, Some(ms)) => format!("it heard no leader for {ms} ms"),
                (None, None) => "it heard no leader".to_string(),
            };
            out(&format!(
                "member {} cannot hear a majority ({since}): this view may be stale; ask another member",
                s(v, "this")
            ));
        }
        let mut t = table::new(&[
            "id",
            "role",
            "raft",
            "api",
            "matched",
            "lag",
            "last contact",
            "disk free",
        ]);
        for m in v
            .get("members")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let contact = match m.get("last_contact_ms_ago").and_then(Value::as_u64) {
                Some(ms) => format!("{ms} ms ago"),
                None => "-".into(),
            };
            let disk = match (
                m.get("free_bytes").and_then(Value::as_u64),
                m.get("reserve_bytes").and_then(Value::as_u64),
            ) {
                (Some(free), Some(reserve)) => {
                    format!("{} MiB (reserve {} MiB)", free >> 20, reserve >> 20)
                }
                _ => "-".into(),
            };
            t.add_row(vec![
                s(m, "id"),
                s(m, "role"),
                s(m, "raft"),
                s(m, "api_url"),
                s(m, "matched_index"),
                s(m, "lag"),
                contact,
                disk,
            ]);
        }
        out(&t.to_string());
        Ok(0)
    })
}

/// `weir members force-new-group`: offline, on a stopped member's data
/// directory.
fn force_new_group(conn: &super::client::Conn, yes: bool) -> Result<u8, Failure> {
    let data = super::datadir::for_client(conn.data.as_deref())?;
    if let Ok(Some(info)) = crate::serve::discovery::find_engine(&data) {
        if crate::serve::discovery::pid_alive(info.pid) {
            return Err(Failure::input(format!(
                "the member of {} runs (pid {}): stop it first",
                data.display(),
                info.pid
            )));
        }
    }
    if !yes {
        return Err(Failure::input(format!(
            "force-new-group drops the Raft state of {}: writes this member did not receive, or logged \
             but did not apply, are lost. Pass --yes to go on",
            data.display()
        )));
    }
    let settings = weir_actors::store::StoreSettings::default()
        .with_env_overrides()
        .map_err(Failure::input)?;
    let (store, _) = weir_actors::store::Store::open(&data, settings)
        .map_err(|e| Failure::store(e.to_string()))?;
    let f = crate::replica::force_new_group(&store).map_err(Failure::store)?;
    drop(store);
    let _ = std::fs::remove_file(data.join("engine.json"));
    out(&format!(
        "{}: the group is forgotten (applied index {}, {} logged entries past it dropped). Start this member \
         with --raft-peers naming itself alone (e.g. --raft-id 1 --raft-peers 1=HOST:PORT), then \
         `weir members add` the others",
        data.display(),
        f.applied_index.map_or("-".into(), |i| i.to_string()),
        f.unapplied_entries
    ));
    Ok(0)
}
