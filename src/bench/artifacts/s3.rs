//! The S3-compatible server the S3 half runs against: s3s-fs on
//! 127.0.0.1, started here.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::common::{failed, ACCESS_KEY, BUCKET, S3S_FS_VERSION, S3S_LISTEN_WAIT_S, SECRET_KEY};
use crate::bench::procs::{free_addr, Proc};
use crate::bench::report::BenchError;
use crate::objects::Objects;

/// The s3s-fs binary: `$WEIR_S3S_FS`, else `target/tools/bin/s3s-fs` of
/// this workspace or of the current folder.
pub(super) fn s3s_fs_binary() -> Result<PathBuf, BenchError> {
    let install = format!(
        "install it with `cargo install s3s-fs@{S3S_FS_VERSION} --features binary --locked --root target/tools`"
    );
    if let Some(p) = std::env::var_os("WEIR_S3S_FS") {
        let p = PathBuf::from(p);
        if p.exists() {
            return Ok(p);
        }
        return Err(BenchError::Failed(format!(
            "WEIR_S3S_FS names {}, which does not exist: {install}",
            p.display()
        )));
    }
    let candidates = [
        Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tools/bin/s3s-fs"),
        PathBuf::from("target/tools/bin/s3s-fs"),
    ];
    candidates
        .iter()
        .find(|p| p.exists())
        .cloned()
        .ok_or_else(|| {
            BenchError::Failed(format!(
                "the S3 half needs s3s-fs (an S3-compatible server) at {} or $WEIR_S3S_FS: {install}",
                candidates[0].display()
            ))
        })
}

/// Starts s3s-fs on a free loopback port with its data under `root`
/// (BUCKET made), and opens the store at `s3://BUCKET/bench` through it
/// with a credentials file, as a user points `--artifacts` at it.
pub(super) async fn start_s3(root: &Path) -> Result<(Proc, Objects), BenchError> {
    let bin = s3s_fs_binary()?;
    let data = root.join("server");
    std::fs::create_dir_all(data.join(BUCKET)).map_err(failed("s3s-fs data"))?;
    let addr = free_addr()?;
    let child = std::process::Command::new(&bin)
        .args(["--host", "127.0.0.1", "--port", &addr.port().to_string()])
        .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| BenchError::Failed(format!("cannot start {}: {e}", bin.display())))?;
    let proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(S3S_LISTEN_WAIT_S);
    while std::net::TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::Failed(format!(
                "s3s-fs did not listen on {addr} in {S3S_LISTEN_WAIT_S} s"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let creds = root.join("credentials");
    std::fs::write(
        &creds,
        format!(
            "AWS_ENDPOINT_URL=http://{addr}\nAWS_ACCESS_KEY_ID={ACCESS_KEY}\nAWS_SECRET_ACCESS_KEY={SECRET_KEY}\nAWS_REGION=us-east-1\n"
        ),
    )
    .map_err(failed("credentials file"))?;
    let objects =
        Objects::open(&format!("s3://{BUCKET}/bench"), Some(&creds)).map_err(failed("s3 store"))?;
    objects.probe("bench").await.map_err(failed("s3 probe"))?;
    Ok((proc, objects))
}
