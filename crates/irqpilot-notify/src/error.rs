//! Typed errors: what failed, on which CPU or mechanism, with the kernel's errno.

use irqpilot_core::CpuId;
use rustix::io::Errno;
use std::fmt;

/// The system call or step a hot-path error came from. `Copy` and allocation-free, so it can be
/// produced inside a timed loop or a forked child and carried back through shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    /// `read(2)` on an eventfd, pipe or socket.
    Read = 1,
    /// `write(2)` on an eventfd, pipe or socket.
    Write,
    /// `futex(FUTEX_WAIT)`.
    FutexWait,
    /// `futex(FUTEX_WAKE)`.
    FutexWake,
    /// `tgkill(2)`.
    Tgkill,
    /// `sigwaitinfo(2)`.
    Sigwaitinfo,
    /// `pthread_sigmask(3)`.
    Sigmask,
    /// `io_uring_enter(2)` (submit or wait).
    UringEnter,
    /// An io_uring completion carried an error.
    UringCqe,
    /// The io_uring submission queue was full.
    UringSqFull,
    /// `sched_setaffinity(2)`.
    SetAffinity,
    /// `getrusage(2)`.
    Getrusage,
    /// `clock_nanosleep(2)`.
    Sleep,
    /// `prctl(2)`.
    Prctl,
}

impl Op {
    /// Every variant, for decoding the byte written by a child process.
    const ALL: [Op; 14] = [
        Op::Read,
        Op::Write,
        Op::FutexWait,
        Op::FutexWake,
        Op::Tgkill,
        Op::Sigwaitinfo,
        Op::Sigmask,
        Op::UringEnter,
        Op::UringCqe,
        Op::UringSqFull,
        Op::SetAffinity,
        Op::Getrusage,
        Op::Sleep,
        Op::Prctl,
    ];

    /// The operation's name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::FutexWait => "futex wait",
            Op::FutexWake => "futex wake",
            Op::Tgkill => "tgkill",
            Op::Sigwaitinfo => "sigwaitinfo",
            Op::Sigmask => "pthread_sigmask",
            Op::UringEnter => "io_uring_enter",
            Op::UringCqe => "io_uring completion",
            Op::UringSqFull => "io_uring submission queue full",
            Op::SetAffinity => "sched_setaffinity",
            Op::Getrusage => "getrusage",
            Op::Sleep => "clock_nanosleep",
            Op::Prctl => "prctl",
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<Op> {
        Op::ALL.iter().copied().find(|op| *op as u8 == code)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A failure inside a ping-pong loop. `Copy`, no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// A system call failed.
    #[error("{op} failed: {errno}")]
    Os {
        /// What was called.
        op: Op,
        /// The kernel's answer.
        errno: Errno,
    },
    /// A read or write moved fewer bytes than the 8-byte token.
    #[error("{op} moved {bytes} of 8 bytes")]
    Short {
        /// What was called.
        op: Op,
        /// Bytes moved.
        bytes: usize,
    },
    /// The reply did not carry the token that was sent: a lost, duplicated or reordered
    /// notification.
    #[error("sequence broken: expected token {expected}, received {received}")]
    Sequence {
        /// The token sent.
        expected: u64,
        /// The token received.
        received: u64,
    },
}

/// An `Errno` from a raw positive errno value; values outside 1..=4095 (which rustix rejects)
/// become `EIO`.
pub fn errno(raw: i32) -> Errno {
    if (1..=4095).contains(&raw) {
        Errno::from_raw_os_error(raw)
    } else {
        Errno::IO
    }
}

impl WireError {
    pub(crate) fn os(op: Op, errno: Errno) -> WireError {
        WireError::Os { op, errno }
    }
}

/// Errors of the [`Notifier`](crate::Notifier) / [`Waiter`](crate::Waiter) API.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// A [`NotifyCell`](crate::NotifyCell) has at most one waiter at a time.
    #[error("this notify cell already has a waiter")]
    WaiterTaken,
    /// Mapping shared memory failed.
    #[error("mmap of {bytes} bytes of shared memory failed: {errno}")]
    Map {
        /// Requested size.
        bytes: usize,
        /// The kernel's answer.
        errno: Errno,
    },
    /// A futex call failed in a way the protocol does not expect.
    #[error("{op} failed: {errno}")]
    Futex {
        /// What was called.
        op: Op,
        /// The kernel's answer.
        errno: Errno,
    },
}

/// Why one measurement could not produce numbers although the mechanism is available.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Pinning a side to its CPU failed (CPU offline or outside this process's cpuset).
    #[error("pinning to CPU {cpu} failed: {errno}")]
    Pin {
        /// The CPU asked for.
        cpu: CpuId,
        /// The kernel's answer.
        errno: Errno,
    },
    /// The ping-pong loop failed on one side.
    #[error("{side} side: {source}")]
    Wire {
        /// `pinger` or `ponger`.
        side: &'static str,
        /// What went wrong.
        #[source]
        source: WireError,
    },
    /// Neither side finished in time (a lost notification or a hung mechanism).
    #[error("no result after {after_ms} ms (lost notification or hung mechanism)")]
    TimedOut {
        /// The limit that passed.
        after_ms: u64,
    },
    /// A side thread panicked or a side process died without reporting.
    #[error("{side} side died: {detail}")]
    Died {
        /// `pinger` or `ponger`.
        side: &'static str,
        /// Exit status or panic note.
        detail: String,
    },
    /// Setting up shared memory, threads or processes failed.
    #[error("{what} failed: {errno}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The kernel's answer.
        errno: Errno,
    },
    /// Spawning a thread failed.
    #[error("spawning a thread failed: {0}")]
    Spawn(#[source] std::io::Error),
}
