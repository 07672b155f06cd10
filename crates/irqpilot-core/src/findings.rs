//! Findings: what is wrong (or worth knowing) about a machine's interrupt layout, derived purely
//! from a [`Machine`] and, when available, measured [`Rates`].
//!
//! Each finding names the IRQs and CPUs involved and why it matters, so `irqpilot status` can
//! explain a machine instead of dumping counters.

use crate::cpuset::CpuSet;
use crate::ids::{CpuId, IrqNum, NodeId};
use crate::machine::Machine;
use crate::rates::Rates;
use crate::snapshot::RowLabel;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Thresholds for findings. Every constant is a documented, overridable parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FindingsConfig {
    /// An IRQ is heavy at or above this rate (interrupts/s)...
    pub heavy_min_per_sec: f64,
    /// ...and at or above this share of all device-IRQ traffic (0-1).
    pub heavy_min_share: f64,
    /// Device vectors available per CPU on x86: "at max. 204" (tglx); ~200 in practice
    /// (balancing.md 5.6).
    pub vector_capacity: u32,
    /// Warn when a CPU uses at least this fraction of `vector_capacity`.
    pub vector_warn_fraction: f64,
}

impl Default for FindingsConfig {
    fn default() -> Self {
        FindingsConfig {
            heavy_min_per_sec: 1000.0,
            heavy_min_share: 0.05,
            vector_capacity: 200,
            vector_warn_fraction: 0.8,
        }
    }
}

/// A `[findings]` value out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("findings.{field} = {value}: {why}")]
pub struct FindingsConfigError {
    /// The key.
    pub field: &'static str,
    /// The value given.
    pub value: String,
    /// The range.
    pub why: String,
}

impl FindingsConfig {
    /// Checks every value is in its range (a zero vector capacity would report "about 0
    /// available"; a negative or NaN share would make every or no IRQ heavy).
    pub fn validate(&self) -> Result<(), FindingsConfigError> {
        use crate::placement::config::check_range;
        let ranges = [
            ("heavy_min_per_sec", self.heavy_min_per_sec, 0.0, 1e9, false),
            ("heavy_min_share", self.heavy_min_share, 0.0, 1.0, false),
            (
                "vector_warn_fraction",
                self.vector_warn_fraction,
                0.0,
                1.0,
                true,
            ),
        ];
        for (field, v, lo, hi, open) in ranges {
            if let Err(why) = check_range(v, lo, hi, open) {
                return Err(FindingsConfigError {
                    field,
                    value: v.to_string(),
                    why,
                });
            }
        }
        if !(1..=65_535).contains(&self.vector_capacity) {
            return Err(FindingsConfigError {
                field: "vector_capacity",
                value: self.vector_capacity.to_string(),
                why: "must be in 1-65535 (device vectors per CPU; x86 has about 200)".into(),
            });
        }
        Ok(())
    }
}

/// How much a finding matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Probably costs performance or latency.
    Warning,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Finding {
    /// Two or more heavy IRQs are delivered to one CPU while a housekeeping CPU takes none.
    HeavyIrqsShareCpu {
        /// The crowded CPU.
        cpu: CpuId,
        /// The heavy IRQs on it, with their rates.
        irqs: Vec<(IrqNum, f64)>,
        /// Housekeeping CPUs with no heavy IRQ.
        idle_cpus: CpuSet,
    },
    /// A device IRQ is delivered to (or was measured on) an isolated CPU.
    DeviceIrqOnIsolatedCpu {
        /// The IRQ.
        irq: IrqNum,
        /// Its name.
        name: String,
        /// Isolated CPUs it reaches.
        cpus: CpuSet,
        /// Measured rate on those CPUs, when rates are known.
        rate_per_sec: Option<f64>,
        /// Whether the kernel manages its affinity (then only boot options can move it).
        managed: Option<bool>,
    },
    /// A device IRQ is served by a CPU on another NUMA node than the device.
    RemoteNumaIrq {
        /// The IRQ.
        irq: IrqNum,
        /// Its name.
        name: String,
        /// The device's node.
        device_node: NodeId,
        /// The serving CPU.
        cpu: CpuId,
        /// That CPU's node.
        cpu_node: NodeId,
    },
    /// The effective affinity is outside the requested one (the kernel broke the affinity,
    /// e.g. after CPU hotplug or vector exhaustion).
    AffinityNotHonoured {
        /// The IRQ.
        irq: IrqNum,
        /// Requested CPUs.
        requested: CpuSet,
        /// Effective CPUs.
        effective: CpuSet,
    },
    /// A CPU is near the x86 per-CPU device-vector limit.
    VectorPressure {
        /// The CPU.
        cpu: CpuId,
        /// IRQs whose effective affinity is this CPU.
        vectors: u32,
        /// The configured capacity.
        capacity: u32,
    },
    /// Isolation leaves no housekeeping CPU; device IRQs can only go to isolated CPUs.
    NoHousekeepingCpu,
}

impl Finding {
    /// How much it matters.
    pub fn severity(&self) -> Severity {
        match self {
            Finding::RemoteNumaIrq { .. } => Severity::Info,
            Finding::VectorPressure {
                vectors, capacity, ..
            } if vectors < capacity => Severity::Info,
            _ => Severity::Warning,
        }
    }

    /// One line for humans.
    pub fn describe(&self) -> String {
        match self {
            Finding::HeavyIrqsShareCpu {
                cpu,
                irqs,
                idle_cpus,
            } => {
                let list: Vec<String> = irqs
                    .iter()
                    .map(|(i, r)| format!("{i} ({r:.0}/s)"))
                    .collect();
                format!(
                    "CPU {cpu} serves {} heavy IRQs [{}] while housekeeping CPUs {} serve none",
                    irqs.len(),
                    list.join(", "),
                    idle_cpus
                )
            }
            Finding::DeviceIrqOnIsolatedCpu {
                irq,
                name,
                cpus,
                rate_per_sec,
                managed,
            } => {
                let rate = rate_per_sec
                    .map(|r| format!(", {r:.0}/s measured"))
                    .unwrap_or_default();
                let how = if *managed == Some(true) {
                    " (kernel-managed: steer with isolcpus=managed_irq at boot)"
                } else {
                    ""
                };
                format!("IRQ {irq} {name} reaches isolated CPU(s) {cpus}{rate}{how}")
            }
            Finding::RemoteNumaIrq {
                irq,
                name,
                device_node,
                cpu,
                cpu_node,
            } => format!(
                "IRQ {irq} {name}: device on node {device_node}, served by CPU {cpu} on node {cpu_node}"
            ),
            Finding::AffinityNotHonoured {
                irq,
                requested,
                effective,
            } => format!(
                "IRQ {irq}: effective affinity {effective} is outside requested {requested}"
            ),
            Finding::VectorPressure {
                cpu,
                vectors,
                capacity,
            } => format!(
                "CPU {cpu} holds {vectors} device vectors of about {capacity} available on x86"
            ),
            Finding::NoHousekeepingCpu => {
                "isolation leaves no housekeeping CPU: device IRQs can only land on isolated CPUs"
                    .to_string()
            }
        }
    }
}

/// Whether the machine's interrupt chips are x86 ones (where the per-CPU vector limit exists).
fn looks_x86(m: &Machine) -> bool {
    m.irqs.values().filter_map(|i| i.chip.as_deref()).any(|c| {
        c.contains("APIC") || c.contains("PCI-MSI") || c.starts_with("DMAR") || c == "XT-PIC"
    })
}

/// All findings for a machine, with measured rates when available. Deterministic order.
pub fn findings(m: &Machine, rates: Option<&Rates>, cfg: &FindingsConfig) -> Vec<Finding> {
    let mut out = Vec::new();
    let hk = m.isolation.housekeeping(&m.topology.online);
    if hk.basis == crate::isolation::HousekeepingBasis::FallbackAllOnline {
        out.push(Finding::NoHousekeepingCpu);
    }
    let isolated = m.isolation.isolated_cpus();

    // Measured rate of each IRQ: total, and per CPU aligned with `cpus` (borrowed: a report
    // checks findings hundreds of times on machines with thousands of IRQ x CPU cells).
    let cpus: &[CpuId] = rates.map_or(&[], |r| &r.cpus);
    let mut measured: HashMap<IrqNum, (f64, &[f64])> = HashMap::new();
    if let Some(r) = rates {
        for row in &r.rows {
            if let RowLabel::Irq(n) = row.label {
                measured.insert(n, (row.total_per_sec, &row.per_cpu_per_sec));
            }
        }
    }
    fn per_cpu<'a>(cpus: &'a [CpuId], per: &'a [f64]) -> impl Iterator<Item = (CpuId, f64)> + 'a {
        cpus.iter().copied().zip(per.iter().copied())
    }

    // Heavy IRQs sharing a CPU (needs measurements).
    if rates.is_some() {
        let device_total: f64 = m
            .irqs
            .values()
            .filter(|i| i.is_device())
            .filter_map(|i| measured.get(&i.irq).map(|(t, _)| *t))
            .sum();
        let mut heavy_on: BTreeMap<CpuId, Vec<(IrqNum, f64)>> = BTreeMap::new();
        for irq in m.irqs.values().filter(|i| i.is_device()) {
            let Some((total, per)) = measured.get(&irq.irq) else {
                continue;
            };
            if *total < cfg.heavy_min_per_sec || *total < cfg.heavy_min_share * device_total {
                continue;
            }
            // Attribute to the CPU that took most of it in the interval.
            if let Some((cpu, _)) = per_cpu(cpus, per).max_by(|a, b| a.1.total_cmp(&b.1)) {
                heavy_on.entry(cpu).or_default().push((irq.irq, *total));
            }
        }
        let idle: CpuSet = hk
            .cpus
            .iter()
            .filter(|c| !heavy_on.contains_key(c))
            .collect();
        if !idle.is_empty() {
            for (cpu, irqs) in &heavy_on {
                if irqs.len() >= 2 {
                    out.push(Finding::HeavyIrqsShareCpu {
                        cpu: *cpu,
                        irqs: irqs.clone(),
                        idle_cpus: idle.clone(),
                    });
                }
            }
        }
    }

    for irq in m.irqs.values() {
        let name = || irq.name();
        if irq.is_device() && !isolated.is_empty() {
            let configured = irq
                .delivered_to()
                .map(|s| s.intersection(&isolated))
                .unwrap_or_default();
            let mut hit = configured.clone();
            let mut rate = None;
            if let Some((_, per)) = measured.get(&irq.irq) {
                let on_iso: Vec<(CpuId, f64)> = per_cpu(cpus, per)
                    .filter(|(c, r)| *r > 0.0 && isolated.contains(*c))
                    .collect();
                if !on_iso.is_empty() {
                    rate = Some(on_iso.iter().map(|(_, r)| r).sum());
                    hit.extend(on_iso.iter().map(|(c, _)| *c));
                }
            }
            if !hit.is_empty() {
                out.push(Finding::DeviceIrqOnIsolatedCpu {
                    irq: irq.irq,
                    name: name(),
                    cpus: hit,
                    rate_per_sec: rate,
                    managed: irq.managed,
                });
            }
        }
        if let (Some(dev_node), Some(eff)) =
            (irq.node.filter(|_| irq.device.is_some()), &irq.effective)
        {
            if let Some(cpu) = eff.first() {
                if let Some(cpu_node) = m.topology.node_of(cpu) {
                    if cpu_node != dev_node && m.topology.nodes.len() > 1 {
                        out.push(Finding::RemoteNumaIrq {
                            irq: irq.irq,
                            name: name(),
                            device_node: dev_node,
                            cpu,
                            cpu_node,
                        });
                    }
                }
            }
        }
        if let (Some(req), Some(eff)) = (&irq.requested, &irq.effective) {
            if !eff.is_empty() && !eff.is_subset(req) {
                out.push(Finding::AffinityNotHonoured {
                    irq: irq.irq,
                    requested: req.clone(),
                    effective: eff.clone(),
                });
            }
        }
    }

    if looks_x86(m) {
        let mut per_cpu: BTreeMap<CpuId, u32> = BTreeMap::new();
        for irq in m.irqs.values() {
            if let Some(eff) = &irq.effective {
                if eff.len() == 1 {
                    if let Some(c) = eff.first() {
                        *per_cpu.entry(c).or_default() += 1;
                    }
                }
            }
        }
        let warn_at = (cfg.vector_capacity as f64 * cfg.vector_warn_fraction).ceil() as u32;
        for (cpu, n) in per_cpu {
            if n >= warn_at {
                out.push(Finding::VectorPressure {
                    cpu,
                    vectors: n,
                    capacity: cfg.vector_capacity,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{MonoNs, PciAddr};
    use crate::irq::Irq;
    use crate::isolation::Isolation;
    use crate::snapshot::{InterruptTable, Snapshot};
    use crate::topology::Topology;

    fn l(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    fn dev_irq(n: u32, eff: &str, node: u32) -> Irq {
        let mut i = Irq::new(IrqNum(n));
        i.actions = vec![format!("eth0-TxRx-{n}")];
        i.queue = crate::queue::recognise(&i.actions[0]);
        i.device = Some(PciAddr("0000:01:00.0".into()));
        i.node = Some(NodeId(node));
        i.requested = Some(l(eff));
        i.effective = Some(l(eff));
        i.chip = Some("IR-PCI-MSIX-0000:01:00.0".into());
        i
    }

    fn machine(irqs: Vec<Irq>) -> Machine {
        let mut m = Machine {
            topology: Topology::synthetic(2, 2, 2, 1),
            ..Machine::default()
        };
        for i in irqs {
            m.irqs.insert(i.irq, i);
        }
        m
    }

    fn rates_for(m: &Machine, per_cpu: &[(u32, Vec<u64>)]) -> Rates {
        let cpus: Vec<CpuId> = m.topology.online.iter().collect();
        let mut a = InterruptTable::with_kernel_header(cpus.clone(), 3);
        let mut b = InterruptTable::with_kernel_header(cpus, 3);
        for (irq, counts) in per_cpu {
            a.push_kernel_row(RowLabel::Irq(IrqNum(*irq)), 3, &vec![0; counts.len()], " x");
            b.push_kernel_row(RowLabel::Irq(IrqNum(*irq)), 3, counts, " x");
        }
        let s0 = Snapshot {
            taken_at: MonoNs(0),
            interrupts: a,
            ..Snapshot::default()
        };
        let s1 = Snapshot {
            taken_at: MonoNs(1_000_000_000),
            interrupts: b,
            ..Snapshot::default()
        };
        Rates::between(&s0, &s1).unwrap()
    }

    #[test]
    fn heavy_sharing_needs_an_idle_cpu() {
        let m = machine(vec![
            dev_irq(40, "0", 0),
            dev_irq(41, "0", 0),
            dev_irq(42, "1", 0),
        ]);
        let r = rates_for(
            &m,
            &[
                (40, vec![50_000, 0, 0, 0]),
                (41, vec![40_000, 0, 0, 0]),
                (42, vec![0, 30_000, 0, 0]),
            ],
        );
        let f = findings(&m, Some(&r), &FindingsConfig::default());
        let heavy: Vec<&Finding> = f
            .iter()
            .filter(|f| matches!(f, Finding::HeavyIrqsShareCpu { .. }))
            .collect();
        assert_eq!(heavy.len(), 1);
        if let Finding::HeavyIrqsShareCpu {
            cpu,
            irqs,
            idle_cpus,
        } = heavy[0]
        {
            assert_eq!(*cpu, CpuId(0));
            assert_eq!(irqs.len(), 2);
            assert_eq!(idle_cpus, &l("2-3"));
        }
        // Without rates there is no claim about heaviness.
        assert!(
            !findings(&m, None, &FindingsConfig::default())
                .iter()
                .any(|f| matches!(f, Finding::HeavyIrqsShareCpu { .. }))
        );
    }

    #[test]
    fn isolated_remote_and_broken_affinity() {
        let mut broken = dev_irq(43, "0", 0);
        broken.effective = Some(l("1"));
        let mut m = machine(vec![dev_irq(40, "3", 0), broken]);
        m.isolation = Isolation {
            isolated: Some(l("3")),
            ..Isolation::default()
        };
        let f = findings(&m, None, &FindingsConfig::default());
        assert!(f.iter().any(|f| matches!(
            f,
            Finding::DeviceIrqOnIsolatedCpu {
                irq: IrqNum(40),
                ..
            }
        )));
        // CPU 3 is on node 1 in the synthetic topology, the device on node 0.
        assert!(f.iter().any(|f| matches!(
            f,
            Finding::RemoteNumaIrq {
                irq: IrqNum(40),
                cpu: CpuId(3),
                ..
            }
        )));
        assert!(f.iter().any(|f| matches!(
            f,
            Finding::AffinityNotHonoured {
                irq: IrqNum(43),
                ..
            }
        )));
        assert!(f.iter().all(|f| !f.describe().is_empty()));
    }

    #[test]
    fn measured_traffic_on_isolated_cpu() {
        let mut m = machine(vec![dev_irq(40, "0-3", 0)]);
        m.irqs.get_mut(&IrqNum(40)).unwrap().effective = None;
        m.irqs.get_mut(&IrqNum(40)).unwrap().requested = Some(l("0-1"));
        m.isolation = Isolation {
            isolated: Some(l("2-3")),
            ..Isolation::default()
        };
        let r = rates_for(&m, &[(40, vec![10, 0, 0, 500])]);
        let f = findings(&m, Some(&r), &FindingsConfig::default());
        let hit = f.iter().find_map(|f| match f {
            Finding::DeviceIrqOnIsolatedCpu {
                cpus, rate_per_sec, ..
            } => Some((cpus.clone(), *rate_per_sec)),
            _ => None,
        });
        assert_eq!(hit, Some((l("3"), Some(500.0))));
    }

    #[test]
    fn vector_pressure_on_x86_only() {
        let irqs: Vec<Irq> = (0..170).map(|n| dev_irq(100 + n, "2", 0)).collect();
        let m = machine(irqs.clone());
        let f = findings(&m, None, &FindingsConfig::default());
        assert!(f.iter().any(|f| matches!(
            f,
            Finding::VectorPressure {
                cpu: CpuId(2),
                vectors: 170,
                ..
            }
        )));
        let arm: Vec<Irq> = irqs
            .into_iter()
            .map(|mut i| {
                i.chip = Some("ITS-MSI".into());
                i
            })
            .collect();
        assert!(
            !findings(&machine(arm), None, &FindingsConfig::default())
                .iter()
                .any(|f| matches!(f, Finding::VectorPressure { .. }))
        );
    }

    #[test]
    fn no_housekeeping() {
        let mut m = machine(vec![]);
        m.isolation = Isolation {
            isolated: Some(l("0-3")),
            ..Isolation::default()
        };
        assert_eq!(
            findings(&m, None, &FindingsConfig::default()),
            vec![Finding::NoHousekeepingCpu]
        );
    }
}
