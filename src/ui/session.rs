//! The browser's credentials: a token is asked for once, then kept as an
//! HttpOnly, SameSite=Strict cookie (and `Secure` under TLS); every
//! mutating request a cookie authenticates must also carry the anti-CSRF
//! token in a header.
//!
//! The cookie is `NAME.VALUE`: the token's name, and a value derived from
//! the token's stored hash (blake3 with a context string). Both values
//! survive an engine restart, die with the token (a revoked token's
//! session opens nothing) and reveal neither the token nor its hash. A
//! request with `Authorization: Bearer` carries no ambient credential and
//! needs no anti-CSRF token.

use axum::http::HeaderMap;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "weir_session";
/// The header every cookie-authenticated mutation carries.
pub const CSRF_HEADER: &str = "x-weir-csrf";
/// How long a browser keeps the session cookie.
pub const SESSION_MAX_AGE_S: u64 = 30 * 24 * 3600;

/// The session and anti-CSRF values of one token.
#[derive(Clone)]
pub struct Session {
    cookie: String,
    csrf: String,
}

impl Session {
    /// The values of token `name`, derived from its stored `hash`.
    pub fn new(name: &str, hash: &str) -> Session {
        let key = blake3::derive_key("weir ui session v2", hash.as_bytes());
        let cookie = format!("{name}.{}", blake3::keyed_hash(&key, b"session").to_hex());
        let csrf = blake3::keyed_hash(&key, b"csrf").to_hex().to_string();
        Session { cookie, csrf }
    }

    /// The token name a request's session cookie claims (unchecked).
    pub fn name_in(headers: &HeaderMap) -> Option<&str> {
        cookie_value(headers, SESSION_COOKIE)?
            .split_once('.')
            .map(|(name, _)| name)
            .filter(|n| !n.is_empty())
    }

    /// The anti-CSRF token the page sends in [`CSRF_HEADER`].
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The `Set-Cookie` value that logs a browser in (`Secure` when the
    /// engine serves TLS: the cookie never travels in the clear).
    pub fn set_cookie(&self, secure: bool) -> String {
        format!(
            "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_MAX_AGE_S}{}",
            self.cookie,
            if secure { "; Secure" } else { "" }
        )
    }

    /// The `Set-Cookie` value that logs a browser out.
    pub fn clear_cookie(secure: bool) -> String {
        format!(
            "{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
            if secure { "; Secure" } else { "" }
        )
    }

    /// Whether the request carries this session's cookie.
    pub fn has_cookie(&self, headers: &HeaderMap) -> bool {
        cookie_value(headers, SESSION_COOKIE)
            .is_some_and(|v| crate::serve::discovery::token_eq(v, &self.cookie))
    }

    /// Whether the request carries this session's anti-CSRF header.
    pub fn has_csrf(&self, headers: &HeaderMap) -> bool {
        headers
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| crate::serve::discovery::token_eq(v.trim(), &self.csrf))
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn values_are_derived_from_the_token_and_differ_from_it() {
        let a = Session::new("admin", "hash-a");
        let b = Session::new("admin", "hash-b");
        assert_ne!(a.csrf(), b.csrf());
        assert_ne!(a.cookie, a.csrf);
        assert!(!a.set_cookie(false).contains("hash-a"));
        assert!(a.set_cookie(false).contains("HttpOnly"));
        assert!(a.set_cookie(false).contains("SameSite=Strict"));
        assert!(!a.set_cookie(false).contains("Secure"));
        assert!(a.set_cookie(true).ends_with("; Secure"));
        assert!(a.cookie.starts_with("admin."));
        assert_eq!(
            Session::new("admin", "hash-a").csrf(),
            a.csrf(),
            "stable across restarts"
        );
    }

    #[test]
    fn the_cookie_is_found_among_others_and_checked() {
        let s = Session::new("ci", "t");
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            HeaderValue::from_str(&format!("a=1; {SESSION_COOKIE}={}; b=2", s.cookie)).unwrap(),
        );
        assert!(s.has_cookie(&h));
        assert!(!Session::new("ci", "u").has_cookie(&h));
        assert_eq!(Session::name_in(&h), Some("ci"));
        assert!(!s.has_csrf(&h));
        h.insert(CSRF_HEADER, HeaderValue::from_str(s.csrf()).unwrap());
        assert!(s.has_csrf(&h));
    }
}
