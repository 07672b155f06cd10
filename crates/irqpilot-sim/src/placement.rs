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

use crate::config::{CmdlineError, Inconsistency, MachineCfg, Scenario};
use crate::error::BuildError;
use crate::rng::Stream;
use crate::sim::Sim;
use irqpilot_core::{Action, CpuId, CpuSet, Isolation, Machine, Plan, Topology};
use irqpilot_linux::format::cmdline::{isolation_from_cmdline, parse_cmdline};

mod irqpilot;
mod log;

pub use irqpilot::Irqpilot;
pub(crate) use log::PlacementLog;
pub use log::refusal_name;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Who places IRQs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlacementPolicy {
    /// Nobody: the initial layout stays.
    #[default]
    None,
    /// Random rotation every 20 ms (the 2.5 kernel).
    Rotate,
    /// A fixed binding computed once from the topology.
    Static,
    /// irqpilot's placement policy.
    Irqpilot,
    /// Debian's irqbalance, outside the twin, through the exported tree.
    Irqbalance,
}

impl PlacementPolicy {
    /// Every policy, in the order `--set placement=` lists them.
    pub const ALL: [PlacementPolicy; 5] = [
        PlacementPolicy::None,
        PlacementPolicy::Rotate,
        PlacementPolicy::Static,
        PlacementPolicy::Irqpilot,
        PlacementPolicy::Irqbalance,
    ];

    /// The name used in `--set placement=` and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PlacementPolicy::None => "none",
            PlacementPolicy::Rotate => "rotate",
            PlacementPolicy::Static => "static",
            PlacementPolicy::Irqpilot => "irqpilot",
            PlacementPolicy::Irqbalance => "irqbalance",
        }
    }
}

fn d_rotate_ms() -> u64 {
    20
}

/// The `[placement]` section of a scenario.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlacementCfg {
    /// Who places IRQs.
    #[serde(default)]
    pub policy: PlacementPolicy,
    /// Period of `rotate` (HZ/50 = 20 ms in 2.5.52, Kamble).
    #[serde(default = "d_rotate_ms")]
    pub rotate_interval_ms: u64,
    /// irqpilot's placement configuration (the `[placement]` section of `irqpilot.toml`) for
    /// `irqpilot`. Scenarios compress its periods with the rest of time (docs/placement-twin.md).
    #[serde(default)]
    pub irqpilot: irqpilot_core::PlacementConfig,
}

impl Default for PlacementCfg {
    fn default() -> Self {
        PlacementCfg {
            policy: PlacementPolicy::None,
            rotate_interval_ms: d_rotate_ms(),
            irqpilot: irqpilot_core::PlacementConfig::default(),
        }
    }
}

/// The machine's isolation, from its kernel command line as Linux derives it: `isolcpus=`
/// (its CPUs are `/sys/devices/system/cpu/isolated` when the `domain` flag is in force),
/// `nohz_full=`, `irqaffinity=`.
pub fn isolation_of(mc: &MachineCfg) -> Result<Isolation, CmdlineError> {
    let ncpu = mc.packages * mc.cores_per_package * mc.threads_per_core;
    let (mut iso, errors) = isolation_from_cmdline(&parse_cmdline(&mc.cmdline), Some(ncpu));
    if let Some(e) = errors.first() {
        return Err(CmdlineError(e.message.clone()));
    }
    let domain = iso
        .isolcpus
        .as_ref()
        .filter(|ic| ic.flags.contains(&irqpilot_core::IsolFlag::Domain))
        .map(|ic| ic.cpus.clone());
    iso.isolated = Some(domain.unwrap_or_default());
    Ok(iso)
}

/// Checks of the `[placement]` section and the machine fields placement depends on.
pub(crate) fn validate(sc: &Scenario) -> Result<(), Inconsistency> {
    if sc.placement.rotate_interval_ms == 0 {
        return Err(Inconsistency::NotPositive("placement.rotate_interval_ms"));
    }
    if sc.machine.vectors_per_cpu == 0 {
        return Err(Inconsistency::NotPositive("machine.vectors_per_cpu"));
    }
    sc.placement.irqpilot.validate()?;
    isolation_of(&sc.machine)?;
    Ok(())
}

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
