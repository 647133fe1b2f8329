//! Tasks: what a ticket runs, by registered name.
//!
//! A [`Task`] is object-safe (it returns a boxed future), takes a
//! [`TaskContext`] and returns output bytes or a [`TaskError`] that says
//! whether retrying may help. The [`TaskRegistry`] maps names to tasks; a
//! name that no registered task answers is offered to the resolvers in
//! order (glazed's Finder and Dialects), so an application can answer whole
//! families of names (`http.*`, say) without registering each.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use weir_core::artifact::ArtifactRef;
use weir_core::queue::TicketId;

/// What a task gets to run one attempt.
#[derive(Debug, Clone)]
pub struct TaskContext {
    /// The ticket's key (for graph nodes, the run id).
    pub key: Arc<str>,
    /// The ticket.
    pub ticket: TicketId,
    /// This attempt's number, 1 for the first.
    pub attempt: u32,
    /// The registered name of the task.
    pub task: Arc<str>,
    /// The input.
    pub payload: Arc<[u8]>,
    /// Cancelled when the ticket is cancelled, the attempt times out, or the
    /// engine shuts down: a task that runs long should watch it.
    pub cancel: CancellationToken,
    /// Where a succeeding attempt leaves the artifacts it stored: they go
    /// into the ticket's done record with its output.
    pub artifacts: ArtifactSlot,
}

/// The artifacts an attempt stored (durably, before it returned), handed
/// from the task to the pool beside its output.
#[derive(Debug, Clone, Default)]
pub struct ArtifactSlot(Arc<std::sync::Mutex<Vec<ArtifactRef>>>);

impl ArtifactSlot {
    /// Sets the attempt's artifacts (replacing any set before).
    pub fn set(&self, artifacts: Vec<ArtifactRef>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = artifacts;
    }

    /// Takes the attempt's artifacts.
    pub fn take(&self) -> Vec<ArtifactRef> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskError {
    /// May succeed if tried again.
    #[error("{0}")]
    Retryable(String),
    /// Will fail again: do not retry.
    #[error("permanent: {0}")]
    Permanent(String),
    /// A sensor's check found its condition not met (what it saw): not a
    /// failure; a sensor ticket checks again later without an attempt
    /// spent, any other ticket retries it as a retryable failure.
    #[error("not met: {0}")]
    NotMet(String),
    /// May succeed if tried again, but not before `after_ms` (a server's
    /// `Retry-After`): the retry waits the longer of this and the policy's
    /// delay.
    #[error("{message}")]
    RetryAfter {
        /// What failed.
        message: String,
        /// The least wait before the next attempt, in ms.
        after_ms: u64,
    },
}

impl TaskError {
    /// A retryable failure whose next attempt should wait at least
    /// `after_ms` (a server's `Retry-After`).
    pub fn retry_after(message: String, after_ms: u64) -> TaskError {
        TaskError::RetryAfter {
            message: format!("{message} (the server asked to wait {after_ms} ms)"),
            after_ms,
        }
    }
}

/// What an attempt returns.
pub type TaskResult = Result<Vec<u8>, TaskError>;

/// A task. Object-safe, so a registry holds `Arc<dyn Task>`.
pub trait Task: Send + Sync + 'static {
    /// Runs one attempt.
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult>;
}

/// A task from an async closure.
pub struct FnTask<F>(pub F);

impl<F, Fut> Task for FnTask<F>
where
    F: Fn(TaskContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = TaskResult> + Send + 'static,
{
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        Box::pin((self.0)(ctx))
    }
}

/// A resolver: a task for a name no registered task answers, or `None`.
pub type Resolver = Arc<dyn Fn(&str) -> Option<Arc<dyn Task>> + Send + Sync>;

/// Tasks by name, plus resolvers for the rest.
#[derive(Clone, Default)]
pub struct TaskRegistry {
    tasks: HashMap<String, Arc<dyn Task>>,
    resolvers: Vec<Resolver>,
}

impl TaskRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        TaskRegistry::default()
    }

    /// Registers `task` under `name`, replacing any earlier one.
    pub fn register(&mut self, name: impl Into<String>, task: Arc<dyn Task>) -> &mut Self {
        self.tasks.insert(name.into(), task);
        self
    }

    /// Registers an async closure under `name`.
    pub fn register_fn<F, Fut>(&mut self, name: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(TaskContext) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = TaskResult> + Send + 'static,
    {
        self.register(name, Arc::new(FnTask(f)))
    }

    /// Adds a resolver, consulted after the registered names and the
    /// resolvers added before it.
    pub fn add_resolver(&mut self, resolver: Resolver) -> &mut Self {
        self.resolvers.push(resolver);
        self
    }

    /// The task for `name`.
    pub fn find(&self, name: &str) -> Option<Arc<dyn Task>> {
        if let Some(t) = self.tasks.get(name) {
            return Some(t.clone());
        }
        self.resolvers.iter().find_map(|r| r(name))
    }
}

impl std::fmt::Debug for TaskRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.tasks.keys().collect();
        names.sort();
        f.debug_struct("TaskRegistry")
            .field("tasks", &names)
            .field("resolvers", &self.resolvers.len())
            .finish()
    }
}
