//! Registered actor names of one engine.
//!
//! ractor's registry is process-wide, and one process may hold several
//! engines (tests do; so may an application with two data directories), so
//! every name carries the engine's prefix.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The names of one engine's actors.
#[derive(Debug, Clone)]
pub struct Names {
    prefix: Arc<str>,
}

static ENGINES: AtomicU64 = AtomicU64::new(0);

impl Names {
    /// Names under a prefix unique in this process.
    pub fn unique() -> Names {
        let n = ENGINES.fetch_add(1, Ordering::Relaxed);
        Names {
            prefix: Arc::from(format!("weir{n}")),
        }
    }

    /// Names under `prefix`.
    pub fn with_prefix(prefix: &str) -> Names {
        Names {
            prefix: Arc::from(prefix),
        }
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The supervisor.
    pub fn supervisor(&self) -> String {
        format!("{}.supervisor", self.prefix)
    }

    /// The queue.
    pub fn queue(&self) -> String {
        format!("{}.queue", self.prefix)
    }

    /// Worker `index` of pool `pool` in its `incarnation`.
    pub fn pool(&self, pool: &str, index: u32, incarnation: u64) -> String {
        format!("{}.pool.{pool}.{index}.{incarnation}", self.prefix)
    }

    /// The breaker of `target`.
    pub fn breaker(&self, target: &str) -> String {
        format!("{}.breaker.{target}", self.prefix)
    }

    /// The scheduler of `graph`.
    pub fn scheduler(&self, graph: &str) -> String {
        format!("{}.scheduler.{graph}", self.prefix)
    }

    /// The cluster gateway.
    pub fn gateway(&self) -> String {
        format!("{}.gateway", self.prefix)
    }

    /// The trigger of `graph`.
    pub fn trigger(&self, graph: &str) -> String {
        format!("{}.trigger.{graph}", self.prefix)
    }
}
