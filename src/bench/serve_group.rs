//! What the benches that run `weir serve` processes share (`failover`,
//! `replicated`, `ceiling`): a blocking client of their API, and an engine
//! under test made of one member (a single `weir serve`) or three
//! (`--raft-id` members on loopback), each a child process killed when
//! dropped, optionally pinned to some cores with `taskset`, with or
//! without `weir worker` processes serving its pools.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::procs::{free_addr, Proc, Root};
use super::report::BenchError;

/// How often the hand-out phase sends its start again while no member
/// takes it.
pub(super) const START_RETRY_MS: u64 = 5;

pub(super) const COOKIE: &str = "weir-bench-failover-cookie";
pub(super) const TOKEN: &str = "weir-bench-failover-token-0123456789";

pub(super) fn failed<E: std::fmt::Display>(e: E) -> BenchError {
    BenchError::Failed(e.to_string())
}

pub(super) fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// A blocking HTTP client of the engines' API.
pub(super) struct Api {
    http: reqwest::Client,
    rt: tokio::runtime::Runtime,
}

impl Api {
    pub(super) fn new() -> Result<Api, BenchError> {
        Ok(Api {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .map_err(failed)?,
            rt: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(failed)?,
        })
    }

    pub(super) fn send(
        &self,
        method: &str,
        url: &str,
        body: Option<Value>,
    ) -> Result<(u16, Value), String> {
        self.send_with(method, url, body, false)
    }

    /// With `own`, a member answers of itself (a members view not passed
    /// on to the leader).
    pub(super) fn send_with(
        &self,
        method: &str,
        url: &str,
        body: Option<Value>,
        own: bool,
    ) -> Result<(u16, Value), String> {
        let req = match method {
            "POST" => self.http.post(url).json(&body.unwrap_or(json!({}))),
            _ => self.http.get(url),
        };
        let req = if own {
            req.header("x-weir-passed", "1")
        } else {
            req
        };
        self.rt.block_on(async {
            let resp = req
                .bearer_auth(TOKEN)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let v = resp.json::<Value>().await.unwrap_or(Value::Null);
            Ok((status, v))
        })
    }
}

impl Api {
    /// A GET whose answer is text (`/metrics`).
    pub(super) fn text(&self, url: &str) -> Result<(u16, String), String> {
        let req = self.http.get(url).bearer_auth(TOKEN);
        self.rt.block_on(async {
            let resp = req.send().await.map_err(|e| e.to_string())?;
            let status = resp.status().as_u16();
            let text = resp.text().await.map_err(|e| e.to_string())?;
            Ok((status, text))
        })
    }
}

/// `exe`, or `taskset -c CPUS exe` when `cpus` is given (taskset execs
/// the program: the child's pid is the program's).
pub(super) fn pinned(exe: &Path, cpus: Option<&str>) -> Command {
    match cpus {
        Some(c) => {
            let mut cmd = Command::new("taskset");
            cmd.args(["-c", c]).arg(exe);
            cmd
        }
        None => Command::new(exe),
    }
}

/// Where a member logs: nowhere (errors only, to a null stderr), or, to
/// trace a run,
/// `$WEIR_BENCH_MEMBER_LOGS/NAME.log` (appended) at the level of
/// `WEIR_BENCH_MEMBER_RUST_LOG` (e.g. `weir::replica=trace`; `info` when
/// unset).
fn member_log(cmd: &mut Command, name: &str) -> Result<(), BenchError> {
    let Some(dir) = std::env::var_os("WEIR_BENCH_MEMBER_LOGS") else {
        cmd.env("RUST_LOG", "error").stderr(Stdio::null());
        return Ok(());
    };
    let path = Path::new(&dir).join(format!("{name}.log"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| BenchError::Failed(format!("member log {}: {e}", path.display())))?;
    let level = std::env::var("WEIR_BENCH_MEMBER_RUST_LOG").unwrap_or_else(|_| "info".into());
    cmd.env("RUST_LOG", level).stderr(file);
    Ok(())
}

/// A scenario's folder under the system temp folder, made empty, holding
/// the cookie and token files the members and workers read (mode 0600).
pub(super) fn prepare_root(scenario: &str) -> Result<Root, BenchError> {
    let root =
        Root(std::env::temp_dir().join(format!("weir-bench-{scenario}-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(root.path());
    std::fs::create_dir_all(root.path()).map_err(failed)?;
    for (f, text) in [("cookie", COOKIE), ("token", TOKEN)] {
        let p = root.path().join(f);
        std::fs::write(&p, format!("{text}\n")).map_err(failed)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).map_err(failed)?;
    }
    Ok(root)
}

/// CPU time a process and the children it waited for have used, in ms
/// (`/proc/PID/stat`: utime, stime, cutime, cstime, in ticks of USER_HZ,
/// which is 100 on every Linux ABI); `None` once it is gone.
pub(super) fn cpu_ms(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_ms_of_stat(&stat)
}

/// [`cpu_ms`] of the text of a `/proc/PID/stat`.
pub(super) fn cpu_ms_of_stat(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces: fields are counted
    // after its closing parenthesis, from field 3.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime is field 14 of the line, so index 11 after the name.
    let ticks: u64 = fields
        .get(11..15)?
        .iter()
        .map(|f| f.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some(ticks * 10)
}

/// One engine under test: its members (one for the single engine) and
/// their processes.
pub(super) struct Engine {
    exe: PathBuf,
    defs: PathBuf,
    root: PathBuf,
    pub(super) name: &'static str,
    /// API address, Raft address, process, by member id.
    pub(super) members: BTreeMap<u64, (String, String, Option<Proc>)>,
    pub(super) replicated: bool,
    /// Each member's `--cluster` address (workers join there; the members
    /// run no local pools), by member id; empty: local pools.
    pub(super) cluster: BTreeMap<u64, String>,
    /// The cores its members run on (`taskset -c`); `None`: any.
    pub(super) cpus: Option<String>,
}

impl Engine {
    /// Starts `n` members (one: a single `weir serve`), on any core.
    pub(super) fn start(
        exe: &Path,
        defs: &Path,
        root: &Path,
        name: &'static str,
        n: u64,
        workers: bool,
    ) -> Result<Engine, BenchError> {
        Engine::start_on(exe, defs, root, name, n, workers, None)
    }

    /// Starts `n` members, each pinned to `cpus` (`taskset -c CPUS`) when
    /// given.
    pub(super) fn start_on(
        exe: &Path,
        defs: &Path,
        root: &Path,
        name: &'static str,
        n: u64,
        workers: bool,
        cpus: Option<&str>,
    ) -> Result<Engine, BenchError> {
        let mut members = BTreeMap::new();
        let mut cluster = BTreeMap::new();
        for id in 1..=n {
            members.insert(
                id,
                (free_addr()?.to_string(), free_addr()?.to_string(), None),
            );
            if workers {
                cluster.insert(id, free_addr()?.to_string());
            }
        }
        let mut e = Engine {
            exe: exe.to_path_buf(),
            defs: defs.to_path_buf(),
            root: root.to_path_buf(),
            name,
            members,
            replicated: n > 1,
            cluster,
            cpus: cpus.map(str::to_string),
        };
        for id in 1..=n {
            e.spawn(id)?;
        }
        Ok(e)
    }

    pub(super) fn spawn(&mut self, id: u64) -> Result<(), BenchError> {
        let peers = self
            .members
            .iter()
            .map(|(i, (_, raft, _))| format!("{i}={raft}"))
            .collect::<Vec<_>>()
            .join(",");
        let (api, _, proc_) = self.members.get_mut(&id).unwrap();
        let mut cmd = pinned(&self.exe, self.cpus.as_deref());
        cmd.arg("serve")
            .arg(&self.defs)
            .arg("--data")
            .arg(self.root.join(format!("{}-{id}", self.name)))
            .args(["--listen", api.as_str()])
            .arg("--token-file")
            .arg(self.root.join("token"))
            .stdout(Stdio::null());
        member_log(&mut cmd, &format!("{}-{id}", self.name))?;
        if self.replicated {
            cmd.args(["--raft-id", &id.to_string(), "--raft-peers", &peers]);
        }
        if let Some(addr) = self.cluster.get(&id) {
            cmd.args(["--cluster", addr, "--no-local-workers"]);
        }
        // The members' Raft and the workers' sessions both check it.
        if self.replicated || self.cluster.contains_key(&id) {
            cmd.arg("--cookie-file").arg(self.root.join("cookie"));
        }
        *proc_ = Some(Proc(cmd.spawn().map_err(failed)?));
        Ok(())
    }

    /// Starts a `weir worker` of 8 `default` slots joining every member
    /// (`--join A,B,C`).
    pub(super) fn worker(&self, name: &str) -> Result<Proc, BenchError> {
        self.worker_on(name, 8, None)
    }

    /// Starts a `weir worker` of `slots` `default` slots joining every
    /// member, pinned to `cpus` when given.
    pub(super) fn worker_on(
        &self,
        name: &str,
        slots: u32,
        cpus: Option<&str>,
    ) -> Result<Proc, BenchError> {
        let join = self.cluster.values().cloned().collect::<Vec<_>>().join(",");
        let child = pinned(&self.exe, cpus)
            .args(["worker", "--join", &join, "--name", name])
            .arg("--cookie-file")
            .arg(self.root.join("cookie"))
            .arg("--pool")
            .arg(format!("default={slots}"))
            .arg("--data")
            .arg(self.root.join(format!("{}-{name}", self.name)))
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(failed)?;
        Ok(Proc(child))
    }

    /// Sends `body` to `path` on every running member in turn, again every
    /// [`START_RETRY_MS`] while none takes it (an election, an engine
    /// opening), for 30 s at most; when one took it, in ns since the epoch.
    pub(super) fn post_soon(&self, api: &Api, path: &str, body: Value) -> Result<u128, BenchError> {
        let t0 = Instant::now();
        loop {
            for url in self.urls() {
                let sent = api.send("POST", &format!("{url}{path}"), Some(body.clone()));
                if sent.is_ok_and(|(s, _)| (200..300).contains(&s)) {
                    return Ok(now_ns());
                }
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(failed(format!(
                    "POST {path}: no member took it within 30 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(START_RETRY_MS));
        }
    }

    pub(super) fn kill(&mut self, id: u64) {
        if let Some((_, _, p)) = self.members.get_mut(&id) {
            // Dropped: killed (SIGKILL) and reaped.
            drop(p.take());
        }
    }

    pub(super) fn urls(&self) -> Vec<String> {
        self.members
            .values()
            .filter(|m| m.2.is_some())
            .map(|m| format!("http://{}", m.0))
            .collect()
    }

    /// The member that leads (the single engine's only one), once its
    /// engine answers.
    pub(super) fn leader(&self, api: &Api) -> Option<u64> {
        if !self.replicated {
            let url = format!("{}/api/v1/graphs", self.urls().first()?);
            return api
                .send("GET", &url, None)
                .ok()
                .filter(|r| r.0 == 200)
                .map(|_| 1);
        }
        for (id, (addr, _, p)) in &self.members {
            if p.is_none() {
                continue;
            }
            let Ok((200, v)) = api.send("GET", &format!("http://{addr}/healthz"), None) else {
                continue;
            };
            if v["state"] == "leader" && v["leader"].as_u64() == Some(*id) {
                let graphs = api.send("GET", &format!("http://{addr}/api/v1/graphs"), None);
                if graphs.is_ok_and(|r| r.0 == 200) {
                    return Some(*id);
                }
            }
        }
        None
    }

    pub(super) fn wait_leader(&self, api: &Api, timeout: Duration) -> Result<u64, BenchError> {
        let t0 = Instant::now();
        loop {
            if let Some(id) = self.leader(api) {
                return Ok(id);
            }
            if t0.elapsed() > timeout {
                return Err(failed(format!(
                    "{}: no leader within {timeout:?}",
                    self.name
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every member runs and has applied what the leader
    /// had logged when the wait began (a member just restarted has caught
    /// up): a kill then takes one member out of three, not two. The mark
    /// is fixed when first seen: under the workers' steady writes the
    /// leader's log moves on while a follower applies, and a moving mark
    /// can stay a few entries ahead of every poll.
    pub(super) fn wait_caught_up(&self, api: &Api, timeout: Duration) -> Result<(), BenchError> {
        let t0 = Instant::now();
        let mut mark: Option<u64> = None;
        loop {
            let views: Vec<Value> = self
                .members
                .values()
                .filter_map(|(addr, _, p)| {
                    p.as_ref()?;
                    let url = format!("http://{addr}/api/v1/members");
                    api.send_with("GET", &url, None, true)
                        .ok()
                        .filter(|r| r.0 == 200)
                        .map(|r| r.1)
                })
                .collect();
            let logged = views
                .iter()
                .filter(|v| v["state"] == "leader")
                .filter_map(|v| v["last_log_index"].as_u64())
                .max();
            mark = mark.or(logged);
            // Past the mark, or within two entries of the leader's log now
            // (a mark a deposed leader logged may never be applied, when
            // nothing is written after the election).
            let all = views.len() == self.members.len()
                && views.iter().all(|v| {
                    v["applied_index"].as_u64().is_some_and(|a| {
                        mark.is_some_and(|m| a >= m) || logged.is_some_and(|l| a + 2 >= l)
                    })
                });
            if all {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                let applied: Vec<String> = views
                    .iter()
                    .map(|v| format!("{}: {}", v["state"], v["applied_index"]))
                    .collect();
                return Err(failed(format!(
                    "{}: members not caught up within {timeout:?} (mark {mark:?}; {} of {} answered, applied {})",
                    self.name,
                    views.len(),
                    self.members.len(),
                    applied.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends a request to the members in turn until one takes it.
    pub(super) fn call(
        &self,
        api: &Api,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, BenchError> {
        let t0 = Instant::now();
        loop {
            for url in self.urls() {
                if let Ok((s, v)) = api.send(method, &format!("{url}{path}"), body.clone()) {
                    if (200..300).contains(&s) {
                        return Ok(v);
                    }
                    if s != 503 {
                        return Err(failed(format!("{method} {path}: {s} {v}")));
                    }
                }
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err(failed(format!("{method} {path}: no member answered")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The graph's runs by partition: state, and how many times each
    /// partition was listed (more than once: a duplicate).
    pub(super) fn runs(
        &self,
        api: &Api,
        graph: &str,
    ) -> Result<BTreeMap<String, (String, u32)>, BenchError> {
        let mut out: BTreeMap<String, (String, u32)> = BTreeMap::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("/api/v1/runs?graph={graph}&limit=1000");
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={c}"));
            }
            let v = self.call(api, "GET", &path, None)?;
            for r in v["runs"].as_array().cloned().unwrap_or_default() {
                let p = r["partition"].as_str().unwrap_or_default().to_string();
                let e = out.entry(p).or_insert((String::new(), 0));
                e.0 = r["state"].as_str().unwrap_or_default().to_string();
                e.1 += 1;
            }
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return Ok(out),
            }
        }
    }

    /// The text of member `id`'s `/metrics`.
    pub(super) fn metrics(&self, api: &Api, id: u64) -> Result<String, BenchError> {
        let addr = &self
            .members
            .get(&id)
            .ok_or_else(|| failed(format!("{}: no member {id}", self.name)))?
            .0;
        match api.text(&format!("http://{addr}/metrics")) {
            Ok((200, text)) => Ok(text),
            Ok((s, text)) => Err(failed(format!("GET /metrics of member {id}: {s} {text}"))),
            Err(e) => Err(failed(format!("GET /metrics of member {id}: {e}"))),
        }
    }

    /// Waits, looking every `poll`, until the runs of `graph` at `parts`
    /// are all complete; the latest `settled_at_ms` among them (the
    /// engine's own record, so the poll's period does not count).
    pub(super) fn wait_settled(
        &self,
        api: &Api,
        graph: &str,
        parts: &[String],
        timeout: Duration,
        poll: Duration,
    ) -> Result<u64, BenchError> {
        let wanted: BTreeSet<&str> = parts.iter().map(String::as_str).collect();
        let t0 = Instant::now();
        loop {
            let mut settled: BTreeMap<String, u64> = BTreeMap::new();
            let mut ended_badly: Option<String> = None;
            let mut cursor: Option<String> = None;
            loop {
                let mut path = format!("/api/v1/runs?graph={graph}&limit=1000");
                if let Some(c) = &cursor {
                    path.push_str(&format!("&cursor={c}"));
                }
                let v = self.call(api, "GET", &path, None)?;
                for r in v["runs"].as_array().into_iter().flatten() {
                    let Some(p) = r["partition"].as_str() else {
                        continue;
                    };
                    match r["state"].as_str() {
                        Some("complete") => {
                            if let Some(at) = r["settled_at_ms"].as_u64() {
                                settled.insert(p.to_string(), at);
                            }
                        }
                        Some(s @ ("failed" | "cancelled")) if wanted.contains(p) => {
                            ended_badly = Some(format!("{p} {s}"));
                        }
                        _ => {}
                    }
                }
                match v["next_cursor"].as_str() {
                    Some(c) => cursor = Some(c.to_string()),
                    None => break,
                }
            }
            if let Some(bad) = ended_badly {
                return Err(failed(format!(
                    "{}: the run of {graph} at {bad}",
                    self.name
                )));
            }
            let last = parts
                .iter()
                .map(|p| settled.get(p).copied())
                .collect::<Option<Vec<u64>>>();
            if let Some(last) = last {
                return Ok(last.into_iter().max().unwrap_or_default());
            }
            if t0.elapsed() > timeout {
                return Err(failed(format!(
                    "{}: runs of {graph} not complete within {timeout:?}",
                    self.name
                )));
            }
            std::thread::sleep(poll);
        }
    }

    pub(super) fn wait_complete(
        &self,
        api: &Api,
        graph: &str,
        parts: &[String],
        timeout: Duration,
    ) -> Result<(), BenchError> {
        let t0 = Instant::now();
        loop {
            let runs = self.runs(api, graph)?;
            if parts
                .iter()
                .all(|p| runs.get(p).is_some_and(|r| r.0 == "complete"))
            {
                return Ok(());
            }
            if t0.elapsed() > timeout {
                return Err(failed(format!(
                    "{}: runs of {graph} not complete within {timeout:?}",
                    self.name
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `n` daily partitions from `year`-01-01.
pub(super) fn days(year: u32, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut y = year;
    while out.len() < n {
        for month in 1..=12u32 {
            let leap = y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400));
            let len = match month {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            for day in 1..=len {
                out.push(format!("{y}-{month:02}-{day:02}"));
            }
        }
        y += 1;
    }
    out.truncate(n);
    out
}

/// Milliseconds since the epoch, by this machine's clock (the one the
/// engines' records use).
pub(super) fn now_ms() -> u64 {
    (now_ns() / 1_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/proc/PID/stat` line, whose command name holds a space and a
    /// parenthesis: utime 250, stime 50, cutime 100, cstime 0 ticks.
    #[test]
    fn cpu_time_is_read_after_the_command_name() {
        let stat =
            "4242 (weir (x) y) S 1 4242 4242 0 -1 4194560 9 0 0 0 250 50 100 0 20 0 9 0 1 2 3";
        assert_eq!(cpu_ms_of_stat(stat), Some(4_000));
        assert_eq!(cpu_ms_of_stat("4242 (weir) S 1 2"), None, "too few fields");
        assert_eq!(cpu_ms_of_stat("no parenthesis"), None);
    }

    #[test]
    fn days_are_consecutive_dates_across_months_and_leap_years() {
        let d = days(2000, 61);
        assert_eq!(d[0], "2000-01-01");
        assert_eq!(d[30], "2000-01-31");
        assert_eq!(d[31], "2000-02-01");
        assert_eq!(d[59], "2000-02-29", "2000 is a leap year");
        assert_eq!(d[60], "2000-03-01");
        assert_eq!(
            days(2001, 365).last().map(String::as_str),
            Some("2001-12-31")
        );
        assert_eq!(
            days(2001, 366).last().map(String::as_str),
            Some("2002-01-01")
        );
    }
}
