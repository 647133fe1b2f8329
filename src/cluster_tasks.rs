//! The tasks `weir bench cluster` runs on its workers, which `weir worker
//! --bench-tasks` serves: shared by the bench and the worker command, so
//! neither imports the other.

use std::time::Duration;

use crate::worker::WorkerBuilder;

/// The tasks `weir worker --bench-tasks` serves: `bench.sleep` (sleeps
/// the payload's decimal ms) and `bench.noop`.
pub fn register_tasks(b: WorkerBuilder) -> WorkerBuilder {
    b.task_fn("bench.noop", |_ctx| async { Ok(Vec::new()) })
        .task_fn("bench.sleep", |ctx| async move {
            let ms: u64 = std::str::from_utf8(&ctx.payload)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(Vec::new())
        })
}
