//! `Machine`: the static inventory of one machine (topology, isolation, IRQs, devices), and the
//! record of what could not be read, so reports say "unknown" instead of guessing.

use crate::cpuset::CpuSet;
use crate::ids::{IrqNum, PciAddr};
use crate::irq::{Irq, PciDevice};
use crate::isolation::Isolation;
use crate::topology::Topology;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a source of facts is missing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapReason {
    /// The file or directory does not exist (older kernel, container, no such device).
    Missing,
    /// Not readable by this user.
    PermissionDenied,
    /// Readable but not understood; the message says where.
    Unparsable(String),
}

/// A source of facts that could not be used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gap {
    /// Path relative to the root, e.g. `sys/kernel/irq` or `proc/irq/24/effective_affinity_list`.
    pub path: String,
    /// Why.
    pub reason: GapReason,
}

/// The inventory of a machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// CPUs and their sharing.
    pub topology: Topology,
    /// Isolation settings.
    pub isolation: Isolation,
    /// Numbered IRQs.
    pub irqs: BTreeMap<IrqNum, Irq>,
    /// PCI functions.
    pub devices: BTreeMap<PciAddr, PciDevice>,
    /// `/proc/irq/default_smp_affinity`.
    pub default_affinity: Option<CpuSet>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// `/proc/cmdline`, verbatim (trimmed).
    pub cmdline: Option<String>,
    /// Moderation knobs per IRQ and the kernel's software moderation, where known.
    #[serde(default)]
    pub moderation: crate::moderation::knobs::ModerationInventory,
    /// Sources that could not be read. Grouped: a missing directory is one gap, not one per file.
    pub gaps: Vec<Gap>,
}

impl Machine {
    /// Housekeeping CPUs for device interrupts (see [`Isolation::housekeeping`]).
    pub fn housekeeping(&self) -> CpuSet {
        self.isolation.housekeeping(&self.topology.online).cpus
    }

    /// IRQs of one device, by IRQ number.
    pub fn device_irqs<'a>(&'a self, dev: &'a PciDevice) -> impl Iterator<Item = &'a Irq> + 'a {
        self.irqs
            .values()
            .filter(move |i| i.device.as_ref() == Some(&dev.addr))
    }
}
