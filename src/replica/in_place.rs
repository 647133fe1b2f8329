//! Store work on the commit path (the log's fsync, the apply), run where
//! the Raft task that needs it is: on a multi-thread runtime the task's
//! worker blocks in place (its other tasks move to another worker) instead
//! of handing the work to a blocking thread and waiting to be woken. Each
//! hand-off is a wake-up of another thread, which on a loaded machine
//! waited up to 0.65 ms for a core (`hop_us` of the "applied" trace), and
//! a commit pays it at the leader's log sync, the follower's and the
//! leader's apply. Elsewhere (a current-thread runtime, which cannot block
//! in place) the work goes to a blocking thread as before.

/// Runs `f`, blocking the current task in place when the runtime allows.
pub(super) async fn run<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        Ok(tokio::task::block_in_place(f))
    } else {
        tokio::task::spawn_blocking(f)
            .await
            .map_err(|e| e.to_string())
    }
}
