//! `Decision`: the plan with everything a person (or `irqpilot plan --format json`) needs to
//! judge it: the moves with their reasons, per-CPU load and vectors before and after, the
//! imbalance index, and the facts the policy will not act on.

use super::constraints::Hold;
use super::load::LoadBasis;
use crate::cpuset::CpuSet;
use crate::ids::{CpuId, IrqNum};
use crate::plan::Plan;
use serde::{Deserialize, Serialize};

/// Why an IRQ's affinity is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveReason {
    /// It was delivered to a CPU that is not a housekeeping CPU (isolated).
    Isolation,
    /// Its CPU is banned in the configuration.
    BannedCpu,
    /// A pin excludes its CPU.
    Pin,
    /// Its CPU is offline or unknown.
    Unplaced,
    /// Its mask names CPUs it may not use although it is delivered to one it may: the mask is
    /// narrowed to that CPU, without migrating it.
    Narrow,
    /// Balancing: the move lowers the objective by at least the tolerance.
    Balance,
}

/// One affinity change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Move {
    /// The IRQ.
    pub irq: IrqNum,
    /// Where it is delivered now (cpulist; empty when unknown).
    pub from: CpuSet,
    /// The mask written (a single CPU).
    pub to: CpuSet,
    /// `smp_affinity_list` before.
    pub mask_before: Option<CpuSet>,
    /// Its load, CPU shares.
    pub load: f64,
    /// Why.
    pub reason: MoveReason,
}

/// Load and vectors of one CPU.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuLoad {
    /// The CPU.
    pub cpu: CpuId,
    /// Interrupt load, CPU shares.
    pub load: f64,
    /// Device vectors in use (managed reservations included).
    pub vectors: u32,
    /// Whether IRQs may be placed here.
    pub allowed: bool,
}

/// An IRQ the policy leaves alone, and why: reported as a fact, not a warning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The IRQ.
    pub irq: IrqNum,
    /// Why.
    pub hold: Hold,
}

/// A heavy IRQ and where it ends up.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeavyIrq {
    /// The IRQ.
    pub irq: IrqNum,
    /// Load, CPU shares.
    pub load: f64,
    /// CPU after the plan.
    pub cpu: Option<CpuId>,
}

/// Everything one decision produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The actions (affinity writes, default affinity) and notes.
    pub plan: Plan,
    /// The affinity writes, explained.
    pub moves: Vec<Move>,
    /// Per online CPU, before the plan.
    pub per_cpu_load_before: Vec<CpuLoad>,
    /// Per online CPU, after the plan.
    pub per_cpu_load_after: Vec<CpuLoad>,
    /// max / mean load over the allowed CPUs before (1.0 = perfect); `None` without load.
    pub imbalance_before: Option<f64>,
    /// The same after.
    pub imbalance_after: Option<f64>,
    /// The objective (docs/placement.md) before and after.
    pub objective_before: f64,
    /// See `objective_before`.
    pub objective_after: f64,
    /// Where loads came from.
    pub basis: Option<LoadBasis>,
    /// CPUs IRQs may be placed on (online housekeeping minus banned).
    pub allowed: CpuSet,
    /// Heavy IRQs (the ones balanced), heaviest first.
    pub heavy: Vec<HeavyIrq>,
    /// IRQs left alone, with why.
    pub held: Vec<Held>,
    /// IRQs that must leave their CPU but found no allowed CPU with a free vector.
    pub stuck: Vec<IrqNum>,
    /// Balancing rounds the search ran.
    pub rounds: u32,
    /// Per-IRQ loads (non-zero ones), for the adaptive interval.
    #[serde(skip)]
    pub(crate) loads: Vec<(IrqNum, f64)>,
}

impl Decision {
    /// Number of IRQs whose delivery CPU changes (narrowed masks excluded).
    pub fn migrations(&self) -> usize {
        self.moves.iter().filter(|m| m.from != m.to).count()
    }
}

/// IRQ numbers as compact ranges: `24-27,40`.
pub fn irq_list(irqs: &[IrqNum]) -> String {
    let mut sorted: Vec<u32> = irqs.iter().map(|i| i.0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irq_ranges() {
        let l = |v: &[u32]| irq_list(&v.iter().map(|&n| IrqNum(n)).collect::<Vec<_>>());
        assert_eq!(l(&[]), "");
        assert_eq!(l(&[5]), "5");
        assert_eq!(l(&[27, 24, 25, 26, 40, 41, 43]), "24-27,40-41,43");
    }
}
