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
    /// EOPNOTSUPP: the driver lacks the knob.
    #[error("not supported (EOPNOTSUPP)")]
    Unsupported,
    /// The write succeeded but reading back showed another value.
    #[error("read back {readback:?} after writing")]
    NotTaken {
        /// What the file said afterwards.
        readback: String,
    },
    /// Anything else, with the OS message.
    #[error("{message}")]
    Other {
        /// The message.
        message: String,
    },
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
