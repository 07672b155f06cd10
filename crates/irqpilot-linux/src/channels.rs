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
//! Only a live root (`/`) has interfaces to talk to: on a fixture tree a channel change is
//! planned but never applied, and this machine's interfaces are never touched by tests.

use std::io;

/// `SIOCETHTOOL` (include/uapi/linux/sockios.h).
pub const SIOCETHTOOL: libc::c_ulong = 0x8946;
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

/// `struct ifreq` with the `ifr_data` member of its union (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReqData {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

fn ifreq(ifname: &str, data: *mut libc::c_void) -> io::Result<IfReqData> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut name = [0 as libc::c_char; libc::IFNAMSIZ];
    for (d, s) in name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(IfReqData {
        name,
        data,
        _pad: [0; 16],
    })
}

/// Runs one ethtool command on `ifname`, filling `ch` in place.
fn ethtool(ifname: &str, ch: &mut EthtoolChannels) -> io::Result<()> {
    let mut req = ifreq(ifname, (ch as *mut EthtoolChannels).cast())?;
    // SAFETY: plain socket(2); the descriptor is closed below on every path.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `req` is a valid ifreq whose data pointer refers to `ch`, a live
    // `struct ethtool_channels`, for the whole call; the kernel reads and writes only those.
    let rc = unsafe { libc::ioctl(fd, SIOCETHTOOL as _, &mut req as *mut IfReqData) };
    let err = io::Error::last_os_error();
    // SAFETY: `fd` is ours and open.
    unsafe { libc::close(fd) };
    if rc < 0 { Err(err) } else { Ok(()) }
}

/// `ethtool -l <ifname>`.
pub fn get_channels(ifname: &str) -> io::Result<EthtoolChannels> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool(ifname, &mut ch)?;
    Ok(ch)
}

/// `ethtool -L <ifname> [combined N] [rx N] [tx N]`: unset counts keep their current value.
/// Returns the counts before.
pub fn set_channels(
    ifname: &str,
    combined: Option<u32>,
    rx: Option<u32>,
    tx: Option<u32>,
) -> io::Result<EthtoolChannels> {
    let old = get_channels(ifname)?;
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_SCHANNELS,
        combined_count: combined.unwrap_or(old.combined_count),
        rx_count: rx.unwrap_or(old.rx_count),
        tx_count: tx.unwrap_or(old.tx_count),
        other_count: old.other_count,
        ..old
    };
    ethtool(ifname, &mut ch)?;
    Ok(old)
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

/// The Linux platform's `SetChannels`: on a live root, `ETHTOOL_SCHANNELS` with the old
/// counts kept for the journal; under a fixture root there is no interface to talk to, so the
/// change is reported as planned and not applied.
pub fn apply_channels(
    root: &crate::Root,
    device: &str,
    combined: Option<u32>,
    rx: Option<u32>,
    tx: Option<u32>,
) -> (Option<String>, Result<bool, irqpilot_core::ApplyError>) {
    if !crate::journal::is_live(root) {
        return (
            None,
            Err(irqpilot_core::ApplyError::Other {
                message: format!(
                    "{device}: channel change planned, not applied: no live interface under \
                     the fixture root {}",
                    root.dir().display()
                ),
            }),
        );
    }
    let path = std::path::Path::new("ethtool").join(device);
    let old = match get_channels(device) {
        Ok(c) => c,
        Err(e) => return (None, Err(channel_error(&e, &path))),
    };
    let (combined, rx, tx) = fit_to_driver(&old, combined, rx, tx);
    let same = combined.is_none_or(|c| c == old.combined_count)
        && rx.is_none_or(|c| c == old.rx_count)
        && tx.is_none_or(|c| c == old.tx_count);
    if same {
        return (Some(old.counts_text()), Ok(false));
    }
    match set_channels(device, combined, rx, tx) {
        Ok(_) => (Some(old.counts_text()), Ok(true)),
        Err(e) => (Some(old.counts_text()), Err(channel_error(&e, &path))),
    }
}

/// The refusal behind a failed channels ioctl. EPERM here is the missing CAP_NET_ADMIN
/// (`dev_ethtool()` checks it for every set), not the kernel-managed IRQ it means on
/// `/proc/irq`; ENODEV is an interface that went away.
fn channel_error(e: &io::Error, path: &std::path::Path) -> irqpilot_core::ApplyError {
    match e.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => irqpilot_core::ApplyError::PermissionDenied,
        Some(libc::ENODEV) => irqpilot_core::ApplyError::Vanished,
        _ => crate::platform::apply_error(e, path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::path::Path;

    #[test]
    fn struct_layout_matches_the_kernel() {
        assert_eq!(size_of::<EthtoolChannels>(), 36);
        assert_eq!(offset_of!(EthtoolChannels, cmd), 0);
        assert_eq!(offset_of!(EthtoolChannels, max_combined), 16);
        assert_eq!(offset_of!(EthtoolChannels, rx_count), 20);
        assert_eq!(offset_of!(EthtoolChannels, combined_count), 32);
        assert_eq!(size_of::<IfReqData>(), size_of::<libc::ifreq>());
        assert_eq!(offset_of!(IfReqData, data), 16);
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
    fn a_refused_set_says_why() {
        use irqpilot_core::ApplyError;
        let err = |n| channel_error(&io::Error::from_raw_os_error(n), Path::new("ethtool/eth1"));
        // Without CAP_NET_ADMIN the kernel answers EPERM: not a managed IRQ.
        assert_eq!(err(libc::EPERM), ApplyError::PermissionDenied);
        assert_eq!(err(libc::ENODEV), ApplyError::Vanished);
        assert_eq!(err(libc::EINVAL), ApplyError::Invalid);
        assert_eq!(err(libc::EOPNOTSUPP), ApplyError::Unsupported);
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
        let (old, r) = apply_channels(&crate::Root::new(d.path()), "eth0", Some(2), None, None);
        assert_eq!(old, None);
        match r {
            Err(irqpilot_core::ApplyError::Other { message }) => {
                assert!(message.contains("planned, not applied"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_interface_names_are_refused_before_any_syscall() {
        for name in ["", "a-name-longer-than-15", "nul\0x"] {
            let e = ifreq(name, std::ptr::null_mut())
                .err()
                .map(|e| e.raw_os_error());
            assert_eq!(e, Some(Some(libc::EINVAL)), "{name:?}");
        }
    }
}
