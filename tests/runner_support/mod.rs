//! What the `runner_*` tests share: a task that counts its runs by key,
//! and a wait with a deadline.

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs per key.
pub type Runs = Arc<Mutex<HashMap<String, u32>>>;

/// `builder` with task `name`: a no-op that counts each run of a key in
/// `runs`.
pub fn count_runs(builder: weir::EngineBuilder, name: &str, runs: &Runs) -> weir::EngineBuilder {
    let r = runs.clone();
    builder.task_fn(name, move |ctx| {
        let r = r.clone();
        async move {
            *r.lock().unwrap().entry(ctx.key.to_string()).or_default() += 1;
            Ok(Vec::new())
        }
    })
}

/// Waits until `f` holds, polling every 5 ms; fails the test naming
/// `what` past `deadline`.
pub async fn wait_for(what: &str, deadline: Duration, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + deadline;
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
