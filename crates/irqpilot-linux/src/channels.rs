//! NIC queue counts through the ethtool channels ioctl (`ethtool -l` / `ethtool -L`).
//!
//! `ioctl(fd, SIOCETHTOOL, &ifreq)` on any `AF_INET`/`SOCK_DGRAM` socket, with `ifr_data`
//! pointing at a `struct ethtool_channels` (include/uapi/linux/ethtool.h):
//!
//! ```c
//! struct ethtool_channels {
//!     __u32 cmd;             /* ETHTOOL_GCHANNELS 0x3c / ETHTOOL_SCHANNELS 0x3d */
//!     __u32 max_rx, max_tx, max_other, max_combined;
//!     __u32 rx_count, tx_count, other_count, combined_count;
//! };
//! ```
//!
//! The request goes through the same [`EthtoolIo`] as NIC coalescing (one `SIOCETHTOOL` path:
//! a socket on a live root, an emulated driver in tests). Only a live root (`/`) has interfaces
//! to talk to: on a fixture tree a channel change is planned but never applied, and this
//! machine's interfaces are never touched by tests.

use crate::moderation::{EthtoolIo, errno_apply_error};
use irqpilot_core::ApplyError;
use std::io;
/// Get channel counts.
pub const ETHTOOL_GCHANNELS: u32 = 0x3c;
/// Set channel counts.
pub const ETHTOOL_SCHANNELS: u32 = 0x3d;

/// `struct ethtool_channels`: nine `__u32` in this order, 36 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthtoolChannels {
    /// `ETHTOOL_GCHANNELS` or `ETHTOOL_SCHANNELS`.
    pub cmd: u32,
    /// Maximum RX-only channels.
    pub max_rx: u32,
    /// Maximum TX-only channels.
    pub max_tx: u32,
    /// Maximum other (link, misc) channels.
    pub max_other: u32,
    /// Maximum combined channels.
    pub max_combined: u32,
    /// RX-only channels.
    pub rx_count: u32,
    /// TX-only channels.
    pub tx_count: u32,
    /// Other channels.
    pub other_count: u32,
    /// Combined channels.
    pub combined_count: u32,
}

impl EthtoolChannels {
    /// The bytes the kernel reads (native endianness).
    pub fn to_bytes(&self) -> [u8; 36] {
        let mut out = [0u8; 36];
        let fields = [
            self.cmd,
            self.max_rx,
            self.max_tx,
            self.max_other,
            self.max_combined,
            self.rx_count,
            self.tx_count,
            self.other_count,
            self.combined_count,
        ];
        for (chunk, v) in out.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        out
    }

    /// The counts as journal text: `combined=4 rx=0 tx=0 other=1`.
    pub fn counts_text(&self) -> String {
        format!(
            "combined={} rx={} tx={} other={}",
            self.combined_count, self.rx_count, self.tx_count, self.other_count
        )
    }

    /// Parses [`EthtoolChannels::counts_text`] back into (combined, rx, tx, other).
    pub fn parse_counts(text: &str) -> Option<(u32, u32, u32, u32)> {
        let mut v = [None; 4];
        for word in text.split_whitespace() {
            let (k, n) = word.split_once('=')?;
            let n: u32 = n.parse().ok()?;
            let slot = match k {
                "combined" => 0,
                "rx" => 1,
                "tx" => 2,
                "other" => 3,
                _ => return None,
            };
            v[slot] = Some(n);
        }
        Some((v[0]?, v[1]?, v[2]?, v[3]?))
    }
}

/// The structure's size, for the request-length check of [`crate::moderation::EthtoolIo`]
/// implementations.
pub const CHANNELS_LEN: usize = 36;

impl EthtoolChannels {
    /// Decodes the first 36 bytes of `data` (native endianness).
    pub fn from_bytes(data: &[u8]) -> Option<EthtoolChannels> {
        let w = |i: usize| -> Option<u32> {
            Some(u32::from_ne_bytes(
                data.get(4 * i..4 * i + 4)?.try_into().ok()?,
            ))
        };
        Some(EthtoolChannels {
            cmd: w(0)?,
            max_rx: w(1)?,
            max_tx: w(2)?,
            max_other: w(3)?,
            max_combined: w(4)?,
            rx_count: w(5)?,
            tx_count: w(6)?,
            other_count: w(7)?,
            combined_count: w(8)?,
        })
    }
}

/// Runs one channels command on `ifname` through `io`, filling `ch` in place.
fn ethtool(io: &mut dyn EthtoolIo, ifname: &str, ch: &mut EthtoolChannels) -> io::Result<()> {
    let mut buf = ch.to_bytes();
    io.ethtool(ifname, &mut buf)?;
    *ch = EthtoolChannels::from_bytes(&buf)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short ethtool reply"))?;
    Ok(())
}

/// `ethtool -l <ifname>`.
pub fn get_channels(io: &mut dyn EthtoolIo, ifname: &str) -> io::Result<EthtoolChannels> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool(io, ifname, &mut ch)?;
    Ok(ch)
}

/// `ethtool -L <ifname> [combined N] [rx N] [tx N]` after reading the counts (`old`): unset
/// counts keep their value.
fn set_channels(
    io: &mut dyn EthtoolIo,
    ifname: &str,
    old: &EthtoolChannels,
    combined: Option<u32>,
    rx: Option<u32>,
    tx: Option<u32>,
) -> io::Result<()> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_SCHANNELS,
        combined_count: combined.unwrap_or(old.combined_count),
        rx_count: rx.unwrap_or(old.rx_count),
        tx_count: tx.unwrap_or(old.tx_count),
        other_count: old.other_count,
        ..*old
    };
    ethtool(io, ifname, &mut ch)
}

/// The counts to ask `ifname`'s driver for, in the kinds of channel it has (`old`, its
/// `ethtool -l`). A NIC whose queues are separate RX and TX IRQs need not have RX-only and
/// TX-only channels: virtio_net names its IRQs `input.N` / `output.N` but offers only combined
/// channels, and refuses an RX or TX count with EINVAL. There, a cut asked as RX/TX is a
/// combined count; the converse holds for drivers with RX/TX channels only.
pub fn fit_to_driver(
    old: &EthtoolChannels,
    combined: Option<u32>,
    rx: Option<u32>,
    tx: Option<u32>,
) -> (Option<u32>, Option<u32>, Option<u32>) {
    let only_combined = old.max_combined > 0 && old.max_rx == 0 && old.max_tx == 0;
    let no_combined = old.max_combined == 0 && (old.max_rx > 0 || old.max_tx > 0);
    match (combined, rx.max(tx)) {
        (None, Some(n)) if only_combined => (Some(n), None, None),
        (Some(n), None) if no_combined => (
            None,
            (old.max_rx > 0).then_some(n),
            (old.max_tx > 0).then_some(n),
        ),
        _ => (combined, rx, tx),
    }
}

/// The Linux platform's `SetChannels`: `ETHTOOL_SCHANNELS` through `io` with the old counts
/// kept for the journal, then `ETHTOOL_GCHANNELS` again to check the driver kept the new
/// counts. `io` is `None` where the root has no live interfaces (a fixture or an exported
/// tree): the change is reported as planned and not applied.
pub fn apply_channels(
    root: &crate::Root,
    io: Option<&mut (dyn EthtoolIo + Send + 'static)>,
    device: &str,
    combined: Option<u32>,
    rx: Option<u32>,
    tx: Option<u32>,
) -> (Option<String>, Result<bool, ApplyError>) {
    let Some(io) = io else {
        return (
            None,
            Err(ApplyError::Other {
                message: format!(
                    "{device}: channel change planned, not applied: no live interface under \
                     the root {}",
                    root.dir().display()
                ),
            }),
        );
    };
    let io: &mut dyn EthtoolIo = io;
    // EPERM from ethtool means "no CAP_NET_ADMIN", not a kernel-managed IRQ: the ethtool
    // mapping, not the affinity one.
    let refusal = |e: &io::Error| errno_apply_error(e, &format!("{device}: ethtool channels: {e}"));
    let old = match get_channels(io, device) {
        Ok(c) => c,
        Err(e) => return (None, Err(refusal(&e))),
    };
    let old_text = Some(old.counts_text());
    let (combined, rx, tx) = fit_to_driver(&old, combined, rx, tx);
    let held = |c: &EthtoolChannels| {
        combined.is_none_or(|n| n == c.combined_count)
            && rx.is_none_or(|n| n == c.rx_count)
            && tx.is_none_or(|n| n == c.tx_count)
    };
    if held(&old) {
        return (old_text, Ok(false));
    }
    if let Err(e) = set_channels(io, device, &old, combined, rx, tx) {
        return (old_text, Err(refusal(&e)));
    }
    // A write counts only when a read-back shows it held.
    match get_channels(io, device) {
        Ok(now) if held(&now) => (old_text, Ok(true)),
        Ok(now) => (
            old_text,
            Err(ApplyError::NotTaken {
                readback: now.counts_text(),
            }),
        ),
        Err(e) => (old_text, Err(refusal(&e))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn struct_layout_matches_the_kernel() {
        assert_eq!(size_of::<EthtoolChannels>(), 36);
        assert_eq!(offset_of!(EthtoolChannels, cmd), 0);
        assert_eq!(offset_of!(EthtoolChannels, max_combined), 16);
        assert_eq!(offset_of!(EthtoolChannels, rx_count), 20);
        assert_eq!(offset_of!(EthtoolChannels, combined_count), 32);
        assert_eq!(size_of::<EthtoolChannels>(), CHANNELS_LEN);
    }

    #[test]
    fn a_cut_is_asked_in_the_channel_kinds_the_driver_has() {
        // virtio_net: rx/tx IRQs, combined channels only (ethtool -l: Combined 4, RX/TX n/a).
        let virtio = EthtoolChannels {
            max_combined: 4,
            combined_count: 4,
            ..Default::default()
        };
        assert_eq!(
            fit_to_driver(&virtio, None, Some(2), Some(2)),
            (Some(2), None, None)
        );
        // Restoring the journaled counts (combined=4 rx=0 tx=0) stays as recorded.
        assert_eq!(
            fit_to_driver(&virtio, Some(4), Some(0), Some(0)),
            (Some(4), Some(0), Some(0))
        );
        // A driver with RX/TX channels only gets RX/TX counts for a combined cut.
        let split = EthtoolChannels {
            max_rx: 16,
            max_tx: 16,
            rx_count: 16,
            tx_count: 16,
            ..Default::default()
        };
        assert_eq!(
            fit_to_driver(&split, Some(4), None, None),
            (None, Some(4), Some(4))
        );
        // Drivers with both kinds get what was asked.
        let both = EthtoolChannels {
            max_rx: 8,
            max_tx: 8,
            max_combined: 8,
            ..Default::default()
        };
        assert_eq!(
            fit_to_driver(&both, None, Some(2), Some(2)),
            (None, Some(2), Some(2))
        );
    }

    #[test]
    fn byte_encoding() {
        let ch = EthtoolChannels {
            cmd: ETHTOOL_SCHANNELS,
            max_rx: 1,
            max_tx: 2,
            max_other: 3,
            max_combined: 64,
            rx_count: 5,
            tx_count: 6,
            other_count: 1,
            combined_count: 4,
        };
        let b = ch.to_bytes();
        let word =
            |i: usize| u32::from_ne_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        assert_eq!(word(0), 0x3d);
        assert_eq!(word(4), 64);
        assert_eq!(word(8), 4);
        // The in-memory struct is exactly these bytes (what the ioctl hands the kernel).
        // SAFETY: EthtoolChannels is repr(C), 36 bytes of u32 without padding.
        let raw: [u8; 36] = unsafe { std::mem::transmute(ch) };
        assert_eq!(raw, b);
        assert_eq!(EthtoolChannels::from_bytes(&b), Some(ch));
        assert_eq!(EthtoolChannels::from_bytes(&b[..35]), None);
    }

    #[test]
    fn counts_text_round_trips() {
        let ch = EthtoolChannels {
            combined_count: 8,
            other_count: 1,
            ..Default::default()
        };
        assert_eq!(ch.counts_text(), "combined=8 rx=0 tx=0 other=1");
        assert_eq!(
            EthtoolChannels::parse_counts(&ch.counts_text()),
            Some((8, 0, 0, 1))
        );
        assert_eq!(EthtoolChannels::parse_counts("combined=8"), None);
    }

    #[test]
    fn fixture_roots_never_reach_an_interface() {
        let d = tempfile::tempdir().unwrap();
        let (old, r) = apply_channels(
            &crate::Root::new(d.path()),
            None,
            "eth0",
            Some(2),
            None,
            None,
        );
        assert_eq!(old, None);
        match r {
            Err(ApplyError::Other { message }) => {
                assert!(message.contains("planned, not applied"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn channels_go_through_the_ethtool_io_and_are_read_back() {
        use crate::moderation::fake::{FakeEthtool, FakeNic};
        let root = crate::Root::new("/nonexistent");
        let nic = |fail_sets| FakeNic {
            channels: Some(EthtoolChannels {
                max_combined: 64,
                combined_count: 64,
                other_count: 1,
                ..Default::default()
            }),
            fail_sets,
            ..Default::default()
        };
        let mut fake = FakeEthtool::new([
            ("eth0".to_string(), nic(None)),
            ("eth1".to_string(), nic(Some(libc::EOPNOTSUPP))),
        ]);
        let mut io = fake.clone();
        let (old, r) = apply_channels(&root, Some(&mut io), "eth0", Some(8), None, None);
        assert_eq!(old.as_deref(), Some("combined=64 rx=0 tx=0 other=1"));
        assert_eq!(r, Ok(true));
        assert_eq!(get_channels(&mut fake, "eth0").unwrap().combined_count, 8);
        // Already so: nothing written.
        let (_, r) = apply_channels(&root, Some(&mut io), "eth0", Some(8), None, None);
        assert_eq!(r, Ok(false));
        // A cut planned as RX/TX on a driver with combined channels only (virtio_net) is its
        // combined count.
        let (_, r) = apply_channels(&root, Some(&mut io), "eth0", None, Some(6), Some(6));
        assert_eq!(r, Ok(true));
        let now = get_channels(&mut fake, "eth0").unwrap();
        assert_eq!((now.combined_count, now.rx_count, now.tx_count), (6, 0, 0));
        let (_, r) = apply_channels(&root, Some(&mut io), "eth0", Some(8), None, None);
        assert_eq!(r, Ok(true));
        // Refused by the driver; a device that is not there.
        let (_, r) = apply_channels(&root, Some(&mut io), "eth1", Some(8), None, None);
        assert_eq!(r, Err(ApplyError::Unsupported));
        let (old, r) = apply_channels(&root, Some(&mut io), "eth9", Some(8), None, None);
        assert_eq!((old, r), (None, Err(ApplyError::Vanished)));
        // A driver that keeps a multiple of 4 queues: the read-back says so.
        fake.state().nics.get_mut("eth0").unwrap().channels_step = Some(4);
        let (_, r) = apply_channels(&root, Some(&mut io), "eth0", Some(6), None, None);
        assert_eq!(
            r,
            Err(ApplyError::NotTaken {
                readback: "combined=4 rx=0 tx=0 other=1".into()
            })
        );
    }
}
