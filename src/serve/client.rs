//! Who a request really came from, when a replicated member's front passed
//! it on: the front's connection to its engine is a pooled loopback one,
//! so the socket's peer says `127.0.0.1` for every client. The front
//! states the client's address in [`CLIENT_HEADER`], with a proof that
//! only a holder of the key can make ([`Voucher`]); the engine believes
//! the header only when the proof holds under its process's key
//! ([`Voucher::process`], which only the front in the same process knows),
//! and drops the header otherwise ([`real_client`]). Members vouch to one
//! another with a key derived from the group's cookie
//! ([`Voucher::members`]).
//!
//! The engine's audit log and its loopback-only answers (the token file's
//! path at `/ui-session/hint`) then see the real client, and nobody else
//! can claim to be one: a header a client sends itself is removed.

use std::net::SocketAddr;
use std::sync::OnceLock;

use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

use super::listen::ClientAddr;

/// The header a front states the client's address in: `ADDR PROOF`.
pub const CLIENT_HEADER: &str = "x-weir-client";

/// The context string the members' key is derived from the cookie under
/// (blake3's key derivation: a key for this use alone).
const MEMBERS_KEY_CONTEXT: &str =
    "weir 2026-12 front: the client address one member vouches for to another";

/// Makes and checks the proofs of [`CLIENT_HEADER`]: a keyed blake3 hash
/// of the address.
#[derive(Clone)]
pub struct Voucher {
    key: [u8; 32],
}

impl std::fmt::Debug for Voucher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Voucher(..)")
    }
}

impl Voucher {
    /// This process's voucher: a random key drawn once, shared by the
    /// front and the engine of one member and known to no other process.
    pub fn process() -> &'static Voucher {
        static PROCESS: OnceLock<Voucher> = OnceLock::new();
        PROCESS.get_or_init(|| Voucher {
            key: rand::random(),
        })
    }

    /// The voucher every member of a group holds: derived from the group's
    /// cookie, so a member's front believes another member's.
    pub fn members(cookie: &str) -> Voucher {
        Voucher {
            key: blake3::derive_key(MEMBERS_KEY_CONTEXT, cookie.as_bytes()),
        }
    }

    /// The value of [`CLIENT_HEADER`] that states `client`.
    pub fn vouch(&self, client: SocketAddr) -> HeaderValue {
        let addr = client.to_string();
        let proof = blake3::keyed_hash(&self.key, addr.as_bytes());
        HeaderValue::from_str(&format!("{addr} {}", proof.to_hex()))
            .unwrap_or_else(|_| HeaderValue::from_static(""))
    }

    /// The address `headers` state, if this voucher's key proves it.
    pub fn check(&self, headers: &HeaderMap) -> Option<SocketAddr> {
        let value = headers.get(CLIENT_HEADER)?.to_str().ok()?;
        let (addr, proof) = value.split_once(' ')?;
        let proof = blake3::Hash::from_hex(proof.trim()).ok()?;
        // blake3's Hash compares in constant time.
        (blake3::keyed_hash(&self.key, addr.as_bytes()) == proof)
            .then(|| addr.parse().ok())
            .flatten()
    }
}

/// The engine's outermost middleware: a request its front vouched for
/// carries the client's address as its [`ClientAddr`]; every request
/// loses [`CLIENT_HEADER`], so no handler can read a claim nobody proved.
pub async fn real_client(mut req: Request, next: Next) -> Response {
    if let Some(client) = Voucher::process().check(req.headers()) {
        req.extensions_mut().insert(ConnectInfo(ClientAddr(client)));
    } else if req.headers().contains_key(CLIENT_HEADER) {
        tracing::debug!("a client address nobody vouched for was dropped");
    }
    req.headers_mut().remove(CLIENT_HEADER);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_holds_under_its_key_alone() {
        let addr: SocketAddr = "192.0.2.7:41000".parse().unwrap();
        let a = Voucher::members("cookie-a");
        let mut headers = HeaderMap::new();
        headers.insert(CLIENT_HEADER, a.vouch(addr));
        let cases = [
            ("the same cookie", Voucher::members("cookie-a"), Some(addr)),
            ("another cookie", Voucher::members("cookie-b"), None),
            ("the process's key", Voucher::process().clone(), None),
        ];
        for (i, (what, v, want)) in cases.into_iter().enumerate() {
            assert_eq!(v.check(&headers), want, "#{i}: {what}");
        }
        // Another address under the same proof is refused.
        let forged = a
            .vouch(addr)
            .to_str()
            .unwrap()
            .replace("192.0.2.7", "192.0.2.8");
        headers.insert(CLIENT_HEADER, HeaderValue::from_str(&forged).unwrap());
        assert_eq!(a.check(&headers), None, "a forged address");
    }
}
