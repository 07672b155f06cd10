//! Platform-wide MSI-X delivery: the knee above which device I/O degrades.
//!
//! Facts (moderation.md 1.2, costmodel 2.5): on affected SoCs, MSI-X writes are serialized in the
//! root port or IOMMU with strong ordering against DMA, so above ~1-3 M interrupts/s in total
//! (the knee) device throughput drops, "up to 3-4x"; healthy SoCs sustain 20-30 M/s. What matters
//! is the total rate, not per-CPU load. GSIM v4's sensitivity data show a sharp knee (no loss at
//! 1.0 M/s, large loss at 1.25-2 M/s on one platform), which a linear model cannot produce.
//!
//! Model (ours, phenomenological and documented as such): the platform keeps an exponentially
//! weighted estimate `R` of the MSI rate (time constant `rate_window_us`); device DMA runs at
//! efficiency `eta = min(1, (knee / R)^gamma)`, floored at `min_efficiency`; an MSI reaches its
//! CPU `msi_latency_us` after the write, plus queueing when above the knee.

use crate::config::PlatformCfg;
use crate::time::{SimTime, US};

/// Platform state.
#[derive(Clone, Debug)]
pub(crate) struct Platform {
    knee: f64,
    gamma: f64,
    min_eff: f64,
    tau_ns: f64,
    base_latency_ns: u64,
    rate: f64,
    last: SimTime,
    /// MSIs written so far.
    pub msis: u64,
}

impl Platform {
    pub(crate) fn new(cfg: &PlatformCfg) -> Platform {
        Platform {
            knee: cfg.knee_per_sec().max(1.0),
            gamma: cfg.gamma.max(0.0),
            min_eff: cfg.min_efficiency.clamp(0.001, 1.0),
            tau_ns: (cfg.rate_window_us * US as f64).max(1.0),
            base_latency_ns: crate::time::us_to_ns(cfg.msi_latency_us),
            rate: 0.0,
            last: SimTime::ZERO,
            msis: 0,
        }
    }

    fn decay_to(&mut self, now: SimTime) {
        let dt = now.since(self.last) as f64;
        if dt > 0.0 {
            self.rate *= (-dt / self.tau_ns).exp();
            self.last = now;
        }
    }

    /// Records an MSI write at `now`; returns the delay until it reaches the CPU.
    pub(crate) fn msi(&mut self, now: SimTime) -> u64 {
        self.decay_to(now);
        // Each event adds 1/tau to an exponentially decaying rate estimate (events/ns -> /s).
        self.rate += 1e9 / self.tau_ns;
        self.msis += 1;
        let over = self.rate / self.knee;
        if over > 1.0 {
            // Serialized writes queue behind each other above the knee.
            self.base_latency_ns + ((over - 1.0) * US as f64) as u64
        } else {
            self.base_latency_ns
        }
    }

    /// Current MSI rate estimate (per second).
    pub(crate) fn rate_at(&mut self, now: SimTime) -> f64 {
        self.decay_to(now);
        self.rate
    }

    /// DMA efficiency at `now` (1.0 below the knee).
    pub(crate) fn efficiency(&mut self, now: SimTime) -> f64 {
        let r = self.rate_at(now);
        if r <= self.knee {
            1.0
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
        let mut p = Platform::new(&cfg);
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
