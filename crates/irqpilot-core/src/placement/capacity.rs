//! Vector capacity: how many device vectors each CPU holds, counted from the current layout.
//!
//! On x86 each CPU has about 200 vectors for devices ("at max. 204", tglx; balancing.md 5.6).
//! A non-managed IRQ holds one vector on its effective CPU. A kernel-managed IRQ holds one on
//! *every* CPU of its mask: the matrix allocator reserves managed vectors up front on each CPU
//! of the mask (the debugfs `man` column). Writing an affinity to a full CPU fails with ENOSPC
//! and changes nothing (irqbalance issue #303); irqbalance learns that from the error, after
//! the fact (issues #303, #355: 35 failed writes/s). The policy counts instead, and never
//! sends an IRQ to a CPU without a free vector.

use super::model::{CpuSlot, IrqSlot};
use crate::ids::CpuId;
use crate::machine::Machine;

/// Vectors in use per dense CPU.
pub(crate) struct VectorUse {
    pub per_cpu: Vec<u32>,
}

/// Counts vectors: one per non-managed IRQ on its CPU, one per managed IRQ on each online CPU
/// of its mask.
pub(crate) fn vector_use(
    machine: &Machine,
    cpus: &[CpuSlot],
    irqs: &[IrqSlot],
    dense_of: &dyn Fn(CpuId) -> Option<u32>,
) -> VectorUse {
    let mut per_cpu = vec![0u32; cpus.len()];
    // `irqs` were built from `machine.irqs` in the same (ascending) order.
    for (irq, slot) in machine.irqs.values().zip(irqs) {
        if irq.managed == Some(true) {
            let mask = irq.requested.as_ref().or(irq.effective.as_ref());
            for c in mask.into_iter().flat_map(|m| m.iter()) {
                if let Some(d) = dense_of(c) {
                    per_cpu[d as usize] += 1;
                }
            }
        } else if let Some(p) = slot.pos {
            per_cpu[p as usize] += 1;
        }
    }
    VectorUse { per_cpu }
}

/// Vectors in use per CPU for a whole machine, by CPU number (for reports and the isolation
/// planner): the same count the policy plans with.
pub fn vectors_per_cpu(machine: &Machine) -> std::collections::BTreeMap<CpuId, u32> {
    let online = &machine.topology.online;
    let mut out: std::collections::BTreeMap<CpuId, u32> = online.iter().map(|c| (c, 0)).collect();
    for irq in machine.irqs.values() {
        if irq.managed == Some(true) {
            let mask = irq.requested.as_ref().or(irq.effective.as_ref());
            for c in mask.into_iter().flat_map(|m| m.iter()) {
                if let Some(v) = out.get_mut(&c) {
                    *v += 1;
                }
            }
        } else if let Some(c) = super::model::position(irq, online) {
            if let Some(v) = out.get_mut(&c) {
                *v += 1;
            }
        }
    }
    out
}
