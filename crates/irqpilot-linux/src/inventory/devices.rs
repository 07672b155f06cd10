//! PCI functions: `sys/bus/pci/devices/*`.

use super::gaps::GapLog;
use super::{Family, fetch_first, fetch_item, list_single};
use crate::format::{pci, value};
use crate::root::Root;
use irqpilot_core::{GapReason, PciAddr, PciDevice};
use std::collections::BTreeMap;

pub(super) const PCI_DIR: &str = "sys/bus/pci/devices";

/// Entry names of a listing that the kernel could have made (fixtures may add `.keep` files so
/// that git keeps empty directories).
fn kernel_names(names: Vec<String>) -> Vec<String> {
    names.into_iter().filter(|n| !n.starts_with('.')).collect()
}

/// Lists `rel` as part of one device's facts: a missing directory is "none", an unreadable one
/// is a gap.
fn list_entries(root: &Root, log: &mut GapLog, fam: Family<'_>, pattern: &str) -> Vec<String> {
    match root.list_dir(&pattern.replacen("{}", fam.item, 1)) {
        Ok(names) => kernel_names(names.unwrap_or_default()),
        Err(reason) => {
            log.item(pattern, fam.item, fam.universe, reason);
            Vec::new()
        }
    }
}

pub(super) fn read_devices(root: &Root, log: &mut GapLog) -> BTreeMap<PciAddr, PciDevice> {
    let mut devices = BTreeMap::new();
    let Some(entries) = list_single(root, log, PCI_DIR, true) else {
        return devices;
    };
    let entries = kernel_names(entries);
    let mut addrs = Vec::new();
    for name in &entries {
        match PciAddr::parse(name) {
            Some(a) => addrs.push(a),
            None => log.single(
                format!("{PCI_DIR}/{name}"),
                GapReason::Unparsable(format!("{PCI_DIR}/{name}: not a PCI address")),
            ),
        }
    }
    for addr in &addrs {
        let fam = Family {
            item: addr.as_str(),
            universe: addrs.len(),
        };
        devices.insert(addr.clone(), read_device(root, log, fam, addr));
    }
    devices
}

fn read_device(root: &Root, log: &mut GapLog, fam: Family<'_>, addr: &PciAddr) -> PciDevice {
    let base = format!("{PCI_DIR}/{{}}");
    let dir = format!("{PCI_DIR}/{addr}");
    let mut dev = PciDevice::new(addr.clone());
    let sub = list_entries(root, log, fam, &base);
    let has = |d: &str| sub.iter().any(|n| n == d);

    dev.class = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/{}", pci::CLASS),
        pci::parse_class,
    );
    dev.numa_node = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/{}", pci::NUMA_NODE),
        pci::parse_numa_node,
    )
    .flatten();
    let (list, mask) = (
        format!("{base}/{}", pci::LOCAL_CPULIST),
        format!("{base}/{}", pci::LOCAL_CPUS),
    );
    dev.local_cpus = fetch_first(
        root,
        log,
        fam,
        &[
            (list.as_str(), value::parse_cpulist),
            (mask.as_str(), value::parse_mask),
        ],
    );
    dev.legacy_irq = fetch_item(
        root,
        log,
        fam,
        &format!("{base}/{}", pci::IRQ),
        pci::parse_legacy_irq,
    )
    .flatten();
    if has(pci::DRIVER) {
        // No driver link simply means no driver is bound.
        dev.driver = root.link_basename(&format!("{dir}/{}", pci::DRIVER));
    }
    if has(pci::MSI_IRQS) {
        let pattern = format!("{base}/{}", pci::MSI_IRQS);
        let names = list_entries(root, log, fam, &pattern);
        match pci::parse_msi_irq_names(&names) {
            Ok(irqs) => dev.msi_irqs = irqs,
            Err(e) => log.item(
                &pattern,
                fam.item,
                fam.universe,
                GapReason::Unparsable(format!("{dir}/{}: {}", pci::MSI_IRQS, e.message)),
            ),
        }
    }
    if has(pci::NET) {
        dev.net = list_entries(root, log, fam, &format!("{base}/{}", pci::NET));
    }
    // virtio-pci puts the interface one level down: `<pci>/virtioN/net/eth0`.
    for child in sub.iter().filter(|n| is_virtio_child(n)) {
        let net = list_entries(root, log, fam, &format!("{base}/{child}/{}", pci::NET));
        dev.net.extend(net);
    }
    if has(pci::NVME) {
        dev.nvme = list_entries(root, log, fam, &format!("{base}/{}", pci::NVME));
    }
    dev
}

fn is_virtio_child(name: &str) -> bool {
    name.strip_prefix("virtio")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}
