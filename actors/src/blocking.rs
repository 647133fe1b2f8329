//! Store work off the async threads, or inline under a simulation.
//!
//! Every store read or write an actor makes goes through [`run`]. In the
//! real engine that is `tokio::task::spawn_blocking`: sled may wait on its
//! own I/O threads, and an async worker thread must not. Under `weir
//! simulate` the engine runs on one thread whose clock is paused, on a
//! throw-away store that nothing else shares; there a hand-off to a
//! blocking thread buys nothing and costs two thread switches per write,
//! which were most of a simulation's time. A thread that holds an
//! [`InlineGuard`] runs the closures of [`run`] on itself, at the call,
//! the way a blocking thread would have started them.
//!
//! Inline is also more deterministic: virtual time cannot pass while a
//! write is under way (tokio holds the paused clock while a blocking task
//! runs, and inline there is no such moment), and no other task of the
//! runtime runs between the hand-off and the write, so what a task sees in
//! the store no longer depends on how fast a blocking thread ran.
//!
//! The flag is per thread, not per process: tests that run a real engine
//! in the same process on other threads keep their blocking threads.

use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    static INLINE: Cell<bool> = const { Cell::new(false) };
}

/// Why a blocking closure gave no value.
#[derive(Debug, thiserror::Error)]
pub enum BlockingError {
    /// The blocking task panicked or was cancelled (runtime shutting down).
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
    /// The closure panicked while run inline.
    #[error("a store task panicked: {0}")]
    Panicked(String),
}

/// While held, [`run`] runs its closures inline on this thread. Not `Send`:
/// it belongs to the thread that made it.
#[must_use = "the flag is cleared when the guard is dropped"]
pub struct InlineGuard {
    was: bool,
    _thread: PhantomData<*const ()>,
}

/// Makes [`run`] inline on this thread until the guard is dropped. Only
/// for a current-thread runtime driven by this thread, on a store no other
/// thread writes (a simulation): anywhere else it would block the
/// runtime's thread on disk.
pub fn inline_here() -> InlineGuard {
    let was = INLINE.with(|f| f.replace(true));
    InlineGuard {
        was,
        _thread: PhantomData,
    }
}

impl Drop for InlineGuard {
    fn drop(&mut self) {
        let was = self.was;
        INLINE.with(|f| f.set(was));
    }
}

/// Whether [`run`] is inline on this thread.
pub fn is_inline() -> bool {
    INLINE.with(Cell::get)
}

/// The future of [`run`].
pub enum Blocking<R> {
    /// Ran inline: the value, taken at the first poll.
    Done(Option<Result<R, BlockingError>>),
    /// Handed to a blocking thread.
    Spawned(tokio::task::JoinHandle<R>),
}

impl<R> Future for Blocking<R> {
    type Output = Result<R, BlockingError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Neither variant is structurally pinned: the value is moved out
        // whole, and a JoinHandle is Unpin.
        match self.get_mut() {
            Blocking::Done(v) => Poll::Ready(v.take().expect("a Blocking polled after it ended")),
            Blocking::Spawned(h) => Pin::new(h).poll(cx).map_err(BlockingError::from),
        }
    }
}

impl<R> Unpin for Blocking<R> {}

/// Runs `f` on a blocking thread (`spawn_blocking`), or at once on this
/// thread under an [`InlineGuard`]. Either way `f` starts at the call, not
/// at the first poll.
pub fn run<F, R>(f: F) -> Blocking<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    if !is_inline() {
        return Blocking::Spawned(tokio::task::spawn_blocking(f));
    }
    let out = catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        BlockingError::Panicked(
            crate::store::panics::message(&*p).unwrap_or_else(|| "(no message)".to_string()),
        )
    });
    Blocking::Done(Some(out))
}

/// Whether this thread may block in place (`tokio::task::block_in_place`):
/// it runs in a multi-thread runtime, whose other tasks then move to
/// another worker. A current-thread runtime's thread cannot.
pub fn can_block_in_place() -> bool {
    tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// Runs `f` on the calling task's thread, blocking it in place, when the
/// runtime allows; else as [`run`] does. For work on a latency path whose
/// task has nothing else to do meanwhile (a replica's log sync and apply):
/// a hand-off to a blocking thread is a wake-up of another thread, which
/// on a loaded machine waited up to 0.65 ms for a core.
pub async fn in_place<F, R>(f: F) -> Result<R, BlockingError>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    if can_block_in_place() {
        Ok(tokio::task::block_in_place(f))
    } else {
        run(f).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn inline_runs_on_this_thread_and_spawned_does_not() {
        let here = std::thread::current().id();
        let off = run(move || std::thread::current().id()).await.unwrap();
        assert_ne!(off, here, "without a guard the closure runs elsewhere");
        let guard = inline_here();
        assert!(is_inline());
        let on = run(move || std::thread::current().id()).await.unwrap();
        assert_eq!(on, here, "under a guard the closure runs on this thread");
        drop(guard);
        assert!(!is_inline(), "dropping the guard clears the flag");
    }

    #[tokio::test]
    async fn inline_starts_at_the_call_and_a_panic_is_an_error() {
        let _guard = inline_here();
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = ran.clone();
        let pending = run(move || r.store(true, std::sync::atomic::Ordering::SeqCst));
        assert!(
            ran.load(std::sync::atomic::Ordering::SeqCst),
            "ran before any poll"
        );
        pending.await.unwrap();
        let err = run(|| -> u32 { panic!("boom") }).await.unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
    }

    #[test]
    fn guards_nest() {
        let outer = inline_here();
        let inner = inline_here();
        drop(inner);
        assert!(is_inline(), "the outer guard still holds");
        drop(outer);
        assert!(!is_inline());
    }
}
