//! Recognising device queues from IRQ action names.
//!
//! Drivers name their MSI-X vectors after the queue they serve. The patterns below are the ones
//! real drivers print (checked against the captures in `shared/corpus`); a name that matches none
//! stays unknown rather than being guessed at.
//!
//! | scheme | examples |
//! |---|---|
//! | mlx5 | `mlx5_comp7@pci:0000:3b:00.0`, `mlx5_async@pci:…`, `mlx5_pages_eq@pci:…` |
//! | ice / i40e | `ice-eth0-TxRx-3`, `i40e-enp195s0f3-TxRx-93`, `ice-0000:01:00.0:misc`, `i40e-0000:c3:00.3:fdir-TxRx-0` |
//! | netdev (ixgbe, igb, bnxt, ...) | `eth1-TxRx-0`, `eth0-rx-1`, `eth0-tx-1` |
//! | ena | `eth0-Tx-Rx-2`, `ena-mgmnt@pci:0000:00:05.0` |
//! | virtio | `virtio2-input.0`, `virtio2-output.0`, `virtio3-req.3`, `virtio0-config` |
//! | nvme | `nvme0q0` (admin), `nvme0q12` (I/O) |

use serde::{Deserialize, Serialize};

/// What a queue's vector carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueKind {
    /// Receive only.
    Rx,
    /// Transmit only.
    Tx,
    /// A combined receive/transmit channel (or an mlx5 completion EQ).
    TxRx,
    /// A block I/O completion queue (NVMe I/O queue, virtio-blk request queue).
    Io,
    /// An NVMe admin queue.
    Admin,
    /// Device control: misc/async/config/mailbox/flow-director vectors.
    Misc,
}

/// The naming convention that matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NamingScheme {
    /// Mellanox/NVIDIA mlx5.
    Mlx5,
    /// Intel ice.
    Ice,
    /// Intel i40e.
    I40e,
    /// `<netdev>-TxRx-N`, used by ixgbe, igb, bnxt and others.
    Netdev,
    /// Amazon ENA.
    Ena,
    /// virtio (net, blk, console, ...).
    Virtio,
    /// NVMe.
    Nvme,
}

/// A recognised device queue.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Queue {
    /// What the vector carries.
    pub kind: QueueKind,
    /// Queue index, where the name has one.
    pub index: Option<u32>,
    /// The owner named in the action: interface, `nvme0`, `virtio2`, or a PCI address.
    pub owner: String,
    /// Which convention matched.
    pub scheme: NamingScheme,
}

fn q(kind: QueueKind, index: Option<u32>, owner: &str, scheme: NamingScheme) -> Option<Queue> {
    Some(Queue {
        kind,
        index,
        owner: owner.to_string(),
        scheme,
    })
}

fn num(s: &str) -> Option<u32> {
    (!s.is_empty() && s.len() <= 9 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `<owner>-TxRx-N`, `<owner>-rx-N`, `<owner>-tx-N`, `<owner>-Tx-Rx-N` (ENA).
fn netdev_suffix(name: &str) -> Option<(&str, QueueKind, u32)> {
    let (head, idx) = name.rsplit_once('-')?;
    let idx = num(idx)?;
    for (suffix, kind) in [
        ("-Tx-Rx", QueueKind::TxRx),
        ("-TxRx", QueueKind::TxRx),
        ("-rx", QueueKind::Rx),
        ("-tx", QueueKind::Tx),
    ] {
        if let Some(owner) = head.strip_suffix(suffix) {
            if !owner.is_empty() {
                return Some((owner, kind, idx));
            }
        }
    }
    None
}

/// Recognises the queue behind one IRQ action name, or `None` if the name follows no known
/// convention.
pub fn recognise(name: &str) -> Option<Queue> {
    use NamingScheme as S;
    use QueueKind as K;
    let name = name.trim();
    if let Some(rest) = name.strip_prefix("mlx5_") {
        let (what, owner) = rest.split_once("@pci:").unwrap_or((rest, ""));
        if let Some(i) = what.strip_prefix("comp") {
            return q(K::TxRx, num(i), owner, S::Mlx5);
        }
        return q(K::Misc, None, owner, S::Mlx5);
    }
    for (prefix, scheme) in [("ice-", S::Ice), ("i40e-", S::I40e)] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if let Some((owner, kind, idx)) = netdev_suffix(rest) {
                // `ice-0000:ec:00.0:ctrl-TxRx-0`, `i40e-0000:c3:00.3:fdir-TxRx-0`: control VSIs.
                if let Some((pci, _)) = owner
                    .rsplit_once(':')
                    .filter(|(_, t)| *t == "ctrl" || *t == "fdir")
                {
                    return q(K::Misc, Some(idx), pci, scheme);
                }
                return q(kind, Some(idx), owner, scheme);
            }
            if let Some(owner) = rest.strip_suffix(":misc") {
                return q(K::Misc, None, owner, scheme);
            }
            return None;
        }
    }
    if let Some(owner) = name.strip_prefix("ena-mgmnt@pci:") {
        return q(K::Misc, None, owner, S::Ena);
    }
    if let Some(rest) = name.strip_prefix("virtio") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            if let Some(role) = rest[digits..].strip_prefix('-') {
                let owner = &name[..6 + digits];
                let (what, idx) = match role.split_once('.') {
                    Some((w, i)) => (w, num(i)),
                    None => (role, None),
                };
                let kind = match what {
                    "input" | "rx" => K::Rx,
                    "output" | "tx" => K::Tx,
                    "req" => K::Io,
                    "virtqueues" => K::TxRx,
                    _ => K::Misc,
                };
                return q(kind, idx, owner, S::Virtio);
            }
        }
    }
    if let Some(rest) = name.strip_prefix("nvme") {
        if let Some((ctrl, qi)) = rest.split_once('q') {
            if let (Some(_), Some(i)) = (num(ctrl), num(qi)) {
                let owner = &name[..4 + ctrl.len()];
                let kind = if i == 0 { K::Admin } else { K::Io };
                return q(kind, Some(i), owner, S::Nvme);
            }
        }
    }
    if let Some((owner, kind, idx)) = netdev_suffix(name) {
        let scheme = if name.contains("-Tx-Rx-") {
            S::Ena
        } else {
            S::Netdev
        };
        return q(kind, Some(idx), owner, scheme);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use NamingScheme as S;
    use QueueKind as K;

    fn check(name: &str, kind: K, index: Option<u32>, owner: &str, scheme: S) {
        let got = recognise(name).unwrap_or_else(|| panic!("{name} not recognised"));
        assert_eq!(
            got,
            Queue {
                kind,
                index,
                owner: owner.into(),
                scheme
            },
            "{name}"
        );
    }

    #[test]
    fn real_driver_names() {
        check(
            "mlx5_comp7@pci:0000:3b:00.0",
            K::TxRx,
            Some(7),
            "0000:3b:00.0",
            S::Mlx5,
        );
        check(
            "mlx5_async@pci:0002:00:00.0",
            K::Misc,
            None,
            "0002:00:00.0",
            S::Mlx5,
        );
        check(
            "mlx5_pages_eq@pci:0000:3b:00.0",
            K::Misc,
            None,
            "0000:3b:00.0",
            S::Mlx5,
        );
        check("ice-eno5np0-TxRx-12", K::TxRx, Some(12), "eno5np0", S::Ice);
        check(
            "ice-0000:01:00.0:misc",
            K::Misc,
            None,
            "0000:01:00.0",
            S::Ice,
        );
        check(
            "ice-0000:ec:00.0:ctrl-TxRx-0",
            K::Misc,
            Some(0),
            "0000:ec:00.0",
            S::Ice,
        );
        check(
            "i40e-enp195s0f3-TxRx-93",
            K::TxRx,
            Some(93),
            "enp195s0f3",
            S::I40e,
        );
        check(
            "i40e-0000:c3:00.3:fdir-TxRx-0",
            K::Misc,
            Some(0),
            "0000:c3:00.3",
            S::I40e,
        );
        check("eth1-TxRx-0", K::TxRx, Some(0), "eth1", S::Netdev);
        check("p7p1-rx-3", K::Rx, Some(3), "p7p1", S::Netdev);
        check("enp1s0f0np0-tx-2", K::Tx, Some(2), "enp1s0f0np0", S::Netdev);
        check("eth0-Tx-Rx-2", K::TxRx, Some(2), "eth0", S::Ena);
        check(
            "ena-mgmnt@pci:0000:00:05.0",
            K::Misc,
            None,
            "0000:00:05.0",
            S::Ena,
        );
        check("virtio2-input.0", K::Rx, Some(0), "virtio2", S::Virtio);
        check("virtio2-output.0", K::Tx, Some(0), "virtio2", S::Virtio);
        check("virtio3-req.3", K::Io, Some(3), "virtio3", S::Virtio);
        check("virtio0-config", K::Misc, None, "virtio0", S::Virtio);
        check("virtio3-rx", K::Rx, None, "virtio3", S::Virtio);
        check("nvme0q0", K::Admin, Some(0), "nvme0", S::Nvme);
        check("nvme1q40", K::Io, Some(40), "nvme1", S::Nvme);
    }

    #[test]
    fn unknown_stays_unknown() {
        for name in [
            "timer",
            "ahci[0000:00:1f.2]",
            "i8042",
            "megasas",
            "eth0",
            "nvme",
            "virtio",
            "ice-",
            "-TxRx-1",
            "iwlwifi:queue_3",
            "mpt2sas0-msix0",
            "em1-0",
            "PCIe PME",
        ] {
            assert_eq!(recognise(name), None, "{name}");
        }
    }
}
