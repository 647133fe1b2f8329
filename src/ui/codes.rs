//! One-time login codes (the routes are in [`super::code_routes`]), as Jupyter prints them: `weir ui` asks the engine
//! for a code (`POST /api/v1/ui-codes`, with its token) and prints
//! `URL/ui-session/code?c=CODE`; a browser that opens it within
//! [`UI_CODE_TTL_MS`] gets the session of the token that asked (its name
//! and role), once. A headless browser, or a person on another machine,
//! needs no pasted token.
//!
//! Codes live in the engine's memory only (a restart forgets them: ask
//! again), kept as their hashes, [`UI_CODES_MAX`] at most outstanding.
//! A code names a token, not a role: revoked before the code is used, the
//! code logs in nobody.

use std::collections::HashMap;

/// How long a code may wait to be used.
pub const UI_CODE_TTL_MS: u64 = 60_000;
/// Codes outstanding at once (an issuer in a loop is refused past it).
pub const UI_CODES_MAX: usize = 1_000;
/// Random bytes a code holds (hex: twice as many digits).
pub const UI_CODE_BYTES: usize = 32;

/// The outstanding codes: by the blake3 hash of the code, the token name
/// it logs in as and when it expires (ms since the epoch).
#[derive(Debug, Default)]
pub struct UiCodes {
    by_hash: HashMap<String, (String, u64)>,
}

fn hash(code: &str) -> String {
    blake3::hash(code.as_bytes()).to_hex().to_string()
}

impl UiCodes {
    /// A new code for token `name` at `now_ms`, from `random`; refused
    /// when [`UI_CODES_MAX`] are outstanding.
    pub fn issue(
        &mut self,
        name: &str,
        now_ms: u64,
        random: [u8; UI_CODE_BYTES],
    ) -> Result<String, String> {
        self.by_hash.retain(|_, (_, until)| *until > now_ms);
        if self.by_hash.len() >= UI_CODES_MAX {
            return Err(format!(
                "{UI_CODES_MAX} login codes are outstanding: wait for them to expire ({} s)",
                UI_CODE_TTL_MS / 1000
            ));
        }
        let code: String = random.iter().map(|b| format!("{b:02x}")).collect();
        self.by_hash
            .insert(hash(&code), (name.to_string(), now_ms + UI_CODE_TTL_MS));
        Ok(code)
    }

    /// The token name `code` logs in as, if it is outstanding at `now_ms`;
    /// it is then spent, used or not.
    pub fn redeem(&mut self, code: &str, now_ms: u64) -> Option<String> {
        let (name, until) = self.by_hash.remove(&hash(code))?;
        (until > now_ms).then_some(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_logs_in_once_within_its_time_as_the_token_that_asked() {
        let mut c = UiCodes::default();
        let code = c.issue("dash", 1_000, [7; UI_CODE_BYTES]).unwrap();
        assert_eq!(code.len(), 2 * UI_CODE_BYTES);
        assert_eq!(c.redeem("nope", 1_001), None);
        assert_eq!(c.redeem(&code, 1_001).as_deref(), Some("dash"));
        assert_eq!(c.redeem(&code, 1_002), None, "spent");
        let late = c.issue("dash", 2_000, [8; UI_CODE_BYTES]).unwrap();
        assert_eq!(c.redeem(&late, 2_000 + UI_CODE_TTL_MS), None, "expired");
        assert_eq!(c.redeem(&late, 2_001), None, "an expired try spends it");
    }

    #[test]
    fn outstanding_codes_are_bounded_and_expired_ones_make_room() {
        let mut c = UiCodes::default();
        for i in 0..UI_CODES_MAX {
            let mut r = [0u8; UI_CODE_BYTES];
            r[..8].copy_from_slice(&(i as u64).to_le_bytes());
            c.issue("a", 0, r).unwrap();
        }
        let e = c.issue("a", 1, [255; UI_CODE_BYTES]).unwrap_err();
        assert!(e.contains("outstanding"), "{e}");
        assert!(c.issue("a", UI_CODE_TTL_MS, [255; UI_CODE_BYTES]).is_ok());
    }
}
