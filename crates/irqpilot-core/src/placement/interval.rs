//! The adaptive control period: short while things change, long while they do not.
//!
//! After a decision that moved something, after a load shift, or with no rates yet, the policy
//! asks for `min_interval_ms` (it wants to see the result soon). Otherwise it doubles the
//! period, up to `max_interval_ms`. kirqd did the same with additive steps (0.5-5 s, -1 s after
//! a move, +0.1 s when idle, balancing.md 3.2); doubling reaches the steady period in a few
//! quiet periods instead of 45. The load shift between two periods is
//!
//! ```text
//! shift = sum_i |L_i - L'_i| / max(sum_i L_i, sum_i L'_i, heavy_min_load)
//! ```
//!
//! over the IRQs of either period (L' the previous loads); `shift >= load_shift` is a shift.

use super::config::PlacementConfig;
use crate::ids::IrqNum;
use std::cmp::Ordering;

/// State of the adaptive period.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdaptiveInterval {
    current_ms: u64,
    prev: Vec<(IrqNum, f64)>,
    seen_rates: bool,
    last_shift: Option<f64>,
}

/// Relative change between two sorted load lists.
pub fn load_shift(prev: &[(IrqNum, f64)], cur: &[(IrqNum, f64)], floor: f64) -> f64 {
    let (mut i, mut j) = (0, 0);
    let mut diff = 0.0;
    while i < prev.len() || j < cur.len() {
        let ord = match (prev.get(i), cur.get(j)) {
            (Some(a), Some(b)) => a.0.cmp(&b.0),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match ord {
            Ordering::Less => {
                diff += prev[i].1;
                i += 1;
            }
            Ordering::Greater => {
                diff += cur[j].1;
                j += 1;
            }
            Ordering::Equal => {
                diff += (prev[i].1 - cur[j].1).abs();
                i += 1;
                j += 1;
            }
        }
    }
    let total = |v: &[(IrqNum, f64)]| v.iter().map(|x| x.1).sum::<f64>();
    diff / total(prev)
        .max(total(cur))
        .max(floor)
        .max(f64::MIN_POSITIVE)
}

impl AdaptiveInterval {
    /// The period wanted now, ms (`min_interval_ms` before the first update).
    pub fn current_ms(&self, cfg: &PlacementConfig) -> u64 {
        if self.current_ms == 0 {
            cfg.min_interval_ms
        } else {
            self.current_ms
                .clamp(cfg.min_interval_ms, cfg.max_interval_ms)
        }
    }

    /// The load shift measured at the last update.
    pub fn last_shift(&self) -> Option<f64> {
        self.last_shift
    }

    /// Updates after a decision: `had_rates` whether loads were measured, `acted` whether the
    /// plan changed something, `loads` the per-IRQ loads sorted by IRQ.
    pub fn update(
        &mut self,
        cfg: &PlacementConfig,
        had_rates: bool,
        acted: bool,
        loads: Vec<(IrqNum, f64)>,
    ) {
        // The first measured loads have nothing to compare with: a shift by definition.
        let shift = (had_rates && self.seen_rates)
            .then(|| load_shift(&self.prev, &loads, cfg.heavy_min_load));
        self.last_shift = shift;
        let shifted = shift.is_none_or(|s| s >= cfg.load_shift);
        self.current_ms = if acted || shifted {
            cfg.min_interval_ms
        } else {
            self.current_ms(cfg)
                .saturating_mul(2)
                .min(cfg.max_interval_ms)
        };
        if had_rates {
            self.prev = loads;
            self.seen_rates = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &[(u32, f64)]) -> Vec<(IrqNum, f64)> {
        v.iter().map(|&(i, x)| (IrqNum(i), x)).collect()
    }

    #[test]
    fn shift_measure() {
        assert_eq!(load_shift(&[], &[], 0.01), 0.0);
        let a = l(&[(1, 0.5), (2, 0.5)]);
        assert_eq!(load_shift(&a, &a, 0.01), 0.0);
        // IRQ 2 vanished, IRQ 3 appeared with the same load: everything moved.
        let b = l(&[(1, 0.5), (3, 0.5)]);
        assert!((load_shift(&a, &b, 0.01) - 1.0).abs() < 1e-12);
        let c = l(&[(1, 0.6), (2, 0.4)]);
        assert!((load_shift(&a, &c, 0.01) - 0.2).abs() < 1e-12);
        // Tiny loads do not count as shifts of everything.
        assert!(load_shift(&l(&[(1, 1e-9)]), &l(&[(1, 2e-9)]), 0.01) < 1e-6);
    }

    #[test]
    fn short_after_change_long_when_steady() {
        let cfg = PlacementConfig::default();
        let mut iv = AdaptiveInterval::default();
        assert_eq!(iv.current_ms(&cfg), 1000);
        iv.update(&cfg, false, false, Vec::new());
        assert_eq!(iv.current_ms(&cfg), 1000);
        let steady = l(&[(1, 0.3), (2, 0.3)]);
        iv.update(&cfg, true, true, steady.clone());
        assert_eq!(iv.current_ms(&cfg), 1000);
        let mut seen = Vec::new();
        for _ in 0..6 {
            iv.update(&cfg, true, false, steady.clone());
            seen.push(iv.current_ms(&cfg));
        }
        assert_eq!(seen, vec![2000, 4000, 8000, 10_000, 10_000, 10_000]);
        // No load at all is steady too.
        let mut idle = AdaptiveInterval::default();
        for _ in 0..3 {
            idle.update(&cfg, true, false, Vec::new());
        }
        assert_eq!(idle.current_ms(&cfg), 4000);
        // A shift brings it straight back to the minimum.
        iv.update(&cfg, true, false, l(&[(1, 0.6), (2, 0.0)]));
        assert_eq!(iv.current_ms(&cfg), 1000);
        assert!(iv.last_shift().unwrap() >= 0.5);
    }
}
