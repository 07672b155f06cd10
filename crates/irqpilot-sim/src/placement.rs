//! Placement in the twin: who decides where each IRQ is delivered during a run
//! (`[placement] policy`, or `--set placement=...`).
//!
//! * `none` (the default): the layout the devices start with stays (queue `i` of a device on
//!   the `i`-th CPU of its `cpus`, as drivers spread their queues).
//! * `rotate`: the 2.5-era kernel balancer (Kamble, LKML 2002-12-20; balancing.md 3.1): every
//!   `rotate_interval_ms` (20 ms = HZ/50) each IRQ moves to a CPU drawn uniformly from the online
//!   CPUs, independently of the others, from the named stream `placement.rotate`.
//! * `static`: what an administrator does once, before the load starts (vendor affinity scripts,
//!   balancing.md 6.5): IRQs in number order, each on the allowed CPU holding the fewest IRQs so
//!   far, CPUs taken packages first, then cores, then SMT siblings; allowed = the housekeeping
//!   CPUs of the device's NUMA node (all housekeeping CPUs if the node has none), never above
//!   the vector capacity.
//! * `irqpilot`: irqpilot's placement policy, run through `irqpilot_core::Controller::step` on
//!   `SimPlatform` at the interval the policy asks for (see [`Irqpilot`]).
//! * `irqbalance`: an outside balancer writes the exported tree (`scripts/vs-irqbalance.sh`);
//!   the twin itself places nothing.
//!
//! The kernel-side rules every write meets (effective CPU, vector capacity, managed vectors) are
//! in `vectors.rs`; the costs of a move (cold penalty, cache-cold interrupts) in `config::Costs`.

use crate::config::Scenario;
pub use crate::config::{PlacementCfg, PlacementPolicy, isolation_of};
use crate::error::BuildError;
use crate::rng::Stream;
use crate::sim::Sim;
use irqpilot_core::{Action, CpuId, CpuSet, Machine, Plan, Topology};

mod irqpilot;
mod log;

pub use irqpilot::Irqpilot;
pub(crate) use log::PlacementLog;
pub use log::refusal_name;
use std::collections::BTreeMap;

/// Machine set-up placement depends on, once the devices exist: SMT siblings, the boot-time
/// default affinity (`irqaffinity=`), and the initial layout checked against the vector
/// capacity (kernel-managed vectors reserve a slot on every CPU of their mask, `managed.rs`).
pub(crate) fn prepare(sim: &mut Sim) -> Result<(), BuildError> {
    sim.init_smt();
    let iso = isolation_of(&sim.sc.machine)?;
    let online = sim.topo.online.clone();
    if let Some(aff) = &iso.irqaffinity {
        let within = aff.intersection(&online);
        if !within.is_empty() {
            sim.default_affinity = within;
        }
    }
    let cap = sim.sc.machine.vectors_per_cpu;
    for (cpu, n) in sim.vectors_per_cpu().iter().enumerate() {
        if *n > cap {
            return Err(BuildError::VectorCapacity {
                cpu,
                vectors: *n,
                cap,
            });
        }
    }
    Ok(())
}

/// The 2.5-era kernel's random rotation.
#[derive(Clone, Debug)]
pub struct Rotation {
    rng: Stream,
    interval_ns: u64,
}

impl Rotation {
    /// Rotation every `interval_ms`, drawing from the stream `placement.rotate` of `seed`.
    pub fn new(seed: u64, interval_ms: u64) -> Rotation {
        Rotation {
            rng: Stream::new(seed, "placement.rotate"),
            interval_ns: interval_ms.max(1) * 1_000_000,
        }
    }

    /// The rotation of a scenario, if its policy is `rotate`.
    pub fn of(sc: &Scenario) -> Option<Rotation> {
        (sc.placement.policy == PlacementPolicy::Rotate)
            .then(|| Rotation::new(sc.seed, sc.placement.rotate_interval_ms))
    }

    /// Time between rounds.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// One round: every IRQ user space may move (not kernel-managed) gets a CPU drawn
    /// uniformly from the online CPUs, in IRQ order, each independently of the others.
    pub fn plan(&mut self, machine: &Machine) -> Plan {
        let online: Vec<CpuId> = machine.topology.online.iter().collect();
        let mut plan = Plan::default();
        if online.is_empty() {
            return plan;
        }
        for irq in machine.irqs.values() {
            if irq.managed == Some(true) {
                continue;
            }
            let cpu = online[self.rng.below(online.len() as u64) as usize];
            plan.actions.push(Action::SetAffinity {
                irq: irq.irq,
                cpus: CpuSet::single(cpu),
            });
        }
        plan
    }
}

/// `cpus` in the order an administrator fills them: first threads before second threads, then
/// cores in package order, packages interleaved (CPU 0 of package 0, of package 1, ...).
pub fn spread_order(topo: &Topology, cpus: &CpuSet) -> Vec<CpuId> {
    let mut keyed: Vec<((usize, usize, u32, u32), CpuId)> = cpus
        .iter()
        .map(|c| {
            let thread = topo
                .smt_siblings(c)
                .iter()
                .position(|s| s == c)
                .unwrap_or(0);
            let core = topo.core_key(c);
            let pkg_cores = topo.cores_in(&topo.package_cpus(c));
            let core_rank = pkg_cores.keys().position(|k| *k == core).unwrap_or(0);
            ((thread, core_rank, topo.package_key(c), c.0), c)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, c)| c).collect()
}

/// The static binding: every IRQ user space may move, in number order, on the allowed CPU with
/// the fewest vectors (counting every vector where it is at that point, the IRQ's own excluded),
/// ties broken by [`spread_order`]. CPUs at `vectors_per_cpu` are skipped, so applying the plan
/// in order never meets ENOSPC; an IRQ with no room anywhere allowed is noted and stays.
pub fn static_plan(machine: &Machine, vectors_per_cpu: u32) -> Plan {
    let topo = &machine.topology;
    let hk = machine.housekeeping();
    let current = |i: &irqpilot_core::Irq| i.effective.as_ref().and_then(CpuSet::first);
    let mut used: BTreeMap<CpuId, u32> = BTreeMap::new();
    for c in machine.irqs.values().filter_map(current) {
        *used.entry(c).or_default() += 1;
    }
    let mut plan = Plan::default();
    for irq in machine.irqs.values().filter(|i| i.managed != Some(true)) {
        let here = current(irq);
        let local = irq
            .node
            .and_then(|n| topo.nodes.get(&n))
            .map(|n| n.intersection(&hk))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| hk.clone());
        let count = |c: &CpuId| used.get(c).copied().unwrap_or(0) - u32::from(Some(*c) == here);
        let pick = spread_order(topo, &local)
            .into_iter()
            .enumerate()
            .filter(|(_, c)| count(c) < vectors_per_cpu)
            .min_by_key(|(rank, c)| (count(c), *rank))
            .map(|(_, c)| c);
        match pick {
            Some(c) => {
                if let Some(h) = here.and_then(|h| used.get_mut(&h)) {
                    *h = h.saturating_sub(1);
                }
                *used.entry(c).or_default() += 1;
                plan.actions.push(Action::SetAffinity {
                    irq: irq.irq,
                    cpus: CpuSet::single(c),
                });
            }
            None => plan.notes.push(format!(
                "irq {}: no allowed CPU has a free vector; left where it is",
                irq.irq
            )),
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_order_fills_packages_then_cores_then_threads() {
        let t = Topology::synthetic(1, 2, 2, 2);
        // Package 0: cores {0,4} {1,5}; package 1: cores {2,6} {3,7}.
        let order: Vec<u32> = spread_order(&t, &t.online).iter().map(|c| c.0).collect();
        assert_eq!(order, vec![0, 2, 1, 3, 4, 6, 5, 7]);
    }

    #[test]
    fn rotation_is_deterministic_and_skips_managed_irqs() {
        let mut m = Machine {
            topology: Topology::synthetic(1, 1, 4, 1),
            ..Machine::default()
        };
        for n in 24..28 {
            let mut irq = irqpilot_core::Irq::new(irqpilot_core::IrqNum(n));
            irq.managed = Some(n == 27);
            m.irqs.insert(irq.irq, irq);
        }
        let a = Rotation::new(1, 20).plan(&m);
        let b = Rotation::new(1, 20).plan(&m);
        assert_eq!(a, b);
        assert_eq!(a.actions.len(), 3);
        let mut r = Rotation::new(1, 20);
        let rounds: Vec<Plan> = (0..8).map(|_| r.plan(&m)).collect();
        assert!(rounds.windows(2).any(|w| w[0] != w[1]));
    }
}
