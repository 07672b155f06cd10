//! `Irq` and `PciDevice`: the static inventory of a machine's interrupts and the devices that own
//! them, merged from `/proc/interrupts`, `/proc/irq/N/*`, `/sys/kernel/irq/N/*` and
//! `/sys/bus/pci/devices/*`. Every field a kernel or permission can withhold is an `Option`.

use crate::cpuset::CpuSet;
use crate::ids::{IrqNum, NodeId, PciAddr};
use crate::queue::Queue;
use serde::{Deserialize, Serialize};

/// Trigger type (`/sys/kernel/irq/N/type`, or `Edge`/`Level` in `/proc/interrupts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// Edge triggered (all MSI/MSI-X).
    Edge,
    /// Level triggered.
    Level,
}

/// One numbered interrupt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Irq {
    /// The IRQ number.
    pub irq: IrqNum,
    /// Interrupt chip (`chip_name`, e.g. `IR-PCI-MSIX-0000:01:00.0`, `IO-APIC`, `GICv3`).
    pub chip: Option<String>,
    /// Hardware IRQ number within the chip's domain (`hwirq`).
    pub hwirq: Option<u64>,
    /// Trigger type.
    pub trigger: Option<Trigger>,
    /// Flow handler name (`/sys/kernel/irq/N/name`: `edge`, `fasteoi`, `level`, ...).
    pub handler: Option<String>,
    /// Action (handler) names, in registration order (`actions`).
    pub actions: Vec<String>,
    /// Owning PCI function, from `msi_irqs/` or the legacy `irq` file.
    pub device: Option<PciAddr>,
    /// Driver bound to that device.
    pub driver: Option<String>,
    /// NUMA node (`/proc/irq/N/node`, else the device's `numa_node`).
    pub node: Option<NodeId>,
    /// Requested affinity (`smp_affinity_list`).
    pub requested: Option<CpuSet>,
    /// Effective affinity (`effective_affinity_list`): where it is really delivered.
    pub effective: Option<CpuSet>,
    /// Driver hint (`affinity_hint`); `None` when absent or empty.
    pub affinity_hint: Option<CpuSet>,
    /// Whether the kernel manages the affinity (user writes fail with EIO/EPERM), when known.
    pub managed: Option<bool>,
    /// Queue recognised from the action names.
    pub queue: Option<Queue>,
}

impl Irq {
    /// An IRQ with only its number known.
    pub fn new(irq: IrqNum) -> Irq {
        Irq {
            irq,
            chip: None,
            hwirq: None,
            trigger: None,
            handler: None,
            actions: Vec::new(),
            device: None,
            driver: None,
            node: None,
            requested: None,
            effective: None,
            affinity_hint: None,
            managed: None,
            queue: None,
        }
    }

    /// Actions joined the way `/proc/interrupts` prints them.
    pub fn name(&self) -> String {
        self.actions.join(", ")
    }

    /// Whether this IRQ belongs to a device (PCI, or a recognised queue) rather than to the
    /// platform (timers, IPIs, ACPI).
    pub fn is_device(&self) -> bool {
        self.device.is_some() || self.queue.is_some()
    }

    /// Where the IRQ is delivered: effective affinity if known, else the requested one.
    pub fn delivered_to(&self) -> Option<&CpuSet> {
        self.effective.as_ref().or(self.requested.as_ref())
    }
}

/// A PCI function (`/sys/bus/pci/devices/<addr>/`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PciDevice {
    /// Address.
    pub addr: PciAddr,
    /// `class` (e.g. `0x020000` Ethernet, `0x010802` NVMe).
    pub class: Option<u32>,
    /// Bound driver (basename of the `driver` link).
    pub driver: Option<String>,
    /// `numa_node`; `None` when the file says -1 or is missing.
    pub numa_node: Option<NodeId>,
    /// `local_cpulist`.
    pub local_cpus: Option<CpuSet>,
    /// Entries of `msi_irqs/`.
    pub msi_irqs: Vec<IrqNum>,
    /// The legacy `irq` file, when not 0.
    pub legacy_irq: Option<IrqNum>,
    /// Network interfaces (`net/`).
    pub net: Vec<String>,
    /// NVMe controllers (`nvme/`).
    pub nvme: Vec<String>,
}

impl PciDevice {
    /// A device with only its address known.
    pub fn new(addr: PciAddr) -> PciDevice {
        PciDevice {
            addr,
            class: None,
            driver: None,
            numa_node: None,
            local_cpus: None,
            msi_irqs: Vec::new(),
            legacy_irq: None,
            net: Vec::new(),
            nvme: Vec::new(),
        }
    }

    /// A short human name: first interface or controller, else the driver, else the address.
    pub fn label(&self) -> String {
        self.net
            .first()
            .or(self.nvme.first())
            .or(self.driver.as_ref())
            .cloned()
            .unwrap_or_else(|| self.addr.to_string())
    }

    /// The class's base byte, e.g. 0x02 for network controllers.
    pub fn base_class(&self) -> Option<u8> {
        self.class.map(|c| (c >> 16) as u8)
    }
}
