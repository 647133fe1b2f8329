//! What an HTTP task's answer means: success, a retry (with the server's
//! `Retry-After` when it gave one), or a permanent failure. Pure: the
//! status, the header's text and the current instant in, a verdict out.
//!
//! Connection errors, timeouts, 5xx and 429 may pass: they retry. Any
//! other status outside the expected range will not change by asking
//! again: it fails without retry (a 404 stays a 404).

/// The statuses a task expects unless told otherwise (inclusive).
pub const EXPECT_DEFAULT: (u16, u16) = (200, 299);
/// The longest `Retry-After` honoured: a server asking for more is asked
/// again after this long (the retry policy's deadline still applies).
pub const RETRY_AFTER_MAX_MS: u64 = 3_600_000;

/// An answer's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpVerdict {
    /// Within the expected range: the body is the output.
    Success,
    /// May pass if asked again; not before `after_ms` from now when the
    /// server said so.
    Retry {
        /// The wait the server asked for, in ms.
        after_ms: Option<u64>,
    },
    /// Will not pass: fail without retry.
    Permanent,
}

/// The verdict for `status`, expecting `expect` (inclusive), with the
/// answer's `Retry-After` header if any, at `now_ms` (ms since the epoch).
pub fn classify(
    status: u16,
    expect: (u16, u16),
    retry_after: Option<&str>,
    now_ms: u64,
) -> HttpVerdict {
    if (expect.0..=expect.1).contains(&status) {
        return HttpVerdict::Success;
    }
    match status {
        429 | 503 => HttpVerdict::Retry {
            after_ms: retry_after.and_then(|v| retry_after_ms(v, now_ms)),
        },
        500..=599 => HttpVerdict::Retry { after_ms: None },
        // 408 Request Timeout: the server gave up waiting; asking again
        // may pass.
        408 => HttpVerdict::Retry { after_ms: None },
        _ => HttpVerdict::Permanent,
    }
}

/// A `Retry-After` value as a wait from `now_ms`: delay-seconds, or an
/// HTTP-date (RFC 9110 §10.2.3). `None` when it is neither; a date in the
/// past is no wait; a wait is at most [`RETRY_AFTER_MAX_MS`].
pub fn retry_after_ms(value: &str, now_ms: u64) -> Option<u64> {
    let v = value.trim();
    let ms = if let Ok(secs) = v.parse::<u64>() {
        secs.saturating_mul(1000)
    } else {
        let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
        let at_ms = u64::try_from(at.timestamp_millis()).unwrap_or(0);
        at_ms.saturating_sub(now_ms)
    };
    Some(ms.min(RETRY_AFTER_MAX_MS))
}

/// Checks an `expect` range: `lo <= hi`, both statuses (100..=599).
pub fn check_expect(expect: (u16, u16)) -> Result<(), String> {
    let ok = |s: u16| (100..=599).contains(&s);
    if !ok(expect.0) || !ok(expect.1) || expect.0 > expect.1 {
        return Err(format!(
            "expect [{}, {}] is not a range of statuses (100..=599, low first)",
            expect.0, expect.1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    #[test]
    fn statuses_decide() {
        let e = EXPECT_DEFAULT;
        assert_eq!(classify(200, e, None, NOW), HttpVerdict::Success);
        assert_eq!(classify(204, e, None, NOW), HttpVerdict::Success);
        assert_eq!(
            classify(500, e, None, NOW),
            HttpVerdict::Retry { after_ms: None }
        );
        assert_eq!(
            classify(502, e, Some("7"), NOW),
            HttpVerdict::Retry { after_ms: None },
            "Retry-After counts on 429 and 503 only"
        );
        assert_eq!(
            classify(429, e, Some("3"), NOW),
            HttpVerdict::Retry {
                after_ms: Some(3_000)
            }
        );
        assert_eq!(
            classify(503, e, Some("garbage"), NOW),
            HttpVerdict::Retry { after_ms: None }
        );
        assert_eq!(classify(404, e, None, NOW), HttpVerdict::Permanent);
        assert_eq!(classify(400, e, None, NOW), HttpVerdict::Permanent);
        assert_eq!(classify(301, e, None, NOW), HttpVerdict::Permanent);
        // A 404 that is expected is a success.
        assert_eq!(classify(404, (200, 404), None, NOW), HttpVerdict::Success);
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        assert_eq!(retry_after_ms("0", NOW), Some(0));
        assert_eq!(retry_after_ms(" 120 ", NOW), Some(120_000));
        assert_eq!(retry_after_ms("99999999", NOW), Some(RETRY_AFTER_MAX_MS));
        // 2023-11-14T22:13:20Z is NOW; ten seconds later:
        assert_eq!(
            retry_after_ms("Tue, 14 Nov 2023 22:13:30 GMT", NOW),
            Some(10_000)
        );
        assert_eq!(
            retry_after_ms("Tue, 14 Nov 2023 22:13:00 GMT", NOW),
            Some(0),
            "a date in the past: no wait"
        );
        assert_eq!(retry_after_ms("soon", NOW), None);
        assert_eq!(retry_after_ms("-5", NOW), None);
    }

    #[test]
    fn expect_ranges_are_checked() {
        assert!(check_expect((200, 299)).is_ok());
        assert!(check_expect((200, 200)).is_ok());
        assert!(check_expect((299, 200)).is_err());
        assert!(check_expect((0, 200)).is_err());
        assert!(check_expect((200, 600)).is_err());
    }
}
