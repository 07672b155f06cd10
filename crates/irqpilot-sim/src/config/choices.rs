//! The named choices scenario keys take (`moderation = "dim"`, `kind = "healthy"`, ...).

use serde::{Deserialize, Serialize};

/// How received packets reach an application thread on another CPU (kernel
/// Documentation/networking/scaling.rst).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Steering {
    /// The IRQ CPU's softirq runs the stack and wakes the thread.
    #[default]
    None,
    /// RFS: the stack runs on the CPU of the thread that reads the flow.
    Rfs,
    /// RPS: the flow hash picks a CPU of `rps_cpus`; the stack runs in that CPU's backlog
    /// after an IPI, and wakes the thread where it runs.
    Rps,
}

/// Where a request/response workload's threads run on their `app_cpus`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AppSchedule {
    /// One thread per CPU of the set, each pinned to its CPU (`taskset -c` per thread).
    #[default]
    Pinned,
    /// The threads may run on any CPU of the set; the model's scheduler places each wake-up.
    Scheduled,
}

/// Which platform MSI limit applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlatformKind {
    /// An affected SoC: I/O degrades above the knee (1-3 M int/s).
    Limited,
    /// An unaffected SoC (20-30 M int/s).
    Healthy,
}

/// Per-queue moderation of a NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NicModeration {
    /// An interrupt per completion burst (no hardware moderation).
    None,
    /// Static `rx-usecs` / `rx-frames`.
    Static,
    /// Linux net DIM in the driver.
    Dim,
    /// e1000/igb AIM in the driver (ITR holdoff).
    Aim,
}

/// Register flavour of an AIM NIC.
pub use irqpilot_core::moderation::aim::ItrRegister;

/// Moderation of an NVMe drive group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NvmeModeration {
    /// No coalescing (Linux's default).
    None,
    /// Feature 08h with `coalesce_time_100us` and `coalesce_threshold`.
    Static,
}

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
