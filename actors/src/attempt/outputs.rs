//! An attempt's outputs on the engine's side: upstream outputs read back
//! from their blobs before the attempt, and a succeeded attempt's output
//! kept (inline when small, else in a durable blob) before it is reported.

use std::sync::Arc;

use weir_core::retry::AttemptOutcome;

use crate::records::graph::TaskInput;
use crate::store::{BlobRef, Store, BLOB_INLINE_BYTES_MAX};

/// The payload of a graph node's attempt with its upstreams' outputs read
/// back from their blobs (checked against their hashes), so the task sees
/// them whole as before outputs were kept apart; `None` when no upstream
/// output is in a blob. A missing or damaged blob fails the attempt for
/// good, naming the file and the upstream: running on with a wrong input
/// would be worse.
pub async fn resolve_upstreams(
    store: &Store,
    payload: Arc<[u8]>,
) -> Result<Option<Vec<u8>>, String> {
    let Ok(mut input) = weir_core::codec::decode::<TaskInput>(&payload) else {
        // Not a graph task input: the task gets its payload as it is.
        return Ok(None);
    };
    if input.upstreams.values().all(|u| u.output_blob.is_none()) {
        return Ok(None);
    }
    let store = store.clone();
    crate::blocking::run(move || {
        for (name, up) in input.upstreams.iter_mut() {
            if let Some(blob) = up.output_blob.take() {
                up.output = store
                    .read_blob(&blob)
                    .map_err(|e| format!("node {}: upstream {name}'s output: {e}", input.node))?;
            }
        }
        weir_core::codec::encode(&input)
            .map(Some)
            .map_err(|e| format!("node {}: task input: {e}", input.node))
    })
    .await
    .map_err(|e| format!("reading upstream outputs: {e}"))?
}

/// A succeeded attempt's output as it is reported: cut at
/// `output_bytes_max`, inline when small, else written to a blob (durable
/// and pinned before the report names it). A blob that cannot be written
/// fails the attempt (retryable); a full disk has also stopped the store
/// (the disk reserve covers blobs), so the engine stops before the report
/// is journaled.
pub async fn keep_output(
    store: Option<&Store>,
    mut output: Vec<u8>,
    output_bytes_max: usize,
) -> (AttemptOutcome, Vec<u8>, Option<BlobRef>, Option<String>) {
    output.truncate(output_bytes_max);
    let Some(store) = store.filter(|_| output.len() > BLOB_INLINE_BYTES_MAX) else {
        // Small, or in a worker process: inline (the engine's proxy keeps
        // a remote output in a blob).
        return (AttemptOutcome::Success, output, None, None);
    };
    let store = store.clone();
    let written = crate::blocking::run(move || store.write_blob(&output)).await;
    match written {
        Ok(Ok(blob)) => (AttemptOutcome::Success, Vec::new(), Some(blob), None),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot keep an attempt's output");
            (
                AttemptOutcome::Retryable,
                Vec::new(),
                None,
                Some(format!("cannot keep the output: {e}")),
            )
        }
        Err(e) => (
            AttemptOutcome::Retryable,
            Vec::new(),
            None,
            Some(format!("cannot keep the output: {e}")),
        ),
    }
}
