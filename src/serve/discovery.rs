//! How clients find a running engine: `DATA/engine.json` and `DATA/token`.
//!
//! The engine writes `engine.json` (its URL, pid, start time; mode 0600)
//! once it listens, and removes it at a clean stop. A file left by an
//! engine that died (its pid is gone) is stale and ignored. The bearer
//! token lives in `DATA/token` (256 random bits, hex, mode 0600), made at
//! the first start unless a token file is given; the CLI reads it there.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file that says where the engine of a data directory listens.
pub const ENGINE_FILE: &str = "engine.json";
/// The file that holds the API token.
pub const TOKEN_FILE: &str = "token";
/// Token length in bytes (256 bits).
pub const TOKEN_BYTES: usize = 32;
/// A token file larger than this is refused (it is not a token).
pub const TOKEN_FILE_BYTES_MAX: u64 = 4096;

/// What `engine.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineInfo {
    /// The API's base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    /// The engine's process id.
    pub pid: u32,
    /// When it started (ms since the epoch).
    pub started_at_ms: u64,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// weir's version.
    pub version: String,
    /// A replicated engine's members' URLs (every member serves the API;
    /// a client tries the next when one does not answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
}

/// Writes `path` atomically (temp file + rename) with mode 0600.
///
/// Each call has a temp file of its own (the pid and a count): two writes
/// of one file at once in one process (a replicated member's API starting
/// as it leads, while its members' refresh rewrites the same
/// `engine.json`) each rename their own, and the last one stands. With
/// one temp name per process, the first rename took the second writer's
/// file away and its rename failed with ENOENT, which stopped the member
/// that had just been elected.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        // Each call's temp file is its own: one a failed write leaves
        // would stay for good.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes the engine file of `data_dir`.
pub fn write_engine_file(data_dir: &Path, info: &EngineInfo) -> std::io::Result<()> {
    let bytes = serde_json::to_vec_pretty(info).map_err(std::io::Error::other)?;
    write_private(&data_dir.join(ENGINE_FILE), &bytes)
}

/// Removes the engine file of `data_dir` if it is this process's.
pub fn remove_engine_file(data_dir: &Path) {
    let path = data_dir.join(ENGINE_FILE);
    if let Ok(Some(info)) = read_engine_file_raw(&path) {
        if info.pid != std::process::id() {
            return;
        }
    }
    if let Err(e) = std::fs::remove_file(&path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(file = %path.display(), error = %e, "cannot remove the engine file");
        }
    }
}

fn read_engine_file_raw(path: &Path) -> Result<Option<EngineInfo>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{}: not an engine file: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Whether a process with this pid exists.
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The live engine of `data_dir`: `None` when no file exists or it is
/// stale (its process is gone).
pub fn find_engine(data_dir: &Path) -> Result<Option<EngineInfo>, String> {
    let path = data_dir.join(ENGINE_FILE);
    match read_engine_file_raw(&path)? {
        // A member of a replicated engine that died leaves its peers'
        // URLs: the client goes to them.
        Some(info) if pid_alive(info.pid) || !info.members.is_empty() => Ok(Some(info)),
        Some(info) => {
            tracing::debug!(file = %path.display(), pid = info.pid, "stale engine file ignored");
            Ok(None)
        }
        None => Ok(None),
    }
}

/// A new random token: 256 bits from the OS, as hex.
pub fn new_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_BYTES];
    let mut f = std::fs::File::open("/dev/urandom")?;
    std::io::Read::read_exact(&mut f, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Reads a token file: its first line, trimmed; an empty or oversized
/// file is an error naming it.
pub fn read_token_file(path: &Path) -> Result<String, String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("token file {}: {e}", path.display()))?;
    if meta.len() > TOKEN_FILE_BYTES_MAX {
        return Err(format!(
            "token file {}: {} bytes is not a token (at most {TOKEN_FILE_BYTES_MAX})",
            path.display(),
            meta.len()
        ));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("token file {}: {e}", path.display()))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 {
        return Err(format!(
            "token file {}: the token must be at least 16 characters",
            path.display()
        ));
    }
    Ok(token)
}

/// The token of `data_dir`, made (and written, mode 0600) if absent.
pub fn ensure_token(data_dir: &Path) -> Result<String, String> {
    let path = data_dir.join(TOKEN_FILE);
    if path.exists() {
        return read_token_file(&path);
    }
    let token = new_token().map_err(|e| format!("cannot make a token: {e}"))?;
    write_private(&path, format!("{token}\n").as_bytes())
        .map_err(|e| format!("token file {}: {e}", path.display()))?;
    tracing::info!(file = %path.display(), "api token created");
    Ok(token)
}

/// Compares two tokens in time that does not depend on where they differ.
pub fn token_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_256_bits_of_hex_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let t = ensure_token(dir.path()).unwrap();
        assert_eq!(t.len(), 64);
        assert!(t.chars().all(|c| c.is_ascii_hexdigit()));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(dir.path().join(TOKEN_FILE))
                .unwrap()
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(ensure_token(dir.path()).unwrap(), t, "kept across starts");
    }

    #[test]
    fn stale_engine_file_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let mut info = EngineInfo {
            url: "http://127.0.0.1:1".into(),
            pid: std::process::id(),
            started_at_ms: 1,
            data_dir: dir.path().to_path_buf(),
            version: "x".into(),
            members: vec![],
        };
        write_engine_file(dir.path(), &info).unwrap();
        assert_eq!(find_engine(dir.path()).unwrap(), Some(info.clone()));
        // A pid beyond pid_max is never alive.
        info.pid = 4_194_305;
        write_engine_file(dir.path(), &info).unwrap();
        assert_eq!(find_engine(dir.path()).unwrap(), None);
    }

    #[test]
    fn concurrent_writes_of_one_file_all_land_and_one_stands() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ENGINE_FILE);
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        write_private(&path, format!("writer {w} write {i}").as_bytes())
                            .unwrap_or_else(|e| panic!("writer {w}, write {i}: {e}"));
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().expect("every write succeeds");
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("writer ") && text.ends_with(" write 49"),
            "{text}"
        );
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            left,
            vec![std::ffi::OsString::from(ENGINE_FILE)],
            "no temp file left"
        );
    }

    #[test]
    fn token_compare() {
        assert!(token_eq("abcd", "abcd"));
        assert!(!token_eq("abcd", "abce"));
        assert!(!token_eq("abcd", "abc"));
    }
}
