//! A single engine's listener at its edges (#43 items 9, 11 and 12), a
//! real `weir serve` process: a half-sent request head does not hold a
//! connection, in plain HTTP or over TLS; the answers hyper makes itself
//! (a head it cannot parse, a URI or a head over the limits) and the
//! refusal of plain HTTP on the TLS port carry the API's error body; and a
//! client that claims another's address in a front's header is recorded
//! as itself.

mod serve_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serve_support::{chain_def, start, tls_files, write_def, Served};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

/// The server's header-read timeout, and the slack a loaded machine adds.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const SLACK: Duration = Duration::from_secs(5);

fn served(tls: bool) -> (tempfile::TempDir, Served) {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, "g", &chain_def("g"));
    let data = dir.path().join("data");
    let s = if tls {
        let (_, cert, key) = tls_files(dir.path());
        start(
            &[
                "serve",
                "--tls-cert",
                cert.to_str().unwrap(),
                "--tls-key",
                key.to_str().unwrap(),
            ],
            &defs,
            &data,
        )
    } else {
        start(&["serve"], &defs, &data)
    };
    (dir, s)
}

fn addr_of(s: &Served) -> String {
    s.url
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .to_string()
}

/// The half of a request head a slow client sends.
const HALF_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: weir\r\nX-Slow: ";

/// #43 item 11: twenty plain connections that send half a head are each
/// closed within the header-read timeout, and the engine still serves.
#[test]
fn a_half_sent_head_is_closed_within_the_header_timeout() {
    let (_dir, s) = served(false);
    let addr = addr_of(&s);
    let t0 = Instant::now();
    let conns: Vec<TcpStream> = (0..20)
        .map(|_| {
            let mut c = TcpStream::connect(&addr).unwrap();
            c.write_all(HALF_HEAD).unwrap();
            c
        })
        .collect();
    for (i, mut c) in conns.into_iter().enumerate() {
        let left = (HEADER_READ_TIMEOUT + SLACK).saturating_sub(t0.elapsed());
        c.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        let mut buf = [0u8; 256];
        match c.read(&mut buf) {
            Ok(0) => {}
            Ok(n) => panic!("#{i}: an answer to half a head: {:?}", &buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("#{i}: still open after {:?} ({e})", t0.elapsed()),
        }
    }
    assert!(
        t0.elapsed() >= HEADER_READ_TIMEOUT - Duration::from_secs(1),
        "closed before the timeout: {:?}",
        t0.elapsed()
    );
    assert_eq!(s.http().get("/api/v1/graphs").status, 200);
}

/// #43 item 11: over TLS too, a completed handshake followed by half a
/// head is closed within the header-read timeout.
#[test]
fn a_half_sent_head_over_tls_is_closed_within_the_header_timeout() {
    let (_dir, s) = served(true);
    let addr = addr_of(&s);
    let ca = std::fs::read(s.ca.as_ref().unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
            roots.add(c.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let t0 = Instant::now();
        let mut conns = Vec::new();
        for _ in 0..20 {
            let tcp = tokio::net::TcpStream::connect(&addr).await.unwrap();
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let mut c = connector.connect(name, tcp).await.unwrap();
            c.write_all(HALF_HEAD).await.unwrap();
            c.flush().await.unwrap();
            conns.push(c);
        }
        for (i, mut c) in conns.into_iter().enumerate() {
            let left = (HEADER_READ_TIMEOUT + SLACK).saturating_sub(t0.elapsed());
            let mut buf = [0u8; 256];
            match tokio::time::timeout(left, c.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {}
                Ok(Ok(n)) => panic!("#{i}: an answer to half a head: {:?}", &buf[..n]),
                Err(_) => panic!("#{i}: still open after {:?}", t0.elapsed()),
            }
        }
    });
    assert_eq!(get_over_tls(&s), 200, "the engine still serves");
}

/// `GET /api/v1/graphs` over TLS with the engine's CA: the status.
fn get_over_tls(s: &Served) -> u16 {
    let pem = std::fs::read(s.ca.as_ref().unwrap()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
            .build()
            .unwrap();
        http.get(format!("{}/api/v1/graphs", s.url))
            .bearer_auth(&s.token)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    })
}

/// Sends `raw` on a new connection and reads the answer to its end:
/// status, head and body.
fn exchange(addr: &str, raw: &[u8]) -> (u16, String, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = c.write_all(raw);
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no answer: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    (status, head.to_string(), body.to_string())
}

/// #43 item 12: what hyper answers itself, errors no API route makes (the
/// UI's), and the TLS port's refusal of plain HTTP carry
/// `{"error": {"status", "kind", "message"}}` with a JSON content type,
/// like every other error.
#[test]
fn hyper_s_own_refusals_have_the_api_s_error_shape() {
    let (_dir, s) = served(false);
    let addr = addr_of(&s);
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: weir\r\n\r\n", "a".repeat(70_000));
    let large_head = format!(
        "GET /api/v1/graphs HTTP/1.1\r\nHost: weir\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200_000)
    );
    let many: String = (0..150).map(|i| format!("X-{i}: a\r\n")).collect();
    let many_headers = format!("GET /api/v1/graphs HTTP/1.1\r\nHost: weir\r\n{many}\r\n");
    let cases: [(&str, Vec<u8>, u16, &str); 5] = [
        (
            "a URI over 65534 bytes",
            long_uri.into_bytes(),
            414,
            "uri_too_long",
        ),
        (
            "a head over 128 KiB",
            large_head.into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            "150 headers",
            many_headers.into_bytes(),
            431,
            "headers_too_large",
        ),
        (
            "a control byte in the method",
            b"GE\x01T / HTTP/1.1\r\nHost: weir\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
        (
            "a header without a colon",
            b"GET / HTTP/1.1\r\nHost weir\r\n\r\n".to_vec(),
            400,
            "bad_request",
        ),
    ];
    for (i, (what, raw, status, kind)) in cases.into_iter().enumerate() {
        let (got, head, body) = exchange(&addr, &raw);
        assert_eq!(got, status, "#{i} {what}: {head} {body}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/json"),
            "#{i} {what}: {head}"
        );
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("#{i} {what}: {e}: {body:?}"));
        assert_eq!(v["error"]["status"], status, "#{i} {what}: {body}");
        assert_eq!(v["error"]["kind"], kind, "#{i} {what}: {body}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "#{i} {what}: {body}"
        );
    }
    // The engine serves on after each.
    assert_eq!(s.http().get("/api/v1/graphs").status, 200);
    // Errors no API route makes: the UI's missing file, a path that is
    // not UTF-8 under the UI.
    for (i, (path, status, kind)) in [
        ("/ui/nothing.js", 404, "not_found"),
        ("/ui/%ff", 400, "bad_request"),
    ]
    .into_iter()
    .enumerate()
    {
        let a = s.http().get(path);
        assert_eq!(a.status, status, "#{i} {path}: {a:?}");
        assert!(
            a.headers
                .to_ascii_lowercase()
                .contains("content-type: application/json"),
            "#{i} {path}: {a:?}"
        );
        let v = a.json();
        assert_eq!(v["error"]["status"], status, "#{i} {path}: {a:?}");
        assert_eq!(v["error"]["kind"], kind, "#{i} {path}: {a:?}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "#{i} {path}: {a:?}"
        );
    }
    // Plain HTTP on the TLS port.
    let (_dir, tls) = served(true);
    let (got, head, body) = exchange(
        &addr_of(&tls),
        b"GET /api/v1/graphs HTTP/1.1\r\nHost: weir\r\n\r\n",
    );
    assert_eq!(got, 400, "{head} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["kind"], "bad_request", "{body}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serves HTTPS only"),
        "{body}"
    );
}

/// #43 item 9: an engine believes the client address a front states only
/// with the proof its own front makes: a client that sends the header
/// itself is recorded as itself.
#[test]
fn a_claimed_client_address_is_not_believed() {
    let (_dir, s) = served(false);
    let http = s.http();
    let a = http.send(
        "POST",
        "/api/v1/graphs/g/pause",
        Some(b"{}"),
        &[(
            "x-weir-client",
            "10.9.8.7:1234 0000000000000000000000000000000000000000000000000000000000000000",
        )],
    );
    assert_eq!(a.status, 200, "{a:?}");
    let entries = http.get("/api/v1/audit").json();
    let entry = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "/api/v1/graphs/g/pause")
        .unwrap_or_else(|| panic!("no entry: {entries}"))
        .clone();
    let client = entry["client"].as_str().unwrap();
    assert!(
        client.starts_with("127.0.0.1:"),
        "the audit names the real client: {entry}"
    );
}
