//! The on-disk line format of attempt logs, one line per line of output:
//!
//! ```text
//! 2026-12-01T05:20:01.123Z out loading 12 rows
//! 2026-12-01T05:20:01.125Z err warning: row 7 has no id
//! 2026-12-01T05:20:09.400Z cut 7340032 bytes in 81920 lines cut
//! ```
//!
//! A fixed-width UTC timestamp with milliseconds, the stream (`out`, `err`,
//! or `cut` for the marker where lines were dropped), then the text as the
//! command wrote it, lossily decoded when it is not UTF-8. The text never
//! holds a newline (it is what separates lines), so `cat` shows the log as
//! it is and a reader splits it on `\n` alone. The fixed width of the
//! prefix ([`PREFIX_BYTES`]) also lets the writer convert between file
//! bytes and text bytes without reading the lines again.

use super::record::Stream;

/// The bytes before a line's text: the timestamp, a space, the stream and
/// a space.
pub const PREFIX_BYTES: usize = TIMESTAMP_BYTES + 1 + 3 + 1;
/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
const TIMESTAMP_BYTES: usize = 24;
/// The last instant that four year digits can show (9999-12-31T23:59:59.999Z).
const TIMESTAMP_MS_MAX: u64 = 253_402_300_799_999;

impl Stream {
    /// Its three-letter name in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Out => "out",
            Stream::Err => "err",
            Stream::Cut => "cut",
        }
    }

    fn parse(s: &str) -> Option<Stream> {
        match s {
            "out" => Some(Stream::Out),
            "err" => Some(Stream::Err),
            "cut" => Some(Stream::Cut),
            _ => None,
        }
    }
}

impl std::fmt::Display for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month, day) → days since 1970-01-01 (`days_from_civil`).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `at_ms` (ms since the epoch) as `YYYY-MM-DDTHH:MM:SS.mmmZ`; instants
/// past year 9999 show as its last millisecond, so the width never changes.
pub fn timestamp(at_ms: u64) -> String {
    let at_ms = at_ms.min(TIMESTAMP_MS_MAX);
    let (days, ms_of_day) = ((at_ms / 86_400_000) as i64, at_ms % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let secs = ms_of_day / 1000;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        ms_of_day % 1000
    )
}

/// Reads a timestamp written by [`timestamp`].
pub fn parse_timestamp(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() != TIMESTAMP_BYTES {
        return None;
    }
    const SHAPE: &[u8; TIMESTAMP_BYTES] = b"dddd-dd-ddTdd:dd:dd.dddZ";
    if !SHAPE.iter().zip(b).all(|(want, got)| match want {
        b'd' => got.is_ascii_digit(),
        _ => want == got,
    }) {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> u64 { s[r].parse().expect("digits checked") };
    let (year, month, day) = (n(0..4), n(5..7) as u32, n(8..10) as u32);
    let (hour, minute, second, ms) = (n(11..13), n(14..16), n(17..19), n(20..23));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 59 {
        return None;
    }
    let days = days_from_civil(year as i64, month, day);
    let days = u64::try_from(days).ok()?;
    Some(days * 86_400_000 + ((hour * 60 + minute) * 60 + second) * 1000 + ms)
}

/// One line of the file, with its newline.
pub fn format_line(at_ms: u64, stream: Stream, text: &str) -> String {
    let mut line = String::with_capacity(PREFIX_BYTES + text.len() + 1);
    line.push_str(&timestamp(at_ms));
    line.push(' ');
    line.push_str(stream.as_str());
    line.push(' ');
    line.push_str(text);
    line.push('\n');
    line
}

/// A line of the file (without its newline) as (ms, stream, text).
pub fn parse_line(line: &str) -> Result<(u64, Stream, &str), String> {
    let (Some(ts), Some(stream)) = (line.get(..TIMESTAMP_BYTES), line.get(TIMESTAMP_BYTES..))
    else {
        return Err(format!(
            "shorter than the {PREFIX_BYTES}-byte prefix (timestamp, stream)"
        ));
    };
    let at_ms = parse_timestamp(ts).ok_or_else(|| format!("{ts:?} is not a timestamp"))?;
    let rest = stream
        .strip_prefix(' ')
        .ok_or("no space after the timestamp")?;
    let (name, text) = match rest.get(..3) {
        Some(name) => (name, &rest[3..]),
        None => return Err("no stream after the timestamp".into()),
    };
    let stream = Stream::parse(name).ok_or_else(|| format!("{name:?} is not a stream"))?;
    let text = match text.strip_prefix(' ') {
        Some(t) => t,
        None if text.is_empty() => "",
        None => return Err(format!("no space after the stream {name:?}")),
    };
    Ok((at_ms, stream, text))
}

/// The text of a cut marker: what was dropped, in text bytes (each
/// line's text and its newline) and lines.
pub fn cut_text(bytes: u64, lines: u64) -> String {
    format!("{bytes} bytes in {lines} lines cut")
}

/// Reads a cut marker's text as (bytes, lines).
pub fn parse_cut(text: &str) -> Option<(u64, u64)> {
    let mut words = text.split(' ');
    let bytes = words.next()?.parse().ok()?;
    let lines = match (words.next(), words.next(), words.next()) {
        (Some("bytes"), Some("in"), Some(lines)) => lines.parse().ok()?,
        _ => return None,
    };
    Some((bytes, lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instants and their text, checked both ways (the first rows from
    /// `date -u -d @S +%FT%T`).
    #[test]
    fn timestamps_round_trip() {
        let cases: [(u64, &str); 7] = [
            (0, "1970-01-01T00:00:00.000Z"),
            (1, "1970-01-01T00:00:00.001Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (1_709_164_799_999, "2024-02-28T23:59:59.999Z"),
            (1_796_102_401_123, "2026-12-01T05:20:01.123Z"),
            (4_107_542_400_000, "2100-03-01T00:00:00.000Z"),
            (TIMESTAMP_MS_MAX, "9999-12-31T23:59:59.999Z"),
        ];
        for (i, (ms, text)) in cases.iter().enumerate() {
            assert_eq!(timestamp(*ms), *text, "#{i}: format {ms}");
            assert_eq!(parse_timestamp(text), Some(*ms), "#{i}: parse {text}");
        }
        assert_eq!(timestamp(u64::MAX), "9999-12-31T23:59:59.999Z");
        for bad in [
            "",
            "2026-12-01T05:20:01Z",
            "2026-13-01T05:20:01.123Z",
            "2026-12-01 05:20:01.123Z",
            "+026-12-01T05:20:01.123Z",
        ] {
            assert_eq!(parse_timestamp(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn lines_round_trip() {
        let cases = [
            (Stream::Out, "hello world"),
            (Stream::Err, ""),
            (Stream::Err, "  leading spaces and a trailing one "),
            (Stream::Out, "tab\there, carriage return\r, é, \u{fffd}"),
            (Stream::Cut, "12 bytes in 3 lines cut"),
        ];
        for (i, (stream, text)) in cases.iter().enumerate() {
            let line = format_line(1_796_102_401_123, *stream, text);
            assert!(line.ends_with('\n'), "#{i}");
            assert_eq!(line.len(), PREFIX_BYTES + text.len() + 1, "#{i}");
            let got = parse_line(line.strip_suffix('\n').unwrap()).unwrap();
            assert_eq!(got, (1_796_102_401_123, *stream, *text), "#{i}: {line:?}");
        }
        for bad in [
            "",
            "2026-12-01T05:20:01.123Z",
            "2026-12-01T05:20:01.123Z xyz a",
            "2026-12-01T05:20:01.123Zout a",
            "garbage garbage garbage garbage",
        ] {
            assert!(parse_line(bad).is_err(), "{bad:?}");
        }
        // The empty text may lose its trailing space to an editor.
        assert_eq!(
            parse_line("2026-12-01T05:20:01.123Z out").unwrap(),
            (1_796_102_401_123, Stream::Out, "")
        );
    }

    #[test]
    fn cut_markers_round_trip() {
        assert_eq!(
            parse_cut(&cut_text(7_340_032, 81_920)),
            Some((7_340_032, 81_920))
        );
        assert_eq!(parse_cut("lots cut"), None);
    }
}
