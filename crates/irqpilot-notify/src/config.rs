//! What a benchmark run measures and for how long. The defaults finish in well under a minute on
//! a small machine; [`BenchConfig::scaled`] makes longer runs.

use crate::hybrid::HybridConfig;
use crate::mechanism::{Mechanism, Mode};
use crate::placement::PlacementKind;
use serde::Serialize;
use std::time::Duration;

/// Settings of one `bench notify` run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchConfig {
    /// Measured back-to-back round trips per mechanism and placement. Default 20 000.
    pub iterations: u64,
    /// Discarded back-to-back warm-up round trips. Default 2 000.
    pub warmup: u64,
    /// Idle gaps between a reply and the next ping, each its own variant (back-to-back always
    /// runs). Default 100 us and 1 ms.
    #[serde(serialize_with = "ser_gaps_us", rename = "gaps_us")]
    pub gaps: Vec<Duration>,
    /// Measured round trips per gap variant, capped so one variant sleeps at most
    /// `gap_time_budget`. Default 1 000.
    pub gap_iterations: u64,
    /// Discarded warm-up round trips per gap variant (with the gap). Default 20.
    pub gap_warmup: u64,
    /// Most idle time one gap variant may spend sleeping. Default 1 s.
    #[serde(serialize_with = "ser_ms", rename = "gap_time_budget_ms")]
    pub gap_time_budget: Duration,
    /// Mechanisms to run, in order. Default: all.
    pub mechanisms: Vec<Mechanism>,
    /// Placement kinds to run (those the machine has). Default: all.
    pub placements: Vec<PlacementKind>,
    /// Threads or processes. Default threads.
    pub mode: Mode,
    /// Wall time for all measured round trips of a [`run`](crate::run), split evenly over its
    /// measurements as a per-measurement cap (a measurement that reaches its cap stops early and
    /// reports the round trips it made). Warm-ups and set-up are not counted. Default 40 s, so a
    /// default run stays under a minute whatever the number of placements. `None`: no cap.
    #[serde(serialize_with = "ser_opt_ms", rename = "time_budget_ms")]
    pub time_budget: Option<Duration>,
    /// Cap of one measurement's measured round trips; set by [`run`](crate::run) from
    /// `time_budget`, or by hand for [`measure_one`](crate::measure_one). `None`: no cap.
    #[serde(serialize_with = "ser_opt_ms", rename = "max_measure_time_ms")]
    pub max_measure_time: Option<Duration>,
    /// Each measurement is split into this many rounds, and a gap variant runs round 1 of every
    /// mechanism, then round 2, ..., so that changes in machine load during the run fall on all
    /// mechanisms alike. Samples and CPU times of the rounds are merged. Default 3.
    pub rounds: u32,
    /// Give up on one measurement after this long. Default 30 s.
    #[serde(serialize_with = "ser_ms", rename = "timeout_ms")]
    pub timeout: Duration,
    /// Tuning of the `hybrid` mechanism.
    pub hybrid: HybridConfig,
}

fn ser_gaps_us<S: serde::Serializer>(gaps: &[Duration], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(gaps.iter().map(|g| g.as_micros() as u64))
}

fn ser_opt_ms<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&(d.as_millis() as u64)),
        None => s.serialize_none(),
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_millis() as u64)
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            iterations: 20_000,
            warmup: 2_000,
            gaps: vec![Duration::from_micros(100), Duration::from_millis(1)],
            gap_iterations: 1_000,
            gap_warmup: 20,
            gap_time_budget: Duration::from_secs(1),
            mechanisms: Mechanism::ALL.to_vec(),
            placements: PlacementKind::ALL.to_vec(),
            mode: Mode::Threads,
            time_budget: Some(Duration::from_secs(40)),
            max_measure_time: None,
            rounds: 3,
            timeout: Duration::from_secs(30),
            hybrid: HybridConfig::default(),
        }
    }
}

impl BenchConfig {
    /// The defaults with every iteration count and the gap time budget multiplied by `factor`
    /// (e.g. 10 for a run ten times longer and ten times more samples in the tails).
    pub fn scaled(factor: f64) -> BenchConfig {
        let d = BenchConfig::default();
        let f = if factor.is_finite() && factor > 0.0 {
            factor
        } else {
            1.0
        };
        let mul = |n: u64| ((n as f64 * f).round() as u64).max(1);
        BenchConfig {
            iterations: mul(d.iterations),
            warmup: mul(d.warmup),
            gap_iterations: mul(d.gap_iterations),
            gap_time_budget: d.gap_time_budget.mul_f64(f),
            time_budget: d.time_budget.map(|b| b.mul_f64(f)),
            timeout: d.timeout.max(d.timeout.mul_f64(f)),
            ..d
        }
    }

    /// Measured round trips for one variant (`gap` zero = back-to-back).
    pub fn iterations_for(&self, gap: Duration) -> u64 {
        if gap.is_zero() {
            return self.iterations;
        }
        let by_budget = (self.gap_time_budget.as_nanos() / gap.as_nanos().max(1)) as u64;
        // At least 10 round trips per variant, unless fewer were asked for.
        self.gap_iterations.min(by_budget.max(10))
    }

    /// Warm-up round trips for one variant.
    pub fn warmup_for(&self, gap: Duration) -> u64 {
        if gap.is_zero() {
            self.warmup
        } else {
            self.gap_warmup
        }
    }
}

/// A gap that [`parse_gap`] cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadGap(pub String);

/// Parses a gap such as `100us`, `1ms`, `2.5ms`, `0` or `500ns` (a bare number is us).
pub fn parse_gap(s: &str) -> Result<Duration, BadGap> {
    let s = s.trim();
    let (num, unit_ns) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us").or_else(|| s.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else {
        (s, 1e3)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| BadGap(format!("bad gap {s:?} (e.g. 100us, 1ms)")))?;
    if !v.is_finite() || v < 0.0 || v * unit_ns > 60e9 {
        return Err(BadGap(format!("gap {s:?} out of range (0 .. 60 s)")));
    }
    Ok(Duration::from_nanos((v * unit_ns).round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_parsing() {
        assert_eq!(parse_gap("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_gap("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_gap("2.5ms"), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_gap("250"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_gap("0"), Ok(Duration::ZERO));
        assert_eq!(parse_gap("1s"), Ok(Duration::from_secs(1)));
        assert!(parse_gap("fast").is_err());
        assert!(parse_gap("-1ms").is_err());
    }

    #[test]
    fn iteration_budget() {
        let c = BenchConfig::default();
        assert_eq!(c.iterations_for(Duration::ZERO), 20_000);
        assert_eq!(c.iterations_for(Duration::from_micros(100)), 1_000);
        assert_eq!(c.iterations_for(Duration::from_millis(1)), 1_000);
        assert_eq!(c.iterations_for(Duration::from_millis(10)), 100);
        let long = BenchConfig::scaled(10.0);
        assert_eq!(long.iterations, 200_000);
        assert_eq!(long.iterations_for(Duration::from_millis(1)), 10_000);
        assert_eq!(BenchConfig::scaled(f64::NAN), BenchConfig::default());
    }
}
