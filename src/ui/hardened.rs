//! The headers every UI answer carries.

use axum::http::{header, HeaderValue};
use axum::response::Response;

/// The Content-Security-Policy of every UI answer: only the engine's own
/// scripts, styles and connections; no inline script, no framing. Even a
/// value that escaped escaping could not run.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// `r` with the UI's security headers: its CSP, no sniffing, no framing,
/// no referrer, not cached unchecked.
pub fn hardened(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
