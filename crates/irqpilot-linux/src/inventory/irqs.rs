//! Numbered IRQs: `proc/irq/N`, `sys/kernel/irq/N`, debugfs state, and their devices.

use super::gaps::GapLog;
use super::{Family, Fetched, fetch, fetch_first, fetch_item, list_single};
use crate::format::{pci, procirq, sysirq};
use crate::root::Root;
use irqpilot_core::{CpuSet, GapReason, Irq, IrqNum, PciAddr, PciDevice, queue};
use std::collections::{BTreeMap, BTreeSet};

const PROC_IRQ: &str = "proc/irq";
const SYS_IRQ: &str = "sys/kernel/irq";
const DEBUG_IRQ: &str = "sys/kernel/debug/irq/irqs";

fn irq_dirs(root: &Root, log: &mut GapLog, dir: &str) -> Option<BTreeSet<IrqNum>> {
    let names = list_single(root, log, dir, true)?;
    Some(
        names
            .iter()
            .filter_map(|n| procirq::parse_irq_dir_name(n))
            .collect(),
    )
}

/// Reads every IRQ listed under `proc/irq` or `sys/kernel/irq`, and `default_smp_affinity`.
pub(super) fn read_irqs(
    root: &Root,
    devices: &BTreeMap<PciAddr, PciDevice>,
    log: &mut GapLog,
) -> (BTreeMap<IrqNum, Irq>, Option<CpuSet>) {
    let proc_dirs = irq_dirs(root, log, PROC_IRQ);
    let sys_dirs = irq_dirs(root, log, SYS_IRQ);
    let default_affinity = proc_dirs.as_ref().and_then(|_| {
        super::fetch_single(
            root,
            log,
            &format!("{PROC_IRQ}/default_smp_affinity"),
            procirq::parse_affinity_mask,
        )
    });
    let all: BTreeSet<IrqNum> = proc_dirs
        .iter()
        .chain(sys_dirs.iter())
        .flatten()
        .copied()
        .collect();
    let managed = read_managed(root, log, &all);
    let owners = owners(devices);

    let mut irqs = BTreeMap::new();
    for &n in &all {
        let item = n.0.to_string();
        let mut irq = Irq::new(n);
        // An IRQ without a `proc/irq/N` directory was never requested (no /proc entry is made
        // until then); an IRQ without `sys/kernel/irq/N` cannot happen with SPARSE_IRQ. Both are
        // recorded: the facts are unknown either way.
        if let Some(dirs) = &proc_dirs {
            if dirs.contains(&n) {
                read_proc(
                    root,
                    log,
                    Family {
                        item: &item,
                        universe: dirs.len(),
                    },
                    &mut irq,
                );
            } else {
                log.item(
                    &format!("{PROC_IRQ}/{{}}"),
                    &item,
                    all.len(),
                    GapReason::Missing,
                );
            }
        }
        if let Some(dirs) = &sys_dirs {
            if dirs.contains(&n) {
                read_sys(
                    root,
                    log,
                    Family {
                        item: &item,
                        universe: dirs.len(),
                    },
                    &mut irq,
                );
            } else {
                log.item(
                    &format!("{SYS_IRQ}/{{}}"),
                    &item,
                    all.len(),
                    GapReason::Missing,
                );
            }
        }
        irq.managed = managed.get(&n).copied();
        irq.queue = irq.actions.iter().find_map(|a| queue::recognise(a));
        // Without an msi_irqs entry, a per-device MSI chip name still names the device.
        let chip_owner = irq.chip.as_deref().and_then(pci::msi_chip_device);
        let owner = owners
            .get(&n)
            .and_then(|a| devices.get(*a))
            .or_else(|| chip_owner.as_ref().and_then(|a| devices.get(a)));
        if let Some(dev) = owner {
            irq.device = Some(dev.addr.clone());
            irq.driver.clone_from(&dev.driver);
            if irq.node.is_none() {
                irq.node = dev.numa_node;
            }
            if irq.queue.is_none() {
                irq.queue = single_vector_queue(&irq.actions, dev);
            }
        }
        irqs.insert(n, irq);
    }
    (irqs, default_affinity)
}

/// The one queue of a NIC whose driver names its only interrupt after the interface (`eth0`:
/// e1000, e1000e with MSI, r8169 and others). The name alone says nothing (it could be any
/// device's), so this needs the device the IRQ belongs to and that device's interfaces.
fn single_vector_queue(actions: &[String], dev: &PciDevice) -> Option<queue::Queue> {
    let owner = actions.iter().find(|a| dev.net.iter().any(|n| n == *a))?;
    Some(queue::Queue {
        kind: queue::QueueKind::TxRx,
        index: Some(0),
        owner: owner.clone(),
        scheme: queue::NamingScheme::Netdev,
    })
}

/// IRQ -> owning device: `msi_irqs/` entries first; the legacy `irq` file only for devices
/// without MSI vectors (with MSI-X enabled it names the unused INTx line), first device wins on a
/// shared line.
fn owners(devices: &BTreeMap<PciAddr, PciDevice>) -> BTreeMap<IrqNum, &PciAddr> {
    let mut owners = BTreeMap::new();
    for dev in devices.values() {
        for &irq in &dev.msi_irqs {
            owners.entry(irq).or_insert(&dev.addr);
        }
    }
    for dev in devices.values().filter(|d| d.msi_irqs.is_empty()) {
        if let Some(irq) = dev.legacy_irq {
            owners.entry(irq).or_insert(&dev.addr);
        }
    }
    owners
}

/// Requested and effective affinity of one IRQ: the `_list` files, else the masks.
fn read_affinity(
    root: &Root,
    log: &mut GapLog,
    fam: Family<'_>,
) -> (Option<CpuSet>, Option<CpuSet>) {
    let p = |file: &str| format!("{PROC_IRQ}/{{}}/{file}");
    let (req_list, req_mask) = (p(procirq::SMP_AFFINITY_LIST), p(procirq::SMP_AFFINITY));
    let requested = fetch_first(
        root,
        log,
        fam,
        &[
            (req_list.as_str(), procirq::parse_affinity_list),
            (req_mask.as_str(), procirq::parse_affinity_mask),
        ],
    );
    let (eff_list, eff_mask) = (
        p(procirq::EFFECTIVE_AFFINITY_LIST),
        p(procirq::EFFECTIVE_AFFINITY),
    );
    let effective = fetch_first(
        root,
        log,
        fam,
        &[
            (eff_list.as_str(), procirq::parse_affinity_list),
            (eff_mask.as_str(), procirq::parse_affinity_mask),
        ],
    );
    (requested, effective)
}

/// One IRQ's requested and effective affinity as the files say now (`None` where a file is
/// missing or malformed): for samplers that notice an IRQ delivered somewhere new.
pub fn irq_affinity(root: &Root, irq: IrqNum) -> (Option<CpuSet>, Option<CpuSet>) {
    let item = irq.to_string();
    let fam = Family {
        item: &item,
        universe: 1,
    };
    read_affinity(root, &mut GapLog::default(), fam)
}

fn read_proc(root: &Root, log: &mut GapLog, fam: Family<'_>, irq: &mut Irq) {
    let p = |file: &str| format!("{PROC_IRQ}/{{}}/{file}");
    (irq.requested, irq.effective) = read_affinity(root, log, fam);
    irq.affinity_hint = fetch_item(
        root,
        log,
        fam,
        &p(procirq::AFFINITY_HINT),
        procirq::parse_affinity_hint,
    )
    .flatten();
    irq.node = fetch_item(root, log, fam, &p(procirq::NODE), procirq::parse_node).flatten();
}

fn read_sys(root: &Root, log: &mut GapLog, fam: Family<'_>, irq: &mut Irq) {
    let p = |file: &str| format!("{SYS_IRQ}/{{}}/{file}");
    irq.chip = fetch_item(
        root,
        log,
        fam,
        &p(sysirq::CHIP_NAME),
        sysirq::parse_chip_name,
    )
    .flatten();
    irq.hwirq = fetch_item(root, log, fam, &p(sysirq::HWIRQ), sysirq::parse_hwirq).flatten();
    irq.trigger = fetch_item(root, log, fam, &p(sysirq::TYPE), sysirq::parse_type);
    irq.handler =
        fetch_item(root, log, fam, &p(sysirq::NAME), sysirq::parse_handler_name).flatten();
    irq.actions =
        fetch_item(root, log, fam, &p(sysirq::ACTIONS), sysirq::parse_actions).unwrap_or_default();
}

/// `IRQD_AFFINITY_MANAGED` from debugfs, the only place the kernel exposes it. debugfs is
/// usually unmounted or root-only, so its absence is one gap and `managed` stays unknown.
fn read_managed(root: &Root, log: &mut GapLog, all: &BTreeSet<IrqNum>) -> BTreeMap<IrqNum, bool> {
    let mut managed = BTreeMap::new();
    if all.is_empty() {
        return managed;
    }
    let Some(names) = list_single(root, log, DEBUG_IRQ, true) else {
        return managed;
    };
    let present: BTreeSet<IrqNum> = names
        .iter()
        .filter_map(|n| procirq::parse_irq_dir_name(n))
        .collect();
    for &n in all {
        let item = n.0.to_string();
        let pattern = format!("{DEBUG_IRQ}/{{}}");
        if !present.contains(&n) {
            log.item(&pattern, &item, all.len(), GapReason::Missing);
            continue;
        }
        match fetch(
            root,
            &pattern.replacen("{}", &item, 1),
            sysirq::parse_debugfs_dstate,
        ) {
            Fetched::Got(names) => {
                managed.insert(n, sysirq::dstate_is_managed(&names));
            }
            Fetched::Missing => log.item(&pattern, &item, all.len(), GapReason::Missing),
            Fetched::Failed(reason) => log.item(&pattern, &item, all.len(), reason),
        }
    }
    managed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interrupt_named_after_its_own_interface_is_that_nics_queue() {
        let mut dev = PciDevice::new(PciAddr::parse("0000:00:03.0").unwrap());
        dev.net = vec!["eth0".into()];
        let q = single_vector_queue(&["eth0".into()], &dev).unwrap();
        assert_eq!(q.kind, queue::QueueKind::TxRx);
        assert_eq!((q.index, q.owner.as_str()), (Some(0), "eth0"));
        // A shared INTx line: only the action that names this device's interface counts.
        let shared = ["ehci_hcd:usb1".to_string(), "eth0".to_string()];
        assert_eq!(single_vector_queue(&shared, &dev).unwrap().owner, "eth0");
        // Another device's interface, or a device without one, is not this NIC's queue.
        assert_eq!(single_vector_queue(&["eth1".into()], &dev), None);
        dev.net.clear();
        assert_eq!(single_vector_queue(&["eth0".into()], &dev), None);
    }
}
