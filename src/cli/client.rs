//! The CLI as the API's client: finds the engine of a data directory (its
//! `engine.json`), or the one `--engine URL` / `$WEIR_ENGINE` names, and
//! calls it with the token of `DATA/token` (or `--token-file`,
//! `$WEIR_TOKEN`). When no engine runs, read-only commands read the store
//! instead and mutating ones say how to start one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::connect_failure::{self, CaFrom};
use super::datadir;
use super::failure::Failure;
use crate::serve::discovery;
use crate::serve::error::ErrorBody;

/// The environment variable naming the engine's URL.
pub const ENV_ENGINE: &str = "WEIR_ENGINE";
/// The environment variable holding the token.
pub const ENV_TOKEN: &str = "WEIR_TOKEN";
/// The environment variable naming a CA certificate file (PEM) to trust
/// (defined beside the failures that name it).
pub use super::connect_failure::ENV_CA;
/// How long one request may take (log follows are not bounded).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How a client command reaches the engine.
#[derive(Debug, Clone, Args, Default)]
pub struct Conn {
    /// The data directory (default: $WEIR_DATA_DIR, ./.weir, or the one `weir run`/`serve` recorded for this folder).
    #[arg(long, global = true)]
    pub data: Option<PathBuf>,
    /// The engine's URL (default: from DATA/engine.json, or $WEIR_ENGINE).
    #[arg(long, global = true)]
    pub engine: Option<String>,
    /// A file holding the API token (default: DATA/token, or $WEIR_TOKEN).
    #[arg(long, global = true)]
    pub token_file: Option<PathBuf>,
    /// A CA certificate (PEM) to trust for an https:// engine, beside the
    /// system's roots (default: $WEIR_CA).
    #[arg(long, global = true)]
    pub ca: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

/// A connection to a running engine.
pub struct Client {
    base: reqwest::Url,
    token: String,
    http: reqwest::Client,
    /// A replicated engine's other members: tried in turn when one does
    /// not answer, or answers that the leader is changing.
    members: Vec<reqwest::Url>,
    /// The CA trusted beside the system's roots, and where it was given:
    /// named when the engine's certificate is refused.
    ca: Option<(PathBuf, bool)>,
}

/// How long a client keeps trying a replicated engine's members while
/// none answers or a leader is being elected.
const FAILOVER_WAIT: Duration = Duration::from_secs(10);

/// Where a read-only command reads from.
pub enum Source {
    /// A running engine's API.
    Engine(Client),
    /// The store, directly (no engine runs).
    Store(PathBuf),
}

fn token_for(conn: &Conn, data: Option<&Path>) -> Result<String, Failure> {
    if let Some(f) = &conn.token_file {
        return discovery::read_token_file(f).map_err(Failure::input);
    }
    if let Some(t) = std::env::var_os(ENV_TOKEN).and_then(|t| t.into_string().ok()) {
        if !t.is_empty() {
            return Ok(t);
        }
    }
    let Some(d) = data else {
        return Err(Failure::input(format!(
            "no token: pass --token-file F, set ${ENV_TOKEN}, or --data DIR of the engine (its token is DATA/token)"
        )));
    };
    discovery::read_token_file(&d.join(discovery::TOKEN_FILE)).map_err(Failure::input)
}

fn client(conn: &Conn, url: &str, token: String) -> Result<Client, Failure> {
    let base =
        reqwest::Url::parse(url).map_err(|e| Failure::input(format!("engine URL {url:?}: {e}")))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(Failure::input(format!("engine URL {url:?}: not http(s)")));
    }
    let mut builder = reqwest::Client::builder();
    // (the file, whether it came from --ca rather than $WEIR_CA)
    let ca_given = conn.ca.clone().map(|p| (p, true)).or_else(|| {
        std::env::var_os(ENV_CA)
            .filter(|v| !v.is_empty())
            .map(|v| (PathBuf::from(v), false))
    });
    if let Some((ca, flag)) = &ca_given {
        let given = if *flag {
            format!("--ca {}", ca.display())
        } else {
            format!("${ENV_CA}={}", ca.display())
        };
        let pem = std::fs::read(ca).map_err(|e| Failure::input(format!("{given}: {e}")))?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| Failure::input(format!("{given}: not a PEM certificate: {e}")))?;
        if certs.is_empty() {
            return Err(Failure::input(format!(
                "{given}: it holds no PEM certificate"
            )));
        }
        for c in certs {
            builder = builder.add_root_certificate(c);
        }
    }
    let http = builder
        .build()
        .map_err(|e| Failure::store(format!("cannot make an HTTP client: {e}")))?;
    Ok(Client {
        base,
        token,
        http,
        members: Vec::new(),
        ca: ca_given,
    })
}

/// The engine to talk to, if one runs: `--engine`, `$WEIR_ENGINE`, or the
/// data directory's engine file. `Ok(None)` with the data directory when
/// none runs.
pub fn find(conn: &Conn) -> Result<(Option<Client>, Option<PathBuf>), Failure> {
    let url = conn
        .engine
        .clone()
        .or_else(|| std::env::var(ENV_ENGINE).ok().filter(|u| !u.is_empty()));
    if let Some(url) = url {
        let data = datadir::for_client(conn.data.as_deref()).ok();
        let token = token_for(conn, data.as_deref())?;
        announce(conn, data.as_deref(), Some(&url));
        return Ok((Some(client(conn, &url, token)?), data));
    }
    let data = datadir::for_client(conn.data.as_deref())?;
    let found = discovery::find_engine(&data)
        .map_err(Failure::store)?
        // This member stopped (or died): its peers' URLs count only while
        // one of them answers; else no engine runs, and read-only commands
        // read this store.
        .filter(|info| discovery::pid_alive(info.pid) || info.members.iter().any(|u| answers(u)));
    match found {
        Some(info) => {
            let token = token_for(conn, Some(&data))?;
            announce(conn, Some(&data), Some(&info.url));
            let mut c = client(conn, &info.url, token)?;
            c.members = info
                .members
                .iter()
                .filter_map(|u| reqwest::Url::parse(u).ok())
                .collect();
            Ok((Some(c), Some(data)))
        }
        None => {
            announce(conn, Some(&data), None);
            Ok((None, Some(data)))
        }
    }
}

/// On a terminal (and not for `--json`), says which data directory and
/// engine the command uses, on stderr: the answer to "which store did that
/// read?" when several examples were run from one folder.
fn announce(conn: &Conn, data: Option<&std::path::Path>, url: Option<&str>) {
    use std::io::IsTerminal;
    if conn.json || !std::io::stderr().is_terminal() {
        return;
    }
    let data = data.map_or_else(
        || "no data directory".to_string(),
        |d| d.display().to_string(),
    );
    match url {
        Some(u) => eprintln!("weir: {data} (engine at {u})"),
        None => eprintln!("weir: {data} (no engine runs: read from its store)"),
    }
}

/// For a read-only command: the engine, or the store when none runs.
pub fn source(conn: &Conn) -> Result<Source, Failure> {
    match find(conn)? {
        (Some(c), _) => Ok(Source::Engine(c)),
        (None, Some(d)) => Ok(Source::Store(d)),
        (None, None) => Err(Failure::input("no engine and no data directory")),
    }
}

/// For a mutating command: the engine, or an error saying how to start one.
pub fn engine(conn: &Conn) -> Result<Client, Failure> {
    match find(conn)? {
        (Some(c), _) => Ok(c),
        (None, data) => Err(Failure::input(format!(
            "no engine is running{}; start one with `weir serve PATH{}` (or `weir run PATH`), then try again",
            data.as_ref()
                .map(|d| format!(" on {}", d.display()))
                .unwrap_or_default(),
            data.as_ref()
                .map(|d| format!(" --data {}", d.display()))
                .unwrap_or_default(),
        ))),
    }
}

/// An API answer that is not 2xx.
#[derive(Debug)]
pub struct ApiFailure {
    /// The status.
    pub status: u16,
    /// The error's message.
    pub message: String,
    /// The raw body.
    pub body: String,
}

impl From<ApiFailure> for Failure {
    fn from(a: ApiFailure) -> Failure {
        let code = match a.status {
            400..=499 => crate::exit::EXIT_BAD_INPUT,
            _ => crate::exit::EXIT_STORE,
        };
        Failure {
            code,
            message: a.message,
        }
    }
}

/// What a path segment escapes: everything but RFC 3986's unreserved
/// characters.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

impl Client {
    /// The URL of `segments` (each percent-encoded) under the base. A
    /// segment of only dots (`.`, `..`: a key may be one) is refused: no
    /// URL can carry it. WHATWG URLs (the `url` crate under reqwest, and
    /// every browser) resolve `.` and `..` in every spelling, `%2E` and
    /// `%2e%2E` included, as "this folder" and "the parent folder", so the
    /// request would reach another route (`weir signal -- ..` once asked
    /// `/graphs/h/signal` and heard "no route").
    pub fn url(&self, segments: &[&str]) -> Result<reqwest::Url, Failure> {
        let mut u = self.base.clone();
        let mut path = u.path().trim_end_matches('/').to_string();
        for seg in segments {
            if matches!(*seg, "." | "..") {
                return Err(Failure::input(format!(
                    "{seg:?}: a name or key of only dots cannot travel in a URL path (HTTP clients read it as \"this folder\" or \"the parent folder\" and would ask another route); give it another character"
                )));
            }
            path.push('/');
            path.extend(percent_encoding::utf8_percent_encode(seg, SEGMENT));
        }
        u.set_path(&path);
        Ok(u)
    }

    /// Why a request to `base` failed, naming a refused certificate's
    /// cause and fix ([`connect_failure`]).
    fn failure(&self, base: &reqwest::Url, e: &reqwest::Error) -> Failure {
        let ca = match &self.ca {
            None => CaFrom::Nowhere,
            Some((p, true)) => CaFrom::Flag(p),
            Some((p, false)) => CaFrom::Env(p),
        };
        connect_failure::failure(base, ca, e)
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Result<(u16, String), Failure> {
        let req = req
            .bearer_auth(&self.token)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| Failure::input(format!("a request that cannot be built: {e}")))?;
        let resp = self.execute(req).await?;
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .map_err(|e| Failure::store(format!("reading the engine's answer: {e}")))?;
        Ok((status, text))
    }

    /// Sends `req`; to a replicated engine, to each member in turn while
    /// one cannot be connected to or answers 503 (no leader to pass the
    /// request to: it was not sent on), for up to [`FAILOVER_WAIT`]. A
    /// request that may have reached an engine is never sent twice.
    async fn execute(&self, req: reqwest::Request) -> Result<reqwest::Response, Failure> {
        let unanswered = |base: &reqwest::Url, e: reqwest::Error| self.failure(base, &e);
        if self.members.is_empty() {
            return self
                .http
                .execute(req)
                .await
                .map_err(|e| unanswered(&self.base, e));
        }
        let mut bases = vec![self.base.clone()];
        bases.extend(self.members.iter().filter(|m| **m != self.base).cloned());
        let deadline = tokio::time::Instant::now() + FAILOVER_WAIT;
        let mut round = 0usize;
        loop {
            let base = &bases[round % bases.len()];
            round += 1;
            let Some(mut r) = req.try_clone() else {
                return self
                    .http
                    .execute(req)
                    .await
                    .map_err(|e| unanswered(&self.base, e));
            };
            let _ = r.url_mut().set_scheme(base.scheme());
            let _ = r.url_mut().set_host(base.host_str());
            let _ = r.url_mut().set_port(base.port());
            let last = tokio::time::Instant::now() >= deadline;
            match self.http.execute(r).await {
                Ok(resp) if resp.status().as_u16() != 503 || last => return Ok(resp),
                Ok(_) => {}
                // A certificate refused is refused by every member alike:
                // said at once, not after the failover wait.
                Err(e)
                    if last
                        || !e.is_connect()
                        || connect_failure::cause(&e) != connect_failure::Cause::Unanswered =>
                {
                    return Err(unanswered(base, e))
                }
                Err(_) => {}
            }
            if round.is_multiple_of(bases.len()) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }

    fn decode<T: DeserializeOwned>(
        status: u16,
        text: String,
    ) -> Result<Result<T, ApiFailure>, Failure> {
        if (200..300).contains(&status) {
            return serde_json::from_str(&text).map(Ok).map_err(|e| {
                Failure::store(format!(
                    "the engine's answer is not what this weir expects: {e}"
                ))
            });
        }
        let message = serde_json::from_str::<ErrorBody>(&text)
            .map(|b| b.error.message)
            .unwrap_or_else(|_| format!("HTTP {status}: {}", text.trim()));
        Ok(Err(ApiFailure {
            status,
            message,
            body: text,
        }))
    }

    /// GET `segments` with a query; the answer decoded, or the API's error.
    pub async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<Result<T, ApiFailure>, Failure> {
        let (s, t) = self
            .send(self.http.get(self.url(segments)?).query(query))
            .await?;
        Self::decode(s, t)
    }

    /// POST a JSON body to `segments`.
    pub async fn post<B: Serialize, T: DeserializeOwned>(
        &self,
        segments: &[&str],
        body: &B,
    ) -> Result<Result<T, ApiFailure>, Failure> {
        let (s, t) = self
            .send(self.http.post(self.url(segments)?).json(body))
            .await?;
        Self::decode(s, t)
    }

    /// A streaming GET (Server-Sent Events): the response, once 2xx.
    pub async fn stream(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<reqwest::Response, Failure> {
        let resp = self
            .http
            .get(self.url(segments)?)
            .query(query)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| self.failure(&self.base, &e))?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let text = resp.text().await.unwrap_or_default();
            let r: Result<Result<serde_json::Value, ApiFailure>, Failure> =
                Self::decode(status, text);
            return Err(match r? {
                Err(a) => a.into(),
                Ok(_) => Failure::store(format!("HTTP {status}")),
            });
        }
        Ok(resp)
    }
}

/// Runs `f` on a small runtime of its own (client commands are short),
/// with SIGPIPE held (see [`PipeSignalHeld`]).
pub fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, Failure> {
    let held = PipeSignalHeld::hold();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::store(format!("cannot start the runtime: {e}")))?;
    let output = rt.block_on(f);
    drop(rt);
    drop(held);
    Ok(output)
}

/// SIGPIPE blocked on this thread (and the runtime threads it starts)
/// while a client talks to an engine. Client commands take SIGPIPE's
/// default action so that `weir runs | head` ends quietly, but a socket
/// write raises it too: an `https://` request to a plain-HTTP engine (which
/// answers the TLS hello with a 400 and closes) killed the command by the
/// signal, with no word said. Held, the write fails with EPIPE and the
/// client names the cause; a closed stdout also fails with EPIPE, which
/// [`super::output::out`] ends quietly as before. On release, a SIGPIPE
/// left pending is taken, so that unblocking does not deliver it.
struct PipeSignalHeld {
    /// The thread's mask before, restored on release.
    old: libc::sigset_t,
}

impl PipeSignalHeld {
    fn pipe_set() -> libc::sigset_t {
        // SAFETY: sigemptyset and sigaddset initialize and fill the set
        // they are given; a zeroed sigset_t is a valid place for that.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGPIPE);
            set
        }
    }

    fn hold() -> Option<PipeSignalHeld> {
        let set = Self::pipe_set();
        // SAFETY: pthread_sigmask reads `set` and writes the old mask into
        // `old`, both valid sigset_t values owned here.
        unsafe {
            let mut old: libc::sigset_t = std::mem::zeroed();
            (libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) == 0)
                .then_some(PipeSignalHeld { old })
        }
    }
}

impl Drop for PipeSignalHeld {
    fn drop(&mut self) {
        let set = Self::pipe_set();
        let now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: sigtimedwait with a zero timeout takes a pending SIGPIPE
        // of this thread or process, if any, and never blocks; then the
        // mask saved in `hold` is restored.
        unsafe {
            while libc::sigtimedwait(&set, std::ptr::null_mut(), &now) == libc::SIGPIPE {}
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// How long a stopped member's client waits for one of its peers to take
/// a connection before it reads the store instead.
const PEER_CONNECT_TIMEOUT: Duration = Duration::from_millis(300);

/// Whether something takes a TCP connection at the URL's host and port.
fn answers(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return false;
    };
    let Ok(addrs) = u.socket_addrs(|| None) else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| std::net::TcpStream::connect_timeout(&a, PEER_CONNECT_TIMEOUT).is_ok())
}
