//! `Plan` and `ApplyReport`: what a policy wants changed, and what a platform did about it.
//!
//! Policies only produce plans; platforms are the only code that changes a machine. Each applied
//! action keeps the value it replaced, so a journal of reports is enough to revert.

use crate::cpuset::CpuSet;
use crate::ids::IrqNum;
use serde::{Deserialize, Serialize};

/// One change to a machine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    /// Write `smp_affinity_list` of an IRQ.
    SetAffinity {
        /// The IRQ.
        irq: IrqNum,
        /// The CPUs it may be delivered to.
        cpus: CpuSet,
    },
    /// Write `/proc/irq/default_smp_affinity` (affinity of IRQs requested later).
    SetDefaultAffinity {
        /// The CPUs.
        cpus: CpuSet,
    },
    /// Set NIC interrupt coalescing (ethtool), for one queue or the whole device.
    SetCoalesce {
        /// Network interface.
        device: String,
        /// Queue index; `None` for the device-wide setting.
        queue: Option<u32>,
        /// The parameters to change (unset fields are left alone).
        params: CoalesceParams,
    },
    /// Set NVMe Interrupt Coalescing (Set Features 08h) on a controller.
    SetNvmeCoalescing {
        /// Controller, e.g. `nvme0`.
        controller: String,
        /// Aggregation time in 100 us units (0 = no delay).
        time_100us: u8,
        /// Aggregation threshold in completion entries (1-256; the spec field is 0's based).
        threshold: u16,
    },
    /// Enable or disable coalescing for one NVMe interrupt vector (Set Features 09h).
    SetNvmeVectorCoalescing {
        /// Controller, e.g. `nvme0`.
        controller: String,
        /// Interrupt vector.
        vector: u16,
        /// `true` sets Coalescing Disable.
        disable: bool,
    },
    /// Set a global parameter of the kernel's software interrupt moderation (GSIM), where the
    /// kernel carries it (`/proc/irq/soft_moderation`).
    SetSoftModeration {
        /// Parameter name (`delay_us`, `target_intr_rate`, `hardirq_percent`, `update_ms`, ...).
        param: String,
        /// New value.
        value: u64,
    },
    /// Enable or disable kernel software moderation for one IRQ (`/proc/irq/N/soft_moderation`).
    SetIrqSoftModeration {
        /// The IRQ.
        irq: IrqNum,
        /// Whether moderation applies.
        enabled: bool,
    },
    /// Set a NIC's queue counts (ethtool channels).
    SetChannels {
        /// Network interface.
        device: String,
        /// Combined channels.
        combined: Option<u32>,
        /// RX-only channels.
        rx: Option<u32>,
        /// TX-only channels.
        tx: Option<u32>,
    },
}

/// NIC coalescing parameters (`ethtool -C`); `None` fields are not changed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoalesceParams {
    /// `rx-usecs`: delay before an RX interrupt.
    pub rx_usecs: Option<u32>,
    /// `rx-frames`: frames before an RX interrupt.
    pub rx_max_frames: Option<u32>,
    /// `tx-usecs`.
    pub tx_usecs: Option<u32>,
    /// `tx-frames`.
    pub tx_max_frames: Option<u32>,
    /// `adaptive-rx` (the driver's own adaptive moderation, often DIM).
    pub use_adaptive_rx: Option<bool>,
    /// `adaptive-tx`.
    pub use_adaptive_tx: Option<bool>,
}

/// An ordered list of changes, with the reasons a policy wants to show.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// Changes, applied in order.
    pub actions: Vec<Action>,
    /// Human-readable reasons and facts (e.g. "IRQ 45 is kernel-managed; left alone").
    pub notes: Vec<String>,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }
}

impl CoalesceParams {
    /// The named fields in `ethtool -C` syntax (`rx-usecs 8 rx-frames 32 adaptive-rx off`).
    pub fn describe(&self) -> String {
        let onoff = |b: bool| if b { "on" } else { "off" };
        let mut parts = Vec::new();
        let numbers = [
            ("rx-usecs", self.rx_usecs),
            ("rx-frames", self.rx_max_frames),
            ("tx-usecs", self.tx_usecs),
            ("tx-frames", self.tx_max_frames),
        ];
        for (name, v) in numbers {
            if let Some(v) = v {
                parts.push(format!("{name} {v}"));
            }
        }
        for (name, v) in [
            ("adaptive-rx", self.use_adaptive_rx),
            ("adaptive-tx", self.use_adaptive_tx),
        ] {
            if let Some(v) = v {
                parts.push(format!("{name} {}", onoff(v)));
            }
        }
        parts.join(" ")
    }
}

impl Action {
    /// A short description for reports and logs.
    pub fn describe(&self) -> String {
        match self {
            Action::SetAffinity { irq, cpus } => format!("irq {irq} -> cpus {cpus}"),
            Action::SetDefaultAffinity { cpus } => format!("default affinity -> cpus {cpus}"),
            Action::SetCoalesce {
                device,
                queue,
                params,
            } => {
                let q = queue.map(|q| format!(" queue {q}")).unwrap_or_default();
                format!("{device}{q} coalesce {}", params.describe())
            }
            Action::SetNvmeCoalescing {
                controller,
                time_100us,
                threshold,
            } => format!(
                "{controller} interrupt coalescing time {}us threshold {threshold}",
                *time_100us as u32 * 100
            ),
            Action::SetNvmeVectorCoalescing {
                controller,
                vector,
                disable,
            } => {
                format!(
                    "{controller} vector {vector} coalescing {}",
                    if *disable { "off" } else { "on" }
                )
            }
            Action::SetSoftModeration { param, value } => {
                format!("soft_moderation {param}={value}")
            }
            Action::SetIrqSoftModeration { irq, enabled } => {
                format!(
                    "irq {irq} soft_moderation {}",
                    if *enabled { "on" } else { "off" }
                )
            }
            Action::SetChannels {
                device,
                combined,
                rx,
                tx,
            } => {
                // `ethtool -L` words: `eth0 channels combined 8`, `eth1 channels rx 4 tx 4`.
                let mut text = format!("{device} channels");
                for (name, n) in [("combined", combined), ("rx", rx), ("tx", tx)] {
                    if let Some(n) = n {
                        text.push_str(&format!(" {name} {n}"));
                    }
                }
                text
            }
        }
    }
}

/// Why the kernel refused one action. Variants are the refusals callers branch on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ApplyError {
    /// ENOENT: the IRQ vanished between plan and apply.
    #[error("vanished (ENOENT)")]
    Vanished,
    /// EACCES: not permitted for this user (not root).
    #[error("permission denied (EACCES)")]
    PermissionDenied,
    /// EIO (before Linux 6.12) or EPERM (6.12+): the kernel manages this IRQ's affinity.
    #[error("kernel-managed affinity (EIO/EPERM)")]
    Managed,
    /// ENOSPC: no free vector on the target CPUs.
    #[error("no vector space on target CPUs (ENOSPC)")]
    NoVectorSpace,
    /// EINVAL: e.g. no online CPU in the mask.
    #[error("invalid value (EINVAL)")]
    Invalid,
    /// The driver, device or kernel lacks the knob: EOPNOTSUPP or ENOTTY from an ioctl, a
    /// missing file, an NVMe controller's Invalid Opcode or Feature Not Changeable.
    #[error("not supported by the driver, device or kernel")]
    Unsupported,
    /// The write succeeded but reading back showed another value.
    #[error("read back {readback:?} after writing")]
    NotTaken {
        /// What the file said afterwards.
        readback: String,
    },
    /// Not attempted: the knob's current value could not be put back once changed (a value no
    /// kernel prints, or none at all), so it is left as it is: what `revert` could not
    /// restore, `apply` does not touch.
    #[error("left alone: {reason}")]
    LeftAlone {
        /// The knob and its value.
        reason: String,
    },
    /// Anything else, with the OS message.
    #[error("{message}")]
    Other {
        /// The message.
        message: String,
    },
}

impl ApplyError {
    /// Every kind's stable name ([`ApplyError::kind_name`]), in declaration order.
    pub const KIND_NAMES: &'static [&'static str] = &[
        "vanished",
        "permission-denied",
        "managed",
        "no-vector-space",
        "invalid",
        "unsupported",
        "not-taken",
        "other",
    ];

    /// A stable name for the kind of refusal, for counts in reports and metric labels.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ApplyError::Vanished => "vanished",
            ApplyError::PermissionDenied => "permission-denied",
            ApplyError::Managed => "managed",
            ApplyError::NoVectorSpace => "no-vector-space",
            ApplyError::Invalid => "invalid",
            ApplyError::Unsupported => "unsupported",
            ApplyError::NotTaken { .. } => "not-taken",
            ApplyError::LeftAlone { .. } => "left-alone",
            ApplyError::Other { .. } => "other",
        }
    }
}

/// What happened to one action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The action.
    pub action: Action,
    /// The value it replaced, verbatim, when it was read (needed for revert).
    pub old: Option<String>,
    /// `Ok(true)` written, `Ok(false)` already so (nothing written), or the refusal.
    pub result: Result<bool, ApplyError>,
}

/// Results of applying a plan, one per action, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApplyReport {
    /// Outcomes in plan order.
    pub outcomes: Vec<Outcome>,
}

impl ApplyReport {
    /// Every action of `plan` refused with `message` (a platform that cannot change anything:
    /// a recording, a synthetic machine).
    pub fn refuse_all(plan: &Plan, message: &str) -> ApplyReport {
        ApplyReport {
            outcomes: plan
                .actions
                .iter()
                .map(|a| Outcome {
                    action: a.clone(),
                    old: None,
                    result: Err(ApplyError::Other {
                        message: message.to_string(),
                    }),
                })
                .collect(),
        }
    }

    /// Number of refused actions.
    pub fn failures(&self) -> usize {
        self.outcomes.iter().filter(|o| o.result.is_err()).count()
    }

    /// Number of actions that changed something.
    pub fn written(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| o.result == Ok(true))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_kind_is_named_once() {
        let all = [
            ApplyError::Vanished,
            ApplyError::PermissionDenied,
            ApplyError::Managed,
            ApplyError::NoVectorSpace,
            ApplyError::Invalid,
            ApplyError::Unsupported,
            ApplyError::NotTaken {
                readback: String::new(),
            },
            ApplyError::Other {
                message: String::new(),
            },
        ];
        let names: Vec<&str> = all.iter().map(ApplyError::kind_name).collect();
        assert_eq!(names, ApplyError::KIND_NAMES);
    }

    #[test]
    fn a_coalescing_action_reads_like_ethtool() {
        let a = Action::SetCoalesce {
            device: "eth0".into(),
            queue: None,
            params: CoalesceParams {
                rx_usecs: Some(3),
                rx_max_frames: Some(0),
                use_adaptive_rx: Some(false),
                ..Default::default()
            },
        };
        assert_eq!(
            a.describe(),
            "eth0 coalesce rx-usecs 3 rx-frames 0 adaptive-rx off"
        );
    }

    #[test]
    fn a_channels_action_reads_like_ethtool() {
        let a = Action::SetChannels {
            device: "eth0".into(),
            combined: Some(8),
            rx: None,
            tx: None,
        };
        assert_eq!(a.describe(), "eth0 channels combined 8");
        let b = Action::SetChannels {
            device: "eth1".into(),
            combined: None,
            rx: Some(4),
            tx: Some(4),
        };
        assert_eq!(b.describe(), "eth1 channels rx 4 tx 4");
    }
}
