//! Generated machines for the placement and isolation property tests: a synthetic topology,
//! devices with queues, platform and managed IRQs, a random current layout and rates, all from
//! one seed (so proptest can shrink the seed and the knobs).

#![allow(dead_code)]

use irqpilot_core::queue::recognise;
use irqpilot_core::rates::{CpuRate, RowRate, RowStatus};
use irqpilot_core::{
    Action, CpuId, CpuSet, Irq, IrqNum, Isolation, Machine, NodeId, PciAddr, PciDevice, Plan,
    Rates, RowLabel, Topology,
};

/// splitmix64: tiny and good enough for test data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn pick(&mut self, set: &CpuSet) -> CpuId {
        let v: Vec<CpuId> = set.iter().collect();
        v[self.below(v.len() as u64) as usize]
    }
}

/// Knobs of a generated machine.
#[derive(Clone, Debug)]
pub struct Shape {
    pub nodes: u32,
    pub packages: u32,
    pub cores: u32,
    pub threads: u32,
    pub devices: u32,
    pub queues: u32,
    pub platform_irqs: u32,
    pub managed_queues: u32,
    pub isolate: bool,
    /// Whether `/proc/stat` time is there (else counts).
    pub time: bool,
}

/// A generated machine with its rates (interrupts/s per IRQ on its current CPU).
pub struct Scenario {
    pub machine: Machine,
    pub rates: Rates,
}

/// Builds rates in which each IRQ fires `rate[irq]`/s on the CPU it is delivered to, and
/// each CPU spends `cost_us` per interrupt (as time when `time`, else counts only).
pub fn rates_for(machine: &Machine, rate: &[(IrqNum, f64)], time: bool, cost_us: f64) -> Rates {
    let cpus: Vec<CpuId> = machine.topology.online.iter().collect();
    let col = |c: CpuId| cpus.iter().position(|x| *x == c);
    let mut per_cpu: Vec<CpuRate> = cpus
        .iter()
        .map(|&cpu| CpuRate {
            cpu,
            irq_per_sec: 0.0,
            arch_per_sec: 0.0,
            hardirq_pct: None,
            softirq_pct: None,
        })
        .collect();
    let mut rows = Vec::new();
    for &(irq, r) in rate {
        let mut v = vec![0.0; cpus.len()];
        let at = machine
            .irqs
            .get(&irq)
            .and_then(|i| i.effective.as_ref().and_then(|e| e.first()))
            .and_then(col);
        if let Some(j) = at {
            v[j] = r;
            per_cpu[j].irq_per_sec += r;
        }
        rows.push(RowRate {
            label: RowLabel::Irq(irq),
            total_per_sec: v.iter().sum(),
            per_cpu_per_sec: v,
            status: RowStatus::Continuing,
            wraps: 0,
        });
    }
    if time {
        for c in &mut per_cpu {
            let busy = (c.irq_per_sec * cost_us * 1e-6 * 100.0).min(100.0);
            c.hardirq_pct = Some(busy * 0.25);
            c.softirq_pct = Some(busy * 0.75);
        }
    }
    Rates {
        interval_ns: 1_000_000_000,
        cpus,
        per_cpu,
        rows,
        ..Rates::default()
    }
}

/// A whole machine from a seed.
pub fn generate(shape: &Shape, seed: u64) -> Scenario {
    let mut rng = Rng(seed);
    let topo = Topology::synthetic(shape.nodes, shape.packages, shape.cores, shape.threads);
    let online = topo.online.clone();
    let mut m = Machine {
        topology: topo,
        default_affinity: Some(online.clone()),
        ..Machine::default()
    };
    if shape.isolate && online.len() > 1 {
        let iso: CpuSet = online.iter().filter(|_| rng.chance(0.4)).collect();
        if !iso.is_empty() && iso != online {
            m.isolation = Isolation {
                isolated: Some(iso),
                ..Isolation::default()
            };
        }
    }
    let mut next = 24u32;
    let mut rate = Vec::new();
    let place = |rng: &mut Rng, irq: &mut Irq| {
        let cpu = rng.pick(&online);
        if rng.chance(0.5) {
            irq.requested = Some(online.clone());
        } else {
            irq.requested = Some(CpuSet::single(cpu));
        }
        irq.effective = Some(CpuSet::single(cpu));
    };
    for p in 0..shape.platform_irqs {
        let mut irq = Irq::new(IrqNum(next));
        next += 1;
        irq.actions = vec![format!("acpi{p}")];
        place(&mut rng, &mut irq);
        rate.push((irq.irq, rng.below(50) as f64));
        m.irqs.insert(irq.irq, irq);
    }
    let nodes: Vec<NodeId> = m.topology.nodes.keys().copied().collect();
    for d in 0..shape.devices {
        let addr = PciAddr(format!("0000:{:02x}:00.0", 0x10 + d));
        let node = nodes[rng.below(nodes.len() as u64) as usize];
        let mut dev = PciDevice::new(addr.clone());
        dev.class = Some(0x020000);
        dev.numa_node = Some(node);
        dev.local_cpus = m.topology.nodes.get(&node).cloned();
        dev.net = vec![format!("eth{d}")];
        let heavy_dev = rng.chance(0.7);
        for q in 0..shape.queues {
            let mut irq = Irq::new(IrqNum(next));
            next += 1;
            let name = format!("eth{d}-TxRx-{q}");
            irq.queue = recognise(&name);
            irq.actions = vec![name];
            irq.device = Some(addr.clone());
            irq.node = Some(node);
            irq.managed = Some(false);
            place(&mut rng, &mut irq);
            let r = if heavy_dev {
                2_000.0 + rng.below(60_000) as f64
            } else {
                rng.below(500) as f64
            };
            rate.push((irq.irq, r));
            dev.msi_irqs.push(irq.irq);
            m.irqs.insert(irq.irq, irq);
        }
        m.devices.insert(addr, dev);
    }
    // Managed queues of an NVMe-like device: masks spread over groups of CPUs.
    if shape.managed_queues > 0 {
        let addr = PciAddr("0000:5e:00.0".to_string());
        let mut dev = PciDevice::new(addr.clone());
        dev.class = Some(0x010802);
        dev.nvme = vec!["nvme0".into()];
        let cpus: Vec<CpuId> = online.iter().collect();
        let per = (cpus.len() as u32).div_ceil(shape.managed_queues).max(1) as usize;
        for (q, chunk) in cpus.chunks(per).enumerate() {
            let mut irq = Irq::new(IrqNum(next));
            next += 1;
            let name = format!("nvme0q{}", q + 1);
            irq.queue = recognise(&name);
            irq.actions = vec![name];
            irq.device = Some(addr.clone());
            irq.managed = Some(true);
            let mask: CpuSet = chunk.iter().copied().collect();
            irq.effective = Some(CpuSet::single(chunk[0]));
            irq.requested = Some(mask);
            rate.push((irq.irq, rng.below(20_000) as f64));
            dev.msi_irqs.push(irq.irq);
            m.irqs.insert(irq.irq, irq);
        }
        m.devices.insert(addr, dev);
    }
    let rates = rates_for(&m, &rate, shape.time, 10.0);
    Scenario { machine: m, rates }
}

/// Applies a plan the way the kernel does (`effective` follows a single-CPU mask) or the way a
/// fixture tree does (`effective` stays: no kernel to move it).
pub fn apply(machine: &Machine, plan: &Plan, kernel: bool) -> Machine {
    let mut m = machine.clone();
    for a in &plan.actions {
        match a {
            Action::SetAffinity { irq, cpus } => {
                if let Some(i) = m.irqs.get_mut(irq) {
                    i.requested = Some(cpus.clone());
                    if kernel {
                        i.effective = Some(cpus.clone());
                    }
                }
            }
            Action::SetDefaultAffinity { cpus } => m.default_affinity = Some(cpus.clone()),
            _ => {}
        }
    }
    m
}

/// Re-attributes measured rates to the CPUs IRQs are now on (what the next period measures
/// when each IRQ's rate stays the same).
pub fn follow(machine: &Machine, rates: &Rates, time: bool, cost_us: f64) -> Rates {
    let per_irq: Vec<(IrqNum, f64)> = rates
        .rows
        .iter()
        .filter_map(|r| Some((r.label.irq()?, r.total_per_sec)))
        .collect();
    rates_for(machine, &per_irq, time, cost_us)
}
