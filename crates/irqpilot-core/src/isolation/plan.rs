//! The isolation planner (`irqpilot isolate --cpus 4-23`): what it takes to keep a set of CPUs
//! free of device interrupts, and whether the housekeeping CPUs can take them.
//!
//! 1. Every movable IRQ whose mask or effective CPU touches the CPUs must leave them; the
//!    placement policy places them on the remaining housekeeping CPUs as it would for boot
//!    isolation, counting vectors per CPU (balancing.md 5.6: funnelling N IRQs onto H CPUs
//!    needs N/H below ~200 per CPU, managed reservations included).
//! 2. Where they do not fit, NIC queue counts are cut to the number of housekeeping CPUs
//!    (ethtool channels), largest NIC first, until they fit: tuned's realtime profile sets
//!    channels "ideally the number of housekeeping CPUs", and more queues than CPUs only add
//!    vectors (scaling.rst: one queue per CPU at most; balancing.md 4.2, 5.5, 5.8).
//! 3. `/proc/irq/default_smp_affinity` becomes the housekeeping CPUs, so IRQs registered later
//!    start there (balancing.md 5.1, 8.3).
//! 4. Kernel-managed IRQs cannot be moved from user space; only `isolcpus=managed_irq` at boot
//!    steers them, best effort (balancing.md 5.2-5.4). They are listed with the boot command
//!    line that isolates the CPUs completely.

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, IrqNum};
use crate::irq::Irq;
use crate::isolation::{IsolCpus, IsolFlag};
use crate::machine::Machine;
use crate::placement::{self, Decision, Learned, PlacementConfig};
use crate::plan::{Action, Plan};
use crate::policy::PolicyInput;
use crate::queue::{Queue, QueueKind};
use crate::rates::Rates;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A movable IRQ that touches the CPUs to isolate.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Leaving {
    /// The IRQ.
    pub irq: IrqNum,
    /// Its name (actions).
    pub name: String,
    /// `smp_affinity_list`.
    pub mask: Option<CpuSet>,
    /// `effective_affinity_list`.
    pub effective: Option<CpuSet>,
    /// Where the plan puts it (`None`: no housekeeping CPU has a free vector, or the IRQ goes
    /// away with its queue).
    pub to: Option<CpuSet>,
    /// Its queue is one the channel cuts remove: the IRQ goes away rather than moves.
    #[serde(default)]
    pub removed: bool,
}

/// A kernel-managed IRQ whose mask touches the CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedIrq {
    /// The IRQ.
    pub irq: IrqNum,
    /// Its name.
    pub name: String,
    /// Its mask (spread by the kernel).
    pub mask: Option<CpuSet>,
    /// Whether `isolcpus=managed_irq` can steer it: its mask also has a housekeeping CPU. A
    /// mask of isolated CPUs only still fires there, for I/O those CPUs submit (5.4).
    pub steerable: bool,
}

/// Channel advice for one NIC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelAdvice {
    /// Network interface.
    pub device: String,
    /// Data queue vectors it has now.
    pub queues: u32,
    /// The count to set (the housekeeping CPU count).
    pub recommended: u32,
    /// Whether its queues are combined RX/TX channels (else separate RX and TX).
    pub combined: bool,
}

/// Vectors on the housekeeping CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VectorCheck {
    /// Vectors per CPU (configured).
    pub capacity_per_cpu: u32,
    /// Vectors on the housekeeping CPUs now.
    pub used_now: u32,
    /// Vectors they would hold with every leaving IRQ on them.
    pub needed: u32,
    /// Housekeeping CPUs times capacity.
    pub available: u32,
    /// The fullest housekeeping CPU after the plan, and its count.
    pub fullest: Option<(CpuId, u32)>,
    /// Whether every leaving IRQ found a CPU with a free vector.
    pub fits: bool,
}

/// Boot parameters that complete the isolation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootParams {
    /// `isolcpus=managed_irq,domain,<cpus>`.
    pub isolcpus: IsolCpus,
    /// `nohz_full=<cpus>`.
    pub nohz_full: CpuSet,
    /// `rcu_nocbs=<cpus>`.
    pub rcu_nocbs: CpuSet,
    /// `irqaffinity=<housekeeping>`.
    pub irqaffinity: CpuSet,
}

impl BootParams {
    /// The parameters as kernel command line words.
    pub fn to_cmdline(&self) -> String {
        let mut flags: Vec<&str> = self
            .isolcpus
            .flags
            .iter()
            .map(|f| match f {
                IsolFlag::ManagedIrq => "managed_irq",
                IsolFlag::Domain => "domain",
                IsolFlag::Nohz => "nohz",
                IsolFlag::Other(s) => s.as_str(),
            })
            .collect();
        // The form tuned and the kernel docs write: managed_irq first.
        flags.sort_by_key(|f| (*f != "managed_irq", *f));
        format!(
            "isolcpus={},{} nohz_full={} rcu_nocbs={} irqaffinity={}",
            flags.join(","),
            self.isolcpus.cpus,
            self.nohz_full,
            self.rcu_nocbs,
            self.irqaffinity
        )
    }
}

/// Everything `irqpilot isolate` reports and, with `--apply`, does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsolationPlan {
    /// The CPUs to isolate (online ones).
    pub isolate: CpuSet,
    /// Where device interrupts go instead.
    pub housekeeping: CpuSet,
    /// Movable IRQs that touch `isolate`.
    pub must_leave: Vec<Leaving>,
    /// The vector check.
    pub vectors: VectorCheck,
    /// Channel cuts needed to fit (empty when everything fits).
    pub channels: Vec<ChannelAdvice>,
    /// Whether it fits after the channel cuts (recomputed from the freed vectors).
    pub fits_after_channels: bool,
    /// The new `/proc/irq/default_smp_affinity`, when it changes.
    pub default_affinity: Option<CpuSet>,
    /// Managed IRQs on the CPUs: only a boot option steers them.
    pub managed: Vec<ManagedIrq>,
    /// The boot parameters that complete the isolation.
    pub boot: BootParams,
    /// `boot` as command line words.
    pub cmdline: String,
    /// The actions: channel cuts first (they re-create IRQs), then affinity and default for
    /// the machine as it will be after the cuts (no write names an IRQ a cut removes).
    pub plan: Plan,
    /// The placement decision on the machine as it is, before any cut: what `vectors`
    /// describes.
    pub decision: Decision,
    /// The placement decision behind `plan` when channels are cut: the same machine without
    /// the IRQs the cuts remove.
    pub after_channels: Option<Decision>,
}

/// Why a request cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsolationError {
    /// No online CPU named.
    #[error("none of the CPUs {0} is online")]
    NothingToIsolate(CpuSet),
    /// Nothing left for housekeeping.
    #[error("isolating {0} leaves no online housekeeping CPU")]
    NoHousekeeping(CpuSet),
}

/// Plans the isolation of `cpus` on `machine` (rates, when given, let the placement balance
/// by load; without them the leaving IRQs are spread by vectors).
pub fn plan_isolation(
    machine: &Machine,
    cpus: &CpuSet,
    cfg: &PlacementConfig,
    rates: Option<&Rates>,
) -> Result<IsolationPlan, IsolationError> {
    let online = &machine.topology.online;
    let isolate = cpus.intersection(online);
    if isolate.is_empty() {
        return Err(IsolationError::NothingToIsolate(cpus.clone()));
    }
    let housekeeping = machine
        .housekeeping()
        .intersection(online)
        .difference(&isolate);
    let housekeeping = housekeeping.difference(&cfg.ban_cpus);
    if housekeeping.is_empty() {
        return Err(IsolationError::NoHousekeeping(isolate));
    }
    // The machine as it will be: the CPUs isolated on top of what already is.
    let mut target = machine.clone();
    let iso = &mut target.isolation;
    iso.isolated = Some(iso.isolated.clone().unwrap_or_default().union(&isolate));
    let cfg = PlacementConfig {
        manage_default_affinity: true,
        ..cfg.clone()
    };
    let decision = placement::decide(
        &cfg,
        &Learned::default(),
        &PolicyInput {
            machine: &target,
            rates,
            now: crate::ids::MonoNs(0),
        },
    );
    let on_hk = |loads: &[placement::CpuLoad]| -> Vec<(CpuId, u32)> {
        loads
            .iter()
            .filter(|c| housekeeping.contains(c.cpu))
            .map(|c| (c.cpu, c.vectors))
            .collect()
    };
    let now = on_hk(&decision.per_cpu_load_before);
    let after = on_hk(&decision.per_cpu_load_after);
    let stuck = decision.stuck.len() as u32;
    let vectors = VectorCheck {
        capacity_per_cpu: cfg.vector_capacity,
        used_now: now.iter().map(|x| x.1).sum(),
        needed: after.iter().map(|x| x.1).sum::<u32>() + stuck,
        available: housekeeping.len() as u32 * cfg.vector_capacity,
        fullest: after
            .iter()
            .copied()
            .max_by_key(|x| (x.1, std::cmp::Reverse(x.0))),
        fits: stuck == 0,
    };

    let (channels, fits_after_channels) = channel_cuts(machine, &decision, &housekeeping);
    // The IRQs of the queues a cut removes go away with them: the affinities are planned on
    // the machine as it will be, so no write names a vanished IRQ.
    let removed = removed_by(machine, &channels);
    let after_channels = (!removed.is_empty()).then(|| {
        let mut after = target.clone();
        after.irqs.retain(|n, _| !removed.contains(n));
        placement::decide(
            &cfg,
            &Learned::default(),
            &PolicyInput {
                machine: &after,
                rates,
                now: crate::ids::MonoNs(0),
            },
        )
    });
    let placing = after_channels.as_ref().unwrap_or(&decision);

    let held: BTreeMap<IrqNum, _> = decision.held.iter().map(|h| (h.irq, &h.hold)).collect();
    let planned: BTreeMap<IrqNum, &CpuSet> = placing.moves.iter().map(|m| (m.irq, &m.to)).collect();
    let touches = |s: &Option<CpuSet>| s.as_ref().is_some_and(|s| s.intersects(&isolate));
    let mut must_leave = Vec::new();
    let mut managed = Vec::new();
    for irq in machine.irqs.values() {
        if !(touches(&irq.requested) || touches(&irq.effective)) {
            continue;
        }
        match held.get(&irq.irq) {
            Some(crate::placement::Hold::Managed) => managed.push(ManagedIrq {
                irq: irq.irq,
                name: irq.name(),
                mask: irq.requested.clone(),
                steerable: irq
                    .requested
                    .as_ref()
                    .is_some_and(|m| m.intersects(&housekeeping)),
            }),
            Some(_) => {}
            None => must_leave.push(Leaving {
                irq: irq.irq,
                name: irq.name(),
                mask: irq.requested.clone(),
                effective: irq.effective.clone(),
                to: planned.get(&irq.irq).map(|s| (*s).clone()),
                removed: removed.contains(&irq.irq),
            }),
        }
    }

    let mut plan = Plan::default();
    for c in &channels {
        plan.actions.push(Action::SetChannels {
            device: c.device.clone(),
            combined: c.combined.then_some(c.recommended),
            rx: (!c.combined).then_some(c.recommended),
            tx: (!c.combined).then_some(c.recommended),
        });
    }
    plan.actions.extend(placing.plan.actions.iter().cloned());
    plan.notes.extend(placing.plan.notes.iter().cloned());
    if !removed.is_empty() {
        plan.notes.push(format!(
            "{} IRQs go away with the channel cuts; the affinities are planned without them",
            removed.len()
        ));
    }
    let default_affinity = placing.plan.actions.iter().find_map(|a| match a {
        Action::SetDefaultAffinity { cpus } => Some(cpus.clone()),
        _ => None,
    });
    if machine.default_affinity.is_none() {
        // Unreadable or not a CPU mask: writing over it would lose the original, so it is left
        // alone, and said, since IRQs requested later may then land on the isolated CPUs.
        plan.notes.push(format!(
            "default_smp_affinity could not be read as a CPU mask: left alone; IRQs requested \
             later may land on {isolate} (set it to {housekeeping} by hand)"
        ));
    }

    let boot = boot_params(machine, &isolate, &housekeeping);
    Ok(IsolationPlan {
        cmdline: boot.to_cmdline(),
        isolate,
        housekeeping,
        must_leave,
        vectors,
        channels,
        fits_after_channels,
        default_affinity,
        managed,
        boot,
        plan,
        decision,
        after_channels,
    })
}

/// Channel cuts: largest NIC first, each to the housekeeping CPU count, until the vectors that
/// did not fit are freed. Returns the cuts and whether they are enough.
fn channel_cuts(
    machine: &Machine,
    decision: &Decision,
    housekeeping: &CpuSet,
) -> (Vec<ChannelAdvice>, bool) {
    let mut deficit = decision.stuck.len() as u32;
    if deficit == 0 {
        return (Vec::new(), true);
    }
    let hk = housekeeping.len() as u32;
    // Data queues per interface: (combined, rx, tx) counts.
    let mut nics: BTreeMap<String, (u32, u32, u32)> = BTreeMap::new();
    for irq in machine.irqs.values() {
        let Some((name, q)) = nic_queue(machine, irq) else {
            continue;
        };
        let e = nics.entry(name).or_default();
        match q.kind {
            QueueKind::TxRx => e.0 += 1,
            QueueKind::Rx => e.1 += 1,
            QueueKind::Tx => e.2 += 1,
            _ => {}
        }
    }
    let mut order: Vec<(String, u32, bool)> = nics
        .into_iter()
        .filter_map(|(name, (c, rx, tx))| {
            if c > 0 {
                Some((name, c, true))
            } else if rx.max(tx) > 0 {
                Some((name, rx.max(tx), false))
            } else {
                None
            }
        })
        .filter(|(_, q, _)| *q > hk)
        .collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = Vec::new();
    for (device, queues, combined) in order {
        if deficit == 0 {
            break;
        }
        // Separate RX and TX queues each hold a vector.
        let per_queue = if combined { 1 } else { 2 };
        deficit = deficit.saturating_sub((queues - hk) * per_queue);
        out.push(ChannelAdvice {
            device,
            queues,
            recommended: hk,
            combined,
        });
    }
    (out, deficit == 0)
}

/// The interface a movable data queue's IRQ belongs to (its device's first netdev, else the
/// owner its name gives), with the queue; `None` for NVMe, managed and other IRQs.
fn nic_queue<'a>(machine: &Machine, irq: &'a Irq) -> Option<(String, &'a Queue)> {
    if irq.managed == Some(true) {
        return None;
    }
    let q = irq.queue.as_ref()?;
    let dev = irq.device.as_ref().and_then(|a| machine.devices.get(a));
    let name = match dev.and_then(|d| d.net.first()) {
        Some(n) => n.clone(),
        None if dev.is_none_or(|d| d.nvme.is_empty()) => q.owner.clone(),
        None => return None,
    };
    Some((name, q))
}

/// The IRQs whose queues the cuts remove: cut to N channels, a driver keeps queues 0..N-1.
fn removed_by(machine: &Machine, cuts: &[ChannelAdvice]) -> BTreeSet<IrqNum> {
    machine
        .irqs
        .values()
        .filter(|irq| {
            nic_queue(machine, irq).is_some_and(|(name, q)| {
                cuts.iter().any(|c| {
                    let kind_cut = match q.kind {
                        QueueKind::TxRx => c.combined,
                        QueueKind::Rx | QueueKind::Tx => !c.combined,
                        _ => false,
                    };
                    c.device == name && kind_cut && q.index.is_some_and(|i| i >= c.recommended)
                })
            })
        })
        .map(|irq| irq.irq)
        .collect()
}

/// `isolcpus=managed_irq,domain,...`: `managed_irq` keeps managed IRQs' delivery off the CPUs
/// where their mask allows (the only lever on them); `domain` keeps the scheduler from
/// balancing tasks onto them. `nohz_full` stops the tick there but does not isolate managed
/// IRQs (5.3). `rcu_nocbs` moves RCU callbacks off them. `irqaffinity` gives IRQs set up at
/// boot, before irqpilot runs, the housekeeping CPUs. Existing isolation is kept (union).
fn boot_params(machine: &Machine, isolate: &CpuSet, housekeeping: &CpuSet) -> BootParams {
    let iso = &machine.isolation;
    let mut cpus = isolate.clone();
    if let Some(ic) = &iso.isolcpus {
        cpus = cpus.union(&ic.cpus);
    }
    if let Some(i) = &iso.isolated {
        cpus = cpus.union(i);
    }
    let nohz = iso.nohz_full.clone().unwrap_or_default().union(&cpus);
    let mut flags: std::collections::BTreeSet<IsolFlag> = [IsolFlag::ManagedIrq, IsolFlag::Domain]
        .into_iter()
        .collect();
    if let Some(ic) = &iso.isolcpus {
        flags.extend(ic.flags.iter().cloned());
    }
    BootParams {
        isolcpus: IsolCpus {
            cpus: cpus.clone(),
            flags,
        },
        nohz_full: nohz.clone(),
        rcu_nocbs: nohz,
        irqaffinity: housekeeping.clone(),
    }
}
