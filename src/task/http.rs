//! The HTTP task: a node that calls a URL.
//!
//! `http = { method, url, headers, body, expect = [200, 299] }`. The
//! answer's body (at most [`OUTPUT_BYTES_MAX`]) is the node's output.
//! Connection errors, timeouts, 5xx, 408 and 429 retry under the node's
//! policy, a 429 or 503 not before its `Retry-After`; any other status
//! outside `expect` fails without retry (see [`weir_core::http`]).
//!
//! `{graph}`, `{partition}`, `{node}`, `{attempt}` and `{run_id}` are
//! substituted as literal text (percent-encoded in the URL), and
//! `${env:NAME}` by the engine's environment at each attempt — so secrets
//! stay out of the definition and the journal, which keep the template.
//! Both are expanded in one pass: a value is never expanded again, so a
//! key holding `${env:…}` cannot reach a secret. Errors name the template,
//! never the expanded URL or headers.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::StreamExt;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};
use weir_actors::scheduler::records::TaskInput;
use weir_actors::task::{Task, TaskContext, TaskError, TaskResult};
use weir_core::http::{classify, HttpVerdict, EXPECT_DEFAULT};

use super::command::OUTPUT_BYTES_MAX;

/// The registered name of the HTTP task.
pub const HTTP_TASK: &str = "http";
/// Bytes of a failed answer's body kept in the error.
pub const ERROR_BODY_BYTES: usize = 512;
/// How long connecting may take.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Characters left as they are in a substituted URL value (RFC 3986's
/// unreserved set); everything else is percent-encoded.
const URL_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

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

/// Why a template cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `${env:NAME}` names a variable the engine's environment lacks.
    #[error("${{env:{0}}} is not set in the engine's environment")]
    MissingEnv(String),
    /// `${env:` without its closing brace, or with an empty name.
    #[error("a ${{env:…}} reference is not closed or has no name")]
    Malformed,
}

/// Expands `template` in one pass: `${env:NAME}` by `env(NAME)`, `{name}`
/// by its value in `vars` (through `encode`); anything else is literal.
pub fn expand(
    template: &str,
    vars: &[(&str, &str)],
    env: &dyn Fn(&str) -> Option<String>,
    encode: &dyn Fn(&str) -> String,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'outer: while let Some(i) = rest.find(['$', '{']) {
        out.push_str(&rest[..i]);
        let at = &rest[i..];
        if let Some(after) = at.strip_prefix("${env:") {
            let end = after.find('}').ok_or(TemplateError::Malformed)?;
            let name = &after[..end];
            if name.is_empty() {
                return Err(TemplateError::Malformed);
            }
            let v = env(name).ok_or_else(|| TemplateError::MissingEnv(name.to_string()))?;
            out.push_str(&v);
            rest = &after[end + 1..];
            continue;
        }
        for (name, value) in vars {
            if let Some(after) = at
                .strip_prefix('{')
                .and_then(|a| a.strip_prefix(*name))
                .and_then(|a| a.strip_prefix('}'))
            {
                out.push_str(&encode(value));
                rest = after;
                continue 'outer;
            }
        }
        out.push_str(&at[..1]);
        rest = &at[1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A value percent-encoded for a URL.
pub fn url_encode(v: &str) -> String {
    utf8_percent_encode(v, URL_VALUE).to_string()
}

/// Checks a config as `weir validate` does: a method, an http(s) URL with
/// a host once its references are filled, header names, the expect range.
pub fn check(config: &HttpConfig) -> Vec<String> {
    let mut faults = Vec::new();
    if reqwest::Method::from_bytes(config.method.as_bytes()).is_err() {
        faults.push(format!("method {:?} is not an HTTP method", config.method));
    }
    let vars = [
        ("graph", "g"),
        ("partition", "p"),
        ("node", "n"),
        ("attempt", "1"),
        ("run_id", "r"),
    ];
    let dummy = |_: &str| Some("x".to_string());
    match expand(&config.url, &vars, &dummy, &url_encode) {
        Err(e) => faults.push(format!("url: {e}")),
        Ok(u) => match reqwest::Url::parse(&u) {
            Err(e) => faults.push(format!("url {:?}: {e}", config.url)),
            Ok(u) if !matches!(u.scheme(), "http" | "https") => faults.push(format!(
                "url {:?}: the scheme is {}, not http or https",
                config.url,
                u.scheme()
            )),
            Ok(u) if u.host_str().is_none_or(str::is_empty) => {
                faults.push(format!("url {:?}: no host", config.url))
            }
            Ok(_) => {}
        },
    }
    for (k, v) in &config.headers {
        if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err() {
            faults.push(format!("headers: {k:?} is not a header name"));
        }
        if let Err(e) = expand(v, &vars, &dummy, &|s| s.to_string()) {
            faults.push(format!("headers.{k}: {e}"));
        }
    }
    if let Some(b) = &config.body {
        if let Err(e) = expand(b, &vars, &dummy, &|s| s.to_string()) {
            faults.push(format!("body: {e}"));
        }
    }
    if let Err(e) = weir_core::http::check_expect(config.expect) {
        faults.push(e);
    }
    faults
}

/// The HTTP task.
#[derive(Debug, Clone)]
pub struct HttpTask {
    client: reqwest::Client,
}

impl HttpTask {
    /// A task with its own connection pool.
    pub fn new() -> Result<HttpTask, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_millis(CONNECT_TIMEOUT_MS))
            .user_agent(concat!("weir/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(HttpTask { client })
    }
}

impl Task for HttpTask {
    fn run(&self, ctx: TaskContext) -> BoxFuture<'static, TaskResult> {
        let client = self.client.clone();
        Box::pin(async move { run(client, ctx).await })
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

async fn run(client: reqwest::Client, ctx: TaskContext) -> TaskResult {
    let input: TaskInput = weir_core::codec::decode(&ctx.payload).map_err(|e| {
        TaskError::Permanent(format!(
            "http task: the payload is not a graph task input: {e}"
        ))
    })?;
    let node = input.node.clone();
    let config: HttpConfig = serde_json::from_value(input.config.clone())
        .map_err(|e| TaskError::Permanent(format!("http task: node {node}: bad config: {e}")))?;
    let attempt = ctx.attempt.to_string();
    let vars: [(&str, &str); 5] = [
        ("graph", &input.graph),
        ("partition", &input.partition),
        ("node", &input.node),
        ("attempt", &attempt),
        ("run_id", &ctx.key),
    ];
    let env = |n: &str| std::env::var(n).ok();
    let perm =
        |what: &str, e: TemplateError| TaskError::Permanent(format!("node {node}: {what}: {e}"));
    let url = expand(&config.url, &vars, &env, &url_encode).map_err(|e| perm("url", e))?;
    let method = reqwest::Method::from_bytes(config.method.as_bytes()).map_err(|_| {
        TaskError::Permanent(format!(
            "node {node}: method {:?} is not an HTTP method",
            config.method
        ))
    })?;
    let mut req = client.request(method.clone(), &url);
    for (k, v) in &config.headers {
        let v = expand(v, &vars, &env, &|s| s.to_string())
            .map_err(|e| perm(&format!("headers.{k}"), e))?;
        let value = reqwest::header::HeaderValue::from_str(&v).map_err(|_| {
            TaskError::Permanent(format!(
                "node {node}: header {k}: its value (once expanded) is not a valid header value"
            ))
        })?;
        req = req.header(k.as_str(), value);
    }
    if let Some(b) = &config.body {
        req = req.body(expand(b, &vars, &env, &|s| s.to_string()).map_err(|e| perm("body", e))?);
    }
    let what = format!("{} {}", config.method, config.url);
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

    fn vars() -> [(&'static str, &'static str); 2] {
        [("partition", "key=a b/${env:SECRET}"), ("node", "n")]
    }

    #[test]
    fn expands_in_one_pass() {
        let env = |n: &str| (n == "SECRET").then(|| "s3cret {node}".to_string());
        let lit = |s: &str| s.to_string();
        // A value holding ${env:…} or {…} is not expanded again.
        assert_eq!(
            expand("/{partition}", &vars(), &env, &lit).unwrap(),
            "/key=a b/${env:SECRET}"
        );
        assert_eq!(
            expand("Bearer ${env:SECRET}", &vars(), &env, &lit).unwrap(),
            "Bearer s3cret {node}"
        );
        assert_eq!(
            expand("https://h/x?p={partition}", &vars(), &env, &url_encode).unwrap(),
            "https://h/x?p=key%3Da%20b%2F%24%7Benv%3ASECRET%7D"
        );
        assert_eq!(
            expand("{unknown} $x {", &vars(), &env, &lit).unwrap(),
            "{unknown} $x {"
        );
        assert_eq!(
            expand("${env:NOPE}", &vars(), &env, &lit),
            Err(TemplateError::MissingEnv("NOPE".into()))
        );
        assert_eq!(
            expand("${env:SECRET", &vars(), &env, &lit),
            Err(TemplateError::Malformed)
        );
    }

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
        assert_eq!(f.len(), 5, "{f:?}");
        c.method = "POST".into();
        c.url = "https://api.example.com/{partition}?k=${env:KEY}".into();
        c.headers = [("Authorization".to_string(), "Bearer ${env:T}".to_string())].into();
        c.expect = (200, 299);
        assert!(check(&c).is_empty(), "{:?}", check(&c));
    }
}
