//! sled 0.34.7 panics on some damaged files (a truncated segment indexes
//! out of bounds). The open runs sled under `catch_unwind` and turns such a
//! panic into an error that names the files; this keeps the process's panic
//! hook from printing sled's panic message and a backtrace before it. While
//! a guarded call runs on a thread, a panic on that thread is logged at
//! debug level only; every other panic goes to the hook that was installed
//! before (the wrapper is installed once and delegates, so no other
//! thread's panic is ever silenced).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Whether this thread runs a guarded call now.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
}

static QUIET_HOOK: Once = Once::new();

/// Runs `f`, catching its panic without the panic hook printing it.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) {
                tracing::debug!(panic = %info, "a guarded store call panicked; it is refused as damage");
            } else {
                previous(info);
            }
        }));
    });
    let was = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    result
}

/// A caught panic's message, when it carried one (`panic!` with a literal
/// or a formatted string).
pub(crate) fn message(panic: &(dyn std::any::Any + Send)) -> Option<String> {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
}
