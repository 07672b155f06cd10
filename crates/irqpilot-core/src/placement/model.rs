//! The state the search works on: online CPUs and IRQs in dense arrays, with the load of every
//! topology group (CPU, core, last-level cache, package, and each device's queues per core)
//! and every CPU's vector use kept up to date as IRQs move.

use super::capacity::{VectorUse, vector_use};
use super::config::PlacementConfig;
use super::constraints::{Hold, IrqRule};
use super::load::{LoadBasis, cpu_factors, finite, row_load};
use crate::cpuset::CpuSet;
use crate::ids::{CpuId, IrqNum, NodeId, PciAddr};
use crate::irq::Irq;
use crate::machine::Machine;
use crate::queue::QueueKind;
use crate::rates::Rates;
use std::collections::{BTreeMap, BTreeSet};

/// One online CPU and the groups it belongs to (dense group numbers per level).
#[derive(Clone, Debug)]
pub(crate) struct CpuSlot {
    pub id: CpuId,
    pub core: u32,
    pub llc: u32,
    pub pkg: u32,
    /// Whether IRQs may be placed here (online housekeeping, not banned).
    pub allowed: bool,
}

/// One IRQ as the search sees it.
#[derive(Clone, Debug)]
pub(crate) struct IrqSlot {
    pub irq: IrqNum,
    /// CPU shares.
    pub load: f64,
    /// Dense CPU it is delivered to before the plan.
    pub home: Option<u32>,
    /// Dense CPU it is delivered to now, in the search.
    pub pos: Option<u32>,
    /// Why it stays put, if it does.
    pub hold: Option<Hold>,
    /// Heavy enough to be moved for balance.
    pub heavy: bool,
    /// CPUs a pin restricts it to (within the allowed ones).
    pub pinned: Option<CpuSet>,
    /// CPUs the kernel refused for it (EINVAL), learned.
    pub refused_cpus: Option<CpuSet>,
    /// The device's NUMA-local CPUs, when known: an index into [`Model::locals`].
    pub local: Option<u32>,
    /// Dense device index, for data queues (RX/TX/combined/I/O) of a known device.
    pub queue_dev: Option<u32>,
    /// Whether `smp_affinity_list` names only CPUs the IRQ may use.
    pub mask_ok: bool,
}

impl IrqSlot {
    /// Whether the IRQ may go to `cpu` (dense slot `c`), ignoring vector room.
    pub fn may_use(&self, c: &CpuSlot) -> bool {
        c.allowed
            && self.pinned.as_ref().is_none_or(|p| p.contains(c.id))
            && self.refused_cpus.as_ref().is_none_or(|r| !r.contains(c.id))
    }
}

/// Weights of the objective (docs/placement.md).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Weights {
    pub smt: f64,
    pub llc: f64,
    pub pkg: f64,
    pub queue: f64,
    pub numa: f64,
}

/// The whole state.
#[derive(Clone, Debug)]
pub(crate) struct Model {
    pub cpus: Vec<CpuSlot>,
    pub irqs: Vec<IrqSlot>,
    /// Distinct NUMA-local CPU sets, shared by the IRQs of a device or node.
    pub locals: Vec<CpuSet>,
    pub cpu_load: Vec<f64>,
    pub core_load: Vec<f64>,
    pub llc_load: Vec<f64>,
    pub pkg_load: Vec<f64>,
    /// `queue_load[device][core]`: load of one device's data queues on one core.
    pub queue_load: Vec<Vec<f64>>,
    pub vectors: Vec<u32>,
    pub cap: Vec<u32>,
    /// Load measured on each CPU that belongs to no IRQ the model places (immovable IRQs
    /// without a known CPU, rows without an inventory entry).
    background: Vec<f64>,
    pub weights: Weights,
    pub basis: LoadBasis,
}

/// Where an IRQ is delivered: the effective CPU when it lies inside the requested mask; the
/// requested CPU when the mask is a single CPU and the move is still pending (x86 moves an IRQ
/// when it next fires; a fixture tree has no kernel to move it at all); otherwise the first
/// online CPU the masks name.
pub(crate) fn position(irq: &Irq, online: &CpuSet) -> Option<CpuId> {
    let eff = irq.effective.as_ref().filter(|e| !e.is_empty());
    let first_online = |s: &CpuSet| s.iter().find(|c| online.contains(*c));
    match (irq.requested.as_ref(), eff) {
        (Some(req), Some(eff)) if eff.is_subset(req) => first_online(eff),
        (Some(req), _) if req.len() == 1 => first_online(req),
        (Some(req), Some(eff)) => {
            first_online(&eff.intersection(req)).or_else(|| first_online(req))
        }
        (Some(req), None) => first_online(req),
        (None, Some(eff)) => first_online(eff),
        (None, None) => None,
    }
}

fn is_data_queue(irq: &Irq) -> bool {
    irq.queue.as_ref().is_some_and(|q| {
        matches!(
            q.kind,
            QueueKind::Rx | QueueKind::Tx | QueueKind::TxRx | QueueKind::Io
        )
    })
}

/// What an IRQ's preferred CPUs depend on: its device, its node, the application it feeds
/// (an index into `applications`).
type LocalKey<'a> = (Option<&'a PciAddr>, Option<NodeId>, Option<usize>);

/// The CPUs sharing a last-level cache with any of `cpus` (the CPUs themselves where the cache
/// is unknown).
fn near_cpus(topo: &crate::topology::Topology, cpus: &CpuSet) -> CpuSet {
    let mut near = CpuSet::new();
    for c in cpus.iter().filter(|c| topo.online.contains(*c)) {
        near.insert(c);
        if let Some(l) = topo.llc(c) {
            near = near.union(&l.shared_cpus);
        }
    }
    near
}

/// Dense numbering of group keys, in key order.
fn dense_groups<K: Ord + Copy>(keys: &[K]) -> (Vec<u32>, usize) {
    let uniq: BTreeSet<K> = keys.iter().copied().collect();
    let index: BTreeMap<K, u32> = uniq
        .iter()
        .enumerate()
        .map(|(i, k)| (*k, i as u32))
        .collect();
    (keys.iter().map(|k| index[k]).collect(), uniq.len())
}

/// What the builder needs besides the machine and rates.
pub(crate) struct BuildInput<'a> {
    pub cfg: &'a PlacementConfig,
    pub allowed: &'a CpuSet,
    /// In `machine.irqs` order.
    pub rules: &'a [IrqRule],
    pub full_cpus: &'a BTreeSet<CpuId>,
    pub refused_cpus: &'a BTreeMap<IrqNum, CpuSet>,
}

impl Model {
    /// Builds the model of `machine` with loads from `rates`.
    pub fn build(machine: &Machine, rates: Option<&Rates>, b: &BuildInput<'_>) -> Model {
        let topo = &machine.topology;
        let online = &topo.online;
        let ids: Vec<CpuId> = online.iter().collect();
        let max_id = ids.last().map_or(0, |c| c.0 as usize + 1);
        let mut dense = vec![u32::MAX; max_id];
        for (i, c) in ids.iter().enumerate() {
            dense[c.0 as usize] = i as u32;
        }
        let core_keys: Vec<CpuId> = ids.iter().map(|&c| topo.core_key(c)).collect();
        // An unknown last-level cache is the core's own (the narrowest honest answer).
        let llc_keys: Vec<(u8, u32)> = ids
            .iter()
            .zip(&core_keys)
            .map(
                |(&c, core)| match topo.llc(c).and_then(|l| l.shared_cpus.first()) {
                    Some(first) => (0, first.0),
                    None => (1, core.0),
                },
            )
            .collect();
        let pkg_keys: Vec<u32> = ids.iter().map(|&c| topo.package_key(c)).collect();
        let (cores, ncores) = dense_groups(&core_keys);
        let (llcs, nllc) = dense_groups(&llc_keys);
        let (pkgs, npkg) = dense_groups(&pkg_keys);
        let cpus: Vec<CpuSlot> = ids
            .iter()
            .enumerate()
            .map(|(i, &id)| CpuSlot {
                id,
                core: cores[i],
                llc: llcs[i],
                pkg: pkgs[i],
                allowed: b.allowed.contains(id),
            })
            .collect();
        let n = cpus.len();
        let dense_of = |c: CpuId| dense.get(c.0 as usize).copied().filter(|d| *d != u32::MAX);

        let mut devices: BTreeMap<&PciAddr, u32> = BTreeMap::new();
        let mut locals: Vec<CpuSet> = Vec::new();
        // Local sets by device, else by node: computed once, not per IRQ.
        let mut local_of: BTreeMap<LocalKey<'_>, Option<u32>> = BTreeMap::new();
        // Each application's neighbourhood: the CPUs sharing a last-level cache with it, less
        // its own (interrupt work there preempts the application, costmodel.md 2.7). An
        // application that fills its caches leaves its IRQs near their device.
        let near_app: Vec<CpuSet> = b
            .cfg
            .applications
            .iter()
            .map(|a| {
                near_cpus(topo, &a.cpus)
                    .difference(&a.cpus)
                    .intersection(b.allowed)
            })
            .collect();
        let mut irqs = Vec::with_capacity(machine.irqs.len());
        for (k, irq) in machine.irqs.values().enumerate() {
            let rule = b.rules.get(k);
            let pos = position(irq, online).and_then(dense_of);
            let dev = irq.device.as_ref().and_then(|a| machine.devices.get(a));
            // A queue whose consumer runs elsewhere prefers the consumer's neighbourhood.
            let app = is_data_queue(irq)
                .then(|| {
                    b.cfg
                        .applications
                        .iter()
                        .position(|a| super::constraints::device_selects(&a.device, irq, machine))
                })
                .flatten()
                .filter(|&i| !near_app[i].is_empty());
            let key = (dev.map(|d| &d.addr), irq.node, app);
            let local = *local_of.entry(key).or_insert_with(|| {
                let set = app
                    .map(|i| near_app[i].clone())
                    .or_else(|| dev.and_then(|d| d.local_cpus.clone()))
                    .filter(|l| !l.is_empty())
                    .or_else(|| {
                        let node = irq.node.or(dev.and_then(|d| d.numa_node))?;
                        topo.nodes.get(&node).cloned()
                    })
                    .map(|l| l.intersection(b.allowed))
                    .filter(|l| !l.is_empty())?;
                let at = match locals.iter().position(|l| *l == set) {
                    Some(at) => at,
                    None => {
                        locals.push(set);
                        locals.len() - 1
                    }
                };
                Some(at as u32)
            });
            let queue_dev = match (&irq.device, is_data_queue(irq)) {
                (Some(addr), true) => {
                    let next = devices.len() as u32;
                    Some(*devices.entry(addr).or_insert(next))
                }
                _ => None,
            };
            let pinned = rule.and_then(|r| r.pinned.clone());
            let refused_cpus = b.refused_cpus.get(&irq.irq).cloned();
            // Offline CPUs in a mask do not matter until they come online (and then the
            // policy sees them).
            let mask_ok = irq.requested.as_ref().is_some_and(|r| {
                !r.difference(pinned.as_ref().unwrap_or(b.allowed))
                    .intersects(online)
                    && !refused_cpus.as_ref().is_some_and(|x| r.intersects(x))
            });
            irqs.push(IrqSlot {
                irq: irq.irq,
                load: 0.0,
                home: pos,
                pos,
                hold: rule.and_then(|r| r.hold.clone()),
                heavy: false,
                pinned,
                refused_cpus,
                local,
                queue_dev,
                mask_ok,
            });
        }

        let mut background = vec![0.0; n];
        let mut basis = LoadBasis::None;
        if let Some(rates) = rates {
            let (factors, b2) = cpu_factors(rates, b.cfg);
            basis = b2;
            let cols: Vec<Option<u32>> = rates.per_cpu.iter().map(|c| dense_of(c.cpu)).collect();
            for row in &rates.rows {
                let Some(num) = row.label.irq() else { continue };
                let slot = irqs
                    .binary_search_by_key(&num, |s| s.irq)
                    .ok()
                    .map(|i| &mut irqs[i]);
                match slot {
                    // Loads belong to IRQs that have a place (or will get one).
                    Some(s) if s.pos.is_some() || s.hold.is_none() => {
                        s.load += row_load(row, &factors);
                    }
                    // The rest stays where it was measured.
                    _ => {
                        for ((r, f), col) in row.per_cpu_per_sec.iter().zip(&factors).zip(&cols) {
                            if let Some(d) = col {
                                background[*d as usize] += finite(*r) * f;
                            }
                        }
                    }
                }
            }
        }
        for s in &mut irqs {
            s.heavy = s.hold.is_none() && s.load >= b.cfg.heavy_min_load && s.load > 0.0;
        }

        let VectorUse { per_cpu: vectors } = vector_use(machine, &cpus, &irqs, &dense_of);
        let cap = vectors
            .iter()
            .zip(&cpus)
            .map(|(&used, c)| {
                if b.full_cpus.contains(&c.id) {
                    // The kernel said ENOSPC here: nothing more goes to this CPU.
                    used.min(b.cfg.vector_capacity)
                } else {
                    b.cfg.vector_capacity
                }
            })
            .collect();

        let mut m = Model {
            cpu_load: vec![0.0; n],
            background,
            core_load: vec![0.0; ncores],
            llc_load: vec![0.0; nllc],
            pkg_load: vec![0.0; npkg],
            queue_load: vec![vec![0.0; ncores]; devices.len()],
            cpus,
            irqs,
            locals,
            vectors,
            cap,
            weights: Weights {
                smt: b.cfg.smt_weight,
                llc: b.cfg.llc_weight,
                pkg: b.cfg.package_weight,
                queue: b.cfg.queue_spread_weight,
                numa: b.cfg.numa_penalty,
            },
            basis,
        };
        m.resum();
        m
    }

    /// Recomputes every group load from the IRQs' positions, always in the same order, so the
    /// same layout gives bit-identical loads however the search got there (moves add and
    /// subtract floats, which leaves rounding dust). The policy's fixed point is checked on
    /// these sums: deciding again on its own result sees exactly the numbers it stopped at.
    pub fn resum(&mut self) {
        self.cpu_load.clone_from(&self.background);
        for v in [&mut self.core_load, &mut self.llc_load, &mut self.pkg_load] {
            v.iter_mut().for_each(|x| *x = 0.0);
        }
        for q in &mut self.queue_load {
            q.iter_mut().for_each(|x| *x = 0.0);
        }
        for c in 0..self.cpus.len() {
            let l = self.cpu_load[c];
            self.add_group_load(c, l);
        }
        for i in 0..self.irqs.len() {
            if let Some(p) = self.irqs[i].pos {
                let l = self.irqs[i].load;
                self.cpu_load[p as usize] += l;
                self.add_group_load(p as usize, l);
                if let Some(d) = self.irqs[i].queue_dev {
                    self.queue_load[d as usize][self.cpus[p as usize].core as usize] += l;
                }
            }
        }
    }

    fn add_group_load(&mut self, c: usize, l: f64) {
        let s = &self.cpus[c];
        self.core_load[s.core as usize] += l;
        self.llc_load[s.llc as usize] += l;
        self.pkg_load[s.pkg as usize] += l;
    }

    /// Whether `cpu` is off IRQ `i`'s device-local CPUs (false when locality is unknown).
    pub fn remote(&self, i: usize, cpu: CpuId) -> bool {
        self.irqs[i]
            .local
            .is_some_and(|l| !self.locals[l as usize].contains(cpu))
    }

    /// Whether CPU `t` has a vector left for one more IRQ.
    pub fn has_room(&self, t: usize) -> bool {
        self.vectors[t] < self.cap[t]
    }

    /// Moves IRQ `i` to CPU `t`, updating every group load and vector count.
    pub fn move_irq(&mut self, i: usize, t: u32) {
        let l = self.irqs[i].load;
        let dev = self.irqs[i].queue_dev;
        if let Some(h) = self.irqs[i].pos {
            let h = h as usize;
            self.cpu_load[h] -= l;
            self.add_group_load(h, -l);
            self.vectors[h] = self.vectors[h].saturating_sub(1);
            if let Some(d) = dev {
                self.queue_load[d as usize][self.cpus[h].core as usize] -= l;
            }
        }
        let tu = t as usize;
        self.cpu_load[tu] += l;
        self.add_group_load(tu, l);
        self.vectors[tu] += 1;
        if let Some(d) = dev {
            self.queue_load[d as usize][self.cpus[tu].core as usize] += l;
        }
        self.irqs[i].pos = Some(t);
    }

    /// Per-CPU loads, by CPU number.
    pub fn per_cpu_load(&self) -> Vec<(CpuId, f64)> {
        self.cpus
            .iter()
            .zip(&self.cpu_load)
            // Subtracting and adding floats leaves dust like -1e-17 on an emptied CPU.
            .map(|(c, l)| (c.id, if l.abs() < 1e-12 { 0.0 } else { *l }))
            .collect()
    }
}
