//! `Isolation`: which CPUs the administrator keeps free of noise, and the derived set of
//! *housekeeping* CPUs where device interrupts belong.
//!
//! Sources (all optional): `/sys/devices/system/cpu/isolated` (isolcpus domain CPUs),
//! `/sys/devices/system/cpu/nohz_full`, and the kernel command line's `isolcpus=` (with flags such
//! as `managed_irq`, `domain`, `nohz`), `nohz_full=` and `irqaffinity=`.

use crate::cpuset::CpuSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

pub mod plan;

/// A flag of the `isolcpus=` boot parameter.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IsolFlag {
    /// `domain`: removed from scheduler load balancing (the default when no flag is given).
    Domain,
    /// `managed_irq`: kernel-managed IRQ affinity avoids these CPUs where it can.
    ManagedIrq,
    /// `nohz`: tick offload.
    Nohz,
    /// A flag this version does not know, kept as written.
    Other(String),
}

/// The `isolcpus=` boot parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolCpus {
    /// The CPUs named.
    pub cpus: CpuSet,
    /// Flags; `{Domain}` when the parameter had none (the kernel's default).
    pub flags: BTreeSet<IsolFlag>,
}

/// Where the housekeeping set came from, for reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HousekeepingBasis {
    /// No isolation configured: every online CPU.
    AllOnline,
    /// Online CPUs minus the isolated ones (and within `irqaffinity=` when given).
    Derived,
    /// Isolation would leave no CPU: fell back to every online CPU.
    FallbackAllOnline,
}

/// The housekeeping CPUs for device interrupts, with how they were derived.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Housekeeping {
    /// CPUs where device interrupts may go.
    pub cpus: CpuSet,
    /// How `cpus` was derived.
    pub basis: HousekeepingBasis,
}

/// Isolation settings of a machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    /// `/sys/devices/system/cpu/isolated`.
    pub isolated: Option<CpuSet>,
    /// `/sys/devices/system/cpu/nohz_full`, else `nohz_full=` from the command line.
    pub nohz_full: Option<CpuSet>,
    /// `isolcpus=` from the command line.
    pub isolcpus: Option<IsolCpus>,
    /// `irqaffinity=` from the command line: the default affinity for device IRQs.
    pub irqaffinity: Option<CpuSet>,
}

impl Isolation {
    /// Every CPU isolated by any source.
    pub fn isolated_cpus(&self) -> CpuSet {
        let mut s = CpuSet::new();
        for part in [&self.isolated, &self.nohz_full].into_iter().flatten() {
            s = s.union(part);
        }
        if let Some(ic) = &self.isolcpus {
            s = s.union(&ic.cpus);
        }
        s
    }

    /// Whether `isolcpus=managed_irq` asks kernel-managed IRQs to avoid the isolated CPUs.
    pub fn managed_irq_isolation(&self) -> Option<&CpuSet> {
        self.isolcpus
            .as_ref()
            .filter(|ic| ic.flags.contains(&IsolFlag::ManagedIrq))
            .map(|ic| &ic.cpus)
    }

    /// Housekeeping CPUs for device interrupts: online CPUs that no source isolates, further
    /// limited to `irqaffinity=` when that is given. Never empty while a CPU is online: if
    /// isolation would leave nothing, every online CPU is returned with
    /// [`HousekeepingBasis::FallbackAllOnline`] so callers can report it.
    pub fn housekeeping(&self, online: &CpuSet) -> Housekeeping {
        let isolated = self.isolated_cpus();
        if isolated.is_empty() && self.irqaffinity.is_none() {
            return Housekeeping {
                cpus: online.clone(),
                basis: HousekeepingBasis::AllOnline,
            };
        }
        let mut cpus = online.difference(&isolated);
        if let Some(aff) = &self.irqaffinity {
            let within = cpus.intersection(aff);
            if !within.is_empty() {
                cpus = within;
            }
        }
        if cpus.is_empty() {
            Housekeeping {
                cpus: online.clone(),
                basis: HousekeepingBasis::FallbackAllOnline,
            }
        } else {
            Housekeeping {
                cpus,
                basis: HousekeepingBasis::Derived,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    #[test]
    fn no_isolation_means_all_online() {
        let h = Isolation::default().housekeeping(&l("0-7"));
        assert_eq!(h.cpus, l("0-7"));
        assert_eq!(h.basis, HousekeepingBasis::AllOnline);
    }

    #[test]
    fn union_of_sources() {
        let iso = Isolation {
            isolated: Some(l("4-5")),
            nohz_full: Some(l("6")),
            isolcpus: Some(IsolCpus {
                cpus: l("7"),
                flags: [IsolFlag::ManagedIrq, IsolFlag::Domain]
                    .into_iter()
                    .collect(),
            }),
            irqaffinity: None,
        };
        assert_eq!(iso.isolated_cpus(), l("4-7"));
        assert_eq!(iso.housekeeping(&l("0-7")).cpus, l("0-3"));
        assert_eq!(iso.managed_irq_isolation(), Some(&l("7")));
    }

    #[test]
    fn irqaffinity_narrows_and_fallback() {
        let iso = Isolation {
            irqaffinity: Some(l("0-1")),
            isolated: Some(l("1")),
            ..Default::default()
        };
        assert_eq!(iso.housekeeping(&l("0-3")).cpus, l("0"));
        let all = Isolation {
            isolated: Some(l("0-3")),
            ..Default::default()
        };
        let h = all.housekeeping(&l("0-3"));
        assert_eq!(h.basis, HousekeepingBasis::FallbackAllOnline);
        assert_eq!(h.cpus, l("0-3"));
    }
}
