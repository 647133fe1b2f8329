//! Entry points of the fuzz targets (`fuzz/`, cargo-fuzz and libFuzzer) and
//! of the test that replays their corpora (`tests/rel_fuzz_corpus.rs`), in
//! one place so that both drive the same code with the same checks.
//!
//! Each takes arbitrary bytes and must return whatever they are: a panic is
//! a finding. What each checks beyond "no panic":
//! - [`definition`]: TOML text through the definition parser and the
//!   graph's validation (`definition::parse_all`, as `weir validate` reads
//!   a file); a definition it accepts is stored the way adoption stores it
//!   and read back to the same graph and hash.
//! - [`envelope`]: stored bytes through the decoders recovery and the
//!   readers use: a snapshot's meta and ticket chunk restored, journal
//!   values replayed through `step`, the orphans of a restart requeued (the
//!   queue's invariants must hold after), and every kind of record.
//! - [`api`]: an HTTP request (a route, its path parameters, a JSON body or
//!   query string) through the real router over a real engine with a few
//!   graphs: a bad request must be answered 4xx, never a panic or a 5xx.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use weir_actors::store::{apply_journal_value, decode_ticket_chunk, BlobRef, SnapshotMeta};
use weir_core::codec;
use weir_core::graph::GraphDef;
use weir_core::queue::{Op, QueueState};

use crate::definition;

/// Bytes a fuzzed input may hold at most; longer ones are cut (libFuzzer
/// is run with a smaller `-max_len`; this bounds a corpus file replayed).
pub const INPUT_BYTES_MAX: usize = 256 << 10;

/// Definition text: parsed and validated; an accepted definition survives
/// the store's encoding (adoption keeps it as a record, and a restart
/// validates it again from there) with its hash.
pub fn definition(data: &[u8]) {
    let data = &data[..data.len().min(INPUT_BYTES_MAX)];
    let text = String::from_utf8_lossy(data);
    let Ok((graph, _pools, _targets)) =
        definition::parse_all(&text, Path::new("fuzz.toml"), Path::new("."))
    else {
        return;
    };
    let bytes = codec::encode(graph.def()).expect("an accepted definition encodes");
    let back: GraphDef = codec::decode(&bytes).expect("a stored definition decodes");
    let again = back
        .validate()
        .expect("a stored definition validates again");
    assert_eq!(
        again.hash(),
        graph.hash(),
        "a stored definition keeps its hash"
    );
}

/// Splits an input into pieces, each a little-endian `u16` length then
/// that many bytes; the last piece takes what is left.
fn pieces(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = usize::from(u16::from_le_bytes([data[0], data[1]]));
        let rest = &data[2..];
        let n = n.min(rest.len());
        out.push(&rest[..n]);
        data = &rest[n..];
    }
    if !data.is_empty() {
        out.push(data);
    }
    out
}

/// Every kind of record the store keeps, decoded as its readers do (and
/// the open's check, which decodes every record as anything).
fn records(bytes: &[u8]) {
    use weir_actors::done::{DeadRecord, DoneRecord};
    use weir_actors::scheduler::records::{GraphRecord, GraphRunRecord};
    let _ = codec::decode::<serde::de::IgnoredAny>(bytes);
    let _ = codec::decode::<GraphRecord>(bytes);
    let _ = codec::decode::<GraphRunRecord>(bytes);
    let _ = codec::decode::<DoneRecord>(bytes);
    let _ = codec::decode::<DeadRecord>(bytes);
    let _ = codec::decode::<weir_actors::trigger::keyed::KeyRecord>(bytes);
    let _ = codec::decode::<weir_core::breaker::Breaker>(bytes);
    let _ = codec::decode::<BlobRef>(bytes);
    let _ = codec::decode::<Op>(bytes);
    if let Ok(def) = codec::decode::<GraphDef>(bytes) {
        // An adopted definition is validated when it is read back.
        let _ = def.validate();
    }
}

/// Stored bytes: pieces (see [`pieces`]) as the snapshot's meta, one
/// chunk of its tickets and journal values after it, replayed as recovery
/// does; each piece also as every kind of record.
pub fn envelope(data: &[u8]) {
    let data = &data[..data.len().min(INPUT_BYTES_MAX)];
    let pieces = pieces(data);
    for p in &pieces {
        records(p);
    }
    let meta = pieces
        .first()
        .and_then(|p| codec::decode::<SnapshotMeta>(p).ok());
    let tickets = pieces
        .get(1)
        .and_then(|p| decode_ticket_chunk(p).ok())
        .unwrap_or_default();
    let next_id = meta.map_or_else(
        || {
            tickets
                .iter()
                .map(|t| t.id.saturating_add(1))
                .max()
                .unwrap_or(0)
        },
        |m| m.next_id,
    );
    // A snapshot `restore` refuses stops the open; replay then starts from
    // nothing, to go on fuzzing the journal.
    let mut state = QueueState::restore(next_id, tickets).unwrap_or_default();
    state.assert_invariants();
    let mut changed = BTreeSet::new();
    for p in pieces.iter().skip(2) {
        let _ = apply_journal_value(&mut state, p, &mut changed);
    }
    state.assert_invariants();
    // What the queue does next at a restart: every running ticket is an
    // orphan.
    let now_ms = meta.map_or(0, |m| m.seq);
    // Each is requeued as a failed attempt (or failed, its tries spent).
    for (op, _) in state.orphans(now_ms, || 0) {
        let _ = state.step(&op);
    }
    state.assert_invariants();
}

/// The routes [`api`] sends to: (method, path template). Path parameters
/// in braces take the input's segments, else the defaults of
/// [`default_param`].
pub const API_ROUTES: &[(&str, &str)] = &[
    ("POST", "/api/v1/graphs/{graph}/runs"),
    ("POST", "/api/v1/graphs/{graph}/backfills"),
    ("POST", "/api/v1/graphs/{graph}/pause"),
    ("POST", "/api/v1/graphs/{graph}/unpause"),
    ("POST", "/api/v1/graphs/{graph}/trigger"),
    ("POST", "/api/v1/graphs/{keyed}/keys/{key}/signal"),
    ("POST", "/api/v1/graphs/{graph}/runs/{partition}/cancel"),
    ("POST", "/api/v1/graphs/{graph}/runs/{partition}/clear"),
    (
        "POST",
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/rerun",
    ),
    (
        "POST",
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}/mark",
    ),
    ("POST", "/api/v1/queue/dead/{key}/requeue"),
    ("POST", "/api/v1/queue/dead/requeue"),
    ("POST", "/api/v1/breakers/{target}/reset"),
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/queue/tickets"),
    ("GET", "/api/v1/queue/dead"),
    ("GET", "/api/v1/graphs/{graph}/grid"),
    (
        "GET",
        "/api/v1/graphs/{graph}/runs/{partition}/nodes/{node}",
    ),
];

/// A path parameter's value when the input gives none: names the fuzz
/// engine knows, so the body is what is tried.
fn default_param(name: &str) -> &'static str {
    match name {
        "graph" => "daily",
        "keyed" => "keyed",
        "key" => "k1",
        "partition" => "2026-01-02",
        "node" => "a",
        "target" => "t",
        _ => "x",
    }
}

/// The bearer token of the fuzzed engine.
const API_TOKEN: &str = "fuzz-token";

/// The definitions of the fuzzed engine: a daily graph of two nodes with
/// a target, an unpartitioned one and a keyed one over two keys.
const API_DEFINITIONS: &[(&str, &str)] = &[
    (
        "daily.toml",
        "name = \"daily\"\npartitioning = \"daily\"\nmax_active_runs = 2\n\
         [targets.t]\nfailures = 2\n\
         [[nodes]]\nname = \"a\"\ntask = \"noop\"\n\
         [[nodes]]\nname = \"b\"\nupstreams = [\"a\"]\ntask = \"noop\"\ntarget = \"t\"\n",
    ),
    (
        "plain.toml",
        "name = \"plain\"\n[[nodes]]\nname = \"a\"\ntask = \"noop\"\n",
    ),
    (
        "keyed.toml",
        "name = \"keyed\"\npartitioning = \"keyed\"\n\
         [keyed]\ninventory = { file = \"keys.txt\" }\ninterval = \"1h\"\n\
         [[nodes]]\nname = \"a\"\ntask = \"noop\"\n",
    ),
];

/// The engine every [`api`] call shares, its router and runtime.
struct ApiHarness {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    _dir: std::path::PathBuf,
}

fn harness() -> &'static ApiHarness {
    static HARNESS: OnceLock<ApiHarness> = OnceLock::new();
    HARNESS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("weir-fuzz-api-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let defs = dir.join("defs");
        std::fs::create_dir_all(&defs).expect("fuzz: a temporary folder");
        for (file, text) in API_DEFINITIONS {
            std::fs::write(defs.join(file), text).expect("fuzz: a definition file");
        }
        std::fs::write(defs.join("keys.txt"), "k1\nk2\n").expect("fuzz: the inventory");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("fuzz: a tokio runtime");
        let data = dir.join("data");
        let router = rt.block_on(async {
            let loaded = definition::load_for(&defs, &definition::Registered::any())
                .unwrap_or_else(|e| panic!("fuzz: the definitions: {e}"));
            let engine = crate::Engine::builder(&data)
                .durability(crate::Durability::None)
                .pool("default", 2)
                .task_fn("noop", |_| async { Ok(Vec::new()) })
                .open()
                .await
                .unwrap_or_else(|e| panic!("fuzz: the engine opens: {e}"));
            for l in loaded.graphs {
                engine
                    .adopt(l.graph.into_def())
                    .await
                    .unwrap_or_else(|e| panic!("fuzz: adopting: {e}"));
            }
            crate::serve::app(Arc::new(engine), API_TOKEN, data.clone())
        });
        ApiHarness {
            rt,
            router,
            _dir: dir,
        }
    })
}

/// What a path parameter may be given as: each byte percent-encoded
/// unless it is unreserved, so any bytes reach the router as one segment.
fn encode_segment(bytes: &[u8]) -> String {
    percent_encoding::percent_encode(bytes, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// The request an input stands for: the first byte picks a route of
/// [`API_ROUTES`]; up to the first 0xFF byte come its path parameters,
/// separated by 0xFE (missing ones take their defaults); the rest is the
/// JSON body of a POST or the query string of a GET. Without a 0xFF byte
/// the rest is all body.
pub fn api_request(data: &[u8]) -> Option<axum::http::Request<axum::body::Body>> {
    let (&pick, rest) = data.split_first()?;
    let (method, template) = API_ROUTES[usize::from(pick) % API_ROUTES.len()];
    let (params, body): (Vec<&[u8]>, &[u8]) = match rest.iter().position(|&b| b == 0xFF) {
        Some(i) => (rest[..i].split(|&b| b == 0xFE).collect(), &rest[i + 1..]),
        None => (Vec::new(), rest),
    };
    let mut path = String::new();
    let mut given = params.into_iter();
    for segment in template.split('/').skip(1) {
        path.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name) => match given.next() {
                Some(p) => path.push_str(&encode_segment(p)),
                None => path.push_str(default_param(name)),
            },
            None => path.push_str(segment),
        }
    }
    let builder =
        axum::http::Request::builder().header("authorization", format!("Bearer {API_TOKEN}"));
    let req = if method == "GET" {
        let query = encode_query(body);
        builder
            .method("GET")
            .uri(format!("{path}?{query}"))
            .body(axum::body::Body::empty())
    } else {
        builder
            .method("POST")
            .uri(path)
            .header("content-type", "application/json")
            .header("content-length", body.len().to_string())
            .body(axum::body::Body::from(body.to_vec()))
    };
    req.ok()
}

/// A query string from bytes: `&` and `=` kept, every other byte that a
/// query may not hold percent-encoded.
fn encode_query(bytes: &[u8]) -> String {
    const QUERY: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'&')
        .remove(b'=')
        .remove(b'-')
        .remove(b'_')
        .remove(b'.');
    percent_encoding::percent_encode(bytes, QUERY).to_string()
}

/// An HTTP request (see [`api_request`]) through the router: the answer
/// must not be a 5xx, and its body must be read to the end. Returns its
/// status (`None` for an input that is no request).
pub fn api(data: &[u8]) -> Option<u16> {
    use tower::ServiceExt;
    let data = &data[..data.len().min(crate::serve::BODY_BYTES_MAX + 4096)];
    let req = api_request(data)?;
    let what = format!("{} {}", req.method(), req.uri());
    let h = harness();
    let router = h.router.clone();
    let (status, body) = h.rt.block_on(async move {
        let resp = router.oneshot(req).await.expect("the router is infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 16 << 20).await;
        (status, body)
    });
    let body = body.unwrap_or_else(|e| panic!("{what}: reading the answer: {e}"));
    assert!(
        !status.is_server_error(),
        "{what} with body {:?}: answered {status}: {}",
        String::from_utf8_lossy(data),
        String::from_utf8_lossy(&body)
    );
    Some(status.as_u16())
}
