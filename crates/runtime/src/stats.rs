//! Summaries of repeated timings: median and spread (min, p10, p90, max).

/// Milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub samples: usize,
    pub median: f64,
    pub min: f64,
    pub p10: f64,
    pub p90: f64,
    pub max: f64,
}

/// Median (mean of the two middle samples for an even count) and nearest-rank
/// percentiles; `None` for no samples or a non-finite sample.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    // Nearest rank: the smallest sample with at least p% of samples at or below it.
    let rank = |p: f64| s[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
    Some(Summary { samples: n, median, min: s[0], p10: rank(0.10), p90: rank(0.90), max: s[n - 1] })
}

/// GB/s (10^9 bytes per second) for `bytes` moved in `ms` milliseconds.
pub fn gbps(bytes: u64, ms: f64) -> f64 {
    if ms > 0.0 {
        bytes as f64 / (ms * 1e-3) / 1e9
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_percentiles() {
        let s = summarize(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert_eq!((s.p10, s.p90), (1.0, 5.0));
        let s = summarize(&(1..=10).map(f64::from).collect::<Vec<_>>()).unwrap();
        assert_eq!(s.median, 5.5);
        assert_eq!((s.p10, s.p90), (1.0, 9.0));
        assert_eq!(s.samples, 10);
    }

    #[test]
    fn empty_or_nan_gives_none() {
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn bandwidth() {
        // 512 MiB in 0.2 ms is 2684.35 GB/s.
        assert!((gbps(512 << 20, 0.2) - 2684.35456).abs() < 1e-3);
    }
}
