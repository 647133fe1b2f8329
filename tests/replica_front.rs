//! A replicated member's front as an outside client meets it (#43 items
//! 8, 9, 11 and 12), through real `weir serve --raft-id N` processes:
//! a path is passed on byte for byte (an encoded `..` is not resolved on
//! the way), the engine sees the real client (in its audit log, in its
//! loopback-only answers) and believes no client that claims another's
//! address, a body is read only once its caller is known (and never past
//! the engine's limit), a half-sent head does not hold a connection, and
//! every error the front makes has the API's one shape and names no
//! internal address.

mod replica_support;
mod serve_support;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use replica_support::{chain_defs, Group};
use serde_json::Value;

/// The member's resident set, from /proc (bytes).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb << 10
}

/// A connection to `to` from the local address `from` (any port).
fn connect_from(from: IpAddr, to: &str) -> TcpStream {
    let to: SocketAddr = to.parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sock = match from {
            IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        }
        .unwrap();
        sock.bind(SocketAddr::new(from, 0)).unwrap();
        let s = sock.connect(to).await.unwrap();
        let s = s.into_std().unwrap();
        s.set_nonblocking(false).unwrap();
        s
    })
}

/// An address of this machine other than loopback: the one its routing
/// table picks to reach the outside (no packet is sent).
fn outside_ip() -> IpAddr {
    let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect("203.0.113.1:9")
        .expect("this test needs a route off the machine (a non-loopback address)");
    let ip = s.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback() && !ip.is_unspecified(),
        "no non-loopback address: {ip}"
    );
    ip
}

/// An answer read off a raw connection.
#[derive(Debug)]
struct Raw {
    status: u16,
    head: String,
    body: String,
}

impl Raw {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {:?}", self.status, self.body))
    }
}

/// Writes `request` on `s` and reads the answer to its end.
fn exchange(mut s: TcpStream, request: &[u8]) -> Raw {
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> Raw {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP answer: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head:?}"));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        serve_support::dechunk(rest)
    } else {
        rest.to_string()
    };
    Raw {
        status,
        head: head.to_string(),
        body,
    }
}

/// A request's bytes: `method path` with the token (if any), `extra`
/// headers, and `body`.
fn request(method: &str, path: &str, token: Option<&str>, extra: &str, body: &str) -> Vec<u8> {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    format!(
        "{method} {path} HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n{auth}{extra}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends a request to `addr` from loopback.
fn send(addr: &str, method: &str, path: &str, token: Option<&str>, body: &str) -> Raw {
    exchange(
        TcpStream::connect(addr).unwrap(),
        &request(method, path, token, "", body),
    )
}

fn follower(g: &Group, leader: u64) -> u64 {
    *g.members.keys().find(|id| **id != leader).unwrap()
}

/// Asserts `r` is an error in the API's one shape, of `status`, whose
/// message names none of `hidden`.
fn assert_error_shape(what: &str, r: &Raw, status: u16, hidden: &[&str]) {
    assert_eq!(r.status, status, "{what}: {r:?}");
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{what}: a JSON body: {r:?}"
    );
    let v = r.json();
    let e = &v["error"];
    assert_eq!(e["status"], status, "{what}: {r:?}");
    assert!(
        e["kind"].as_str().is_some_and(|k| !k.is_empty()),
        "{what}: a kind: {r:?}"
    );
    let message = e["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{what}: a message: {r:?}");
    for h in hidden {
        assert!(
            !message.contains(h),
            "{what}: the message names {h}: {message}"
        );
    }
}

fn paused(g: &Group) -> bool {
    let r = g.api("GET", "/api/v1/graphs/chain", None, Duration::from_secs(20));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["summary"]["paused"]
        .as_bool()
        .unwrap_or_else(|| panic!("no paused field: {}", r.body))
}

/// #43 item 8: a front passes the path it received, byte for byte. A path
/// whose `..` segments (plain, or encoded in any case) would resolve to
/// `/api/v1/graphs/chain/pause` is answered as a single engine answers it,
/// by every member's front, and pauses nothing; the real path does.
#[test]
fn a_path_is_passed_on_as_it_came_not_resolved() {
    let dir = tempfile::tempdir().unwrap();
    let defs = chain_defs(dir.path(), "0");
    let g = Group::start(&dir.path().join("g"), &defs, 3, &[]);
    let single = serve_support::start(&["serve"], &defs, &dir.path().join("single"));
    let single_addr = single.url.trim_start_matches("http://").to_string();
    let leader = g.wait_leader(Duration::from_secs(20));
    let f = follower(&g, leader);
    let paths = [
        "/api/v1/graphs/hosts/keys/%2e%2e/%2e%2e/chain/pause",
        "/api/v1/graphs/hosts/keys/%2E%2E/%2e%2E/chain/pause",
        "/api/v1/graphs/hosts/keys/.%2e/%2e./chain/pause",
        "/api/v1/graphs/hosts/keys/../../chain/pause",
        "/api/v1/graphs/hosts/./../chain/pause",
        // A backslash is a slash to a URL parser, not to the engine.
        "/api/v1/graphs/hosts/keys/..\\..\\chain/pause",
    ];
    for (i, path) in paths.iter().enumerate() {
        let want = send(&single_addr, "POST", path, Some(&single.token), "{}");
        assert_ne!(want.status, 200, "#{i}: the single engine paused: {path}");
        for (who, id) in [("a follower", f), ("the leader", leader)] {
            let got = send(&g.members[&id].api, "POST", path, Some(&g.token), "{}");
            assert_eq!(
                (got.status, got.json()["error"]["kind"].clone()),
                (want.status, want.json()["error"]["kind"].clone()),
                "#{i}: {path} through {who}'s front: {got:?}, a single engine: {want:?}"
            );
        }
        assert!(!paused(&g), "#{i}: {path} paused the graph chain");
    }
    // The path they would resolve to does pause it.
    let r = send(
        &g.members[&f].api,
        "POST",
        "/api/v1/graphs/chain/pause",
        Some(&g.token),
        "{}",
    );
    assert_eq!(r.status, 200, "{r:?}");
    assert!(paused(&g));
}

/// The audit entries of `path`, as the API reads them.
fn audited(g: &Group, path: &str) -> Vec<Value> {
    let r = g.api("GET", "/api/v1/audit", None, Duration::from_secs(20));
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["path"] == path)
        .cloned()
        .collect()
}

/// #43 item 9: through any member's front, the audit log records the
/// client's own address (not the front's pooled connection), a client
/// that claims another's address in the front's header is recorded as
/// itself, and the token file's path is told to a browser on the member's
/// machine only, not to a client of a front from elsewhere.
#[test]
fn the_engine_sees_the_real_client_and_believes_no_claimed_one() {
    let dir = tempfile::tempdir().unwrap();
    let defs = chain_defs(dir.path(), "0");
    let g = Group::start(&dir.path().join("g"), &defs, 3, &[]);
    let leader = g.wait_leader(Duration::from_secs(20));
    let f = follower(&g, leader);
    let cases = [
        ("a follower", f, "127.0.0.2", ""),
        ("the leader", leader, "127.0.0.3", ""),
        // A claim in the front's own header, with a proof nobody can make.
        (
            "a follower, claimed",
            f,
            "127.0.0.4",
            "x-weir-client: 10.9.8.7:1234 0000000000000000000000000000000000000000000000000000000000000000\r\n",
        ),
        (
            "the leader, claimed",
            leader,
            "127.0.0.5",
            "x-weir-client: 10.9.8.7:1234 0000000000000000000000000000000000000000000000000000000000000000\r\n",
        ),
    ];
    for (i, (who, id, from, extra)) in cases.into_iter().enumerate() {
        let s = connect_from(from.parse().unwrap(), &g.members[&id].api);
        let me = s.local_addr().unwrap().to_string();
        let path = format!("/api/v1/graphs/chain/unpause?case={i}");
        let r = exchange(s, &request("POST", &path, Some(&g.token), extra, "{}"));
        assert_eq!(r.status, 200, "#{i} {who}: {r:?}");
        let entries = audited(&g, &path);
        assert_eq!(entries.len(), 1, "#{i} {who}: {entries:?}");
        assert_eq!(
            entries[0]["client"], me,
            "#{i} {who}: the audit names the client: {entries:?}"
        );
    }
    // The token file's path: to a client on this machine's loopback, not
    // to one from another address, through either front.
    let outside = outside_ip();
    for (who, id) in [("a follower", f), ("the leader", leader)] {
        let local = send(&g.members[&id].api, "GET", "/ui-session/hint", None, "");
        assert_eq!(local.status, 200, "{who}: {local:?}");
        assert!(
            local.json()["token_file"].is_string(),
            "{who}: a loopback client is told: {local:?}"
        );
        let s = connect_from(outside, &g.members[&id].api);
        let far = exchange(s, &request("GET", "/ui-session/hint", None, "", ""));
        assert_eq!(far.status, 200, "{who}: {far:?}");
        assert!(
            far.json().get("token_file").is_none(),
            "{who}: a client from {outside} is not told the token file's path: {far:?}"
        );
    }
}

/// What a request whose body is sent slowly got: its status and how long
/// the answer took.
struct Streamed {
    status: u16,
    answered_in: Duration,
    body: String,
}

/// Sends `head`, then `body_bytes` of a JSON-ish filler from another
/// thread, while reading the answer.
fn send_streaming(addr: &str, head: &str, body_bytes: usize) -> Streamed {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let t0 = Instant::now();
    s.write_all(head.as_bytes()).unwrap();
    let mut w = s.try_clone().unwrap();
    w.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b' '; 1 << 20];
        let mut sent = 0;
        while sent < body_bytes {
            let n = chunk.len().min(body_bytes - sent);
            if w.write_all(&chunk[..n]).is_err() {
                break;
            }
            sent += n;
        }
    });
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let mut answered_in = None;
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                answered_in.get_or_insert(t0.elapsed());
                raw.extend_from_slice(&buf[..n]);
            }
        }
    }
    drop(s);
    let _ = writer.join();
    if raw.is_empty() {
        return Streamed {
            status: 0,
            answered_in: t0.elapsed(),
            body: String::new(),
        };
    }
    let r = parse(&raw);
    Streamed {
        status: r.status,
        answered_in: answered_in.unwrap_or_default(),
        body: r.body,
    }
}

/// #43 item 11: a front refuses a caller without a valid token before it
/// reads a byte of the body (the 401 arrives while the body is not yet
/// sent), reads no body past the engine's own limit (413 at once), and
/// eight 16 MiB bodies without a token cost a follower no memory and all
/// get 401.
#[test]
fn a_body_is_read_only_once_its_caller_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let defs = chain_defs(dir.path(), "0");
    let g = Group::start(&dir.path().join("g"), &defs, 3, &[]);
    let leader = g.wait_leader(Duration::from_secs(20));
    let f = follower(&g, leader);
    let head = |auth: &str, len: usize| {
        format!(
            "POST /api/v1/graphs/chain/pause HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
        )
    };
    for (who, id) in [("a follower", f), ("the leader", leader)] {
        let addr = &g.members[&id].api;
        let cases = [
            ("no token", head("", 60_000), 401),
            (
                "a wrong token",
                head("Authorization: Bearer not-the-token\r\n", 60_000),
                401,
            ),
            (
                "a body over the engine's limit",
                head(&format!("Authorization: Bearer {}\r\n", g.token), 16 << 20),
                413,
            ),
        ];
        for (i, (what, head, want)) in cases.into_iter().enumerate() {
            // Only the head is sent: the answer must not wait for a body.
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let t0 = Instant::now();
            s.write_all(head.as_bytes()).unwrap();
            let mut raw = Vec::new();
            let mut buf = [0u8; 4096];
            while !String::from_utf8_lossy(&raw).contains("\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                }
            }
            assert!(
                !raw.is_empty(),
                "#{i} {who}, {what}: no answer within {:?} of a head without its body",
                t0.elapsed()
            );
            let status: u16 = String::from_utf8_lossy(&raw)
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            assert_eq!(
                status,
                want,
                "#{i} {who}, {what}: {:?}",
                String::from_utf8_lossy(&raw)
            );
        }
    }
    assert!(!paused(&g));
    // Eight 16 MiB bodies at once, without a token.
    let pid = g.pid(f).unwrap();
    let before = rss_bytes(pid);
    let addr = g.members[&f].api.clone();
    let got: Vec<Streamed> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..8)
            .map(|_| sc.spawn(|| send_streaming(&addr, &head("", 16 << 20), 16 << 20)))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let after = rss_bytes(pid);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r.status, 401, "#{i}: {:?} {}", r.answered_in, r.body);
        assert!(
            r.answered_in < Duration::from_secs(5),
            "#{i}: the 401 took {:?}",
            r.answered_in
        );
    }
    let grown = after.saturating_sub(before);
    assert!(
        grown < 24 << 20,
        "the follower grew by {} MiB ({} → {} MiB)",
        grown >> 20,
        before >> 20,
        after >> 20
    );
}

/// Opens `n` connections to `addr` that each send half a request head and
/// then nothing; waits until each is closed by the other end: the
/// longest wait, or `None` if one was still open after `limit`.
fn slowloris(addr: &str, n: usize, limit: Duration) -> Option<Duration> {
    let t0 = Instant::now();
    let conns: Vec<TcpStream> = (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /healthz HTTP/1.1\r\nHost: weir\r\nX-Slow: ")
                .unwrap();
            s
        })
        .collect();
    let mut longest = Duration::ZERO;
    for mut s in conns {
        let left = limit.saturating_sub(t0.elapsed());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return None
                }
                Err(_) => break,
            }
        }
        longest = longest.max(t0.elapsed());
    }
    Some(longest)
}

/// #43 item 11: twenty connections that send half a head are closed by a
/// front within the header-read timeout (10 s), the leader's and a
/// follower's alike, and the front still serves. The same for their Raft
/// listeners, which anyone who reaches the port can open (the cookie is
/// read from the head): the group still has its leader after.
#[test]
fn a_half_sent_head_does_not_hold_a_front_s_connection() {
    let dir = tempfile::tempdir().unwrap();
    let defs = chain_defs(dir.path(), "0");
    let g = Group::start(&dir.path().join("g"), &defs, 3, &[]);
    let leader = g.wait_leader(Duration::from_secs(20));
    let f = follower(&g, leader);
    let got: Vec<(String, u64, Option<Duration>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = [f, leader]
            .into_iter()
            .flat_map(|id| {
                let m = &g.members[&id];
                [("api", m.api.clone()), ("raft", m.raft.clone())]
                    .map(|(what, addr)| (what, id, addr))
            })
            .map(|(what, id, addr)| {
                sc.spawn(move || {
                    let longest = slowloris(&addr, 20, Duration::from_secs(20));
                    (what.to_string(), id, longest)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (what, id, longest) in got {
        let longest = longest.unwrap_or_else(|| {
            panic!("member {id}'s {what} listener: a half-sent head held its connection for 20 s")
        });
        assert!(
            longest < Duration::from_secs(15),
            "member {id}'s {what} listener: closed after {longest:?}"
        );
    }
    assert_eq!(
        g.wait_leader(Duration::from_secs(20)),
        leader,
        "the group kept its leader"
    );
    for id in [f, leader] {
        let r = send(
            &g.members[&id].api,
            "GET",
            "/api/v1/graphs",
            Some(&g.token),
            "",
        );
        assert_eq!(r.status, 200, "member {id} still serves: {r:?}");
    }
}

/// #43 item 12: the errors a front makes itself have the API's one shape
/// (`{"error": {"status", "kind", "message"}}`), a bad members body and a
/// too-large one, a URI and a head over hyper's limits, and a 502 when
/// the leader dies mid-request, whose message names neither the leader's
/// address nor any engine's.
#[test]
fn a_front_s_errors_have_the_one_shape_and_name_no_internal_address() {
    let dir = tempfile::tempdir().unwrap();
    let defs = chain_defs(dir.path(), "0");
    let mut g = Group::start(&dir.path().join("g"), &defs, 3, &[]);
    let leader = g.wait_leader(Duration::from_secs(20));
    let f = follower(&g, leader);
    let hidden: Vec<String> = g
        .members
        .values()
        .flat_map(|m| [m.api.clone(), m.raft.clone()])
        .chain(["127.0.0.1".to_string()])
        .collect();
    let hidden: Vec<&str> = hidden.iter().map(String::as_str).collect();
    for (who, id) in [("a follower", f), ("the leader", leader)] {
        let addr = &g.members[&id].api;
        let bad = send(
            addr,
            "POST",
            "/api/v1/members",
            Some(&g.token),
            "{\"id\": \"x\"}",
        );
        assert_error_shape(&format!("{who}: a bad members body"), &bad, 400, &hidden);
        let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(100 << 10));
        let large = send(addr, "POST", "/api/v1/members", Some(&g.token), &big);
        assert_error_shape(
            &format!("{who}: a large members body"),
            &large,
            413,
            &hidden,
        );
        let long = format!("/api/v1/graphs/{}", "a".repeat(70_000));
        let r = send(addr, "GET", &long, Some(&g.token), "");
        assert_error_shape(&format!("{who}: a long URI"), &r, 414, &hidden);
        let r = exchange(
            TcpStream::connect(addr).unwrap(),
            &request(
                "GET",
                "/api/v1/graphs",
                Some(&g.token),
                &format!("X-Big: {}\r\n", "a".repeat(200_000)),
                "",
            ),
        );
        assert_error_shape(&format!("{who}: a large head"), &r, 431, &hidden);
    }
    // The leader stops answering with a request on its way, then dies: the
    // follower cannot know whether it took effect (502).
    let r = send(
        &g.members[&f].api,
        "GET",
        "/api/v1/graphs",
        Some(&g.token),
        "",
    );
    assert_eq!(r.status, 200, "{r:?}");
    let pid = g.pid(leader).unwrap() as i32;
    // SAFETY: signals to a child process this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let addr = g.members[&f].api.clone();
    let token = g.token.clone();
    let pending = std::thread::spawn(move || {
        send(
            &addr,
            "POST",
            "/api/v1/graphs/chain/pause",
            Some(&token),
            "{}",
        )
    });
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(pid, libc::SIGKILL) };
    g.kill(leader);
    let r = pending.join().unwrap();
    assert_error_shape("the leader died mid-request", &r, 502, &hidden);
    assert_eq!(r.json()["error"]["kind"], "bad_gateway", "{r:?}");
}

/// #43 item 10: membership changes are audited by the leader's front, in
/// the engine's log, one entry a request wherever it arrived: a viewer's
/// refused add (403, named), an admin's add that fails (409, its cause)
/// and a remove of a member that is not one; secrets in the query left out.
#[test]
fn membership_changes_are_in_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let defs = chain_defs(dir.path(), "0");
    let g = Group::start(&dir.path().join("g"), &defs, 3, &[]);
    let leader = g.wait_leader(Duration::from_secs(20));
    let f = follower(&g, leader);
    let created = g.api(
        "POST",
        "/api/v1/tokens",
        Some(&serde_json::json!({"name": "dash", "role": "viewer"})),
        Duration::from_secs(20),
    );
    assert_eq!(created.status, 200, "{}", created.body);
    let viewer = created.json()["secret"].as_str().unwrap().to_string();

    // Through a follower: passed on, then checked and audited once.
    let path = "/api/v1/members?case=viewer&password=hunter22";
    let r = send(
        &g.members[&f].api,
        "POST",
        path,
        Some(&viewer),
        "{\"id\": 9, \"raft\": \"127.0.0.1:1\"}",
    );
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("admin"), "{r:?}");
    let entries = audited(&g, "/api/v1/members?case=viewer&password=(left out)");
    assert_eq!(
        entries.len(),
        1,
        "one entry, its secret left out: {entries:?}"
    );
    let e = &entries[0];
    assert_eq!(e["who"], "dash", "{e}");
    assert_eq!(e["route"], "/api/v1/members", "{e}");
    assert_eq!(
        (e["status"].clone(), e["outcome"].clone()),
        (403.into(), "refused".into()),
        "{e}"
    );
    assert!(
        e["params"].as_str().unwrap().contains("127.0.0.1:1"),
        "the body is kept: {e}"
    );

    // An admin's add of a member that already is one (with its address:
    // nothing to do, 200) and a remove of no member (409, its cause), each
    // audited with its answer.
    let taken = g.members[&f].raft.clone();
    for (case, path, body, status) in [
        (
            "add",
            "/api/v1/members?case=add".to_string(),
            format!("{{\"id\": {f}, \"raft\": \"{taken}\"}}"),
            200,
        ),
        (
            "remove",
            "/api/v1/members/77/remove?case=remove".to_string(),
            String::new(),
            409,
        ),
    ] {
        let r = send(&g.members[&f].api, "POST", &path, Some(&g.token), &body);
        assert_eq!(r.status, status, "{case}: {r:?}");
        let entries = audited(&g, &path);
        assert_eq!(entries.len(), 1, "{case}: {entries:?}");
        let e = &entries[0];
        assert_eq!(e["status"], status, "{case}: {e}");
        assert_eq!(e["method"], "POST", "{case}: {e}");
        assert_eq!(e["who"], "admin", "{case}: {e}");
        if status >= 400 {
            let said = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(said.contains("no member 77"), "{case}: {said}");
            assert_eq!(e["error"], said.as_str(), "{case}: {e}");
        }
    }
}
