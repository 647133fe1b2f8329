//! Inventories: where a keyed graph's keys come from (glazed's inventory).
//!
//! A source is a file with one key per line, or a command (an argv, run
//! without a shell) whose stdout lists one key per line. Blank lines and
//! lines starting with `#` are skipped, surrounding whitespace is trimmed
//! and duplicates collapse. Every load is bounded: the command gets
//! `timeout_ms` and is killed after it, and at most `bytes_max` bytes of
//! output and `keys_max` keys are accepted; anything over a bound is an
//! error, never a silent truncation (a truncated inventory would delete the
//! schedules of every key cut off).
//!
//! Loading is I/O and nothing else: the trigger actor decides what a load
//! (or a failed one) means for the schedules.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use weir_core::keyed::InventorySource;
use weir_core::names::Key;

/// Bytes of a failing command's stderr kept for its error message.
const STDERR_BYTES_MAX: usize = 2_048;

/// The bounds of one load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InventoryLimits {
    /// How long a command may run, in ms.
    pub timeout_ms: u64,
    /// The most bytes a file or a command's stdout may hold.
    pub bytes_max: usize,
    /// The most keys an inventory may list.
    pub keys_max: usize,
}

/// Why an inventory did not load. Each message names the source.
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    /// The file could not be read.
    #[error("inventory file {path:?}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command could not be started.
    #[error("inventory command {command}: could not start: {source}")]
    Spawn {
        /// The command, as written.
        command: String,
        /// Why.
        source: std::io::Error,
    },
    /// The command failed.
    #[error("inventory command {command}: {status}: {stderr}")]
    Exit {
        /// The command, as written.
        command: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The start of its stderr.
        stderr: String,
    },
    /// The command did not finish in time; it was killed.
    #[error("inventory command {command}: did not finish within {timeout_ms} ms; killed")]
    Timeout {
        /// The command, as written.
        command: String,
        /// The limit.
        timeout_ms: u64,
    },
    /// The source holds more bytes than allowed.
    #[error("{what}: more than {bytes_max} bytes")]
    TooLarge {
        /// The source.
        what: String,
        /// The limit.
        bytes_max: usize,
    },
    /// The source lists more keys than allowed.
    #[error("{what}: more than {keys_max} keys")]
    TooManyKeys {
        /// The source.
        what: String,
        /// The limit.
        keys_max: usize,
    },
    /// A line is not a valid key.
    #[error("{what}: line {line}: {reason}")]
    BadKey {
        /// The source.
        what: String,
        /// The line number, from 1.
        line: usize,
        /// Why the key is not valid.
        reason: String,
    },
}

/// How a source is named in messages: `inventory file "/x"` or
/// `inventory command ["list", "--all"]`.
pub fn describe(source: &InventorySource) -> String {
    match source {
        InventorySource::File(path) => format!("inventory file {path:?}"),
        InventorySource::Command(argv) => format!("inventory command {argv:?}"),
    }
}

/// Loads the keys of `source`, sorted and without duplicates.
pub async fn load(
    source: &InventorySource,
    limits: &InventoryLimits,
) -> Result<Vec<Key>, InventoryError> {
    let what = describe(source);
    let bytes = match source {
        InventorySource::File(path) => read_file(path, limits).await?,
        InventorySource::Command(argv) => run_command(argv, limits).await?,
    };
    parse(&bytes, &what, limits)
}

/// The keys listed in `bytes` (see the module documentation).
pub fn parse(
    bytes: &[u8],
    what: &str,
    limits: &InventoryLimits,
) -> Result<Vec<Key>, InventoryError> {
    let text = String::from_utf8_lossy(bytes);
    let mut keys = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let key = Key::new(line).map_err(|e| InventoryError::BadKey {
            what: what.to_string(),
            line: i + 1,
            reason: e.to_string(),
        })?;
        keys.insert(key);
        if keys.len() > limits.keys_max {
            return Err(InventoryError::TooManyKeys {
                what: what.to_string(),
                keys_max: limits.keys_max,
            });
        }
    }
    Ok(keys.into_iter().collect())
}

async fn read_file(path: &str, limits: &InventoryLimits) -> Result<Vec<u8>, InventoryError> {
    let read = |source| InventoryError::Read {
        path: path.to_string(),
        source,
    };
    let file = tokio::fs::File::open(path).await.map_err(read)?;
    let mut bytes = Vec::new();
    // One byte over the limit tells "at the limit" from "over it".
    file.take(limits.bytes_max as u64 + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(read)?;
    if bytes.len() > limits.bytes_max {
        return Err(InventoryError::TooLarge {
            what: describe(&InventorySource::File(path.to_string())),
            bytes_max: limits.bytes_max,
        });
    }
    Ok(bytes)
}

async fn run_command(argv: &[String], limits: &InventoryLimits) -> Result<Vec<u8>, InventoryError> {
    let command = format!("{argv:?}");
    let Some((program, args)) = argv.split_first() else {
        return Err(InventoryError::Spawn {
            command,
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the argv is empty"),
        });
    };
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| InventoryError::Spawn {
            command: command.clone(),
            source,
        })?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let bytes_max = limits.bytes_max;
    let read_all = async {
        let mut out = Vec::new();
        let mut err = Vec::new();
        let mut out_pipe = (&mut stdout).take(bytes_max as u64 + 1);
        let (o, e) = tokio::join!(
            out_pipe.read_to_end(&mut out),
            drain_keeping(&mut stderr, &mut err, STDERR_BYTES_MAX),
        );
        o?;
        let _ = e;
        if out.len() > bytes_max {
            return Ok::<_, std::io::Error>((out, err, None));
        }
        let status = child.wait().await?;
        Ok((out, err, Some(status)))
    };
    let timeout = Duration::from_millis(limits.timeout_ms);
    let (out, err, status) = match tokio::time::timeout(timeout, read_all).await {
        Ok(Ok(r)) => r,
        Ok(Err(source)) => return Err(InventoryError::Spawn { command, source }),
        Err(_) => {
            return Err(InventoryError::Timeout {
                command,
                timeout_ms: limits.timeout_ms,
            })
        }
    };
    let Some(status) = status else {
        return Err(InventoryError::TooLarge {
            what: describe(&InventorySource::Command(argv.to_vec())),
            bytes_max,
        });
    };
    if !status.success() {
        return Err(InventoryError::Exit {
            command,
            status,
            stderr: String::from_utf8_lossy(&err).trim().to_string(),
        });
    }
    Ok(out)
}

/// Reads `reader` to its end, keeping its first `keep` bytes: a command
/// that writes much to stderr must not block on a full pipe.
async fn drain_keeping(
    reader: &mut (impl tokio::io::AsyncRead + Unpin),
    kept: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<()> {
    let mut buf = [0u8; 4096];
    loop {
        let n = reader.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let room = keep.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
}
