//! The simulator's random draws: each one a function of the seed and of
//! what it is for (the ticket's key, the attempt, a stream number), never
//! of the order in which attempts happen to run. Two attempts that start in
//! the same virtual millisecond get the same draws whichever runs first.

/// A uniform draw in `[0, 1)` for attempt `attempt` of `key`, stream
/// `stream` (one stream per decision: duration, failure, …).
pub fn unit(seed: u64, key: &str, attempt: u32, stream: u64) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let x = splitmix(seed ^ splitmix(h ^ (u64::from(attempt) << 32) ^ stream));
    // The top 53 bits as a fraction: exactly representable, below 1.
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// SplitMix64's finaliser: a bijection that scatters nearby inputs.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_stable_and_spread() {
        assert_eq!(unit(1, "a", 1, 0), unit(1, "a", 1, 0));
        assert_ne!(unit(1, "a", 1, 0), unit(2, "a", 1, 0));
        assert_ne!(unit(1, "a", 1, 0), unit(1, "a", 2, 0));
        assert_ne!(unit(1, "a", 1, 0), unit(1, "a", 1, 1));
        let n = 10_000;
        let below_half = (0..n)
            .filter(|i| unit(7, &format!("k{i}"), 1, 0) < 0.5)
            .count();
        assert!((4_700..5_300).contains(&below_half), "{below_half}");
    }
}
