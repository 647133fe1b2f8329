//! Shared setup for the replicated engine's tests: a group of real
//! `weir serve --raft-id N` processes on loopback ports, the Raft traffic
//! between each pair through a proxy the test can silence (a partition
//! without root), workers that join every member, and the API asked of
//! whichever member answers.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub use super::serve_support::free_port;
use super::serve_support::{dechunk, pump, weir};

/// The election timeout the tests run with (ms): above the product's
/// default (400), for a loaded test machine.
pub const ELECTION_MS: u64 = 600;

/// A forwarding proxy from a loopback port to `to`, which a test silences:
/// bytes already read are held and nothing more is read, as a network
/// that drops packets does.
pub struct Link {
    pub addr: String,
    cut: Arc<AtomicBool>,
}

impl Link {
    pub fn start(to: &str) -> Link {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let to = to.to_string();
        let c = cut.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let c = c.clone();
                let to = to.clone();
                std::thread::spawn(move || {
                    // A cut link takes connections and answers none.
                    while c.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    let Ok(upstream) = TcpStream::connect(&to) else {
                        return;
                    };
                    let _ = upstream.set_nodelay(true);
                    let _ = client.set_nodelay(true);
                    for (from, into) in [
                        (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                        (upstream, client),
                    ] {
                        let c = c.clone();
                        std::thread::spawn(move || pump(from, into, &c));
                    }
                });
            }
        });
        Link { addr, cut }
    }

    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
    }

    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// One member's process and addresses.
pub struct Member {
    pub id: u64,
    pub data: PathBuf,
    pub api: String,
    pub raft: String,
    pub cluster: String,
    pub child: Option<Child>,
    pub starts: u32,
}

/// A replicated engine of real processes.
pub struct Group {
    pub dir: PathBuf,
    pub defs: PathBuf,
    pub cookie: PathBuf,
    pub token_file: PathBuf,
    pub token: String,
    pub members: BTreeMap<u64, Member>,
    /// The link member `from` reaches member `to` through, by (from, to).
    pub links: BTreeMap<(u64, u64), Link>,
    /// Flags every member gets.
    pub extra: Vec<String>,
    /// Environment every member gets.
    pub env: Vec<(String, String)>,
    /// Environment one member gets on its next starts, by id.
    pub member_env: BTreeMap<u64, Vec<(String, String)>>,
    /// The host `--raft-peers` names members by (`127.0.0.1`, or a name
    /// such as `localhost`).
    pub host: String,
    /// The workers started through the group: killed with it, so that a
    /// test that panics leaves none running (they retry the members for
    /// ever).
    pub worker_pids: std::sync::Mutex<Vec<u32>>,
}

impl Drop for Group {
    fn drop(&mut self) {
        let cookie = self.cookie.display().to_string();
        for pid in self
            .worker_pids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            // Only while the pid is still this group's worker (its command
            // line names the group's cookie file): a worker its test waited
            // for may have left its pid to another process.
            let ours = std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&cookie));
            if ours {
                // SAFETY: a signal to a worker process this group started.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        }
        for m in self.members.values_mut() {
            if let Some(mut c) = m.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// An HTTP answer: status and body.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// One HTTP/1.1 request to `addr`; an error when no answer came (one
/// starting `connect:` when the request was never sent).
pub fn request(
    addr: &str,
    token: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<Reply, String> {
    let sock: std::net::SocketAddr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    // "connect:" marks a request that was never sent.
    let mut s = TcpStream::connect_timeout(&sock, timeout).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status: {head:?}"))?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    Ok(Reply { status, body })
}

/// A graph of three chained nodes whose commands take `sleep_s` seconds
/// and append `partition node` to `DIR/ran.log` (to count executions).
pub fn chain_defs(dir: &Path, sleep_s: &str) -> PathBuf {
    let defs = dir.join("defs");
    std::fs::create_dir_all(&defs).unwrap();
    let log = dir.join("ran.log");
    // A leader killed while a node runs costs that attempt (its hand-out
    // was durable), and these tests kill leaders several times in a row:
    // the budget is the tests' kills, not weir's default of 3.
    let cmd = |node: &str| {
        format!(
            "command = [\"sh\", \"-c\", \"sleep {sleep_s}; echo '{{partition}} {node}' >> {}\"]\n\
             retry = {{ attempts = 12, initial = \"100ms\", max = \"1s\" }}",
            log.display()
        )
    };
    std::fs::write(
        defs.join("chain.toml"),
        format!(
            "name = \"chain\"\npartitioning = \"daily\"\nmax_active_runs = 8\n[pools]\ndefault = 8\n\
             [[nodes]]\nname = \"a\"\n{}\n\
             [[nodes]]\nname = \"b\"\nupstreams = [\"a\"]\n{}\n\
             [[nodes]]\nname = \"c\"\nupstreams = [\"b\"]\n{}\n",
            cmd("a"),
            cmd("b"),
            cmd("c")
        ),
    )
    .unwrap();
    defs
}

/// `partition node` lines of `DIR/ran.log`, counted.
pub fn executions(dir: &Path) -> BTreeMap<String, u32> {
    let text = std::fs::read_to_string(dir.join("ran.log")).unwrap_or_default();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        *out.entry(line.trim().to_string()).or_insert(0) += 1;
    }
    out
}

impl Group {
    /// Starts `n` members on `defs` (each with a cluster port for
    /// workers), plus `extra` flags, and waits for a leader.
    pub fn start(dir: &Path, defs: &Path, n: u64, extra: &[&str]) -> Group {
        Group::start_with(dir, defs, n, extra, &[])
    }

    pub fn start_with(
        dir: &Path,
        defs: &Path,
        n: u64,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Group {
        Group::start_on(dir, defs, n, extra, env, "127.0.0.1")
    }

    /// As [`Group::start_with`], with `--raft-peers` naming each member by
    /// `host` (its links listen on 127.0.0.1).
    pub fn start_on(
        dir: &Path,
        defs: &Path,
        n: u64,
        extra: &[&str],
        env: &[(&str, &str)],
        host: &str,
    ) -> Group {
        std::fs::create_dir_all(dir).unwrap();
        let cookie = dir.join("cookie");
        std::fs::write(&cookie, "the-members-cookie-0123456789\n").unwrap();
        let token = "the-shared-admin-token-0123456789abcdef".to_string();
        let token_file = dir.join("token");
        std::fs::write(&token_file, format!("{token}\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            for f in [&cookie, &token_file] {
                std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
        let mut members = BTreeMap::new();
        for id in 1..=n {
            members.insert(
                id,
                Member {
                    id,
                    data: dir.join(format!("m{id}")),
                    api: format!("127.0.0.1:{}", free_port()),
                    raft: format!("127.0.0.1:{}", free_port()),
                    cluster: format!("127.0.0.1:{}", free_port()),
                    child: None,
                    starts: 0,
                },
            );
        }
        let mut links = BTreeMap::new();
        for from in 1..=n {
            for to in 1..=n {
                if from != to {
                    links.insert((from, to), Link::start(&members[&to].raft));
                }
            }
        }
        let mut g = Group {
            dir: dir.to_path_buf(),
            defs: defs.to_path_buf(),
            cookie,
            token_file,
            token,
            members,
            links,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            member_env: BTreeMap::new(),
            host: host.to_string(),
            worker_pids: std::sync::Mutex::new(Vec::new()),
        };
        for id in 1..=n {
            g.spawn(id);
        }
        g.wait_leader(Duration::from_secs(20));
        g
    }

    /// Makes member `id` (new: ports, links to and from every member) and
    /// starts it; it joins the group once `weir members add` adds it.
    pub fn add(&mut self, id: u64) {
        self.members.insert(
            id,
            Member {
                id,
                data: self.dir.join(format!("m{id}")),
                api: format!("127.0.0.1:{}", free_port()),
                raft: format!("127.0.0.1:{}", free_port()),
                cluster: format!("127.0.0.1:{}", free_port()),
                child: None,
                starts: 0,
            },
        );
        let ids: Vec<u64> = self.members.keys().copied().collect();
        for other in ids {
            if other != id {
                let to_new = Link::start(&self.members[&id].raft);
                let from_new = Link::start(&self.members[&other].raft);
                self.links.insert((other, id), to_new);
                self.links.insert((id, other), from_new);
            }
        }
        self.spawn(id);
    }

    /// `--raft-peers` as member `id` sees the group: itself at its own
    /// address, the others through their links.
    fn peers_for(&self, id: u64) -> String {
        self.members
            .keys()
            .map(|&other| {
                let addr = if other == id {
                    self.members[&id].raft.clone()
                } else {
                    self.links[&(id, other)].addr.clone()
                };
                let addr = match addr.strip_prefix("127.0.0.1:") {
                    Some(port) => format!("{}:{port}", self.host),
                    None => addr,
                };
                format!("{other}={addr}")
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts (or restarts) member `id`.
    pub fn spawn(&mut self, id: u64) {
        let peers = self.peers_for(id);
        let m = self.members.get_mut(&id).unwrap();
        assert!(m.child.is_none(), "member {id} runs already");
        m.starts += 1;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(format!("m{id}.log")))
            .unwrap();
        let mut cmd = weir();
        cmd.env("RUST_LOG", "info,openraft=warn")
            .arg("serve")
            .arg(&self.defs)
            .arg("--data")
            .arg(&m.data)
            .args(["--listen", &m.api])
            .args(["--raft-id", &id.to_string()])
            .args(["--raft-peers", &peers])
            .args(["--election-timeout-ms", &ELECTION_MS.to_string()])
            .arg("--cookie-file")
            .arg(&self.cookie)
            .arg("--token-file")
            .arg(&self.token_file)
            .args(["--cluster", &m.cluster])
            .args(["--grace-secs", "2"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in self
            .env
            .iter()
            .chain(self.member_env.get(&id).into_iter().flatten())
        {
            cmd.env(k, v);
        }
        m.child = Some(cmd.spawn().unwrap());
        let api = m.api.clone();
        let token = self.token.clone();
        self.wait(
            &format!("member {id}'s API"),
            Duration::from_secs(20),
            || {
                request(
                    &api,
                    &token,
                    "GET",
                    "/healthz",
                    None,
                    Duration::from_secs(1),
                )
                .ok()
                .filter(|r| r.status == 200)
            },
        );
    }

    /// Polls `f` every 50 ms until it is `Some`, or panics naming `what`
    /// with the members' last log lines.
    pub fn wait<T>(&self, what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
        let t0 = Instant::now();
        loop {
            if let Some(v) = f() {
                return v;
            }
            if t0.elapsed() > timeout {
                panic!(
                    "timed out after {timeout:?} waiting for {what}\n{}",
                    self.logs_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The process id of member `id`, if it runs.
    pub fn pid(&self, id: u64) -> Option<u32> {
        self.members[&id].child.as_ref().map(|c| c.id())
    }

    /// Waits up to `timeout` for member `id` to exit by itself, and gives
    /// its exit code (`None` if it still runs).
    pub fn wait_exit(&mut self, id: u64, timeout: Duration) -> Option<Option<i32>> {
        let t0 = Instant::now();
        loop {
            let m = self.members.get_mut(&id).unwrap();
            let c = m.child.as_mut()?;
            if let Ok(Some(status)) = c.try_wait() {
                m.child = None;
                return Some(status.code());
            }
            if t0.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// kill -9 of member `id`.
    pub fn kill(&mut self, id: u64) {
        let m = self.members.get_mut(&id).unwrap();
        if let Some(mut c) = m.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM to member `id`, and its exit code.
    pub fn stop(&mut self, id: u64) -> Option<i32> {
        let m = self.members.get_mut(&id).unwrap();
        let mut c = m.child.take()?;
        // SAFETY: a signal to a child process we started.
        unsafe {
            libc::kill(c.id() as i32, libc::SIGTERM);
        }
        let t0 = Instant::now();
        loop {
            if let Ok(Some(s)) = c.try_wait() {
                return s.code();
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let _ = c.kill();
                let _ = c.wait();
                panic!("member {id} did not stop within 20 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Cuts member `id` from every other (both ways).
    pub fn partition(&self, id: u64) {
        for ((from, to), link) in &self.links {
            if *from == id || *to == id {
                link.cut();
            }
        }
    }

    /// Heals every link.
    pub fn heal(&self) {
        for link in self.links.values() {
            link.heal();
        }
    }

    pub fn running(&self) -> Vec<u64> {
        self.members
            .values()
            .filter(|m| m.child.is_some())
            .map(|m| m.id)
            .collect()
    }

    /// Member `id`'s own view of the group (`GET /api/v1/members`, not
    /// passed on: asked with the passed header).
    pub fn view(&self, id: u64) -> Option<Value> {
        let m = &self.members[&id];
        m.child.as_ref()?;
        let sock: std::net::SocketAddr = m.api.parse().ok()?;
        let mut s = TcpStream::connect_timeout(&sock, Duration::from_millis(500)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        let req = format!(
            "GET /api/v1/members HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAuthorization: Bearer {}\r\nx-weir-passed: 1\r\n\r\n",
            m.api, self.token
        );
        s.write_all(req.as_bytes()).ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).ok()?;
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        let body = if head.to_ascii_lowercase().contains("chunked") {
            dechunk(body)
        } else {
            body.to_string()
        };
        serde_json::from_str(&body).ok()
    }

    /// The member that says it leads and runs the engine (its state is
    /// leader), if one does.
    pub fn leader(&self) -> Option<u64> {
        for id in self.running() {
            if let Some(v) = self.view(id) {
                if v["state"] == "leader" && v["leader"].as_u64() == Some(id) {
                    return Some(id);
                }
            }
        }
        None
    }

    /// Waits for a leader among the running members whose engine answers.
    pub fn wait_leader(&self, timeout: Duration) -> u64 {
        self.wait("a leader whose engine answers", timeout, || {
            let id = self.leader()?;
            let r = request(
                &self.members[&id].api,
                &self.token,
                "GET",
                "/api/v1/graphs",
                None,
                Duration::from_secs(2),
            )
            .ok()?;
            (r.status == 200).then_some(id)
        })
    }

    /// Sends a request to the running members in turn until one answers
    /// with anything but 503 (or `timeout` passes). A read answered 502 (an
    /// engine that stopped under it as its member lost the lead) is asked
    /// again too: it changed nothing.
    pub fn api(&self, method: &str, path: &str, body: Option<&Value>, timeout: Duration) -> Reply {
        let t0 = Instant::now();
        loop {
            for id in self.running() {
                if let Ok(r) = request(
                    &self.members[&id].api,
                    &self.token,
                    method,
                    path,
                    body,
                    Duration::from_secs(10),
                ) {
                    let again = r.status == 503 || (r.status == 502 && method == "GET");
                    if !again {
                        return r;
                    }
                }
            }
            if t0.elapsed() > timeout {
                panic!("no member answered {method} {path} within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs the CLI against member `id`'s data directory.
    pub fn cli(&self, id: u64, args: &[&str]) -> Output {
        weir()
            .args(args)
            .arg("--data")
            .arg(&self.members[&id].data)
            .arg("--token-file")
            .arg(&self.token_file)
            .output()
            .unwrap()
    }

    /// The chain's runs, by partition: state.
    pub fn runs(&self) -> BTreeMap<String, String> {
        self.runs_of("chain")
    }

    /// The runs of `graph`, by partition: state.
    pub fn runs_of(&self, graph: &str) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                None => format!("/api/v1/runs?graph={graph}&limit=1000"),
                Some(c) => format!("/api/v1/runs?graph={graph}&limit=1000&cursor={c}"),
            };
            let r = self.api("GET", &path, None, Duration::from_secs(30));
            assert_eq!(r.status, 200, "runs: {}", r.body);
            let v = r.json();
            for row in v["runs"].as_array().cloned().unwrap_or_default() {
                let p = row["partition"].as_str().unwrap_or_default().to_string();
                let s = row["state"].as_str().unwrap_or_default().to_string();
                assert!(
                    out.insert(p.clone(), s).is_none(),
                    "partition {p} has two runs"
                );
            }
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return out,
            }
        }
    }

    /// Starts a backfill of the `chain` graph over `parts` (their first
    /// to their last) through whichever member answers, and asserts the
    /// engine took it.
    pub fn backfill_chain(&self, parts: &[String]) {
        self.backfill("chain", parts)
    }

    /// Starts a backfill of `graph` over `parts` (their first to their
    /// last) and asserts the engine took it.
    pub fn backfill(&self, graph: &str, parts: &[String]) {
        let r = self.api(
            "POST",
            &format!("/api/v1/graphs/{graph}/backfills"),
            Some(&json!({"from": parts[0], "to": parts[parts.len() - 1]})),
            Duration::from_secs(20),
        );
        assert_eq!(r.status, 202, "backfill: {}", r.body);
    }

    /// Waits until every partition of `parts` has a complete run.
    pub fn wait_complete(&self, parts: &[String], timeout: Duration) -> BTreeMap<String, String> {
        self.wait_complete_of("chain", parts, timeout)
    }

    /// Waits until every partition of `parts` has a complete run of
    /// `graph`.
    pub fn wait_complete_of(
        &self,
        graph: &str,
        parts: &[String],
        timeout: Duration,
    ) -> BTreeMap<String, String> {
        let t0 = Instant::now();
        loop {
            let runs = self.runs_of(graph);
            let done = parts
                .iter()
                .all(|p| runs.get(p).map(String::as_str) == Some("complete"));
            if done {
                return runs;
            }
            // A failed run never completes: say why at once, with its
            // nodes (their states, attempts and errors).
            if let Some(p) = parts
                .iter()
                .find(|p| runs.get(*p).map(String::as_str) == Some("failed"))
            {
                let r = self.api(
                    "GET",
                    &format!("/api/v1/graphs/{graph}/runs/{p}"),
                    None,
                    Duration::from_secs(20),
                );
                panic!(
                    "run {p} of {graph} failed: {}\n{}",
                    r.body,
                    self.logs_tail()
                );
            }
            if t0.elapsed() > timeout {
                let missing: Vec<_> = parts
                    .iter()
                    .filter(|p| runs.get(*p).map(String::as_str) != Some("complete"))
                    .map(|p| format!("{p}={:?}", runs.get(p)))
                    .collect();
                panic!(
                    "runs not complete within {timeout:?}: {missing:?}\n{}",
                    self.logs_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The timestamps (RFC 3339, UTC: they compare as text) of member
    /// `id`'s log lines that hold every one of `needles`, in order.
    pub fn log_times(&self, id: u64, needles: &[&str]) -> Vec<String> {
        std::fs::read_to_string(self.dir.join(format!("m{id}.log")))
            .unwrap_or_default()
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|t| t.ends_with('Z') && t.contains('T'))
            .map(str::to_string)
            .collect()
    }

    /// The last lines of every member's log, for a failure's message.
    pub fn logs_tail(&self) -> String {
        let mut out = String::new();
        for id in self.members.keys() {
            let text =
                std::fs::read_to_string(self.dir.join(format!("m{id}.log"))).unwrap_or_default();
            // Refused API requests (the client's 503s while no engine
            // answers) would fill the tail: counted, not shown.
            let refused = text
                .lines()
                .filter(|l| l.contains("api request failed status=503"))
                .count();
            let lines: Vec<&str> = text
                .lines()
                .filter(|l| !l.contains("api request failed status=503"))
                .collect();
            out.push_str(&format!(
                "--- member {id} ({refused} requests refused with 503 not shown)\n"
            ));
            for l in &lines[lines.len().saturating_sub(40)..] {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    /// `--join` of a worker: every member's cluster address.
    pub fn join(&self) -> String {
        self.members
            .values()
            .map(|m| m.cluster.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts a worker process that joins the group.
    pub fn worker(&self, name: &str, slots: u32) -> Child {
        self.worker_with(name, slots, &[], &[])
    }

    /// Starts a worker process that joins the group, with `extra` flags
    /// and `env`.
    pub fn worker_with(
        &self,
        name: &str,
        slots: u32,
        extra: &[String],
        env: &[(String, String)],
    ) -> Child {
        let log = std::fs::File::create(self.dir.join(format!("worker-{name}.log"))).unwrap();
        let child = weir()
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .args(["worker", "--join", &self.join(), "--name", name])
            .arg("--cookie-file")
            .arg(&self.cookie)
            .args(["--pool", &format!("default={slots}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.worker_pids
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(child.id());
        child
    }
}

/// `n` daily partitions from 2020-01-01 on, as the API names them.
pub fn days(n: usize) -> Vec<String> {
    let start = chrono_like_days();
    start.into_iter().take(n).collect()
}

fn chrono_like_days() -> Vec<String> {
    // Enough days for any test (about eleven years), without a date crate.
    let mut out = Vec::new();
    for year in 2020u32..2031 {
        for month in 1..=12u32 {
            let leap =
                year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
            let days = match month {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            for day in 1..=days {
                out.push(format!("{year}-{month:02}-{day:02}"));
            }
        }
    }
    out
}
