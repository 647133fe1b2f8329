//! Statistics of a simulated span: percentiles of lateness, and series
//! over time (queue depth, pool utilisation) cut into equal buckets.

/// The `p`-th percentile (0..=100) of `sorted` by nearest rank; 0 when
/// empty.
pub fn percentile(sorted: &[u64], p: u32) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let p = p.min(100) as usize;
    // Nearest rank: the smallest value with at least p% at or below it.
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Equal buckets over `[from_ms, from_ms + count * bucket_ms)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buckets {
    /// Where the first starts.
    pub from_ms: u64,
    /// Each one's length (at least 1).
    pub bucket_ms: u64,
    /// How many.
    pub count: usize,
}

impl Buckets {
    /// `count` buckets (at least one) covering `[from_ms, until_ms)`.
    pub fn covering(from_ms: u64, until_ms: u64, count: usize) -> Buckets {
        let count = count.max(1);
        let span = until_ms.saturating_sub(from_ms).max(1);
        Buckets {
            from_ms,
            bucket_ms: span.div_ceil(count as u64).max(1),
            count,
        }
    }

    /// The mean level of each bucket of a sum of intervals `(start, end,
    /// level)` (each adds `level` over `[start, end)`).
    pub fn mean_of_intervals(&self, intervals: &[(u64, u64, u64)]) -> Vec<f64> {
        let mut area = vec![0u128; self.count];
        let end_all = self.from_ms + self.bucket_ms * self.count as u64;
        for &(s, e, level) in intervals {
            let (s, e) = (s.max(self.from_ms), e.min(end_all));
            if s >= e {
                continue;
            }
            let mut t = s;
            while t < e {
                let i = ((t - self.from_ms) / self.bucket_ms) as usize;
                let bucket_end = self.from_ms + (i as u64 + 1) * self.bucket_ms;
                let upto = bucket_end.min(e);
                area[i] += u128::from(upto - t) * u128::from(level);
                t = upto;
            }
        }
        area.iter()
            .map(|&a| a as f64 / self.bucket_ms as f64)
            .collect()
    }

    /// The highest level of each bucket of a step series `(at, level)`
    /// (sorted by time; a level holds until the next step).
    pub fn max_of_steps(&self, steps: &[(u64, u64)]) -> Vec<u64> {
        let mut out = vec![0u64; self.count];
        let end_all = self.from_ms + self.bucket_ms * self.count as u64;
        for (k, &(at, level)) in steps.iter().enumerate() {
            let until = steps.get(k + 1).map_or(end_all, |n| n.0);
            let (s, e) = (at.max(self.from_ms), until.min(end_all));
            if s > e || s >= end_all {
                continue;
            }
            let first = ((s - self.from_ms) / self.bucket_ms) as usize;
            // A step of zero length still counts in its bucket.
            let last = ((e.max(s + 1) - 1 - self.from_ms) / self.bucket_ms) as usize;
            for slot in out
                .iter_mut()
                .take(last.min(self.count - 1) + 1)
                .skip(first)
            {
                *slot = (*slot).max(level);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50), 50);
        assert_eq!(percentile(&v, 99), 99);
        assert_eq!(percentile(&v, 100), 100);
        assert_eq!(percentile(&[7], 99), 7);
        assert_eq!(percentile(&[], 50), 0);
        assert_eq!(percentile(&[1, 2, 3], 50), 2);
    }

    #[test]
    fn interval_means_per_bucket() {
        let b = Buckets::covering(0, 100, 4); // 25 ms each
        let got = b.mean_of_intervals(&[(0, 50, 2), (40, 60, 1), (90, 200, 1)]);
        assert_eq!(got, vec![2.0, 2.0 + 10.0 / 25.0, 10.0 / 25.0, 10.0 / 25.0]);
    }

    #[test]
    fn step_maxima_per_bucket() {
        let b = Buckets::covering(0, 100, 4);
        let got = b.max_of_steps(&[(0, 1), (30, 5), (30, 2), (60, 0), (99, 3)]);
        assert_eq!(got, vec![1, 5, 2, 3]);
    }
}
