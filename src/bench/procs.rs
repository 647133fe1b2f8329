//! What scenarios that run processes share: a scenario's folder removed at
//! its end, a child process killed when dropped, a free loopback address.

use std::path::{Path, PathBuf};
use std::process::Child;

use super::report::BenchError;

/// The scenario's folder, removed at the end.
pub struct Root(pub PathBuf);

impl Root {
    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process, killed and reaped when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A loopback address no one listens on (a moment ago).
pub fn free_addr() -> Result<std::net::SocketAddr, BenchError> {
    let failed = |e: std::io::Error| BenchError::Failed(e.to_string());
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(failed)?;
    l.local_addr().map_err(failed)
}
