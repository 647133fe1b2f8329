//! A histogram read from a Prometheus text page (`/metrics`), the
//! difference of two scrapes of it, and its quantiles the way Prometheus's
//! `histogram_quantile` takes them: linear within the bucket that holds
//! the rank. So a quantile is as fine as the buckets around it (those of
//! `weir_raft_commit_seconds` are 0.1 ms apart from 0.2 to 2 ms).

/// One histogram without labels: cumulative counts by upper bound.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    /// (upper bound, observations at or below it), ascending; the last is
    /// `+Inf`.
    pub buckets: Vec<(f64, f64)>,
    /// Sum of the observations.
    pub sum: f64,
    /// Count of the observations.
    pub count: f64,
}

impl Histogram {
    /// The histogram `name` in `page`; `None` when the page has no bucket
    /// of it.
    pub fn parse(page: &str, name: &str) -> Option<Histogram> {
        let bucket = format!("{name}_bucket{{");
        let mut h = Histogram::default();
        for line in page.lines() {
            let Some((key, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<f64>() else {
                continue;
            };
            if let Some(labels) = key.strip_prefix(&bucket) {
                let le = labels
                    .split(',')
                    .find_map(|l| l.trim().strip_prefix("le=\""))
                    .and_then(|l| l.split('"').next())?;
                let le = if le == "+Inf" {
                    f64::INFINITY
                } else {
                    le.parse().ok()?
                };
                h.buckets.push((le, value));
            } else if key == format!("{name}_sum") {
                h.sum = value;
            } else if key == format!("{name}_count") {
                h.count = value;
            }
        }
        if h.buckets.is_empty() {
            return None;
        }
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(h)
    }

    /// What was observed between `before` and `self` (a later scrape of
    /// the same histogram); `None` when the buckets differ.
    pub fn since(&self, before: &Histogram) -> Option<Histogram> {
        if self.buckets.len() != before.buckets.len() {
            return None;
        }
        let mut buckets = Vec::with_capacity(self.buckets.len());
        for (a, b) in self.buckets.iter().zip(&before.buckets) {
            if a.0 != b.0 {
                return None;
            }
            buckets.push((a.0, a.1 - b.1));
        }
        Some(Histogram {
            buckets,
            sum: self.sum - before.sum,
            count: self.count - before.count,
        })
    }

    /// The `q` quantile (0..=1), interpolated within its bucket; `None`
    /// with no observation. A rank in the `+Inf` bucket gives the highest
    /// finite bound.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.buckets.last()?.1;
        if total <= 0.0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * total;
        let mut lower = (0.0, 0.0);
        for &(le, cum) in &self.buckets {
            if cum >= rank && cum > lower.1 {
                if le.is_infinite() {
                    return Some(lower.0);
                }
                let within = (rank - lower.1) / (cum - lower.1);
                return Some(lower.0 + (le - lower.0) * within);
            }
            lower = (le, cum);
        }
        Some(lower.0)
    }

    /// The mean observation; `None` with none.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "\
# TYPE weir_raft_commit_seconds histogram
weir_raft_commit_seconds_bucket{le=\"0.001\"} 10
weir_raft_commit_seconds_bucket{le=\"0.002\"} 30
weir_raft_commit_seconds_bucket{le=\"0.004\"} 40
weir_raft_commit_seconds_bucket{le=\"+Inf\"} 40
weir_raft_commit_seconds_sum 0.07
weir_raft_commit_seconds_count 40
weir_raft_term 3
";

    #[test]
    fn a_histogram_is_read_by_name() {
        let h = Histogram::parse(PAGE, "weir_raft_commit_seconds").expect("present");
        assert_eq!(h.buckets.len(), 4);
        assert_eq!(h.buckets[3], (f64::INFINITY, 40.0));
        assert_eq!(h.count, 40.0);
        assert!((h.sum - 0.07).abs() < 1e-12);
        assert_eq!(Histogram::parse(PAGE, "weir_other_seconds"), None);
    }

    /// Quantiles as `histogram_quantile` gives them, one row a case.
    #[test]
    fn quantiles_interpolate_within_their_bucket() {
        let h = Histogram::parse(PAGE, "weir_raft_commit_seconds").expect("present");
        for (i, (q, want)) in [
            (0.0, 0.0),
            // rank 10: the top of the first bucket.
            (0.25, 0.001),
            // rank 20: halfway through (0.001, 0.002].
            (0.5, 0.0015),
            // rank 35: halfway through (0.002, 0.004].
            (0.875, 0.003),
            (1.0, 0.004),
        ]
        .into_iter()
        .enumerate()
        {
            let got = h.quantile(q).expect("observations");
            assert!(
                (got - want).abs() < 1e-9,
                "#{i}: q {q}: got {got}, want {want}"
            );
        }
        assert!((h.mean().expect("observations") - 0.00175).abs() < 1e-12);
    }

    #[test]
    fn a_rank_beyond_the_last_bound_gives_the_last_bound() {
        let h = Histogram {
            buckets: vec![(0.001, 1.0), (f64::INFINITY, 4.0)],
            sum: 1.0,
            count: 4.0,
        };
        assert_eq!(h.quantile(0.5), Some(0.001));
    }

    #[test]
    fn the_difference_of_two_scrapes_is_what_was_observed_between() {
        let before = Histogram::parse(PAGE, "weir_raft_commit_seconds").expect("present");
        // The first bucket unchanged; 20 more in the second.
        let later = PAGE
            .replace("le=\"0.002\"} 30", "le=\"0.002\"} 50")
            .replace("le=\"0.004\"} 40", "le=\"0.004\"} 60")
            .replace("le=\"+Inf\"} 40", "le=\"+Inf\"} 60")
            .replace("_sum 0.07", "_sum 0.11")
            .replace("_count 40", "_count 60");
        let after = Histogram::parse(&later, "weir_raft_commit_seconds").expect("present");
        let d = after.since(&before).expect("same buckets");
        assert_eq!(
            d.buckets.iter().map(|b| b.1).collect::<Vec<_>>(),
            vec![0.0, 20.0, 20.0, 20.0]
        );
        assert_eq!(d.count, 20.0);
        // All 20 new ones in (0.001, 0.002]: the median is its middle.
        assert!((d.quantile(0.5).expect("observations") - 0.0015).abs() < 1e-9);
        assert_eq!(Histogram::default().quantile(0.5), None);
        let other = Histogram {
            buckets: vec![(0.5, 1.0)],
            ..Histogram::default()
        };
        assert_eq!(after.since(&other), None, "different buckets");
    }
}
