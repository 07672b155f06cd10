//! RTT statistics: samples go into an HDR histogram (1 ns .. 60 s, 3 significant digits) and
//! come out as percentiles. Every percentile is the histogram's value at that quantile, so it is
//! within 0.1% of the exact sample.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Largest trackable RTT: 60 s. Longer samples are clamped (and show up as `max`).
pub const HIGHEST_NS: u64 = 60_000_000_000;
/// Significant decimal digits kept.
pub const SIGFIG: u8 = 3;

/// Percentiles of one set of RTT samples, ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RttSummary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample.
    pub max: u64,
    /// Arithmetic mean (secondary; percentiles are the result).
    pub mean: f64,
}

/// An empty histogram with this crate's bounds (`None` only if hdrhistogram rejected the
/// constant bounds, which it does not).
pub fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, HIGHEST_NS, SIGFIG).ok()
}

/// Records `samples` (ns) and summarises them; `None` for no samples.
pub fn summarize(samples: &[u64]) -> Option<RttSummary> {
    let mut h = new_histogram()?;
    for &s in samples {
        h.saturating_record(s.max(1));
    }
    summarize_histogram(&h)
}

/// Summarises a filled histogram; `None` when it is empty.
pub fn summarize_histogram(h: &Histogram<u64>) -> Option<RttSummary> {
    if h.is_empty() {
        return None;
    }
    Some(RttSummary {
        count: h.len(),
        min: h.min(),
        p50: h.value_at_quantile(0.50),
        p90: h.value_at_quantile(0.90),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
        mean: h.mean(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(got: u64, want: u64) -> bool {
        // 3 significant digits: within 0.1% (+1 for rounding at the bucket edge).
        got.abs_diff(want) <= want / 1000 + 1
    }

    #[test]
    fn percentiles_of_one_to_a_thousand() {
        let samples: Vec<u64> = (1..=1000).collect();
        let s = summarize(&samples).unwrap();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min, 1);
        assert_eq!(s.p50, 500);
        assert_eq!(s.p90, 900);
        assert_eq!(s.p99, 990);
        assert_eq!(s.p999, 999);
        assert_eq!(s.max, 1000);
        assert!((s.mean - 500.5).abs() < 0.5);
    }

    #[test]
    fn large_values_keep_three_digits() {
        // 10_000 samples: 9_990 at 2 us, 10 at 5 ms (the 0.1% tail).
        let mut samples = vec![2_000u64; 9_990];
        samples.extend(std::iter::repeat_n(5_000_000u64, 10));
        let s = summarize(&samples).unwrap();
        assert!(close(s.p50, 2_000));
        assert!(close(s.p99, 2_000));
        // The 99.9th percentile is the 9_990th sample: still 2 us.
        assert!(close(s.p999, 2_000), "{s:?}");
        assert!(close(s.max, 5_000_000), "{s:?}");
        // One more tail sample moves p99.9 into the tail.
        samples.push(5_000_000);
        let s = summarize(&samples).unwrap();
        assert!(close(s.p999, 5_000_000), "{s:?}");
    }

    #[test]
    fn clamps_and_empties() {
        assert_eq!(summarize(&[]), None);
        let s = summarize(&[0, u64::MAX]).unwrap();
        assert_eq!(s.min, 1);
        assert!(close(s.max, HIGHEST_NS));
    }
}
