//! A benchmark's child process: this binary again, running the same
//! scenario in a child mode that an environment variable selects, killed
//! with SIGKILL when the parent decides (`crash` after half its
//! completions, `torture` at random instants, over and over).
//!
//! The child reports on stdout, one line per fact, each printed only once
//! the fact is durable (an acknowledgement, a completion). A reader thread
//! hands the lines over with the instant they arrived, so the parent can
//! wait for a line or for a moment, whichever comes first. Lines the child
//! wrote before it was killed are still in the pipe and are all delivered:
//! what was printed was acknowledged.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Instant;

use super::report::BenchError;

fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

/// What waiting for the child's next line gave.
#[derive(Debug)]
pub enum Next {
    /// A line, and when it arrived.
    Line(String, Instant),
    /// The deadline passed first.
    Timeout,
    /// The child closed its stdout (it exited or was killed) and every
    /// line it wrote was read.
    Eof,
}

/// A running child.
pub struct Child {
    proc: std::process::Child,
    lines: Receiver<(String, Instant)>,
    /// When it was spawned.
    pub spawned: Instant,
}

/// Spawns `weir bench SCENARIO [--quick]` with `env_var` set to `spec` (the
/// child reads it to know it is the child, and what to do), stderr
/// discarded.
pub fn spawn(scenario: &str, quick: bool, env_var: &str, spec: &str) -> Result<Child, BenchError> {
    let exe = std::env::current_exe().map_err(failed)?;
    let mut args = vec!["bench", scenario];
    if quick {
        args.push("--quick");
    }
    let spawned = Instant::now();
    let mut proc = Command::new(exe)
        .args(&args)
        .env(env_var, spec)
        .env("RUST_LOG", "off")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(failed)?;
    let out = proc
        .stdout
        .take()
        .ok_or_else(|| BenchError::Failed("child has no stdout".into()))?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send((line, Instant::now())).is_err() {
                break;
            }
        }
    });
    Ok(Child {
        proc,
        lines,
        spawned,
    })
}

impl Child {
    /// The next line, waiting until `deadline` at most (`None`: as long as
    /// it takes).
    pub fn next(&mut self, deadline: Option<Instant>) -> Next {
        let got = match deadline {
            None => self
                .lines
                .recv()
                .map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => self
                .lines
                .recv_timeout(d.saturating_duration_since(Instant::now())),
        };
        match got {
            Ok((line, at)) => Next::Line(line, at),
            Err(RecvTimeoutError::Timeout) => Next::Timeout,
            Err(RecvTimeoutError::Disconnected) => Next::Eof,
        }
    }

    /// Sends SIGKILL (no destructor, no flush: nothing runs after it) and
    /// waits for the process to end. The lines it wrote before are still
    /// to be read with [`Child::next`].
    pub fn kill(&mut self) -> Result<(), BenchError> {
        // An error here is a child that exited already: nothing to kill.
        let _ = self.proc.kill();
        self.proc.wait().map_err(failed)?;
        Ok(())
    }

    /// Waits for the process to exit by itself; whether it succeeded.
    pub fn wait(&mut self) -> Result<bool, BenchError> {
        Ok(self.proc.wait().map_err(failed)?.success())
    }
}
