//! `weir signal --data DIR GRAPH KEY [--immediate] [--source S]`: nudges a
//! key of a keyed graph.
//!
//! Until the control channel exists, signals travel through an inbox
//! folder in the data directory: this command writes one file (atomically,
//! by rename) and a running `weir run` applies it within its next tick, or
//! the next `weir run` applies it at start. A signal the engine refuses
//! (unknown graph, bad key) is moved to `inbox/rejected/` with the reason,
//! never dropped silently.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Failure;
use crate::Engine;

/// One signal in the inbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InboxSignal {
    /// The graph.
    pub graph: String,
    /// The key.
    pub key: String,
    /// Where it came from.
    pub source: String,
    /// Run now rather than after the debounce.
    pub immediate: bool,
}

/// Files applied per tick at most.
pub const INBOX_BATCH_MAX: usize = 1_000;

/// Runs the command.
pub fn run(
    data: &Path,
    graph: &str,
    key: &str,
    source: &str,
    immediate: bool,
) -> Result<u8, Failure> {
    weir_core::names::Name::new(graph).map_err(|e| Failure::input(format!("graph: {e}")))?;
    weir_core::names::Key::new(key).map_err(|e| Failure::input(format!("key: {e}")))?;
    let inbox = data.join("inbox");
    std::fs::create_dir_all(&inbox)
        .map_err(|e| Failure::store(format!("{}: {e}", inbox.display())))?;
    let signal = InboxSignal {
        graph: graph.to_string(),
        key: key.to_string(),
        source: source.to_string(),
        immediate,
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("{nanos}-{}", std::process::id());
    let tmp = inbox.join(format!(".{name}.tmp"));
    let path = inbox.join(format!("{name}.json"));
    let bytes = serde_json::to_vec(&signal).map_err(|e| Failure::store(e.to_string()))?;
    std::fs::write(&tmp, bytes).map_err(|e| Failure::store(format!("{}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, &path).map_err(|e| Failure::store(format!("{}: {e}", path.display())))?;
    println!(
        "signal for graph {graph} key {key:?} queued in {}",
        path.display()
    );
    Ok(0)
}

/// Applies the signals waiting in `inbox`, oldest first.
pub async fn apply_inbox(engine: &Engine, inbox: &Path) {
    let Ok(entries) = std::fs::read_dir(inbox) else {
        return;
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files.into_iter().take(INBOX_BATCH_MAX) {
        let parsed = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<InboxSignal>(&b).map_err(|e| e.to_string()));
        let outcome = match parsed {
            Ok(s) => engine
                .signal(&s.graph, &s.key, &s.source, s.immediate)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("not a signal: {e}")),
        };
        match outcome {
            Ok(()) => {
                tracing::info!(file = %path.display(), "signal applied");
                let _ = std::fs::remove_file(&path);
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "signal rejected");
                let rejected = inbox.join("rejected");
                let _ = std::fs::create_dir_all(&rejected);
                if let Some(name) = path.file_name() {
                    let _ = std::fs::rename(&path, rejected.join(name));
                    let _ = std::fs::write(rejected.join(name).with_extension("reason"), e);
                }
            }
        }
    }
}
