//! The data of `irqpilot status`: the [`StatusReport`] and its parts. Serialized as is for
//! `--format json`, so field names and meanings are a stable interface.

use irqpilot_core::findings::{Finding, Severity};
use irqpilot_core::{CacheKind, CpuSet, HousekeepingBasis, Queue};
use serde::Serialize;

/// Everything `status` says, in the order it says it.
#[derive(Debug, Serialize)]
pub struct StatusReport {
    /// The root directory read.
    pub root: String,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: Option<String>,
    /// Online and possible CPUs.
    pub cpus: Cpus,
    /// NUMA nodes and their CPUs.
    pub numa_nodes: Vec<NumaNode>,
    /// Packages, cores, SMT.
    pub topology: TopologySummary,
    /// Caches by level and kind.
    pub caches: Vec<CacheSummary>,
    /// Isolation and the housekeeping CPUs derived from it.
    pub isolation: IsolationSummary,
    /// `/proc/irq/default_smp_affinity`.
    pub default_affinity: Option<CpuSet>,
    /// PCI functions with interrupts, by address.
    pub devices: Vec<DeviceSummary>,
    /// PCI functions without interrupts.
    pub devices_without_irqs: Vec<DeviceBrief>,
    /// Numbered IRQs that belong to no PCI function (timers, ACPI, IO-APIC lines, DMAR).
    pub other_irqs: Vec<IrqSummary>,
    /// Rates measured over `--sample`; `null` with `--sample 0`.
    pub load: Option<Load>,
    /// What is wrong or worth knowing, warnings first.
    pub findings: Vec<FindingEntry>,
    /// What could not be read, and why.
    pub gaps: Vec<GapEntry>,
}

/// Online and possible CPUs.
#[derive(Debug, Serialize)]
pub struct Cpus {
    /// `cpu/online`.
    pub online: CpuSet,
    /// How many are online.
    pub online_count: usize,
    /// `cpu/possible`.
    pub possible: Option<CpuSet>,
    /// How many are possible.
    pub possible_count: Option<usize>,
}

/// One NUMA node.
#[derive(Debug, Serialize)]
pub struct NumaNode {
    /// Node number.
    pub node: u32,
    /// Its CPUs.
    pub cpus: CpuSet,
}

/// Packages, cores and threads of the online CPUs; `null` where the topology is unknown.
#[derive(Debug, Serialize)]
pub struct TopologySummary {
    /// Physical packages (sockets).
    pub packages: Option<usize>,
    /// Physical cores.
    pub cores: Option<usize>,
    /// Hardware threads per core (2 with SMT).
    pub threads_per_core: Option<usize>,
}

/// One cache level and kind.
#[derive(Debug, Serialize)]
pub struct CacheSummary {
    /// Level (1 = L1).
    pub level: u8,
    /// Data, instruction or unified.
    pub kind: CacheKind,
    /// Size of one instance.
    pub size_bytes: Option<u64>,
    /// How many instances (distinct sharing sets).
    pub instances: usize,
    /// Whether this is the last-level cache.
    pub llc: bool,
    /// The CPUs sharing each instance (only for the last level, where it matters).
    pub groups: Vec<CpuSet>,
}

/// Isolation settings and housekeeping.
#[derive(Debug, Serialize)]
pub struct IsolationSummary {
    /// `cpu/isolated`.
    pub isolated: Option<CpuSet>,
    /// `cpu/nohz_full` (or the command line's).
    pub nohz_full: Option<CpuSet>,
    /// `isolcpus=` CPUs.
    pub isolcpus: Option<CpuSet>,
    /// `isolcpus=` flags (`domain`, `managed_irq`, `nohz`).
    pub isolcpus_flags: Vec<String>,
    /// `irqaffinity=`.
    pub irqaffinity: Option<CpuSet>,
    /// Every CPU isolated by any source.
    pub isolated_cpus: CpuSet,
    /// Where device interrupts belong.
    pub housekeeping: CpuSet,
    /// How `housekeeping` was derived.
    pub housekeeping_basis: HousekeepingBasis,
}

/// A PCI function with interrupts.
#[derive(Debug, Serialize)]
pub struct DeviceSummary {
    /// PCI address; `null` for IRQs grouped by the device their names carry when no PCI
    /// function is known (a root without sysfs).
    pub addr: Option<String>,
    /// Interface, controller, queue owner, driver or address.
    pub name: String,
    /// What kind of device the class code says (`network`, `nvme`, ...).
    pub kind: &'static str,
    /// `class`, as the kernel prints it.
    pub class: Option<String>,
    /// Bound driver.
    pub driver: Option<String>,
    /// `numa_node`.
    pub numa_node: Option<u32>,
    /// `local_cpulist`.
    pub local_cpus: Option<CpuSet>,
    /// Queues grouped by kind, with the CPUs they are delivered to.
    pub queues: Vec<QueueGroup>,
    /// IRQs delivered to an isolated CPU.
    pub on_isolated: usize,
    /// IRQs delivered to a CPU on another node than the device.
    pub remote: usize,
    /// Every IRQ of the device.
    pub irqs: Vec<IrqSummary>,
}

/// A PCI function without interrupts.
#[derive(Debug, Serialize)]
pub struct DeviceBrief {
    /// PCI address.
    pub addr: String,
    /// Kind from the class code.
    pub kind: &'static str,
    /// Bound driver.
    pub driver: Option<String>,
}

/// A device's queues of one kind.
#[derive(Debug, Serialize)]
pub struct QueueGroup {
    /// `txrx`, `rx`, `tx`, `io`, `admin`, `misc`, or `irq` for vectors with no recognised role.
    pub kind: &'static str,
    /// Queue indexes as ranges (`0-63`), when the names carry them.
    pub indexes: Option<String>,
    /// How many IRQs.
    pub count: usize,
    /// Union of the CPUs they are delivered to (effective, else requested affinity).
    pub cpus: CpuSet,
    /// IRQs whose affinity could not be read.
    pub unknown: usize,
}

/// One numbered IRQ.
#[derive(Debug, Serialize)]
pub struct IrqSummary {
    /// IRQ number.
    pub irq: u32,
    /// Action names.
    pub name: String,
    /// Interrupt chip.
    pub chip: Option<String>,
    /// Recognised queue.
    pub queue: Option<Queue>,
    /// `smp_affinity_list`.
    pub requested: Option<CpuSet>,
    /// `effective_affinity_list`.
    pub effective: Option<CpuSet>,
    /// `/proc/irq/N/node`.
    pub node: Option<u32>,
    /// Kernel-managed affinity, when known.
    pub managed: Option<bool>,
    /// Measured interrupts/s.
    pub rate_per_sec: Option<f64>,
}

/// Rates measured over the sample interval.
#[derive(Debug, Serialize)]
pub struct Load {
    /// Length of the sample.
    pub interval_s: f64,
    /// All numbered IRQs, interrupts/s.
    pub irq_per_sec: f64,
    /// Device IRQs, interrupts/s.
    pub device_irq_per_sec: f64,
    /// Architecture rows (timer, IPIs), interrupts/s.
    pub arch_per_sec: f64,
    /// max / mean device-IRQ load over the housekeeping CPUs (1.0 = balanced).
    pub imbalance: Option<f64>,
    /// The busiest numbered IRQs.
    pub top_irqs: Vec<TopIrq>,
}

/// A busy IRQ.
#[derive(Debug, Serialize)]
pub struct TopIrq {
    /// IRQ number.
    pub irq: u32,
    /// Action names.
    pub name: String,
    /// Interrupts/s.
    pub per_sec: f64,
    /// The CPU that took most of it.
    pub cpu: Option<u32>,
}

/// A finding with its severity and sentence.
#[derive(Debug, Serialize)]
pub struct FindingEntry {
    /// How much it matters.
    pub severity: Severity,
    /// One line for people.
    pub message: String,
    /// The finding's fields (`kind`, IRQs, CPUs).
    #[serde(flatten)]
    pub finding: Finding,
}

/// A source that could not be read.
#[derive(Debug, Serialize)]
pub struct GapEntry {
    /// Path relative to the root (`*` and `{...}` stand for several items).
    pub path: String,
    /// `missing`, `permission-denied` or `unparsable`.
    pub reason: &'static str,
    /// What that means for the report.
    pub why: String,
}
