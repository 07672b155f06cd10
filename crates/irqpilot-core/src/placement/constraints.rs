//! What the policy may do with each IRQ and where it may put it: the allowed CPUs (online
//! housekeeping CPUs minus banned ones, narrowed by pins), and which IRQs are off limits
//! (kernel-managed, banned by the user, without a writable affinity file, or refused by the
//! kernel earlier).

use super::config::{Pin, PlacementConfig};
use crate::cpuset::CpuSet;
use crate::ids::IrqNum;
use crate::irq::Irq;
use crate::machine::Machine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why an IRQ is not moved.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Hold {
    /// The kernel manages its affinity (user writes fail with EIO/EPERM); only
    /// `isolcpus=managed_irq` at boot steers it (balancing.md 5.2, 5.4).
    Managed,
    /// Banned in the configuration (`ban_irqs`, `ban_names`).
    Banned,
    /// No `smp_affinity_list` could be read: nothing to write to.
    NoAffinityFile,
    /// The kernel refused a write earlier with a permanent error (learned, never retried).
    Refused(String),
}

/// The constraints for one IRQ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct IrqRule {
    /// Why it stays put, if it does.
    pub hold: Option<Hold>,
    /// CPUs it may go to when a pin narrows the common allowed set (already intersected with
    /// it); `None` = the common set.
    pub pinned: Option<CpuSet>,
}

/// Whether a name glob can mean what it says: not empty (it would match nothing), and no
/// `[`, `]`, `{` or `}` ([`glob_match`] knows only `*` and `?`, so a character class
/// would silently match nothing).
pub fn check_glob(pattern: &str) -> Result<(), &'static str> {
    if pattern.trim().is_empty() {
        return Err("an empty pattern matches nothing");
    }
    if pattern.contains(['[', ']', '{', '}']) {
        return Err("only * and ? are wildcards: [...] and {...} are not supported");
    }
    Ok(())
}

/// Matches `text` against a glob with `*` (any run) and `?` (one character).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0usize, 0usize);
    // Position after the last `*` and the text position it was tried at (classic backtracking
    // matcher: linear in practice, no recursion).
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi + 1, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn name_matches(glob: &str, irq: &Irq) -> bool {
    irq.actions.iter().any(|a| glob_match(glob, a)) || glob_match(glob, &irq.name())
}

/// Whether `pin` selects `irq`.
fn pin_selects(pin: &Pin, irq: &Irq, machine: &Machine) -> bool {
    if let Some(n) = pin.irq {
        return n == irq.irq;
    }
    if let Some(glob) = &pin.name {
        return name_matches(glob, irq);
    }
    if let Some(dev) = &pin.device {
        return device_selects(dev, irq, machine);
    }
    false
}

/// Whether `dev` (a PCI address, network interface or NVMe controller) names the device of
/// `irq`.
pub(crate) fn device_selects(dev: &str, irq: &Irq, machine: &Machine) -> bool {
    let Some(addr) = &irq.device else {
        // A queue recognised from its name still names its owner (`eth0`, `nvme0`).
        return irq.queue.as_ref().is_some_and(|q| q.owner == dev);
    };
    if addr.as_str() == dev {
        return true;
    }
    machine
        .devices
        .get(addr)
        .is_some_and(|d| d.net.iter().chain(&d.nvme).any(|n| n == dev))
}

/// The CPUs every IRQ may use: online housekeeping CPUs minus `ban_cpus`.
pub(crate) fn common_allowed(machine: &Machine, cfg: &PlacementConfig) -> CpuSet {
    machine
        .housekeeping()
        .intersection(&machine.topology.online)
        .difference(&cfg.ban_cpus)
}

/// Rules for every IRQ of the machine, in `machine.irqs` order, plus notes on pins that could
/// not be honoured.
pub(crate) fn irq_rules(
    machine: &Machine,
    cfg: &PlacementConfig,
    allowed: &CpuSet,
    refused: &BTreeMap<IrqNum, String>,
    notes: &mut Vec<String>,
) -> Vec<IrqRule> {
    let mut rules = Vec::with_capacity(machine.irqs.len());
    let mut empty_pins: BTreeMap<usize, Vec<IrqNum>> = BTreeMap::new();
    for irq in machine.irqs.values() {
        let hold = if irq.managed == Some(true) {
            Some(Hold::Managed)
        } else if cfg.ban_irqs.contains(&irq.irq)
            || cfg.ban_names.iter().any(|g| name_matches(g, irq))
        {
            Some(Hold::Banned)
        } else if let Some(why) = refused.get(&irq.irq) {
            Some(Hold::Refused(why.clone()))
        } else if irq.requested.is_none() {
            Some(Hold::NoAffinityFile)
        } else {
            None
        };
        // The first pin that selects an IRQ wins, as in a firewall rule list.
        let pinned = cfg
            .pin
            .iter()
            .enumerate()
            .find(|(_, p)| pin_selects(p, irq, machine))
            .and_then(|(index, p)| {
                let set = p.cpus.intersection(allowed);
                if set.is_empty() {
                    empty_pins.entry(index).or_default().push(irq.irq);
                    None
                } else {
                    Some(set)
                }
            });
        rules.push(IrqRule { hold, pinned });
    }
    for (index, irqs) in empty_pins {
        notes.push(format!(
            "pin[{index}] (cpus {}) names no online housekeeping CPU; IRQ {} placed on the \
             housekeeping CPUs instead",
            cfg.pin[index].cpus,
            super::decision::irq_list(&irqs)
        ));
    }
    rules
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{CpuId, PciAddr};
    use crate::irq::PciDevice;

    #[test]
    fn globs_that_cannot_match_what_they_say_are_refused() {
        assert_eq!(check_glob("mlx5_comp*@pci:?"), Ok(()));
        assert!(check_glob("").is_err());
        assert!(check_glob("  ").is_err());
        assert!(check_glob("[").is_err());
        assert!(check_glob("eth{0,1}").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("mlx5_comp*", "mlx5_comp7@pci:0000:3b:00.0"));
        assert!(glob_match("*TxRx-?", "ice-eth0-TxRx-3"));
        assert!(!glob_match("*TxRx-?", "ice-eth0-TxRx-13"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
        assert!(glob_match("nvme0q1", "nvme0q1"));
        assert!(!glob_match("nvme0q1", "nvme0q12"));
        assert!(glob_match("**x", "x"));
    }

    #[test]
    fn pins_by_device_name_and_irq() {
        let mut m = Machine::default();
        m.topology.online = CpuSet::range(0, 7);
        let addr = PciAddr("0000:3b:00.0".into());
        let mut d = PciDevice::new(addr.clone());
        d.net = vec!["eth0".into()];
        m.devices.insert(addr.clone(), d);
        let mut a = Irq::new(IrqNum(40));
        a.device = Some(addr);
        a.actions = vec!["eth0-TxRx-0".into()];
        a.requested = Some(CpuSet::range(0, 7));
        let mut b = Irq::new(IrqNum(41));
        b.actions = vec!["timer".into()];
        b.requested = Some(CpuSet::range(0, 7));
        let mut c = Irq::new(IrqNum(42));
        c.managed = Some(true);
        c.requested = Some(CpuSet::range(0, 7));
        for i in [a, b, c] {
            m.irqs.insert(i.irq, i);
        }
        let cfg = PlacementConfig {
            ban_cpus: CpuSet::single(CpuId(7)),
            ban_names: vec!["tim*".into()],
            pin: vec![
                Pin {
                    irq: None,
                    device: Some("eth0".into()),
                    name: None,
                    cpus: CpuSet::range(2, 3),
                },
                Pin {
                    irq: Some(IrqNum(42)),
                    device: None,
                    name: None,
                    cpus: CpuSet::single(CpuId(7)),
                },
            ],
            ..Default::default()
        };
        let allowed = common_allowed(&m, &cfg);
        assert_eq!(allowed, CpuSet::range(0, 6));
        let mut notes = Vec::new();
        let r = irq_rules(&m, &cfg, &allowed, &BTreeMap::new(), &mut notes);
        assert_eq!(r[0].pinned, Some(CpuSet::range(2, 3)));
        assert_eq!(r[0].hold, None);
        assert_eq!(r[1].hold, Some(Hold::Banned));
        assert_eq!(r[2].hold, Some(Hold::Managed));
        // The pin to the banned CPU 7 cannot be honoured, and says so.
        assert_eq!(r[2].pinned, None);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("pin[1]"), "{notes:?}");
    }
}
