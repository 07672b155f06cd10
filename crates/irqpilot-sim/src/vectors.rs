//! Affinity writes as x86's vector matrix answers them (balancing.md 5.6-5.7).
//!
//! * Each device vector occupies one slot on its effective CPU; a CPU has
//!   `machine.vectors_per_cpu` slots (about 200 on real x86).
//! * A kernel-managed vector (NVMe I/O queues) refuses user writes (EIO before 6.12, EPERM
//!   since) before anything else is looked at; it holds a slot on every CPU of its mask
//!   (`managed.rs`).
//! * A mask without an online CPU is refused (EINVAL).
//! * If the current effective CPU is still in the new mask, the vector stays where it is ("no
//!   point in moving the interrupt", `assign_vector_locked` in `arch/x86/kernel/apic/vector.c`).
//! * Otherwise the kernel takes the CPU of the mask with the fewest vectors allocated and a free
//!   one; ties go to the lowest number. If no CPU of the mask has a free vector the write fails
//!   with ENOSPC and changes nothing: old mask and effective CPU stay (irqbalance issue #303).

use crate::model::Dev;
use crate::sim::Sim;
use irqpilot_core::{ApplyError, CpuSet};

impl Sim {
    /// Vectors taken on each CPU: a user-settable vector on its effective CPU, a kernel-managed
    /// one on every CPU of its mask (`irq_matrix_reserve_managed`, `managed.rs`).
    pub(crate) fn vectors_per_cpu(&self) -> Vec<u32> {
        let mut n = vec![0u32; self.cpus.len()];
        for (i, s) in self.srcs.iter().enumerate() {
            if !self.src_enabled(i) {
                continue;
            }
            if matches!(s.dev, Dev::Nvme(_)) {
                for c in &s.requested {
                    if let Some(slot) = n.get_mut(c.0 as usize) {
                        *slot += 1;
                    }
                }
            } else if let Some(slot) = n.get_mut(s.cpu as usize) {
                *slot += 1;
            }
        }
        n
    }

    /// Writes `smp_affinity_list` of vector `i`: `Ok(true)` when the requested mask changed.
    /// A move of the effective CPU counts as a migration and makes the next interrupts cold.
    pub(crate) fn set_affinity(&mut self, i: usize, mask: &CpuSet) -> Result<bool, ApplyError> {
        let src = &self.srcs[i];
        if matches!(src.dev, Dev::Nvme(_)) {
            return Err(ApplyError::Managed);
        }
        let ncpu = self.cpus.len();
        let online: Vec<u32> = mask
            .iter()
            .filter(|c| self.topo.online.contains(*c) && (c.0 as usize) < ncpu)
            .map(|c| c.0)
            .collect();
        if online.is_empty() {
            return Err(ApplyError::Invalid);
        }
        let cpu = if online.contains(&src.cpu) {
            src.cpu
        } else {
            let cap = self.sc.machine.vectors_per_cpu;
            let used = self.vectors_per_cpu();
            online
                .iter()
                .copied()
                .filter(|&c| used[c as usize] < cap)
                .min_by_key(|&c| (used[c as usize], c))
                .ok_or(ApplyError::NoVectorSpace)?
        };
        let k_cold = self.k.cold_n;
        let s = &mut self.srcs[i];
        let changed = s.requested != *mask;
        s.requested = mask.clone();
        if s.cpu != cpu {
            s.cpu = cpu;
            s.migrated = true;
            s.cold_left = k_cold;
            self.migrations += 1;
        }
        Ok(changed)
    }
}
