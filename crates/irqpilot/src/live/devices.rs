//! Which device and queue an IRQ serves, in the words `status`, `top` and reports use:
//! `ens6f0np0 txrx56`, `nvme3 io12`. [`DeviceIndex`] is built once per inventory; an IRQ the
//! inventory does not know (it appeared later) is named from its action by the queue
//! recogniser.

use irqpilot_core::{Irq, IrqNum, Machine, NodeId, PciDevice, Queue, QueueKind, queue};
use std::collections::{BTreeMap, BTreeSet};

/// A device's name: its interface or controller, else the owner its queue names share
/// (`virtio1`), else its driver, else its address.
pub fn device_name(dev: &PciDevice, irqs: &[&Irq]) -> String {
    if let Some(n) = dev.net.first().or(dev.nvme.first()) {
        return n.clone();
    }
    let owners: BTreeSet<&str> = irqs
        .iter()
        .filter_map(|i| i.queue.as_ref().map(|q| q.owner.as_str()))
        .filter(|o| !o.is_empty() && *o != dev.addr.as_str())
        .collect();
    if owners.len() == 1 {
        if let Some(o) = owners.first() {
            return (*o).to_string();
        }
    }
    dev.label()
}

/// A queue kind's short name (`irq` for a vector that is no recognised queue).
pub fn kind_name(q: Option<&Queue>) -> &'static str {
    match q.map(|q| q.kind) {
        Some(QueueKind::TxRx) => "txrx",
        Some(QueueKind::Rx) => "rx",
        Some(QueueKind::Tx) => "tx",
        Some(QueueKind::Io) => "io",
        Some(QueueKind::Admin) => "admin",
        Some(QueueKind::Misc) => "misc",
        None => "irq",
    }
}

/// A queue as one label: kind and index (`rx0`, `txrx3`, `io7`), the kind alone without an
/// index (`misc`), empty for an IRQ that is no queue.
pub fn queue_label(q: Option<&Queue>) -> String {
    match q {
        None => String::new(),
        Some(q) => match q.index {
            Some(i) => format!("{}{i}", kind_name(Some(q))),
            None => kind_name(Some(q)).to_string(),
        },
    }
}

/// What an IRQ serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IrqLabel {
    /// Device name (empty for platform IRQs: timers, ACPI).
    pub device: String,
    /// Queue label (empty when the vector is no recognised queue).
    pub queue: String,
    /// NUMA node of the device.
    pub node: Option<NodeId>,
}

/// Labels of every IRQ of an inventory.
#[derive(Clone, Debug, Default)]
pub struct DeviceIndex {
    labels: BTreeMap<IrqNum, IrqLabel>,
}

impl DeviceIndex {
    /// Labels the IRQs of `machine`.
    pub fn new(machine: &Machine) -> DeviceIndex {
        let mut labels = BTreeMap::new();
        for dev in machine.devices.values() {
            let irqs: Vec<&Irq> = machine.device_irqs(dev).collect();
            let name = device_name(dev, &irqs);
            for i in irqs {
                labels.insert(
                    i.irq,
                    IrqLabel {
                        device: name.clone(),
                        queue: queue_label(i.queue.as_ref()),
                        node: dev.numa_node.or(i.node),
                    },
                );
            }
        }
        for i in machine.irqs.values() {
            labels.entry(i.irq).or_insert_with(|| match &i.queue {
                Some(q) => IrqLabel {
                    device: q.owner.clone(),
                    queue: queue_label(Some(q)),
                    node: i.node,
                },
                None => IrqLabel::default(),
            });
        }
        DeviceIndex { labels }
    }

    /// The label of `irq`; an IRQ the inventory does not know is labelled from `name`, its
    /// actions as `/proc/interrupts` shows them.
    pub fn label(&self, irq: IrqNum, name: &str) -> IrqLabel {
        if let Some(l) = self.labels.get(&irq) {
            return l.clone();
        }
        name.split(", ")
            .find_map(queue::recognise)
            .map(|q| IrqLabel {
                device: q.owner.clone(),
                queue: queue_label(Some(&q)),
                node: None,
            })
            .unwrap_or_default()
    }

    /// The label of `irq` if the inventory knows it (no allocation).
    pub fn known(&self, irq: IrqNum) -> Option<&IrqLabel> {
        self.labels.get(&irq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_irqs_are_named_from_their_actions() {
        let d = DeviceIndex::default();
        let l = d.label(IrqNum(90), "mlx5_comp7@pci:0000:3b:00.0");
        assert_eq!(l.queue, "txrx7");
        let l = d.label(IrqNum(91), "nvme2q5");
        assert_eq!((l.device.as_str(), l.queue.as_str()), ("nvme2", "io5"));
        assert_eq!(d.label(IrqNum(0), "timer"), IrqLabel::default());
    }
}
