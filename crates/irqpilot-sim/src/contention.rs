//! SMT contention: two hardware threads of one core share its execution units, so work started
//! on a CPU while a sibling thread is busy runs `costs.smt_slowdown` times longer.
//!
//! The check is made when a piece of work (a hardirq, a NAPI poll, an application job) starts,
//! against the sibling's state at that instant; a job is not re-timed if its sibling becomes
//! busy later. Over many short jobs both threads see the slowdown in proportion to how often
//! the other is busy, which is the effect that matters for placement: two heavy IRQs on the two
//! threads of one core are slower than on two cores. The constant and its sources are in
//! `docs/placement-twin.md`.

use crate::sim::Sim;
use crate::time::SimTime;
use irqpilot_core::CpuId;

impl Sim {
    /// Fills `smt_siblings` from the topology when the slowdown is in force.
    pub(crate) fn init_smt(&mut self) {
        if self.k.smt_slowdown == 1.0 {
            return;
        }
        self.smt_siblings = (0..self.cpus.len() as u32)
            .map(|c| {
                self.topo
                    .smt_siblings(CpuId(c))
                    .iter()
                    .map(|s| s.0)
                    .filter(|&s| s != c && (s as usize) < self.cpus.len())
                    .collect()
            })
            .collect();
    }

    /// Whether `cpu` runs anything at `at` (hardirq, softirq or application work).
    fn busy_at(&self, cpu: usize, at: SimTime) -> bool {
        let c = &self.cpus[cpu];
        c.hard_until > at || c.soft.is_some_and(|j| j.end > at) || c.app.is_some_and(|j| j.end > at)
    }

    /// `cost` of work starting on `cpu` at `at`, stretched when an SMT sibling is busy then.
    pub(crate) fn smt_scaled(&self, cpu: usize, at: SimTime, cost: u64) -> u64 {
        let Some(sibs) = self.smt_siblings.get(cpu) else {
            return cost;
        };
        if sibs.iter().any(|&s| self.busy_at(s as usize, at)) {
            (cost as f64 * self.k.smt_slowdown) as u64
        } else {
            cost
        }
    }
}
