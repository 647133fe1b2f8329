//! The HTTP task: a node that calls a URL.
//!
//! `http = { method, url, headers, body, expect = [200, 299] }`. The
//! answer's body (at most [`OUTPUT_BYTES_MAX`]) is the node's output.
//! Connection errors, timeouts, 5xx, 408 and 429 retry under the node's
//! policy, a 429 or 503 not before its `Retry-After`; any other status
//! outside `expect` fails without retry (see [`weir_core::http`]).
//!
//! The URL, header values and body are templates ([`weir_core::template`]:
//! `{partition}`, `{upstream.NODE.output.a.b}`, `{params.NAME}`, …),
//! rendered as literal text at each attempt (percent-encoded in the URL),
//! and `${env:NAME}` is read from the engine's environment then — so
//! secrets stay out of the definition and the journal, which keep the
//! template. Everything is expanded in one pass: a value is never expanded
//! again, so a key holding `${env:…}` cannot reach a secret. A reference
//! that cannot be rendered fails the attempt without retry. Errors name
//! the template, never the expanded URL or headers.
//!
//! Each attempt has a log, as a command's has (`weir logs`, the UI): the
//! request as written (the template, so `${env:…}` secrets stay out), the
//! header names (values of credential headers and of headers from the
//! environment left out), the status and timing, and the head of the
//! body; a failure's error on stderr.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use weir_actors::scheduler::records::TaskInput;
use weir_actors::task::{Task, TaskContext, TaskError, TaskResult};
use weir_core::http::{classify, HttpVerdict, EXPECT_DEFAULT};
use weir_core::template::{Escape, Place, Template};

use super::command::OUTPUT_BYTES_MAX;

/// The registered name of the HTTP task.
pub const HTTP_TASK: &str = "http";
/// Bytes of a failed answer's body kept in the error.
pub const ERROR_BODY_BYTES: usize = 512;
/// How long connecting may take.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;

fn method_default() -> String {
    "GET".into()
}

fn expect_default() -> (u16, u16) {
    EXPECT_DEFAULT
}

/// An HTTP node's config (its task spec's config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpConfig {
    /// GET, POST, PUT, PATCH, DELETE, HEAD…
    #[serde(default = "method_default")]
    pub method: String,
    /// The URL template.
    pub url: String,
    /// Header templates.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body template.
    #[serde(default)]
    pub body: Option<String>,
    /// The statuses that succeed (inclusive).
    #[serde(default = "expect_default")]
    pub expect: (u16, u16),
}

/// A header value or a body is at most this long once rendered.
pub const RENDERED_BYTES_MAX: usize = 2 << 20;

fn parse(field: &str, text: &str) -> Result<Template, String> {
    Template::parse(text, Place::Http).map_err(|e| format!("{field}: {e}"))
}

/// Checks a config as `weir validate` does: a method, an http(s) URL with
/// a host once its references are filled, header names, the expect range.
/// Its templates are checked with the graph around them (see
/// `weir_core::template::Template::check`).
pub fn check(config: &HttpConfig) -> Vec<String> {
    let mut faults = Vec::new();
    if reqwest::Method::from_bytes(config.method.as_bytes()).is_err() {
        faults.push(format!("method {:?} is not an HTTP method", config.method));
    }
    // A template's own faults (syntax, references) are found with the
    // graph around it, where definitions are read: here only what it
    // renders to.
    faults.extend(check_url(&config.url));
    for k in config.headers.keys() {
        if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
            faults.push(format!("headers: {k:?} is not a header name"));
        }
    }
    if let Err(e) = weir_core::http::check_expect(config.expect) {
        faults.push(e);
    }
    faults
}

/// The faults of a URL template, as `weir validate` gives them: what it
/// renders to must be an http(s) URL with a host. Where a reference
/// stands in the scheme, the host or the port (`{upstream.srv.output.url}/x`,
/// `http://h:{params.port}/`), what it renders to is known only at the
/// attempt, so only the literal part before it is checked (its scheme).
/// A template's own faults are found with the graph around it, where
/// definitions are read.
pub fn check_url(url: &str) -> Vec<String> {
    let Ok(t) = parse("url", url) else {
        return Vec::new();
    };
    let literal_head: String = t
        .segments()
        .iter()
        .map_while(|s| match s {
            weir_core::template::Segment::Text(x) => Some(x.as_str()),
            weir_core::template::Segment::Ref(..) => None,
        })
        .collect();
    let authority_is_literal = t.is_literal()
        || literal_head
            .split_once("://")
            .is_some_and(|(_, rest)| rest.contains(['/', '?', '#']));
    if !authority_is_literal {
        return match literal_head.split_once("://") {
            Some((scheme, _)) if !matches!(scheme, "http" | "https") => vec![format!(
                "url {url:?}: the scheme is {scheme}, not http or https"
            )],
            _ => Vec::new(),
        };
    }
    match reqwest::Url::parse(&t.sample()) {
        Err(e) => vec![format!("url {url:?}: {e}")],
        Ok(u) if !matches!(u.scheme(), "http" | "https") => vec![format!(
            "url {url:?}: the scheme is {}, not http or https",
            u.scheme()
        )],
        Ok(u) if u.host_str().is_none_or(str::is_empty) => vec![format!("url {url:?}: no host")],
        Ok(_) => Vec::new(),
    }
}

/// The HTTP task.
#[derive(Clone)]
pub struct HttpTask {
    client: reqwest::Client,
    /// Where attempts' logs are kept (`DATA/logs`); none: not kept.
    logs: Option<crate::logs::LogPaths>,
    /// In a worker process: where log events go instead.
    remote: Option<crate::logs::RemoteLog>,
    /// Bounds of each attempt's log.
    log_limits: crate::logs::LogLimits,
}

impl std::fmt::Debug for HttpTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTask")
            .field("logs", &self.logs)
            .field("remote", &self.remote.is_some())
            .finish()
    }
}

/// How much of an answer's body an attempt's log keeps.
pub const LOG_BODY_BYTES: usize = 2 << 10;

impl HttpTask {
    /// A task with its own connection pool, keeping no logs.
    pub fn new() -> Result<HttpTask, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_millis(CONNECT_TIMEOUT_MS))
            .user_agent(concat!("weir/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpTask {
            client,
            logs: None,
            remote: None,
            log_limits: Default::default(),
        })
    }

    /// Keeps each attempt's log under `paths` (the engine's).
    pub fn with_logs(mut self, paths: crate::logs::LogPaths) -> HttpTask {
        self.logs = Some(paths);
        self
    }

    /// Sends each attempt's log to the engine (a worker's).
    pub fn with_remote_logs(mut self, forward: crate::logs::RemoteLog) -> HttpTask {
        self.remote = Some(forward);
        self
    }
}

impl Task for HttpTask {
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        let client = self.client.clone();
        let log = match &self.remote {
            Some(r) => crate::logs::AttemptLog::start_remote(
                r.clone(),
                &ctx.key,
                ctx.attempt,
                &self.log_limits,
                ctx.cancel.clone(),
            ),
            None => crate::logs::AttemptLog::start(
                self.logs.as_ref(),
                &ctx.key,
                ctx.attempt,
                &self.log_limits,
                ctx.cancel.clone(),
            ),
        };
        Box::pin(async move {
            let mut lines = Vec::new();
            let result = run(client, ctx, &mut lines).await;
            let mut out = log.sink(crate::logs::Stream::Out);
            for (at_ms, line) in lines {
                out.write_at(format!("{line}\n").as_bytes(), at_ms).await;
            }
            out.close().await;
            if let Err(e) = &result {
                let mut err = log.sink(crate::logs::Stream::Err);
                err.write(format!("{e}\n").as_bytes()).await;
                err.close().await;
            }
            let cancelled = matches!(&result, Err(e) if e.to_string().ends_with(": cancelled"));
            log.finish(crate::logs::AttemptEnd {
                outcome: match &result {
                    Ok(_) => crate::logs::Outcome::Succeeded,
                    Err(_) if cancelled => crate::logs::Outcome::Cancelled,
                    Err(_) => crate::logs::Outcome::Failed,
                },
                exit_code: None,
                signal: None,
                error: result.as_ref().err().map(ToString::to_string),
            })
            .await;
            result
        })
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether a header's value stays out of the log: credentials, and any
/// value read from the environment.
fn header_secret(name: &str, template: &str) -> bool {
    let n = name.to_ascii_lowercase();
    template.contains("${env:")
        || [
            "authorization",
            "cookie",
            "token",
            "key",
            "secret",
            "password",
        ]
        .iter()
        .any(|w| n.contains(w))
}

/// One attempt. `log` gets its lines (at their instants): the request as
/// written, the answer's status and timing, the body's head.
async fn run(
    client: reqwest::Client,
    ctx: TaskContext,
    log: &mut Vec<(u64, String)>,
) -> TaskResult {
    let input: TaskInput = weir_core::codec::decode(&ctx.payload).map_err(|e| {
        TaskError::Permanent(format!(
            "http task: the payload is not a graph task input: {e}"
        ))
    })?;
    let node = input.node.clone();
    let config: HttpConfig = serde_json::from_value(input.config.clone())
        .map_err(|e| TaskError::Permanent(format!("http task: node {node}: bad config: {e}")))?;
    let method = reqwest::Method::from_bytes(config.method.as_bytes()).map_err(|_| {
        TaskError::Permanent(format!(
            "node {node}: method {:?} is not an HTTP method",
            config.method
        ))
    })?;
    let perm = |what: &str, e: String| TaskError::Permanent(format!("node {node}: {what}: {e}"));
    // Rendered before the first await: the scope is not Send.
    let (url, headers, body) = {
        let env = |n: &str| std::env::var(n).ok();
        let mut scope = input.scope(ctx.attempt, &ctx.key);
        scope.env = Some(&env);
        let render = |field: &str, text: &str, escape: Escape| {
            parse(field, text)
                .map_err(|e| perm(field, e))?
                .render(&scope, escape, RENDERED_BYTES_MAX)
                .map_err(|e| perm(field, e.to_string()))
        };
        let url = render("url", &config.url, Escape::Url)?;
        let mut headers = Vec::with_capacity(config.headers.len());
        for (k, v) in &config.headers {
            let v = render(&format!("headers.{k}"), v, Escape::None)?;
            let value = reqwest::header::HeaderValue::from_str(&v).map_err(|_| {
                TaskError::Permanent(format!(
                    "node {node}: header {k}: its value (once expanded) is not a valid header value"
                ))
            })?;
            headers.push((k.clone(), value));
        }
        let body = match &config.body {
            Some(b) => Some(render("body", b, Escape::None)?),
            None => None,
        };
        (url, headers, body)
    };
    let mut req = client.request(method.clone(), &url);
    // The attempt's span in the run's trace (W3C trace context), unless
    // the definition sets the header itself: the service's spans join it.
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
    {
        req = req.header(
            "traceparent",
            crate::trace::ids::traceparent(&input.graph, &input.partition, &ctx.key, ctx.attempt),
        );
    }
    for (k, v) in headers {
        req = req.header(k.as_str(), v);
    }
    if let Some(b) = body {
        req = req.body(b);
    }
    let what = format!("{} {}", config.method, config.url);
    log.push((now_ms(), format!("> {what}")));
    for (k, v) in &config.headers {
        let shown = if header_secret(k, v) {
            "(not logged)"
        } else {
            v.as_str()
        };
        log.push((now_ms(), format!("> {k}: {shown}")));
    }
    let t0 = Instant::now();
    let sent = tokio::select! {
        r = req.send() => r,
        () = ctx.cancel.cancelled() => {
            return Err(TaskError::Retryable(format!("{what}: cancelled")));
        }
    };
    let res = match sent {
        Ok(r) => r,
        // Never the expanded URL: it may hold a secret.
        Err(e) => {
            let e = e.without_url();
            tracing::warn!(node = %node, request = %what, error = %e, "http request failed");
            return Err(TaskError::Retryable(format!("{what}: {e}")));
        }
    };
    let status = res.status().as_u16();
    let retry_after = res
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let verdict = classify(status, config.expect, retry_after.as_deref(), now_ms());
    // Read the body, bounded: a success keeps all of it (up to the output
    // limit), a failure its head for the error.
    let keep = match verdict {
        HttpVerdict::Success => OUTPUT_BYTES_MAX as usize,
        _ => ERROR_BODY_BYTES,
    };
    let mut body: Vec<u8> = Vec::new();
    let mut over = false;
    let mut stream = res.bytes_stream();
    loop {
        let chunk = tokio::select! {
            c = stream.next() => c,
            () = ctx.cancel.cancelled() => {
                return Err(TaskError::Retryable(format!("{what}: cancelled")));
            }
        };
        match chunk {
            None => break,
            Some(Ok(c)) => {
                if body.len() + c.len() > keep {
                    body.extend_from_slice(&c[..keep - body.len()]);
                    over = true;
                    break;
                }
                body.extend_from_slice(&c);
            }
            Some(Err(e)) => {
                return Err(TaskError::Retryable(format!(
                    "{what}: reading the answer: {}",
                    e.without_url()
                )))
            }
        }
    }
    let took_ms = t0.elapsed().as_millis() as u64;
    tracing::info!(node = %node, request = %what, status, took_ms, bytes = body.len(), "http answer");
    log.push((
        now_ms(),
        format!(
            "< {status} in {took_ms} ms, {} bytes{}",
            body.len(),
            if over { " (more not read)" } else { "" }
        ),
    ));
    if !body.is_empty() {
        let cut = body.len().min(LOG_BODY_BYTES);
        let text = String::from_utf8_lossy(&body[..cut]);
        for line in text.lines() {
            log.push((now_ms(), format!("< {line}")));
        }
        if body.len() > cut {
            log.push((now_ms(), format!("< … ({} more bytes)", body.len() - cut)));
        }
    }
    let head = || String::from_utf8_lossy(&body).into_owned();
    match verdict {
        HttpVerdict::Success if over => Err(TaskError::Permanent(format!(
            "{what}: status {status}, but the body is over the output limit of {OUTPUT_BYTES_MAX} bytes"
        ))),
        HttpVerdict::Success => Ok(body),
        HttpVerdict::Retry { after_ms } => {
            let msg = format!("{what}: status {status}: {}", head());
            Err(match after_ms {
                Some(ms) => TaskError::retry_after(msg, ms),
                None => TaskError::Retryable(msg),
            })
        }
        HttpVerdict::Permanent => Err(TaskError::Permanent(format!(
            "{what}: status {status} (expected {}..={}): {}",
            config.expect.0,
            config.expect.1,
            head()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_each_fault() {
        let mut c = HttpConfig {
            method: "G T".into(),
            url: "ftp://h/{partition}".into(),
            headers: [("bad name".to_string(), "${env:".to_string())].into(),
            body: None,
            expect: (300, 200),
        };
        let f = check(&c);
        assert_eq!(f.len(), 4, "{f:?}");
        c.method = "POST".into();
        c.url = "https://api.example.com/{partition}?k=${env:KEY}".into();
        c.headers = [("Authorization".to_string(), "Bearer ${env:T}".to_string())].into();
        c.expect = (200, 299);
        assert!(check(&c).is_empty(), "{:?}", check(&c));
    }

    /// URL templates, one row a case: the template, the words of its
    /// fault (empty: none). A reference in the authority leaves only the
    /// scheme to check.
    #[test]
    fn url_templates_table() {
        let cases: &[(&str, &str)] = &[
            ("https://h/{params.region}?t=${env:T}", ""),
            ("http://127.0.0.1:{upstream.srv.output.port}/health", ""),
            ("{upstream.srv.output.url}/health", ""),
            ("http://{params.host}/x", ""),
            ("ftp://{params.host}/x", "the scheme is ftp"),
            ("ftp://h/x", "the scheme is ftp"),
            ("not a url", "relative URL without a base"),
        ];
        for (i, (url, want)) in cases.iter().enumerate() {
            let got = check_url(url);
            if want.is_empty() {
                assert!(got.is_empty(), "#{i}: {url}: {got:?}");
            } else {
                assert!(
                    got.len() == 1 && got[0].contains(want),
                    "#{i}: {url}: {got:?}"
                );
            }
        }
    }
}
