//! The audit entries of the requests a replicated engine's front answers
//! itself: membership changes (`POST /api/v1/members`,
//! `POST /api/v1/members/{id}/remove`). They go in the same log as the
//! engine's, with the same rules (`crate::serve::access::audit`): a change
//! is written ahead, durably through the group, before it is made, and its
//! outcome before the answer leaves; a refusal before any change (403,
//! 413) is written whole within its caller's refusal budget.
//!
//! Only the leader's front writes them: a follower passes every change
//! to the leader before it checks the caller's role, so one entry stands
//! for one request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use weir_actors::store::Store;

use super::types::wall_ms;
use crate::serve::access::audit::{self, AuditEntry, Outcome, Pending};
use crate::serve::access::refusals::{self, RefusalBudget};
use crate::serve::access::tokens::Caller;

/// A front's side of the audit log.
#[derive(Clone)]
pub struct FrontAudit {
    store: Store,
    retention: Duration,
    /// Numbers this front's entries (their keys also hold `boot_ms`, which
    /// no engine of this process shares: the front starts first).
    seq: Arc<AtomicU64>,
    refusals: Arc<Mutex<RefusalBudget>>,
    boot_ms: u64,
}

/// What a membership request asked, as its entry keeps it.
pub struct Asked {
    pub method: String,
    /// The route as the API names it.
    pub route: &'static str,
    /// The path and query, secret query values left out.
    pub path: String,
    /// The body, secrets left out.
    pub params: String,
    pub client: String,
}

impl FrontAudit {
    pub fn new(store: Store, retention: Duration) -> FrontAudit {
        FrontAudit {
            store,
            retention,
            seq: Arc::new(AtomicU64::new(0)),
            refusals: Arc::default(),
            boot_ms: wall_ms(),
        }
    }

    fn entry(
        &self,
        caller: &Caller,
        a: Asked,
        outcome: Option<Outcome>,
        dropped: u64,
    ) -> AuditEntry {
        AuditEntry {
            at_ms: wall_ms(),
            who: caller.name.clone(),
            role: caller.role,
            method: a.method,
            route: a.route.to_string(),
            path: a.path,
            params: a.params,
            client: a.client,
            outcome,
            boot_ms: self.boot_ms,
            refusals_dropped: dropped,
        }
    }

    /// Writes, ahead of the change, the entry of `caller`'s request.
    pub async fn begin(&self, caller: &Caller, asked: Asked) -> Result<Pending, String> {
        let entry = self.entry(caller, asked, None, 0);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let (store, retention) = (self.store.clone(), self.retention);
        // A write through the group waits for a majority's fsync.
        tokio::task::spawn_blocking(move || audit::begin(&store, entry, seq, retention))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the audit log cannot take the entry: {e}"))
    }

    /// Writes how the request `pending` stands for ended.
    pub async fn finish(
        &self,
        pending: Pending,
        status: u16,
        error: Option<String>,
        started: Instant,
    ) -> Result<(), String> {
        let outcome = Outcome {
            status,
            error,
            took_ms: started.elapsed().as_millis() as u64,
        };
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || audit::finish(&store, pending, outcome))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the audit log cannot take the outcome: {e}"))
    }

    /// Writes the whole entry of a request refused before any change,
    /// within `caller`'s refusal budget (else counts it as dropped).
    pub async fn refused(
        &self,
        caller: &Caller,
        asked: Asked,
        status: u16,
        message: &str,
        started: Instant,
    ) -> Result<(), String> {
        let Some(dropped_before) = refusals::admit(&self.refusals, &caller.name, wall_ms()) else {
            return Ok(());
        };
        let outcome = Outcome {
            status,
            error: Some(message.to_string()),
            took_ms: started.elapsed().as_millis() as u64,
        };
        tracing::info!(who = %caller.name, method = %asked.method, path = %asked.path,
            status, dropped_before, "audited refusal of a membership change");
        let entry = self.entry(caller, asked, Some(outcome), dropped_before);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let (store, retention) = (self.store.clone(), self.retention);
        tokio::task::spawn_blocking(move || audit::write_whole(&store, entry, seq, retention))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("the audit log cannot take the entry: {e}"))
    }
}
