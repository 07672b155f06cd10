//! What moderation each interrupt source offers, and its current setting: the inventory a
//! global moderator needs to act through today's kernels and hardware.

use crate::ids::IrqNum;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The moderation knob behind one IRQ.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Knob {
    /// NIC interrupt coalescing (ethtool). `per_queue` says whether the driver implements
    /// per-queue settings (`ETHTOOL_PERQUEUE`); otherwise only the device-wide one exists.
    NicQueue {
        /// Interface.
        device: String,
        /// Queue index of this IRQ.
        queue: u32,
        /// Whether per-queue coalescing is supported.
        per_queue: bool,
        /// Current `rx-usecs`.
        rx_usecs: u32,
        /// Current `rx-frames`.
        rx_max_frames: u32,
        /// Current `adaptive-rx`.
        adaptive_rx: bool,
        /// Current `tx-usecs` (0 where the driver has no TX moderation).
        #[serde(default)]
        tx_usecs: u32,
        /// Current `tx-frames`.
        #[serde(default)]
        tx_max_frames: u32,
        /// Current `adaptive-tx`.
        #[serde(default)]
        adaptive_tx: bool,
        /// The least `rx-usecs` the driver reads as a time: Intel's e1000, e1000e, igb and
        /// igc take 1-4 as ITR mode numbers and refuse 2 and 5-9 (their minimum is 10 us);
        /// 1 elsewhere.
        #[serde(default = "one_us")]
        min_usecs: u32,
    },
    /// NVMe Interrupt Coalescing (feature 08h), one setting per controller; feature 09h can exempt
    /// single vectors.
    NvmeController {
        /// Controller (`nvme0`).
        controller: String,
        /// Interrupt vector of this IRQ.
        vector: u16,
        /// Current aggregation time, 100 us units.
        time_100us: u8,
        /// Current aggregation threshold, entries (1-256).
        threshold: u16,
    },
    /// The kernel's software interrupt moderation (GSIM) can be enabled on this IRQ.
    Soft {
        /// Whether it is enabled now.
        enabled: bool,
    },
}

fn one_us() -> u32 {
    1
}

/// The least `rx-usecs` a NIC driver reads as microseconds rather than a mode number (see
/// [`Knob::NicQueue`]): 10 for Intel's ITR drivers (`E1000_MIN_ITR_USECS`, `IGB_MIN_ITR_USECS`),
/// 1 for the rest.
pub fn min_coalesce_usecs(driver: Option<&str>) -> u32 {
    match driver {
        Some("e1000" | "e1000e" | "igb" | "igc") => 10,
        _ => 1,
    }
}

/// Which procfs form the kernel's software moderation uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SoftModerationForm {
    /// v1-v3: one file `/proc/irq/soft_moderation`, written as `name=value`.
    SingleFile,
    /// v4: a directory `/proc/irq/soft_moderation/` with one file per parameter.
    Directory,
}

/// The kernel's software moderation, when the kernel carries it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftModeration {
    /// Interface form.
    pub form: SoftModerationForm,
    /// Current parameters (`delay_us`, `target_intr_rate`, `hardirq_percent`, `update_ms`,
    /// `scale_cpus`, ...).
    pub params: BTreeMap<String, u64>,
}

/// Moderation facts of a machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModerationInventory {
    /// Knob per IRQ (IRQs without a known knob are absent).
    pub knobs: BTreeMap<IrqNum, Knob>,
    /// The kernel's software moderation, if present.
    pub soft: Option<SoftModeration>,
}
