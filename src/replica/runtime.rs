//! openraft's async runtime for a member: tokio's, with a floor under the
//! deadlines openraft sets on calls to peers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The least time openraft waits for an append or a vote (ms; 0 until a
/// member starts): see [`RpcRuntime`]. One member a process.
static RPC_DEADLINE_MIN_MS: AtomicU64 = AtomicU64::new(0);

/// Sets the least time openraft waits for an answer from a peer.
pub(super) fn set_rpc_deadline_min(d: Duration) {
    RPC_DEADLINE_MIN_MS.store(d.as_millis() as u64, Ordering::Relaxed);
}

/// openraft's runtime (tokio) with one change: a deadline openraft sets on
/// a call to a peer is never shorter than [`set_rpc_deadline_min`]'s.
///
/// openraft 0.9 bounds each append by its heartbeat interval and each vote
/// by its `election_timeout_min`, around the transport's own deadline: with
/// the timers split as `RaftTimers` does (heartbeats every 44 ms, a
/// minimum timeout of 100 ms by default), an append whose follower fsyncs
/// a large batch, or a vote on a loaded machine, would be cut short and
/// sent again without end. Answers that take longer are still answers: a
/// follower's lease and the leader's fence are measured from when an
/// append was sent, not from its answer.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RpcRuntime;

impl openraft::AsyncRuntime for RpcRuntime {
    type JoinError = <openraft::TokioRuntime as openraft::AsyncRuntime>::JoinError;
    type JoinHandle<T: openraft::OptionalSend + 'static> =
        <openraft::TokioRuntime as openraft::AsyncRuntime>::JoinHandle<T>;
    type Sleep = <openraft::TokioRuntime as openraft::AsyncRuntime>::Sleep;
    type Instant = <openraft::TokioRuntime as openraft::AsyncRuntime>::Instant;
    type TimeoutError = <openraft::TokioRuntime as openraft::AsyncRuntime>::TimeoutError;
    type Timeout<R, T: std::future::Future<Output = R> + openraft::OptionalSend> =
        <openraft::TokioRuntime as openraft::AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = <openraft::TokioRuntime as openraft::AsyncRuntime>::ThreadLocalRng;
    type OneshotSender<T: openraft::OptionalSend> =
        <openraft::TokioRuntime as openraft::AsyncRuntime>::OneshotSender<T>;
    type OneshotReceiverError =
        <openraft::TokioRuntime as openraft::AsyncRuntime>::OneshotReceiverError;
    type OneshotReceiver<T: openraft::OptionalSend> =
        <openraft::TokioRuntime as openraft::AsyncRuntime>::OneshotReceiver<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: std::future::Future + openraft::OptionalSend + 'static,
        T::Output: openraft::OptionalSend + 'static,
    {
        openraft::TokioRuntime::spawn(future)
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        openraft::TokioRuntime::sleep(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        openraft::TokioRuntime::sleep_until(deadline)
    }

    fn timeout<R, F: std::future::Future<Output = R> + openraft::OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Self::Timeout<R, F> {
        let min = Duration::from_millis(RPC_DEADLINE_MIN_MS.load(Ordering::Relaxed));
        openraft::TokioRuntime::timeout(duration.max(min), future)
    }

    fn timeout_at<R, F: std::future::Future<Output = R> + openraft::OptionalSend>(
        deadline: Self::Instant,
        future: F,
    ) -> Self::Timeout<R, F> {
        openraft::TokioRuntime::timeout_at(deadline, future)
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        openraft::TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        openraft::TokioRuntime::thread_rng()
    }

    fn oneshot<T>() -> (Self::OneshotSender<T>, Self::OneshotReceiver<T>)
    where
        T: openraft::OptionalSend,
    {
        openraft::TokioRuntime::oneshot()
    }
}
