//! io_uring `IORING_OP_MSG_RING` (Linux 5.18+): each side owns a ring; sending posts a
//! completion carrying the token (`user_data`) straight into the peer's completion queue. The
//! sender's own completion is suppressed with `IOSQE_CQE_SKIP_SUCCESS` (5.17+), so a side's
//! queue only ever holds the peer's messages (or the sender's own errors, recognised by a
//! sentinel `user_data`).
//!
//! Two receivers: `msg-ring` waits in `io_uring_enter(GETEVENTS)`, `msg-ring-poll` busy-polls
//! the completion queue in user memory (no system call to receive).

use super::{Endpoint, Unavailable};
use crate::error::{Op, WireError};
use io_uring::{IoUring, opcode, register::Probe, squeue, types};
use rustix::io::Errno;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// `user_data` of our own MSG_RING submissions: a completion with it on our ring is an error
/// report about a send, never a message.
const SEND_SENTINEL: u64 = u64::MAX;
const RING_ENTRIES: u32 = 8;

/// One side: its ring, and a duplicate of the peer ring's fd (kept open as long as we may send).
pub(crate) struct RingEnd {
    ring: IoUring,
    peer: OwnedFd,
    poll: bool,
}

fn errno_of(e: &std::io::Error) -> Errno {
    crate::error::errno(e.raw_os_error().unwrap_or(libc::EIO))
}

impl Endpoint for RingEnd {
    #[inline]
    fn send(&mut self, token: u64) -> Result<(), WireError> {
        let entry = opcode::MsgRingData::new(types::Fd(self.peer.as_raw_fd()), 0, token, None)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(SEND_SENTINEL);
        // SAFETY: a MSG_RING entry references no user buffer, so nothing has to outlive it.
        let pushed = unsafe { self.ring.submission().push(&entry) };
        if pushed.is_err() {
            return Err(WireError::os(Op::UringSqFull, Errno::BUSY));
        }
        loop {
            match self.ring.submit() {
                Ok(_) => return Ok(()),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => return Err(WireError::os(Op::UringEnter, errno_of(&e))),
            }
        }
    }

    #[inline]
    fn recv(&mut self) -> Result<u64, WireError> {
        loop {
            if let Some(cqe) = self.ring.completion().next() {
                if cqe.user_data() == SEND_SENTINEL || cqe.result() < 0 {
                    return Err(WireError::os(
                        Op::UringCqe,
                        crate::error::errno(cqe.result().saturating_neg()),
                    ));
                }
                return Ok(cqe.user_data());
            }
            if self.poll {
                std::hint::spin_loop();
            } else {
                match self.ring.submit_and_wait(1) {
                    Ok(_) => {}
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(WireError::os(Op::UringEnter, errno_of(&e))),
                }
            }
        }
    }
}

fn new_ring() -> Result<IoUring, Unavailable> {
    IoUring::new(RING_ENTRIES).map_err(|e| {
        let disabled = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled")
            .ok()
            .map(|s| format!(" (kernel.io_uring_disabled = {})", s.trim()))
            .unwrap_or_default();
        Unavailable(format!(
            "io_uring_setup failed: {e} (errno {}){disabled}",
            e.raw_os_error().unwrap_or(0)
        ))
    })
}

/// Whether this kernel lets us use MSG_RING: `Ok` or the reason it does not. Probed once.
pub(crate) fn availability() -> Result<(), Unavailable> {
    static PROBED: OnceLock<Result<(), Unavailable>> = OnceLock::new();
    PROBED
        .get_or_init(|| {
            let ring = new_ring()?;
            let mut probe = Probe::new();
            ring.submitter().register_probe(&mut probe).map_err(|e| {
                Unavailable(format!(
                    "IORING_REGISTER_PROBE failed: {e} (needs Linux 5.6+)"
                ))
            })?;
            if !probe.is_supported(opcode::MsgRingData::CODE) {
                return Err(Unavailable(
                    "kernel lacks IORING_OP_MSG_RING (needs Linux 5.18+)".to_string(),
                ));
            }
            if !ring.params().is_feature_skip_cqe_on_success() {
                return Err(Unavailable(
                    "kernel lacks IOSQE_CQE_SKIP_SUCCESS (needs Linux 5.17+)".to_string(),
                ));
            }
            Ok(())
        })
        .clone()
}

/// The `msg-ring` (`poll = false`) or `msg-ring-poll` pair.
pub(crate) fn pair(poll: bool) -> Result<(RingEnd, RingEnd), Unavailable> {
    availability()?;
    let a = new_ring()?;
    let b = new_ring()?;
    let dup = |r: &IoUring| {
        // SAFETY: the ring's fd is open for as long as `r` lives, which covers this call.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(r.as_raw_fd()) };
        rustix::io::fcntl_dupfd_cloexec(fd.as_fd(), 0)
            .map_err(|e| Unavailable(format!("dup of a ring fd failed: {e}")))
    };
    let to_b = dup(&b)?;
    let to_a = dup(&a)?;
    Ok((
        RingEnd {
            ring: a,
            peer: to_b,
            poll,
        },
        RingEnd {
            ring: b,
            peer: to_a,
            poll,
        },
    ))
}
