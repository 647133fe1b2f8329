//! Shared setup for the cluster tests: a `weir serve --cluster` on
//! ephemeral loopback ports (see `serve_support`), `weir worker` processes
//! that join it, a cookie file, and definitions whose commands say which
//! worker ran them.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub use super::serve_support::free_port;
use super::serve_support::{self, pump, wait_for, weir, Served};

/// An engine with a cluster node, and what workers need to join it.
pub struct Cluster {
    pub served: Served,
    pub join: String,
    pub cookie: PathBuf,
    pub defs: PathBuf,
    pub dir: PathBuf,
}

/// Writes the cookie file `dir/cookie`.
pub fn cookie(dir: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(format!("cookie-{}", text.len()));
    std::fs::write(&p, format!("{text}\n")).unwrap();
    p
}

/// Starts `weir serve DEFS --cluster 127.0.0.1:PORT --cookie-file ...
/// --no-local-workers --lease-ms LEASE` plus `extra` flags.
pub fn start(dir: &Path, defs: &Path, port: u16, lease_ms: u64, extra: &[&str]) -> Cluster {
    start_on(dir, defs, port, lease_ms, extra, "127.0.0.1:0")
}

/// As [`start`], with the API on `listen`.
pub fn start_on(
    dir: &Path,
    defs: &Path,
    port: u16,
    lease_ms: u64,
    extra: &[&str],
    listen: &str,
) -> Cluster {
    let cookie = cookie(dir, "the-cluster-cookie");
    let join = format!("127.0.0.1:{port}");
    let lease = lease_ms.to_string();
    let mut args = vec![
        "serve",
        "--cluster",
        &join,
        "--cookie-file",
        cookie.to_str().unwrap(),
        "--no-local-workers",
        "--lease-ms",
        &lease,
    ];
    args.extend_from_slice(extra);
    let served = serve_support::start_on(&args, defs, &dir.join("data"), listen);
    Cluster {
        served,
        join,
        cookie,
        defs: defs.to_path_buf(),
        dir: dir.to_path_buf(),
    }
}

/// A `weir worker` process.
pub struct WorkerProc {
    pub child: Child,
    pub name: String,
    pub stderr: PathBuf,
}

impl Drop for WorkerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl WorkerProc {
    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Sends it `signal`.
    pub fn signal(&self, signal: i32) {
        // SAFETY: a signal to a child process we started.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }

    /// Waits for it to exit; its code.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        wait_for(&format!("worker {} to exit", self.name), timeout, || {
            self.child.try_wait().ok().flatten()
        })
        .code()
    }
}

impl Cluster {
    /// Starts `weir worker --join ... --name NAME --pool P=S ...` plus
    /// `extra` flags, with its own cookie file.
    pub fn worker_with(
        &self,
        name: &str,
        pools: &[&str],
        cookie: &Path,
        extra: &[&str],
    ) -> WorkerProc {
        let stderr = self.dir.join(format!("worker-{name}.stderr"));
        let err = std::fs::File::create(&stderr).unwrap();
        let mut cmd = weir();
        cmd.env("RUST_LOG", "info")
            .args(["worker", "--join", &self.join, "--name", name])
            .arg("--cookie-file")
            .arg(cookie);
        for p in pools {
            cmd.args(["--pool", p]);
        }
        cmd.args(extra).stdout(Stdio::null()).stderr(err);
        WorkerProc {
            child: cmd.spawn().unwrap(),
            name: name.to_string(),
            stderr,
        }
    }

    /// Starts a worker with the cluster's cookie.
    pub fn worker(&self, name: &str, pools: &[&str]) -> WorkerProc {
        self.worker_with(name, pools, &self.cookie, &[])
    }

    /// Starts a worker with the cluster's cookie that joins through `join`
    /// (a [`SilentLink`] in front of the engine) instead of the engine's
    /// own address.
    pub fn worker_through(&self, name: &str, pools: &[&str], join: &str) -> WorkerProc {
        let stderr = self.dir.join(format!("worker-{name}.stderr"));
        let err = std::fs::File::create(&stderr).unwrap();
        let mut cmd = weir();
        cmd.env("RUST_LOG", "info")
            .args(["worker", "--join", join, "--name", name])
            .arg("--cookie-file")
            .arg(&self.cookie);
        for p in pools {
            cmd.args(["--pool", p]);
        }
        cmd.stdout(Stdio::null()).stderr(err);
        WorkerProc {
            child: cmd.spawn().unwrap(),
            name: name.to_string(),
            stderr,
        }
    }

    /// `weir workers --json`.
    pub fn workers(&self) -> Vec<Value> {
        self.served.json(&["workers"]).as_array().unwrap().clone()
    }

    /// The worker named `name` as `weir workers` shows it.
    pub fn worker_view(&self, name: &str) -> Option<Value> {
        self.workers().into_iter().find(|w| w["name"] == name)
    }

    /// Waits until the worker named `name` is in `state`.
    pub fn wait_worker(&self, name: &str, state: &str, timeout: Duration) -> Value {
        wait_for(&format!("worker {name} to be {state}"), timeout, || {
            self.worker_view(name).filter(|w| w["state"] == state)
        })
    }

    /// Waits until every named worker has joined.
    pub fn wait_joined(&self, names: &[&str]) {
        for n in names {
            self.wait_worker(n, "joined", Duration::from_secs(60));
        }
    }
}

/// A graph `g`, unpartitioned: `first` → `width` nodes `m0..` → `last`,
/// each appending `NODE WEIR_WORKER WEIR_ATTEMPT` to `ran.log` in the
/// definitions folder when it starts and `NODE` to `done.log` when it is
/// done, after sleeping `sleep` seconds (a shell `sleep` argument); its
/// output is the worker's id.
pub fn fan_def(name: &str, width: usize, sleep: &str, pool_slots: u32) -> String {
    let node = |n: &str, ups: &str| {
        format!(
            r#"
[[nodes]]
name = "{n}"
upstreams = [{ups}]
retry = {{ attempts = 5, initial = "100ms" }}
command = ["sh", "-c", "echo \"{n} $WEIR_WORKER $WEIR_ATTEMPT\" >> ran.log; echo ran on $WEIR_WORKER; sleep {sleep}; printf %s \"$WEIR_WORKER\" > \"$WEIR_OUTPUT\"; echo {n} >> done.log"]
"#
        )
    };
    let mut s = format!("name = \"{name}\"\n[pools]\ndefault = {pool_slots}\n");
    s.push_str(&node("first", ""));
    for i in 0..width {
        s.push_str(&node(&format!("m{i}"), "\"first\""));
    }
    let ups: Vec<String> = (0..width).map(|i| format!("\"m{i}\"")).collect();
    s.push_str(&node("last", &ups.join(", ")));
    s
}

/// Lines of `file` in `dir`, split on spaces.
pub fn log_lines(dir: &Path, file: &str) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// The run's nodes from `weir status --json`: (node, state, rerun, output).
pub fn nodes(served: &Served, graph: &str, partition: &str) -> Vec<(String, String, u64, String)> {
    let run = served.json(&["status", graph, partition]);
    run["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["node"].as_str().unwrap().to_string(),
                n["state"].as_str().unwrap().to_string(),
                n["rerun"].as_u64().unwrap(),
                n["output_text"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The engine's event stream, read on a thread from now until dropped.
pub struct EventLog {
    events: std::sync::Arc<std::sync::Mutex<Vec<(String, Value)>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Starts reading `served`'s events (kind, event JSON).
pub fn collect_events(served: &Served) -> EventLog {
    use std::io::{BufRead, BufReader, Write};
    let http = served.http();
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut s = std::net::TcpStream::connect(&http.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let req = format!(
        "GET /api/v1/events HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {}\r\n\r\n",
        http.addr,
        http.token.clone().unwrap_or_default()
    );
    s.write_all(req.as_bytes()).unwrap();
    let (ev, st) = (events.clone(), stop.clone());
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(s);
        let mut line = String::new();
        let mut ready_tx = Some(ready_tx);
        while !st.load(std::sync::atomic::Ordering::SeqCst) {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => continue,
            }
            // The response head is in: the subscription is live.
            if line == "\r\n" {
                if let Some(tx) = ready_tx.take() {
                    let _ = tx.send(());
                }
            }
            if let Some(d) = line.trim_end().strip_prefix("data:") {
                if let Ok(v) = serde_json::from_str::<Value>(d.trim()) {
                    let kind = v["kind"].as_str().unwrap_or_default().to_string();
                    ev.lock().unwrap().push((kind, v));
                }
            }
        }
    });
    let _ = ready.recv_timeout(Duration::from_secs(10));
    EventLog { events, stop }
}

impl EventLog {
    /// Keys of `completed` events, with how many times each came.
    pub fn completions(&self) -> std::collections::BTreeMap<String, usize> {
        let mut out = std::collections::BTreeMap::new();
        for (kind, e) in self.events.lock().unwrap().iter() {
            if kind == "completed" {
                let key = e["key"].as_str().unwrap_or_default().to_string();
                *out.entry(key).or_default() += 1;
            }
        }
        out
    }

    /// Events of `kind`.
    pub fn of(&self, kind: &str) -> Vec<Value> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == kind)
            .map(|(_, e)| e.clone())
            .collect()
    }
}

/// A link between workers and the engine that can go silent: cut, no
/// packet passes either way and nothing is closed (a network that drops
/// packets, no reset). As root with `iptables`, the cut is real: DROP rules
/// on the loopback for the engine's cluster port, both ways, removed at
/// heal (and on drop), so the kernel's retransmission backoff is what it
/// would be on a real network. Otherwise a forwarding proxy that stops
/// passing bytes stands in (it holds what it read, so it cannot show the
/// kernel's backoff).
pub struct SilentLink {
    /// Where workers join.
    pub addr: String,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The engine's port, when the cut is made with iptables.
    dropped_port: Option<u16>,
    /// Connections the proxy took.
    attempts: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// A member address that is no engine: it takes every connection, then
/// closes it at once ([`Decoy::closing`]) or holds it saying nothing
/// ([`Decoy::silent`]): a proxy in front of a stopped engine, a port
/// another program holds.
pub struct Decoy {
    pub addr: String,
    attempts: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Decoy {
    pub fn closing() -> Decoy {
        Decoy::start(false)
    }

    pub fn silent() -> Decoy {
        Decoy::start(true)
    }

    fn start(hold: bool) -> Decoy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let a = attempts.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for client in listener.incoming().flatten() {
                a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if hold {
                    held.push(client);
                }
            }
        });
        Decoy { addr, attempts }
    }

    /// Connections it took.
    pub fn attempts(&self) -> u64 {
        self.attempts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The iptables rules of a cut of `port` on the loopback, both ways.
fn drop_rules(port: u16) -> [Vec<String>; 2] {
    let p = port.to_string();
    [
        [
            "INPUT", "-i", "lo", "-p", "tcp", "--dport", &p, "-j", "DROP",
        ]
        .map(str::to_string)
        .to_vec(),
        [
            "INPUT", "-i", "lo", "-p", "tcp", "--sport", &p, "-j", "DROP",
        ]
        .map(str::to_string)
        .to_vec(),
    ]
}

fn iptables(op: &str, rule: &[String]) -> bool {
    Command::new("iptables")
        .arg(op)
        .args(rule)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl SilentLink {
    /// A link to the engine's cluster address `to`: iptables on it when
    /// this test runs as root and can list rules, else a proxy.
    pub fn start(to: &str) -> SilentLink {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let can = root
            && Command::new("iptables")
                .args(["-L", "INPUT", "-n"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
        if can {
            let port: u16 = to.rsplit_once(':').unwrap().1.parse().unwrap();
            eprintln!("silent link: iptables DROP on lo port {port}");
            return SilentLink {
                addr: to.to_string(),
                cut: Default::default(),
                dropped_port: Some(port),
                attempts: Default::default(),
            };
        }
        eprintln!("silent link: a forwarding proxy (not root, or no iptables)");
        SilentLink::proxy(to)
    }

    /// Whether the cut is real (iptables) rather than a proxy's.
    pub fn is_real(&self) -> bool {
        self.dropped_port.is_some()
    }

    /// Forwards a new loopback port to `to`; the cut holds the bytes.
    fn proxy(to: &str) -> SilentLink {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cut = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let to = to.to_string();
        let c = cut.clone();
        let a = attempts.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                a.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Ok(upstream) = std::net::TcpStream::connect(&to) else {
                    // Nothing behind: cut, the link says nothing and keeps
                    // the connection (as a network dropping packets);
                    // else it closes it, as a refused connect would.
                    if c.load(std::sync::atomic::Ordering::SeqCst) {
                        held.push(client);
                    }
                    continue;
                };
                for (from, into) in [
                    (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                    (upstream, client),
                ] {
                    let c = c.clone();
                    std::thread::spawn(move || pump(from, into, &c));
                }
            }
        });

        SilentLink {
            addr,
            cut,
            dropped_port: None,
            attempts,
        }
    }

    /// Connections the proxy took (0 with iptables, where none are).
    pub fn attempts(&self) -> u64 {
        self.attempts.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Goes silent.
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(port) = self.dropped_port {
            for rule in drop_rules(port) {
                assert!(iptables("-I", &rule), "iptables -I {rule:?}");
            }
        }
    }

    /// Passes packets again.
    pub fn heal(&self) {
        if let Some(port) = self.dropped_port {
            for rule in drop_rules(port) {
                while iptables("-D", &rule) {}
            }
        }
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for SilentLink {
    fn drop(&mut self) {
        // Never leave a rule behind, whatever the test did.
        if let Some(port) = self.dropped_port {
            for rule in drop_rules(port) {
                while iptables("-D", &rule) {}
            }
        }
    }
}
