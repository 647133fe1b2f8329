//! A tmpfs the test mounts (root only) to fill a disk for real, resized
//! to move its free space under or over a store's reserve.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted for the test, unmounted on drop.
pub struct Tmpfs {
    pub at: PathBuf,
}

impl Tmpfs {
    pub fn mount(at: &Path, bytes: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(at)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            at: at.to_path_buf(),
        })
    }

    pub fn resize(&self, bytes: u64) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={bytes}")])
            .arg(&self.at)
            .output()
            .expect("mount runs");
        assert!(
            out.status.success(),
            "remount to {bytes} bytes: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.at)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds a file open: detach it now, the
            // kernel frees it when the last holder goes.
            let _ = Command::new("umount").arg("-l").arg(&self.at).status();
        }
    }
}

/// Bytes used on the filesystem holding `path` (statvfs through df).
pub fn used_bytes(path: &Path) -> u64 {
    let out = Command::new("df")
        .args(["--output=used", "-B1"])
        .arg(path)
        .output()
        .expect("df runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .nth(1)
        .and_then(|l| l.trim().parse().ok())
        .expect("df prints the bytes used")
}

/// Whether this process may mount (root).
pub fn can_mount() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
