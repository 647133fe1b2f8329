//! A real S3-compatible server for the tests: `s3s-fs` (the s3s project's
//! file-backed S3 server, from crates.io) on 127.0.0.1, with a bucket, an
//! access key and a secret, pointed at as a user points weir at S3 or
//! MinIO (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, …).
//!
//! The binary is found at `$WEIR_S3S_FS`, else `target/tools/bin/s3s-fs`;
//! when neither exists it is installed there with `cargo install` (once,
//! under a lock: about two minutes on a fresh machine). `.ci/run` installs
//! it before the tests.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The s3s-fs release the tests run (the newest that builds with this
/// machine's Rust).
pub const S3S_FS_VERSION: &str = "0.14.1";
/// The bucket every server holds.
pub const BUCKET: &str = "weir-test";
/// The access key.
pub const ACCESS_KEY: &str = "weirtestkey";
/// The secret key.
pub const SECRET_KEY: &str = "weir-test-secret-0123456789";

/// The s3s-fs binary, installed under `target/tools` when missing.
pub fn binary() -> PathBuf {
    if let Ok(p) = std::env::var("WEIR_S3S_FS") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools");
    let bin = root.join("bin/s3s-fs");
    if bin.exists() {
        return bin;
    }
    std::fs::create_dir_all(&root).expect("target/tools");
    // One installer at a time: the tests of a binary run in parallel.
    let lock = std::fs::File::create(root.join(".install-lock")).expect("lock file");
    // SAFETY: flock on a file we own; no memory involved.
    unsafe {
        libc::flock(std::os::unix::io::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX);
    }
    if !bin.exists() {
        let status = Command::new(env!("CARGO"))
            .args([
                "install",
                &format!("s3s-fs@{S3S_FS_VERSION}"),
                "--features",
                "binary",
                "--locked",
                "--root",
            ])
            .arg(&root)
            .stdout(Stdio::null())
            .status()
            .expect("cargo install s3s-fs");
        assert!(
            status.success(),
            "cargo install s3s-fs@{S3S_FS_VERSION} failed: the S3 tests need a real S3-compatible server"
        );
    }
    bin
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running s3s-fs server.
pub struct S3Server {
    /// Its data folder (a folder per bucket).
    pub root: PathBuf,
    /// Its port.
    pub port: u16,
    child: Option<Child>,
}

impl S3Server {
    /// Starts a server whose data lives under `root`, with [`BUCKET`].
    pub fn start(root: &Path) -> S3Server {
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let mut s = S3Server {
            root: root.to_path_buf(),
            port: free_port(),
            child: None,
        };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
        let child = Command::new(binary())
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&self.root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start s3s-fs");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "s3s-fs did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The endpoint, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The URL of `prefix` in the bucket.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{BUCKET}/{prefix}")
    }

    /// The environment a process pointed at this server takes.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ENDPOINT_URL".into(), self.endpoint()),
            ("AWS_ACCESS_KEY_ID".into(), ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY".into(), SECRET_KEY.into()),
            ("AWS_REGION".into(), "us-east-1".into()),
        ]
    }

    /// Stops the server (SIGKILL): requests fail until [`S3Server::resume`].
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and data.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "running already");
        self.spawn();
    }

    /// The objects under `prefix` of the bucket, as relative paths (the
    /// server keeps one file per object under its root).
    pub fn objects(&self, prefix: &str) -> Vec<String> {
        let base = self.root.join(BUCKET);
        let mut out = Vec::new();
        let mut stack = vec![base.join(prefix)];
        while let Some(d) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p
                        .strip_prefix(&base)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned();
                    // s3s-fs keeps metadata and uploads in progress beside
                    // the objects, under dot-names.
                    if !rel.split('/').any(|s| s.starts_with('.')) {
                        out.push(rel);
                    }
                }
            }
        }
        out.sort();
        out
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
