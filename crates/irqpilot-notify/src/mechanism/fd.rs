//! File-descriptor mechanisms: eventfd (blocking and busy-polled), pipe and unix socketpair.
//! Every one carries the 8-byte token itself; one object per direction (two eventfds, two pipes;
//! a stream socketpair has a separate receive queue per direction).

use super::{Endpoint, Unavailable};
use crate::error::{Op, WireError};
use crate::shm::{ProcessShareable, SharedMapping};
use crossbeam_utils::CachePadded;
use rustix::event::{EventfdFlags, eventfd};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketFlags, SocketType, socketpair};
use rustix::pipe::{PipeFlags, pipe_with};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One side: write the token to `tx`, read the peer's from `rx`.
pub(crate) struct FdEnd {
    tx: Arc<OwnedFd>,
    rx: Arc<OwnedFd>,
    /// `rx` is non-blocking and `recv` busy-polls it.
    poll: bool,
}

impl Endpoint for FdEnd {
    #[inline]
    fn send(&mut self, token: u64) -> Result<(), WireError> {
        let buf = token.to_ne_bytes();
        loop {
            match rustix::io::write(&*self.tx, &buf) {
                Ok(8) => return Ok(()),
                Ok(n) => {
                    return Err(WireError::Short {
                        op: Op::Write,
                        bytes: n,
                    });
                }
                Err(Errno::INTR) => continue,
                Err(e) => return Err(WireError::os(Op::Write, e)),
            }
        }
    }

    #[inline]
    fn recv(&mut self) -> Result<u64, WireError> {
        let mut buf = [0u8; 8];
        let mut have = 0usize;
        while have < 8 {
            match rustix::io::read(&*self.rx, &mut buf[have..]) {
                Ok(0) => {
                    return Err(WireError::Short {
                        op: Op::Read,
                        bytes: have,
                    });
                }
                Ok(n) => have += n,
                Err(Errno::AGAIN) if self.poll => std::hint::spin_loop(),
                Err(Errno::INTR) => {}
                Err(e) => return Err(WireError::os(Op::Read, e)),
            }
        }
        Ok(u64::from_ne_bytes(buf))
    }
}

fn write_u64(fd: &OwnedFd, v: u64) -> Result<(), WireError> {
    loop {
        match rustix::io::write(fd, &v.to_ne_bytes()) {
            Ok(8) => return Ok(()),
            Ok(n) => {
                return Err(WireError::Short {
                    op: Op::Write,
                    bytes: n,
                });
            }
            Err(Errno::INTR) => continue,
            Err(e) => return Err(WireError::os(Op::Write, e)),
        }
    }
}

fn read_u64(fd: &OwnedFd) -> Result<u64, WireError> {
    let mut buf = [0u8; 8];
    loop {
        match rustix::io::read(fd, &mut buf) {
            Ok(8) => return Ok(u64::from_ne_bytes(buf)),
            Ok(n) => {
                return Err(WireError::Short {
                    op: Op::Read,
                    bytes: n,
                });
            }
            Err(Errno::INTR) => continue,
            Err(e) => return Err(WireError::os(Op::Read, e)),
        }
    }
}

struct Slots {
    slots: [CachePadded<AtomicU64>; 2],
}

// SAFETY: atomics only.
unsafe impl ProcessShareable for Slots {}

/// The seed benchmark's `eventfd-bi`, reproduced to measure its flaw: **one** blocking eventfd
/// for both directions. The pinger posts 1, the ponger posts 2; a side that reads the value
/// meant for the other writes it back and reads again, so both sides race on one counter (and a
/// sender can read back its own message). The token travels in a shared slot.
pub(crate) struct SharedEventfdEnd {
    fd: Arc<OwnedFd>,
    slots: Arc<SharedMapping<Slots>>,
    me: usize,
}

impl SharedEventfdEnd {
    fn value_for(side: usize) -> u64 {
        side as u64 + 1
    }
}

impl Endpoint for SharedEventfdEnd {
    fn send(&mut self, token: u64) -> Result<(), WireError> {
        let peer = 1 - self.me;
        self.slots.slots[peer].store(token, Ordering::Release);
        write_u64(&self.fd, Self::value_for(peer))
    }

    fn recv(&mut self) -> Result<u64, WireError> {
        let mine = Self::value_for(self.me);
        loop {
            let v = read_u64(&self.fd)?;
            if v == mine {
                return Ok(self.slots.slots[self.me].load(Ordering::Acquire));
            }
            // Not ours: put it back for the other side (what eventfd_wait() in the seed does).
            write_u64(&self.fd, v)?;
        }
    }
}

/// The `eventfd-shared` pair (one eventfd, both directions).
pub(crate) fn shared_eventfd_pair() -> Result<(SharedEventfdEnd, SharedEventfdEnd), Unavailable> {
    let fd = Arc::new(eventfd(0, EventfdFlags::CLOEXEC).map_err(|e| unavailable("eventfd", e))?);
    let slots = Arc::new(
        SharedMapping::new(Slots {
            slots: std::array::from_fn(|_| CachePadded::new(AtomicU64::new(0))),
        })
        .map_err(|e| Unavailable(e.to_string()))?,
    );
    Ok((
        SharedEventfdEnd {
            fd: Arc::clone(&fd),
            slots: Arc::clone(&slots),
            me: 0,
        },
        SharedEventfdEnd { fd, slots, me: 1 },
    ))
}

fn unavailable(what: &str, e: Errno) -> Unavailable {
    Unavailable(format!("{what} failed: {e} (errno {})", e.raw_os_error()))
}

/// Two eventfds (`EFD_NONBLOCK` and a polling receiver when `poll`).
pub(crate) fn eventfd_pair(poll: bool) -> Result<(FdEnd, FdEnd), Unavailable> {
    let flags = if poll {
        EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK
    } else {
        EventfdFlags::CLOEXEC
    };
    let ab = Arc::new(eventfd(0, flags).map_err(|e| unavailable("eventfd", e))?);
    let ba = Arc::new(eventfd(0, flags).map_err(|e| unavailable("eventfd", e))?);
    Ok((
        FdEnd {
            tx: Arc::clone(&ab),
            rx: Arc::clone(&ba),
            poll,
        },
        FdEnd {
            tx: ba,
            rx: ab,
            poll,
        },
    ))
}

/// Two pipes.
pub(crate) fn pipe_pair() -> Result<(FdEnd, FdEnd), Unavailable> {
    let (ab_r, ab_w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| unavailable("pipe2", e))?;
    let (ba_r, ba_w) = pipe_with(PipeFlags::CLOEXEC).map_err(|e| unavailable("pipe2", e))?;
    Ok((
        FdEnd {
            tx: Arc::new(ab_w),
            rx: Arc::new(ba_r),
            poll: false,
        },
        FdEnd {
            tx: Arc::new(ba_w),
            rx: Arc::new(ab_r),
            poll: false,
        },
    ))
}

/// One `AF_UNIX` `SOCK_STREAM` socketpair; each side reads and writes its own end.
pub(crate) fn socketpair_pair() -> Result<(FdEnd, FdEnd), Unavailable> {
    let (a, b) = socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| unavailable("socketpair", e))?;
    let (a, b) = (Arc::new(a), Arc::new(b));
    Ok((
        FdEnd {
            tx: Arc::clone(&a),
            rx: a,
            poll: false,
        },
        FdEnd {
            tx: Arc::clone(&b),
            rx: b,
            poll: false,
        },
    ))
}
