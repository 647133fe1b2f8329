//! hyper's own refusals in the API's error shape.
//!
//! hyper answers three kinds of request itself, before any handler sees
//! them, and then closes the connection: a head it cannot parse (400), a
//! URI over 65,534 bytes (414), a head over the connection's limit or with
//! too many headers (431). It writes them with `content-length: 0`, and
//! offers no hook to give them a body. [`Reshaped`] sits between hyper and
//! the socket and, when a write is exactly such an answer (one of those
//! three statuses, an empty body: the API's own errors always carry one),
//! sends the same status with the documented body
//! `{"error": {"status", "kind", "message"}}` instead.
//!
//! It recognizes an answer that starts a write: hyper flushes each answer
//! before it reads the next request, so only a client that pipelines a
//! malformed request behind a well-formed one could see the empty form.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::{ErrorBody, ErrorDetail};

/// A connection's I/O with hyper's refusals reshaped.
pub struct Reshaped<T> {
    inner: T,
    /// The head limits, as a 431's message states them.
    limits: &'static str,
    /// The reshaped answer, and how much of it is written.
    pending: Option<(Vec<u8>, usize)>,
}

impl<T> Reshaped<T> {
    /// Wraps `inner`; `limits` says what a head may be (for a 431).
    pub fn new(inner: T, limits: &'static str) -> Reshaped<T> {
        Reshaped {
            inner,
            limits,
            pending: None,
        }
    }
}

/// hyper's refusals are a status line and two short headers (length,
/// date): a longer write is not one, and is not looked into.
const REFUSAL_BYTES_MAX: usize = 256;

/// The reshaped answer for `written`, if it is one of hyper's refusals.
fn reshape(written: &[u8], limits: &str) -> Option<Vec<u8>> {
    if written.len() > REFUSAL_BYTES_MAX || !written.starts_with(b"HTTP/1.1 4") {
        return None;
    }
    let head_end = written.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    // A refusal is a head alone.
    if head_end != written.len() {
        return None;
    }
    let head = std::str::from_utf8(written).ok()?;
    let status: u16 = head.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()?;
    if !head
        .to_ascii_lowercase()
        .contains("\r\ncontent-length: 0\r\n")
    {
        return None;
    }
    let (kind, reason, message) = match status {
        400 => (
            "bad_request",
            "Bad Request",
            "the request is not valid HTTP/1.1 (its request line or a header is malformed)"
                .to_string(),
        ),
        414 => (
            "uri_too_long",
            "URI Too Long",
            "the request's URI is over 65534 bytes".to_string(),
        ),
        431 => (
            "headers_too_large",
            "Request Header Fields Too Large",
            format!("the request's head is over the limit ({limits})"),
        ),
        _ => return None,
    };
    let body = serde_json::to_string(&ErrorBody {
        error: ErrorDetail {
            status,
            kind: kind.to_string(),
            message,
        },
    })
    .ok()?;
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<T: AsyncWrite + Unpin> Reshaped<T> {
    /// Writes what remains of the reshaped answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, at)) = &mut self.pending {
            if *at == bytes.len() {
                self.pending = None;
                break;
            }
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*at..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *at += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Reshaped<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Reshaped<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_some() {
            ready!(this.poll_pending(cx))?;
        } else if let Some(answer) = reshape(buf, this.limits) {
            // hyper's bytes count as written; the reshaped answer goes out
            // in their place (now, or at the flush hyper does next).
            this.pending = Some((answer, 0));
            if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        // One buffer per write: an answer's head is never split across
        // slices (hyper is also told not to use vectored writes).
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_s_bodiless_refusals_are_reshaped() {
        let cases: [(&str, Option<u16>); 6] = [
            ("HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n", Some(431)),
            ("HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n\r\n", Some(414)),
            ("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n", Some(400)),
            // The API's own errors have a body.
            ("HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n", None),
            ("HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}", None),
            ("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n", None),
        ];
        for (i, (written, want)) in cases.into_iter().enumerate() {
            let got = reshape(written.as_bytes(), "64 KiB").map(|b| {
                let text = String::from_utf8(b).unwrap();
                let (head, body) = text.split_once("\r\n\r\n").unwrap();
                let v: serde_json::Value = serde_json::from_str(body).unwrap();
                assert!(
                    head.contains(&format!("content-length: {}", body.len())),
                    "#{i}: {head}"
                );
                assert!(!v["error"]["message"].as_str().unwrap().is_empty(), "#{i}");
                v["error"]["status"].as_u64().unwrap() as u16
            });
            assert_eq!(got, want, "#{i}: {written:?}");
        }
    }
}
