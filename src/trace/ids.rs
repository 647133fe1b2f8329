//! The ids of a run's trace, derived from what every process holding a
//! piece of the run knows: the engine (exporting the spans when the run
//! settles) and the command task (giving `TRACEPARENT` to the command it
//! starts, locally or on a worker) compute the same ids without telling
//! each other.
//!
//! A trace is a graph run's, named by graph and partition (a partition
//! runs at most once); a node span is a node instance's (its run id:
//! graph/partition/node/rerun), an attempt span one attempt of it.

/// A trace id: 16 bytes, never all zero.
pub type TraceBytes = [u8; 16];
/// A span id: 8 bytes, never all zero.
pub type SpanBytes = [u8; 8];

fn hash(parts: &[&str]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_derive_key("weir trace ids v1");
    for p in parts {
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    *h.finalize().as_bytes()
}

fn nonzero<const N: usize>(mut b: [u8; N]) -> [u8; N] {
    // W3C trace context: an all-zero id is invalid.
    if b.iter().all(|x| *x == 0) {
        b[N - 1] = 1;
    }
    b
}

/// The trace of the run of `graph` for `partition`.
pub fn trace_id(graph: &str, partition: &str) -> TraceBytes {
    let h = hash(&["trace", graph, partition]);
    let mut out = [0u8; 16];
    out.copy_from_slice(&h[..16]);
    nonzero(out)
}

fn span(parts: &[&str]) -> SpanBytes {
    let h = hash(parts);
    let mut out = [0u8; 8];
    out.copy_from_slice(&h[..8]);
    nonzero(out)
}

/// The run's own span (the trace's root).
pub fn run_span(graph: &str, partition: &str) -> SpanBytes {
    span(&["run", graph, partition])
}

/// A node instance's span, by its run id.
pub fn node_span(run_id: &str) -> SpanBytes {
    span(&["node", run_id])
}

/// An attempt's span.
pub fn attempt_span(run_id: &str, attempt: u32) -> SpanBytes {
    span(&["attempt", run_id, &attempt.to_string()])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The W3C `traceparent` of an attempt: what its command's own spans take
/// as their parent.
pub fn traceparent(graph: &str, partition: &str, run_id: &str, attempt: u32) -> String {
    format!(
        "00-{}-{}-01",
        hex(&trace_id(graph, partition)),
        hex(&attempt_span(run_id, attempt))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_and_form_a_valid_traceparent() {
        assert_eq!(trace_id("etl", "2026-11-01"), trace_id("etl", "2026-11-01"));
        assert_ne!(trace_id("etl", "2026-11-01"), trace_id("etl", "2026-11-02"));
        // Parts are length-prefixed: ("a/b", "c") is not ("a", "b/c").
        assert_ne!(trace_id("a/b", "c"), trace_id("a", "b/c"));
        assert_ne!(attempt_span("g/p/n/0", 1), attempt_span("g/p/n/0", 2));
        assert_ne!(node_span("g/p/n/0"), node_span("g/p/n/1"));
        let tp = traceparent("etl", "2026-11-01", "etl/2026-11-01/load/0", 2);
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!((parts[0], parts[3]), ("00", "01"));
        assert_eq!(parts[1], hex(&trace_id("etl", "2026-11-01")));
        assert_eq!(parts[2], hex(&attempt_span("etl/2026-11-01/load/0", 2)));
        assert!(parts[1].len() == 32 && parts[2].len() == 16);
    }
}
