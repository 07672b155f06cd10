//! NIC coalescing through `SIOCETHTOOL`: the raw request behind [`EthtoolIo`] (a socket here, an
//! emulated driver in tests), and the typed get/set operations on top of it. Channel counts
//! ([`crate::channels`]) go through the same trait: one `SIOCETHTOOL` path.
//!
//! `ETHTOOL_GCOALESCE` and the per-queue get need no privilege; every set needs `CAP_NET_ADMIN`
//! (`net/ethtool/ioctl.c`, `dev_ethtool()`), so a non-root set fails with EPERM.

use super::errno_apply_error;
use super::ethtool::{
    COALESCE_LEN, ETHTOOL_GCOALESCE, ETHTOOL_PERQUEUE, ETHTOOL_SCOALESCE, EthtoolCoalesce,
    IFNAMSIZ, PerQueueCoalesce, QUEUE_MASK_WORDS, QueueMask,
};
use irqpilot_core::ApplyError;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// One `SIOCETHTOOL` request. Implementations: [`SocketEthtool`] (the kernel) and
/// [`super::fake::FakeEthtool`] (an emulated driver for tests).
pub trait EthtoolIo: std::fmt::Debug {
    /// Runs the ethtool command held in `data` (its first word is the command) on interface
    /// `ifname`; the kernel reads and writes `data` in place.
    fn ethtool(&mut self, ifname: &str, data: &mut [u8]) -> io::Result<()>;
}

/// The kernel's ethtool ioctl on an `AF_INET`/`SOCK_DGRAM` socket.
#[derive(Debug)]
pub struct SocketEthtool {
    fd: OwnedFd,
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with constant arguments; no memory is passed.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl SocketEthtool {
    /// A socket in this process's network namespace.
    pub fn open() -> io::Result<SocketEthtool> {
        Ok(SocketEthtool { fd: socket()? })
    }

    /// A socket in the network namespace at `netns` (e.g. `/run/netns/NAME`): interface names
    /// are looked up in the namespace the socket was created in. The namespace is entered by a
    /// short-lived thread of its own, so the caller's threads never change namespace.
    pub fn open_in_netns(netns: &Path) -> io::Result<SocketEthtool> {
        let ns = std::fs::File::open(netns)?;
        let handle = std::thread::spawn(move || -> io::Result<OwnedFd> {
            // SAFETY: `ns` is an open file for the whole call; setns(2) changes only this
            // thread's namespace, and the thread ends right after creating the socket.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            socket()
        });
        let fd = handle
            .join()
            .map_err(|_| io::Error::other("netns thread panicked"))??;
        Ok(SocketEthtool { fd })
    }
}

/// How many bytes the kernel reads or writes through `ifr_data` for the command in `data`, for
/// the commands this crate sends; `None` for any other command.
pub(crate) fn request_len(data: &[u8]) -> Option<usize> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(data.get(at..at + 4)?.try_into().ok()?))
    };
    match word(0)? {
        ETHTOOL_GCOALESCE | ETHTOOL_SCOALESCE => Some(COALESCE_LEN),
        crate::channels::ETHTOOL_GCHANNELS | crate::channels::ETHTOOL_SCHANNELS => {
            Some(crate::channels::CHANNELS_LEN)
        }
        ETHTOOL_PERQUEUE => {
            if !matches!(word(4)?, ETHTOOL_GCOALESCE | ETHTOOL_SCOALESCE) {
                return None;
            }
            let mut queues = 0usize;
            for i in 0..QUEUE_MASK_WORDS {
                queues += word(8 + 4 * i)?.count_ones() as usize;
            }
            Some(PerQueueCoalesce::len_for(queues))
        }
        _ => None,
    }
}

/// Whether `name` can name an interface: 1-15 bytes, no NUL, `/` or whitespace (the kernel's
/// `dev_valid_name()` also refuses `.` and `..`).
pub fn is_interface_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() < IFNAMSIZ
        && name != "."
        && name != ".."
        && !b
            .iter()
            .any(|&c| c == 0 || c == b'/' || c.is_ascii_whitespace())
}

/// `ifr_name`: a NUL-terminated interface name.
fn ifr_name(ifname: &str) -> io::Result<[libc::c_char; IFNAMSIZ]> {
    let b = ifname.as_bytes();
    if !is_interface_name(ifname) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    let mut name = [0 as libc::c_char; IFNAMSIZ];
    for (d, s) in name.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok(name)
}

impl EthtoolIo for SocketEthtool {
    fn ethtool(&mut self, ifname: &str, data: &mut [u8]) -> io::Result<()> {
        let Some(len) = request_len(data) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not an ethtool coalescing or channels command",
            ));
        };
        if data.len() < len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "ethtool buffer of {} bytes, command needs {len}",
                    data.len()
                ),
            ));
        }
        // SAFETY: ifreq is plain old data (a name array and a union of PODs and a pointer); the
        // all-zero pattern is a valid value.
        let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
        ifr.ifr_name = ifr_name(ifname)?;
        ifr.ifr_ifru.ifru_data = data.as_mut_ptr().cast();
        // SAFETY: `ifr` is a valid ifreq whose ifru_data points to `data`, which stays borrowed
        // mutably for the call and holds at least `len` bytes, the most the kernel reads or
        // writes for this command (checked above). The kernel keeps no pointer after returning.
        let rc = unsafe {
            libc::ioctl(
                self.fd.as_raw_fd(),
                libc::SIOCETHTOOL as _,
                &mut ifr as *mut libc::ifreq,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Which coalescing setting an operation addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CoalesceScope {
    /// The device-wide setting (`ETHTOOL_GCOALESCE`/`ETHTOOL_SCOALESCE`).
    Device,
    /// One queue's setting (`ETHTOOL_PERQUEUE`).
    Queue(u32),
}

impl std::fmt::Display for CoalesceScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CoalesceScope::Device => f.write_str("device-wide"),
            CoalesceScope::Queue(q) => write!(f, "queue {q}"),
        }
    }
}

/// An ethtool request the kernel (or driver) refused, naming the interface and the request.
#[derive(Debug, thiserror::Error)]
#[error("{device}: {op} ({scope}): {source}")]
pub struct EthtoolError {
    /// Interface.
    pub device: String,
    /// `ETHTOOL_GCOALESCE`, `ETHTOOL_SCOALESCE`, `ETHTOOL_PERQUEUE/GCOALESCE`, ...
    pub op: &'static str,
    /// Which setting.
    pub scope: CoalesceScope,
    /// The OS error.
    #[source]
    pub source: io::Error,
}

impl EthtoolError {
    /// Whether the driver lacks the operation (EOPNOTSUPP).
    pub fn is_unsupported(&self) -> bool {
        self.source.raw_os_error() == Some(libc::EOPNOTSUPP)
    }

    /// The refusal as the variant callers branch on.
    pub fn apply_error(&self) -> ApplyError {
        errno_apply_error(&self.source, &self.to_string())
    }
}

fn op_name(scope: CoalesceScope, set: bool) -> &'static str {
    match (scope, set) {
        (CoalesceScope::Device, false) => "ETHTOOL_GCOALESCE",
        (CoalesceScope::Device, true) => "ETHTOOL_SCOALESCE",
        (CoalesceScope::Queue(_), false) => "ETHTOOL_PERQUEUE/GCOALESCE",
        (CoalesceScope::Queue(_), true) => "ETHTOOL_PERQUEUE/SCOALESCE",
    }
}

fn malformed(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

fn per_queue(sub_command: u32, q: u32, entry: EthtoolCoalesce) -> io::Result<Vec<u8>> {
    let mask = QueueMask::of(&[q]).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    Ok(PerQueueCoalesce {
        sub_command,
        mask,
        entries: vec![entry],
    }
    .encode())
}

/// Reads one coalescing setting.
pub fn get_coalesce(
    io: &mut dyn EthtoolIo,
    device: &str,
    scope: CoalesceScope,
) -> Result<EthtoolCoalesce, EthtoolError> {
    let run = |io: &mut dyn EthtoolIo| -> io::Result<EthtoolCoalesce> {
        match scope {
            CoalesceScope::Device => {
                let mut buf = EthtoolCoalesce::default().encode(ETHTOOL_GCOALESCE);
                io.ethtool(device, &mut buf)?;
                Ok(EthtoolCoalesce::decode(&buf).map_err(malformed)?.1)
            }
            CoalesceScope::Queue(q) => {
                let mut buf = per_queue(ETHTOOL_GCOALESCE, q, EthtoolCoalesce::default())?;
                io.ethtool(device, &mut buf)?;
                let (_, op) = PerQueueCoalesce::decode(&buf).map_err(malformed)?;
                op.entries
                    .first()
                    .copied()
                    .ok_or_else(|| malformed("per-queue reply without an entry"))
            }
        }
    };
    run(io).map_err(|source| EthtoolError {
        device: device.to_string(),
        op: op_name(scope, false),
        scope,
        source,
    })
}

/// Writes one coalescing setting (the whole structure: read it first and change only what you
/// mean to, see [`EthtoolCoalesce::with`]).
pub fn set_coalesce(
    io: &mut dyn EthtoolIo,
    device: &str,
    scope: CoalesceScope,
    value: &EthtoolCoalesce,
) -> Result<(), EthtoolError> {
    let run = |io: &mut dyn EthtoolIo| -> io::Result<()> {
        match scope {
            CoalesceScope::Device => {
                let mut buf = value.encode(ETHTOOL_SCOALESCE);
                io.ethtool(device, &mut buf)
            }
            CoalesceScope::Queue(q) => {
                let mut buf = per_queue(ETHTOOL_SCOALESCE, q, *value)?;
                io.ethtool(device, &mut buf)
            }
        }
    };
    run(io).map_err(|source| EthtoolError {
        device: device.to_string(),
        op: op_name(scope, true),
        scope,
        source,
    })
}

/// Reads the setting that governs `queue` (or the device when `None`): the queue's own when the
/// driver implements per-queue coalescing, else the device-wide one (EOPNOTSUPP from the
/// per-queue request falls back). Returns the scope that answered.
pub fn read_coalesce(
    io: &mut dyn EthtoolIo,
    device: &str,
    queue: Option<u32>,
) -> Result<(CoalesceScope, EthtoolCoalesce), EthtoolError> {
    if let Some(q) = queue {
        match get_coalesce(io, device, CoalesceScope::Queue(q)) {
            Ok(c) => return Ok((CoalesceScope::Queue(q), c)),
            Err(e) if e.is_unsupported() => {
                tracing::debug!(
                    device,
                    queue = q,
                    "no per-queue coalescing; using device-wide"
                );
            }
            Err(e) => return Err(e),
        }
    }
    let c = get_coalesce(io, device, CoalesceScope::Device)?;
    Ok((CoalesceScope::Device, c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lengths_bound_the_kernel_copy() {
        let g = EthtoolCoalesce::default().encode(ETHTOOL_GCOALESCE);
        assert_eq!(request_len(&g), Some(92));
        let pq = per_queue(ETHTOOL_GCOALESCE, 5, EthtoolCoalesce::default()).unwrap();
        assert_eq!(request_len(&pq), Some(520 + 92));
        let mut other = g;
        other[0] = 0x01; // ETHTOOL_GSET: not ours.
        assert_eq!(request_len(&other), None);
        assert_eq!(request_len(&[0x4b, 0, 0]), None);
        let ch = crate::channels::EthtoolChannels {
            cmd: crate::channels::ETHTOOL_GCHANNELS,
            ..Default::default()
        };
        assert_eq!(request_len(&ch.to_bytes()), Some(36));
        let mut bad_sub = pq.clone();
        bad_sub[4] = 0x3c; // ETHTOOL_GCHANNELS as a sub-command.
        assert_eq!(request_len(&bad_sub), None);
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(ifr_name("eth0").is_ok());
        assert!(ifr_name("a23456789012345").is_ok());
        for bad in ["", "a234567890123456", "a/b", "a\0b", "a b", ".."] {
            let e = ifr_name(bad).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn socket_refuses_foreign_commands_and_short_buffers() {
        let Ok(mut s) = SocketEthtool::open() else {
            eprintln!("skipped: no AF_INET socket here");
            return;
        };
        let mut other = [0u8; 92];
        other[0] = 0x01;
        let e = s.ethtool("lo", &mut other).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let mut short = [0u8; 91];
        short[0] = ETHTOOL_GCOALESCE as u8;
        let e = s.ethtool("lo", &mut short).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
