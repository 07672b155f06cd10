//! [`DevNvme`]: NVMe admin commands through the controller's character device `/dev/nvmeN`
//! under a root. Under a fixture root the device node does not exist, so every command fails
//! with ENOENT and is reported per controller; nothing else on the machine is touched.

use super::nvme::{NVME_IOCTL_ADMIN_CMD, NvmeIo, PASSTHRU_LEN, PassthruCmd};
use crate::root::Root;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// NVMe controllers as `dev/<controller>` under a root.
#[derive(Clone, Debug)]
pub struct DevNvme {
    root: Root,
}

impl DevNvme {
    /// Controllers under `root` (`/` on a live machine).
    pub fn new(root: Root) -> DevNvme {
        DevNvme { root }
    }
}

/// `nvme` followed by digits: the names the kernel gives controller character devices. Anything
/// else is refused before a path is built from it.
pub fn is_controller_name(name: &str) -> bool {
    name.strip_prefix("nvme")
        .is_some_and(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The passthrough structure with the 8-byte alignment of its `__u64` members.
#[repr(C, align(8))]
struct Aligned([u8; PASSTHRU_LEN]);

impl NvmeIo for DevNvme {
    fn admin(&mut self, controller: &str, cmd: &mut [u8; PASSTHRU_LEN]) -> io::Result<u32> {
        if !is_controller_name(controller) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{controller:?} is not an NVMe controller name"),
            ));
        }
        if PassthruCmd::decode(cmd).has_buffers() {
            // Feature 08h/09h carry their value in CDW11; a data pointer here would let the
            // kernel write anywhere in this process.
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "admin commands with data or metadata buffers are not supported",
            ));
        }
        let path = self.root.join(&format!("dev/{controller}"));
        let dev = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path)?;
        let mut buf = Aligned(*cmd);
        // SAFETY: `buf` is a valid, 8-aligned struct nvme_passthru_cmd of exactly the size the
        // ioctl number encodes; it carries no user pointers (checked above), so the kernel reads
        // and writes only these 72 bytes, during the call. A file that is not an NVMe device
        // answers ENOTTY without touching the buffer.
        let rc = unsafe {
            libc::ioctl(
                dev.as_raw_fd(),
                NVME_IOCTL_ADMIN_CMD as _,
                buf.0.as_mut_ptr(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        *cmd = buf.0;
        Ok(rc as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_names() {
        assert!(is_controller_name("nvme0"));
        assert!(is_controller_name("nvme12"));
        for bad in [
            "nvme",
            "nvme0n1",
            "../nvme0",
            "nvme0/../x",
            "sda",
            "nvme1c2",
        ] {
            assert!(!is_controller_name(bad), "{bad}");
        }
    }

    #[test]
    fn fixture_roots_have_no_device() {
        let d = tempfile::tempdir().unwrap();
        let mut io = DevNvme::new(Root::new(d.path()));
        let mut cmd = PassthruCmd::get_features(8, 0).encode();
        let e = io.admin("nvme0", &mut cmd).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOENT));
        // A regular file where the device should be: the ioctl is refused with ENOTTY.
        std::fs::create_dir(d.path().join("dev")).unwrap();
        std::fs::write(d.path().join("dev/nvme0"), "").unwrap();
        let e = io.admin("nvme0", &mut cmd).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTTY));
        assert_eq!(PassthruCmd::decode(&cmd), PassthruCmd::get_features(8, 0));
    }

    #[test]
    fn refuses_bad_names_and_buffers() {
        let mut io = DevNvme::new(Root::new("/nonexistent"));
        let mut cmd = PassthruCmd::get_features(8, 0).encode();
        let e = io.admin("../etc", &mut cmd).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let mut with_data = PassthruCmd {
            addr: 0x1000,
            data_len: 4096,
            ..PassthruCmd::get_features(8, 0)
        }
        .encode();
        let e = io.admin("nvme0", &mut with_data).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
