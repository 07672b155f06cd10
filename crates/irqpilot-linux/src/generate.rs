//! A generated large server, for tests and benchmarks: [`large_server`] builds the model
//! ([`Machine`] + [`Snapshot`]) and [`crate::tree::write_tree`] writes it as a root directory
//! (`irqpilot fixture generate --preset large-server`).
//!
//! The machine: 2 NUMA nodes, 2 packages, 64 cores x 2 threads ([`Topology::synthetic`]: CPUs
//! 0-63 and 128-191 on node 0, 64-127 and 192-255 on node 1), CPUs 120-127 and 248-255 isolated
//! (`isolcpus=managed_irq,domain,...`, `nohz_full=...`), and on the PCI bus, sorted by address:
//!
//! | address | device | node | interrupts, as their drivers and the kernel place them |
//! |---|---|---|---|
//! | 0000:17:00.0 | ice `ens2f0` | 0 | misc + 64 `ice-ens2f0-TxRx-N`: requested node 0, hint CPU N, effective on the SMT siblings 128-191 (the vector allocator's least-loaded CPUs) |
//! | 0000:3b:00.0 | mlx5 `ens1f0np0` | 0 | `mlx5_async` + 64 `mlx5_compN@pci:...` pinned to CPU N (hint = affinity) |
//! | 0000:5e-61:00.0 | NVMe `nvme0`-`nvme3` | 0 | admin `nvmeKq0` + 64 kernel-managed I/O queues |
//! | 0000:86:00.0 | ice `ens5f0` | 1 | pinned to CPU N on node 0 by a vendor script ("all" mode): remote NUMA; queue 63's move is pending (still on CPU 64) |
//! | 0000:af-b2:00.0 | NVMe `nvme4`-`nvme7` | 1 | as above |
//! | 0000:d8:00.0 | mlx5 `ens6f0np0` | 1 | pinned to CPU 64+N: completions 56-63 land on the isolated CPUs 120-127 |
//!
//! NVMe I/O queues follow `group_cpus_evenly`: queue q of each controller serves the two cores
//! (four threads) of group q-1, 32 groups per node, and its effective CPU avoids isolated CPUs
//! when the group has a housekeeping one (`isolcpus=managed_irq`); groups wholly inside the
//! isolated set keep an isolated effective CPU. Platform IRQs (timer, RTC, ACPI, DMAR, two PCIe
//! root ports) complete the picture.
//!
//! Counts are the totals of an uptime of 3-4 days at plausible per-queue rates, drawn from a
//! small linear congruential generator seeded by `seed`: the same seed gives the same machine
//! and the same bytes. Per-CPU IRQ counts stay below 2^32, as the kernel's `unsigned int` does.

mod counters;
mod moving;

pub use moving::MovingServer;

use crate::format::cmdline;
use irqpilot_core::{
    CpuId, CpuSet, Irq, IrqNum, Machine, NodeId, PciAddr, PciDevice, Snapshot, Topology, Trigger,
    queue,
};

/// `osrelease` of the generated server.
pub const KERNEL_RELEASE: &str = "6.12.0-irqpilot-generated";

/// The isolated CPUs of the generated server.
pub const ISOLATED: &str = "120-127,248-255";

/// The generated server's boot command line.
pub const CMDLINE: &str = "BOOT_IMAGE=/boot/vmlinuz-6.12.0-irqpilot-generated \
     root=/dev/mapper/vg0-root ro quiet isolcpus=managed_irq,domain,120-127,248-255 \
     nohz_full=120-127,248-255 rcu_nocbs=120-127,248-255";

/// x86 `nr_irqs` for 256 CPUs and one 24-pin IO-APIC (`arch_probe_nr_irqs`:
/// 24 + 8 * 256 + 16 * 24); `/proc/stat`'s `intr` line has one count per IRQ number below it,
/// and it sets the width of the IRQ label column of `/proc/interrupts`.
const NR_IRQS: u32 = 24 + 8 * 256 + 16 * 24;

const HZ: u64 = 100;

/// Knuth's MMIX linear congruential generator: deterministic and dependency-free.
#[derive(Debug, Clone)]
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn set(list: &str) -> CpuSet {
    CpuSet::parse_list(list).unwrap_or_default()
}

/// What one generated IRQ is, before counts.
struct Spec {
    irq: Irq,
    /// Average interrupts/s on the effective CPU over the uptime.
    rate: (u64, u64),
    /// Softirq the work lands in: `NET_RX` for NIC queues, `BLOCK` for NVMe.
    softirq: Option<&'static str>,
}

struct Builder {
    machine: Machine,
    specs: Vec<Spec>,
    next_irq: u32,
    /// Device IRQs get numbers in PCI address order, after the platform's.
    rng: Lcg,
}

impl Builder {
    fn platform_irq(&mut self, n: u32, chip: &str, hwirq: u64, handler: &str, action: &str) {
        let mut irq = Irq::new(IrqNum(n));
        irq.chip = Some(chip.to_string());
        irq.hwirq = Some(hwirq);
        irq.trigger = Some(if handler == "fasteoi" {
            Trigger::Level
        } else {
            Trigger::Edge
        });
        irq.handler = Some(handler.to_string());
        irq.actions = vec![action.to_string()];
        irq.requested = Some(CpuSet::range(0, 255));
        irq.effective = Some(CpuSet::single(CpuId(0)));
        irq.node = Some(NodeId(0));
        irq.managed = Some(false);
        // x86 timers run on the local APIC: IO-APIC and DMAR lines fire a handful of times.
        self.specs.push(Spec {
            irq,
            rate: (0, 0),
            softirq: None,
        });
    }

    fn device(&mut self, addr: &str, class: u32, driver: Option<&str>, node: u32) -> PciAddr {
        let addr = PciAddr(addr.to_string());
        let mut dev = PciDevice::new(addr.clone());
        dev.class = Some(class);
        dev.driver = driver.map(str::to_string);
        dev.numa_node = Some(NodeId(node));
        dev.local_cpus = self.machine.topology.nodes.get(&NodeId(node)).cloned();
        self.machine.devices.insert(addr.clone(), dev);
        addr
    }

    /// The next MSI-X vector of `addr`: hwirq is the vector index (per-device MSI domains).
    #[allow(clippy::too_many_arguments)]
    fn vector(
        &mut self,
        addr: &PciAddr,
        index: u64,
        action: String,
        requested: CpuSet,
        effective: CpuSet,
        hint: Option<CpuSet>,
        managed: bool,
        node: NodeId,
        rate: (u64, u64),
        softirq: Option<&'static str>,
    ) {
        let n = IrqNum(self.next_irq);
        self.next_irq += 1;
        let dev = self.machine.devices.get_mut(addr);
        let mut irq = Irq::new(n);
        irq.chip = Some(format!("IR-PCI-MSIX-{addr}"));
        irq.hwirq = Some(index);
        irq.trigger = Some(Trigger::Edge);
        irq.handler = Some("edge".to_string());
        irq.queue = queue::recognise(&action);
        irq.actions = vec![action];
        irq.device = Some(addr.clone());
        irq.driver = dev.as_ref().and_then(|d| d.driver.clone());
        irq.node = Some(node);
        irq.requested = Some(requested);
        irq.effective = Some(effective);
        irq.affinity_hint = hint;
        irq.managed = Some(managed);
        if let Some(dev) = dev {
            dev.msi_irqs.push(n);
        }
        self.specs.push(Spec { irq, rate, softirq });
    }

    fn node_cpus(&self, node: u32) -> CpuSet {
        self.machine
            .topology
            .nodes
            .get(&NodeId(node))
            .cloned()
            .unwrap_or_default()
    }

    /// The `i`-th CPU of a node in `cpumask_local_spread` order (ascending CPU number).
    fn local_spread(&self, node: u32, i: usize) -> CpuId {
        let cpus = self.node_cpus(node);
        let n = cpus.len().max(1);
        cpus.iter().nth(i % n).unwrap_or(CpuId(0))
    }

    fn mlx5(&mut self, addr: &str, netdev: &str, node: u32) {
        let a = self.device(addr, 0x020000, Some("mlx5_core"), node);
        if let Some(d) = self.machine.devices.get_mut(&a) {
            d.net = vec![netdev.to_string()];
        }
        let node_cpus = self.node_cpus(node);
        let first = CpuSet::single(node_cpus.first().unwrap_or(CpuId(0)));
        self.vector(
            &a,
            0,
            format!("mlx5_async@pci:{addr}"),
            node_cpus,
            first,
            None,
            false,
            NodeId(node),
            (1, 20),
            None,
        );
        for i in 0..64usize {
            // mlx5 sets affinity and hint together (irq_set_affinity_and_hint).
            let cpu = CpuSet::single(self.local_spread(node, i));
            self.vector(
                &a,
                i as u64 + 1,
                format!("mlx5_comp{i}@pci:{addr}"),
                cpu.clone(),
                cpu.clone(),
                Some(cpu),
                false,
                NodeId(node),
                (800, 6000),
                Some("NET_RX"),
            );
        }
    }

    /// An ice NIC. `pinned_to_cpu_n`: a vendor script pinned queue N to CPU N ("all" mode).
    fn ice(&mut self, addr: &str, netdev: &str, node: u32, pinned_to_cpu_n: bool) {
        let a = self.device(addr, 0x020000, Some("ice"), node);
        if let Some(d) = self.machine.devices.get_mut(&a) {
            d.net = vec![netdev.to_string()];
        }
        let node_cpus = self.node_cpus(node);
        let first = CpuSet::single(node_cpus.first().unwrap_or(CpuId(0)));
        self.vector(
            &a,
            0,
            format!("ice-{addr}:misc"),
            node_cpus.clone(),
            first,
            None,
            false,
            NodeId(node),
            (0, 5),
            None,
        );
        for i in 0..64usize {
            // ice only hints (irq_update_affinity_hint); the kernel keeps the node mask and the
            // vector allocator picks the least-loaded CPU: here the SMT siblings 128-191.
            let hint = CpuSet::single(self.local_spread(node, i));
            let (requested, effective) = if pinned_to_cpu_n {
                let cpu = CpuSet::single(CpuId(i as u32));
                // Queue 63's move to CPU 63 is still pending: delivered where it was, on the
                // device's node.
                let eff = if i == 63 {
                    CpuSet::single(self.local_spread(node, 0))
                } else {
                    cpu.clone()
                };
                (cpu, eff)
            } else {
                let sibling = self.local_spread(node, 64 + i);
                (node_cpus.clone(), CpuSet::single(sibling))
            };
            self.vector(
                &a,
                i as u64 + 1,
                format!("ice-{netdev}-TxRx-{i}"),
                requested,
                effective,
                Some(hint),
                false,
                NodeId(node),
                (300, 4000),
                Some("NET_RX"),
            );
        }
    }

    fn nvme(&mut self, addr: &str, k: u32, node: u32) {
        let a = self.device(addr, 0x010802, Some("nvme"), node);
        if let Some(d) = self.machine.devices.get_mut(&a) {
            d.nvme = vec![format!("nvme{k}")];
        }
        let admin_cpu = self.local_spread(node, 2 * (k as usize % 4));
        self.vector(
            &a,
            0,
            format!("nvme{k}q0"),
            CpuSet::range(0, 255),
            CpuSet::single(admin_cpu),
            None,
            false,
            NodeId(node),
            (0, 1),
            None,
        );
        let isolated = set(ISOLATED);
        for q in 1..=64u32 {
            let group = nvme_group(&self.machine.topology, q - 1);
            let housekeeping = group.difference(&isolated);
            let pool = if housekeeping.is_empty() {
                group.clone()
            } else {
                housekeeping
            };
            // The vector allocator spreads the controllers' queue q over the group's CPUs.
            let eff = pool
                .iter()
                .nth(k as usize % pool.len().max(1))
                .unwrap_or(CpuId(0));
            let eff_node = self.machine.topology.node_of(eff).unwrap_or(NodeId(0));
            let quiet = isolated.contains(eff);
            self.vector(
                &a,
                u64::from(q),
                format!("nvme{k}q{q}"),
                group,
                CpuSet::single(eff),
                None,
                true,
                eff_node,
                // The isolated CPUs' application does no block I/O.
                if quiet { (0, 0) } else { (50, 1500) },
                Some("BLOCK"),
            );
        }
    }
}

/// `group_cpus_evenly` for 64 groups on the synthetic topology: 32 per node, each two cores
/// with their SMT siblings, in CPU order.
fn nvme_group(t: &Topology, g: u32) -> CpuSet {
    let (node, h) = (g / 32, g % 32);
    let base = node * 64 + 2 * h;
    [base, base + 1]
        .into_iter()
        .flat_map(|c| t.smt_siblings(CpuId(c)).iter().collect::<Vec<_>>())
        .collect()
}

/// The generated large server: its inventory and one snapshot of its counters.
pub fn large_server(seed: u64) -> (Machine, Snapshot) {
    let topology = Topology::synthetic(2, 2, 64, 2);
    let nr_cpus = topology.nr_cpu_ids();
    let parsed = cmdline::parse_cmdline(CMDLINE);
    let (mut isolation, _) = cmdline::isolation_from_cmdline(&parsed, Some(nr_cpus));
    isolation.isolated = Some(set(ISOLATED));
    isolation.nohz_full = Some(set(ISOLATED));
    let machine = Machine {
        topology,
        isolation,
        default_affinity: Some(CpuSet::range(0, nr_cpus - 1)),
        kernel_release: Some(KERNEL_RELEASE.to_string()),
        cmdline: Some(CMDLINE.to_string()),
        ..Machine::default()
    };
    let mut b = Builder {
        machine,
        specs: Vec::new(),
        next_irq: 30,
        rng: Lcg(seed ^ 0x9e37_79b9_7f4a_7c15),
    };
    b.platform_irq(0, "IR-IO-APIC", 2, "edge", "timer");
    b.platform_irq(8, "IR-IO-APIC", 8, "edge", "rtc0");
    b.platform_irq(9, "IR-IO-APIC", 9, "fasteoi", "acpi");
    for unit in 0..4u32 {
        b.platform_irq(
            24 + unit,
            "DMAR-MSI",
            u64::from(unit),
            "edge",
            &format!("dmar{unit}"),
        );
    }
    b.device("0000:00:00.0", 0x060000, None, 0);
    for (n, port, node) in [(28u32, "0000:16:02.0", 0u32), (29, "0000:85:02.0", 1)] {
        let a = b.device(port, 0x060400, Some("pcieport"), node);
        b.next_irq = n;
        let cpus = b.node_cpus(node);
        let first = CpuSet::single(cpus.first().unwrap_or(CpuId(0)));
        b.vector(
            &a,
            0,
            "PCIe PME".into(),
            cpus,
            first,
            None,
            false,
            NodeId(node),
            (0, 0),
            None,
        );
        if let Some(spec) = b.specs.last_mut() {
            // Root ports share one MSI vector between PME and AER.
            spec.irq.actions.push("aerdrv".to_string());
            spec.irq.chip = Some(format!("IR-PCI-MSI-{port}"));
        }
    }
    b.next_irq = 40;
    b.ice("0000:17:00.0", "ens2f0", 0, false);
    b.mlx5("0000:3b:00.0", "ens1f0np0", 0);
    for (k, addr) in [
        "0000:5e:00.0",
        "0000:5f:00.0",
        "0000:60:00.0",
        "0000:61:00.0",
    ]
    .into_iter()
    .enumerate()
    {
        b.nvme(addr, k as u32, 0);
    }
    b.ice("0000:86:00.0", "ens5f0", 1, true);
    for (k, addr) in [
        "0000:af:00.0",
        "0000:b0:00.0",
        "0000:b1:00.0",
        "0000:b2:00.0",
    ]
    .into_iter()
    .enumerate()
    {
        b.nvme(addr, 4 + k as u32, 1);
    }
    b.mlx5("0000:d8:00.0", "ens6f0np0", 1);
    counters::counters(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use irqpilot_core::QueueKind;

    #[test]
    fn same_seed_same_machine_other_seed_other_counts() {
        let (m1, s1) = large_server(7);
        let (m2, s2) = large_server(7);
        assert_eq!(m1, m2);
        assert_eq!(s1, s2);
        let (m3, s3) = large_server(8);
        assert_eq!(m1, m3, "the layout does not depend on the seed");
        assert_ne!(s1.interrupts, s3.interrupts);
    }

    #[test]
    fn shape() {
        let (m, s) = large_server(1);
        assert_eq!(m.topology.online.len(), 256);
        assert_eq!(m.topology.nodes.len(), 2);
        assert_eq!(m.housekeeping().len(), 240);
        let queues = |kind: QueueKind| {
            m.irqs
                .values()
                .filter(|i| i.queue.as_ref().is_some_and(|q| q.kind == kind))
                .count()
        };
        assert_eq!(queues(QueueKind::TxRx), 4 * 64);
        assert_eq!(queues(QueueKind::Io), 8 * 64);
        assert_eq!(queues(QueueKind::Admin), 8);
        let nics = m
            .devices
            .values()
            .filter(|d| d.base_class() == Some(0x02))
            .count();
        assert_eq!(nics, 4);
        assert_eq!(m.devices.values().filter(|d| !d.nvme.is_empty()).count(), 8);
        // Every IRQ has a /proc/interrupts row with one count per CPU, below 2^32.
        let t = &s.interrupts;
        assert_eq!(t.cpus.len(), 256);
        for irq in m.irqs.keys() {
            let row = t
                .irq_row(*irq)
                .unwrap_or_else(|| panic!("no row for {irq}"));
            assert!(t.is_per_cpu(row));
            assert!(t.counts(row).iter().all(|c| *c <= u64::from(u32::MAX)));
        }
        // Managed NVMe queues whose group is all isolated stay on isolated CPUs.
        let iso = set(ISOLATED);
        let on_isolated = m
            .irqs
            .values()
            .filter(|i| i.managed == Some(true))
            .filter(|i| i.effective.as_ref().is_some_and(|e| e.is_subset(&iso)))
            .count();
        assert_eq!(on_isolated, 8 * 4);
        let stat = s.stat.as_ref().unwrap();
        assert_eq!(stat.per_cpu.len(), 256);
        assert_eq!(stat.intr.as_ref().unwrap().1.len(), NR_IRQS as usize);
    }
}
