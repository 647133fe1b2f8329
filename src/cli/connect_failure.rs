//! Why a request never reached the engine, in words that name the fix.
//!
//! reqwest reports a refused TLS handshake as it reports a closed port
//! ("error sending request"), so every certificate problem used to read
//! "the engine does not answer (is it running?)" while the engine was up
//! and answering. The real cause lies down the error's `source()` chain:
//! a `rustls::Error`, often inside an `std::io::Error` whose `source()`
//! skips it (an `io::Error` hands out its inner error's source, not the
//! inner error), so the walk also looks inside each `io::Error`.
//!
//! [`cause`] decides what went wrong from the chain alone (pure, tested by
//! a table below); [`failure`] says it with the engine's URL and the CA
//! the client was given. A certificate the client cannot trust is bad
//! input (exit 2: what to pass, or what certificate to serve, is the fix);
//! an engine that does not answer stays an I/O error (exit 3).

use std::error::Error as StdError;
use std::path::Path;

use tokio_rustls::rustls;
use tokio_rustls::rustls::CertificateError;

use super::failure::Failure;

/// The environment variable naming a CA certificate file (PEM) to trust.
pub const ENV_CA: &str = "WEIR_CA";

/// How deep the walk down an error chain goes, at most (reqwest's chains
/// are four or five links; a cycle must not hang the client).
const CHAIN_DEPTH_MAX: usize = 32;

/// The section of docs/operations.md that makes a private CA and an
/// engine certificate with openssl.
pub const RECIPE: &str = "docs/operations.md#tls-certificates-with-openssl";

/// What kept a request from the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The certificate's chain ends at no root the client trusts: a
    /// private CA not passed, or a self-signed certificate.
    UnknownIssuer,
    /// A trusted certificate has the name of the certificate's issuer but
    /// not its key: another CA of the same name, or the engine's own
    /// certificate passed as the CA when its subject and issuer names are
    /// the same.
    BadSignature,
    /// The certificate does not name the host of the URL.
    NameMismatch {
        /// The URL's host, as the client checked it.
        expected: String,
        /// The names the certificate has, as `DNS:x` / `IP:x`.
        presented: Vec<String>,
    },
    /// The certificate's notAfter has passed.
    Expired {
        /// Its notAfter, in ms since the epoch, when rustls says.
        not_after_ms: Option<u64>,
    },
    /// The certificate's notBefore is still to come.
    NotYetValid {
        /// Its notBefore, in ms since the epoch, when rustls says.
        not_before_ms: Option<u64>,
    },
    /// The engine serves a CA certificate (basicConstraints CA:TRUE) as
    /// its own, as `openssl req -x509` makes by default.
    CaAsLeaf,
    /// Another reason the certificate is refused (its text).
    Certificate(String),
    /// The other end does not speak TLS (a plain-HTTP engine).
    NotTls,
    /// The TLS handshake failed for a reason that is not the certificate.
    Handshake(String),
    /// No TLS error in the chain: nothing answers (refused, timed out,
    /// no route).
    Unanswered,
}

/// The first `rustls::Error` down `e`'s chain, looking inside every
/// `io::Error` too.
fn rustls_error<'a>(e: &'a (dyn StdError + 'static), depth: usize) -> Option<&'a rustls::Error> {
    let mut link: Option<&'a (dyn StdError + 'static)> = Some(e);
    for _ in depth..CHAIN_DEPTH_MAX {
        let err = link?;
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r);
        }
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            if let Some(r) = rustls_error(inner, depth + 1) {
                return Some(r);
            }
        }
        link = err.source();
    }
    None
}

/// What went wrong, from an error chain alone.
pub fn cause(e: &(dyn StdError + 'static)) -> Cause {
    let Some(r) = rustls_error(e, 0) else {
        return Cause::Unanswered;
    };
    let ms = |t: &rustls::pki_types::UnixTime| t.as_secs().saturating_mul(1000);
    match r {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => Cause::UnknownIssuer,
            CertificateError::BadSignature => Cause::BadSignature,
            CertificateError::NotValidForName => Cause::NameMismatch {
                expected: String::new(),
                presented: Vec::new(),
            },
            CertificateError::NotValidForNameContext {
                expected,
                presented,
            } => Cause::NameMismatch {
                expected: expected.to_str().into_owned(),
                presented: presented.iter().map(|p| san(p)).collect(),
            },
            CertificateError::Expired => Cause::Expired { not_after_ms: None },
            CertificateError::ExpiredContext { not_after, .. } => Cause::Expired {
                not_after_ms: Some(ms(not_after)),
            },
            CertificateError::NotValidYet => Cause::NotYetValid {
                not_before_ms: None,
            },
            CertificateError::NotValidYetContext { not_before, .. } => Cause::NotYetValid {
                not_before_ms: Some(ms(not_before)),
            },
            // webpki's `CaUsedAsEndEntity` reaches rustls as an opaque
            // `Other`; its text is the variant's name (webpki formats its
            // errors with Debug), and weir does not depend on webpki to
            // downcast it.
            CertificateError::Other(o) if o.to_string().contains("CaUsedAsEndEntity") => {
                Cause::CaAsLeaf
            }
            other => Cause::Certificate(format!("{other:?}")),
        },
        rustls::Error::InvalidMessage(_) => Cause::NotTls,
        other => Cause::Handshake(other.to_string()),
    }
}

/// webpki's `DnsName("x")` / `IpAddress(x)` as the SAN a certificate
/// tool writes: `DNS:x` / `IP:x`.
fn san(presented: &str) -> String {
    let inner = |prefix: &str| {
        presented
            .strip_prefix(prefix)
            .and_then(|s| s.strip_suffix(')'))
            .map(|s| s.trim_matches('"').to_string())
    };
    if let Some(d) = inner("DnsName(") {
        format!("DNS:{d}")
    } else if let Some(ip) = inner("IpAddress(") {
        format!("IP:{ip}")
    } else {
        presented.to_string()
    }
}

/// Where the CA the client trusts came from, for the messages.
#[derive(Debug, Clone, Copy)]
pub enum CaFrom<'a> {
    /// Only the system's roots.
    Nowhere,
    /// `--ca FILE`.
    Flag(&'a Path),
    /// `$WEIR_CA`.
    Env(&'a Path),
}

impl CaFrom<'_> {
    /// The CA as the user gave it (`--ca F`, `$WEIR_CA=F`), if they did.
    fn given(self) -> Option<String> {
        match self {
            CaFrom::Nowhere => None,
            CaFrom::Flag(p) => Some(format!("--ca {}", p.display())),
            CaFrom::Env(p) => Some(format!("${}={}", ENV_CA, p.display())),
        }
    }
}

/// The failure of a request to the engine at `base` that failed with `e`.
pub fn failure(base: &reqwest::Url, ca: CaFrom<'_>, e: &reqwest::Error) -> Failure {
    let c = cause(e);
    tracing::debug!(engine = %base, error = ?e, cause = ?c, "request failed");
    say(base, ca, &c, e)
}

/// The words for `cause` (with `e`, the raw error, for the causes that
/// have no better ones).
fn say(base: &reqwest::Url, ca: CaFrom<'_>, cause: &Cause, e: &dyn std::fmt::Display) -> Failure {
    let host = base.host_str().unwrap_or("?").trim_matches(['[', ']']);
    let is_ip = host.parse::<std::net::IpAddr>().is_ok();
    let cert = format!("the engine at {base} answers, but its certificate");
    let time = |ms: Option<u64>| {
        ms.map_or_else(String::new, |ms| {
            format!(" at {} UTC", super::table::fmt_time(ms))
        })
    };
    match cause {
        Cause::BadSignature => Failure::input(format!(
            "{cert} does not verify against the CA {}: its signature does not match that CA's key (a CA of the same name, but not the one that signed it; or the engine's own certificate given as the CA): pass the certificate of the CA that signed the engine's ({RECIPE})",
            ca.given().map_or_else(
                || "of its name among the system's roots".to_string(),
                |g| format!("in {g}")
            )
        )),
        Cause::UnknownIssuer => Failure::input(match ca.given() {
            None => format!(
                "{cert} is signed by an unknown issuer (a private CA, or it signed itself): pass the CA's certificate with --ca FILE (or set ${}); a self-signed engine certificate will not do: make a CA and a certificate it signs ({RECIPE})",
                ENV_CA
            ),
            Some(given) => format!(
                "{cert} is not signed by the CA in {given} (nor by a system root): pass the certificate of the CA that signed the engine's (not the engine's own certificate), or serve a certificate that CA signed ({RECIPE})"
            ),
        }),
        Cause::NameMismatch { presented, .. } => {
            let want = if is_ip {
                format!("IP:{host}")
            } else {
                format!("DNS:{host}")
            };
            let has = if presented.is_empty() {
                "names no host (no subjectAltName; the common name is not checked)".to_string()
            } else {
                format!("is for {} only", presented.join(", "))
            };
            let kind = if is_ip {
                "an IP address needs an IP SAN, a DNS name does not cover it"
            } else {
                "a host name needs a DNS SAN"
            };
            Failure::input(format!(
                "{cert} {has}, not {host}: serve a certificate whose subjectAltName has {want} ({kind}; {RECIPE}), or reach the engine by a name its certificate has with --engine https://NAME:PORT"
            ))
        }
        Cause::Expired { not_after_ms } => Failure::input(format!(
            "{cert} expired{}: serve a renewed certificate (restart the engine with the new --tls-cert), or check this machine's clock",
            time(*not_after_ms)
        )),
        Cause::NotYetValid { not_before_ms } => Failure::input(format!(
            "{cert} is not valid yet (it starts{}): check this machine's clock and the engine's",
            time(*not_before_ms)
        )),
        Cause::CaAsLeaf => Failure::input(format!(
            "{cert} is a CA certificate (basicConstraints CA:TRUE, as `openssl req -x509` makes by default): serve a certificate that CA signs (CA:FALSE, with the engine's names), and pass the CA with --ca FILE ({RECIPE})"
        )),
        Cause::Certificate(why) => Failure::input(format!(
            "{cert} is refused: {why} ({RECIPE} makes one that is not)"
        )),
        Cause::NotTls => Failure::input(format!(
            "the engine at {base} does not speak TLS (a plain-HTTP engine?): use http:// in --engine, or start the engine with --tls-cert F --tls-key F"
        )),
        Cause::Handshake(why) => Failure::store(format!(
            "the TLS handshake with the engine at {base} failed: {why}"
        )),
        Cause::Unanswered => Failure::store(format!(
            "the engine at {base} does not answer: {e} (is it running? `weir serve PATH`)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rustls::pki_types::{ServerName, UnixTime};

    /// `e` wrapped as the connector wraps it: inside an `io::Error`, whose
    /// `source()` skips it, under one more error.
    fn wrapped(e: rustls::Error) -> Box<dyn StdError + Send + Sync> {
        #[derive(Debug)]
        struct Outer(std::io::Error);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("error sending request")
            }
        }
        impl StdError for Outer {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        Box::new(Outer(std::io::Error::other(e)))
    }

    #[derive(Debug)]
    struct CaAsEndEntity;
    impl std::fmt::Display for CaAsEndEntity {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("CaUsedAsEndEntity")
        }
    }
    impl StdError for CaAsEndEntity {}

    /// The causes rustls reports (rustls 0.23's `CertificateError`s, as
    /// webpki's errors map onto them), one row each, and the words each
    /// message must carry: the cause and its fix.
    #[test]
    fn causes_and_their_words() {
        let url = reqwest::Url::parse("https://127.0.0.1:7450/").unwrap();
        let ca = Path::new("/tmp/ca.pem");
        let cert = |c: CertificateError| wrapped(rustls::Error::InvalidCertificate(c));
        type Row<'a> = (
            Box<dyn StdError + Send + Sync>,
            CaFrom<'a>,
            Cause,
            u8,
            &'a [&'a str],
        );
        let rows: Vec<Row> = vec![
            (
                cert(CertificateError::UnknownIssuer),
                CaFrom::Nowhere,
                Cause::UnknownIssuer,
                2,
                &["unknown issuer", "--ca FILE", "WEIR_CA", RECIPE],
            ),
            (
                cert(CertificateError::UnknownIssuer),
                CaFrom::Flag(ca),
                Cause::UnknownIssuer,
                2,
                &[
                    "not signed by the CA in --ca /tmp/ca.pem",
                    "not the engine's own",
                ],
            ),
            (
                cert(CertificateError::UnknownIssuer),
                CaFrom::Env(ca),
                Cause::UnknownIssuer,
                2,
                &["$WEIR_CA=/tmp/ca.pem"],
            ),
            (
                cert(CertificateError::BadSignature),
                CaFrom::Flag(ca),
                Cause::BadSignature,
                2,
                &[
                    "does not verify against the CA in --ca /tmp/ca.pem",
                    "engine's own certificate",
                ],
            ),
            (
                cert(CertificateError::NotValidForNameContext {
                    expected: ServerName::try_from("127.0.0.1").unwrap(),
                    presented: vec!["DnsName(\"localhost\")".into()],
                }),
                CaFrom::Flag(ca),
                Cause::NameMismatch {
                    expected: "127.0.0.1".into(),
                    presented: vec!["DNS:localhost".into()],
                },
                2,
                &[
                    "is for DNS:localhost only",
                    "IP:127.0.0.1",
                    "--engine https://NAME:PORT",
                ],
            ),
            (
                cert(CertificateError::ExpiredContext {
                    time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000)),
                    not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                        1_767_225_600,
                    )),
                }),
                CaFrom::Flag(ca),
                Cause::Expired {
                    not_after_ms: Some(1_767_225_600_000),
                },
                2,
                &["expired at 2026-01-01 00:00:00 UTC", "renewed certificate"],
            ),
            (
                cert(CertificateError::Other(rustls::OtherError(
                    std::sync::Arc::new(CaAsEndEntity),
                ))),
                CaFrom::Flag(ca),
                Cause::CaAsLeaf,
                2,
                &[
                    "is a CA certificate",
                    "CA:TRUE",
                    "a certificate that CA signs",
                ],
            ),
            (
                wrapped(rustls::Error::InvalidMessage(
                    rustls::InvalidMessage::InvalidContentType,
                )),
                CaFrom::Nowhere,
                Cause::NotTls,
                2,
                &["does not speak TLS", "http://"],
            ),
            (
                Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
                CaFrom::Nowhere,
                Cause::Unanswered,
                3,
                &["does not answer", "is it running?"],
            ),
        ];
        for (i, (err, ca, want, code, words)) in rows.iter().enumerate() {
            let got = cause(err.as_ref());
            assert_eq!(&got, want, "#{i}: got {got:?}, want {want:?}");
            let f = say(&url, *ca, &got, err);
            assert_eq!(f.code, *code, "#{i}: {}", f.message);
            for w in words.iter() {
                assert!(f.message.contains(w), "#{i}: {:?} lacks {w:?}", f.message);
            }
        }
    }
}
