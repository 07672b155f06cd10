//! Filling [`Machine::moderation`]: which knob each IRQ offers and its current setting.
//!
//! * IRQs with a per-IRQ soft-moderation file (a GSIM kernel) get [`Knob::Soft`]: where the
//!   kernel carries GSIM it is the finer mechanism (per-CPU, microsecond delays), so it wins over
//!   the device's own knob. Level-triggered IRQs are left out (GSIM refuses them).
//! * NIC queue IRQs (`Rx`/`TxRx` queues with an index) get [`Knob::NicQueue`] with the
//!   coalescing read through ethtool: the queue's own setting where the driver has per-queue
//!   coalescing, else the device-wide one (`per_queue: false`). Only for a live root: under a
//!   fixture each interface is one gap `ethtool:<dev>`, never a reading of this machine's NIC of
//!   the same name.
//! * NVMe I/O queue IRQs (`nvme0q3`) get [`Knob::NvmeController`] with feature 08h read once per
//!   controller; the vector is the queue id (nvme-pci gives I/O queue `q` MSI-X vector `q`).
//!   An unopenable `/dev/nvmeN` (fixtures, no privilege) is a gap `dev/nvmeN`.
//!
//! A driver without the knob (EOPNOTSUPP, NVMe Invalid Field) is no knob and no gap: the kernel
//! legitimately has nothing to offer there.

use super::ethtool_io::{CoalesceScope, EthtoolError, read_coalesce};
use super::nvme::{NvmeError, NvmeFailure, get_irq_coalescing};
use super::nvme_dev::is_controller_name;
use super::{ModerationIo, soft};
use crate::root::Root;
use irqpilot_core::moderation::knobs::{Knob, ModerationInventory, min_coalesce_usecs};
use irqpilot_core::{
    ApplyError, Gap, GapReason, Irq, IrqNum, Machine, NamingScheme, QueueKind, Trigger,
};
use std::collections::BTreeMap;

/// The bound driver of the PCI device behind `irq`.
fn driver_of(machine: &Machine, irq: IrqNum) -> Option<&str> {
    let addr = machine.irqs.get(&irq)?.device.as_ref()?;
    machine.devices.get(addr)?.driver.as_deref()
}

/// The interface behind a NIC queue IRQ, when it can be told.
pub fn netdev_of(machine: &Machine, irq: &Irq) -> Option<String> {
    let q = irq.queue.as_ref()?;
    let dev_net = irq
        .device
        .as_ref()
        .and_then(|a| machine.devices.get(a))
        .map(|d| d.net.as_slice())
        .unwrap_or_default();
    if machine.devices.values().any(|d| d.net.contains(&q.owner)) {
        return Some(q.owner.clone());
    }
    match q.scheme {
        // The owner in the vector name is the interface.
        NamingScheme::Netdev | NamingScheme::Ice | NamingScheme::I40e | NamingScheme::Ena => {
            Some(q.owner.clone())
        }
        // `virtio2`, a PCI address: the function's one interface.
        NamingScheme::Virtio | NamingScheme::Mlx5 => match dev_net {
            [one] => Some(one.clone()),
            _ => None,
        },
        NamingScheme::Nvme => None,
    }
}

/// What a knob read failure means for the inventory: `None` when the device simply lacks the
/// knob, else the gap reason.
fn gap_reason(e: &ApplyError, message: String) -> Option<GapReason> {
    match e {
        ApplyError::Unsupported => None,
        ApplyError::Vanished => Some(GapReason::Missing),
        ApplyError::PermissionDenied => Some(GapReason::PermissionDenied),
        _ => Some(GapReason::Unparsable(message)),
    }
}

fn ethtool_gap(device: &str, e: &EthtoolError) -> Option<Gap> {
    gap_reason(&e.apply_error(), e.to_string()).map(|reason| Gap {
        path: format!("ethtool:{device}"),
        reason,
    })
}

fn nvme_gap(controller: &str, e: &NvmeError) -> Option<Gap> {
    let reason = match &e.failure {
        // No device node: a fixture root, or the controller went away.
        NvmeFailure::Os(os) if os.raw_os_error() == Some(libc::ENOENT) => Some(GapReason::Missing),
        _ => gap_reason(&e.apply_error(), e.to_string()),
    };
    reason.map(|reason| Gap {
        path: format!("dev/{controller}"),
        reason,
    })
}

/// Reads the moderation inventory of `machine` (whose IRQs and devices are already read) and
/// the gaps met on the way.
pub fn read_moderation(
    root: &Root,
    machine: &Machine,
    io: &mut ModerationIo,
) -> (ModerationInventory, Vec<Gap>) {
    let mut inv = ModerationInventory::default();
    let mut gaps = Vec::new();
    let layout = match soft::detect(root) {
        Ok(l) => l,
        Err(reason) => {
            gaps.push(Gap {
                path: soft::DIRECTORY.path.into(),
                reason,
            });
            None
        }
    };
    if layout.is_some() {
        match soft::read_soft(root) {
            Ok(s) => inv.soft = s,
            Err(reason) => gaps.push(Gap {
                path: soft::DIRECTORY.path.into(),
                reason,
            }),
        }
    }

    let mut nics: BTreeMap<String, Vec<(u32, IrqNum)>> = BTreeMap::new();
    let mut nvmes: BTreeMap<String, Vec<(u16, IrqNum)>> = BTreeMap::new();
    let mut bad_flags: Vec<String> = Vec::new();
    for irq in machine.irqs.values() {
        if let Some(layout) = &layout {
            let rel = soft::irq_flag_path(layout, irq.irq);
            match root.read_optional(&rel) {
                Ok(Some(text)) => match soft::parse_irq_flag(&text) {
                    Ok(enabled) if irq.trigger != Some(Trigger::Level) => {
                        inv.knobs.insert(irq.irq, Knob::Soft { enabled });
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => bad_flags.push(format!("{rel}:{}: {}", e.line, e.message)),
                },
                Ok(None) => {}
                Err(reason) => gaps.push(Gap { path: rel, reason }),
            }
        }
        let Some(q) = &irq.queue else { continue };
        match (q.scheme, q.kind, q.index) {
            (NamingScheme::Nvme, QueueKind::Io, Some(i)) if is_controller_name(&q.owner) => {
                if let Ok(vector) = u16::try_from(i) {
                    nvmes
                        .entry(q.owner.clone())
                        .or_default()
                        .push((vector, irq.irq));
                }
            }
            (NamingScheme::Nvme, ..) => {}
            (_, QueueKind::Rx | QueueKind::TxRx, Some(i)) => {
                if let Some(dev) = netdev_of(machine, irq) {
                    nics.entry(dev).or_default().push((i, irq.irq));
                }
            }
            _ => {}
        }
    }
    if let Some(first) = bad_flags.first() {
        let more = bad_flags.len() - 1;
        let msg = if more > 0 {
            format!("{first} (and {more} more like it)")
        } else {
            first.clone()
        };
        gaps.push(Gap {
            path: "proc/irq/*/soft_moderation".into(),
            reason: GapReason::Unparsable(msg),
        });
    }

    for (dev, queues) in &nics {
        let Some(eth) = io.ethtool.as_deref_mut() else {
            gaps.push(Gap {
                path: format!("ethtool:{dev}"),
                reason: GapReason::Missing,
            });
            continue;
        };
        // Once the driver has shown it has no per-queue coalescing, the device-wide answer
        // governs every queue.
        let mut device_wide = None;
        for &(queue, irq) in queues {
            let read = match device_wide {
                Some(c) => Ok((CoalesceScope::Device, c)),
                None => read_coalesce(eth, dev, Some(queue)),
            };
            match read {
                Ok((scope, c)) => {
                    if scope == CoalesceScope::Device {
                        device_wide = Some(c);
                    }
                    inv.knobs.entry(irq).or_insert(Knob::NicQueue {
                        device: dev.clone(),
                        queue,
                        per_queue: scope != CoalesceScope::Device,
                        rx_usecs: c.rx_coalesce_usecs,
                        rx_max_frames: c.rx_max_coalesced_frames,
                        adaptive_rx: c.use_adaptive_rx_coalesce != 0,
                        tx_usecs: c.tx_coalesce_usecs,
                        tx_max_frames: c.tx_max_coalesced_frames,
                        adaptive_tx: c.use_adaptive_tx_coalesce != 0,
                        min_usecs: min_coalesce_usecs(driver_of(machine, irq)),
                    });
                }
                Err(e) => {
                    tracing::debug!(device = dev.as_str(), queue, error = %e, "no coalescing knob");
                    if e.is_unsupported() {
                        // No coalescing at all: the other queues would say the same.
                        break;
                    }
                    gaps.extend(ethtool_gap(dev, &e));
                }
            }
        }
    }

    for (ctrl, vectors) in &nvmes {
        match get_irq_coalescing(io.nvme.as_mut(), ctrl) {
            Ok(c) => {
                for &(vector, irq) in vectors {
                    inv.knobs.entry(irq).or_insert(Knob::NvmeController {
                        controller: ctrl.clone(),
                        vector,
                        time_100us: c.time_100us,
                        threshold: c.threshold,
                    });
                }
            }
            Err(e) => {
                tracing::debug!(controller = ctrl.as_str(), error = %e, "no coalescing knob");
                gaps.extend(nvme_gap(ctrl, &e));
            }
        }
    }
    (inv, gaps)
}

/// Whether a gap (by its path) is one the moderation readers record: `ethtool:<dev>`,
/// `dev/nvmeN`, the soft-moderation files.
pub fn is_moderation_gap(path: &str) -> bool {
    path.starts_with("ethtool:")
        || path.starts_with("dev/nvme")
        || path.contains("soft_moderation")
        || path.contains("sw_moderation")
}

/// [`read_moderation`] into `machine`: sets [`Machine::moderation`] and adds the gaps (kept
/// sorted by path).
pub fn fill_moderation(root: &Root, machine: &mut Machine, io: &mut ModerationIo) {
    let (inv, gaps) = read_moderation(root, machine, io);
    machine.moderation = inv;
    machine.gaps.extend(gaps);
    machine.gaps.sort_by(|a, b| a.path.cmp(&b.path));
    machine.gaps.dedup();
}

#[cfg(test)]
mod tests;
