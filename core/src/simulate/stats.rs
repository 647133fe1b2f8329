//! Statistics of a simulated span: percentiles of lateness, and series
//! over time (queue depth, pool utilisation) cut into equal buckets.
//!
//! Everything here is built as the span runs, in memory that does not grow
//! with it: a series is a fixed number of buckets fed one interval or one
//! step at a time, and lateness goes into a [`Histogram`] whose buckets
//! share four significant digits (exact below 10 s, within 0.1% above), so
//! a week of runs costs what an hour does. Integers and `BTreeMap`s only:
//! the same inputs give the same figures.

use std::collections::BTreeMap;

/// The most buckets a series over time has.
pub const SERIES_BUCKETS_MAX: u64 = 200;
/// Bucket sizes a series may use, in ms: the smallest that keeps a series
/// within [`SERIES_BUCKETS_MAX`] is taken.
const BUCKET_SIZES_MS: [u64; 12] = [
    1_000, 10_000, 60_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000,
    43_200_000, 86_400_000,
];

/// Significant decimal digits a [`Histogram`] keeps.
pub const HISTOGRAM_DIGITS: u32 = 4;

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
    /// The buckets of a span's series: of the first size in
    /// `BUCKET_SIZES_MS` (1 s … 1 day) that needs at most
    /// [`SERIES_BUCKETS_MAX`] of them.
    pub fn for_span(from_ms: u64, until_ms: u64) -> Buckets {
        let span = until_ms.saturating_sub(from_ms);
        let bucket_ms = BUCKET_SIZES_MS
            .into_iter()
            .find(|b| span.div_ceil(*b) <= SERIES_BUCKETS_MAX)
            .unwrap_or(span.div_ceil(SERIES_BUCKETS_MAX))
            .max(1);
        Buckets {
            from_ms,
            bucket_ms,
            count: span.div_ceil(bucket_ms) as usize,
        }
    }

    /// Where the last bucket ends.
    pub fn end_ms(&self) -> u64 {
        self.from_ms + self.bucket_ms * self.count as u64
    }

    /// Adds `level` over `[s, e)` to `area` (one sum per bucket, in
    /// level·ms); the part outside the buckets is left out.
    pub fn add_interval(&self, area: &mut [u128], s: u64, e: u64, level: u64) {
        let (s, e) = (s.max(self.from_ms), e.min(self.end_ms()));
        let mut t = s;
        while t < e {
            let i = ((t - self.from_ms) / self.bucket_ms) as usize;
            let bucket_end = self.from_ms + (i as u64 + 1) * self.bucket_ms;
            let upto = bucket_end.min(e);
            area[i] += u128::from(upto - t) * u128::from(level);
            t = upto;
        }
    }

    /// Each bucket's mean level from its `area` ([`Buckets::add_interval`]).
    pub fn means(&self, area: &[u128]) -> Vec<f64> {
        area.iter()
            .map(|&a| a as f64 / self.bucket_ms as f64)
            .collect()
    }

    /// Raises `out` to `level` in every bucket `[at, until)` touches (a
    /// step of zero length still counts in its bucket).
    pub fn raise(&self, out: &mut [u64], at: u64, until: u64, level: u64) {
        let end_all = self.end_ms();
        let (s, e) = (at.max(self.from_ms), until.min(end_all));
        if s > e || s >= end_all || self.count == 0 {
            return;
        }
        let first = ((s - self.from_ms) / self.bucket_ms) as usize;
        let last = ((e.max(s + 1) - 1 - self.from_ms) / self.bucket_ms) as usize;
        for slot in out
            .iter_mut()
            .take(last.min(self.count - 1) + 1)
            .skip(first)
        {
            *slot = (*slot).max(level);
        }
    }

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
        for &(s, e, level) in intervals {
            self.add_interval(&mut area, s, e, level);
        }
        self.means(&area)
    }

    /// The highest level of each bucket of a step series `(at, level)`
    /// (sorted by time; a level holds until the next step).
    pub fn max_of_steps(&self, steps: &[(u64, u64)]) -> Vec<u64> {
        let mut out = vec![0u64; self.count];
        for (k, &(at, level)) in steps.iter().enumerate() {
            let until = steps.get(k + 1).map_or(self.end_ms(), |n| n.0);
            self.raise(&mut out, at, until, level);
        }
        out
    }
}

/// A step series (a level that changes at instants) kept as each
/// bucket's highest level, fed one change at a time: the same buckets
/// [`Buckets::max_of_steps`] gives of the whole series, in fixed memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepMax {
    buckets: Buckets,
    per_bucket: Vec<u64>,
    /// The step under way: since when, at what level.
    last: Option<(u64, u64)>,
    max: u64,
}

impl StepMax {
    /// An empty series over `buckets`.
    pub fn new(buckets: Buckets) -> StepMax {
        StepMax {
            buckets,
            per_bucket: vec![0; buckets.count],
            last: None,
            max: 0,
        }
    }

    /// The level is `level` from `at` on (`at` never before the last
    /// change's). Several changes at one instant count as their highest.
    pub fn set(&mut self, at: u64, level: u64) {
        self.max = self.max.max(level);
        match &mut self.last {
            Some(last) if last.0 == at => last.1 = last.1.max(level),
            Some(last) if last.1 == level => {}
            Some(last) => {
                let (from, was) = *last;
                self.buckets.raise(&mut self.per_bucket, from, at, was);
                *last = (at, level);
            }
            None => self.last = Some((at, level)),
        }
    }

    /// The highest level of each bucket, the step under way held to the
    /// buckets' end.
    pub fn per_bucket(&self) -> Vec<u64> {
        let mut out = self.per_bucket.clone();
        if let Some((at, level)) = self.last {
            self.buckets
                .raise(&mut out, at, self.buckets.end_ms(), level);
        }
        out
    }

    /// The highest level seen.
    pub fn max(&self) -> u64 {
        self.max
    }
}

/// A count of values (ms) by bucket, each bucket the values that share
/// their first [`HISTOGRAM_DIGITS`] significant digits (every value below
/// 10,000 its own), with the largest value it holds. A percentile is the
/// largest value of the bucket its rank falls in: a value that occurred,
/// exact below 10,000 and when the values of its bucket are equal, else
/// above the exact one by less than 0.1% (a lateness of 26m50.123s may
/// read 26m50.999s). At most 9,000 buckets per power of ten, however many
/// values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Bucket → (values, the largest).
    counts: BTreeMap<u64, (u64, u64)>,
    n: u64,
}

impl Histogram {
    /// The bucket of `v`: `v` cut to [`HISTOGRAM_DIGITS`] significant digits.
    pub fn bucket_of(v: u64) -> u64 {
        let keep = 10u64.pow(HISTOGRAM_DIGITS);
        let mut unit = 1u64;
        while v / unit >= keep {
            unit *= 10;
        }
        v / unit * unit
    }

    /// Counts `v`.
    pub fn record(&mut self, v: u64) {
        let b = self.counts.entry(Self::bucket_of(v)).or_default();
        b.0 += 1;
        b.1 = b.1.max(v);
        self.n += 1;
    }

    /// Takes back one count of `v` (a value recorded before). Its bucket
    /// keeps its largest value, so a percentile may still read it: within
    /// 0.1% of what it would be otherwise.
    pub fn remove(&mut self, v: u64) {
        let k = Self::bucket_of(v);
        if let Some(b) = self.counts.get_mut(&k) {
            b.0 -= 1;
            self.n -= 1;
            if b.0 == 0 {
                self.counts.remove(&k);
            }
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        for (k, (c, m)) in &other.counts {
            let b = self.counts.entry(*k).or_default();
            b.0 += c;
            b.1 = b.1.max(*m);
        }
        self.n += other.n;
    }

    /// Values counted.
    pub fn len(&self) -> u64 {
        self.n
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The largest value, exactly; 0 when empty.
    pub fn max(&self) -> u64 {
        self.counts.values().next_back().map_or(0, |b| b.1)
    }

    /// Buckets in use (the memory it holds).
    pub fn buckets(&self) -> usize {
        self.counts.len()
    }

    /// The `p`-th percentile (0..=100) by nearest rank, as the largest
    /// value of its bucket; 0 when empty.
    pub fn percentile(&self, p: u32) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let p = u64::from(p.min(100));
        let rank = (p * self.n).div_ceil(100).max(1);
        let mut seen = 0;
        for (c, largest) in self.counts.values() {
            seen += c;
            if seen >= rank {
                return *largest;
            }
        }
        unreachable!("rank {rank} is at most the count {}", self.n)
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
    fn span_buckets_are_the_smallest_size_that_fits() {
        let day = 86_400_000;
        let cases = [
            (60_000, 1_000, 60),
            (3_600_000, 60_000, 60),
            (day, 600_000, 144),
            (7 * day, 3_600_000, 168),
            (400 * day, 0, 0),
        ];
        for (i, &(span, bucket, count)) in cases.iter().enumerate() {
            let b = Buckets::for_span(5, 5 + span);
            if count == 0 {
                assert!(b.count as u64 <= SERIES_BUCKETS_MAX, "#{i}: {b:?}");
                continue;
            }
            assert_eq!((b.bucket_ms, b.count), (bucket, count), "#{i}: span {span}");
        }
    }

    #[test]
    fn streamed_steps_equal_the_whole_series() {
        let b = Buckets::covering(0, 100, 4);
        // Changes as a watcher sees them: two at one instant, a repeat.
        let changes = [(0, 1), (30, 5), (30, 2), (40, 2), (60, 0), (99, 3)];
        let mut s = StepMax::new(b);
        for &(at, level) in &changes {
            s.set(at, level);
        }
        // The whole series as the collector used to keep it: one step per
        // instant (the highest), a repeated level dropped.
        let whole = [(0, 1), (30, 5), (40, 2), (60, 0), (99, 3)];
        assert_eq!(s.per_bucket(), b.max_of_steps(&whole));
        assert_eq!(s.max(), 5);
    }

    #[test]
    fn histogram_keeps_four_digits_and_exact_small_values() {
        let cases = [
            (0, 0),
            (9_999, 9_999),
            (10_000, 10_000),
            (10_007, 10_000),
            (1_610_123, 1_610_000),
            (99_999_999, 99_990_000),
            (u64::MAX, u64::MAX / 10u64.pow(16) * 10u64.pow(16)),
        ];
        for (i, &(v, want)) in cases.iter().enumerate() {
            assert_eq!(Histogram::bucket_of(v), want, "#{i}: {v}");
        }
    }

    #[test]
    fn histogram_percentiles_are_exact_below_ten_thousand() {
        // Values below 10,000 are exact: the histogram's percentiles are
        // the sorted list's.
        let v: Vec<u64> = (0..1_000).map(|i| (i * 7_919) % 9_973).collect();
        let mut h = Histogram::default();
        for &x in &v {
            h.record(x);
        }
        let mut sorted = v.clone();
        sorted.sort_unstable();
        for p in [1, 50, 99, 100] {
            assert_eq!(h.percentile(p), percentile(&sorted, p), "p{p}");
        }
        assert_eq!(h.max(), *sorted.last().unwrap());
        // Above, the largest value of the bucket (within 0.1% above the
        // exact one); equal values stay exact; merging adds.
        let mut big = Histogram::default();
        big.record(1_610_123);
        big.record(1_610_999);
        assert_eq!(big.percentile(50), 1_610_999);
        assert_eq!(big.max(), 1_610_999);
        assert_eq!(big.buckets(), 1);
        let mut same = Histogram::default();
        for _ in 0..5 {
            same.record(600_001);
        }
        assert_eq!(
            (same.percentile(50), same.percentile(99)),
            (600_001, 600_001)
        );
        h.merge(&big);
        assert_eq!((h.len(), h.max()), (1_002, 1_610_999));
        // Taking values back.
        same.remove(600_001);
        big.remove(1_610_123);
        assert_eq!((same.len(), big.len(), big.buckets()), (4, 1, 1));
        big.remove(1_610_999);
        assert!(big.is_empty() && big.buckets() == 0 && big.max() == 0);
        assert_eq!(Histogram::default().percentile(99), 0);
    }

    #[test]
    fn step_maxima_per_bucket() {
        let b = Buckets::covering(0, 100, 4);
        let got = b.max_of_steps(&[(0, 1), (30, 5), (30, 2), (60, 0), (99, 3)]);
        assert_eq!(got, vec![1, 5, 2, 3]);
    }
}
