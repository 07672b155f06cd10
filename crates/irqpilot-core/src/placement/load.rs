//! Per-IRQ load, in CPU shares (1.0 = one CPU busy with interrupt work).
//!
//! The kernel accounts interrupt *time* per CPU (`/proc/stat` irq and softirq columns, with
//! `IRQ_TIME_ACCOUNTING`), not per IRQ. Like irqbalance (balancing.md 1.5), a CPU's
//! hardirq+softirq time is shared among the numbered IRQs it served in proportion to their
//! interrupt counts: IRQ i's load is
//!
//! ```text
//! L_i = sum over CPUs c of  T_c * r_ic / R_c      T_c = (hardirq% + softirq%) / 100
//!                                                  r_ic = IRQ i's interrupts/s on c
//!                                                  R_c = all numbered IRQs' interrupts/s on c
//! ```
//!
//! Two guards make it usable where irqbalance's is not (balancing.md 8.5):
//! * where a CPU has no time figure (no `/proc/stat`, or zero time while it took interrupts:
//!   no `IRQ_TIME_ACCOUNTING`, or too short a sample for the 10 ms tick) each interrupt costs
//!   `interrupt_cost_us`: the count-based fallback;
//! * the time charged to one interrupt is capped at `max_interrupt_cost_us`, so a CPU's
//!   softirq work that no IRQ of its own caused (RPS, timers) does not make a rare IRQ heavy.

use super::config::PlacementConfig;
use crate::rates::{Rates, RowRate};
use serde::{Deserialize, Serialize};

/// Where the loads came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LoadBasis {
    /// No rates yet (first period): every load is 0.
    None,
    /// Every CPU that took interrupts had hardirq+softirq time.
    Time,
    /// No CPU had time figures: counts times `interrupt_cost_us`.
    Counts,
    /// Some CPUs had time figures, others fell back to counts.
    Mixed,
}

impl std::fmt::Display for LoadBasis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LoadBasis::None => "none",
            LoadBasis::Time => "time",
            LoadBasis::Counts => "counts",
            LoadBasis::Mixed => "mixed",
        })
    }
}

/// CPU shares per interrupt on each CPU column of `rates`, and the basis used.
pub(crate) fn cpu_factors(rates: &Rates, cfg: &PlacementConfig) -> (Vec<f64>, LoadBasis) {
    let count_cost = cfg.interrupt_cost_us * 1e-6;
    let cap = cfg.max_interrupt_cost_us * 1e-6;
    let (mut timed, mut counted) = (0usize, 0usize);
    let factors = rates
        .per_cpu
        .iter()
        .map(|c| {
            let r = finite(c.irq_per_sec);
            if r <= 0.0 {
                return 0.0;
            }
            let time = match (c.hardirq_pct, c.softirq_pct) {
                (Some(h), Some(s)) => (finite(h) + finite(s)) / 100.0,
                (Some(h), None) => finite(h) / 100.0,
                _ => 0.0,
            };
            if time > 0.0 {
                timed += 1;
                (time / r).min(cap)
            } else {
                counted += 1;
                count_cost
            }
        })
        .collect();
    let basis = match (timed, counted) {
        (_, 0) if timed > 0 => LoadBasis::Time,
        (0, _) if counted > 0 => LoadBasis::Counts,
        (0, 0) => LoadBasis::Time,
        _ => LoadBasis::Mixed,
    };
    (factors, basis)
}

/// Load of one row: its per-CPU rates weighted by the CPUs' factors. A plain dot product (it
/// runs once per IRQ and CPU: a million times on a large server), sanitised once at the end.
pub(crate) fn row_load(row: &RowRate, factors: &[f64]) -> f64 {
    let n = row.per_cpu_per_sec.len().min(factors.len());
    let (r, f) = (&row.per_cpu_per_sec[..n], &factors[..n]);
    // Four accumulators let the compiler vectorise without reassociating one sum.
    let mut acc = [0.0f64; 4];
    let (rc, fc) = (r.chunks_exact(4), f.chunks_exact(4));
    let (rr, fr) = (rc.remainder(), fc.remainder());
    for (a, b) in rc.zip(fc) {
        for k in 0..4 {
            acc[k] += a[k] * b[k];
        }
    }
    let tail: f64 = rr.iter().zip(fr).map(|(a, b)| a * b).sum();
    finite(acc[0] + acc[1] + acc[2] + acc[3] + tail)
}

/// Rates are never negative or NaN by construction; a corrupted input must not poison the
/// arithmetic either.
pub(crate) fn finite(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{CpuId, IrqNum};
    use crate::rates::{CpuRate, RowStatus};
    use crate::snapshot::RowLabel;

    fn cpu(c: u32, irq: f64, hard: Option<f64>, soft: Option<f64>) -> CpuRate {
        CpuRate {
            cpu: CpuId(c),
            irq_per_sec: irq,
            arch_per_sec: 0.0,
            hardirq_pct: hard,
            softirq_pct: soft,
        }
    }

    fn row(n: u32, per_cpu: Vec<f64>) -> RowRate {
        RowRate {
            label: RowLabel::Irq(IrqNum(n)),
            total_per_sec: per_cpu.iter().sum(),
            per_cpu_per_sec: per_cpu,
            status: RowStatus::Continuing,
            wraps: 0,
        }
    }

    #[test]
    fn time_is_shared_by_rate() {
        let rates = Rates {
            per_cpu: vec![
                cpu(0, 1000.0, Some(5.0), Some(15.0)),
                cpu(1, 0.0, None, None),
            ],
            ..Default::default()
        };
        let cfg = PlacementConfig::default();
        let (f, basis) = cpu_factors(&rates, &cfg);
        assert_eq!(basis, LoadBasis::Time);
        // 20% of CPU 0 over 1000 interrupts/s: 0.2 ms each; an IRQ with 750/s carries 0.15.
        assert!((row_load(&row(30, vec![750.0, 0.0]), &f) - 0.15).abs() < 1e-12);
        assert!((row_load(&row(31, vec![250.0, 0.0]), &f) - 0.05).abs() < 1e-12);
    }

    #[test]
    fn counts_without_time_and_cap() {
        let cfg = PlacementConfig::default();
        let rates = Rates {
            per_cpu: vec![
                cpu(0, 1000.0, Some(0.0), Some(0.0)),
                cpu(1, 1.0, Some(50.0), Some(0.0)),
            ],
            ..Default::default()
        };
        let (f, basis) = cpu_factors(&rates, &cfg);
        assert_eq!(basis, LoadBasis::Mixed);
        assert!((f[0] - 2e-6).abs() < 1e-15);
        // One interrupt/s on a CPU 50% in hardirq is not 0.5 CPU of load: capped at 2 ms.
        assert!((f[1] - 2e-3).abs() < 1e-15);
        let none = Rates {
            per_cpu: vec![cpu(0, 10.0, None, None)],
            ..Default::default()
        };
        assert_eq!(cpu_factors(&none, &cfg).1, LoadBasis::Counts);
        let bad = row(1, vec![f64::NAN, -5.0]);
        assert_eq!(row_load(&bad, &[1.0, 1.0]), 0.0);
        let long = row(2, (0..11).map(f64::from).collect());
        assert_eq!(row_load(&long, &[2.0; 11]), 110.0);
    }
}
