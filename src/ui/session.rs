//! The browser's credentials: the engine token is asked for once, then kept
//! as an HttpOnly, SameSite=Strict cookie; every mutating request a cookie
//! authenticates must also carry the anti-CSRF token in a header.
//!
//! Both values are derived from the engine token (blake3 with a context
//! string), so they survive an engine restart and change when the token
//! does; neither reveals the token. A request with `Authorization: Bearer`
//! carries no ambient credential and needs no anti-CSRF token.

use axum::http::HeaderMap;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "weir_session";
/// The header every cookie-authenticated mutation carries.
pub const CSRF_HEADER: &str = "x-weir-csrf";
/// How long a browser keeps the session cookie.
pub const SESSION_MAX_AGE_S: u64 = 30 * 24 * 3600;

/// The session and anti-CSRF values of one engine token.
#[derive(Clone)]
pub struct Session {
    cookie: String,
    csrf: String,
}

impl Session {
    /// The values derived from `token`.
    pub fn new(token: &str) -> Session {
        let key = blake3::derive_key("weir ui session v1", token.as_bytes());
        let cookie = blake3::keyed_hash(&key, b"session").to_hex().to_string();
        let csrf = blake3::keyed_hash(&key, b"csrf").to_hex().to_string();
        Session { cookie, csrf }
    }

    /// The anti-CSRF token the page sends in [`CSRF_HEADER`].
    pub fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The `Set-Cookie` value that logs a browser in.
    pub fn set_cookie(&self) -> String {
        format!(
            "{SESSION_COOKIE}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={SESSION_MAX_AGE_S}",
            self.cookie
        )
    }

    /// The `Set-Cookie` value that logs a browser out.
    pub fn clear_cookie() -> String {
        format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
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
        let a = Session::new("secret-a");
        let b = Session::new("secret-b");
        assert_ne!(a.csrf(), b.csrf());
        assert_ne!(a.cookie, a.csrf);
        assert!(!a.set_cookie().contains("secret-a"));
        assert!(a.set_cookie().contains("HttpOnly"));
        assert!(a.set_cookie().contains("SameSite=Strict"));
        assert_eq!(
            Session::new("secret-a").csrf(),
            a.csrf(),
            "stable across restarts"
        );
    }

    #[test]
    fn the_cookie_is_found_among_others_and_checked() {
        let s = Session::new("t");
        let mut h = HeaderMap::new();
        h.insert(
            axum::http::header::COOKIE,
            HeaderValue::from_str(&format!("a=1; {SESSION_COOKIE}={}; b=2", s.cookie)).unwrap(),
        );
        assert!(s.has_cookie(&h));
        assert!(!Session::new("u").has_cookie(&h));
        assert!(!s.has_csrf(&h));
        h.insert(CSRF_HEADER, HeaderValue::from_str(s.csrf()).unwrap());
        assert!(s.has_csrf(&h));
    }
}
