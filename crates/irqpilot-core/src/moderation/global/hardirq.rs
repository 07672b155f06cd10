//! Per-CPU hardirq share from `/proc/stat`, judged at the resolution of its source.
//!
//! The `irq` column counts `USER_HZ` ticks (10 ms on every common distribution), whether the
//! kernel accounts hardirq time exactly (`CONFIG_IRQ_TIME_ACCOUNTING`, nanoseconds printed as
//! whole ticks) or by sampling the CPU's state at each tick. Over a 10 ms control period a
//! CPU's share therefore reads 0% or 100% (moderation.md, "Measuring hardirq time precisely
//! enough"); a loop comparing one period to a 70% limit fires at random at low load. The
//! kernel offers nothing finer per CPU without tracing (`/proc/pressure/irq` is system-wide),
//! so the moderator keeps a window of ticks per CPU and acts only on a bound:
//!
//! * the window holds the newest periods up to [`WINDOW_TICKS`] ticks (one second);
//! * each end of a tick count can be off by one tick (truncation), so `k - 1` and `k + 1` of
//!   `n` ticks bound the count;
//! * the share is a binomial proportion when ticks sample the CPU's state; Wilson's interval at
//!   `z` = 3 (99.7%) bounds it;
//! * no verdict below [`MIN_TICKS`] ticks.
//!
//! A CPU is above the limit only when the interval's lower end is; below it only when the upper
//! end is. At 100% hardirq that takes about 30 ticks (300 ms), at a 1% share never.

use crate::rates::Rates;
use std::collections::{BTreeMap, VecDeque};

/// Ticks a window holds at most (one second at `USER_HZ` 100).
pub const WINDOW_TICKS: u64 = 100;
/// Ticks below which a window says nothing.
pub const MIN_TICKS: u64 = 20;
/// Width of the interval, in standard deviations.
const Z: f64 = 3.0;

/// What a window of ticks says about a CPU's hardirq share against a limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum HardirqVerdict {
    /// Too few ticks to say anything.
    Unknown,
    /// Surely under the limit: the interval's upper end (percent) is below it.
    Below {
        /// Upper bound, percent.
        upper_pct: f64,
    },
    /// The interval straddles the limit.
    Near,
    /// Surely over the limit.
    Above {
        /// Lower bound, percent.
        lower_pct: f64,
        /// The point estimate, percent.
        share_pct: f64,
    },
}

/// Wilson's score interval for `k` successes in `n` trials at `Z` standard deviations.
fn wilson(k: f64, n: f64) -> (f64, f64) {
    let p = (k / n).clamp(0.0, 1.0);
    let z2 = Z * Z;
    let centre = p + z2 / (2.0 * n);
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    let d = 1.0 + z2 / n;
    (
        ((centre - half) / d).max(0.0),
        ((centre + half) / d).min(1.0),
    )
}

/// The verdict for `irq` hardirq ticks out of `total` ticks against `limit_pct`.
pub fn hardirq_verdict(irq: u64, total: u64, limit_pct: f64) -> HardirqVerdict {
    if total < MIN_TICKS {
        return HardirqVerdict::Unknown;
    }
    let n = total as f64;
    let (lower, _) = wilson(irq.saturating_sub(1) as f64, n);
    let (_, upper) = wilson((irq + 1).min(total) as f64, n);
    let limit = limit_pct / 100.0;
    if lower > limit {
        HardirqVerdict::Above {
            lower_pct: lower * 100.0,
            share_pct: irq as f64 * 100.0 / n,
        }
    } else if upper < limit {
        HardirqVerdict::Below {
            upper_pct: upper * 100.0,
        }
    } else {
        HardirqVerdict::Near
    }
}

#[derive(Clone, Debug, Default)]
struct Window {
    periods: VecDeque<(u64, u64)>,
    irq: u64,
    total: u64,
}

/// Tick windows of every CPU.
#[derive(Clone, Debug, Default)]
pub(crate) struct HardirqWatch {
    windows: BTreeMap<u32, Window>,
}

impl HardirqWatch {
    /// Adds one period's tick deltas.
    pub(crate) fn update(&mut self, rates: &Rates) {
        for (slot, ticks) in rates.per_cpu.iter().zip(&rates.cpu_ticks) {
            let Some(t) = ticks else { continue };
            let w = self.windows.entry(slot.cpu.0).or_default();
            w.periods.push_back((t.irq, t.total));
            w.irq += t.irq;
            w.total += t.total;
            // Drop the oldest periods while the rest still fill the window.
            while let Some(&(i, n)) = w.periods.front() {
                if w.total - n < WINDOW_TICKS {
                    break;
                }
                w.irq -= i;
                w.total -= n;
                w.periods.pop_front();
            }
        }
    }

    /// The verdict on `cpu` against `limit_pct`.
    pub(crate) fn verdict(&self, cpu: u32, limit_pct: f64) -> HardirqVerdict {
        match self.windows.get(&cpu) {
            Some(w) => hardirq_verdict(w.irq, w.total, limit_pct),
            None => HardirqVerdict::Unknown,
        }
    }

    /// Forgets `cpu`'s window: after acting on it, the next verdict is about the new regime
    /// only (a window still full of the old one would make the loop act twice).
    pub(crate) fn restart(&mut self, cpu: u32) {
        self.windows.remove(&cpu);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks an exactly-accounting kernel prints for a CPU with hardirq share `share`, read
    /// every 10 ms (one tick per period), over `periods` periods starting at `phase` ms.
    fn quantized(share: f64, periods: u64, phase: f64) -> Vec<(u64, u64)> {
        let tick = |ms: f64| (ms / 10.0).floor() as u64;
        (0..periods)
            .map(|p| {
                let (t0, t1) = (phase + p as f64 * 10.0, phase + (p + 1) as f64 * 10.0);
                (tick(t1 * share) - tick(t0 * share), tick(t1) - tick(t0))
            })
            .collect()
    }

    fn run(share: f64, periods: u64, phase: f64) -> Vec<HardirqVerdict> {
        let mut w = Window::default();
        let mut out = Vec::new();
        for (i, n) in quantized(share, periods, phase) {
            w.irq += i;
            w.total += n;
            w.periods.push_back((i, n));
            while let Some(&(i, n)) = w.periods.front() {
                if w.total - n < WINDOW_TICKS {
                    break;
                }
                w.irq -= i;
                w.total -= n;
                w.periods.pop_front();
            }
            out.push(hardirq_verdict(w.irq, w.total, 70.0));
        }
        out
    }

    #[test]
    fn one_period_alone_says_nothing() {
        assert_eq!(hardirq_verdict(1, 1, 70.0), HardirqVerdict::Unknown);
        assert_eq!(hardirq_verdict(0, 1, 70.0), HardirqVerdict::Unknown);
    }

    #[test]
    fn a_low_share_read_through_ticks_is_never_above() {
        for share in [0.0, 0.01, 0.05, 0.3, 0.5, 0.6] {
            for phase in [0.0, 3.0, 7.5] {
                let v = run(share, 1000, phase);
                assert!(
                    !v.iter().any(|v| matches!(v, HardirqVerdict::Above { .. })),
                    "share {share} phase {phase}"
                );
            }
        }
        // At 5% the window soon says so.
        assert!(matches!(
            run(0.05, 200, 0.0).last(),
            Some(HardirqVerdict::Below { .. })
        ));
    }

    #[test]
    fn a_cpu_drowning_in_hardirq_is_seen_within_a_third_of_a_second() {
        let v = run(1.0, 100, 0.0);
        let first = v
            .iter()
            .position(|v| matches!(v, HardirqVerdict::Above { .. }))
            .unwrap();
        assert!(first < 35, "seen after {first} periods");
        assert!(matches!(
            run(0.95, 200, 0.0).last(),
            Some(HardirqVerdict::Above { .. })
        ));
    }
}
