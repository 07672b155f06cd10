//! What the daemon needs beyond being uid 0, in one place: the capabilities of its writers,
//! the socket families it opens and the devices it uses. `dist/irqpilot.service` grants exactly
//! these (`CapabilityBoundingSet=`, `RestrictAddressFamilies=`, `DeviceAllow=`); a test reads
//! the unit and this table and fails when they differ.
//!
//! Writing `/proc/irq/N/smp_affinity_list`, `/proc/irq/default_smp_affinity` and the kernel's
//! soft-moderation files needs no capability: the files belong to root and uid 0 writes them as
//! their owner. Reading everything irqpilot reads needs none either (debugfs is root's).
//!
//! At start-up the daemon keeps only what the machine calls for ([`settle`]): without a NIC
//! queue to moderate it drops `CAP_NET_ADMIN`, without an NVMe controller `CAP_SYS_ADMIN`, from
//! its effective and permitted sets (for good: a controller hot-plugged later needs a restart).

use caps::{CapSet, Capability};
use irqpilot_core::Machine;
use irqpilot_core::moderation::global::GlobalModerationConfig;
use irqpilot_core::moderation::knobs::Knob;
use std::str::FromStr;

/// What a capability is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// NIC interrupt coalescing through `SIOCETHTOOL` (`ETHTOOL_SCOALESCE`,
    /// `ETHTOOL_PERQUEUE`).
    NicCoalescing,
    /// NVMe interrupt coalescing through admin passthrough (`NVME_IOCTL_ADMIN_CMD`, Get/Set
    /// Features 08h and 09h: the kernel allows them to `CAP_SYS_ADMIN` only).
    NvmeCoalescing,
}

/// A capability and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Privilege {
    /// Its name as systemd and capabilities(7) spell it.
    pub capability: &'static str,
    /// What needs it.
    pub used_for: Use,
    /// One line for logs and docs.
    pub why: &'static str,
}

/// Every capability the daemon may need.
pub const CAPABILITIES: &[Privilege] = &[
    Privilege {
        capability: "CAP_NET_ADMIN",
        used_for: Use::NicCoalescing,
        why: "NIC interrupt coalescing (ethtool ioctl ETHTOOL_SCOALESCE)",
    },
    Privilege {
        capability: "CAP_SYS_ADMIN",
        used_for: Use::NvmeCoalescing,
        why: "NVMe interrupt coalescing (admin passthrough, Set Features 08h/09h)",
    },
];

/// Socket families the daemon opens, and what for.
pub const ADDRESS_FAMILIES: &[(&str, &str)] = &[
    ("AF_UNIX", "journald and the systemd notification socket"),
    (
        "AF_INET",
        "the ethtool ioctl socket; a metrics endpoint on IPv4",
    ),
    ("AF_INET6", "a metrics endpoint on IPv6"),
];

/// Device classes the daemon opens (systemd `DeviceAllow=` syntax) and what for.
pub const DEVICES: &[(&str, &str, &str)] = &[(
    "char-nvme",
    "rw",
    "NVMe controllers /dev/nvmeN for admin passthrough",
)];

/// What the machine calls for: each use with a knob the moderator may drive (a knob of an
/// excluded device does not count).
pub fn uses(machine: &Machine, moderation: &GlobalModerationConfig) -> Vec<Use> {
    let mut out = Vec::new();
    for (irq, knob) in &machine.moderation.knobs {
        let used = match knob {
            Knob::NicQueue { .. } => Use::NicCoalescing,
            Knob::NvmeController { .. } => Use::NvmeCoalescing,
            Knob::Soft { .. } => continue,
        };
        if !out.contains(&used) && !moderation.excludes(machine, *irq, knob) {
            out.push(used);
        }
    }
    out
}

/// What [`settle`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// Needed and held.
    pub kept: Vec<&'static str>,
    /// Not needed and dropped.
    pub dropped: Vec<&'static str>,
    /// Needed but not held: those knobs will be refused (EPERM).
    pub missing: Vec<&'static str>,
    /// Could not be dropped (with the error).
    pub failed: Vec<(&'static str, String)>,
}

/// Keeps the capabilities of [`CAPABILITIES`] that `uses` calls for and drops the others from
/// this process's effective, permitted and inheritable sets.
pub fn settle(uses: &[Use]) -> Settled {
    let mut out = Settled::default();
    for p in CAPABILITIES {
        let Ok(cap) = Capability::from_str(p.capability) else {
            continue;
        };
        let held = caps::has_cap(None, CapSet::Effective, cap).unwrap_or(false);
        let needed = uses.contains(&p.used_for);
        match (needed, held) {
            (true, true) => out.kept.push(p.capability),
            (true, false) => out.missing.push(p.capability),
            (false, false) => {}
            (false, true) => {
                let r = [CapSet::Effective, CapSet::Permitted, CapSet::Inheritable]
                    .into_iter()
                    .try_for_each(|set| caps::drop(None, set, cap));
                match r {
                    Ok(()) => out.dropped.push(p.capability),
                    Err(e) => out.failed.push((p.capability, e.to_string())),
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_name_is_known() {
        for p in CAPABILITIES {
            assert!(
                Capability::from_str(p.capability).is_ok(),
                "{}",
                p.capability
            );
        }
    }

    #[test]
    fn a_machine_without_knobs_needs_nothing() {
        let m = Machine::default();
        assert!(uses(&m, &GlobalModerationConfig::default()).is_empty());
    }
}
