//! Shared setup for the tests of `weir serve` and its clients: a real
//! `weir serve` process on an ephemeral loopback port, the CLI run against
//! it, an HTTP client with the engine's token, and small definitions whose
//! commands are `sh -c` one-liners.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `weir` binary, logging warnings only.
pub fn weir() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.env("RUST_LOG", "warn")
        .env_remove("WEIR_DATA_DIR")
        .env_remove("WEIR_ENGINE")
        .env_remove("WEIR_TOKEN")
        .env_remove("WEIR_CA");
    c
}

/// One direction of a test's forwarding proxy: copies `from` into `into`
/// until `from` ends, then shuts `into`'s writing half. While `cut` is
/// set it holds what it read and reads nothing more, as a network that
/// drops packets does (a silent cut, not a reset).
pub fn pump(
    mut from: std::net::TcpStream,
    mut into: std::net::TcpStream,
    cut: &std::sync::atomic::AtomicBool,
) {
    use std::io::{Read, Write};
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => 0,
            Ok(n) => n,
        };
        while cut.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if n == 0 || into.write_all(&buf[..n]).is_err() {
            let _ = into.shutdown(std::net::Shutdown::Write);
            return;
        }
    }
}

/// The first port [`free_port`] hands out, and the end of its range:
/// below Linux's ephemeral range (32768-60999 by default), so no outgoing
/// connection and no `bind(0)` (a test's proxy, a served engine on port 0)
/// can take a port between the moment it is handed out and the moment a
/// child process binds it.
const PORT_FIRST: u16 = 20_000;
const PORT_END: u16 = 32_768;

/// A loopback port nobody holds, for a child process to listen on: taken
/// in turn from a range outside the ephemeral one, starting at a place set
/// by the process id (tests of one binary share the counter; binaries run
/// one at a time), and checked by binding it.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let span = u32::from(PORT_END - PORT_FIRST);
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7_919) % span,
        Ordering::SeqCst,
        Ordering::SeqCst,
    );
    for _ in 0..span {
        let offset = NEXT.fetch_add(1, Ordering::SeqCst) % span;
        let port = PORT_FIRST + offset as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {PORT_FIRST}..{PORT_END}");
}

/// Polls `f` every 50 ms until it is `Some`, or panics naming `what`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        if t0.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `weir serve` (or `weir run`) process and how to reach it.
pub struct Served {
    pub child: Child,
    pub data: PathBuf,
    pub url: String,
    pub token: String,
    pub stderr: PathBuf,
    /// The CA the CLI trusts (`$WEIR_CA`) when the engine serves TLS: the
    /// `ca.pem` beside its `--tls-cert` (see [`tls_files`]).
    pub ca: Option<PathBuf>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads `DATA/engine.json` once it names a live process `pid`.
pub fn engine_url(data: &Path, pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(data.join("engine.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    (v["pid"].as_u64()? == u64::from(pid)).then(|| v["url"].as_str().unwrap().to_string())
}

/// Starts `weir ARGS...` (serve or run) with `--data DATA --listen
/// 127.0.0.1:0 --durability flush` and waits until its API is up.
pub fn start(args: &[&str], defs: &Path, data: &Path) -> Served {
    start_on(args, defs, data, "127.0.0.1:0")
}

/// As [`start`], listening on `listen` (to restart an engine on the port
/// its clients know).
pub fn start_on(args: &[&str], defs: &Path, data: &Path, listen: &str) -> Served {
    start_env(args, defs, data, listen, &[])
}

/// As [`start_on`], with `env` in the process's environment (an object
/// store's endpoint and keys).
pub fn start_env(
    args: &[&str],
    defs: &Path,
    data: &Path,
    listen: &str,
    env: &[(String, String)],
) -> Served {
    let stderr = data.with_extension(format!("stderr.{}", std::process::id()));
    let _ = std::fs::create_dir_all(data.parent().unwrap());
    let err = std::fs::File::create(&stderr).unwrap();
    let mut cmd = weir();
    cmd.args(&args[..1])
        .arg(defs)
        .args(&args[1..])
        .arg("--data")
        .arg(data)
        .args(["--listen", listen, "--durability", "flush"])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::null())
        .stderr(err);
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let url = wait_for("the engine file", Duration::from_secs(60), || {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "weir {args:?} exited with {status} before serving: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            );
        }
        engine_url(data, pid)
    });
    let token = std::fs::read_to_string(data.join("token"))
        .unwrap()
        .trim()
        .to_string();
    let ca = args
        .iter()
        .position(|a| *a == "--tls-cert")
        .and_then(|i| args.get(i + 1))
        .and_then(|cert| Path::new(cert).parent().map(|d| d.join("ca.pem")))
        .filter(|ca| ca.exists());
    Served {
        child,
        data: data.to_path_buf(),
        url,
        token,
        stderr,
        ca,
    }
}

impl Served {
    /// `weir ARGS --data DATA`.
    pub fn cli(&self, args: &[&str]) -> Output {
        let mut c = weir();
        if let Some(ca) = &self.ca {
            c.env("WEIR_CA", ca);
        }
        c.args(args).arg("--data").arg(&self.data).output().unwrap()
    }

    /// `weir ARGS --data DATA`, which must exit 0; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.cli(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "weir {args:?}: stdout {}\nstderr {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `weir ARGS --json --data DATA`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        let out = self.ok(&a);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("weir {args:?}: {e}: {out}"))
    }

    /// An HTTP client with the engine's token.
    pub fn http(&self) -> Http {
        Http {
            addr: self
                .url
                .trim_start_matches("http://")
                .trim_start_matches("https://")
                .to_string(),
            token: Some(self.token.clone()),
        }
    }

    /// The run's node states by node, from `weir status --json`.
    pub fn node_states(&self, graph: &str, partition: &str) -> Vec<(String, String, u64)> {
        let run = self.json(&["status", graph, partition]);
        run["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["node"].as_str().unwrap().to_string(),
                    n["state"].as_str().unwrap().to_string(),
                    n["rerun"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    /// Waits until the run of `graph`/`partition` is in `state`.
    pub fn wait_run(&self, graph: &str, partition: &str, state: &str) {
        self.wait_run_within(graph, partition, state, Duration::from_secs(60));
    }

    /// Waits at most `timeout` until the run of `graph`/`partition` is in
    /// `state`.
    pub fn wait_run_within(&self, graph: &str, partition: &str, state: &str, timeout: Duration) {
        wait_for(
            &format!("{graph} {partition} to be {state}"),
            timeout,
            || {
                let o = self.cli(&["status", graph, partition, "--json"]);
                let v: Value = serde_json::from_slice(&o.stdout).ok()?;
                (v["state"] == state).then_some(())
            },
        )
    }

    /// Makes a token `name` with `role` (`weir token create`); its secret.
    pub fn token(&self, name: &str, role: &str, expires: Option<&str>) -> String {
        let mut args = vec!["token", "create", "--name", name, "--role", role];
        if let Some(e) = expires {
            args.extend(["--expires", e]);
        }
        let v = self.json(&args);
        v["secret"].as_str().unwrap().to_string()
    }

    /// An HTTP client with `secret` as its token.
    pub fn http_as(&self, secret: &str) -> Http {
        Http {
            token: Some(secret.to_string()),
            ..self.http()
        }
    }

    /// The engine's stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

/// A `weir serve` of one [`chain_def`] graph `name` in a new temporary
/// folder (definitions in `defs/`, data in `data/`).
pub fn served(name: &str) -> (tempfile::TempDir, Served) {
    let dir = tempfile::tempdir().unwrap();
    let defs = dir.path().join("defs");
    write_def(&defs, name, &chain_def(name));
    let s = start(&["serve"], &defs, &dir.path().join("data"));
    (dir, s)
}

/// Fills a route template's parameters with names nothing has.
pub fn concrete(path: &str) -> String {
    path.replace("{graph}", "nosuchgraph")
        .replace("{partition}", "2026-11-01")
        .replace("{node}", "nosuchnode")
        .replace("{key}", "nosuchkey")
        .replace("{target}", "nosuchtarget")
        .replace("{name}", "nosuchtoken")
}

/// A new CA and a certificate it signed for `names` (IP addresses or
/// DNS names): the CA's PEM, the leaf's PEM and its key's PEM.
pub fn ca_and_leaf(names: &[&str]) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    (ca.pem(), leaf.pem(), key.serialize_pem())
}

/// [`ca_and_leaf`] for `names`, written into `dir` as `ca.pem`,
/// `cert.pem` and `key.pem`: their paths.
pub fn tls_files_for(
    dir: &std::path::Path,
    names: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let (ca, cert, key) = ca_and_leaf(names);
    let (ca_p, cert_p, key_p) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_p, ca).unwrap();
    std::fs::write(&cert_p, cert).unwrap();
    std::fs::write(&key_p, key).unwrap();
    (ca_p, cert_p, key_p)
}

/// A CA, and an engine certificate for 127.0.0.1 signed by it: PEM files
/// (ca.pem, cert.pem, key.pem) in `dir`.
pub fn tls_files(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    tls_files_for(dir, &["127.0.0.1"])
}

/// Writes a definition file `name.toml` into `dir`.
pub fn write_def(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// A daily graph a → b → c whose nodes append `<partition> <node>` to
/// `$WEIR_DATA/../../starts.log` and print a line to stdout; `b` fails
/// while the file `fail-b` exists in the definitions folder.
pub fn chain_def(name: &str) -> String {
    let node = |n: &str, ups: &str, extra: &str| {
        format!(
            r#"
[[nodes]]
name = "{n}"
upstreams = [{ups}]
retry = {{ attempts = 1 }}
command = ["sh", "-c", "echo \"$WEIR_PARTITION {n}\" >> starts.log; echo hello from {n} $WEIR_PARTITION; {extra}"]
"#
        )
    };
    format!(
        "name = \"{name}\"\npartitioning = \"daily\"\nmax_active_runs = 2\n[pools]\ndefault = 4\n{}{}{}",
        node("a", "", "true"),
        node("b", "\"a\"", "if [ -e fail-b ]; then echo b is failing >&2; exit 1; fi"),
        node("c", "\"b\"", "true"),
    )
}

/// Lines of `starts.log` in `dir`: (partition, node).
pub fn starts(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("starts.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            l.split_once(' ')
                .map(|(a, b)| (a.to_string(), b.to_string()))
        })
        .collect()
}

/// A minimal HTTP/1.1 client over a plain socket (one request per
/// connection), so tests control every byte: methods, paths, headers and
/// bodies a well-behaved client would never send.
pub struct Http {
    pub addr: String,
    pub token: Option<String>,
}

/// One Server-Sent Event.
#[derive(Debug, Default, Clone)]
pub struct Sse {
    pub id: String,
    pub event: String,
    pub data: String,
}

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: String,
    pub body: String,
}

impl Answer {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

impl Http {
    /// Sends one request; `body` with a JSON content type when given.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        extra: &[(&str, &str)],
    ) -> Answer {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        for (k, v) in extra {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or(b"");
        if !body.is_empty()
            && !extra
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req.push_str("Content-Type: application/json\r\n");
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        s.write_all(req.as_bytes()).unwrap();
        s.write_all(body).unwrap();
        let mut raw = Vec::new();
        let _ = s.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no HTTP answer to {method} {path}: {text:?}"));
        let body = if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        Answer {
            status,
            headers: head.to_string(),
            body,
        }
    }

    /// Reads Server-Sent Events from `path` until `want` events (not
    /// comments) arrived or `timeout` passed.
    pub fn events(
        &self,
        path: &str,
        last_id: Option<&str>,
        want: usize,
        timeout: Duration,
    ) -> Vec<Sse> {
        use std::io::{BufRead, BufReader, Write};
        let mut s = std::net::TcpStream::connect(&self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n",
            self.addr
        );
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if let Some(id) = last_id {
            req.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut r = BufReader::new(s);
        let t0 = std::time::Instant::now();
        let mut out = Vec::new();
        let mut cur = Sse::default();
        let mut line = String::new();
        while out.len() < want && t0.elapsed() < timeout {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => continue,
            }
            // Chunked framing: size lines are hex only; skip them.
            let l = line.trim_end_matches(['\r', '\n']);
            if let Some(v) = l.strip_prefix("id: ").or_else(|| l.strip_prefix("id:")) {
                cur.id = v.to_string();
            } else if let Some(v) = l
                .strip_prefix("event: ")
                .or_else(|| l.strip_prefix("event:"))
            {
                cur.event = v.to_string();
            } else if let Some(v) = l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")) {
                cur.data.push_str(v);
            } else if l.is_empty() && !cur.event.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        out
    }

    /// GET `path`.
    pub fn get(&self, path: &str) -> Answer {
        self.send("GET", path, None, &[])
    }

    /// POST a JSON value to `path`.
    pub fn post(&self, path: &str, body: &Value) -> Answer {
        self.send("POST", path, Some(body.to_string().as_bytes()), &[])
    }
}

/// The body of a chunked HTTP/1.1 answer.
pub fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
