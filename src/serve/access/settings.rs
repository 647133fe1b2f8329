//! The access settings the server holds: each route's role, the audit
//! log's numbering, retention and refusal budget, whether TLS is on.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::audit;
use super::refusals::RefusalBudget;
use super::role::Role;

/// The access settings every handler shares.
#[derive(Clone)]
pub struct Access {
    /// The role each (method, route) needs.
    pub roles: Arc<BTreeMap<(&'static str, &'static str), Role>>,
    /// Numbers audit entries within one process.
    pub seq: Arc<AtomicU64>,
    /// How long audit entries are kept.
    pub audit_retention: Duration,
    /// How many refusals of each caller the audit log takes.
    pub refusals: Arc<std::sync::Mutex<RefusalBudget>>,
    /// Whether the API is served over TLS (the session cookie is `Secure`).
    pub tls: bool,
    /// The file holding the admin's token, shown on the login page to a
    /// browser on this machine.
    pub token_file: Option<std::sync::Arc<std::path::PathBuf>>,
    /// The one-time login codes outstanding (`weir ui`).
    pub ui_codes: Arc<std::sync::Mutex<crate::ui::codes::UiCodes>>,
}

impl Access {
    /// Access over `routes` (method, path, role).
    pub fn new(routes: &[(&'static str, &'static str, Role)]) -> Access {
        Access {
            roles: Arc::new(routes.iter().map(|(m, p, r)| ((*m, *p), *r)).collect()),
            seq: Arc::new(AtomicU64::new(0)),
            audit_retention: audit::AUDIT_RETENTION_DEFAULT,
            refusals: Arc::default(),
            tls: false,
            token_file: None,
            ui_codes: Arc::default(),
        }
    }
}
