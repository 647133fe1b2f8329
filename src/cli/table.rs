//! Tables and times for the CLI's human output: one place that decides
//! widths and styling (comfy-table), with no escape codes when stdout is
//! not a terminal.

use std::io::IsTerminal;

use comfy_table::{presets, ContentArrangement, Table};

use super::output::out;

/// A table with these column headers.
pub fn new(headers: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().map(|h| h.to_uppercase()).collect::<Vec<_>>());
    if !std::io::stdout().is_terminal() {
        t.force_no_tty();
    }
    t
}

/// Prints a table, each line trimmed of trailing blanks.
pub fn print(t: &Table) {
    for line in t.lines() {
        out(line.trim_end());
    }
}

/// An instant in the zone named `zone`: UTC as [`time`] shows it, any other
/// zone with its offset (`2026-03-29 03:00:00+02:00`); `-` for none.
pub fn time_in(ms: Option<u64>, zone: &str) -> String {
    match weir_core::zone::Zone::parse(zone) {
        Ok(z) if !z.is_utc() => {
            ms.map_or_else(|| "-".into(), |ms| z.rfc3339(ms).replacen('T', " ", 1))
        }
        _ => time(ms),
    }
}

/// An instant as UTC `YYYY-MM-DD HH:MM:SS`, or `-`.
pub fn time(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".into(), fmt_time)
}

/// An instant as UTC `YYYY-MM-DD HH:MM:SS`.
pub fn fmt_time(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A duration in ms, short: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn duration(ms: Option<u64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, ms % 60_000 / 1000)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, ms % 3_600_000 / 60_000)
    }
}

/// A size in bytes, short: `512 B`, `97.7 KiB`, `4.0 MiB`, `1.5 GiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// The first line of `s`, at most `max` characters.
pub fn first_line(s: Option<&str>, max: usize) -> String {
    let line = s.unwrap_or("").lines().next().unwrap_or("");
    if line.chars().count() > max {
        let cut: String = line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations() {
        let cases = [
            (None, "-"),
            (Some(850), "850ms"),
            (Some(12_340), "12.3s"),
            (Some(245_000), "4m05s"),
            (Some(7_380_000), "2h03m"),
        ];
        for (i, (ms, want)) in cases.iter().enumerate() {
            assert_eq!(super::duration(*ms), *want, "#{i}: {ms:?}");
        }
    }

    #[test]
    fn sizes() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (100_000, "97.7 KiB"),
            (4 << 20, "4.0 MiB"),
            (3 << 29, "1.5 GiB"),
            (5 << 40, "5.0 TiB"),
            (u64::MAX, "16777216.0 TiB"),
        ];
        for (i, (bytes, want)) in cases.iter().enumerate() {
            assert_eq!(super::size(*bytes), *want, "#{i}: {bytes}");
        }
    }
}
