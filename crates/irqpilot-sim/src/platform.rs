//! Platform-wide MSI-X delivery: the knee above which device I/O degrades.
//!
//! Facts (moderation.md 1.2, costmodel 2.5): on affected SoCs, MSI-X writes are serialized in the
//! root port or IOMMU with strong ordering against DMA, so above ~1-3 M interrupts/s in total
//! (the knee) device throughput drops, "up to 3-4x"; healthy SoCs sustain 20-30 M/s. What matters
//! is the total rate, not per-CPU load. GSIM v4's sensitivity data show a sharp knee (no loss at
//! 1.0 M/s, large loss at 1.25-2 M/s on one platform), which a linear model cannot produce.
//!
//! Model (ours, phenomenological and documented as such): the platform measures the MSI rate `R`
//! over a sliding window of `rate_window_us` (eight buckets); device DMA runs at
//! efficiency `eta = min(1, (knee / R)^gamma)`, floored at `min_efficiency`; an MSI reaches its
//! CPU `msi_latency_us` after the write, plus queueing when above the knee.

use crate::config::PlatformCfg;
use crate::time::{SimTime, US};

/// Buckets in the sliding rate window.
const BUCKETS: usize = 8;

/// The platform's MSI delivery state (named apart from the `irqpilot_core::Platform` trait,
/// which the twin implements as `SimPlatform`).
#[derive(Clone, Debug)]
pub(crate) struct MsiPlatform {
    knee: f64,
    gamma: f64,
    min_eff: f64,
    base_latency_ns: u64,
    bucket_ns: u64,
    /// MSIs per bucket, ring indexed by `(time / bucket_ns) % BUCKETS`.
    counts: [u64; BUCKETS],
    /// Bucket number (`time / bucket_ns`) of the newest bucket.
    head: u64,
    /// Start of the bucket after the newest one.
    head_end: u64,
    /// Time of the last update (the newest bucket covers up to here).
    last: u64,
    in_window: u64,
    /// MSIs written so far.
    pub msis: u64,
}

impl MsiPlatform {
    pub(crate) fn new(cfg: &PlatformCfg) -> MsiPlatform {
        let window_ns = (cfg.rate_window_us * US as f64).max(BUCKETS as f64) as u64;
        MsiPlatform {
            knee: cfg.knee_per_sec().max(1.0),
            gamma: cfg.gamma.max(0.0),
            min_eff: cfg.min_efficiency.clamp(0.001, 1.0),
            base_latency_ns: crate::time::us_to_ns(cfg.msi_latency_us),
            bucket_ns: window_ns / BUCKETS as u64,
            counts: [0; BUCKETS],
            head: 0,
            head_end: window_ns / BUCKETS as u64,
            last: 0,
            in_window: 0,
            msis: 0,
        }
    }

    /// Slides the window so its newest bucket holds `now`.
    fn advance(&mut self, now: SimTime) {
        self.last = self.last.max(now.ns());
        // Most updates fall in the newest bucket: no division then.
        if now.ns() < self.head_end {
            return;
        }
        let b = now.ns() / self.bucket_ns;
        if b <= self.head {
            return;
        }
        if b - self.head >= BUCKETS as u64 {
            self.counts = [0; BUCKETS];
            self.in_window = 0;
        } else {
            for n in self.head + 1..=b {
                let slot = (n % BUCKETS as u64) as usize;
                self.in_window -= self.counts[slot];
                self.counts[slot] = 0;
            }
        }
        self.head = b;
        self.head_end = (b + 1) * self.bucket_ns;
    }

    /// Records an MSI write at `now`; returns the delay until it reaches the CPU.
    #[inline]
    pub(crate) fn msi(&mut self, now: SimTime) -> u64 {
        self.advance(now);
        self.counts[(self.head % BUCKETS as u64) as usize] += 1;
        self.in_window += 1;
        self.msis += 1;
        let over = self.rate() / self.knee;
        if over > 1.0 {
            // Serialized writes queue behind each other above the knee.
            self.base_latency_ns + ((over - 1.0) * US as f64) as u64
        } else {
            self.base_latency_ns
        }
    }

    /// MSIs per second over the time the window covers: the older buckets in full and the
    /// newest one up to the last update.
    fn rate(&self) -> f64 {
        // `last` lies in the newest bucket, which ends at `head_end`.
        let covered = (BUCKETS as u64 - 1) * self.bucket_ns
            + (self.last + self.bucket_ns - self.head_end)
            + 1;
        self.in_window as f64 * 1e9 / covered as f64
    }

    /// Current MSI rate estimate (per second).
    pub(crate) fn rate_at(&mut self, now: SimTime) -> f64 {
        self.advance(now);
        self.rate()
    }

    /// DMA efficiency at `now` (1.0 below the knee).
    pub(crate) fn efficiency(&mut self, now: SimTime) -> f64 {
        let r = self.rate_at(now);
        if r <= self.knee {
            1.0
        } else if self.gamma == 1.0 {
            (self.knee / r).max(self.min_eff)
        } else {
            (self.knee / r).powf(self.gamma).max(self.min_eff)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PlatformKind;

    fn run_at(rate: f64, kind: PlatformKind) -> f64 {
        let cfg = PlatformCfg {
            kind,
            ..PlatformCfg::default()
        };
        let mut p = MsiPlatform::new(&cfg);
        let gap = (1e9 / rate) as u64;
        let mut t = SimTime::ZERO;
        for _ in 0..(rate as u64 / 100).max(1000) {
            t = t.after(gap);
            p.msi(t);
        }
        p.efficiency(t)
    }

    #[test]
    fn knee_shape() {
        assert_eq!(run_at(1.0e6, PlatformKind::Limited), 1.0);
        let e = run_at(4.0e6, PlatformKind::Limited);
        assert!((e - 0.5).abs() < 0.03, "{e}");
        assert_eq!(run_at(4.0e6, PlatformKind::Healthy), 1.0);
        assert!(run_at(40.0e6, PlatformKind::Limited) >= 0.1 - 1e-9);
    }
}
