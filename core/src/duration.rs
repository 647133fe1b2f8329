//! Durations in words, as definitions write them: `6h`, `90s`, `250ms`.

/// `ms` in the largest unit that divides it: `6h`, `90s`, `250ms`.
pub fn human_ms(ms: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1_000, "s"),
    ];
    for (unit, name) in UNITS {
        if ms >= unit && ms.is_multiple_of(unit) {
            return format!("{}{name}", ms / unit);
        }
    }
    format!("{ms}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_unit_that_divides() {
        assert_eq!(human_ms(6 * 3_600_000), "6h");
        assert_eq!(human_ms(90_000), "90s");
        assert_eq!(human_ms(250), "250ms");
        assert_eq!(human_ms(0), "0ms");
        assert_eq!(human_ms(2 * 86_400_000), "2d");
    }
}
