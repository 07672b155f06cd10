//! Interrupt moderation on Linux: what each interrupt source offers, and the actuators that
//! change it.
//!
//! | knob | interface | module |
//! |---|---|---|
//! | NIC coalescing, per queue or device-wide | `SIOCETHTOOL`: `ETHTOOL_PERQUEUE` + `ETHTOOL_{G,S}COALESCE` | [`ethtool`], [`ethtool_io`] |
//! | NVMe Interrupt Coalescing (08h), Interrupt Vector Configuration (09h) | `NVME_IOCTL_ADMIN_CMD` Get/Set Features on `/dev/nvmeN` | [`nvme`], [`nvme_dev`] |
//! | the kernel's software moderation (GSIM), where present | `/proc/irq/soft_moderation[/]`, `/proc/irq/N/soft_moderation` | [`soft`] |
//!
//! [`read`] fills [`irqpilot_core::Machine::moderation`]; [`apply`] carries out the moderation
//! actions of a plan (old value first, write only what differs, read back); [`restore`] turns an
//! applied outcome back into the action that undoes it, for `irqpilot revert`. The ioctls go
//! through two small traits ([`EthtoolIo`], [`NvmeIo`]) so that tests run against emulated
//! drivers ([`fake`]) and a fixture root never reaches a real device: [`ModerationIo::for_root`]
//! attaches the ethtool socket only when the root is this machine's `/`.

pub mod apply;
pub mod ethtool;
pub mod ethtool_io;
pub mod fake;
pub mod nvme;
pub mod nvme_dev;
pub mod read;
pub mod restore;
pub mod soft;

pub use ethtool_io::{CoalesceScope, EthtoolError, EthtoolIo, SocketEthtool};
pub use nvme::{NvmeError, NvmeIo};
pub use nvme_dev::DevNvme;

use crate::root::Root;
pub(crate) use crate::root::write_once;
use irqpilot_core::ApplyError;
use std::io;

/// The devices moderation talks to: an ethtool channel (absent when the root is not this
/// machine, so that a fixture's `eth0` is never confused with the live one) and NVMe admin
/// commands.
#[derive(Debug)]
pub struct ModerationIo {
    /// `SIOCETHTOOL`; `None`: network interfaces are not reachable from this root.
    pub ethtool: Option<Box<dyn EthtoolIo + Send>>,
    /// NVMe admin passthrough.
    pub nvme: Box<dyn NvmeIo + Send>,
}

impl ModerationIo {
    /// The real devices for `root`: the ethtool socket only when `root` is `/` (a fixture or an
    /// exported simulator tree has no live interfaces), and `/dev/nvmeN` under `root` (absent
    /// under fixtures, so commands fail per controller).
    pub fn for_root(root: &Root) -> ModerationIo {
        let ethtool: Option<Box<dyn EthtoolIo + Send>> = if root.is_live() {
            match SocketEthtool::open() {
                Ok(s) => Some(Box::new(s)),
                Err(e) => {
                    tracing::warn!(error = %e, "no socket for ethtool: NIC coalescing unavailable");
                    None
                }
            }
        } else {
            None
        };
        ModerationIo {
            ethtool,
            nvme: Box::new(DevNvme::new(root.clone())),
        }
    }
}

/// The kernel's refusal behind an errno, for moderation knobs (ethtool, NVMe, GSIM files).
/// Unlike affinity writes, EPERM here means "not privileged" (`CAP_NET_ADMIN`,
/// `CAP_SYS_ADMIN`), and ENODEV means the device went away. `what` names the device or file.
pub fn errno_apply_error(e: &io::Error, what: &str) -> ApplyError {
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP | libc::ENOTTY) => ApplyError::Unsupported,
        Some(libc::EPERM | libc::EACCES) => ApplyError::PermissionDenied,
        Some(libc::EINVAL | libc::ERANGE) => ApplyError::Invalid,
        Some(libc::ENODEV | libc::ENOENT | libc::ENXIO) => ApplyError::Vanished,
        None if e.kind() == io::ErrorKind::InvalidInput => ApplyError::Invalid,
        _ => ApplyError::Other {
            message: what.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping_for_moderation_knobs() {
        let e = |n| errno_apply_error(&io::Error::from_raw_os_error(n), "eth1");
        assert_eq!(e(libc::EOPNOTSUPP), ApplyError::Unsupported);
        assert_eq!(e(libc::ENOTTY), ApplyError::Unsupported);
        assert_eq!(e(libc::EPERM), ApplyError::PermissionDenied);
        assert_eq!(e(libc::EACCES), ApplyError::PermissionDenied);
        assert_eq!(e(libc::EINVAL), ApplyError::Invalid);
        assert_eq!(e(libc::ERANGE), ApplyError::Invalid);
        assert_eq!(e(libc::ENODEV), ApplyError::Vanished);
        assert_eq!(e(libc::ENOENT), ApplyError::Vanished);
        assert_eq!(
            e(libc::EBUSY),
            ApplyError::Other {
                message: "eth1".into()
            }
        );
        let bad_input = io::Error::new(io::ErrorKind::InvalidInput, "x");
        assert_eq!(errno_apply_error(&bad_input, "x"), ApplyError::Invalid);
    }

    #[test]
    fn fixture_roots_get_no_ethtool() {
        let d = tempfile::tempdir().unwrap();
        let io = ModerationIo::for_root(&Root::new(d.path()));
        assert!(io.ethtool.is_none());
    }
}
